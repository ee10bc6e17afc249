/**
 * `attnlab sparse`: the training-free sparse attention methods of `@attnlab/sparse-attention`.
 *
 * - `sparse apply`: run one method on q/k/v from a safetensors file (one sequence, no model) and
 *   write its output and mask of computed pairs, with both sparsities.
 * - `sparse compare`: run methods at target sparsities on a real model and prompt and measure
 *   top-1 agreement and KL(dense || sparse) of the next-token distributions.
 */
import { InvalidArgumentError, Option, type Command } from 'commander'
import * as tf from '@tensorflow/tfjs-core'
import { SafetensorsError, safetensorsToFloat32, type SafetensorsFile } from '@attnlab/core'
import { readSafetensorsFile, writeFileAtomic, writeSafetensorsFile } from '@attnlab/core/node'
import {
  SPARSE_METHODS,
  applyDecode,
  applyPrefill,
  blockSparseTopKForSparsity,
  combine,
  createKernel,
  dense,
  questBudgetForSparsity,
  snapKVCapacityForSparsity,
  type SparseAttentionKernel,
  type SparseMethodName,
} from '@attnlab/sparse-attention'
import { KVCache, generate, loadModel, type AttentionReport, type Transformer } from '@attnlab/transformer'
import { UsageError } from '../errors.ts'
import { renderSvg, type PlotSpec } from '../plot.ts'
import {
  activateBackend,
  backendOption,
  checkOutputFile,
  forceOption,
  intParser,
  MODEL_PATH_HELP,
  numberParser,
} from '../options.ts'

/** A method flag: its commander spelling, the config key it sets, and the methods it applies to. */
interface MethodFlag {
  readonly flag: string
  readonly key: string
  readonly methods: readonly SparseMethodName[]
  readonly description: string
  readonly parse?: (value: string) => unknown
}

const METHOD_FLAGS: readonly MethodFlag[] = [
  { flag: '--vertical-size <n>', key: 'verticalSize', methods: ['vertical-slash'], description: 'vertical lines per head V (512)', parse: intParser('--vertical-size', 1) },
  { flag: '--slash-size <n>', key: 'slashSize', methods: ['vertical-slash'], description: 'slash lines per head S (512)', parse: intParser('--slash-size', 1) },
  {
    flag: '--window <n>',
    key: 'window',
    methods: ['vertical-slash', 'flexprefill', 'snapkv', 'ada-snapkv'],
    description: 'estimation window: last W queries (VS 256, FlexPrefill 512, SnapKV 256)',
    parse: intParser('--window', 1),
  },
  { flag: '--sinks <n>', key: 'sinks', methods: ['vertical-slash', 'flexprefill'], description: 'forced sink columns (4)', parse: intParser('--sinks', 0) },
  {
    flag: '--local <n>',
    key: 'local',
    methods: ['vertical-slash', 'flexprefill', 'snapkv', 'ada-snapkv'],
    description: 'forced local distances (VS/FlexPrefill 64) or recent tokens (SnapKV 128)',
    parse: intParser('--local', 0),
  },
  { flag: '--alpha <x>', key: 'alpha', methods: ['flexprefill'], description: 'FlexPrefill coverage alpha in [0, 1] (0.65)', parse: numberParser('--alpha', 0, 1) },
  { flag: '--min-budget <n>', key: 'minBudget', methods: ['flexprefill'], description: 'FlexPrefill minimum budget in tokens (512)', parse: intParser('--min-budget', 1) },
  {
    flag: '--block-size <n>',
    key: 'blockSize',
    methods: ['block-sparse', 'flexprefill'],
    description: 'Block-Sparse block size B (16) or FlexPrefill block size for tau > 0 (128)',
    parse: intParser('--block-size', 1),
  },
  { flag: '--top-k <n>', key: 'topK', methods: ['block-sparse'], description: 'Block-Sparse blocks per query block K (64)', parse: intParser('--top-k', 1) },
  { flag: '--capacity <n>', key: 'capacity', methods: ['snapkv', 'ada-snapkv'], description: 'prompt tokens kept per KV head C (1024)', parse: intParser('--capacity', 1) },
  { flag: '--kernel-size <n>', key: 'kernelSize', methods: ['snapkv', 'ada-snapkv'], description: 'pooling kernel, odd (21)', parse: intParser('--kernel-size', 1) },
  { flag: '--prefix <n>', key: 'prefix', methods: ['snapkv', 'ada-snapkv'], description: 'forced first tokens (4)', parse: intParser('--prefix', 0) },
  { flag: '--min-head-ratio <x>', key: 'minHeadRatio', methods: ['ada-snapkv'], description: 'Ada-SnapKV per-head floor ratio (0.2)', parse: numberParser('--min-head-ratio', 0, 1) },
  { flag: '--token-budget <n>', key: 'tokenBudget', methods: ['quest'], description: 'Quest tokens read per step (1024)', parse: intParser('--token-budget', 1) },
  { flag: '--page-size <n>', key: 'pageSize', methods: ['quest'], description: 'Quest page size (16)', parse: intParser('--page-size', 1) },
  { flag: '--tau <x>', key: 'tau', methods: ['flexprefill'], description: 'FlexPrefill JS-divergence threshold; 0 = token level as evaluated (0)', parse: numberParser('--tau', 0) },
  {
    flag: '--mask-mode <mode>',
    key: 'maskMode',
    methods: ['vertical-slash', 'flexprefill'],
    description: "'kernel' (64x64 blocks, as the study ran) or 'exact' lines",
    parse: (value: string) => {
      if (value !== 'kernel' && value !== 'exact') throw new InvalidArgumentError(`--mask-mode must be 'kernel' or 'exact', got '${value}'`)
      return value
    },
  },
  { flag: '--per-head-pages', key: 'sharePages', methods: ['quest'], description: 'Quest: select pages per query head instead of per GQA group' },
]

/** The commander attribute name of a flag (`--vertical-size <n>` -> `verticalSize`). */
function attributeOf(flag: string): string {
  const long = flag.split(' ')[0]?.replace(/^--/, '') ?? ''
  return long.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())
}

interface ApplyOptions {
  method: SparseMethodName
  qkv: string
  out: string
  force?: boolean
  phase?: 'prefill' | 'decode'
  scale?: number
  backend?: string
  json?: boolean
  [flag: string]: unknown
}

/** Builds the kernel from the method and its flags; a flag of another method is a usage error. */
export function kernelFromFlags(method: SparseMethodName, options: Record<string, unknown>): SparseAttentionKernel {
  return attentionKernelFromFlags(method, options)
}

/**
 * Renamed method flags, for commands whose own flags collide (e.g. `attnlab generate` has a
 * sampling `--top-k`: pass `{ '--top-k': '--block-top-k' }`).
 */
export type FlagRenames = Readonly<Record<string, string>>

/** The spelling of a method flag after renames, e.g. `--block-top-k <n>`. */
function spelled(f: MethodFlag, renames: FlagRenames): string {
  const [long, ...rest] = f.flag.split(' ')
  const name = renames[long as string] ?? (long as string)
  return [name, ...rest].join(' ')
}

/**
 * Adds the method flags (`--vertical-size`, `--capacity`, ...) to a command, for commands that
 * take `--attention METHOD` (e.g. `attnlab generate`). Pair with {@link attentionKernelFromFlags}
 * (with the same `renames`).
 */
export function addMethodFlags(command: Command, renames: FlagRenames = {}): Command {
  for (const f of METHOD_FLAGS) {
    const flag = spelled(f, renames)
    const name = flag.split(' ')[0] as string
    if (f.parse) {
      const parse = f.parse
      command.option(flag, f.description, ((value: string) => {
        try {
          return parse(value)
        } catch (error) {
          if (error instanceof InvalidArgumentError && name !== f.flag.split(' ')[0]) {
            throw new InvalidArgumentError(error.message.replace(f.flag.split(' ')[0] as string, name))
          }
          throw error
        }
      }) as (value: string, previous: unknown) => unknown)
    } else command.option(flag, f.description)
  }
  return command
}

/**
 * Builds the attention kernel named by `spec` from parsed flags: a method name
 * (`vertical-slash`, `quest`, ...) or a prefill and a decode method joined by `+`
 * (`vertical-slash+quest`, run with `combine`). Each method takes the flags that apply to it; a
 * flag that applies to none of them is a usage error. `size`, when given, turns each method's
 * flag values into its full configuration (e.g. {@link sizedConfig}, sizes for the prompt at hand);
 * without it the method's own defaults fill in.
 *
 * @throws UsageError for an unknown method or a flag of another method; ConfigError (from the
 *   package) for invalid values
 */
export function attentionKernelFromFlags(
  spec: string,
  options: Record<string, unknown>,
  renames: FlagRenames = {},
  size?: (method: SparseMethodName, flags: Record<string, unknown>) => Record<string, unknown>,
): SparseAttentionKernel {
  const methods = spec.split('+').map((m) => m.trim())
  const known = Object.keys(SPARSE_METHODS)
  for (const m of methods) {
    if (!known.includes(m)) throw new UsageError(`unknown attention method '${m}' (expected one of ${known.join(', ')}, or prefill+decode)`)
  }
  if (methods.length > 2) throw new UsageError(`--attention takes one method or prefill+decode, got '${spec}'`)
  const names = methods as SparseMethodName[]
  const overrides = names.map(() => ({}) as Record<string, unknown>)
  for (const f of METHOD_FLAGS) {
    const value = options[attributeOf(spelled(f, renames))]
    if (value === undefined) continue
    const flag = spelled(f, renames).split(' ')[0] as string
    const users = names.map((m, i) => (f.methods.includes(m) ? i : -1)).filter((i) => i >= 0)
    if (users.length === 0) {
      const own = [...new Set(METHOD_FLAGS.filter((g) => g.methods.some((m) => names.includes(m))).map((g) => spelled(g, renames).split(' ')[0]))]
      throw new UsageError(`${flag} does not apply to ${spec}${own.length > 0 ? ` (its flags: ${own.join(', ')})` : ' (it has no parameters)'}`)
    }
    for (const i of users) (overrides[i] as Record<string, unknown>)[f.key] = f.key === 'sharePages' ? false : value
  }
  const kernels = names.map((m, i) => {
    const flags = overrides[i] as Record<string, unknown>
    return createKernel(m, (size === undefined ? flags : size(m, flags)) as never)
  })
  return kernels.length === 1 ? (kernels[0] as SparseAttentionKernel) : combine(kernels[0] as SparseAttentionKernel, kernels[1] as SparseAttentionKernel)
}

/** The q/k/v of one sequence read from a file, validated. */
export interface QkvArrays {
  readonly nHeads: number
  readonly nKvHeads: number
  readonly length: number
  readonly dHead: number
  readonly dValue: number
  readonly q: Float32Array
  readonly k: Float32Array
  readonly v: Float32Array
  readonly step: { readonly qNew: Float32Array; readonly kNew: Float32Array; readonly vNew: Float32Array } | null
}

function tensor(file: SafetensorsFile, name: string, rank: number, meaning: string): { data: Float32Array; shape: readonly number[] } {
  const entry = file.tensors.get(name)
  if (entry === undefined) {
    throw new SafetensorsError(`tensor '${name}' is missing: expected ${meaning} (tensors present: ${[...file.tensors.keys()].join(', ') || 'none'})`, name)
  }
  if (entry.dtype !== 'F32') throw new SafetensorsError(`tensor '${name}' has dtype ${entry.dtype} but F32 is expected`, name)
  if (entry.shape.length !== rank) {
    throw new SafetensorsError(`tensor '${name}' has shape [${entry.shape.join(', ')}] but ${meaning} is expected`, name)
  }
  const data = safetensorsToFloat32(entry)
  const bad = data.findIndex((x) => !Number.isFinite(x))
  if (bad >= 0) throw new SafetensorsError(`tensor '${name}' holds a non-finite value (${data[bad]}) at flat index ${bad}`, name, { index: bad })
  return { data, shape: entry.shape }
}

function expectDim(name: string, shape: readonly number[], axis: number, expected: number, what: string): void {
  if (shape[axis] !== expected) {
    throw new SafetensorsError(`tensor '${name}' has shape [${shape.join(', ')}]: dimension ${axis} must be ${expected} (${what})`, name)
  }
}

/**
 * Validates and reads `q [H, T, dHead]`, `k [Hkv, T, dHead]`, `v [Hkv, T, dValue]` (F32), and for
 * decode `q_new [H, dHead]`, `k_new [Hkv, dHead]`, `v_new [Hkv, dValue]`.
 *
 * @throws SafetensorsError naming the tensor (also for NaN/infinite values)
 */
export function readQkv(file: SafetensorsFile, decode: boolean): QkvArrays {
  const q = tensor(file, 'q', 3, 'float32 q [nHeads, T, dHead]')
  const k = tensor(file, 'k', 3, 'float32 k [nKvHeads, T, dHead]')
  const v = tensor(file, 'v', 3, 'float32 v [nKvHeads, T, dValue]')
  const [nHeads, length, dHead] = q.shape as [number, number, number]
  const nKvHeads = k.shape[0] as number
  if (length < 1) throw new SafetensorsError(`tensor 'q' has shape [${q.shape.join(', ')}]: T must be at least 1`, 'q')
  expectDim('k', k.shape, 1, length, "T, as in 'q'")
  expectDim('k', k.shape, 2, dHead, "dHead, as in 'q'")
  expectDim('v', v.shape, 0, nKvHeads, "nKvHeads, as in 'k'")
  expectDim('v', v.shape, 1, length, "T, as in 'q'")
  if (nKvHeads < 1 || nHeads % nKvHeads !== 0) {
    throw new SafetensorsError(`tensor 'k' has ${nKvHeads} KV heads but q's ${nHeads} heads must be a multiple of it (grouped-query attention)`, 'k')
  }
  const dValue = v.shape[2] as number
  let step: QkvArrays['step'] = null
  if (decode) {
    const qNew = tensor(file, 'q_new', 2, 'float32 q_new [nHeads, dHead] for a decode method')
    const kNew = tensor(file, 'k_new', 2, 'float32 k_new [nKvHeads, dHead] for a decode method')
    const vNew = tensor(file, 'v_new', 2, 'float32 v_new [nKvHeads, dValue] for a decode method')
    expectDim('q_new', qNew.shape, 0, nHeads, "nHeads, as in 'q'")
    expectDim('q_new', qNew.shape, 1, dHead, "dHead, as in 'q'")
    expectDim('k_new', kNew.shape, 0, nKvHeads, "nKvHeads, as in 'k'")
    expectDim('k_new', kNew.shape, 1, dHead, "dHead, as in 'q'")
    expectDim('v_new', vNew.shape, 0, nKvHeads, "nKvHeads, as in 'k'")
    expectDim('v_new', vNew.shape, 1, dValue, "dValue, as in 'v'")
    step = { qNew: qNew.data, kNew: kNew.data, vNew: vNew.data }
  }
  return { nHeads, nKvHeads, length, dHead, dValue, q: q.data, k: k.data, v: v.data, step }
}

function phaseFor(kernel: SparseAttentionKernel, requested: 'prefill' | 'decode' | undefined, file: SafetensorsFile): 'prefill' | 'decode' {
  const own = SPARSE_METHODS[kernel.method as SparseMethodName].phase
  if (own !== null) {
    if (requested !== undefined && requested !== own) throw new UsageError(`--phase ${requested} does not fit ${kernel.method}, a ${own} method`)
    return own
  }
  return requested ?? (file.tensors.has('q_new') ? 'decode' : 'prefill')
}

/** Runs `sparse apply`; returns the JSON report. */
export async function runApply(options: ApplyOptions): Promise<Record<string, unknown>> {
  const kernel = kernelFromFlags(options.method, options)
  checkOutputFile('--out', options.out, undefined, options.force)
  const file = await readSafetensorsFile(options.qkv)
  const phase = phaseFor(kernel, options.phase, file)
  const input = readQkv(file, phase === 'decode')
  const scale = options.scale ?? 1 / Math.sqrt(input.dHead)
  await activateBackend(options.backend)
  const qkv = {
    q: tf.tensor3d(input.q, [input.nHeads, input.length, input.dHead]),
    k: tf.tensor3d(input.k, [input.nKvHeads, input.length, input.dHead]),
    v: tf.tensor3d(input.v, [input.nKvHeads, input.length, input.dValue]),
  }
  const step =
    input.step === null
      ? null
      : {
          qNew: tf.tensor2d(input.step.qNew, [input.nHeads, input.dHead]),
          kNew: tf.tensor2d(input.step.kNew, [input.nKvHeads, input.dHead]),
          vNew: tf.tensor2d(input.step.vNew, [input.nKvHeads, input.dValue]),
        }
  let result
  try {
    result = step === null ? applyPrefill(kernel, qkv, { scale }) : applyDecode(kernel, qkv, step, { scale })
  } finally {
    tf.dispose([qkv.q, qkv.k, qkv.v, ...(step === null ? [] : [step.qNew, step.kNew, step.vNew])])
  }
  const out = result.output.dataSync() as Float32Array
  const outShape = result.output.shape
  result.output.dispose()
  const report = {
    method: kernel.method,
    phase,
    config: kernel.config,
    shape: { nHeads: input.nHeads, nKvHeads: input.nKvHeads, T: input.length, dHead: input.dHead, dValue: input.dValue },
    scale,
    sparsity: { ...result.sparsity, reportedClamped: clampReportedSparsity(result.sparsity.reported).clamped, budgetExceedsPrompt: clampReportedSparsity(result.sparsity.reported).budgetExceedsPrompt },
    headSparsity: { exact: Array.from(result.headSparsity.exact), reported: Array.from(result.headSparsity.reported) },
    extra: result.extra,
    out: options.out,
    outShape,
    maskShape: result.maskShape,
  }
  await writeSafetensorsFile(
    options.out,
    {
      out: { dtype: 'F32', shape: outShape, data: out },
      mask: { dtype: 'U8', shape: result.maskShape, data: result.mask },
    },
    {
      method: kernel.method,
      phase,
      config: JSON.stringify(kernel.config),
      exactSparsity: String(result.sparsity.exact),
      reportedSparsity: String(result.sparsity.reported),
    },
  )
  return report
}

/**
 * The study's reported sparsity as the CLI prints it. Vertical-Slash and FlexPrefill count whole
 * 64x64 kernel blocks ([v2] A.1.2), so when their budget exceeds the causal pairs of a short
 * prompt the study's formula goes below 0: the method keeps every pair. The raw value stays in
 * the JSON (`reported` / `reportedSparsity`); the text shows it clamped at 0 with that note.
 *
 * @param reported - the study's reported sparsity (may be negative)
 * @returns the value clamped at 0, and whether the budget exceeds the prompt (`reported < 0`)
 */
export function clampReportedSparsity(reported: number): { readonly clamped: number; readonly budgetExceedsPrompt: boolean } {
  return { clamped: Math.max(0, reported), budgetExceedsPrompt: reported < 0 }
}

/**
 * How far below its target sparsity a `sparse compare` row may land (in both accountings, exact
 * and clamped reported) before it counts as not reaching the target (`targetReached: false`, and
 * a warning naming the achieved value).
 */
export const TARGET_SPARSITY_TOLERANCE = 0.02

/**
 * Whether a method reached its target sparsity: the exact or the (clamped) reported sparsity
 * comes within {@link TARGET_SPARSITY_TOLERANCE} of it.
 */
export function targetReached(target: number, exact: number, reportedClamped: number): boolean {
  return Math.max(exact, reportedClamped) >= target - TARGET_SPARSITY_TOLERANCE
}

/** The warning printed when a method does not reach its target sparsity on a prompt of `promptTokens` tokens. */
export function targetWarning(
  method: string,
  target: number,
  exact: number,
  reportedClamped: number,
  promptTokens: number,
): string {
  return (
    `warning: ${method} does not reach target sparsity ${target.toFixed(2)} at ${promptTokens} tokens: ` +
    `achieved ${exact.toFixed(3)} exact, ${reportedClamped.toFixed(3)} reported`
  )
}

// ------------------------------------------------------------------ sparse compare

/** One method at one target sparsity, compared with dense attention on the same model and prompt. */
export interface CompareRow {
  /** The method. */
  readonly method: SparseMethodName
  /** The phase it sparsifies (prefill methods: every prompt position; decode methods: teacher-forced decode steps). */
  readonly phase: 'prefill' | 'decode'
  /** The sparsity asked for. */
  readonly targetSparsity: number
  /** The configuration that ran (budget set for the target, see {@link budgetFor}). */
  readonly config: unknown
  /** Exact sparsity from the masks, mean over layers (and decode steps). */
  readonly exactSparsity: number
  /** The study's reported sparsity, mean over layers (and decode steps); below 0 when the budget exceeds the prompt (see {@link clampReportedSparsity}). */
  readonly reportedSparsity: number
  /** `reportedSparsity` clamped at 0 (what the text table shows). */
  readonly reportedSparsityClamped: number
  /** Whether the study's accounting of the budget exceeds the prompt's causal pairs (`reportedSparsity < 0`: it keeps everything). */
  readonly budgetExceedsPrompt: boolean
  /** Whether the exact or (clamped) reported sparsity comes within {@link TARGET_SPARSITY_TOLERANCE} of the target; false when the method cannot reach it at this length. */
  readonly targetReached: boolean
  /** Fraction of compared positions where the sparse top-1 token equals the dense one. */
  readonly top1Agreement: number
  /** Mean KL(dense || sparse) of the next-token distributions, nats. */
  readonly klDenseSparse: number
  /** Number of next-token distributions compared. */
  readonly positions: number
}

/** Options of {@link compareMethods}. */
export interface CompareOptions {
  /** Methods to compare (dense is the reference and is skipped if listed). */
  readonly methods: readonly SparseMethodName[]
  /** Target sparsities in [0, 1). */
  readonly sparsities: readonly number[]
  /** Teacher-forced decode steps for decode methods (clamped to the context left). */
  readonly decodeSteps: number
  /** User method flags (override the budget rules' auxiliary sizes). */
  readonly flags?: Readonly<Record<string, unknown>>
}

function oddAtLeastOne(x: number): number {
  const r = Math.max(1, Math.round(x))
  return r % 2 === 1 ? r : r + 1
}

/**
 * The configuration of `method` for a target sparsity on an `n`-token prompt. The study's sizes
 * are for 16K-128K tokens; for a prompt of `n` tokens the auxiliary sizes scale by `n / 16384`
 * (VS/FlexPrefill window 256 -> at least 16 queries, local 64 -> at least 1; SnapKV window 256,
 * local 128, kernel 21), and the budget follows the target: SnapKV/Ada-SnapKV `C = floor((1-s)n)`,
 * Quest `(1-s)n` in whole pages (pages of 16, 8 below 256 tokens, n/2 below 16), Block-Sparse `K` from the
 * analytic formula (B = 16, or 8 below 128 tokens). Vertical-Slash (`V = S`) and FlexPrefill
 * (`alpha`) are calibrated by bisection on the measured exact sparsity (`calibrate`). Flags given
 * by the user win over the rules. Exact-line masks are the default here (`maskMode: 'exact'`):
 * 64x64 kernel tiles are meaningless on prompts of a few hundred tokens.
 */
export function budgetFor(
  method: SparseMethodName,
  n: number,
  sparsity: number,
  flags: Readonly<Record<string, unknown>> = {},
): { config: Record<string, unknown>; calibrate: 'verticalSize' | 'alpha' | null } {
  const scale = n / 16384
  const user = (key: string): unknown => flags[key]
  const pick = <T>(key: string, fallback: T): T => (user(key) === undefined ? fallback : (user(key) as T))
  switch (method) {
    case 'dense':
      return { config: {}, calibrate: null }
    case 'vertical-slash': {
      const config = {
        window: pick('window', Math.min(n, Math.max(16, Math.round(256 * scale)))),
        local: pick('local', Math.max(1, Math.round(64 * scale))),
        sinks: pick('sinks', 4),
        maskMode: pick('maskMode', 'exact'),
      }
      return { config, calibrate: 'verticalSize' }
    }
    case 'flexprefill': {
      const local = pick('local', Math.max(1, Math.round(64 * scale)))
      const sinks = pick('sinks', 4)
      const config = {
        window: pick('window', Math.min(n, Math.max(16, Math.round(512 * scale)))),
        local,
        sinks,
        minBudget: pick('minBudget', Math.max(local, sinks, Math.round(512 * scale))),
        maskMode: pick('maskMode', 'exact'),
        ...(user('tau') === undefined ? {} : { tau: user('tau') }),
        ...(user('blockSize') === undefined ? {} : { blockSize: user('blockSize') }),
      }
      return { config, calibrate: 'alpha' }
    }
    case 'block-sparse': {
      const blockSize = pick('blockSize', n >= 128 ? 16 : 8)
      return { config: { blockSize, topK: pick('topK', Math.max(3, blockSparseTopKForSparsity(n, blockSize, sparsity))) }, calibrate: null }
    }
    case 'snapkv':
    case 'ada-snapkv': {
      const local = pick('local', Math.max(1, Math.round(128 * scale)))
      const prefix = pick('prefix', 4)
      const config: Record<string, unknown> = {
        window: pick('window', Math.min(n, Math.max(16, Math.round(256 * scale)))),
        local,
        prefix,
        kernelSize: pick('kernelSize', oddAtLeastOne(21 * scale)),
        capacity: pick('capacity', Math.max(local + prefix + 1, snapKVCapacityForSparsity(n, sparsity))),
      }
      if (method === 'ada-snapkv') config.minHeadRatio = pick('minHeadRatio', 0.2)
      return { config, calibrate: null }
    }
    case 'quest': {
      const pageSize = pick('pageSize', n >= 256 ? 16 : n >= 16 ? 8 : Math.max(1, n >> 1))
      const fit = Math.min(Math.max(pageSize, questBudgetForSparsity(n, sparsity, pageSize)), Math.floor(n / pageSize - 1) * pageSize)
      return {
        config: { pageSize, tokenBudget: pick('tokenBudget', Math.max(pageSize, fit)), ...(user('sharePages') === undefined ? {} : { sharePages: false }) },
        calibrate: null,
      }
    }
    default:
      throw new UsageError(`unknown method '${String(method)}'`)
  }
}

/**
 * Runs `method` sized for a target sparsity on an `n`-token prompt ({@link budgetFor}) and, for
 * Vertical-Slash (`V = S`) and FlexPrefill (`alpha`) without a user value, calibrates that size by
 * bisection on the exact sparsity each run measures: the smallest `V = S` whose exact sparsity is
 * at most the target, or its neighbour when nearer; for `alpha` up to 12 halvings. Shared by
 * `sparse compare` and `generate --attention`. Budget rules after the Sparse Frontier study
 * (arXiv 2504.17768), see {@link budgetFor}.
 *
 * @param method - the method
 * @param n - the prompt length (tokens)
 * @param target - the target sparsity in [0, 1)
 * @param flags - user values by config key (they win over the rules and are not calibrated)
 * @param run - runs the method with a full configuration and returns what it measured
 * @returns the run kept (the one nearest the target for calibrated methods, else the only one)
 */
export function calibratedRun<R extends { readonly exact: number }>(
  method: SparseMethodName,
  n: number,
  target: number,
  flags: Readonly<Record<string, unknown>>,
  run: (config: Record<string, unknown>) => R,
): R {
  const { config, calibrate } = budgetFor(method, n, target, flags)
  let best: R
  if (calibrate === 'verticalSize' && flags.verticalSize === undefined && flags.slashSize === undefined) {
    // smallest V = S whose exact sparsity is <= target (masks are nested in V), then the nearer neighbour
    const lowest = Math.max(config.sinks as number, config.local as number, 1)
    const at = new Map<number, R>()
    const measure = (v: number) => {
      if (!at.has(v)) at.set(v, run({ ...config, verticalSize: v, slashSize: v }))
      return at.get(v) as R
    }
    let lo = lowest
    let hi = n
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (measure(mid).exact > target) lo = mid + 1
      else hi = mid
    }
    best = measure(lo)
    if (lo > lowest && Math.abs(measure(lo - 1).exact - target) < Math.abs(best.exact - target)) best = measure(lo - 1)
  } else if (calibrate === 'alpha' && flags.alpha === undefined) {
    let lo = 0
    let hi = 1
    best = run({ ...config, alpha: 0 })
    for (let i = 0; i < 12 && best.exact > target; i++) {
      const mid = (lo + hi) / 2
      const r = run({ ...config, alpha: mid })
      if (Math.abs(r.exact - target) < Math.abs(best.exact - target)) best = r
      if (r.exact > target) lo = mid
      else hi = mid
    }
  } else {
    const sizes = {
      verticalSize: flags.verticalSize ?? flags.slashSize,
      slashSize: flags.slashSize ?? flags.verticalSize,
    }
    const extra = calibrate === 'verticalSize' ? sizes : calibrate === 'alpha' ? { alpha: flags.alpha } : {}
    best = run({ ...config, ...extra })
  }
  return best
}

/**
 * The configuration of `method` for `prompt` on `model` at a target sparsity, as `sparse compare`
 * sizes it ({@link budgetFor}; Vertical-Slash and FlexPrefill calibrated on the prompt's measured
 * exact sparsity, see {@link calibratedRun}). For `generate --attention`: the methods' own
 * defaults are the Sparse Frontier study's sizes for 16K+ token prompts (arXiv 2504.17768 [v2],
 * A.1; budgets for a sparsity as in its Table 3) and skip nothing on short prompts (Quest's even
 * refuses prompts under 1040 tokens).
 *
 * @param model - the model the prompt runs on (Vertical-Slash / FlexPrefill calibration runs
 *   its forward pass on the prompt; nothing else is computed)
 * @param prompt - the prompt's token ids; its length `n` sizes the budgets
 * @param method - the method to size
 * @param target - the target sparsity in [0, 1)
 * @param flags - user values by config key (they win over the rules)
 * @returns the full configuration for `createKernel(method, ...)`
 * @throws ConfigError (from the package) for invalid user values
 */
export function sizedConfig(
  model: Transformer,
  prompt: readonly number[],
  method: SparseMethodName,
  target: number,
  flags: Readonly<Record<string, unknown>> = {},
): Record<string, unknown> {
  const n = prompt.length
  const { config, calibrate } = budgetFor(method, n, target, flags)
  if (calibrate === null) return { ...config, ...flags }
  const run = (config: Record<string, unknown>) => {
    const reports: AttentionReport[] = []
    const kernel = createKernel(method, config as never)
    model.forward([[...prompt]], { attention: kernel, attentionReports: reports }).dispose()
    return { config, exact: meanExtra(reports, 'exactSparsity') }
  }
  return { ...calibratedRun(method, n, target, flags, run).config, ...flags }
}

/** Log-softmax of each row of `[rows, vocab]` logits, float64. */
function logSoftmaxRows(logits: Float32Array, rows: number, vocab: number): Float64Array {
  const out = new Float64Array(rows * vocab)
  for (let r = 0; r < rows; r++) {
    let max = -Infinity
    for (let v = 0; v < vocab; v++) max = Math.max(max, logits[r * vocab + v] as number)
    let sum = 0
    for (let v = 0; v < vocab; v++) sum += Math.exp((logits[r * vocab + v] as number) - max)
    const lse = max + Math.log(sum)
    for (let v = 0; v < vocab; v++) out[r * vocab + v] = (logits[r * vocab + v] as number) - lse
  }
  return out
}

/** Mean KL(p || q) (nats) and top-1 agreement between two sets of log-distributions `[rows, vocab]`. */
export function compareDistributions(denseLog: Float64Array, sparseLog: Float64Array, rows: number, vocab: number): { kl: number; top1: number } {
  let kl = 0
  let agree = 0
  for (let r = 0; r < rows; r++) {
    let rowKl = 0
    let bestDense = 0
    let bestSparse = 0
    for (let v = 0; v < vocab; v++) {
      const lp = denseLog[r * vocab + v] as number
      const lq = sparseLog[r * vocab + v] as number
      if (lp > -Infinity) rowKl += Math.exp(lp) * (lp - lq)
      if (lp > (denseLog[r * vocab + bestDense] as number)) bestDense = v
      if (lq > (sparseLog[r * vocab + bestSparse] as number)) bestSparse = v
    }
    kl += Math.max(0, rowKl)
    if (bestDense === bestSparse) agree++
  }
  return { kl: rows === 0 ? 0 : kl / rows, top1: rows === 0 ? 1 : agree / rows }
}

/**
 * The mean of a numeric `extra` entry (`exactSparsity`, `reportedSparsity`) over attention
 * reports; 0 when none has it.
 */
export function meanExtra(reports: readonly AttentionReport[], key: string): number {
  const values = reports.map((r) => r.extra?.[key]).filter((x): x is number => typeof x === 'number')
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length
}

/** Logits of every prompt position with a kernel, `[n, vocab]`, and the attention reports. */
function prefillLogits(model: Transformer, prompt: readonly number[], kernel: SparseAttentionKernel): { logits: Float32Array; reports: AttentionReport[] } {
  const reports: AttentionReport[] = []
  const out = model.forward([[...prompt]], { attention: kernel, attentionReports: reports })
  const logits = out.dataSync().slice() as Float32Array
  out.dispose()
  return { logits, reports }
}

/** Teacher-forced decode: logits after each of `tokens` fed one at a time after the prompt, `[m, vocab]`, and the decode reports. */
function decodeLogits(
  model: Transformer,
  prompt: readonly number[],
  tokens: readonly number[],
  kernel: SparseAttentionKernel,
): { logits: Float32Array; reports: AttentionReport[] } {
  const { dVocab, nLayers } = model.config
  const cache = new KVCache(nLayers)
  const prefillReports: AttentionReport[] = []
  const reports: AttentionReport[] = []
  const logits = new Float32Array(tokens.length * dVocab)
  try {
    model.forwardCached([[...prompt]], cache, { attention: kernel, attentionReports: prefillReports }).dispose()
    tokens.forEach((token, step) => {
      const out = model.forwardCached([[token]], cache, { attention: kernel, attentionReports: reports })
      logits.set(out.dataSync() as Float32Array, step * dVocab)
      out.dispose()
    })
  } finally {
    cache.dispose()
  }
  return { logits, reports }
}

/**
 * Compares methods with dense attention on one prompt: for prefill methods the next-token
 * distributions at every prompt position, for decode methods those of `decodeSteps`
 * teacher-forced decode steps along dense's greedy continuation. Reports top-1 agreement,
 * KL(dense || sparse) and both sparsities per method and target sparsity.
 *
 * @throws UsageError when the prompt is empty, longer than the context, or leaves no room to decode
 */
export async function compareMethods(model: Transformer, prompt: readonly number[], options: CompareOptions): Promise<CompareRow[]> {
  const { dVocab, nCtx } = model.config
  const n = prompt.length
  if (n < 2) throw new UsageError(`the prompt has ${n} token(s); comparing needs at least 2`)
  if (n > nCtx) throw new UsageError(`the prompt has ${n} tokens but the model's context is ${nCtx}`)
  const flags = options.flags ?? {}
  const reference = dense()
  const methods = options.methods.filter((m) => m !== 'dense')
  const rows: CompareRow[] = []
  const needsDecode = methods.some((m) => SPARSE_METHODS[m].phase === 'decode')
  const denseLog = logSoftmaxRows(prefillLogits(model, prompt, reference).logits, n, dVocab)
  let steps: number[] = []
  let denseDecodeLog: Float64Array = new Float64Array(0)
  if (needsDecode) {
    const m = Math.min(options.decodeSteps, nCtx - n)
    if (m < 1) throw new UsageError(`the prompt fills the context (${n} of ${nCtx} tokens): no room for decode steps; shorten the prompt`)
    steps = [...((await generate(model, [[...prompt]], { maxTokens: m, temperature: 0 })).tokens[0] ?? [])]
    denseDecodeLog = logSoftmaxRows(decodeLogits(model, prompt, steps, reference).logits, steps.length, dVocab)
  }
  for (const method of methods) {
    const phase = SPARSE_METHODS[method].phase as 'prefill' | 'decode'
    for (const target of options.sparsities) {
      const run = (config: Record<string, unknown>) => {
        const kernel = createKernel(method, config as never)
        const result = phase === 'prefill' ? prefillLogits(model, prompt, kernel) : decodeLogits(model, prompt, steps, kernel)
        return { kernel, ...result, exact: meanExtra(result.reports, 'exactSparsity') }
      }
      const best = calibratedRun(method, n, target, flags, run)
      const reference = phase === 'prefill' ? denseLog : denseDecodeLog
      const count = phase === 'prefill' ? n : steps.length
      const { kl, top1 } = compareDistributions(reference, logSoftmaxRows(best.logits, count, dVocab), count, dVocab)
      const reportedSparsity = meanExtra(best.reports, 'reportedSparsity')
      const { clamped, budgetExceedsPrompt } = clampReportedSparsity(reportedSparsity)
      rows.push({
        method,
        phase,
        targetSparsity: target,
        config: best.kernel.config,
        exactSparsity: best.exact,
        reportedSparsity,
        reportedSparsityClamped: clamped,
        budgetExceedsPrompt,
        targetReached: targetReached(target, best.exact, clamped),
        top1Agreement: top1,
        klDenseSparse: kl,
        positions: count,
      })
    }
  }
  return rows
}

/**
 * The `sparse compare --plot` figure as a Vega-Lite spec: two panels, KL(dense || sparse) (nats)
 * and top-1 agreement with dense, against the measured exact sparsity, one line per method.
 * Axes are Vega's linear scales with `nice` domains, so ticks fall on round values (0, 0.1, 0.2
 * ... for a KL up to 0.35), never on fractions of the largest value.
 *
 * @param rows - the rows of {@link compareMethods}
 * @param title - the figure title (model and prompt)
 */
export function compareSpec(rows: readonly CompareRow[], title: string): PlotSpec {
  const values = rows.map((r) => ({
    method: r.method,
    exactSparsity: r.exactSparsity,
    kl: r.klDenseSparse,
    top1: r.top1Agreement,
  }))
  const x = {
    field: 'exactSparsity',
    type: 'quantitative' as const,
    scale: { domain: [0, 1] },
    title: 'exact sparsity',
  }
  const color = { field: 'method', type: 'nominal' as const, title: 'method' }
  const panel = (field: 'kl' | 'top1', label: string, domain: [number, number] | undefined) => ({
    width: 300,
    height: 220,
    mark: { type: 'line' as const, point: true },
    encoding: {
      x,
      y: {
        field,
        type: 'quantitative' as const,
        scale: { nice: true, zero: true, ...(domain === undefined ? {} : { domain }) },
        title: label,
      },
      color,
      order: { field: 'exactSparsity' },
    },
  })
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    data: { values },
    hconcat: [panel('kl', 'KL(dense || sparse), nats', undefined), panel('top1', 'top-1 agreement with dense', [0, 1])],
  }
}

/** The `sparse compare --plot` SVG ({@link compareSpec} rendered by Vega). */
export async function compareSvg(rows: readonly CompareRow[], title: string): Promise<string> {
  return renderSvg(compareSpec(rows, title))
}

/** Options of `sparse compare` as commander parses them. */
interface CompareFlags {
  model: string
  tokenizer?: string
  promptFile: string
  methods: SparseMethodName[]
  sparsity: number[]
  decodeSteps: number
  plot?: string
  force?: boolean
  json?: boolean
  backend?: string
  [flag: string]: unknown
}

/** The method flags given, keyed by config key; a flag that no listed method takes is a usage error. */
export function compareFlags(methods: readonly SparseMethodName[], options: Record<string, unknown>): Record<string, unknown> {
  const flags: Record<string, unknown> = {}
  for (const f of METHOD_FLAGS) {
    const value = options[attributeOf(f.flag)]
    if (value === undefined) continue
    if (!f.methods.some((m) => methods.includes(m))) {
      throw new UsageError(`${f.flag.split(' ')[0]} does not apply to any of ${methods.join(', ')}`)
    }
    flags[f.key] = f.key === 'sharePages' ? false : value
  }
  return flags
}

function methodListParser(value: string): SparseMethodName[] {
  const names = value.split(',').map((m) => m.trim()).filter((m) => m.length > 0)
  const known = Object.keys(SPARSE_METHODS)
  const bad = names.find((m) => !known.includes(m))
  if (names.length === 0 || bad !== undefined) {
    throw new InvalidArgumentError(`--methods must be a comma-separated list of ${known.join(', ')}; got '${bad ?? value}'`)
  }
  return [...new Set(names)] as SparseMethodName[]
}

function sparsityListParser(value: string): number[] {
  const parts = value.split(',').map((x) => x.trim())
  const numbers = parts.map(Number)
  const bad = parts.findIndex((p, i) => p === '' || !Number.isFinite(numbers[i]) || (numbers[i] as number) < 0 || (numbers[i] as number) >= 1)
  if (bad >= 0) throw new InvalidArgumentError(`--sparsity must be comma-separated numbers in [0, 1), got '${parts[bad]}'`)
  return numbers
}

/** Runs `sparse compare`; returns the JSON report. */
export async function runCompare(options: CompareFlags): Promise<Record<string, unknown>> {
  const flags = compareFlags(options.methods, options)
  const plot = options.plot === undefined ? null : checkOutputFile('--plot', options.plot, '.svg', options.force)
  for (const m of options.methods) budgetFor(m, 16384, 0.5, flags) // unknown combos fail before loading
  const { readFile } = await import('node:fs/promises')
  let text: string
  try {
    text = await readFile(options.promptFile, 'utf8')
  } catch (error) {
    throw new UsageError(`cannot read --prompt-file '${options.promptFile}': ${(error as Error).message}`)
  }
  await activateBackend(options.backend)
  const modelPath = options.model
  const loaded = await loadModel(modelPath, options.tokenizer === undefined ? {} : { tokenizer: options.tokenizer })
  try {
    let prompt: number[]
    if (/^[\s\d,]+$/.test(text) && /\d/.test(text)) {
      prompt = text.split(/[\s,]+/).filter((x) => x.length > 0).map(Number)
      const dVocab = loaded.model.config.dVocab
      const bad = prompt.find((t) => t >= dVocab)
      if (bad !== undefined) throw new UsageError(`--prompt-file token id ${bad} is outside the vocabulary [0, ${dVocab})`)
    } else if (loaded.tokenizer === undefined) {
      throw new UsageError(`no tokenizer beside ${modelPath}: pass --tokenizer PATH, or a --prompt-file of token ids`)
    } else {
      prompt = loaded.tokenizer.encode(text.replace(/\s+$/, ''))
    }
    const rows = await compareMethods(loaded.model, prompt, { methods: options.methods, sparsities: options.sparsity, decodeSteps: options.decodeSteps, flags })
    const report = {
      model: modelPath,
      promptTokens: prompt.length,
      context: loaded.model.config.nCtx,
      decodeSteps: Math.min(options.decodeSteps, loaded.model.config.nCtx - prompt.length),
      rows,
      plot,
    }
    if (plot !== null) {
      await writeFileAtomic(plot, await compareSvg(rows, `${modelPath}: ${prompt.length}-token prompt vs dense`))
    }
    return report
  } finally {
    loaded.model.dispose()
  }
}

/**
 * The lines printed under the `sparse compare` table: the note on reported sparsities below 0
 * (shown as `0.000*`) and a warning per row whose target sparsity is not reached at this length.
 */
export function compareNotes(rows: readonly CompareRow[], promptTokens: number): string[] {
  const lines: string[] = []
  const negative = rows.filter((r) => r.budgetExceedsPrompt)
  if (negative.length > 0) {
    const ranges = [...new Set(negative.map((r) => r.method))].map((method) => {
      const values = negative.filter((r) => r.method === method).map((r) => r.reportedSparsity)
      const [lo, hi] = [Math.min(...values), Math.max(...values)]
      return `${method} ${lo === hi ? lo.toFixed(3) : `${hi.toFixed(3)} to ${lo.toFixed(3)}`}`
    })
    lines.push(
      `* budget exceeds the prompt: the study's reported sparsity is < 0 (${ranges.join('; ')}), i.e. in its accounting (whole 64x64 kernel blocks) ` +
        `the method keeps every causal pair of this ${promptTokens}-token prompt; shown as 0 (raw values: --json reportedSparsity)`,
    )
  }
  for (const r of rows.filter((row) => !row.targetReached)) {
    lines.push(targetWarning(r.method, r.targetSparsity, r.exactSparsity, r.reportedSparsityClamped, promptTokens))
  }
  return lines
}

const SPARSITY_HELP = `Sparsities (fraction of causal query-key pairs not computed):
  exact     from the method's own mask.
  reported  the Sparse Frontier study's accounting (Vertical-Slash / FlexPrefill: whole 64x64 kernel blocks;
            Block-Sparse: analytic; SnapKV, Ada-SnapKV, Quest: 1 - budget / prompt length). When the budget
            exceeds a short prompt's causal pairs it goes below 0, meaning the method keeps everything: the
            text shows 0 with a note (0.000* in the compare table); --json keeps the raw value.`

/** Registers `attnlab sparse` and its subcommands. */
export function registerSparse(program: Command): void {
  const sparse = program.command('sparse').description('training-free sparse attention (Sparse Frontier): apply methods, compare them')
  const apply = sparse
    .command('apply')
    .description('run one method on q/k/v from a safetensors file and write its output and mask of computed pairs')
    .addOption(new Option('--method <name>', 'the method').choices(Object.keys(SPARSE_METHODS)).makeOptionMandatory())
    .requiredOption('--qkv <file>', 'input safetensors: q [H, T, dHead], k, v [Hkv, T, d] (float32); decode methods also q_new [H, dHead], k_new, v_new [Hkv, d]')
    .requiredOption('--out <file>', 'output safetensors: out ([H, T, dValue] or [H, dValue]) and mask (uint8, [H, T, T] or [H, T + 1])')
    .addOption(forceOption('an existing --out file'))
    .addOption(new Option('--phase <phase>', 'for dense: prefill or decode (default: decode if the file has q_new)').choices(['prefill', 'decode']))
    .option('--scale <x>', 'multiplier of q.k (default 1/sqrt(dHead))', numberParser('--scale'))
  addMethodFlags(apply)
  apply
    .addOption(backendOption())
    .option('--json', 'print the report as JSON')
    .addHelpText('after', `\n${SPARSITY_HELP}\n  --json: sparsity.exact, sparsity.reported (raw, may be < 0), sparsity.reportedClamped, sparsity.budgetExceedsPrompt.`)
    .action(async (options: ApplyOptions) => {
      const report = await runApply(options)
      if (options.json) {
        console.log(JSON.stringify(report, null, 2))
        return
      }
      const sparsity = report.sparsity as { exact: number; reported: number; budgetExceedsPrompt: boolean }
      const reported = sparsity.budgetExceedsPrompt
        ? `0 (budget exceeds the prompt: the study's accounting gives ${sparsity.reported.toFixed(4)} < 0, i.e. the method keeps every causal pair)`
        : sparsity.reported.toFixed(4)
      console.log(`${report.method} (${report.phase}): exact sparsity ${sparsity.exact.toFixed(4)}, reported (study) sparsity ${reported}; wrote ${options.out}`)
    })

  const compare = sparse
    .command('compare')
    .description('compare methods with dense attention on a model and prompt: top-1 agreement and KL(dense || sparse) of next-token distributions, with both sparsities')
    .requiredOption('--model <path>', MODEL_PATH_HELP)
    .option('--tokenizer <path>', 'llama2.c tokenizer.bin (default: the one beside the model)')
    .requiredOption('--prompt-file <file>', 'the prompt: text (encoded with BOS) or token ids separated by spaces/commas')
    .requiredOption('--methods <list>', `comma-separated methods (${Object.keys(SPARSE_METHODS).join(', ')})`, methodListParser)
    .option('--sparsity <list>', 'target sparsities in [0, 1)', sparsityListParser, [0.5, 0.8, 0.95])
    .option('--decode-steps <n>', 'teacher-forced decode steps for decode methods (along dense greedy decoding)', intParser('--decode-steps', 1), 16)
    .option('--plot <file.svg>', 'write an SVG of KL and top-1 agreement against the exact sparsity')
    .addOption(forceOption('an existing --plot file'))
  addMethodFlags(compare)
  compare
    .addOption(backendOption())
    .option('--json', 'print the report as JSON')
    .addHelpText(
      'after',
      `\n${SPARSITY_HELP}\n  A row whose exact and reported sparsities both stay more than ${TARGET_SPARSITY_TOLERANCE} below its target gets a warning\n` +
        '  naming what it achieved (short prompts: a method\'s smallest budget may already keep most pairs).\n' +
        '  --json rows: exactSparsity, reportedSparsity (raw, may be < 0), reportedSparsityClamped, budgetExceedsPrompt, targetReached.',
    )
    .action(async (options: CompareFlags) => {
      const report = await runCompare(options)
      if (options.json) {
        console.log(JSON.stringify(report, null, 2))
        return
      }
      console.log(`${report.model}: ${report.promptTokens}-token prompt, ${report.decodeSteps} decode steps`)
      console.log('method          target  exact  reported  top-1   KL (nats)')
      const rows = report.rows as CompareRow[]
      for (const r of rows) {
        const reported = `${r.reportedSparsityClamped.toFixed(3)}${r.budgetExceedsPrompt ? '*' : ''}`
        console.log(
          `${r.method.padEnd(15)} ${r.targetSparsity.toFixed(2).padStart(6)} ${r.exactSparsity.toFixed(3).padStart(6)} ${reported.padStart(9)} ${r.top1Agreement.toFixed(3).padStart(6)} ${r.klDenseSparse.toExponential(3).padStart(11)}`,
        )
      }
      for (const line of compareNotes(rows, report.promptTokens as number)) console.log(line)
      if (report.plot !== null) console.log(`plot: ${report.plot}`)
    })
}

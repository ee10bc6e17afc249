/**
 * `attnlab sparse`: the training-free sparse attention methods of `@attnlab/sparse-attention`.
 *
 * - `sparse apply`: run one method on q/k/v from a safetensors file (one sequence, no model) and
 *   write its output and mask of computed pairs, with both sparsities.
 */
import { InvalidArgumentError, Option, type Command } from 'commander'
import * as tf from '@tensorflow/tfjs-core'
import { SafetensorsError, safetensorsToFloat32, type SafetensorsFile } from '@attnlab/core'
import { readSafetensorsFile, writeSafetensorsFile } from '@attnlab/core/node'
import {
  SPARSE_METHODS,
  applyDecode,
  applyPrefill,
  combine,
  createKernel,
  type SparseAttentionKernel,
  type SparseMethodName,
} from '@attnlab/sparse-attention'
import { UsageError } from '../errors.ts'
import { activateBackend, backendOption, intParser, numberParser } from '../options.ts'

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
 * Adds the method flags (`--vertical-size`, `--capacity`, ...) to a command, for commands that
 * take `--attention METHOD` (e.g. `attnlab generate`). Pair with {@link attentionKernelFromFlags}.
 */
export function addMethodFlags(command: Command): Command {
  for (const f of METHOD_FLAGS) {
    if (f.parse) command.option(f.flag, f.description, f.parse as (value: string, previous: unknown) => unknown)
    else command.option(f.flag, f.description)
  }
  return command
}

/**
 * Builds the attention kernel named by `spec` from parsed flags: a method name
 * (`vertical-slash`, `quest`, ...) or a prefill and a decode method joined by `+`
 * (`vertical-slash+quest`, run with `combine`). Each method takes the flags that apply to it; a
 * flag that applies to none of them is a usage error.
 *
 * @throws UsageError for an unknown method or a flag of another method; ConfigError (from the
 *   package) for invalid values
 */
export function attentionKernelFromFlags(spec: string, options: Record<string, unknown>): SparseAttentionKernel {
  const methods = spec.split('+').map((m) => m.trim())
  const known = Object.keys(SPARSE_METHODS)
  for (const m of methods) {
    if (!known.includes(m)) throw new UsageError(`unknown attention method '${m}' (expected one of ${known.join(', ')}, or prefill+decode)`)
  }
  if (methods.length > 2) throw new UsageError(`--attention takes one method or prefill+decode, got '${spec}'`)
  const names = methods as SparseMethodName[]
  const overrides = names.map(() => ({}) as Record<string, unknown>)
  for (const f of METHOD_FLAGS) {
    const value = options[attributeOf(f.flag)]
    if (value === undefined) continue
    const flag = f.flag.split(' ')[0] as string
    const users = names.map((m, i) => (f.methods.includes(m) ? i : -1)).filter((i) => i >= 0)
    if (users.length === 0) {
      const own = [...new Set(METHOD_FLAGS.filter((g) => g.methods.some((m) => names.includes(m))).map((g) => g.flag.split(' ')[0]))]
      throw new UsageError(`${flag} does not apply to ${spec}${own.length > 0 ? ` (its flags: ${own.join(', ')})` : ' (it has no parameters)'}`)
    }
    for (const i of users) (overrides[i] as Record<string, unknown>)[f.key] = f.key === 'sharePages' ? false : value
  }
  const kernels = names.map((m, i) => createKernel(m, overrides[i] as never))
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
    sparsity: result.sparsity,
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

/** Registers `attnlab sparse` and its subcommands. */
export function registerSparse(program: Command): void {
  const sparse = program.command('sparse').description('training-free sparse attention (Sparse Frontier): apply methods, compare them')
  const apply = sparse
    .command('apply')
    .description('run one method on q/k/v from a safetensors file and write its output and mask of computed pairs')
    .addOption(new Option('--method <name>', 'the method').choices(Object.keys(SPARSE_METHODS)).makeOptionMandatory())
    .requiredOption('--qkv <file>', 'input safetensors: q [H, T, dHead], k, v [Hkv, T, d] (float32); decode methods also q_new [H, dHead], k_new, v_new [Hkv, d]')
    .requiredOption('--out <file>', 'output safetensors: out ([H, T, dValue] or [H, dValue]) and mask (uint8, [H, T, T] or [H, T + 1])')
    .addOption(new Option('--phase <phase>', 'for dense: prefill or decode (default: decode if the file has q_new)').choices(['prefill', 'decode']))
    .option('--scale <x>', 'multiplier of q.k (default 1/sqrt(dHead))', numberParser('--scale'))
  addMethodFlags(apply)
  apply
    .addOption(backendOption())
    .option('--json', 'print the report as JSON')
    .action(async (options: ApplyOptions) => {
      const report = await runApply(options)
      if (options.json) {
        console.log(JSON.stringify(report, null, 2))
        return
      }
      const sparsity = report.sparsity as { exact: number; reported: number }
      console.log(
        `${report.method} (${report.phase}): exact sparsity ${sparsity.exact.toFixed(4)}, reported (study) sparsity ${sparsity.reported.toFixed(4)}; wrote ${options.out}`,
      )
    })
}

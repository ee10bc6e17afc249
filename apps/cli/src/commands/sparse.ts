/**
 * `attnlab sparse`: the training-free sparse attention methods of `@attnlab/sparse-attention`.
 *
 * - `sparse apply`: run one method on q/k/v from a safetensors file (one sequence, no model) and
 *   write its output and mask of computed pairs, with both sparsities.
 * - `sparse compare`: run methods at target sparsities on a real model and prompt and measure
 *   top-1 agreement and KL(dense || sparse) of the next-token distributions (the experiment is
 *   `@attnlab/experiments`' `compareWithDense`; this file parses flags, calls it and prints).
 */
import { InvalidArgumentError, Option, type Command } from 'commander'
import * as tf from '@tensorflow/tfjs-core'
import { freemem } from 'node:os'
import { SafetensorsError, TooLargeError, safetensorsToFloat32, type SafetensorsFile } from '@attnlab/core'
import { fieldInfo, type FieldInfo, type z } from '@attnlab/core/schema'
import { readSafetensorsFile, writeFileAtomic, writeSafetensorsFile } from '@attnlab/core/node'
import {
  DEFAULT_COMPARE_DECODE_STEPS,
  DEFAULT_COMPARE_SPARSITIES,
  TARGET_SPARSITY_TOLERANCE,
  clampReportedSparsity,
  compareNotes,
  compareSpec,
  compareWithDense,
  type CompareRow,
} from '@attnlab/experiments'
import {
  MAX_TYPED_ARRAY_LENGTH,
  SPARSE_METHOD_SCHEMAS,
  SPARSE_METHODS,
  applyDecode,
  applyPrefill,
  budgetFor,
  combine,
  createKernel,
  type SequenceDecodeResult,
  type SequencePrefillResult,
  type SparseAttentionKernel,
  type SparseMethodName,
} from '@attnlab/sparse-attention'
import { UsageError } from '../errors.ts'
import { renderSvg } from '../plot.ts'
import {
  activateBackend,
  backendOption,
  checkOutputFile,
  forceOption,
  intParser,
  MODEL_PATH_HELP,
  modelFlagPath,
  numberParser,
} from '../options.ts'
import { kebab } from '../run-flags.ts'
import { fieldParser, showDefault } from '../schema-flags.ts'
import { NO_DUMMY_PREFIX_HELP, TOKENIZER_HELP, loadModelWithTokenizerFlags } from '../tokenizer-flags.ts'
import { registerSparseEval } from './sparse-eval.ts'

/**
 * A method flag: its commander spelling, the configuration field it sets, the methods whose schema has that
 * field, its help (each method's meaning and default, from the schemas) and its parser (the loosest of the
 * fields' ranges; each method's own range is checked by the method) or choices.
 */
interface MethodFlag {
  readonly flag: string
  readonly key: string
  readonly methods: readonly SparseMethodName[]
  readonly description: string
  readonly parse?: (value: string) => unknown
  readonly choices?: readonly string[]
}

/** Configuration fields without a flag (`sparse compare` sizes them itself, or they have no command-line use). */
const UNFLAGGED_FIELDS: ReadonlySet<string> = new Set(['kernelBlockSize', 'maxBudget'])

/** The flag that sets `sharePages` to false (a Quest selection per query head). */
const PER_HEAD_PAGES = '--per-head-pages'

/**
 * The method flags, one per configuration field of {@link SPARSE_METHOD_SCHEMAS} (but
 * {@link UNFLAGGED_FIELDS}), in the methods' order: `--window` sets `window` of every method that has one.
 */
function methodFlags(): MethodFlag[] {
  const fields = new Map<string, { method: SparseMethodName; info: FieldInfo }[]>()
  for (const [method, schema] of Object.entries(SPARSE_METHOD_SCHEMAS) as [SparseMethodName, z.ZodObject][]) {
    for (const [key, field] of Object.entries(schema.shape)) {
      if (UNFLAGGED_FIELDS.has(key)) continue
      const entry = fields.get(key) ?? []
      entry.push({ method, info: fieldInfo(field as z.ZodType) })
      fields.set(key, entry)
    }
  }
  return [...fields].map(([key, users]) => {
    const methods = users.map((u) => u.method)
    const kind = users[0]?.info.kind
    if (kind === 'boolean') {
      // The one boolean, sharePages (default true), is turned off by its flag.
      const texts = users.map((u) => `${u.method}: set ${key} to false (${key}: ${u.info.help})`)
      return { flag: PER_HEAD_PAGES, key, methods, description: texts.join('; ') }
    }
    // Methods whose field reads the same, with the same default, share one entry ("snapkv / ada-snapkv: ...").
    const groups = new Map<string, SparseMethodName[]>()
    for (const { method, info } of users) {
      const text = `${info.help} (default ${showDefault(info.defaultValue)})`
      groups.set(text, [...(groups.get(text) ?? []), method])
    }
    const description = [...groups].map(([text, names]) => `${names.join(' / ')}: ${text}`).join('; ')
    const long = kebab(key)
    const infos = users.map((u) => u.info)
    if (kind === 'enum') return { flag: `${long} <mode>`, key, methods, description, choices: infos[0]?.choices ?? [] }
    const parse = fieldParser(long, infos)
    return {
      flag: `${long} <${kind === 'integer' ? 'n' : 'x'}>`,
      key,
      methods,
      description,
      ...(parse === undefined ? {} : { parse }),
    }
  })
}

const METHOD_FLAGS: readonly MethodFlag[] = methodFlags()

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
  /** False with `--no-mask`: the mask of computed pairs is neither built nor written. */
  mask?: boolean
  [flag: string]: unknown
}

/**
 * Refuses, before any work, a mask of computed pairs that cannot be held: `entries` bytes (one per
 * pair, `[H, T, T]` or `[H, T + 1]`) against one typed array's limit and the free memory.
 *
 * @throws TooLargeError naming the bytes, the limit and the dimension (T), pointing to --no-mask
 */
export function checkMaskFits(shape: readonly number[], free: number = freemem()): void {
  const bytes = shape.reduce((a, b) => a * b, 1)
  const limit = Math.min(MAX_TYPED_ARRAY_LENGTH, free)
  if (bytes > limit) {
    const available =
      bytes > MAX_TYPED_ARRAY_LENGTH ? `one typed array holds at most ${MAX_TYPED_ARRAY_LENGTH}` : `${free} are free`
    throw new TooLargeError(
      `the mask of computed pairs [${shape.join(', ')}] (dimension T = ${shape[1]}) needs ${bytes} bytes but ` +
        `${available}; pass --no-mask to leave it out`,
      { bytes, limit, dimension: 'T' },
    )
  }
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
    if (f.choices !== undefined) {
      command.addOption(new Option(flag, f.description).choices(f.choices))
    } else if (f.parse) {
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
 * flag values into its full configuration (e.g. `sizedConfig` of `@attnlab/experiments`, sizes for the prompt at hand);
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
    if (!known.includes(m))
      throw new UsageError(`unknown attention method '${m}' (expected one of ${known.join(', ')}, or prefill+decode)`)
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
      const own = [
        ...new Set(
          METHOD_FLAGS.filter((g) => g.methods.some((m) => names.includes(m))).map(
            (g) => spelled(g, renames).split(' ')[0],
          ),
        ),
      ]
      throw new UsageError(
        `${flag} does not apply ` +
          `to ${spec}${own.length > 0 ? ` (its flags: ${own.join(', ')})` : ' (it has no parameters)'}`,
      )
    }
    for (const i of users) (overrides[i] as Record<string, unknown>)[f.key] = f.key === 'sharePages' ? false : value
  }
  const kernels = names.map((m, i) => {
    const flags = overrides[i] as Record<string, unknown>
    return createKernel(m, (size === undefined ? flags : size(m, flags)) as never)
  })
  return kernels.length === 1
    ? (kernels[0] as SparseAttentionKernel)
    : combine(kernels[0] as SparseAttentionKernel, kernels[1] as SparseAttentionKernel)
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

function tensor(
  file: SafetensorsFile,
  name: string,
  rank: number,
  meaning: string,
): { data: Float32Array; shape: readonly number[] } {
  const entry = file.tensors.get(name)
  if (entry === undefined) {
    throw new SafetensorsError(
      `tensor '${name}' is missing: expected ${meaning} (tensors ` +
        `present: ${[...file.tensors.keys()].join(', ') || 'none'})`,
      name,
    )
  }
  if (entry.dtype !== 'F32')
    throw new SafetensorsError(`tensor '${name}' has dtype ${entry.dtype} but F32 is expected`, name)
  if (entry.shape.length !== rank) {
    throw new SafetensorsError(
      `tensor '${name}' has shape [${entry.shape.join(', ')}] but ${meaning} is expected`,
      name,
    )
  }
  const data = safetensorsToFloat32(entry)
  const bad = data.findIndex((x) => !Number.isFinite(x))
  if (bad >= 0)
    throw new SafetensorsError(`tensor '${name}' holds a non-finite value (${data[bad]}) at flat index ${bad}`, name, {
      index: bad,
    })
  return { data, shape: entry.shape }
}

function expectDim(name: string, shape: readonly number[], axis: number, expected: number, what: string): void {
  if (shape[axis] !== expected) {
    throw new SafetensorsError(
      `tensor '${name}' has shape [${shape.join(', ')}]: dimension ${axis} must be ${expected} (${what})`,
      name,
    )
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
    throw new SafetensorsError(
      `tensor 'k' has ${nKvHeads} KV heads but q's ${nHeads} heads must be a multiple of it (grouped-query attention)`,
      'k',
    )
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

function phaseFor(
  kernel: SparseAttentionKernel,
  requested: 'prefill' | 'decode' | undefined,
  file: SafetensorsFile,
): 'prefill' | 'decode' {
  const own = SPARSE_METHODS[kernel.method as SparseMethodName].phase
  if (own !== null) {
    if (requested !== undefined && requested !== own)
      throw new UsageError(`--phase ${requested} does not fit ${kernel.method}, a ${own} method`)
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
  const writeMask = options.mask !== false
  const maskShape = phase === 'decode' ? [input.nHeads, input.length + 1] : [input.nHeads, input.length, input.length]
  if (writeMask) checkMaskFits(maskShape)
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
  let result: SequencePrefillResult | SequenceDecodeResult
  const callStart = performance.now()
  try {
    result = step === null ? applyPrefill(kernel, qkv, { scale }) : applyDecode(kernel, qkv, step, { scale })
  } finally {
    tf.dispose([qkv.q, qkv.k, qkv.v, ...(step === null ? [] : [step.qNew, step.kNew, step.vNew])])
  }
  const out = result.output.dataSync() as Float32Array
  const callSeconds = (performance.now() - callStart) / 1000
  const outShape = result.output.shape
  result.output.dispose()
  const mask = writeMask ? result.mask : null
  const report = {
    method: kernel.method,
    phase,
    backend: tf.getBackend(),
    config: kernel.config,
    shape: {
      nHeads: input.nHeads,
      nKvHeads: input.nKvHeads,
      T: input.length,
      dHead: input.dHead,
      dValue: input.dValue,
    },
    scale,
    sparsity: {
      ...result.sparsity,
      reportedClamped: clampReportedSparsity(result.sparsity.reported).clamped,
      budgetExceedsPrompt: clampReportedSparsity(result.sparsity.reported).budgetExceedsPrompt,
    },
    headSparsity: { exact: Array.from(result.headSparsity.exact), reported: Array.from(result.headSparsity.reported) },
    extra: result.extra,
    timing: { ...result.timing, callSeconds },
    memory: { rssBytes: process.memoryUsage().rss, peakRssBytes: process.resourceUsage().maxRSS * 1024 },
    out: options.out,
    outShape,
    maskShape: mask === null ? null : result.maskShape,
  }
  await writeSafetensorsFile(
    options.out,
    {
      out: { dtype: 'F32', shape: outShape, data: out },
      ...(mask === null ? {} : { mask: { dtype: 'U8' as const, shape: result.maskShape, data: mask } }),
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

/** The `sparse compare --plot` SVG: `@attnlab/experiments`' `compareSpec` rendered by Vega. */
export async function compareSvg(rows: readonly CompareRow[], title: string): Promise<string> {
  return renderSvg(compareSpec(rows, title))
}

/** Options of `sparse compare` as commander parses them. */
interface CompareFlags {
  model: string
  tokenizer?: string
  dummyPrefix?: boolean
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
export function compareFlags(
  methods: readonly SparseMethodName[],
  options: Record<string, unknown>,
): Record<string, unknown> {
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
  const names = value
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m.length > 0)
  const known = Object.keys(SPARSE_METHODS)
  const bad = names.find((m) => !known.includes(m))
  if (names.length === 0 || bad !== undefined) {
    throw new InvalidArgumentError(
      `--methods must be a comma-separated list of ${known.join(', ')}; got '${bad ?? value}'`,
    )
  }
  return [...new Set(names)] as SparseMethodName[]
}

function sparsityListParser(value: string): number[] {
  const parts = value.split(',').map((x) => x.trim())
  const numbers = parts.map(Number)
  const bad = parts.findIndex(
    (p, i) => p === '' || !Number.isFinite(numbers[i]) || (numbers[i] as number) < 0 || (numbers[i] as number) >= 1,
  )
  if (bad >= 0)
    throw new InvalidArgumentError(`--sparsity must be comma-separated numbers in [0, 1), got '${parts[bad]}'`)
  return numbers
}

/** One piece of a --prompt-file of token ids: a number in any JavaScript spelling (`-1`, `2.5`, `1e3`, `NaN`). */
const NUMBER_PIECE = /^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$|^[+-]?(nan|infinity)$/i

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
  if (text.trim().length === 0) throw new UsageError(`--prompt-file '${options.promptFile}' is empty`)
  await activateBackend(options.backend)
  const modelPath = options.model
  const loaded = await loadModelWithTokenizerFlags(await modelFlagPath(modelPath), options)
  try {
    let prompt: number[]
    const pieces = text.split(/[\s,]+/).filter((x) => x.length > 0)
    // A file of numbers (NaN, Infinity and signs included) is token ids, each checked; anything else is text.
    if (pieces.every((x) => NUMBER_PIECE.test(x))) {
      const dVocab = loaded.model.config.dVocab
      const at = pieces.findIndex((x) => !(Number.isInteger(Number(x)) && Number(x) >= 0 && Number(x) < dVocab))
      if (at >= 0) {
        throw new UsageError(
          `--prompt-file token id ${pieces[at]} (number ${at + 1} of ${pieces.length}) is out of range: expected ` +
            `an integer in [0, ${dVocab}) (the model's vocabulary has ${dVocab} tokens)`,
        )
      }
      prompt = pieces.map(Number)
    } else if (loaded.tokenizer === undefined) {
      throw new UsageError(`no tokenizer beside ${modelPath}: pass --tokenizer PATH, or a --prompt-file of token ids`)
    } else {
      prompt = loaded.tokenizer.encode(text.replace(/\s+$/, ''))
    }
    const result = await compareWithDense(loaded.model, prompt, options.methods, {
      sparsities: options.sparsity,
      decodeSteps: options.decodeSteps,
      flags,
    })
    const report = { model: modelPath, ...result, plot }
    if (plot !== null) {
      await writeFileAtomic(plot, await compareSvg(result.rows, `${modelPath}: ${prompt.length}-token prompt vs dense`))
    }
    return report
  } finally {
    loaded.model.dispose()
  }
}

const SPARSITY_HELP = `Sparsities (fraction of causal query-key pairs not computed):
  exact     from the method's own mask.
  reported  the Sparse Frontier study's accounting (Vertical-Slash / FlexPrefill: whole 64x64 kernel blocks;
            Block-Sparse: analytic; SnapKV, Ada-SnapKV, Quest: 1 - budget / prompt length). When the budget
            exceeds a short prompt's causal pairs it goes below 0, meaning the method keeps everything: the
            text shows 0 with a note (0.000* in the compare table); --json keeps the raw value.`

const TIMING_HELP = `Timing and memory (--json; wall clock, performance.now()):
  timing.estimationSeconds  the method's importance estimation and selection (Vertical-Slash / FlexPrefill:
                            last-window estimate; Block-Sparse: block pooling; SnapKV / Ada-SnapKV:
                            observation-window scores; Quest: page bounds and scores).
  timing.attentionSeconds   the attention over the selected pairs (prefill: tiles of query rows, memory
                            linear in T; no [H, T, T] tensor unless hooks need it).
  timing.afterPrefillSeconds  decode only: the afterPrefill part of estimationSeconds.
  timing.callSeconds        the whole kernel call, output read back included.
  memory.rssBytes / memory.peakRssBytes  the process's resident memory now and at its peak.
  A request that cannot fit (the mask beyond one typed array or the free memory, the backend's heap)
  fails before any work, naming the bytes needed and available.`

/** Registers `attnlab sparse` and its subcommands. */
export function registerSparse(program: Command): void {
  const sparse = program
    .command('sparse')
    .description('training-free sparse attention (Sparse Frontier): apply methods, compare them, evaluate tasks')
  const apply = sparse
    .command('apply')
    .description('run one method on q/k/v from a safetensors file and write its output and mask of computed pairs')
    .addOption(new Option('--method <name>', 'the method').choices(Object.keys(SPARSE_METHODS)).makeOptionMandatory())
    .requiredOption(
      '--qkv <file>',
      'input safetensors: q [H, T, dHead], k, v [Hkv, T, d] (float32); decode methods also q_new [H, dHead], k_new, ' +
        'v_new [Hkv, d]',
    )
    .requiredOption(
      '--out <file>',
      'output safetensors: out ([H, T, dValue] or [H, dValue]) and mask (uint8, [H, T, T] or [H, T + 1])',
    )
    .option(
      '--no-mask',
      'leave the mask of computed pairs out of --out (prefill: H x T x T bytes, 512 MB at 8 heads and T = 8192); ' +
        'sparsities are counted either way',
    )
    .addOption(forceOption('an existing --out file'))
    .addOption(
      new Option('--phase <phase>', 'for dense: prefill or decode (default: decode if the file has q_new)').choices([
        'prefill',
        'decode',
      ]),
    )
    .option(
      '--scale <x>',
      'multiplier of q.k (default 1/sqrt(dHead))',
      numberParser('--scale', 0, 1e6, { minExclusive: true }),
    )
  addMethodFlags(apply)
  apply
    .addOption(backendOption())
    .option('--json', 'print the report as JSON')
    .addHelpText(
      'after',
      `\n${SPARSITY_HELP}\n  --json: sparsity.exact, sparsity.reported (raw, may be < 0), sparsity.reportedClamped, ` +
        `sparsity.budgetExceedsPrompt.\n${TIMING_HELP}`,
    )
    .action(async (options: ApplyOptions) => {
      const report = await runApply(options)
      if (options.json) {
        console.log(JSON.stringify(report, null, 2))
        return
      }
      const sparsity = report.sparsity as { exact: number; reported: number; budgetExceedsPrompt: boolean }
      const reported = sparsity.budgetExceedsPrompt
        ? `0 (budget exceeds the prompt: the study's accounting gives ${sparsity.reported.toFixed(4)} < 0, i.e. the ` +
          `method keeps every causal pair)`
        : sparsity.reported.toFixed(4)
      const timing = report.timing as { estimationSeconds: number; attentionSeconds: number }
      console.log(
        `${report.method} (${report.phase}): exact sparsity ${sparsity.exact.toFixed(4)}, reported (study) ` +
          `sparsity ${reported}; estimation ${timing.estimationSeconds.toFixed(3)} s, attention ` +
          `${timing.attentionSeconds.toFixed(3)} s; wrote ${options.out}`,
      )
    })

  const compare = sparse
    .command('compare')
    .description(
      'compare methods with dense attention on a model and prompt: top-1 agreement and KL(dense || sparse) of ' +
        'next-token distributions, with both sparsities',
    )
    .requiredOption('--model <path>', MODEL_PATH_HELP)
    .option('--tokenizer <path>', TOKENIZER_HELP)
    .option('--no-dummy-prefix', NO_DUMMY_PREFIX_HELP)
    .requiredOption(
      '--prompt-file <file>',
      'the prompt: text (encoded with BOS) or token ids separated by spaces/commas',
    )
    .requiredOption(
      '--methods <list>',
      `comma-separated methods (${Object.keys(SPARSE_METHODS).join(', ')})`,
      methodListParser,
    )
    .option('--sparsity <list>', 'target sparsities in [0, 1)', sparsityListParser, [...DEFAULT_COMPARE_SPARSITIES])
    .option(
      '--decode-steps <n>',
      'teacher-forced decode steps for decode methods (along dense greedy decoding)',
      intParser('--decode-steps', 1),
      DEFAULT_COMPARE_DECODE_STEPS,
    )
    .option('--plot <file.svg>', 'write an SVG of KL and top-1 agreement against the exact sparsity')
    .addOption(forceOption('an existing --plot file'))
  addMethodFlags(compare)
  compare
    .addOption(backendOption())
    .option('--json', 'print the report as JSON')
    .addHelpText(
      'after',
      `\n${SPARSITY_HELP}\n  A row whose exact and reported sparsities both stay more ` +
        `than ${TARGET_SPARSITY_TOLERANCE} below its target gets a warning\n` +
        "  naming what it achieved (short prompts: a method's smallest budget may already keep most pairs).\n" +
        '  --json rows: exactSparsity, reportedSparsity (raw, may be < 0), reportedSparsityClamped, ' +
        'budgetExceedsPrompt, targetReached.',
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
          `${r.method.padEnd(15)} ${r.targetSparsity.toFixed(2).padStart(6)} ` +
            `${r.exactSparsity.toFixed(3).padStart(6)} ${reported.padStart(9)} ` +
            `${r.top1Agreement.toFixed(3).padStart(6)} ${r.klDenseSparse.toExponential(3).padStart(11)}`,
        )
      }
      for (const line of compareNotes(rows, report.promptTokens as number)) console.log(line)
      if (report.plot !== null) console.log(`plot: ${report.plot}`)
    })
  registerSparseEval(sparse)
}

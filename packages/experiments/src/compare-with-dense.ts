/**
 * Sparse attention methods against dense attention on one model and prompt: each method sized
 * for target sparsities (`@attnlab/sparse-attention`'s `budgetFor` / `calibratedRun`), then
 * KL(dense || sparse) and top-1 agreement of the next-token distributions, with both sparsities
 * (exact from the masks, and the study's reported accounting). After The Sparse Frontier
 * (Nawrot et al., arXiv 2504.17768 [v2]: methods and sparsity in section 2, budgets A.1 and Table 3).
 *
 * @module
 */
import {
  SPARSE_METHODS,
  budgetFor,
  calibratedRun,
  createKernel,
  dense,
  type SparseAttentionKernel,
  type SparseMethodName,
} from '@attnlab/sparse-attention'
import { KVCache, generate, type AttentionReport, type Transformer } from '@attnlab/transformer'
import { ExperimentInputError } from './errors.ts'
import { clampReportedSparsity, targetReached } from './targets.ts'

/** One method at one target sparsity, compared with dense attention on the same model and prompt. */
export interface CompareRow {
  /** The method. */
  readonly method: SparseMethodName
  /**
   * The phase it sparsifies (prefill methods: every prompt position; decode methods:
   * teacher-forced decode steps).
   */
  readonly phase: 'prefill' | 'decode'
  /** The sparsity asked for, in [0, 1). */
  readonly targetSparsity: number
  /** The configuration that ran (budget set for the target, see `budgetFor` in `@attnlab/sparse-attention`). */
  readonly config: unknown
  /** Exact sparsity from the masks, mean over layers (and decode steps). */
  readonly exactSparsity: number
  /**
   * The study's reported sparsity, mean over layers (and decode steps); below 0 when the budget
   * exceeds the prompt (see {@link clampReportedSparsity}).
   */
  readonly reportedSparsity: number
  /** `reportedSparsity` clamped at 0 (what a text table shows). */
  readonly reportedSparsityClamped: number
  /**
   * Whether the study's accounting of the budget exceeds the prompt's causal pairs
   * (`reportedSparsity < 0`: it keeps everything).
   */
  readonly budgetExceedsPrompt: boolean
  /**
   * Whether the exact or (clamped) reported sparsity comes within `TARGET_SPARSITY_TOLERANCE` of
   * the target; false when the method cannot reach it at this length.
   */
  readonly targetReached: boolean
  /** Fraction of compared positions where the sparse top-1 token equals the dense one. */
  readonly top1Agreement: number
  /** Mean KL(dense || sparse) of the next-token distributions, nats. */
  readonly klDenseSparse: number
  /** Number of next-token distributions compared. */
  readonly positions: number
}

/** The target sparsities {@link compareWithDense} sweeps when none are given. */
export const DEFAULT_COMPARE_SPARSITIES: readonly number[] = Object.freeze([0.5, 0.8, 0.95])

/** The teacher-forced decode steps {@link compareWithDense} runs for decode methods when not given. */
export const DEFAULT_COMPARE_DECODE_STEPS = 16

/** Options of {@link compareWithDense}. */
export interface CompareWithDenseOptions {
  /** Target sparsities in [0, 1) (default {@link DEFAULT_COMPARE_SPARSITIES}). */
  readonly sparsities?: readonly number[]
  /**
   * Teacher-forced decode steps for decode methods, an integer >= 1, clamped to the context left
   * after the prompt (default {@link DEFAULT_COMPARE_DECODE_STEPS}).
   */
  readonly decodeSteps?: number
  /**
   * User method sizes by config key (`{ capacity: 20 }`, `{ verticalSize: 9 }`): they win over
   * the budget rules and are not calibrated.
   */
  readonly flags?: Readonly<Record<string, unknown>>
}

/** What {@link compareWithDense} measured. */
export interface CompareWithDenseResult {
  /** The prompt length (tokens). */
  readonly promptTokens: number
  /** The model's context `nCtx` (tokens). */
  readonly context: number
  /** The decode steps decode methods ran: `min(decodeSteps, context - promptTokens)`. */
  readonly decodeSteps: number
  /** One row per method (dense skipped) and target sparsity, methods in the order given. */
  readonly rows: readonly CompareRow[]
}

/**
 * The mean of a numeric `extra` entry (`exactSparsity`, `reportedSparsity`) over attention
 * reports; 0 when none has it.
 *
 * @param reports - attention reports of a forward pass (one per layer, and per decode step)
 * @param key - the `extra` key
 */
export function meanExtra(reports: readonly AttentionReport[], key: string): number {
  const values = reports.map((r) => r.extra?.[key]).filter((x): x is number => typeof x === 'number')
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length
}

/**
 * The configuration of `method` for `prompt` on `model` at a target sparsity, as
 * {@link compareWithDense} sizes it (`budgetFor`; Vertical-Slash and FlexPrefill calibrated on
 * the prompt's measured exact sparsity, see `calibratedRun`, both in `@attnlab/sparse-attention`).
 * For generation with a sparse method: the methods' own defaults are the Sparse Frontier study's
 * sizes for 16K+ token prompts (arXiv 2504.17768 [v2], A.1; budgets for a sparsity as in its
 * Table 3) and skip nothing on short prompts (Quest's even refuses prompts under 1040 tokens).
 *
 * @param model - the model the prompt runs on (Vertical-Slash / FlexPrefill calibration runs
 *   its forward pass on the prompt; nothing else is computed)
 * @param prompt - the prompt's token ids; its length `n` sizes the budgets
 * @param method - the method to size
 * @param target - the target sparsity in [0, 1)
 * @param flags - user values by config key (they win over the rules)
 * @returns the full configuration for `createKernel(method, ...)`
 * @throws ConfigError (from `@attnlab/sparse-attention`) for invalid user values
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

/**
 * Mean KL(p || q) (nats) and top-1 agreement between two sets of log-distributions
 * `[rows, vocab]` (row-major, natural-log probabilities; `-Infinity` for probability 0).
 *
 * @param denseLog - the reference log-distributions p, `[rows, vocab]`
 * @param sparseLog - the compared log-distributions q, `[rows, vocab]`
 * @param rows - the number of distributions
 * @param vocab - the vocabulary size
 * @returns `kl`: mean over rows of KL(p || q) (each row clamped at 0), nats; `top1`: fraction of
 *   rows whose argmax agrees (ties toward the lower index); 0 and 1 for no rows
 */
export function compareDistributions(
  denseLog: Float64Array,
  sparseLog: Float64Array,
  rows: number,
  vocab: number,
): { kl: number; top1: number } {
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

/** Logits of every prompt position with a kernel, `[n, vocab]`, and the attention reports. */
function prefillLogits(
  model: Transformer,
  prompt: readonly number[],
  kernel: SparseAttentionKernel,
): { logits: Float32Array; reports: AttentionReport[] } {
  const reports: AttentionReport[] = []
  const out = model.forward([[...prompt]], { attention: kernel, attentionReports: reports })
  const logits = out.dataSync().slice() as Float32Array
  out.dispose()
  return { logits, reports }
}

/**
 * Teacher-forced decode: logits after each of `tokens` fed one at a time after the prompt,
 * `[m, vocab]`, and the decode reports.
 */
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

function checkInputs(
  model: Transformer,
  tokens: readonly number[],
  methods: readonly SparseMethodName[],
  sparsities: readonly number[],
  decodeSteps: number,
): void {
  const known = Object.keys(SPARSE_METHODS)
  const unknown = methods.find((m) => !known.includes(m))
  if (methods.length === 0 || unknown !== undefined) {
    throw new ExperimentInputError(
      'methods',
      `methods must be a non-empty list of ${known.join(', ')}; got ${unknown === undefined ? 'none' : `'${unknown}'`}`,
      { value: unknown ?? null },
    )
  }
  const bad = sparsities.find((s) => !(Number.isFinite(s) && s >= 0 && s < 1))
  if (sparsities.length === 0 || bad !== undefined) {
    throw new ExperimentInputError(
      'sparsities',
      `sparsities must be a non-empty list of numbers in [0, 1); got ${bad === undefined ? 'none' : bad}`,
      { value: bad ?? null },
    )
  }
  if (!Number.isInteger(decodeSteps) || decodeSteps < 1) {
    throw new ExperimentInputError('decodeSteps', `decodeSteps must be an integer >= 1; got ${decodeSteps}`, {
      value: decodeSteps,
    })
  }
  const { dVocab, nCtx } = model.config
  const n = tokens.length
  if (n < 2) {
    throw new ExperimentInputError('tokens', `the prompt has ${n} token(s); comparing needs at least 2`, { length: n })
  }
  if (n > nCtx) {
    throw new ExperimentInputError('tokens', `the prompt has ${n} tokens but the model's context is ${nCtx}`, {
      length: n,
      nCtx,
    })
  }
  const outside = tokens.findIndex((t) => !Number.isInteger(t) || t < 0 || t >= dVocab)
  if (outside >= 0) {
    throw new ExperimentInputError(
      'tokens',
      `token id ${tokens[outside]} at position ${outside} is outside the vocabulary [0, ${dVocab})`,
      { index: outside, value: tokens[outside], dVocab },
    )
  }
}

/**
 * Compares sparse attention methods with dense attention on one prompt: for prefill methods the
 * next-token distributions at every prompt position, for decode methods those of `decodeSteps`
 * teacher-forced decode steps along dense's greedy continuation. Each method runs at each target
 * sparsity, sized for the prompt by `budgetFor` / `calibratedRun` (`@attnlab/sparse-attention`:
 * Vertical-Slash and FlexPrefill calibrated on the measured exact sparsity). Reports top-1
 * agreement, KL(dense || sparse) and both sparsities per method and target sparsity, the
 * evaluation of The Sparse Frontier (Nawrot et al., arXiv 2504.17768 [v2], sections 2 and 4, A.1) at
 * the scale of a small model. Runs in any runtime (no file access); leaves no tensors behind.
 *
 * @param model - the model; its `nCtx` bounds the prompt and the decode steps
 * @param tokens - the prompt's token ids, integers in `[0, dVocab)`, at least 2 and at most `nCtx`
 * @param methods - the methods to compare (`dense`, the reference, is skipped if listed)
 * @param options - target sparsities, decode steps and user method sizes
 * @returns one row per method and target sparsity, with the prompt length and decode steps run
 * @throws ExperimentInputError (`INVALID_ARGUMENT`) for an unknown method, a sparsity outside
 *   [0, 1), a `decodeSteps` below 1, a prompt of fewer than 2 tokens, longer than the context, with
 *   an id outside the vocabulary, or filling the context when a decode method needs room to decode
 * @throws ConfigError (from `@attnlab/sparse-attention`) for invalid user method sizes
 * @example
 * ```ts
 * const { rows } = await compareWithDense(model, prompt, ['snapkv', 'quest'], { sparsities: [0.5, 0.8] })
 * for (const r of rows) console.log(r.method, r.targetSparsity, r.exactSparsity, r.klDenseSparse, r.top1Agreement)
 * ```
 */
export async function compareWithDense(
  model: Transformer,
  tokens: readonly number[],
  methods: readonly SparseMethodName[],
  options: CompareWithDenseOptions = {},
): Promise<CompareWithDenseResult> {
  const sparsities = options.sparsities ?? DEFAULT_COMPARE_SPARSITIES
  const decodeSteps = options.decodeSteps ?? DEFAULT_COMPARE_DECODE_STEPS
  checkInputs(model, tokens, methods, sparsities, decodeSteps)
  const prompt = tokens
  const { dVocab, nCtx } = model.config
  const n = prompt.length
  const flags = options.flags ?? {}
  const reference = dense()
  const compared = methods.filter((m) => m !== 'dense')
  const rows: CompareRow[] = []
  const needsDecode = compared.some((m) => SPARSE_METHODS[m].phase === 'decode')
  const denseLog = logSoftmaxRows(prefillLogits(model, prompt, reference).logits, n, dVocab)
  let steps: number[] = []
  let denseDecodeLog: Float64Array = new Float64Array(0)
  if (needsDecode) {
    const m = Math.min(decodeSteps, nCtx - n)
    if (m < 1) {
      throw new ExperimentInputError(
        'tokens',
        `the prompt fills the context (${n} of ${nCtx} tokens): no room for decode steps; shorten the prompt`,
        { length: n, nCtx },
      )
    }
    steps = [...((await generate(model, [[...prompt]], { maxTokens: m, temperature: 0 })).tokens[0] ?? [])]
    denseDecodeLog = logSoftmaxRows(decodeLogits(model, prompt, steps, reference).logits, steps.length, dVocab)
  }
  for (const method of compared) {
    const phase = SPARSE_METHODS[method].phase as 'prefill' | 'decode'
    for (const target of sparsities) {
      const run = (config: Record<string, unknown>) => {
        const kernel = createKernel(method, config as never)
        const result =
          phase === 'prefill' ? prefillLogits(model, prompt, kernel) : decodeLogits(model, prompt, steps, kernel)
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
  return { promptTokens: n, context: nCtx, decodeSteps: Math.min(decodeSteps, nCtx - n), rows }
}

/**
 * Analysis metrics for learning-dynamics experiments, computed from hook caches and weights
 * (Yüksel et al., arXiv 2602.19143; the metrics logged by the authors' released code):
 *
 * - per-position loss (nats);
 * - per-head attention entropy (nats);
 * - per-head attention mass on each group of relative offsets (sparse-markov: each span);
 * - value alignment of each minimal-model head `W_V^h[:d, :d]` with each teacher matrix;
 * - `KL(teacher_k || model)` for the truncated teachers keeping the `k` most important spans.
 *
 * Conventions: a model output at input position `i` predicts token `i + 1`; metrics average over
 * the predictions that are scored (`lossMask[:, 1:] = 1`), i.e. the query positions whose next
 * token the task scores.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError, type OffsetGroup, ShapeError, type TokenBatch } from '@attnlab/core'
import { configSchema, customField, integerField, parseConfig, type z } from '@attnlab/core/schema'
import { hasAttention } from './config.ts'
import { hookName, type ForwardHook, type HookName } from './hooks.ts'
import type { Transformer } from './model.ts'

/**
 * A task whose teacher is known (the sparse-markov task of `@attnlab/markov` has this shape):
 * matrices `A_i` (`d x d`, row-major, `A_i[y * d + x]` = token x's contribution to output y),
 * importance weights `c_i`, spans, and the teacher's next-token distributions.
 *
 * @category Metrics
 */
export interface TeacherSource {
  /** The teacher's parameters (oldest span first). */
  readonly teacher: {
    readonly matrices: readonly Float64Array[]
    readonly weights: readonly number[]
    readonly spans: readonly number[]
  }
  /**
   * Next-token distributions of the (truncated) teacher at every scored position:
   * float32 `[batchSize, seqLength, d]` (`out[b, p, :]` is the distribution of token `p`).
   */
  teacherProbabilities(batch: TokenBatch, options?: { keepSpans?: number }): Float32Array
}

/**
 * Metrics of one evaluation.
 *
 * @category Metrics
 */
export interface AnalysisMetrics {
  /** Mean loss (nats) over the scored predictions of the analysed batch. */
  readonly loss: number
  /**
   * Mean loss (nats) per predicted position `1 .. seqLength - 1` (index 0 = token 1); `null` where nothing is scored.
   */
  readonly perPositionLoss: readonly (number | null)[]
  /**
   * Mean attention entropy (nats) per `[layer][head]` over scored query positions; empty for a model without
   * attention (the mixer, see `hasAttention`).
   */
  readonly attentionEntropy: readonly (readonly number[])[]
  /** Mean attention mass per `[layer][head][group]` on each offset group (absent without groups or attention). */
  readonly offsetGroupMass?: readonly (readonly (readonly number[])[])[]
  /** Names of the offset groups, in the order of `offsetGroupMass`'s last axis. */
  readonly offsetGroupNames?: readonly string[]
  /** Value alignment per `[head][teacher matrix]` (minimal model with a teacher only). */
  readonly valueAlignment?: {
    /** Frobenius inner product `<W_V^h[:d,:d]^T, A_k>`. */
    readonly inner: readonly (readonly number[])[]
    /** Cosine of the same. */
    readonly cosine: readonly (readonly number[])[]
  }
  /** `KL(teacher_k || model)` (nats, mean over scored predictions) for `k = 1 .. K` (index `k - 1`). */
  readonly teacherKL?: readonly number[]
  /** Mean entropy (nats) of the full teacher's next-token distribution (the loss floor). */
  readonly teacherEntropy?: number
}

/**
 * The schema of {@link AnalyzeOptions}: each option's meaning and default, declared once.
 *
 * @category Metrics
 */
export const analyzeOptionsSchema = configSchema({
  /** Offset groups for attention mass (e.g. `task.offsetGroups`). */
  offsetGroups: customField<readonly OffsetGroup[]>('offset groups for the attention mass').optional(),
  /** The teacher (for KL and value alignment). */
  teacher: customField<TeacherSource>('the teacher, for KL and value alignment').optional(),
  /** Sequences per forward pass (default 512). */
  chunkSize: integerField('sequences per forward pass', { min: 1 }).default(512),
  /** Hooks of every pass (e.g. a trainer's attention bias, so the metrics see the model as trained). */
  fwdHooks: customField<readonly ForwardHook[]>('hooks of every pass').optional(),
})

/**
 * Options of {@link analyze} (see {@link analyzeOptionsSchema}).
 *
 * @category Metrics
 */
export type AnalyzeOptions = Readonly<z.input<typeof analyzeOptionsSchema>>

/** Mean entropy of each head's pattern rows, and mass on offset groups, over the chosen query rows. */
function patternStatistics(
  pattern: Float32Array,
  batch: number,
  heads: number,
  pos: number,
  rowWeight: (b: number, i: number) => number,
  groups: readonly OffsetGroup[],
  entropy: Float64Array,
  mass: Float64Array,
): void {
  for (let b = 0; b < batch; b++) {
    for (let i = 0; i < pos; i++) {
      const w = rowWeight(b, i)
      if (w === 0) continue
      for (let h = 0; h < heads; h++) {
        const row = ((b * heads + h) * pos + i) * pos
        let e = 0
        for (let j = 0; j <= i; j++) {
          const p = pattern[row + j] as number
          if (p > 0) e -= p * Math.log(p)
        }
        entropy[h] = (entropy[h] as number) + w * e
        groups.forEach((group, g) => {
          let m = 0
          for (const offset of group.offsets) {
            const j = i - offset
            if (j >= 0) m += pattern[row + j] as number
          }
          mass[h * groups.length + g] = (mass[h * groups.length + g] as number) + w * m
        })
      }
    }
  }
}

/**
 * Computes {@link AnalysisMetrics} on a batch of task sequences: runs the model with a cache of
 * every layer's `hook_pattern`, reads logits and patterns, and compares with the teacher.
 *
 * @param model - the model (any architecture)
 * @param batch - sequences of the task (`tokens`, `lossMask`), `seqLength - 1 <= nCtx`
 * @param options - offset groups, teacher, chunk size
 * @returns the metrics
 * @throws `ShapeError` (`@attnlab/core`) if the batch does not fit the model; `InvalidArgumentError`
 *   (`@attnlab/core`) if nothing in the batch is scored; `ConfigError` (`@attnlab/core`) for an
 *   unknown option name
 * @category Metrics
 */
export async function analyze(
  model: Transformer,
  batch: TokenBatch,
  options: AnalyzeOptions = {},
): Promise<AnalysisMetrics> {
  const settings = parseConfig(analyzeOptionsSchema, options, 'analyze')
  const { nHeads, dVocab } = model.config
  // A model without attention (the mixer) has no patterns: no entropy, no offset-group mass.
  const nLayers = hasAttention(model.config) ? model.config.nLayers : 0
  const { batchSize, seqLength, tokens, lossMask } = batch
  const T = seqLength - 1
  if (T < 1 || T > model.config.nCtx)
    throw new ShapeError(
      `sequences of ${seqLength} tokens give ${T} inputs; the model takes 1 .. nCtx = ${model.config.nCtx}`,
    )
  const groups = nLayers === 0 ? [] : (settings.offsetGroups ?? [])
  const chunk = settings.chunkSize
  const entropy = Array.from({ length: nLayers }, () => new Float64Array(nHeads))
  const mass = Array.from({ length: nLayers }, () => new Float64Array(nHeads * groups.length))
  const positionLoss = new Float64Array(T)
  const positionCount = new Float64Array(T)
  const K = settings.teacher?.teacher.matrices.length ?? 0
  const kl = new Float64Array(K)
  let teacherEntropy = 0
  let lossSum = 0
  let scored = 0
  const patternNames: HookName[] = Array.from({ length: nLayers }, (_, l) => hookName.pattern(l))
  for (let start = 0; start < batchSize; start += chunk) {
    const size = Math.min(chunk, batchSize - start)
    const inputs = new Int32Array(size * T)
    for (let b = 0; b < size; b++)
      inputs.set(tokens.subarray((start + b) * seqLength, (start + b) * seqLength + T), b * T)
    const input = tf.tensor2d(inputs, [size, T], 'int32')
    const { logits, cache } = model.runWithCache(input, {
      namesFilter: patternNames,
      ...(settings.fwdHooks === undefined ? {} : { fwdHooks: settings.fwdHooks }),
    })
    input.dispose()
    let logProbabilities: Float32Array
    const patterns: Float32Array[] = []
    try {
      const logSoftmax = tf.tidy(() => tf.logSoftmax(logits))
      logProbabilities = (await logSoftmax.data()) as Float32Array
      logSoftmax.dispose()
      for (const name of patternNames) patterns.push((await cache.get(name).data()) as Float32Array)
    } finally {
      logits.dispose()
      cache.dispose()
    }
    const sub: TokenBatch = {
      tokens: tokens.subarray(start * seqLength, (start + size) * seqLength),
      lossMask: lossMask.subarray(start * seqLength, (start + size) * seqLength),
      batchSize: size,
      seqLength,
    }
    const weight = (b: number, i: number): number => (lossMask[(start + b) * seqLength + i + 1] === 1 ? 1 : 0)
    for (let b = 0; b < size; b++) {
      for (let i = 0; i < T; i++) {
        if (weight(b, i) === 0) continue
        const target = tokens[(start + b) * seqLength + i + 1] as number
        const loss = -(logProbabilities[(b * T + i) * dVocab + target] as number)
        positionLoss[i] = (positionLoss[i] as number) + loss
        positionCount[i] = (positionCount[i] as number) + 1
        lossSum += loss
        scored += 1
      }
    }
    patterns.forEach((pattern, l) => {
      patternStatistics(pattern, size, nHeads, T, weight, groups, entropy[l] as Float64Array, mass[l] as Float64Array)
    })
    if (settings.teacher !== undefined) {
      for (let k = 1; k <= K; k++) {
        const probabilities = settings.teacher.teacherProbabilities(sub, { keepSpans: k })
        const d = probabilities.length / (size * seqLength)
        if (d > dVocab) throw new ShapeError(`the teacher has ${d} tokens but the model only ${dVocab}`)
        for (let b = 0; b < size; b++) {
          for (let i = 0; i < T; i++) {
            if (weight(b, i) === 0) continue
            const pBase = (b * seqLength + i + 1) * d
            const mBase = (b * T + i) * dVocab
            let value = 0
            let h = 0
            for (let y = 0; y < d; y++) {
              const p = probabilities[pBase + y] as number
              if (p > 0) {
                value += p * (Math.log(p) - (logProbabilities[mBase + y] as number))
                h -= p * Math.log(p)
              }
            }
            kl[k - 1] = (kl[k - 1] as number) + value
            if (k === K) teacherEntropy += h
          }
        }
      }
    }
  }
  if (scored === 0) throw new InvalidArgumentError('no position of the batch is scored (lossMask[:, 1:] is all 0)')
  const result: {
    -readonly [K in keyof AnalysisMetrics]: AnalysisMetrics[K]
  } = {
    loss: lossSum / scored,
    perPositionLoss: Array.from(positionLoss, (v, i) =>
      (positionCount[i] as number) > 0 ? v / (positionCount[i] as number) : null,
    ),
    attentionEntropy: entropy.map((row) => Array.from(row, (v) => v / scored)),
  }
  if (groups.length > 0) {
    result.offsetGroupMass = mass.map((row) =>
      Array.from({ length: nHeads }, (_, h) =>
        Array.from({ length: groups.length }, (_, g) => (row[h * groups.length + g] as number) / scored),
      ),
    )
    result.offsetGroupNames = groups.map((g) => g.name)
  }
  if (settings.teacher !== undefined) {
    result.teacherKL = Array.from(kl, (v) => v / scored)
    result.teacherEntropy = teacherEntropy / scored
    if (model.config.architecture === 'minimal') result.valueAlignment = await valueAlignment(model, settings.teacher)
  }
  return result
}

/**
 * Value alignment of each minimal-model head with each teacher matrix (paper (b)'s
 * `value_inner_head{h}_teacher{k}`): the Frobenius inner product and cosine of `W_V^h[:d, :d]`
 * (TransformerLens layout `[input token, output logit]`, hence transposed) with `A_k`
 * (`[output, input]`). A transiently negative inner product is the "cooperative correction"
 * signature.
 *
 * @param model - a `minimal` model
 * @param teacher - the teacher (its `d` must not exceed `dVocab`)
 * @returns `inner[h][k]` and `cosine[h][k]`
 * @throws `InvalidArgumentError` (`@attnlab/core`) for a non-minimal model or a teacher that does not fit
 * @category Metrics
 */
export async function valueAlignment(
  model: Transformer,
  teacher: TeacherSource,
): Promise<{ inner: number[][]; cosine: number[][] }> {
  if (model.config.architecture !== 'minimal') {
    throw new InvalidArgumentError(
      `value alignment is defined for the minimal model (this model is '${model.config.architecture}')`,
    )
  }
  const { nHeads, dModel } = model.config
  const matrices = teacher.teacher.matrices
  const d = Math.round(Math.sqrt(matrices[0]?.length ?? 0))
  if (d === 0 || d > model.config.dVocab || matrices.some((m) => m.length !== d * d)) {
    throw new InvalidArgumentError(`teacher matrices must be d x d with d <= dVocab ${model.config.dVocab}`)
  }
  // [nHeads, dModel, dModel]
  const wV = (await (model.getWeights().get('blocks.0.attn.W_V') as tf.Variable).data()) as Float32Array
  const inner: number[][] = []
  const cosine: number[][] = []
  for (let h = 0; h < nHeads; h++) {
    const innerRow: number[] = []
    const cosineRow: number[] = []
    for (const a of matrices) {
      let dot = 0
      let wNorm = 0
      let aNorm = 0
      for (let x = 0; x < d; x++) {
        for (let y = 0; y < d; y++) {
          const w = wV[(h * dModel + x) * dModel + y] as number // W_V^h[x, y]: input token x -> logit y
          const value = a[y * d + x] as number // A[y, x]
          dot += w * value
          wNorm += w * w
          aNorm += value * value
        }
      }
      innerRow.push(dot)
      cosineRow.push(wNorm > 0 && aNorm > 0 ? dot / Math.sqrt(wNorm * aNorm) : 0)
    }
    inner.push(innerRow)
    cosine.push(cosineRow)
  }
  return { inner, cosine }
}

/**
 * Whether heads of a minimal model have separated: the largest relative difference between any
 * two heads' query matrices, `max_{h,g} ||W_Q^h - W_Q^g|| / max(||W_Q^h||, tiny)`. Exactly 0 while
 * the heads are identical (the symmetric plateau).
 *
 * @returns the largest pairwise relative difference (0 for one head)
 * @category Metrics
 */
export async function headSeparation(model: Transformer, parameter = 'blocks.0.attn.W_Q'): Promise<number> {
  const variable = model.getWeights().get(parameter)
  if (variable === undefined) throw new InvalidArgumentError(`the model has no parameter '${parameter}'`)
  const heads = variable.shape[0] as number
  const size = variable.size / heads
  const values = (await variable.data()) as Float32Array
  let worst = 0
  for (let h = 0; h < heads; h++) {
    for (let g = h + 1; g < heads; g++) {
      let diff = 0
      let norm = 0
      for (let i = 0; i < size; i++) {
        const a = values[h * size + i] as number
        const b = values[g * size + i] as number
        diff += (a - b) * (a - b)
        norm += a * a
      }
      worst = Math.max(worst, Math.sqrt(diff) / Math.max(Math.sqrt(norm), 1e-30))
    }
  }
  return worst
}

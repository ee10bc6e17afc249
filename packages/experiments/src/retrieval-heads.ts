/**
 * Which heads retrieve: per layer and head of a model trained on a retrieval task, how much of
 * the attention at each answer-predicting position goes to the prompt positions that hold the
 * gold answer token (the copy the task asks for), against what uniform attention would give,
 * with each head's previous-token and self attention on the prompt. The inspection behind The
 * Sparse Frontier's measurements on models trained here (Nawrot et al., arXiv 2504.17768 [v2]:
 * the methods keep or skip exactly these query-key entries), read from the
 * `blocks.{l}.attn.hook_pattern` hook.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import type { RetrievalTask } from '@attnlab/markov'
import { hookName, type HookName, type Transformer } from '@attnlab/transformer'
import { ExperimentInputError } from './errors.ts'

/** One head's attention on one (task, length) (every number a mean, in [0, 1]). */
export interface RetrievalHeadRow {
  /** The task's kind, e.g. `'niah-tokens'`. */
  readonly task: string
  /** The context length (the task's `nCtx`, tokens). */
  readonly length: number
  /** Sequences measured. */
  readonly samples: number
  /** Layer index. */
  readonly layer: number
  /** Head index within the layer. */
  readonly head: number
  /**
   * Retrieval attention: at the position that predicts each answer token (the one before it), the
   * attention summed over the prompt positions (before the first answer) holding the gold answer
   * token; mean over the answers that have such a position in the prompt. `null` when no answer has one.
   */
  readonly retrieval: number | null
  /** What uniform causal attention would give there: (source positions) / (positions attended), same mean. */
  readonly uniform: number | null
  /** Attention from each prompt position `p >= 1` to `p - 1`, mean over the prompt. */
  readonly previousToken: number
  /** Attention from each prompt position to itself, mean over the prompt. */
  readonly self: number
}

/**
 * Throws when `task` uses more token ids than `model` embeds (the model would read ids past its
 * vocabulary). Shared by {@link measureRetrievalHeads} and `runSparseEval`.
 *
 * @throws ExperimentInputError (`INVALID_ARGUMENT`, parameter `tasks`)
 * @internal
 */
export function checkTaskFits(model: Transformer, task: RetrievalTask): void {
  if (task.vocabSize > model.config.dVocab) {
    throw new ExperimentInputError(
      'tasks',
      `task '${task.kind}' uses ${task.vocabSize} token ids but the model's vocabulary is ${model.config.dVocab}`,
      { vocabSize: task.vocabSize, dVocab: model.config.dVocab },
    )
  }
}

/** Sequences per forward pass: bounds the pattern tensors at `chunk * nHeads * T^2` floats per layer. */
const MAX_PATTERN_FLOATS = 1 << 24

/**
 * Measures every head of `model` on `sequences` of `task` (teacher-forced: the gold tokens are fed
 * at every position, dense attention). For answer position `a` with gold token `g`, the query is
 * position `a - 1` and its sources are the prompt positions `p < answerPositions[0]` with token `g`
 * (in `niah-tokens` the haystack values equal to the needle's value, the needle among them; in
 * `multihop-tokens` the final value's statements); `retrieval` is the attention there summed over
 * the sources, `uniform` is `sources / a`. A head whose `retrieval` is far above `uniform` copies the
 * answer from the context.
 *
 * @param model - the trained model; `task.seqLength - 1` must be at most its `nCtx`
 * @param task - the retrieval task the sequences come from
 * @param sequences - each `task.seqLength` tokens (`Int32Array`), at least one
 * @returns one row per layer and head, layer-major
 * @throws ExperimentInputError (`INVALID_ARGUMENT`) for no sequences, a sequence of the wrong length,
 *   a task longer than the model's context or with more token ids than its vocabulary
 * @example
 * ```ts
 * const task = new NiahTokensTask({ nCtx: 256, keyTokens: 1024 })
 * const batch = task.sample(16, Rng.fromSeed(0))
 * const seqs = Array.from({ length: 16 }, (_, b) => batch.tokens.subarray(b * 257, (b + 1) * 257))
 * const rows = measureRetrievalHeads(model, task, seqs) // e.g. L1H1 retrieval 0.87, uniform 0.006
 * ```
 * @category Sparse evaluation
 */
export async function measureRetrievalHeads(
  model: Transformer,
  task: RetrievalTask,
  sequences: readonly Int32Array[],
): Promise<RetrievalHeadRow[]> {
  const L = task.seqLength
  const T = L - 1
  if (sequences.length === 0) throw new ExperimentInputError('sequences', 'no sequence to measure', {})
  if (T > model.config.nCtx) {
    throw new ExperimentInputError('tasks', `task length ${T} is above the model's nCtx ${model.config.nCtx}`, {
      length: T,
      nCtx: model.config.nCtx,
    })
  }
  checkTaskFits(model, task)
  for (const s of sequences) {
    if (s.length !== L) {
      throw new ExperimentInputError('sequences', `a sequence has ${s.length} tokens; the task's have ${L}`, {
        length: s.length,
        expected: L,
      })
    }
  }
  const { nLayers, nHeads } = model.config
  const H = nLayers * nHeads
  const prompt = task.answerPositions[0] as number
  const names: HookName[] = Array.from({ length: nLayers }, (_, l) => hookName.pattern(l))
  const retrieval = new Float64Array(H)
  const previous = new Float64Array(H)
  const self = new Float64Array(H)
  let uniform = 0
  let answers = 0
  let promptPositions = 0
  const chunk = Math.max(1, Math.floor(MAX_PATTERN_FLOATS / (nHeads * T * T)))
  for (let start = 0; start < sequences.length; start += chunk) {
    const part = sequences.slice(start, start + chunk)
    const inputs = new Int32Array(part.length * T)
    for (const [b, s] of part.entries()) inputs.set(s.subarray(0, T), b * T)
    const input = tf.tensor2d(inputs, [part.length, T], 'int32')
    const { logits, cache } = model.runWithCache(input, { namesFilter: names })
    const patterns: Float32Array[] = []
    try {
      for (const name of names) patterns.push((await cache.get(name).data()) as Float32Array)
    } finally {
      tf.dispose([input, logits])
      cache.dispose()
    }
    part.forEach((s, b) => {
      for (const a of task.answerPositions) {
        const gold = s[a]
        const sources: number[] = []
        for (let p = 0; p < prompt; p++) if (s[p] === gold) sources.push(p)
        if (sources.length === 0) continue
        const q = a - 1
        answers++
        uniform += sources.length / (q + 1)
        for (let l = 0; l < nLayers; l++) {
          const pattern = patterns[l] as Float32Array
          for (let h = 0; h < nHeads; h++) {
            const row = ((b * nHeads + h) * T + q) * T
            let mass = 0
            for (const p of sources) mass += pattern[row + p] as number
            retrieval[l * nHeads + h] = (retrieval[l * nHeads + h] as number) + mass
          }
        }
      }
      for (let p = 0; p < prompt; p++) {
        promptPositions++
        for (let l = 0; l < nLayers; l++) {
          const pattern = patterns[l] as Float32Array
          for (let h = 0; h < nHeads; h++) {
            const row = ((b * nHeads + h) * T + p) * T
            self[l * nHeads + h] = (self[l * nHeads + h] as number) + (pattern[row + p] as number)
            if (p >= 1)
              previous[l * nHeads + h] = (previous[l * nHeads + h] as number) + (pattern[row + p - 1] as number)
          }
        }
      }
    })
  }
  const previousCount = promptPositions - sequences.length
  const rows: RetrievalHeadRow[] = []
  for (let l = 0; l < nLayers; l++) {
    for (let h = 0; h < nHeads; h++) {
      const i = l * nHeads + h
      rows.push({
        task: task.kind,
        length: T,
        samples: sequences.length,
        layer: l,
        head: h,
        retrieval: answers === 0 ? null : (retrieval[i] as number) / answers,
        uniform: answers === 0 ? null : uniform / answers,
        previousToken: previousCount > 0 ? (previous[i] as number) / previousCount : 0,
        self: promptPositions > 0 ? (self[i] as number) / promptPositions : 0,
      })
    }
  }
  return rows
}

/**
 * The rows of {@link measureRetrievalHeads} as aligned text, one line per head, the head with the
 * highest retrieval attention of each (task, length) marked `*`.
 *
 * @param rows - what {@link measureRetrievalHeads} returned (any number of tasks and lengths)
 * @returns the header and one line per row
 * @category Sparse evaluation
 */
export function retrievalHeadsTable(rows: readonly RetrievalHeadRow[]): string[] {
  const best = new Map<string, number>()
  for (const r of rows) {
    const key = `${r.task}/${r.length}`
    best.set(key, Math.max(best.get(key) ?? Number.NEGATIVE_INFINITY, r.retrieval ?? Number.NEGATIVE_INFINITY))
  }
  const f = (x: number | null): string => (x === null ? 'n/a' : x.toFixed(3))
  const lines = [`${'task'.padEnd(16)} ${'length'.padStart(6)}  head    retrieval  uniform  previous-token   self`]
  for (const r of rows) {
    const mark = r.retrieval !== null && r.retrieval === best.get(`${r.task}/${r.length}`) ? '*' : ' '
    lines.push(
      `${r.task.padEnd(16)} ${String(r.length).padStart(6)}  L${r.layer}H${r.head}${mark}  ` +
        `${f(r.retrieval).padStart(9)}  ${f(r.uniform).padStart(7)}  ${f(r.previousToken).padStart(14)}  ` +
        `${f(r.self).padStart(5)}`,
    )
  }
  return lines
}

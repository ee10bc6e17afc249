/**
 * `niah-tokens`: needle-in-a-haystack retrieval over a synthetic vocabulary, the token version of
 * RULER's NIAH as The Sparse Frontier uses it (Nawrot et al., arXiv 2504.17768 [v2], section 4
 * and A.2: a haystack made only of key-value statements, 4 of them queried, scored by per-key
 * exact match).
 *
 * @module
 */
import type { Rng } from '@attnlab/core'
import { booleanField, configSchema, integerField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
import {
  type AnswerKind,
  type AnswerScore,
  type RetrievalTask,
  distinct,
  scoreAnswer,
  tooFewTokens,
  tooLong,
} from './retrieval.ts'
import { deepFreeze } from './sparse-markov.ts'
import type { TokenBatch } from './task.ts'
import { sampleBatch } from './validate.ts'

/** Token 0: filler before the haystack when the pairs do not fill the sequence exactly. */
export const NIAH_FILL_TOKEN = 0
/** Token 1: the query marker that ends the haystack (and, with `questionFirst`, opens the sequence). */
export const NIAH_QUERY_TOKEN = 1

/**
 * The schema of a {@link NiahTokensConfig}: each parameter's meaning, range and default.
 *
 * @category Retrieval tasks
 */
export const niahTokensSchema = configSchema({
  /** The model's context: each sequence has `nCtx + 1` tokens (the last one is only a target). */
  nCtx: integerField('context tokens (sequence = nCtx + 1 tokens)', { min: 8, max: 1 << 20 }).default(256),
  /** Needles: distinct haystack pairs queried after the marker (the study's NIAH queries 4). */
  needles: integerField('queried needles', { min: 1, max: 64 }).default(4),
  /** Key tokens: ids `2 .. keyTokens + 1`; every pair has its own key, so at least the pair count. */
  keyTokens: integerField('distinct key tokens', { min: 1, max: 1 << 20 }).default(512),
  /** Value tokens: ids after the keys, drawn uniformly (with repetition) for each pair. */
  valueTokens: integerField('distinct value tokens', { min: 2, max: 1 << 20 }).default(64),
  /**
   * State the question before the haystack too (the study's template, [v2] A.2): the sequence opens
   * with the marker and the queried keys in the order they are asked, so each haystack pair comes
   * after the question (a model can mark the queried pairs while reading them, which the trailing
   * observation window of SnapKV and the prefill estimators can then find). Fewer pairs keep the
   * length `nCtx + 1`. Default false: the question only after the haystack.
   */
  questionFirst: booleanField(
    'also state the question (marker and queried keys) before the haystack, as the study does',
  ).default(false),
})

/**
 * Configuration of a {@link NiahTokensTask} (declared by {@link niahTokensSchema}).
 *
 * @category Retrieval tasks
 */
export type NiahTokensConfig = Readonly<z.output<typeof niahTokensSchema>>

/**
 * Default: nCtx 256 (124 pairs), 4 needles, 512 key tokens, 64 value tokens, the question only
 * after the haystack.
 *
 * @category Retrieval tasks
 */
export function defaultNiahTokensConfig(): NiahTokensConfig {
  return schemaDefaults(niahTokensSchema, 'niah-tokens')
}

/**
 * Needle in a haystack of key-value token pairs. Layout of each of the `nCtx + 1` tokens:
 *
 * `[fill]? k_1 v_1 k_2 v_2 ... k_P v_P  Q  k_a v_a  k_b v_b ...`
 *
 * `P = floor((nCtx - 2 needles) / 2)` pairs with distinct keys (random order, values uniform),
 * one fill token (id 0) first when `nCtx` is odd, then the query marker `Q` (id 1) and the
 * `needles` queried pairs in random order: each queried key is given and its value is the answer.
 * The loss mask marks only the answer values (the last token of the sequence is the last
 * answer). By default the question appears only after the haystack, where the study's
 * trailing-window estimators see the marker but not the keys still to be asked. With
 * `questionFirst` it is also stated before the haystack, as in the study's template ([v2] A.2):
 *
 * `Q k_a k_b ...  [fill]? k_1 v_1 ... k_P v_P  Q  k_a v_a  k_b v_b ...`
 *
 * with `P = floor((nCtx - 3 needles - 1) / 2)` (the answer positions are the same: the last
 * `2 needles` tokens end in the answers). Vocabulary:
 * `2 + keyTokens + valueTokens` ids (fill, query, keys, values). Scored per answer token
 * (exact match, the study's NIAH accuracy) and strictly (all needles right).
 *
 * @example
 * ```ts
 * const task = new NiahTokensTask({ nCtx: 64, needles: 2 })
 * const batch = task.sample(8, Rng.fromSeed(0)) // tokens [8, 65]
 * ```
 * @category Retrieval tasks
 */
export class NiahTokensTask implements RetrievalTask {
  /** Always `'niah-tokens'`. */
  readonly kind = 'niah-tokens' as const
  /** The resolved, frozen configuration. */
  readonly config: NiahTokensConfig
  /** `2 + keyTokens + valueTokens`. */
  readonly vocabSize: number
  /** `nCtx + 1`. */
  readonly seqLength: number
  /** `'sequence'`: each answer value against its key's gold value. */
  readonly answerKind: AnswerKind = 'sequence'
  /** The value positions after the marker: `seqLength - 2 needles + 1 + 2 i`. */
  readonly answerPositions: readonly number[]
  /** Haystack pairs per sequence. */
  readonly pairs: number
  /** Tokens of the leading question: `needles + 1` with `questionFirst`, else 0. */
  readonly leadingTokens: number

  /**
   * @param config - overrides of {@link defaultNiahTokensConfig}
   * @throws `ConfigError` (`@attnlab/core`) for invalid parameters, a context too short for the
   *   question (both statements of it with `questionFirst`) and one pair per needle, or fewer key
   *   tokens than pairs
   */
  constructor(config: Partial<NiahTokensConfig> = {}) {
    const resolved = parseConfig(niahTokensSchema, config, 'niah-tokens')
    const { nCtx, needles, keyTokens, valueTokens, questionFirst } = resolved
    this.seqLength = nCtx + 1
    this.leadingTokens = questionFirst ? needles + 1 : 0
    this.pairs = Math.floor((nCtx - 2 * needles - this.leadingTokens) / 2)
    if (this.pairs < needles) {
      const what = questionFirst ? 'its question before and after the haystack' : 'their question'
      throw tooLong(
        'niah-tokens',
        4 * needles + 1 + this.leadingTokens,
        this.seqLength,
        `${needles} needles and ${what}`,
      )
    }
    if (keyTokens < this.pairs) {
      throw tooFewTokens('niah-tokens', 'keyTokens', keyTokens, this.pairs, `${this.pairs} pairs with distinct keys`)
    }
    this.config = deepFreeze(resolved)
    this.vocabSize = 2 + keyTokens + valueTokens
    const first = this.seqLength - 2 * needles + 1
    this.answerPositions = Object.freeze(Array.from({ length: needles }, (_, i) => first + 2 * i))
  }

  /**
   * Draws `batchSize` sequences (see the class comment for the layout).
   *
   * @param batchSize - sequences, >= 1
   * @param rng - the random stream
   * @returns tokens and loss mask, `[batchSize, nCtx + 1]`
   * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize`
   */
  sample(batchSize: number, rng: Rng): TokenBatch {
    const { needles, keyTokens, valueTokens } = this.config
    const L = this.seqLength
    const P = this.pairs
    const lead = this.leadingTokens
    const start = L - 1 - 2 * needles - 2 * P
    return sampleBatch(batchSize, L, (tokens, lossMask, base) => {
      const keys = distinct(rng, keyTokens, P)
      for (let p = lead; p < start; p++) tokens[base + p] = NIAH_FILL_TOKEN
      for (let i = 0; i < P; i++) {
        tokens[base + start + 2 * i] = 2 + (keys[i] as number)
        tokens[base + start + 2 * i + 1] = 2 + keyTokens + rng.int(valueTokens)
      }
      const queried = distinct(rng, P, needles)
      // The leading question (questionFirst): the marker, then the queried keys in the order asked.
      if (lead > 0) {
        tokens[base] = NIAH_QUERY_TOKEN
        queried.forEach((pair, i) => {
          tokens[base + 1 + i] = tokens[base + start + 2 * pair] as number
        })
      }
      let p = L - 2 * needles - 1
      tokens[base + p++] = NIAH_QUERY_TOKEN
      for (const pair of queried) {
        tokens[base + p++] = tokens[base + start + 2 * pair] as number
        tokens[base + p] = tokens[base + start + 2 * pair + 1] as number
        lossMask[base + p++] = 1
      }
    })
  }

  /** Per-token exact match, strict all-needles match (see {@link AnswerScore}). */
  scoreAnswer(gold: ArrayLike<number>, predicted: ArrayLike<number>): AnswerScore {
    return scoreAnswer(this.answerKind, gold, predicted, this.answerPositions.length)
  }

  /** The configuration as plain JSON with `kind: 'niah-tokens'`. */
  describe(): Readonly<Record<string, unknown>> {
    return { kind: this.kind, ...structuredClone(this.config) }
  }
}

/**
 * `multihop-tokens`: two-hop lookup over a synthetic vocabulary (key -> intermediate -> value),
 * the token version of the study's Story Multi-hop (Nawrot et al., arXiv 2504.17768 [v2],
 * section 4, A.2: a low-scope, high-dispersion task scored by exact match).
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

/**
 * The schema of a {@link MultihopTokensConfig}.
 *
 * @category Retrieval tasks
 */
export const multihopTokensSchema = configSchema({
  /** The model's context: each sequence has `nCtx + 1` tokens. */
  nCtx: integerField('context tokens (sequence = nCtx + 1 tokens)', { min: 8, max: 1 << 20 }).default(256),
  /** Queried chains (one answer value each). */
  queries: integerField('queried chains', { min: 1, max: 64 }).default(1),
  /** Name tokens (keys and intermediates share them): at least twice the chain count. */
  nameTokens: integerField('distinct name tokens (keys and intermediates)', { min: 2, max: 1 << 20 }).default(512),
  /** Value tokens, drawn uniformly (with repetition) per chain. */
  valueTokens: integerField('distinct value tokens', { min: 2, max: 1 << 20 }).default(64),
  /**
   * State the question before the statements too (the study's template, [v2] A.2): the sequence
   * opens with the marker and the queried first names in the order they are asked. Fewer chains
   * keep the length `nCtx + 1`. Default false: the question only after the statements.
   */
  questionFirst: booleanField(
    'also state the question (marker and queried first names) before the statements, as the study does',
  ).default(false),
})

/**
 * Configuration of a {@link MultihopTokensTask}.
 *
 * @category Retrieval tasks
 */
export type MultihopTokensConfig = Readonly<z.output<typeof multihopTokensSchema>>

/**
 * Default: nCtx 256 (63 chains), 1 query, 512 name tokens, 64 value tokens, the question only
 * after the statements.
 *
 * @category Retrieval tasks
 */
export function defaultMultihopTokensConfig(): MultihopTokensConfig {
  return schemaDefaults(multihopTokensSchema, 'multihop-tokens')
}

/**
 * Two-hop lookup. `P = floor((nCtx - 2 queries) / 4)` chains `a_i -> b_i -> v_i`, each written
 * as two pair statements `a_i b_i` and `b_i v_i` (2 tokens each); the `2P` statements are shuffled
 * together (a chain's second hop may come first), preceded by fill tokens (id 0) to the exact
 * length, then the query marker (id 1) and, per query, a chain's first name `a` followed by the
 * answer `v` (found only through `b`). Names `a_i, b_i` are `2P` distinct tokens (ids
 * `2 .. nameTokens + 1`), values follow. The loss mask marks only the answers. Scored by exact
 * match (strict: every query right). With `questionFirst` the question is also stated before the
 * statements, as in the study's template ([v2] A.2): `Q a_x a_y ...` (the queried first names in the
 * order they are asked), then the fill, then `P = floor((nCtx - 3 queries - 1) / 4)` chains; the
 * answer positions are unchanged.
 *
 * @category Retrieval tasks
 */
export class MultihopTokensTask implements RetrievalTask {
  /** Always `'multihop-tokens'`. */
  readonly kind = 'multihop-tokens' as const
  /** The resolved, frozen configuration. */
  readonly config: MultihopTokensConfig
  /** `2 + nameTokens + valueTokens`. */
  readonly vocabSize: number
  /** `nCtx + 1`. */
  readonly seqLength: number
  /** `'sequence'`. */
  readonly answerKind: AnswerKind = 'sequence'
  /** The answer positions after the marker. */
  readonly answerPositions: readonly number[]
  /** Chains per sequence. */
  readonly chains: number
  /** Tokens of the leading question: `queries + 1` with `questionFirst`, else 0. */
  readonly leadingTokens: number

  /**
   * @param config - overrides of {@link defaultMultihopTokensConfig}
   * @throws `ConfigError` (`@attnlab/core`) for invalid parameters, a context too short for one
   *   chain per query and the question (both statements of it with `questionFirst`), or fewer name
   *   tokens than `2P`
   */
  constructor(config: Partial<MultihopTokensConfig> = {}) {
    const resolved = parseConfig(multihopTokensSchema, config, 'multihop-tokens')
    const { nCtx, queries, nameTokens, valueTokens, questionFirst } = resolved
    this.seqLength = nCtx + 1
    this.leadingTokens = questionFirst ? queries + 1 : 0
    this.chains = Math.floor((nCtx - 2 * queries - this.leadingTokens) / 4)
    if (this.chains < queries) {
      const what = questionFirst ? 'the question before and after the statements' : 'the question'
      const needed = 6 * queries + 1 + this.leadingTokens
      throw tooLong('multihop-tokens', needed, this.seqLength, `${queries} queried chains and ${what}`)
    }
    if (nameTokens < 2 * this.chains) {
      throw tooFewTokens('multihop-tokens', 'nameTokens', nameTokens, 2 * this.chains, `${this.chains} chains`)
    }
    this.config = deepFreeze(resolved)
    this.vocabSize = 2 + nameTokens + valueTokens
    const first = this.seqLength - 2 * queries + 1
    this.answerPositions = Object.freeze(Array.from({ length: queries }, (_, i) => first + 2 * i))
  }

  /**
   * Draws `batchSize` sequences (see the class comment).
   *
   * @returns tokens and loss mask, `[batchSize, nCtx + 1]`
   * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize`
   */
  sample(batchSize: number, rng: Rng): TokenBatch {
    const { queries, nameTokens, valueTokens } = this.config
    const L = this.seqLength
    const P = this.chains
    const lead = this.leadingTokens
    const start = L - 1 - 2 * queries - 4 * P
    return sampleBatch(batchSize, L, (tokens, lossMask, base) => {
      const names = distinct(rng, nameTokens, 2 * P)
      const values = Array.from({ length: P }, () => 2 + nameTokens + rng.int(valueTokens))
      const order = distinct(rng, 2 * P, 2 * P)
      for (let p = lead; p < start; p++) tokens[base + p] = 0
      order.forEach((statement, slot) => {
        const chain = statement >> 1
        const at = base + start + 2 * slot
        if ((statement & 1) === 0) {
          tokens[at] = 2 + (names[2 * chain] as number)
          tokens[at + 1] = 2 + (names[2 * chain + 1] as number)
        } else {
          tokens[at] = 2 + (names[2 * chain + 1] as number)
          tokens[at + 1] = values[chain] as number
        }
      })
      const queried = distinct(rng, P, queries)
      // The leading question (questionFirst): the marker, then the queried first names in the order asked.
      if (lead > 0) {
        tokens[base] = 1
        queried.forEach((chain, i) => {
          tokens[base + 1 + i] = 2 + (names[2 * chain] as number)
        })
      }
      let p = L - 2 * queries - 1
      tokens[base + p++] = 1
      for (const chain of queried) {
        tokens[base + p++] = 2 + (names[2 * chain] as number)
        tokens[base + p] = values[chain] as number
        lossMask[base + p++] = 1
      }
    })
  }

  /** Exact match per query, strict all-right (see {@link AnswerScore}). */
  scoreAnswer(gold: ArrayLike<number>, predicted: ArrayLike<number>): AnswerScore {
    return scoreAnswer(this.answerKind, gold, predicted, this.answerPositions.length)
  }

  /** The configuration as plain JSON with `kind: 'multihop-tokens'`. */
  describe(): Readonly<Record<string, unknown>> {
    return { kind: this.kind, ...structuredClone(this.config) }
  }
}

/**
 * `cwe-tokens`: common-word extraction over a synthetic vocabulary, the token version of RULER's
 * CWE as The Sparse Frontier uses it (Nawrot et al., arXiv 2504.17768 [v2], section 4, A.2: a
 * few words repeated many times among words repeated a few times; the answer is the set of the
 * frequent words, a high-scope task).
 *
 * @module
 */
import { ConfigError, type Rng } from '@attnlab/core'
import { configSchema, integerField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
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
 * The schema of a {@link CweTokensConfig}.
 *
 * @category Retrieval tasks
 */
export const cweTokensSchema = configSchema({
  /** The model's context: each sequence has `nCtx + 1` tokens. */
  nCtx: integerField('context tokens (sequence = nCtx + 1 tokens)', { min: 8, max: 1 << 20 }).default(256),
  /** Frequent words (the study: 10). */
  frequentWords: integerField('frequent words (the answer set)', { min: 1, max: 1024 }).default(4),
  /** Occurrences of each frequent word (the study: 30). */
  frequentCount: integerField('occurrences of each frequent word', { min: 2, max: 1 << 20 }).default(10),
  /** Occurrences of each rare word (the study: 3); below `frequentCount`. */
  rareCount: integerField('occurrences of each rare word', { min: 1, max: 1 << 20 }).default(2),
  /** Word tokens: at least the frequent words plus as many rare words as fill the context. */
  wordTokens: integerField('distinct word tokens', { min: 2, max: 1 << 20 }).default(512),
})

/**
 * Configuration of a {@link CweTokensTask}.
 *
 * @category Retrieval tasks
 */
export type CweTokensConfig = Readonly<z.output<typeof cweTokensSchema>>

/**
 * Default: nCtx 256, 4 frequent words x 10, rare words x 2, 512 word tokens.
 *
 * @category Retrieval tasks
 */
export function defaultCweTokensConfig(): CweTokensConfig {
  return schemaDefaults(cweTokensSchema, 'cwe-tokens')
}

/**
 * Common-word extraction. Ids: 0 fill, 1 the query marker, words from 2. The context holds
 * `F = frequentWords` distinct words `frequentCount` times each and
 * `R = floor((nCtx - F - F frequentCount) / rareCount)` distinct rare words `rareCount` times
 * each (as many as fit in the `nCtx - F` context tokens), all occurrences shuffled, fill tokens
 * (id 0) first for the rest; then the marker and the answer:
 * the frequent words in ascending id order (a canonical order; scored as a set). The loss mask
 * marks only the answer. Scored by set recall (the study's per-item score; its code reports IoU,
 * also given) and strictly (the exact set).
 *
 * @category Retrieval tasks
 */
export class CweTokensTask implements RetrievalTask {
  /** Always `'cwe-tokens'`. */
  readonly kind = 'cwe-tokens' as const
  /** The resolved, frozen configuration. */
  readonly config: CweTokensConfig
  /** `2 + wordTokens`. */
  readonly vocabSize: number
  /** `nCtx + 1`. */
  readonly seqLength: number
  /** `'set'`. */
  readonly answerKind: AnswerKind = 'set'
  /** The last `frequentWords` positions. */
  readonly answerPositions: readonly number[]
  /** Rare words per sequence. */
  readonly rareWords: number

  /**
   * @param config - overrides of {@link defaultCweTokensConfig}
   * @throws `ConfigError` (`@attnlab/core`) for invalid parameters, `rareCount >= frequentCount`,
   *   a context too short for the frequent words, or too few word tokens for the words that fill it
   */
  constructor(config: Partial<CweTokensConfig> = {}) {
    const resolved = parseConfig(cweTokensSchema, config, 'cwe-tokens')
    const { nCtx, frequentWords: F, frequentCount, rareCount, wordTokens } = resolved
    if (rareCount >= frequentCount) {
      throw new ConfigError('rareCount', `must be below frequentCount (${frequentCount}), got ${rareCount}`, {
        value: rareCount,
        frequentCount,
      })
    }
    this.seqLength = nCtx + 1
    const context = nCtx - F
    if (F * frequentCount > context) {
      throw tooLong('cwe-tokens', F * frequentCount + F + 1, this.seqLength, `${F} words x ${frequentCount}`)
    }
    this.rareWords = Math.floor((context - F * frequentCount) / rareCount)
    if (wordTokens < F + this.rareWords) {
      throw tooFewTokens(
        'cwe-tokens',
        'wordTokens',
        wordTokens,
        F + this.rareWords,
        `${F} frequent + ${this.rareWords} rare words`,
      )
    }
    this.config = deepFreeze(resolved)
    this.vocabSize = 2 + wordTokens
    this.answerPositions = Object.freeze(Array.from({ length: F }, (_, i) => this.seqLength - F + i))
  }

  /**
   * Draws `batchSize` sequences (see the class comment).
   *
   * @returns tokens and loss mask, `[batchSize, nCtx + 1]`
   * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize`
   */
  sample(batchSize: number, rng: Rng): TokenBatch {
    const { frequentWords: F, frequentCount, rareCount, wordTokens } = this.config
    const L = this.seqLength
    const R = this.rareWords
    const used = F * frequentCount + R * rareCount
    const start = L - 1 - F - used
    return sampleBatch(batchSize, L, (tokens, lossMask, base) => {
      const words = distinct(rng, wordTokens, F + R)
      const occurrences = new Int32Array(used)
      let i = 0
      for (let w = 0; w < F + R; w++) {
        const count = w < F ? frequentCount : rareCount
        for (let c = 0; c < count; c++) occurrences[i++] = 2 + (words[w] as number)
      }
      rng.shuffle(occurrences)
      for (let p = 0; p < start; p++) tokens[base + p] = 0
      tokens.set(occurrences, base + start)
      let p = base + start + used
      tokens[p++] = 1
      const answer = Array.from(words.subarray(0, F), (w) => 2 + w).sort((a, b) => a - b)
      for (const word of answer) {
        tokens[p] = word
        lossMask[p++] = 1
      }
    })
  }

  /** Set recall, strict exact set, IoU (see {@link AnswerScore}). */
  scoreAnswer(gold: ArrayLike<number>, predicted: ArrayLike<number>): AnswerScore {
    return scoreAnswer(this.answerKind, gold, predicted, this.answerPositions.length)
  }

  /** The configuration as plain JSON with `kind: 'cwe-tokens'`. */
  describe(): Readonly<Record<string, unknown>> {
    return { kind: this.kind, ...structuredClone(this.config) }
  }
}

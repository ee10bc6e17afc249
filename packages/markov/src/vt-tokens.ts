/**
 * `vt-tokens`: variable tracking over a synthetic vocabulary, the token version of RULER's VT as
 * The Sparse Frontier uses it (Nawrot et al., arXiv 2504.17768 [v2], section 4, A.2: chains
 * `X0 = value, X1 = X0, ...` among noise; the answer is every variable of the queried chain,
 * scored as a set).
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

/** Token 2 of `vt-tokens`: the assignment sign of a statement `dst = src`. */
export const VT_ASSIGN_TOKEN = 2

/**
 * The schema of a {@link VtTokensConfig}.
 *
 * @category Retrieval tasks
 */
export const vtTokensSchema = configSchema({
  /** The model's context: each sequence has `nCtx + 1` tokens. */
  nCtx: integerField('context tokens (sequence = nCtx + 1 tokens)', { min: 8, max: 1 << 20 }).default(256),
  /** Chains (the study: 8); one is queried. */
  chains: integerField('variable chains', { min: 1, max: 1024 }).default(4),
  /** Hops per chain (the study: 4): a chain has `hops + 1` variables. */
  hops: integerField('hops per chain', { min: 0, max: 64 }).default(2),
  /** Variable tokens: at least `chains (hops + 1)`. */
  variableTokens: integerField('distinct variable tokens', { min: 1, max: 1 << 20 }).default(64),
  /** Value tokens: at least `chains` (each chain's value is distinct). */
  valueTokens: integerField('distinct value tokens', { min: 1, max: 1 << 20 }).default(32),
  /** Noise tokens filling the rest of the context, drawn uniformly. */
  noiseTokens: integerField('distinct noise tokens', { min: 1, max: 1 << 20 }).default(32),
  /**
   * State the question before the context too (the study's template, [v2] A.2): the sequence opens
   * with the marker and the queried value (2 tokens, taken from the noise). Default false: the
   * question only after the context.
   */
  questionFirst: booleanField(
    'also state the question (marker and queried value) before the context, as the study does',
  ).default(false),
})

/**
 * Configuration of a {@link VtTokensTask}.
 *
 * @category Retrieval tasks
 */
export type VtTokensConfig = Readonly<z.output<typeof vtTokensSchema>>

/**
 * Default: nCtx 256, 4 chains of 2 hops, 64 variable, 32 value and 32 noise tokens, the question
 * only after the context.
 *
 * @category Retrieval tasks
 */
export function defaultVtTokensConfig(): VtTokensConfig {
  return schemaDefaults(vtTokensSchema, 'vt-tokens')
}

/**
 * Variable tracking. Ids: 0 unused (fill), 1 the query marker, 2 the assignment sign `=`, then
 * values, variables and noise. Each chain `c` has `hops + 1` distinct variables and a distinct
 * value: statements `x_0 = value`, `x_1 = x_0`, ..., `x_h = x_(h-1)` (3 tokens each). The
 * statements of all chains are interleaved in a random order that keeps each chain's hops in
 * order (the study shuffles them fully), at random places among noise tokens; then the marker,
 * the queried chain's value, and the answer: the chain's `hops + 1` variables (in assignment
 * order; scored as a set). The loss mask marks only the answer. Scored by set recall (the
 * study's per-item score; its code reports IoU, also given) and strictly (the exact set). With
 * `questionFirst` the sequence opens with the question too, `Q value` as in the study's template
 * ([v2] A.2), and the noise is 2 tokens shorter; the answer positions are unchanged.
 *
 * @category Retrieval tasks
 */
export class VtTokensTask implements RetrievalTask {
  /** Always `'vt-tokens'`. */
  readonly kind = 'vt-tokens' as const
  /** The resolved, frozen configuration. */
  readonly config: VtTokensConfig
  /** `3 + valueTokens + variableTokens + noiseTokens`. */
  readonly vocabSize: number
  /** `nCtx + 1`. */
  readonly seqLength: number
  /** `'set'`. */
  readonly answerKind: AnswerKind = 'set'
  /** The last `hops + 1` positions. */
  readonly answerPositions: readonly number[]
  /** Tokens of the leading question: 2 with `questionFirst`, else 0. */
  readonly leadingTokens: number

  /**
   * @param config - overrides of {@link defaultVtTokensConfig}
   * @throws `ConfigError` (`@attnlab/core`) for invalid parameters, statements and question (both
   *   statements of it with `questionFirst`) longer than the sequence, or too few variable or
   *   value tokens for distinct chains
   */
  constructor(config: Partial<VtTokensConfig> = {}) {
    const resolved = parseConfig(vtTokensSchema, config, 'vt-tokens')
    const { nCtx, chains, hops, variableTokens, valueTokens, noiseTokens, questionFirst } = resolved
    this.seqLength = nCtx + 1
    this.leadingTokens = questionFirst ? 2 : 0
    const needed = 3 * chains * (hops + 1) + 2 + (hops + 1) + this.leadingTokens
    if (needed > this.seqLength) {
      const what = questionFirst ? 'the question before and after the context' : 'the question'
      throw tooLong('vt-tokens', needed, this.seqLength, `${chains} chains of ${hops} hops and ${what}`)
    }
    if (variableTokens < chains * (hops + 1)) {
      throw tooFewTokens('vt-tokens', 'variableTokens', variableTokens, chains * (hops + 1), `${chains} chains`)
    }
    if (valueTokens < chains) {
      throw tooFewTokens('vt-tokens', 'valueTokens', valueTokens, chains, `${chains} chains`)
    }
    this.config = deepFreeze(resolved)
    this.vocabSize = 3 + valueTokens + variableTokens + noiseTokens
    this.answerPositions = Object.freeze(Array.from({ length: hops + 1 }, (_, i) => this.seqLength - (hops + 1) + i))
  }

  /**
   * Draws `batchSize` sequences (see the class comment).
   *
   * @returns tokens and loss mask, `[batchSize, nCtx + 1]`
   * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize`
   */
  sample(batchSize: number, rng: Rng): TokenBatch {
    const { chains, hops, variableTokens, valueTokens, noiseTokens } = this.config
    const L = this.seqLength
    const per = hops + 1
    const statements = chains * per
    const valueBase = 3
    const variableBase = valueBase + valueTokens
    const noiseBase = variableBase + variableTokens
    const lead = this.leadingTokens
    const context = L - 2 - per - lead
    const noise = context - 3 * statements
    return sampleBatch(batchSize, L, (tokens, lossMask, base) => {
      const values = distinct(rng, valueTokens, chains)
      const variables = distinct(rng, variableTokens, statements)
      // the chain of each statement in order (chain c's k-th statement is its hop k)
      const chainOrder = new Int32Array(statements)
      for (let i = 0; i < statements; i++) chainOrder[i] = Math.floor(i / per)
      rng.shuffle(chainOrder)
      // which of the noise + statements units are statements
      const isStatement = new Uint8Array(noise + statements)
      for (const unit of distinct(rng, noise + statements, statements)) isStatement[unit] = 1
      const hop = new Int32Array(chains)
      let p = base + lead
      let next = 0
      for (let unit = 0; unit < noise + statements; unit++) {
        if (isStatement[unit] === 0) {
          tokens[p++] = noiseBase + rng.int(noiseTokens)
          continue
        }
        const c = chainOrder[next++] as number
        const k = hop[c] as number
        hop[c] = k + 1
        tokens[p++] = variableBase + (variables[c * per + k] as number)
        tokens[p++] = VT_ASSIGN_TOKEN
        tokens[p++] =
          k === 0 ? valueBase + (values[c] as number) : variableBase + (variables[c * per + k - 1] as number)
      }
      const queried = rng.int(chains)
      // The leading question (questionFirst): the marker and the queried value.
      if (lead > 0) {
        tokens[base] = 1
        tokens[base + 1] = valueBase + (values[queried] as number)
      }
      tokens[p++] = 1
      tokens[p++] = valueBase + (values[queried] as number)
      for (let k = 0; k < per; k++) {
        tokens[p] = variableBase + (variables[queried * per + k] as number)
        lossMask[p++] = 1
      }
    })
  }

  /** Set recall, strict exact set, IoU (see {@link AnswerScore}). */
  scoreAnswer(gold: ArrayLike<number>, predicted: ArrayLike<number>): AnswerScore {
    return scoreAnswer(this.answerKind, gold, predicted, this.answerPositions.length)
  }

  /** The configuration as plain JSON with `kind: 'vt-tokens'`. */
  describe(): Readonly<Record<string, unknown>> {
    return { kind: this.kind, ...structuredClone(this.config) }
  }
}

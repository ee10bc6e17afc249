/**
 * In-context Markov chains (Edelman et al. 2024, "The Evolution of Statistical Induction Heads:
 * In-Context Learning Markov Chains"; used by Baherwani et al., arXiv 2606.25010): a transition
 * table is drawn per sequence, so the next-token distribution must be estimated in context.
 *
 * @module
 */
import { ConfigError, type Rng } from '@attnlab/core'
import { configSchema, integerField, numberField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
import type { BayesLossEstimate } from './cellular-automaton.ts'
import { meanAndStandardError } from './entropy.ts'
import { deepFreeze } from './sparse-markov.ts'
import type { OffsetGroup, Task, TokenBatch } from './task.ts'
import { checkInteger, sampleBatch } from './validate.ts'

/**
 * The schema of an {@link IclMarkovConfig}: each parameter's meaning, range and default, declared
 * once (the CLI's task flags and their help come from it).
 *
 * @category Emergence tasks
 */
export const iclMarkovSchema = configSchema({
  /** `k`: states (token ids `0 .. k-1`). */
  vocabSize: integerField('states k', { min: 2, max: 256 }).default(3),
  /** `n`: the chain's order (the next token depends on the last `n`); `k^n <= 65536`. */
  order: integerField('chain order', { min: 1, max: 8 }).default(1),
  /** Concentration of the symmetric Dirichlet prior of every transition row. */
  alpha: numberField('Dirichlet concentration', { min: 0, max: 1000, minExclusive: true }).default(1),
  /** Tokens per sequence, at least `order + 1`. */
  seqLength: integerField('tokens per sequence', { min: 2, max: 65536 }).default(100),
})

/**
 * Configuration of an {@link IclMarkovTask} (declared by {@link iclMarkovSchema}).
 *
 * @category Emergence tasks
 */
export type IclMarkovConfig = Readonly<z.output<typeof iclMarkovSchema>>

/**
 * Default: 3 states, order 1, Dirichlet(1) rows, 100 tokens.
 *
 * @category Emergence tasks
 */
export function defaultIclMarkovConfig(): IclMarkovConfig {
  return schemaDefaults(iclMarkovSchema, 'icl-markov')
}

/**
 * Validates a (partial) configuration, fills in defaults and freezes it.
 *
 * @throws `ConfigError` (`@attnlab/core`) naming the parameter and its allowed range
 * @category Emergence tasks
 */
export function resolveIclMarkovConfig(config: Partial<IclMarkovConfig> = {}): IclMarkovConfig {
  const resolved = parseConfig(iclMarkovSchema, config, 'icl-markov')
  const { vocabSize, order } = resolved
  if (vocabSize ** order > 65536) {
    throw new ConfigError(
      'order',
      `vocabSize^order = ${vocabSize}^${order} = ${vocabSize ** order} contexts; expected at most 65536`,
      { vocabSize, order },
    )
  }
  checkInteger('seqLength', resolved.seqLength, order + 1, 65536)
  return deepFreeze(resolved)
}

/**
 * In-context Markov chains of order `n` (Edelman et al. 2024, arXiv 2402.11004, as in the authors'
 * released code): for every sequence, each of the `k^n` contexts gets its own next-token distribution drawn
 * from `Dirichlet(alpha, ..., alpha)`; the first `n` tokens are uniform, the rest follow the
 * sequence's table. The loss mask marks the generated tokens (positions `>= n`).
 *
 * @example
 * ```ts
 * const task = new IclMarkovTask({ vocabSize: 2, order: 2 })
 * task.bayesLoss(5000, Rng.fromSeed(0)) // loss of the in-context counting estimator
 * ```
 * @category Emergence tasks
 */
export class IclMarkovTask implements Task {
  /** Always `'icl-markov'`. */
  readonly kind = 'icl-markov' as const
  /** The resolved, frozen configuration. */
  readonly config: IclMarkovConfig
  /** `k`. */
  readonly vocabSize: number
  /** Tokens per sequence. */
  readonly seqLength: number
  /** The `n`-gram context: offsets `0 .. n-1` (what previous-token heads must gather). */
  readonly offsetGroups: readonly OffsetGroup[]
  private readonly table: Float64Array
  private readonly drawn: Uint8Array
  private readonly touched: Int32Array

  /**
   * @param config - overrides of {@link defaultIclMarkovConfig}
   * @throws `ConfigError` (`@attnlab/core`) on invalid parameters
   */
  constructor(config: Partial<IclMarkovConfig> = {}) {
    this.config = resolveIclMarkovConfig(config)
    const { vocabSize: k, order, seqLength } = this.config
    this.vocabSize = k
    this.seqLength = seqLength
    const contexts = k ** order
    this.table = new Float64Array(contexts * k)
    this.drawn = new Uint8Array(contexts)
    this.touched = new Int32Array(Math.min(contexts, seqLength))
    this.offsetGroups = Object.freeze([
      Object.freeze({
        name: `${order}-gram context`,
        offsets: Object.freeze(Array.from({ length: order }, (_, i) => i)),
      }),
    ])
  }

  /**
   * Draws `batchSize` sequences. Transition rows are drawn lazily (`rng.dirichlet`) the first
   * time their context occurs in a sequence, which is the same distribution as drawing the whole
   * table up front.
   *
   * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize`
   */
  sample(batchSize: number, rng: Rng): TokenBatch {
    return sampleBatch(batchSize, this.seqLength, (tokens, lossMask, offset) =>
      this.sampleInto(tokens, lossMask, offset, rng),
    )
  }

  private sampleInto(tokens: Int32Array, lossMask: Uint8Array, base: number, rng: Rng): void {
    const { vocabSize: k, order, alpha } = this.config
    const L = this.seqLength
    const contexts = k ** order
    let touchedCount = 0
    for (let p = 0; p < order; p++) {
      tokens[base + p] = rng.int(k)
      lossMask[base + p] = 0
    }
    for (let p = order; p < L; p++) {
      let context = 0
      for (let j = p - order; j < p; j++) context = context * k + (tokens[base + j] as number)
      if (this.drawn[context] === 0) {
        this.drawn[context] = 1
        this.touched[touchedCount++] = context
        rng.dirichlet(k, alpha, this.table.subarray(context * k, (context + 1) * k))
      }
      tokens[base + p] = rng.categorical(this.table, context * k, k, 1)
      lossMask[base + p] = 1
    }
    for (let i = 0; i < touchedCount; i++) this.drawn[this.touched[i] as number] = 0
    void contexts
  }

  /**
   * Monte-Carlo estimate of the Bayes-optimal loss per scored token: the loss of the in-context
   * counting estimator `P(y | context c) = (N(c -> y) + alpha) / (N(c) + k alpha)` (counts over
   * the sequence so far), which is the exact posterior predictive under the Dirichlet prior and
   * hence Bayes-optimal (Edelman et al. 2024). Exact per sequence; averaged over sequences with
   * its standard error. `perPosition` shows the in-context learning curve.
   *
   * @param sequences - sequences to sample, >= 2
   * @param rng - the sampling stream
   * @throws `ConfigError` (`@attnlab/core`) for a bad `sequences`
   */
  bayesLoss(sequences: number, rng: Rng): BayesLossEstimate {
    checkInteger('sequences', sequences, 2, 1e8)
    const { vocabSize: k, order, alpha } = this.config
    const L = this.seqLength
    const contexts = k ** order
    const counts = new Float64Array(contexts * k)
    const totals = new Float64Array(contexts)
    const tokens = new Int32Array(L)
    const mask = new Uint8Array(L)
    const perSequence = new Float64Array(sequences)
    const positionSums = new Float64Array(L)
    for (let b = 0; b < sequences; b++) {
      this.sampleInto(tokens, mask, 0, rng)
      let total = 0
      const seen: number[] = []
      for (let p = order; p < L; p++) {
        let context = 0
        for (let j = p - order; j < p; j++) context = context * k + (tokens[j] as number)
        const y = tokens[p] as number
        const loss = -Math.log(
          ((counts[context * k + y] as number) + alpha) / ((totals[context] as number) + k * alpha),
        )
        total += loss
        positionSums[p] = (positionSums[p] as number) + loss
        if (totals[context] === 0) seen.push(context)
        counts[context * k + y] = (counts[context * k + y] as number) + 1
        totals[context] = (totals[context] as number) + 1
      }
      for (const context of seen) {
        totals[context] = 0
        counts.fill(0, context * k, (context + 1) * k)
      }
      perSequence[b] = total / (L - order)
    }
    const summary = meanAndStandardError(perSequence)
    return {
      estimate: summary.estimate,
      standardError: summary.standardError,
      samples: sequences,
      perPosition: Array.from(positionSums, (sum, p) => (p < order ? NaN : sum / sequences)),
    }
  }

  /**
   * The `n` previous positions (the context) for generated positions; `undefined` for the first
   * `n`. (The distribution given that context is learned in context, from the whole sequence.)
   *
   * @throws `ConfigError` (`@attnlab/core`) if `position` is not in `[0, seqLength)`
   */
  parentPositions(position: number): readonly number[] | undefined {
    checkInteger('position', position, 0, this.seqLength - 1)
    const { order } = this.config
    if (position < order) return undefined
    return Array.from({ length: order }, (_, i) => position - order + i)
  }

  /** The configuration as plain JSON with `kind: 'icl-markov'` (feed it to {@link createTask}). */
  describe(): Readonly<Record<string, unknown>> {
    return { kind: this.kind, ...structuredClone(this.config) }
  }
}

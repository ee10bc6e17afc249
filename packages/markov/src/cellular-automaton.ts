/**
 * The elementary-cellular-automaton task of Baherwani et al., "Emergent Capabilities Arise
 * Randomly from Learning Sparse Attention Patterns" (arXiv 2606.25010, the cellular automata
 * task): the rule is drawn per sequence, so it must be inferred in context.
 *
 * @module
 */
import { ConfigError, type Rng } from '@attnlab/core'
import {
  booleanField,
  configSchema,
  integerField,
  listField,
  parseConfig,
  schemaDefaults,
  type z,
} from '@attnlab/core/schema'
import { meanAndStandardError } from './entropy.ts'
import { deepFreeze } from './sparse-markov.ts'
import type { OffsetGroup, Task, TokenBatch, TrueAttention } from './task.ts'
import { mapFromParents, trueAttentionOf } from './true-attention.ts'
import { checkInteger, sampleBatch } from './validate.ts'

/**
 * The schema of a {@link CellularAutomatonConfig}: each parameter's meaning, range and default,
 * declared once (the CLI's task flags and their help come from it).
 *
 * @category Emergence tasks
 */
export const cellularAutomatonSchema = configSchema({
  /** `S`: cells per state. */
  cells: integerField('cells per state', { min: 3, max: 1024 }).default(16),
  /** `T`: states per sequence. */
  states: integerField('states per sequence', { min: 2, max: 256 }).default(4),
  /**
   * Wolfram rule numbers (0-255, distinct) a sequence's rule is drawn from uniformly; `null`
   * means all 256 elementary rules.
   */
  rules: listField(
    'Wolfram rules to draw from, all 256 when not given',
    integerField('a Wolfram rule', { min: 0, max: 255 }),
    1,
    256,
  )
    .nullable()
    .default(null),
  /** Prepend a BOS token (id 2). */
  bos: booleanField('prepend a BOS token').default(false),
  /** Score the bits of the random initial state too. */
  scoreInitialState: booleanField('score the initial state').default(true),
})

/**
 * Configuration of a {@link CellularAutomatonTask}.
 *
 * Token layout (vocabulary `{0, 1}`, plus `2` = BOS when `bos` is true): `[BOS] x_0 x_1 ..
 * x_{T-1}`, `T = states` states of `S = cells` bits each, oldest first; `x_0` is uniform and
 * `x_{t+1}[i] = rule(x_t[i-1], x_t[i], x_t[i+1])` with periodic boundary (indices mod S).
 *
 * @category Emergence tasks
 */
export type CellularAutomatonConfig = Readonly<z.output<typeof cellularAutomatonSchema>>

/**
 * Default: 16 cells, 4 states, all 256 rules, no BOS, all positions scored.
 *
 * @category Emergence tasks
 */
export function defaultCellularAutomatonConfig(): CellularAutomatonConfig {
  return schemaDefaults(cellularAutomatonSchema, 'cellular-automaton')
}

/**
 * Validates a (partial) configuration, fills in defaults and freezes it.
 *
 * @throws `ConfigError` (`@attnlab/core`) naming the parameter and its allowed range (a rule outside
 *   [0, 255], duplicate rules, `cells < 3`, ...)
 * @category Emergence tasks
 */
export function resolveCellularAutomatonConfig(config: Partial<CellularAutomatonConfig> = {}): CellularAutomatonConfig {
  const resolved = parseConfig(cellularAutomatonSchema, config, 'cellular-automaton')
  const rules = resolved.rules
  const duplicate = rules?.find((rule, i) => rules.indexOf(rule) !== i)
  if (duplicate !== undefined)
    throw new ConfigError('rules', `rule ${duplicate} is listed twice; expected distinct rule numbers`, { rules })
  return deepFreeze(resolved)
}

/**
 * A Monte-Carlo estimate of a Bayes loss (nats per scored token).
 *
 * @category Oracles
 */
export interface BayesLossEstimate {
  /** Mean loss per scored token over the sampled sequences (nats). */
  readonly estimate: number
  /** Standard error across sequences (nats). */
  readonly standardError: number
  /** Sequences sampled. */
  readonly samples: number
  /** Mean loss at each position (nats), `NaN` where a position is never scored; `[seqLength]`. */
  readonly perPosition: readonly number[]
}

/**
 * Elementary cellular automata (Baherwani et al., arXiv 2606.25010, "cellular automata task"):
 * `S` binary cells, periodic boundary, radius-1 neighbourhood,
 * several states per sequence, the rule drawn per sequence from a configurable set (so a model
 * must infer it in context from the transitions it has seen).
 *
 * @example
 * ```ts
 * const task = new CellularAutomatonTask({ cells: 32, rules: [30, 90, 110, 184] })
 * task.bayesLoss(2000, Rng.fromSeed(0)).estimate // the in-context Bayes floor
 * ```
 * @category Emergence tasks
 */
export class CellularAutomatonTask implements Task {
  /** Always `'cellular-automaton'`. */
  readonly kind = 'cellular-automaton' as const
  /** The resolved, frozen configuration. */
  readonly config: CellularAutomatonConfig
  /** 2 (bits), or 3 with BOS. */
  readonly vocabSize: number
  /** `T * S` (+1 with BOS). */
  readonly seqLength: number
  /**
   * The rule's inputs relative to the query (the token before the predicted one), valid for
   * interior cells `0 < i < S-1`: offsets `S` (left), `S-1` (centre), `S-2` (right). The
   * boundary cells wrap around (see {@link CellularAutomatonTask.parentPositions}).
   */
  readonly offsetGroups: readonly OffsetGroup[]
  /** The rule set (all 256 when `config.rules` is null). */
  readonly ruleSet: readonly number[]
  private readonly offset: number

  /**
   * @param config - overrides of {@link defaultCellularAutomatonConfig}
   * @throws `ConfigError` (`@attnlab/core`) on invalid parameters
   */
  constructor(config: Partial<CellularAutomatonConfig> = {}) {
    this.config = resolveCellularAutomatonConfig(config)
    const { cells: S, states, bos, rules } = this.config
    this.offset = bos ? 1 : 0
    this.vocabSize = bos ? 3 : 2
    this.seqLength = states * S + this.offset
    this.ruleSet = Object.freeze(rules === null ? Array.from({ length: 256 }, (_, r) => r) : [...rules])
    this.offsetGroups = Object.freeze([
      Object.freeze({ name: 'neighbourhood (left, centre, right)', offsets: Object.freeze([S - 2, S - 1, S]) }),
    ])
  }

  /**
   * Draws `batchSize` sequences: per sequence a rule (`rng.int` over the rule set), then the
   * initial bits (`rng.int(2)` each).
   *
   * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize`
   */
  sample(batchSize: number, rng: Rng): TokenBatch {
    return sampleBatch(batchSize, this.seqLength, (tokens, lossMask, offset) =>
      this.sampleInto(tokens, lossMask, offset, rng),
    )
  }

  private sampleInto(tokens: Int32Array, lossMask: Uint8Array, base: number, rng: Rng): number {
    const { cells: S, states, scoreInitialState } = this.config
    const rule = this.ruleSet[rng.int(this.ruleSet.length)] as number
    if (this.offset === 1) tokens[base] = 2
    const first = base + this.offset
    for (let i = 0; i < S; i++) tokens[first + i] = rng.int(2)
    for (let t = 1; t < states; t++) {
      const previous = first + (t - 1) * S
      const current = first + t * S
      for (let i = 0; i < S; i++) {
        const left = tokens[previous + ((i + S - 1) % S)] as number
        const centre = tokens[previous + i] as number
        const right = tokens[previous + ((i + 1) % S)] as number
        tokens[current + i] = (rule >> ((left << 2) | (centre << 1) | right)) & 1
      }
    }
    for (let p = 1; p < this.seqLength; p++) {
      lossMask[base + p] = p - this.offset < S && !scoreInitialState ? 0 : 1
    }
    return rule
  }

  /**
   * Monte-Carlo estimate of the Bayes-optimal loss per scored token: the loss of the exact
   * in-context predictor that keeps the uniform posterior over the rules of the set consistent
   * with every transition seen so far (earlier states and the cells already revealed in the
   * current state) and predicts `P(bit = 1) = (consistent rules mapping this neighbourhood to 1)
   * / (consistent rules)`; initial-state bits cost `ln 2`. Exact per sequence; the estimate
   * averages sequences, with its standard error.
   *
   * @param sequences - sequences to sample, >= 2
   * @param rng - the sampling stream
   * @throws `ConfigError` (`@attnlab/core`) for a bad `sequences`
   */
  bayesLoss(sequences: number, rng: Rng): BayesLossEstimate {
    checkInteger('sequences', sequences, 2, 1e8)
    const { cells: S, states } = this.config
    const L = this.seqLength
    const tokens = new Int32Array(L)
    const mask = new Uint8Array(L)
    const perSequence = new Float64Array(sequences)
    const positionSums = new Float64Array(L)
    const positionCounts = new Float64Array(L)
    const rules = this.ruleSet
    const consistent = new Uint8Array(rules.length)
    for (let b = 0; b < sequences; b++) {
      this.sampleInto(tokens, mask, 0, rng)
      consistent.fill(1)
      let total = 0
      let scored = 0
      const record = (p: number, loss: number): void => {
        if (mask[p] !== 1) return
        total += loss
        scored++
        positionSums[p] = (positionSums[p] as number) + loss
        positionCounts[p] = (positionCounts[p] as number) + 1
      }
      for (let i = 0; i < S; i++) record(this.offset + i, Math.LN2)
      for (let t = 1; t < states; t++) {
        const previous = this.offset + (t - 1) * S
        for (let i = 0; i < S; i++) {
          const p = previous + S + i
          const code =
            ((tokens[previous + ((i + S - 1) % S)] as number) << 2) |
            ((tokens[previous + i] as number) << 1) |
            (tokens[previous + ((i + 1) % S)] as number)
          const bit = tokens[p] as number
          let alive = 0
          let agree = 0
          for (let r = 0; r < rules.length; r++) {
            if (consistent[r] === 0) continue
            alive++
            if ((((rules[r] as number) >> code) & 1) === bit) agree++
            else consistent[r] = 0
          }
          record(p, -Math.log(agree / alive))
        }
      }
      perSequence[b] = total / scored
    }
    const summary = meanAndStandardError(perSequence)
    return {
      estimate: summary.estimate,
      standardError: summary.standardError,
      samples: sequences,
      perPosition: Array.from(positionSums, (sum, p) =>
        (positionCounts[p] as number) > 0 ? sum / (positionCounts[p] as number) : NaN,
      ),
    }
  }

  /**
   * The positions of the previous state's left, centre and right cells (ascending) that the
   * rule maps to the bit at `position`; `undefined` for the BOS and the initial state.
   *
   * @throws `ConfigError` (`@attnlab/core`) if `position` is not in `[0, seqLength)`
   */
  parentPositions(position: number): readonly number[] | undefined {
    checkInteger('position', position, 0, this.seqLength - 1)
    const S = this.config.cells
    const index = position - this.offset
    if (index < S) return undefined
    const cell = index % S
    const previous = this.offset + (Math.floor(index / S) - 1) * S
    return [(cell + S - 1) % S, cell, (cell + 1) % S].map((j) => previous + j).sort((a, b) => a - b)
  }

  /**
   * The ground-truth attention (Baherwani et al., arXiv 2606.25010: the rule reads a fixed local
   * window of 3 cells): one 0/1 map `[seqLength, seqLength]` whose row `q` marks the left, centre
   * and right cells of the previous state (periodic boundary) of the cell token `q + 1` is
   * ({@link CellularAutomatonTask.parentPositions}); rows predicting the BOS or initial state are 0.
   * The rule itself is inferred in context; the window is what is fixed.
   */
  trueAttention(): TrueAttention {
    return trueAttentionOf(this.seqLength, [
      mapFromParents('neighbourhood window', this.seqLength, (position) => this.parentPositions(position)),
    ])
  }

  /** The configuration as plain JSON with `kind: 'cellular-automaton'` (feed it to {@link createTask}). */
  describe(): Readonly<Record<string, unknown>> {
    return { kind: this.kind, ...structuredClone(this.config) }
  }
}

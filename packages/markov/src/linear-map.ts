/**
 * The linear-map-mod-2 task of Baherwani et al., "Emergent Capabilities Arise Randomly from
 * Learning Sparse Attention Patterns" (arXiv 2606.25010, the linear map task): a
 * generalisation of sparse parity whose optimal attention map is a fixed sparse matrix.
 *
 * @module
 */
import { Rng } from '@attnlab/core'
import { booleanField, configSchema, integerField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
import { deepFreeze } from './sparse-markov.ts'
import type { Task, TokenBatch, TrueAttention } from './task.ts'
import { mapFromParents, trueAttentionOf } from './true-attention.ts'
import { checkInteger, sampleBatch } from './validate.ts'

/**
 * The schema of a {@link LinearMapConfig}: each parameter's meaning, range and default, declared
 * once (the CLI's `--state-size`, `--ones-per-row`, `--states`, `--bos`, `--no-score-initial` and
 * their help come from it).
 *
 * @category Emergence tasks
 */
export const linearMapSchema = configSchema({
  /** `S`: cells per state. */
  stateSize: integerField('cells per state, the context length S', { min: 2, max: 512 }).default(16),
  /** `s`: ones per row of `M` (the pattern sparsity), at most `S`. */
  onesPerRow: integerField('ones per row of M, the pattern sparsity s', { min: 1, max: 512 }).default(3),
  /** `T`: states per sequence (the first random, the others determined). */
  states: integerField('states per sequence', { min: 2, max: 64 }).default(2),
  /** Prepend a BOS token (id 2). */
  bos: booleanField('prepend a BOS token').default(false),
  /** Score the bits of the random initial state too (the paper's loss averages over all of them). */
  scoreInitialState: booleanField('score the initial state').default(true),
  /** Seed of the matrix `M`. */
  matrixSeed: integerField('seed of the matrix M').default(0),
})

/**
 * Configuration of a {@link LinearMapTask} (declared by {@link linearMapSchema}).
 *
 * Token layout (vocabulary `{0, 1}`, plus `2` = BOS when `bos` is true):
 * `[BOS] x_0[0] .. x_0[S-1]  x_1[0] .. x_1[S-1]  ..  x_{T-1}[S-1]`, i.e. `T = states` binary
 * states of `S = stateSize` cells each, oldest first, with `x_0` uniform and
 * `x_{t+1} = M x_t mod 2`.
 *
 * @category Emergence tasks
 */
export type LinearMapConfig = Readonly<z.output<typeof linearMapSchema>>

/**
 * The default linear-map configuration: S = 16, s = 3, two states, no BOS, all positions scored
 * (the blog's Figure 3 setting; its loss floor is `ln 2 * 15/31 = 0.335` nats).
 *
 * @category Emergence tasks
 */
export function defaultLinearMapConfig(): LinearMapConfig {
  return schemaDefaults(linearMapSchema, 'linear-map')
}

/**
 * Validates a (partial) linear-map configuration, fills in defaults and freezes it.
 *
 * @throws `ConfigError` (`@attnlab/core`) naming the parameter and its allowed range (e.g. `onesPerRow > stateSize`)
 * @category Emergence tasks
 */
export function resolveLinearMapConfig(config: Partial<LinearMapConfig> = {}): LinearMapConfig {
  const resolved = parseConfig(linearMapSchema, config, 'linear-map')
  checkInteger('onesPerRow', resolved.onesPerRow, 1, resolved.stateSize)
  return deepFreeze(resolved)
}

/**
 * Linear map mod 2 (Baherwani et al., arXiv 2606.25010, "linear map task"): a fixed binary
 * `S x S` matrix `M` with exactly `s` ones per row (drawn from `matrixSeed`), trajectories
 * `x_{t+1} = M x_t mod 2` from a uniform random `x_0`, flattened into bit tokens (layout in
 * {@link LinearMapConfig}). Cell `i` of each new state depends on the `s` cells
 * `{j : M[i, j] = 1}` of the previous state: the optimal attention map is `M`.
 *
 * @example
 * ```ts
 * const task = new LinearMapTask({ stateSize: 8, onesPerRow: 3 })
 * task.lossFloor() // ln 2 * 7 / 15 = 0.3235 nats
 * ```
 * @category Emergence tasks
 */
export class LinearMapTask implements Task {
  /** Always `'linear-map'`. */
  readonly kind = 'linear-map' as const
  /** The resolved, frozen configuration. */
  readonly config: LinearMapConfig
  /** 2 (bits), or 3 with BOS. */
  readonly vocabSize: number
  /** `T * S` (+1 with BOS). */
  readonly seqLength: number
  /** The matrix `M`, `S x S` row-major, entries 0/1 (a copy; mutating it does not change the task). */
  readonly matrix: Uint8Array
  private readonly rows: Int32Array[]
  private readonly offset: number

  /**
   * @param config - overrides of {@link defaultLinearMapConfig}
   * @throws `ConfigError` (`@attnlab/core`) on invalid parameters
   */
  constructor(config: Partial<LinearMapConfig> = {}) {
    this.config = resolveLinearMapConfig(config)
    const { stateSize: S, onesPerRow: s, states, bos, matrixSeed } = this.config
    this.offset = bos ? 1 : 0
    this.vocabSize = bos ? 3 : 2
    this.seqLength = states * S + this.offset
    const rng = Rng.fromSeed(matrixSeed).split('linear-map/matrix')
    const matrix = new Uint8Array(S * S)
    this.rows = []
    for (let i = 0; i < S; i++) {
      const columns = rng
        .shuffle(Array.from({ length: S }, (_, j) => j))
        .slice(0, s)
        .sort((a, b) => a - b)
      for (const j of columns) matrix[i * S + j] = 1
      this.rows.push(Int32Array.from(columns))
    }
    this.matrix = matrix
  }

  /**
   * Draws `batchSize` trajectories (initial bits from `rng.int(2)`).
   *
   * @returns tokens and loss mask `[batchSize, seqLength]`
   * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize`
   */
  sample(batchSize: number, rng: Rng): TokenBatch {
    const { stateSize: S, states, scoreInitialState } = this.config
    const L = this.seqLength
    return sampleBatch(batchSize, L, (tokens, lossMask, base) => {
      if (this.offset === 1) tokens[base] = 2
      const first = base + this.offset
      for (let i = 0; i < S; i++) tokens[first + i] = rng.int(2)
      for (let t = 1; t < states; t++) {
        const previous = first + (t - 1) * S
        const current = first + t * S
        for (let i = 0; i < S; i++) {
          let bit = 0
          for (const j of this.rows[i] as Int32Array) bit ^= tokens[previous + j] as number
          tokens[current + i] = bit
        }
      }
      for (let p = 1; p < L; p++) {
        const isInitial = p - this.offset < S
        lossMask[base + p] = isInitial && !scoreInitialState ? 0 : 1
      }
    })
  }

  /**
   * The Bayes-optimal loss per scored token (nats), in closed form: every bit of the initial
   * state is a fair coin (`ln 2`), every later bit is determined by the previous state and `M`
   * (loss 0), so the floor is `ln 2 * (random scored bits) / (scored bits)`:
   * `ln2 * (S-1) / (T*S - 1)` without BOS (the first bit is never predicted),
   * `ln2 * S / (T*S) = ln2 / T` with BOS, and `0` when the initial state is not scored.
   * For T = 2 this is `ln 2 * (S-1)/(2S-1)` (0.3235, 0.3354, 0.3411 nats for S = 8, 16, 32; the
   * final losses Baherwani et al., arXiv 2606.25010, report for the linear map are 0.325, 0.336, 0.341).
   */
  lossFloor(): number {
    const { stateSize: S, scoreInitialState } = this.config
    if (!scoreInitialState) return 0
    const randomScored = this.offset === 1 ? S : S - 1
    const scored = this.seqLength - 1
    return (Math.LN2 * randomScored) / scored
  }

  /**
   * The positions (ascending) of the previous state's cells that determine the bit at
   * `position` (row `i` of `M`); `undefined` for the BOS and the initial state.
   *
   * @throws `ConfigError` (`@attnlab/core`) if `position` is not in `[0, seqLength)`
   */
  parentPositions(position: number): readonly number[] | undefined {
    checkInteger('position', position, 0, this.seqLength - 1)
    const S = this.config.stateSize
    const index = position - this.offset
    if (index < S) return undefined
    const state = Math.floor(index / S)
    const cell = index % S
    const previous = this.offset + (state - 1) * S
    return Array.from(this.rows[cell] as Int32Array, (j) => previous + j)
  }

  /**
   * The ground-truth attention (Baherwani et al., arXiv 2606.25010: "M is also the optimal
   * attention map"): one 0/1 map `[seqLength, seqLength]` whose row `q` marks the `s` cells of the
   * previous state in row `i` of `M`, where token `q + 1` is cell `i` of a determined state
   * ({@link LinearMapTask.parentPositions}); rows predicting the BOS or initial state are 0.
   */
  trueAttention(): TrueAttention {
    return trueAttentionOf(this.seqLength, [
      mapFromParents('rows of M', this.seqLength, (position) => this.parentPositions(position)),
    ])
  }

  /** The configuration as plain JSON with `kind: 'linear-map'` (feed it to {@link createTask}). */
  describe(): Readonly<Record<string, unknown>> {
    return { kind: this.kind, ...structuredClone(this.config) }
  }
}

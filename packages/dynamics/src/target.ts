/**
 * The factorisation target `G` and its exact plateau losses (the reduced model of Yüksel et al.,
 * arXiv 2602.19143, Eq. (4)).
 *
 * @module
 */
import type { ResolvedDynamicsConfig } from './config.ts'

/**
 * The target of the reduced model.
 *
 * @category Model
 */
export interface DynamicsTarget {
  /** Number of features `F` (= number of spans `K`; one teacher feature per span). */
  readonly nFeatures: number
  /** Number of positions `T`. */
  readonly nCtx: number
  /**
   * `G`, `[nFeatures, nCtx]` row-major: `G[j, p] = c_j` for `p` in span `j`, else 0.
   * Positions outside every span are zero columns.
   */
  readonly matrix: Float64Array
  /** Positions of each span, `spanPositions[j]` = the positions of span `j` (ascending). */
  readonly spanPositions: readonly (readonly number[])[]
  /** `spanOf[p]` = the span that position `p` belongs to, or -1 for a zero column. */
  readonly spanOf: Int32Array
}

/**
 * Builds `G` for a config: span `j` occupies the `spans[j]` positions after the previous spans
 * (span 0 starts at position 0), with value `c_j` in row `j`.
 *
 * @param config - a resolved config
 * @returns the target, with `G` as `[K, T]` row-major
 * @category Model
 */
export function buildTarget(config: ResolvedDynamicsConfig): DynamicsTarget {
  const K = config.spans.length
  const T = config.nCtx
  const matrix = new Float64Array(K * T)
  const spanOf = new Int32Array(T).fill(-1)
  const spanPositions: number[][] = []
  let position = 0
  for (let j = 0; j < K; j++) {
    const positions: number[] = []
    const weight = config.spanWeights[j] as number
    for (let q = 0; q < (config.spans[j] as number); q++) {
      matrix[j * T + position] = weight
      spanOf[position] = j
      positions.push(position)
      position++
    }
    spanPositions.push(positions)
  }
  return Object.freeze({
    nFeatures: K,
    nCtx: T,
    matrix,
    spanPositions: Object.freeze(spanPositions.map((p) => Object.freeze(p))),
    spanOf,
  })
}

/**
 * The order in which the flow fits the spans: by decreasing strength `c_j^2 |span_j|` (the
 * squared singular values of `G`, which set both the value growth rate and the attention drive
 * in the competitive phase). Ties keep index order. With equal span lengths and `m > 1` this is
 * `0, 1, ..., K-1`.
 *
 * @param config - a resolved config
 * @returns span indices, first-learned first
 * @category Model
 */
export function learningOrder(config: ResolvedDynamicsConfig): number[] {
  const strength = config.spans.map((length, j) => (config.spanWeights[j] as number) ** 2 * length)
  return strength
    .map((value, j) => ({ value, j }))
    .sort((a, b) => b.value - a.value || a.j - b.j)
    .map(({ j }) => j)
}

/**
 * The exact plateau losses `L_0 > L_1 > ... > L_K = 0`: after the first `j` spans (in
 * {@link learningOrder}) are fitted, the loss is `L_j = 1/2 sum_{g not fitted} |span_g| c_g^2`
 * (for spans already in learning order this is `1/2 sum_{g>j} |span_g| c_g^2`).
 * `L_0` is the loss at initialisation (`V = 0`). With `h < K` heads the flow ends at `L_h`.
 *
 * Units: 1/2 squared Frobenius norm (the ODE's regression loss), not nats.
 *
 * @param config - a resolved config
 * @returns `K + 1` values, decreasing
 * @example
 * ```ts
 * plateauLosses(resolveDynamicsConfig()) // [6.12105, 1.945, 0.5, 0] for m = 1.7, singleton spans
 * ```
 * @category Model
 */
export function plateauLosses(config: ResolvedDynamicsConfig): number[] {
  const order = learningOrder(config)
  const plateaus: number[] = []
  for (let j = 0; j <= order.length; j++) {
    let sum = 0
    for (const g of order.slice(j)) sum += (config.spans[g] as number) * (config.spanWeights[g] as number) ** 2
    plateaus.push(0.5 * sum)
  }
  return plateaus
}

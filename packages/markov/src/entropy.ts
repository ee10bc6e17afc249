/**
 * Small numeric helpers for the oracles: conditional entropies of joint tables, marginalisation
 * of base-d context indices, and Monte-Carlo summaries.
 *
 * @module
 */

/**
 * `H(Y | X) = -sum_{x,y} J(x,y) log(J(x,y) / sum_y J(x,y))` in nats for a joint table `J`
 * stored `[contexts, d]` row-major (need not sum to 1: the result is `sum J * ...`, i.e. the
 * conditional entropy weighted by the table's mass).
 *
 * @internal
 */
export function conditionalEntropy(joint: Float64Array, d: number): number {
  let total = 0
  const contexts = joint.length / d
  for (let c = 0; c < contexts; c++) {
    const base = c * d
    let row = 0
    for (let y = 0; y < d; y++) row += joint[base + y] as number
    if (row <= 0) continue
    let acc = 0
    for (let y = 0; y < d; y++) {
      const j = joint[base + y] as number
      if (j > 0) acc += j * Math.log(j)
    }
    total += row * Math.log(row) - acc
  }
  return total
}

/**
 * Drops the oldest context token of a joint table: input `[d^(n+1), d]` with context index
 * `x * d^n + c` (oldest token most significant), output `[d^n, d]` indexed by `c`.
 *
 * @internal
 */
export function dropOldest(joint: Float64Array, d: number): Float64Array {
  const slab = joint.length / d
  const out = new Float64Array(slab)
  for (let x = 0; x < d; x++) {
    const base = x * slab
    for (let i = 0; i < slab; i++) out[i] = (out[i] as number) + (joint[base + i] as number)
  }
  return out
}

/** Entropy in nats of a probability vector (zeros ignored). @internal */
export function entropy(p: ArrayLike<number>, offset = 0, length = p.length - offset): number {
  let h = 0
  for (let i = 0; i < length; i++) {
    const v = p[offset + i] as number
    if (v > 0) h -= v * Math.log(v)
  }
  return h
}

/**
 * A Monte-Carlo estimate with its standard error.
 *
 * @category Oracles
 */
export interface Estimate {
  /** The estimate (nats for losses and entropies). */
  readonly estimate: number
  /** Its standard error (same unit). */
  readonly standardError: number
  /** Independent units averaged (sequences, replicates, ...). */
  readonly samples: number
}

/** Mean and standard error of the mean of independent values. @internal */
export function meanAndStandardError(values: ArrayLike<number>): Estimate {
  const n = values.length
  let mean = 0
  for (let i = 0; i < n; i++) mean += values[i] as number
  mean /= n
  let ss = 0
  for (let i = 0; i < n; i++) ss += ((values[i] as number) - mean) ** 2
  const standardError = n > 1 ? Math.sqrt(ss / (n - 1) / n) : Infinity
  return { estimate: mean, standardError, samples: n }
}

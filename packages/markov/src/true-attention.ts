/**
 * Ground-truth attention maps (`@attnlab/core`'s `TrueAttention`) built from a task's fixed
 * dependencies: what the attention-bias intervention of Baherwani et al. (arXiv 2606.25010)
 * adds to the attention scores.
 *
 * @module
 */
import type { TrueAttention, TrueAttentionMap } from '@attnlab/core'

/**
 * One 0/1 map from the parents of each predicted token: row `q` (the query predicting token
 * `q + 1`) has a 1 at every position `parents(q + 1)` returns (all `<= q`), rows whose token has
 * no fixed parents are 0.
 *
 * @param name - the map's label
 * @param seqLength - the task's `seqLength` (the map is `[seqLength, seqLength]`)
 * @param parents - the task's `parentPositions`
 */
export function mapFromParents(
  name: string,
  seqLength: number,
  parents: (position: number) => readonly number[] | undefined,
): TrueAttentionMap {
  const weights = new Float32Array(seqLength * seqLength)
  for (let q = 0; q + 1 < seqLength; q++) {
    for (const key of parents(q + 1) ?? []) weights[q * seqLength + key] = 1
  }
  return { name, weights }
}

/**
 * One 0/1 map from relative offsets: row `q` has a 1 at keys `q - offset` (offset 0 is the
 * query's own position) for the queries whose predicted token `q + 1` passes `scored`.
 *
 * @param name - the map's label
 * @param seqLength - the task's `seqLength`
 * @param offsets - relative offsets (non-negative)
 * @param scored - whether the token at a position has this fixed dependency
 */
export function mapFromOffsets(
  name: string,
  seqLength: number,
  offsets: readonly number[],
  scored: (position: number) => boolean,
): TrueAttentionMap {
  const weights = new Float32Array(seqLength * seqLength)
  for (let q = 0; q + 1 < seqLength; q++) {
    if (!scored(q + 1)) continue
    for (const offset of offsets) if (q - offset >= 0) weights[q * seqLength + q - offset] = 1
  }
  return { name, weights }
}

/** Wraps maps into a {@link TrueAttention} of side `seqLength`. */
export function trueAttentionOf(seqLength: number, maps: readonly TrueAttentionMap[]): TrueAttention {
  return { size: seqLength, maps }
}

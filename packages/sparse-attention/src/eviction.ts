/**
 * KV-cache eviction shared by SnapKV and Ada-SnapKV: the observation-window importance scores,
 * the compaction of the cache after the prefill, and the decode strategy over the compacted
 * cache. Generated tokens are never evicted.
 *
 * Cache layout after compaction: `keys/values [batch, nKvHeads, width, d]` where `width` is the
 * largest number of prompt tokens any KV head kept (equal for SnapKV; per-head lengths differ for
 * Ada-SnapKV, the shorter heads padded and masked), followed by the generated tokens that the
 * model appends. The kernel state ({@link EvictionState}) records which prompt position each
 * slot holds.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import {
  type AttentionPrefillInput,
  InvalidArgumentError,
  type KernelState,
  type LayerKVCache,
  ShapeError,
} from '@attnlab/core'
import { checkPrefillInput, type DecodeStrategy, type PrefillShape } from './kernel.ts'
import { lastWindowProbabilities } from './masked-attention.ts'
import { averagePool } from './select.ts'

/**
 * What an eviction method kept of the prompt, attached to the layer's cache.
 *
 * @category SnapKV
 */
export class EvictionState implements KernelState {
  readonly [key: string]: unknown
  /** Marks this state type. */
  readonly kind = 'eviction' as const
  constructor(
    /** The method that evicted (`'snapkv'`, `'ada-snapkv'`). */
    readonly method: string,
    /** Prompt length `n` (tokens). */
    readonly promptLength: number,
    /** Batch size. */
    readonly batch: number,
    /** KV heads. */
    readonly nKvHeads: number,
    /** Prompt slots per KV head in the compacted cache (the largest kept count). */
    readonly width: number,
    /** Prompt tokens kept per `(batch, kvHead)`, `[batch * nKvHeads]`. */
    readonly keptCounts: Int32Array,
    /** Prompt position of each prompt slot, `[batch, nKvHeads, width]`, ascending, `-1` for padding. */
    readonly keptPositions: Int32Array,
    /** The study's sparsity per batch row, `[batch]`. */
    readonly reported: Float64Array,
  ) {}
  /** Nothing to free: the state holds plain arrays. */
  dispose(): void {}
}

/**
 * Aggregated window importance per `(batch, kvHead)` key: for every query head the window
 * probabilities are summed (`'mean'`: SnapKV) or maxed (`'max'`: Ada-SnapKV) over the window
 * queries, then averaged or maxed over the group's query heads; then average-pooled with `kernel`.
 *
 * @returns `[batch * nKvHeads]` arrays of length `n`
 */
export function windowImportance(
  input: AttentionPrefillInput,
  shape: PrefillShape,
  window: number,
  kernel: number,
  aggregation: 'mean' | 'max',
): Float64Array[] {
  const { batch, nHeads, nKvHeads, length: n } = shape
  const w = Math.min(window, n)
  const probabilities = lastWindowProbabilities(input.q, input.k, w, input.scale, 'snapkv selection') // [b, H, w, n]
  const group = nHeads / nKvHeads
  const out: Float64Array[] = []
  for (let b = 0; b < batch; b++) {
    for (let kv = 0; kv < nKvHeads; kv++) {
      const importance = new Float64Array(n)
      for (let g = 0; g < group; g++) {
        const head = b * nHeads + kv * group + g
        const base = head * w * n
        if (aggregation === 'mean') {
          for (let i = 0; i < w; i++) {
            for (let j = 0; j < n; j++)
              importance[j] = (importance[j] as number) + (probabilities[base + i * n + j] as number) / group
          }
        } else {
          for (let i = 0; i < w; i++) {
            for (let j = 0; j < n; j++)
              importance[j] = Math.max(importance[j] as number, probabilities[base + i * n + j] as number)
          }
        }
      }
      out.push(averagePool(importance, kernel))
    }
  }
  return out
}

/** Marks the first `prefix` and last `local` positions as forced (+Infinity), in place. */
export function forceEnds(scores: Float64Array, prefix: number, local: number): void {
  const n = scores.length
  for (let j = 0; j < Math.min(prefix, n); j++) scores[j] = Infinity
  for (let j = Math.max(0, n - local); j < n; j++) scores[j] = Infinity
}

/**
 * Replaces the cache's prompt keys/values by the kept ones (per `(batch, kvHead)`, ascending
 * positions), padding to the largest count, and attaches an {@link EvictionState}. The replaced
 * tensors are disposed; the new ones are kept (`tf.keep`) and owned by the cache.
 *
 * @param kept - ascending kept positions per `(batch, kvHead)`, `batch * nKvHeads` lists
 * @throws `ShapeError` (`@attnlab/core`) if the cache does not hold exactly the prompt
 */
export function compactCache(
  method: string,
  cache: LayerKVCache,
  shape: PrefillShape,
  kept: readonly (readonly number[])[],
  reported: Float64Array,
): void {
  const { batch, nKvHeads, length: n } = shape
  const { keys, values } = cache
  if (keys === null || values === null || keys.shape[2] !== n || values.shape[2] !== n) {
    throw new ShapeError(
      `${method}: afterPrefill needs the cache to hold the ${n} prompt tokens, but it ` +
        `holds ${keys === null ? 'nothing' : keys.shape[2]}`,
      { promptLength: n },
    )
  }
  const width = Math.max(...kept.map((k) => k.length))
  const keptCounts = new Int32Array(batch * nKvHeads)
  const keptPositions = new Int32Array(batch * nKvHeads * width).fill(-1)
  const index = new Int32Array(batch * nKvHeads * width)
  kept.forEach((positions, bk) => {
    keptCounts[bk] = positions.length
    positions.forEach((p, s) => {
      keptPositions[bk * width + s] = p
      index[bk * width + s] = bk * n + p
    })
    for (let s = positions.length; s < width; s++) index[bk * width + s] = bk * n // padding: any row, masked
  })
  const compact = (x: tf.Tensor4D): tf.Tensor4D =>
    tf.keep(
      tf.tidy(() => {
        const d = x.shape[3]
        const flatIndex = tf.tensor1d(index, 'int32')
        return tf.reshape(tf.gather(tf.reshape(x, [batch * nKvHeads * n, d]), flatIndex), [
          batch,
          nKvHeads,
          width,
          d,
        ]) as tf.Tensor4D
      }),
    )
  const newKeys = compact(keys)
  const newValues = compact(values)
  keys.dispose()
  values.dispose()
  cache.keys = newKeys
  cache.values = newValues
  cache.kernelState?.dispose()
  cache.kernelState = new EvictionState(method, n, batch, nKvHeads, width, keptCounts, keptPositions, reported)
}

/**
 * Checks an afterPrefill call and returns the prompt's shape.
 *
 * @throws `ShapeError` (`@attnlab/core`) on inconsistent shapes
 */
export function checkAfterPrefill(input: AttentionPrefillInput): PrefillShape {
  return checkPrefillInput(input)
}

/**
 * The decode strategy over a compacted cache: each query head reads its KV head's kept prompt
 * tokens and every generated token.
 *
 * @param method - the method name (for errors)
 */
export function evictionDecodeStrategy(method: string, afterPrefill: DecodeStrategy['afterPrefill']): DecodeStrategy {
  return {
    ...(afterPrefill ? { afterPrefill } : {}),
    select(input, shape) {
      const state = input.cache.kernelState
      if (!(state instanceof EvictionState)) {
        throw new InvalidArgumentError(
          `${method}: decode needs the cache compacted by afterPrefill (call kernel.afterPrefill(prefillInput, ` +
            `cache) after the prefill)`,
          { method },
        )
      }
      const { batch, nHeads, nKvHeads, stored, position } = shape
      if (state.batch !== batch || state.nKvHeads !== nKvHeads) {
        throw new ShapeError(
          `${method}: cache state is for batch ${state.batch} x ${state.nKvHeads} KV heads, got ${batch} x ${nKvHeads}`,
        )
      }
      const generated = stored - state.width
      if (generated < 1 || state.promptLength + generated - 1 !== position) {
        throw new ShapeError(
          `${method}: cache holds ${state.width} prompt slots + ${generated} generated tokens, inconsistent with the ` +
            `new token at position ${position} after a ${state.promptLength}-token prompt`,
          { stored, position, promptLength: state.promptLength },
        )
      }
      const slotPositions = new Int32Array(batch * nKvHeads * stored)
      for (let bk = 0; bk < batch * nKvHeads; bk++) {
        for (let s = 0; s < stored; s++) {
          slotPositions[bk * stored + s] =
            s < state.width
              ? (state.keptPositions[bk * state.width + s] as number)
              : state.promptLength + s - state.width
        }
      }
      const group = nHeads / nKvHeads
      const allowedSlots = new Uint8Array(batch * nHeads * stored)
      const reported = new Float64Array(batch * nHeads)
      for (let b = 0; b < batch; b++) {
        for (let h = 0; h < nHeads; h++) {
          const bk = b * nKvHeads + Math.floor(h / group)
          for (let s = 0; s < stored; s++)
            allowedSlots[(b * nHeads + h) * stored + s] = (slotPositions[bk * stored + s] as number) >= 0 ? 1 : 0
          reported[b * nHeads + h] = state.reported[b] as number
        }
      }
      let keptTotal = 0
      for (const k of state.keptCounts) keptTotal += k
      return {
        allowedSlots,
        slotPositions,
        reported,
        extra: { keptPerKvHead: keptTotal / state.keptCounts.length, generated },
      }
    },
  }
}

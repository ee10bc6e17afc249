/**
 * The key/value cache of KV-cached decoding: one {@link LayerKVCache} per block, owned by a
 * {@link KVCache} that disposes every tensor it holds (and each kernel's state).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ShapeError, type LayerKVCache } from '@attnlab/core'

/**
 * Per-layer key/value caches for one generation run. Create with `new KVCache(nLayers)`; the
 * model appends each processed token's keys and values; call {@link KVCache.dispose} when done.
 *
 * @category Generation
 */
export class KVCache {
  /** One cache per block (the attention kernel reads these; eviction kernels may compact them). */
  readonly layers: LayerKVCache[]
  private disposed = false

  /** @param nLayers - number of blocks */
  constructor(nLayers: number) {
    this.layers = Array.from({ length: nLayers }, () => ({
      keys: null,
      values: null,
      positions: 0,
      promptLength: 0,
      kernelState: null,
    }))
  }

  /** Tokens processed so far (prompt + generated). */
  get positions(): number {
    return this.layers[0]?.positions ?? 0
  }

  /**
   * Appends keys and values of new positions to one layer (concatenating on the position axis);
   * the cache keeps its own copies and frees the previous ones.
   *
   * @param layer - block index
   * @param keys - `[batch, nKvHeads, new, dHead]`
   * @param values - `[batch, nKvHeads, new, dValue]`
   * @throws `ShapeError` (`@attnlab/core`) if the shapes do not continue the cached ones
   */
  append(layer: number, keys: tf.Tensor4D, values: tf.Tensor4D): void {
    const cache = this.layers[layer]
    if (cache === undefined) throw new ShapeError(`KV cache has no layer ${layer} (it has ${this.layers.length})`)
    if (this.disposed) throw new ShapeError('KV cache was disposed')
    const previousKeys = cache.keys
    const previousValues = cache.values
    if (previousKeys !== null && previousValues !== null) {
      if (
        previousKeys.shape[0] !== keys.shape[0] ||
        previousKeys.shape[1] !== keys.shape[1] ||
        previousKeys.shape[3] !== keys.shape[3]
      ) {
        throw new ShapeError(`keys [${keys.shape}] do not continue the cached keys [${previousKeys.shape}]`)
      }
      cache.keys = tf.keep(tf.concat([previousKeys, keys], 2))
      cache.values = tf.keep(tf.concat([previousValues, values], 2))
      previousKeys.dispose()
      previousValues.dispose()
    } else {
      cache.keys = tf.keep(tf.clone(keys))
      cache.values = tf.keep(tf.clone(values))
    }
    cache.positions += keys.shape[2]
  }

  /** Frees every cached tensor and kernel state. Safe to call twice. */
  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    for (const cache of this.layers) {
      cache.keys?.dispose()
      cache.values?.dispose()
      cache.kernelState?.dispose()
      cache.keys = null
      cache.values = null
      cache.kernelState = null
    }
  }
}

import { expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends } from '@attnlab/core/testing'
import { AttnlabError, ShapeError, type AttentionContext, type LayerKVCache } from '@attnlab/core'
import {
  EvictionState,
  MODEL_SHAPES,
  QuestState,
  SequenceTooShortError,
  defineKernel,
  dense,
  prefillFlops,
  quest,
  snapKV,
  verticalSlashKernelSparsity,
} from './index.ts'

const none: AttentionContext = { hooks: {}, needsPattern: false }

function cacheOf(
  keys: tf.Tensor4D,
  values: tf.Tensor4D,
  promptLength: number,
  state: LayerKVCache['kernelState'] = null,
): LayerKVCache {
  return { keys, values, positions: keys.shape[2], promptLength, kernelState: state }
}

describeWithBackends('error paths', () => {
  it('prefill input: empty sequence', () => {
    const x = tf.zeros([1, 2, 0, 4]) as tf.Tensor4D
    try {
      expect(() => dense().prefill({ q: x, k: x, v: x, scale: 1, layer: 0 }, none)).toThrow(/at least 1/)
    } finally {
      x.dispose()
    }
  })

  it('decode input: bad position, bad scale, bad head groups', () => {
    const q = tf.zeros([1, 3, 1, 4]) as tf.Tensor4D
    const q2 = tf.zeros([1, 2, 1, 4]) as tf.Tensor4D
    const k = tf.zeros([1, 2, 5, 4]) as tf.Tensor4D
    try {
      const cache = cacheOf(k, k, 4)
      expect(() => dense().decode({ q, cache, position: 4, scale: 1, layer: 0 }, none)).toThrow(/multiple of nKvHeads/)
      expect(() => dense().decode({ q: q2, cache, position: -1, scale: 1, layer: 0 }, none)).toThrow(
        /non-negative integer/,
      )
      expect(() => dense().decode({ q: q2, cache, position: 4.5, scale: 1, layer: 0 }, none)).toThrow(
        /non-negative integer/,
      )
      expect(() => dense().decode({ q: q2, cache, position: 4, scale: Infinity, layer: 0 }, none)).toThrow(/scale/)
    } finally {
      tf.dispose([q, q2, k])
    }
  })

  it('decode strategies that break the slot invariants are caught', () => {
    const q = tf.zeros([1, 2, 1, 4]) as tf.Tensor4D
    const k = tf.zeros([1, 2, 3, 4]) as tf.Tensor4D
    const strategy = (slotPositions: number[], allowed = [1, 1, 1, 1, 1, 1]) =>
      defineKernel({
        method: 'custom',
        phases: ['decode'],
        config: {},
        strategy: {
          select: () => ({
            allowedSlots: Uint8Array.from(allowed),
            slotPositions: Int32Array.from(slotPositions),
            reported: new Float64Array(2),
          }),
        },
      })
    try {
      const cache = cacheOf(k, k, 2)
      expect(() => strategy([0, 1, 9, 0, 1, 2]).decode({ q, cache, position: 2, scale: 1, layer: 0 }, none)).toThrow(
        /after the new token/,
      )
      expect(() => strategy([0, -1, 2, 0, 1, 2]).decode({ q, cache, position: 2, scale: 1, layer: 0 }, none)).toThrow(
        /padding slot/,
      )
      expect(() =>
        strategy([0, 1, 2, 0, 1, 2], [0, 0, 0, 1, 1, 1]).decode({ q, cache, position: 2, scale: 1, layer: 0 }, none),
      ).toThrow(/computes no key/)
    } finally {
      tf.dispose([q, k])
    }
  })

  it('eviction: afterPrefill on a cache that does not hold the prompt; inconsistent state', () => {
    const q = tf.zeros([1, 2, 8, 4]) as tf.Tensor4D
    const k = tf.zeros([1, 2, 8, 4]) as tf.Tensor4D
    const k7 = tf.zeros([1, 2, 7, 4]) as tf.Tensor4D
    const k5 = tf.zeros([1, 2, 5, 4]) as tf.Tensor4D
    const q1 = tf.zeros([1, 2, 1, 4]) as tf.Tensor4D
    const kernel = snapKV({ capacity: 4, local: 1, prefix: 1, window: 2, kernelSize: 1 })
    try {
      expect(() => kernel.afterPrefill?.({ q, k, v: k, scale: 1, layer: 0 }, cacheOf(k7, k7, 8))).toThrow(
        /hold the 8 prompt tokens/,
      )
      const state = new EvictionState(
        'snapkv',
        8,
        1,
        2,
        4,
        Int32Array.from([4, 4]),
        Int32Array.from([0, 1, 2, 7, 0, 1, 2, 7]),
        Float64Array.from([0.5]),
      )
      // 4 kept + 1 generated = position 8; position 9 does not fit
      expect(() =>
        kernel.decode({ q: q1, cache: cacheOf(k5, k5, 8, state), position: 9, scale: 1, layer: 0 }, none),
      ).toThrow(/inconsistent/)
      const wrongBatch = new EvictionState(
        'snapkv',
        8,
        2,
        2,
        4,
        new Int32Array(4),
        new Int32Array(16),
        new Float64Array(2),
      )
      expect(() =>
        kernel.decode({ q: q1, cache: cacheOf(k5, k5, 8, wrongBatch), position: 8, scale: 1, layer: 0 }, none),
      ).toThrow(/batch 2/)
    } finally {
      tf.dispose([q, k, k7, k5, q1])
    }
  })

  it('quest: compacted cache, mismatched state, stale position, no afterPrefill with a short prompt', () => {
    const q1 = tf.zeros([1, 2, 1, 4]) as tf.Tensor4D
    const k = tf.zeros([1, 2, 20, 4]) as tf.Tensor4D
    const kernel = quest({ tokenBudget: 8, pageSize: 4 })
    try {
      expect(() => kernel.decode({ q: q1, cache: cacheOf(k, k, 19), position: 25, scale: 1, layer: 0 }, none)).toThrow(
        /full cache/,
      )
      expect(() =>
        kernel.decode(
          { q: q1, cache: cacheOf(k, k, 19, new QuestState(19, 3, 4, 4)), position: 19, scale: 1, layer: 0 },
          none,
        ),
      ).toThrow(/rows/)
      const ahead = new QuestState(19, 2, 4, 4)
      ahead.add(new Float32Array(2 * 30 * 4), 30)
      expect(() =>
        kernel.decode({ q: q1, cache: cacheOf(k, k, 19, ahead), position: 19, scale: 1, layer: 0 }, none),
      ).toThrow(/already summarised/)
      // no afterPrefill: the state is built lazily, and the length check still applies
      const short = tf.zeros([1, 2, 10, 4]) as tf.Tensor4D
      try {
        expect(() =>
          kernel.decode({ q: q1, cache: cacheOf(short, short, 9), position: 9, scale: 1, layer: 0 }, none),
        ).toThrow(SequenceTooShortError)
      } finally {
        short.dispose()
      }
      const cache = cacheOf(k, k, 19)
      const r = kernel.decode({ q: q1, cache, position: 19, scale: 1, layer: 0 }, none)
      expect(cache.kernelState).toBeInstanceOf(QuestState)
      expect(r.computedPairs).toBe(2 * (8 + 4))
      r.z.dispose()
    } finally {
      tf.dispose([q1, k])
    }
  })

  it('SequenceTooShortError carries the method and lengths', () => {
    const e = new SequenceTooShortError('quest', 10, 40, 'reason')
    expect(e).toBeInstanceOf(AttnlabError)
    expect(e.code).toBe('INVALID_ARGUMENT')
    expect([e.method, e.length, e.required]).toEqual(['quest', 10, 40])
    expect(e.message).toBe('quest: sequence of 10 tokens is too short: reason (needs at least 40 tokens)')
  })

  it('accounting and cost-model argument checks', () => {
    expect(() => verticalSlashKernelSparsity([0], [0], 0)).toThrow(/n/)
    expect(() =>
      prefillFlops({ ...MODEL_SHAPES['gemma-3-4b'], slidingWindow: { window: 0, globalEvery: 6 } }, 10),
    ).toThrow(/slidingWindow.window/)
    expect(() =>
      prefillFlops({ ...MODEL_SHAPES['gemma-3-4b'], slidingWindow: { window: 10, globalEvery: 0 } }, 10),
    ).toThrow(/globalEvery/)
    expect(ShapeError).toBeDefined()
  })
})

// The tiled path (what every prefill computes its output with, unless hooks need the dense
// pattern) against the masked reference attendWithMask on the same mask, per method, at odd
// lengths and several block sizes; the compact selection's mask is built only when read; requests
// that cannot fit fail before any work.
import { expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { InvalidArgumentError, TooLargeError } from '@attnlab/core'
import {
  applyPrefill,
  attendByTiles,
  attendWithMask,
  blockSparse,
  causalPairMask,
  causalTile,
  checkPrefillFits,
  defineKernel,
  dense,
  flexPrefill,
  maskFromTiles,
  tiledAttentionBytes,
  tilesFromMask,
  verticalSlash,
  type SparseAttentionKernel,
  type TileSource,
} from './index.ts'
import { maxAbsDiff, randomQkv, referenceAttention, type Qkv } from './__fixtures__/reference.ts'

const none = { hooks: {}, needsPattern: false }

function input(x: Qkv, scale = 1 / Math.sqrt(x.d)) {
  return {
    q: tf.tensor4d(x.q, [1, x.H, x.T, x.d]),
    k: tf.tensor4d(x.k, [1, x.Hkv, x.T, x.d]),
    v: tf.tensor4d(x.v, [1, x.Hkv, x.T, x.dv]),
    scale,
    layer: 0,
  }
}

function countPairs(mask: Uint8Array): number {
  let count = 0
  for (const m of mask) count += m
  return count
}

/** The tiled output vs attendWithMask on the result's mask; exact sparsity vs the mask's pairs. */
function expectMatchesMasked(kernel: SparseAttentionKernel, x: Qkv): void {
  const qkv = input(x)
  const result = kernel.prefillWithMask(qkv, none)
  const masked = attendWithMask(qkv.q, qkv.k, qkv.v, result.mask, qkv.scale)
  const tolerance = tf.getBackend() === 'cpu' ? 1e-5 : 2e-5
  expect(maxAbsDiff(result.z.dataSync(), masked.dataSync()), `${kernel.method} T=${x.T}`).toBeLessThan(tolerance)
  // and against the independent float64 reference
  expect(maxAbsDiff(result.z.dataSync(), referenceAttention(x, result.mask))).toBeLessThan(tolerance)
  expect(result.computedPairs).toBe(countPairs(result.mask))
  const causal = (x.T * (x.T + 1)) / 2
  expect(result.sparsity.exact).toBeCloseTo(1 - countPairs(result.mask) / (x.H * causal), 12)
  tf.dispose([qkv.q, qkv.k, qkv.v, result.z, masked])
}

describeWithBackends('tiled prefill attention', () => {
  it('dense: every causal pair at odd lengths (one tile and several), as the masked reference', async () => {
    await expectNoLeaks(() => {
      for (const T of [1, 65, 300]) expectMatchesMasked(dense(), randomQkv(T, 4, 2, T, 8, 6))
    })
  })

  it('block-sparse: several block sizes and K, odd lengths, as the masked reference', async () => {
    await expectNoLeaks(() => {
      for (const [T, blockSize, topK] of [
        [67, 8, 3],
        [131, 8, 5],
        [300, 16, 4],
        [257, 32, 3],
      ] as const) {
        expectMatchesMasked(blockSparse({ blockSize, topK }), randomQkv(T + blockSize, 4, 2, T, 8))
      }
    })
  })

  it('vertical-slash: kernel and exact modes, several tile sizes, as the masked reference', async () => {
    await expectNoLeaks(() => {
      for (const [T, kernelBlockSize, maskMode] of [
        [131, 16, 'kernel'],
        [300, 64, 'kernel'],
        [97, 8, 'exact'],
        [300, 64, 'exact'],
      ] as const) {
        const kernel = verticalSlash({
          verticalSize: 9,
          slashSize: 7,
          sinks: 2,
          local: 3,
          window: 24,
          kernelBlockSize,
          maskMode,
        })
        expectMatchesMasked(kernel, randomQkv(T + kernelBlockSize, 4, 4, T, 8))
      }
    })
  })

  it('flexprefill: token level (tau 0) and block level (tau > 0), as the masked reference', async () => {
    await expectNoLeaks(() => {
      const x = randomQkv(5, 4, 2, 131, 8)
      expectMatchesMasked(flexPrefill({ alpha: 0.5, minBudget: 8, window: 16, local: 4 }), x)
      for (const tau of [0.05, 10]) {
        expectMatchesMasked(flexPrefill({ tau, alpha: 0.6, minBudget: 16, blockSize: 16, window: 16, local: 4 }), x)
      }
    })
  })

  it('a hooked prefill (dense pattern materialised) gives the same output and mask as the tiled one', async () => {
    await expectNoLeaks(() => {
      const x = randomQkv(9, 2, 2, 70, 8)
      const kernel = blockSparse({ blockSize: 8, topK: 4 })
      const qkv = input(x)
      const tiled = kernel.prefillWithMask(qkv, none)
      const hooked = kernel.prefillWithMask(qkv, { hooks: { pattern: (p: tf.Tensor4D) => p }, needsPattern: true })
      expect(maxAbsDiff(tiled.z.dataSync(), hooked.z.dataSync())).toBeLessThan(2e-5)
      expect(Array.from(hooked.mask)).toEqual(Array.from(tiled.mask))
      expect(hooked.computedPairs).toBe(tiled.computedPairs)
      tf.dispose([qkv.q, qkv.k, qkv.v, tiled.z, hooked.z])
    })
  })

  it('builds the mask only when it is read; times the estimation and the attention', async () => {
    await expectNoLeaks(() => {
      const x = randomQkv(3, 2, 2, 50, 8)
      let calls = 0
      const tiles: TileSource = (_head, start, stop) => {
        calls++
        return causalTile(start, stop)
      }
      const kernel = defineKernel({
        method: 'counting',
        phases: ['prefill'],
        config: {},
        planner: (_input, shape) => ({ tiles, tileRows: 16, reported: new Float64Array(shape.nHeads) }),
      })
      const t = { q: tf.tensor3d(x.q, [2, 50, 8]), k: tf.tensor3d(x.k, [2, 50, 8]), v: tf.tensor3d(x.v, [2, 50, 8]) }
      const result = applyPrefill(kernel, t)
      expect(calls).toBe(2 * 4) // 2 heads x ceil(50 / 16) tiles, for the output only
      expect(result.mask).toEqual(causalPairMask(1, 2, 50))
      expect(calls).toBe(2 * 2 * 4)
      void result.mask // built once
      expect(calls).toBe(2 * 2 * 4)
      for (const seconds of [result.timing.estimationSeconds, result.timing.attentionSeconds]) {
        expect(Number.isFinite(seconds) && seconds >= 0).toBe(true)
      }
      const vs = applyPrefill(verticalSlash({ verticalSize: 8, slashSize: 8, local: 4, window: 8 }), t)
      expect(vs.timing.estimationSeconds).toBeGreaterThan(0)
      expect(vs.timing.attentionSeconds).toBeGreaterThan(0)
      tf.dispose([t.q, t.k, t.v, result.output, vs.output])
    })
  })

  it('the same seed gives the same numbers', () => {
    const run = () => {
      const qkv = input(randomQkv(21, 2, 1, 90, 8))
      const r = blockSparse({ blockSize: 8, topK: 4 }).prefillWithMask(qkv, none)
      const out = Array.from(r.z.dataSync())
      tf.dispose([qkv.q, qkv.k, qkv.v, r.z])
      return out
    }
    expect(run()).toEqual(run())
  })

  it('attendByTiles refuses a non-causal tile and a row without keys', async () => {
    await expectNoLeaks(() => {
      const qkv = input(randomQkv(1, 1, 1, 4, 2))
      const future: TileSource = () => ({ keys: Int32Array.from([0, 1, 2, 3]), allowed: new Uint8Array(16).fill(1) })
      expect(() => attendByTiles(qkv.q, qkv.k, qkv.v, 1, future, 4)).toThrow(/non-causal pair \(0, 1\)/)
      const empty: TileSource = () => ({ keys: Int32Array.from([0]), allowed: new Uint8Array(4) })
      expect(() => attendByTiles(qkv.q, qkv.k, qkv.v, 1, empty, 4)).toThrow(InvalidArgumentError)
      expect(() => attendByTiles(qkv.q, qkv.k, qkv.v, 1, empty, 4)).toThrow(/query 0\) computes no key/)
      tf.dispose([qkv.q, qkv.k, qkv.v])
    })
  })

  it('tilesFromMask reproduces a full mask through maskFromTiles', () => {
    const x = randomQkv(4, 2, 2, 37, 4)
    const mask = causalPairMask(1, 2, 37)
    for (let e = 0; e < mask.length; e += 3) if (e % 37 !== Math.floor(e / 37) % 37) mask[e] = 0
    expect(maskFromTiles(tilesFromMask(mask, x.T), 2, x.T, 8)).toEqual(mask)
  })

  it('a request that cannot fit fails before any work, naming the bytes and the dimension', () => {
    const shape = { batch: 1, nHeads: 8, nKvHeads: 8, length: 65536, dHead: 64, dValue: 64 }
    // hooks need [1, 8, 65536, 65536] floats: more than one tensor holds
    expect(() => checkPrefillFits(shape, true)).toThrow(TooLargeError)
    expect(() => checkPrefillFits(shape, true)).toThrow(/\[batch, nHeads, T, T\] = \[1, 8, 65536, 65536\]: \d+ bytes/)
    expect(() => checkPrefillFits(shape, false)).not.toThrow()
    // the [heads, T, T] mask of 8 heads at T = 32768 exceeds one typed array; refused before any tile is read
    let calls = 0
    const tiles: TileSource = (_h, start, stop) => {
      calls++
      return causalTile(start, stop)
    }
    expect(() => maskFromTiles(tiles, 8, 32768, 64)).toThrow(/\[8, 32768, 32768\] needs 8589934592 bytes/)
    expect(calls).toBe(0)
    if (tf.getBackend() === 'wasm') {
      // the wasm heap holds 4 GiB: the tiled work space of T = 2^26 does not fit
      const huge = { ...shape, length: 2 ** 26 }
      expect(tiledAttentionBytes(huge, 256)).toBeGreaterThan(2 ** 32)
      expect(() => checkPrefillFits(huge, false)).toThrow(
        /needs about \d+ bytes but the wasm backend has \d+ bytes free/,
      )
    }
  })
})

import { expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { AttnlabError, ShapeError } from '@attnlab/core'
import { attendWithMask, causalPairMask, defineKernel, repeatKvHeads } from './index.ts'
import { maxAbsDiff, randomQkv, referenceAttention } from './__fixtures__/reference.ts'

describeWithBackends('masked attention', () => {
  const x = randomQkv(1, 4, 2, 6, 4, 3)
  const q = () => tf.tensor4d(x.q, [1, 4, 6, 4])
  const k = () => tf.tensor4d(x.k, [1, 2, 6, 4])
  const v = () => tf.tensor4d(x.v, [1, 2, 6, 3])

  it('equals softmax attention over an arbitrary causal mask, with GQA and dValue != dHead', async () => {
    const mask = causalPairMask(1, 4, 6)
    mask[(1 * 6 + 5) * 6 + 2] = 0 // head 1 skips key 2 for query 5
    mask[(3 * 6 + 4) * 6 + 0] = 0
    const { shape, data } = await expectNoLeaks(() => {
      const [a, b, c] = [q(), k(), v()]
      const out = attendWithMask(a, b, c, mask, 0.7)
      const read = { shape: out.shape, data: out.dataSync().slice() }
      tf.dispose([a, b, c, out])
      return read
    })
    expect(shape).toEqual([1, 4, 6, 3])
    expect(maxAbsDiff(data, referenceAttention(x, mask, 0.7))).toBeLessThan(1e-5)
  })

  it('rejects a mask of the wrong size, an empty row and bad head groups', () => {
    const [a, b, c] = [q(), k(), v()]
    try {
      expect(() => attendWithMask(a, b, c, new Uint8Array(10), 1)).toThrow(ShapeError)
      const empty = causalPairMask(1, 4, 6)
      empty.fill(0, (2 * 6 + 3) * 6, (2 * 6 + 4) * 6)
      expect(() => attendWithMask(a, b, c, empty, 1)).toThrow(/head 2, query 3/)
      expect(() => repeatKvHeads(b, 3)).toThrow(/multiple of nKvHeads/)
      expect(repeatKvHeads(b, 2)).toBe(b)
      const bad = defineKernel({
        method: 'bad',
        phases: ['prefill'],
        config: {},
        planner: (_input, shape) => ({
          allowed: new Uint8Array(shape.batch * shape.nHeads * shape.length * shape.length).fill(1),
          reported: new Float64Array(4),
        }),
      })
      expect(() => bad.prefill({ q: a, k: b, v: c, scale: 1, layer: 0 }, { hooks: {}, needsPattern: false })).toThrow(
        AttnlabError,
      )
      expect(() => bad.prefill({ q: a, k: b, v: c, scale: 1, layer: 0 }, { hooks: {}, needsPattern: false })).toThrow(
        /non-causal/,
      )
      const short = defineKernel({
        method: 'short',
        phases: ['prefill'],
        config: {},
        planner: () => ({ allowed: new Uint8Array(3), reported: new Float64Array(4) }),
      })
      expect(() => short.prefill({ q: a, k: b, v: c, scale: 1, layer: 0 }, { hooks: {}, needsPattern: false })).toThrow(
        /mask of 3 entries/,
      )
    } finally {
      tf.dispose([a, b, c])
    }
  })

  it('calls the prefill hooks on [batch, nHeads, T, T] tensors and uses their replacements', () => {
    const [a, b, c] = [q(), k(), v()]
    const dense = defineKernel({ method: 'dense', phases: [], config: {} })
    try {
      const seen: number[][] = []
      const result = dense.prefill(
        { q: a, k: b, v: c, scale: 0.5, layer: 0 },
        {
          needsPattern: true,
          hooks: {
            attnScores: (s) => {
              seen.push(s.shape)
              expect(s.dataSync()[1]).toBe(-Infinity) // masked entries are -Infinity
              return s
            },
            pattern: (p) => {
              seen.push(p.shape)
              return tf.mul(p, 0) as tf.Tensor4D // ablate every head
            },
          },
        },
      )
      expect(seen).toEqual([
        [1, 4, 6, 6],
        [1, 4, 6, 6],
      ])
      expect(Math.max(...Array.from(result.z.dataSync()).map(Math.abs))).toBe(0)
      result.z.dispose()
    } finally {
      tf.dispose([a, b, c])
    }
  })
})

import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { ConfigError, InvalidArgumentError, ShapeError } from '../errors.ts'
import { Rng } from '../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../testing.ts'
import { randomArray } from './reference.test-utils.ts'
import { sparseAttention, sparseAttentionKernelMode, type SparseAttentionIndex } from './sparse-attention.ts'

interface Case {
  batch: number
  nHeads: number
  nKvHeads: number
  rows: number
  keys: number
  dHead: number
  dValue: number
  tileRows: number
  causalOffset: number
}

/** Random ascending disjoint spans per tile (some tiles empty, some spans empty). */
function randomIndex(rng: Rng, c: Case): SparseAttentionIndex {
  const tiles = Math.ceil(c.rows / c.tileRows)
  const starts = [0]
  const spans: number[] = []
  for (let u = 0; u < c.batch * c.nHeads * tiles; u++) {
    let at = 0
    while (at < c.keys) {
      const start = at + Math.floor(rng.float() * 5)
      const stop = Math.min(c.keys, start + Math.floor(rng.float() * 70))
      if (start > c.keys) break
      if (rng.float() < 0.8) spans.push(start, stop)
      at = stop
    }
    starts.push(spans.length / 2)
  }
  return { tileRows: c.tileRows, tileStarts: Int32Array.from(starts), spans: Int32Array.from(spans) }
}

/** Two-pass softmax over the index's pairs, in doubles: independent of the kernels' online form. */
function reference(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  index: SparseAttentionIndex,
  c: Case,
  scale: number,
) {
  const heads = c.batch * c.nHeads
  const group = c.nHeads / c.nKvHeads
  const tiles = Math.ceil(c.rows / c.tileRows)
  const out = new Float64Array(heads * c.rows * c.dValue)
  for (let head = 0; head < heads; head++) {
    const kv = Math.floor(head / group)
    for (let i = 0; i < c.rows; i++) {
      const u = head * tiles + Math.floor(i / c.tileRows)
      const keys: number[] = []
      for (let s = index.tileStarts[u]!; s < index.tileStarts[u + 1]!; s++)
        for (let j = index.spans[2 * s]!; j < index.spans[2 * s + 1]!; j++) if (j <= i + c.causalOffset) keys.push(j)
      if (keys.length === 0) continue
      const scores = keys.map((j) => {
        let dot = 0
        for (let d = 0; d < c.dHead; d++)
          dot += q[(head * c.rows + i) * c.dHead + d]! * k[(kv * c.keys + j) * c.dHead + d]!
        return dot * scale
      })
      const max = Math.max(...scores)
      const e = scores.map((x) => Math.exp(x - max))
      const sum = e.reduce((a, b) => a + b, 0)
      keys.forEach((j, n) => {
        for (let d = 0; d < c.dValue; d++)
          out[(head * c.rows + i) * c.dValue + d]! += (e[n]! / sum) * v[(kv * c.keys + j) * c.dValue + d]!
      })
    }
  }
  return out
}

describeWithBackends('sparseAttention', (_backend, mode) => {
  const cases: Case[] = [
    // prefill: causal, GQA, dHead not a multiple of 4 or 16, rows not a multiple of tileRows
    { batch: 2, nHeads: 4, nKvHeads: 2, rows: 150, keys: 150, dHead: 5, dValue: 7, tileRows: 64, causalOffset: 0 },
    { batch: 1, nHeads: 2, nKvHeads: 2, rows: 200, keys: 200, dHead: 64, dValue: 64, tileRows: 16, causalOffset: 0 },
    // decode-like: one row over cache slots, no mask; and short tiles (the direct-dot path)
    { batch: 2, nHeads: 4, nKvHeads: 1, rows: 1, keys: 300, dHead: 32, dValue: 16, tileRows: 1, causalOffset: 300 },
    { batch: 1, nHeads: 3, nKvHeads: 3, rows: 9, keys: 40, dHead: 17, dValue: 3, tileRows: 3, causalOffset: 31 },
  ]
  for (const c of cases) {
    it(`matches a two-pass masked reference, leaking nothing (${JSON.stringify(c)})`, async () => {
      const rng = Rng.fromSeed(7)
      const q = randomArray(rng, c.batch * c.nHeads * c.rows * c.dHead, 2)
      const k = randomArray(rng, c.batch * c.nKvHeads * c.keys * c.dHead, 2)
      const v = randomArray(rng, c.batch * c.nKvHeads * c.keys * c.dValue)
      const index = randomIndex(rng, c)
      const scale = 1 / Math.sqrt(c.dHead)
      const qt = tf.tensor4d(q, [c.batch, c.nHeads, c.rows, c.dHead])
      const kt = tf.tensor4d(k, [c.batch, c.nKvHeads, c.keys, c.dHead])
      const vt = tf.tensor4d(v, [c.batch, c.nKvHeads, c.keys, c.dValue])
      const before = tf.memory().numTensors
      const z = sparseAttention(qt, kt, vt, index, { scale, causalOffset: c.causalOffset })
      expect(tf.memory().numTensors - before, 'only the output is new').toBe(1)
      await expectNoLeaks(() => sparseAttention(qt, kt, vt, index, { scale }), { disposeResult: true })
      expect(z.shape).toEqual([c.batch, c.nHeads, c.rows, c.dValue])
      expectArraysClose(z.dataSync(), reference(q, k, v, index, c, scale), 2e-5)
      tf.dispose([qt, kt, vt, z])
    })
  }

  it(`runs on the expected engine (${mode})`, () => {
    const expected = { cpu: 'js', wasm: 'readback', 'wasm+wasm-kernels': 'wasm', 'wasm+native': 'native' }
    expect(sparseAttentionKernelMode()).toBe(expected[mode as keyof typeof expected])
  })

  it('is dense causal attention for one span [0, T) per tile, and gives zeros to a row without keys', () => {
    const T = 70
    const rng = Rng.fromSeed(3)
    const q = tf.tensor4d(randomArray(rng, T * 8), [1, 1, T, 8])
    const k = tf.tensor4d(randomArray(rng, T * 8), [1, 1, T, 8])
    const v = tf.tensor4d(randomArray(rng, T * 8), [1, 1, T, 8])
    const tiles = Math.ceil(T / 32)
    const dense: SparseAttentionIndex = {
      tileRows: 32,
      tileStarts: Int32Array.from({ length: tiles + 1 }, (_, i) => i),
      spans: Int32Array.from({ length: 2 * tiles }, (_, i) => (i % 2 === 0 ? 0 : T)),
    }
    const z = sparseAttention(q, k, v, dense, { scale: 0.3 })
    const expected = tf.tidy(() => {
      const mask = tf.linalg.bandPart(tf.ones([T, T]), -1, 0)
      const scores = tf.add(tf.mul(tf.matMul(q, k, false, true), 0.3), tf.mul(tf.sub(mask, 1), 1e9))
      return tf.matMul(tf.softmax(scores), v)
    })
    expectArraysClose(z, expected, 2e-5)
    // the second tile reads only keys >= 40: rows 32..39 read nothing
    const late: SparseAttentionIndex = {
      tileRows: 32,
      tileStarts: Int32Array.of(0, 0, 1, 1),
      spans: Int32Array.of(40, T),
    }
    const zLate = sparseAttention(q, k, v, late, { scale: 0.3 })
    const values = zLate.dataSync()
    expect(Array.from(values.subarray(0, 40 * 8)).every((x) => x === 0)).toBe(true)
    expect(values[40 * 8]).not.toBe(0)
    tf.dispose([q, k, v, z, expected, zLate])
  })

  it('rejects bad shapes and indexes with typed errors naming the problem', () => {
    const q = tf.zeros([1, 2, 4, 8]) as tf.Tensor4D
    const k = tf.zeros([1, 1, 4, 8]) as tf.Tensor4D
    const v = tf.zeros([1, 1, 4, 8]) as tf.Tensor4D
    const good = { tileRows: 4, tileStarts: Int32Array.of(0, 1, 2), spans: Int32Array.of(0, 4, 0, 4) }
    const run =
      (index: SparseAttentionIndex, options = { scale: 1 }, kk = k) =>
      () =>
        sparseAttention(q, kk, v, index, options)
    expect(run({ ...good, tileStarts: Int32Array.of(0, 1) })).toThrow(ShapeError)
    expect(run({ ...good, tileStarts: Int32Array.of(0, 1, 2), spans: Int32Array.of(0, 4) })).toThrow(/names 2 spans/)
    expect(run({ ...good, spans: Int32Array.of(0, 5, 0, 4) })).toThrow(InvalidArgumentError)
    expect(run({ ...good, tileStarts: Int32Array.of(0, 2, 2), spans: Int32Array.of(2, 4, 0, 1) })).toThrow(
      /not ascending/,
    )
    expect(run({ ...good, tileStarts: Int32Array.of(1, 1, 2) })).toThrow(/tileStarts\[0\] must be 0/)
    expect(run({ ...good, tileRows: 0 })).toThrow(ConfigError)
    expect(run(good, { scale: Number.NaN })).toThrow(ConfigError)
    expect(run(good, { scale: 1, causalOffset: -1 } as { scale: number })).toThrow(/causalOffset/)
    const k3 = tf.zeros([1, 3, 4, 8]) as tf.Tensor4D
    expect(run(good, { scale: 1 }, k3)).toThrow(ShapeError)
    const k5 = tf.zeros([1, 1, 5, 8]) as tf.Tensor4D
    expect(run(good, { scale: 1 }, k5)).toThrow(/must be/)
    tf.dispose([q, k, v, k3, k5])
  })
})

import { Rng } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import {
  headsToLinear,
  headsToOutLinear,
  interleavedToRotateHalf,
  linearToHeads,
  outLinearToHeads,
  rotateHalfToInterleaved,
  transpose2d,
} from './layout.ts'

const random = (n: number, seed: number): Float32Array => Rng.fromSeed(seed).fillNormal(new Float32Array(n))

/** q . k after rotating both with llama2.c's interleaved RoPE at positions pq, pk. */
function interleavedScore(q: Float32Array, k: Float32Array, pq: number, pk: number, theta: number): number {
  const d = q.length
  let s = 0
  for (let i = 0; i < d / 2; i++) {
    const f = theta ** ((-2 * i) / d)
    const [a, b] = [q[2 * i] as number, q[2 * i + 1] as number]
    const [c, e] = [k[2 * i] as number, k[2 * i + 1] as number]
    const qa = a * Math.cos(pq * f) - b * Math.sin(pq * f)
    const qb = a * Math.sin(pq * f) + b * Math.cos(pq * f)
    const ka = c * Math.cos(pk * f) - e * Math.sin(pk * f)
    const kb = c * Math.sin(pk * f) + e * Math.cos(pk * f)
    s += qa * ka + qb * kb
  }
  return s
}

/** q . k after rotating both with Hugging Face's rotate-half RoPE. */
function rotateHalfScore(q: Float32Array, k: Float32Array, pq: number, pk: number, theta: number): number {
  const d = q.length
  const h = d / 2
  const rotate = (x: Float32Array, p: number): number[] =>
    Array.from({ length: d }, (_, j) => {
      const i = j % h
      const f = theta ** ((-2 * i) / d)
      const rotated = j < h ? -(x[j + h] as number) : (x[j - h] as number)
      return (x[j] as number) * Math.cos(p * f) + rotated * Math.sin(p * f)
    })
  const a = rotate(q, pq)
  const b = rotate(k, pk)
  return a.reduce((sum, v, j) => sum + v * (b[j] as number), 0)
}

function matVec(
  w: Float32Array,
  rows: number,
  cols: number,
  x: Float32Array,
  rowStart: number,
  count: number,
): Float32Array {
  const out = new Float32Array(count)
  for (let r = 0; r < count; r++) {
    let s = 0
    for (let c = 0; c < cols; c++) s += (w[(rowStart + r) * cols + c] as number) * (x[c] as number)
    out[r] = s
  }
  void rows
  return out
}

describe('weight layouts', () => {
  it('transpose2d, linearToHeads and outLinearToHeads invert their inverses and index as documented', () => {
    const [heads, dModel, dHead] = [3, 5, 4]
    const w = random(heads * dHead * dModel, 1)
    const perHead = linearToHeads(w, heads, dModel, dHead)
    // out[h, i, d] = w[h * dHead + d, i]
    expect(perHead[2 * dModel * dHead + 3 * dHead + 1]).toBe(w[(2 * dHead + 1) * dModel + 3])
    expect(headsToLinear(perHead, heads, dModel, dHead)).toEqual(w)
    const o = random(dModel * heads * dHead, 2)
    const wO = outLinearToHeads(o, heads, dHead, dModel)
    // W_O[h, d, m] = o[m, h * dHead + d]
    expect(wO[(1 * dHead + 2) * dModel + 4]).toBe(o[4 * heads * dHead + 1 * dHead + 2])
    expect(headsToOutLinear(wO, heads, dHead, dModel)).toEqual(o)
    expect(transpose2d(transpose2d(w, 12, 5), 5, 12)).toEqual(w)
  })

  it('interleavedToRotateHalf is the documented row permutation and rotateHalfToInterleaved undoes it', () => {
    const [heads, dHead, dModel] = [2, 6, 3]
    const w = Float32Array.from({ length: heads * dHead * dModel }, (_, i) => Math.floor(i / dModel))
    const permuted = interleavedToRotateHalf(w, heads, dHead, dModel)
    const rowOrder = Array.from({ length: heads * dHead }, (_, r) => permuted[r * dModel])
    expect(rowOrder).toEqual([0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11])
    expect(rotateHalfToInterleaved(permuted, heads, dHead, dModel)).toEqual(w)
    expect(() => interleavedToRotateHalf(new Float32Array(10), 1, 5, 2)).toThrow(/even dHead/)
    expect(() => interleavedToRotateHalf(new Float32Array(10), 1, 4, 2)).toThrow(/10 values, expected 8/)
  })

  it('gives the same attention scores under rotate-half RoPE as the original rows under interleaved RoPE', () => {
    const [dHead, dModel, theta] = [8, 5, 10000]
    const wq = random(dHead * dModel, 3)
    const wk = random(dHead * dModel, 4)
    const x = random(dModel, 5)
    const y = random(dModel, 6)
    const wqHalf = interleavedToRotateHalf(wq, 1, dHead, dModel)
    const wkHalf = interleavedToRotateHalf(wk, 1, dHead, dModel)
    for (const [pq, pk] of [
      [0, 0],
      [3, 1],
      [17, 9],
      [100, 2],
    ] as const) {
      const a = interleavedScore(
        matVec(wq, dHead, dModel, x, 0, dHead),
        matVec(wk, dHead, dModel, y, 0, dHead),
        pq,
        pk,
        theta,
      )
      const b = rotateHalfScore(
        matVec(wqHalf, dHead, dModel, x, 0, dHead),
        matVec(wkHalf, dHead, dModel, y, 0, dHead),
        pq,
        pk,
        theta,
      )
      expect(Math.abs(a - b)).toBeLessThan(1e-4)
      // Without the permutation the scores differ (the test can fail).
      const wrong = rotateHalfScore(
        matVec(wq, dHead, dModel, x, 0, dHead),
        matVec(wk, dHead, dModel, y, 0, dHead),
        pq,
        pk,
        theta,
      )
      if (pq !== pk) expect(Math.abs(a - wrong)).toBeGreaterThan(1e-3)
    }
  })
})

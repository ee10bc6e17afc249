import { InvalidArgumentError, ShapeError } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { interpolateLinear } from './interpolate.ts'

describe('interpolateLinear', () => {
  const xs = [0, 10, 20, 40]
  const ys = [3, 2, 0, 1]

  it('interpolates linearly between the samples around x and hits them exactly', () => {
    expect(interpolateLinear(xs, ys, 15)).toBeCloseTo(1, 12)
    expect(interpolateLinear(xs, ys, 30)).toBeCloseTo(0.5, 12)
    for (const [i, x] of xs.entries()) expect(interpolateLinear(xs, ys, x)).toBe(ys[i])
    expect(interpolateLinear(Float64Array.from(xs), Float64Array.from(ys), 5)).toBeCloseTo(2.5, 12)
  })

  it('clamps outside the range by default and returns null with outside: null', () => {
    expect(interpolateLinear(xs, ys, -5)).toBe(3)
    expect(interpolateLinear(xs, ys, 50)).toBe(1)
    expect(interpolateLinear(xs, ys, -5, { outside: 'clamp' })).toBe(3)
    expect(interpolateLinear(xs, ys, -1e-9, { outside: 'null' })).toBeNull()
    expect(interpolateLinear(xs, ys, 40.5, { outside: 'null' })).toBeNull()
    expect(interpolateLinear(xs, ys, 40, { outside: 'null' })).toBe(1)
    expect(interpolateLinear([7], [2], 7, { outside: 'null' })).toBe(2)
  })

  it('names bad input', () => {
    expect(() => interpolateLinear([0, 1], [1], 0.5)).toThrow(ShapeError)
    expect(() => interpolateLinear([0, 1], [1], 0.5)).toThrow(/2 positions but 1 values/)
    expect(() => interpolateLinear([], [], 0)).toThrow(InvalidArgumentError)
    expect(() => interpolateLinear(xs, ys, Number.NaN)).toThrow(/x is NaN/)
  })
})

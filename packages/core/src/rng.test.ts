import { describe, expect, it } from 'vitest'
import { ConfigError } from './errors.ts'
import { Rng } from './rng.ts'

const draw = (rng: Rng, n: number): number[] => Array.from({ length: n }, () => rng.float())

describe('Rng', () => {
  it('is deterministic per seed and differs across seeds', () => {
    expect(draw(Rng.fromSeed(7), 20)).toEqual(draw(Rng.fromSeed(7), 20))
    expect(draw(Rng.fromSeed(7), 20)).not.toEqual(draw(Rng.fromSeed(8), 20))
    // Large and negative seeds are accepted and distinct.
    expect(draw(Rng.fromSeed(2 ** 40 + 3), 5)).not.toEqual(draw(Rng.fromSeed(3), 5))
    expect(draw(Rng.fromSeed(-1), 5)).not.toEqual(draw(Rng.fromSeed(1), 5))
  })

  it('gives pinned values (the stream must not change between versions)', () => {
    const rng = Rng.fromSeed(0)
    const values = [rng.uint32(), rng.uint32(), rng.int(10), rng.float()]
    expect(values).toMatchInlineSnapshot(`
      [
        1438753950,
        668266283,
        7,
        0.4716398144349705,
      ]
    `)
  })

  it('splits by purpose independently of consumption', () => {
    const a = Rng.fromSeed(1)
    a.float()
    a.float()
    const b = Rng.fromSeed(1)
    expect(draw(a.split('data'), 10)).toEqual(draw(b.split('data'), 10))
    expect(draw(b.split('data'), 10)).not.toEqual(draw(b.split('init'), 10))
    expect(draw(b.split('data').split('x'), 5)).not.toEqual(draw(b.split('data'), 5))
  })

  it('resumes exactly from a saved state, including the cached normal', () => {
    const rng = Rng.fromSeed(3)
    rng.normal() // leaves a spare normal cached
    const state = JSON.parse(JSON.stringify(rng.getState()))
    const expected = [rng.normal(), rng.normal(), rng.float(), rng.int(1000)]
    const resumed = Rng.fromState(state)
    expect([resumed.normal(), resumed.normal(), resumed.float(), resumed.int(1000)]).toEqual(expected)
  })

  it('rejects bad seeds, states and arguments', () => {
    expect(() => Rng.fromSeed(1.5)).toThrow(ConfigError)
    expect(() => Rng.fromSeed(Number.NaN)).toThrow(/seed/)
    expect(() => Rng.fromState({ key: 1, state: [1, 2], spareNormal: null })).toThrow(ConfigError)
    expect(() => Rng.fromState(null as never)).toThrow(ConfigError)
    const rng = Rng.fromSeed(0)
    expect(() => rng.int(0)).toThrow(/positive integer/)
    expect(() => rng.int(2.5)).toThrow(ConfigError)
    expect(() => rng.gamma(0)).toThrow(ConfigError)
  })

  it('has the right moments', () => {
    const rng = Rng.fromSeed(11)
    const n = 200_000
    let sum = 0
    let sumSq = 0
    for (let i = 0; i < n; i++) {
      const x = rng.normal()
      sum += x
      sumSq += x * x
    }
    expect(Math.abs(sum / n)).toBeLessThan(0.01)
    expect(Math.abs(sumSq / n - 1)).toBeLessThan(0.02)
    let uniformSum = 0
    for (let i = 0; i < n; i++) uniformSum += rng.float()
    expect(Math.abs(uniformSum / n - 0.5)).toBeLessThan(0.005)
    // Gamma(k) has mean k; shape < 1 takes the boosting path.
    for (const shape of [0.3, 1, 4.5]) {
      let g = 0
      for (let i = 0; i < 50_000; i++) g += rng.gamma(shape)
      expect(Math.abs(g / 50_000 - shape) / shape).toBeLessThan(0.03)
    }
  })

  it('draws integers without bias and categorical by weight', () => {
    const rng = Rng.fromSeed(5)
    const counts = new Array(3).fill(0)
    for (let i = 0; i < 30_000; i++) counts[rng.int(3)]++
    for (const c of counts) expect(Math.abs(c - 10_000)).toBeLessThan(500)
    const weights = [0, 1, 3, 0]
    const cat = new Array(4).fill(0)
    for (let i = 0; i < 40_000; i++) cat[rng.categorical(weights)]++
    expect(cat[0]).toBe(0)
    expect(cat[3]).toBe(0)
    expect(Math.abs(cat[2] / 40_000 - 0.75)).toBeLessThan(0.01)
    // Offset/length select a window of a larger array.
    const window = [9, 9, 0, 1, 9]
    for (let i = 0; i < 100; i++) expect(rng.categorical(window, 2, 2)).toBe(1)
  })

  it('samples Dirichlet vectors on the simplex, also for tiny alpha', () => {
    const rng = Rng.fromSeed(2)
    for (const alpha of [0.01, 1, 10]) {
      const p = rng.dirichlet(5, alpha)
      expect(p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12)
      expect(Math.min(...p)).toBeGreaterThanOrEqual(0)
    }
  })

  it('shuffles into a permutation and fills arrays', () => {
    const rng = Rng.fromSeed(9)
    const a = rng.shuffle(Array.from({ length: 50 }, (_, i) => i))
    expect([...a].sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, i) => i))
    expect(a).not.toEqual(Array.from({ length: 50 }, (_, i) => i))
    const u = rng.fillUniform(new Float32Array(1000), -2, -1)
    expect(Math.min(...u)).toBeGreaterThanOrEqual(-2)
    expect(Math.max(...u)).toBeLessThan(-1)
    const g = rng.fillNormal(new Float64Array(1000), 5, 0.001)
    expect(Math.abs(g.reduce((s, x) => s + x, 0) / 1000 - 5)).toBeLessThan(0.001)
  })
})

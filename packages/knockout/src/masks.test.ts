import { AttnlabError, ConfigError } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { checkHead, formatHead, headAt, headCount, headIndex, parseHeads } from './heads.ts'
import {
  checkMasks,
  defaultHeadsPerMask,
  headsPerMask,
  knockoutCounts,
  masksFromHeadSets,
  measurementPlan,
  randomMasks,
  singleHeadMasks,
} from './masks.ts'

const layout = { nLayers: 4, nHeads: 8 }

describe('heads', () => {
  it('indexes layer-major and back', () => {
    expect(headCount(layout)).toBe(32)
    expect(headIndex({ layer: 2, head: 3 }, layout)).toBe(19)
    expect(headAt(19, layout)).toEqual({ layer: 2, head: 3 })
    for (let i = 0; i < 32; i++) expect(headIndex(headAt(i, layout), layout)).toBe(i)
    expect(formatHead({ layer: 1, head: 7 })).toBe('L1H7')
  })
  it('parses 0.1,2.3 and L1H2 lists', () => {
    expect(parseHeads('0.1, 2.3', layout)).toEqual([
      { layer: 0, head: 1 },
      { layer: 2, head: 3 },
    ])
    expect(parseHeads('L1H2,l3h0', layout)).toEqual([
      { layer: 1, head: 2 },
      { layer: 3, head: 0 },
    ])
  })
  it('rejects malformed, out-of-range and repeated heads with a clear message', () => {
    expect(() => parseHeads('', layout)).toThrow(/names no heads/)
    expect(() => parseHeads('1-2', layout)).toThrow(/'1-2' is not a head; expected layer.head/)
    expect(() => parseHeads('4.0', layout)).toThrow(/layer 4 is outside \[0, 4\)/)
    expect(() => parseHeads('0.8', layout)).toThrow(/head 8 is outside \[0, 8\)/)
    expect(() => parseHeads('0.1,0.1', layout)).toThrow(/listed twice/)
    expect(() => headAt(32, layout)).toThrow(AttnlabError)
    expect(() => headAt(-1, layout)).toThrow(/outside \[0, 32\)/)
    expect(() => checkHead({ layer: 0.5, head: 0 }, layout)).toThrow(AttnlabError)
  })
})

describe('masks', () => {
  it('balanced design: exactly k heads per mask, every head used floor or ceil of Mk/N times', () => {
    const masks = randomMasks(layout, { count: 100, fraction: 0.1, seed: 3 })
    const k = headsPerMask(0.1, 32)
    expect(k).toBe(3)
    for (let j = 0; j < 100; j++) {
      let on = 0
      for (let i = 0; i < 32; i++) on += masks.data[j * 32 + i] as number
      expect(on).toBe(k)
    }
    const counts = [...knockoutCounts(masks)]
    expect(counts.reduce((a, b) => a + b, 0)).toBe(300)
    expect(Math.min(...counts)).toBe(Math.floor(300 / 32))
    expect(Math.max(...counts)).toBe(Math.ceil(300 / 32))
  })
  it('the paper setting: 2% of 1024 heads is 20 per mask; 2% of 32 is still one head', () => {
    expect(headsPerMask(0.02, 1024)).toBe(20)
    expect(headsPerMask(0.02, 32)).toBe(1)
    expect(headsPerMask(1, 7)).toBe(7)
    const masks = randomMasks({ nLayers: 32, nHeads: 32 }, { count: 100, fraction: 0.02 })
    const counts = [...knockoutCounts(masks)]
    expect(counts.filter((c) => c === 2).length).toBe(976)
    expect(counts.filter((c) => c === 1).length).toBe(48)
  })
  it('iid design: Bernoulli(fraction) entries, never an empty mask', () => {
    const masks = randomMasks(layout, { count: 2000, fraction: 0.02, design: 'iid', seed: 1 })
    let total = 0
    for (let j = 0; j < 2000; j++) {
      let on = 0
      for (let i = 0; i < 32; i++) on += masks.data[j * 32 + i] as number
      expect(on).toBeGreaterThanOrEqual(1)
      total += on
    }
    // E[on | on >= 1] = 32 * 0.02 / (1 - 0.98^32) = 1.344
    expect(total / 2000).toBeGreaterThan(1.25)
    expect(total / 2000).toBeLessThan(1.45)
  })
  it('is seeded: the same seed gives the same masks, another seed others', () => {
    const a = randomMasks(layout, { count: 20, fraction: 0.1, seed: 5 })
    const b = randomMasks(layout, { count: 20, fraction: 0.1, seed: 5 })
    const c = randomMasks(layout, { count: 20, fraction: 0.1, seed: 6 })
    expect([...a.data]).toEqual([...b.data])
    expect([...a.data]).not.toEqual([...c.data])
    const i1 = randomMasks(layout, { count: 20, fraction: 0.1, seed: 5, design: 'iid' })
    expect([...i1.data]).toEqual([...randomMasks(layout, { count: 20, fraction: 0.1, seed: 5, design: 'iid' }).data])
  })
  it('single-head and explicit masks', () => {
    const singles = singleHeadMasks({ nLayers: 2, nHeads: 2 })
    expect(singles.count).toBe(4)
    expect([...singles.data]).toEqual([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1])
    const onTop = singleHeadMasks({ nLayers: 2, nHeads: 2 }, { base: [{ layer: 1, head: 0 }] })
    expect(onTop.count).toBe(3)
    expect([...onTop.data]).toEqual([1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 1])
    const sets = masksFromHeadSets({ nLayers: 2, nHeads: 2 }, [[], [{ layer: 0, head: 1 }]])
    expect([...sets.data]).toEqual([0, 0, 0, 0, 0, 1, 0, 0])
  })
  it('rejects bad options and malformed mask sets', () => {
    expect(() => randomMasks(layout, { count: 0 })).toThrow(ConfigError)
    expect(() => randomMasks(layout, { fraction: 0 })).toThrow(/fraction/)
    expect(() => randomMasks(layout, { fraction: 1.5 })).toThrow('Invalid fraction: must be in (0, 1], got 1.5')
    expect(() => randomMasks(layout, { count: 2.5 })).toThrow('Invalid masks: must be an integer >= 1, got 2.5')
    expect(() => randomMasks(layout, { design: 'random' as never })).toThrow(
      /^Invalid design: got 'random'; expected one of balanced, iid$/,
    )
    expect(() => singleHeadMasks(layout, { candidates: [40] })).toThrow(/outside \[0, 32\)/)
    expect(() => checkMasks({ count: 1, heads: 31, data: new Uint8Array(31) }, layout)).toThrow(
      /masks cover 31 heads; the model has 32/,
    )
    expect(() => checkMasks({ count: 2, heads: 32, data: new Uint8Array(32) }, layout)).toThrow(
      /expected count \* heads = 64/,
    )
    expect(() => checkMasks({ count: 1, heads: 32, data: new Uint8Array(32).fill(2) }, layout)).toThrow(
      /expected 0 \(kept\) or 1/,
    )
  })
})

describe('measurementPlan (default compressed-sensing budget)', () => {
  it('grows as k log N, not a fixed 100; the real models (16 and 40 heads) are swept, 64 heads and more sensed', () => {
    const aidreams = measurementPlan({ nLayers: 4, nHeads: 4 })
    expect(aidreams).toMatchObject({ heads: 16, sparsity: 5, masks: 15, headsPerMask: 4, exhaustiveEvaluations: 17 })
    expect(aidreams.useExhaustive).toBe(true)
    const stories = measurementPlan({ nLayers: 5, nHeads: 8 })
    expect(stories).toMatchObject({
      heads: 40,
      masks: 22,
      headsPerMask: 6,
      exhaustiveEvaluations: 41,
      useExhaustive: true,
    })
    expect(measurementPlan({ nLayers: 8, nHeads: 8 })).toMatchObject({
      masks: 27,
      exhaustiveEvaluations: 65,
      useExhaustive: false,
    })
    const large = measurementPlan({ nLayers: 32, nHeads: 32 })
    expect(large.masks).toBe(54)
    expect(large.masks).toBeLessThan(100)
    expect(large.headsPerMask).toBeGreaterThanOrEqual(Math.floor(0.02 * 1024)) // the paper's 2% at least
  })

  it('says to sweep unless compressed sensing saves at least half the sweep (2 M > N + 1)', () => {
    expect(measurementPlan({ nLayers: 1, nHeads: 3 })).toMatchObject({ masks: 5, useExhaustive: true })
    for (let n = 1; n <= 64; n++) {
      for (const top of [1, 3, 5, 10]) {
        const plan = measurementPlan({ nLayers: 1, nHeads: n }, top)
        expect(plan.useExhaustive, `N ${n} top ${top}`).toBe(2 * plan.masks > n + 1)
        if (!plan.useExhaustive) expect(plan.masks).toBeLessThan(plan.exhaustiveEvaluations)
        expect(plan.sparsity).toBe(Math.min(top, n))
        // every head is knocked out in about 3 of the M masks (balanced design; fewer when half the heads per mask is
        // the cap)
        if (!plan.useExhaustive)
          expect(Math.floor((plan.masks * plan.headsPerMask) / n)).toBeGreaterThanOrEqual(
            Math.min(3, Math.floor(plan.masks / 2)),
          )
        expect(headsPerMask(plan.fraction, n)).toBe(plan.headsPerMask)
      }
    }
  })

  it('heads per mask: ~3 knockouts per head, the paper 2% for large N, at most half the heads', () => {
    expect(defaultHeadsPerMask(16, 15)).toBe(4)
    expect(defaultHeadsPerMask(16, 100)).toBe(1)
    expect(defaultHeadsPerMask(2048, 1000)).toBe(40)
    expect(defaultHeadsPerMask(4, 1)).toBe(2)
  })

  it('rejects a top that is not a positive integer', () => {
    for (const top of [0, -1, 1.5, Number.NaN])
      expect(() => measurementPlan(layout, top)).toThrow(/Invalid top: must be an integer >= 1/)
  })
})

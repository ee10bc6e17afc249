import { describe, expect, it } from 'vitest'
import {
  curveDrop,
  EMERGENCE_DEFINITIONS,
  headEntropyDrops,
  largestFall,
  MIN_EMERGENCE_DROP,
} from './emergence-steps.ts'

const steps = Array.from({ length: 21 }, (_, i) => i * 10) // 0, 10, ..., 200

/** ln 2 plateau (after an untrained step 0 at ln 3), an abrupt drop to `final` between `from` and `from + 10`. */
function dropCurve(from: number, final = 0.02, noise = 0): number[] {
  return steps.map((step, i) => {
    if (step === 0) return Math.log(3)
    const wobble = noise * Math.sin(1.7 * i)
    return (step <= from ? Math.LN2 : final) + wobble
  })
}

describe('curveDrop (the positionEmergence definition)', () => {
  it('gives the known step of an abrupt drop: the midpoint crossing interpolated inside its interval', () => {
    const drop = curveDrop(steps, dropCurve(120))
    expect(drop).not.toBeNull()
    expect(drop!.plateau).toBeCloseTo(Math.LN2, 12)
    expect(drop!.final).toBeCloseTo(0.02, 12)
    expect(drop!.threshold).toBeCloseTo(0.02 + (Math.LN2 - 0.02) / 2, 12)
    // Linear between (120, ln 2) and (130, 0.02): the midpoint is crossed halfway, at 125.
    expect(drop!.step).toBeCloseTo(125, 9)
  })

  it('is the last crossing from above: a drop that comes back up does not count, the later one does', () => {
    const values = dropCurve(150)
    values[5] = 0.02 // a transient dip at step 50
    expect(curveDrop(steps, values)!.step).toBeCloseTo(155, 9)
  })

  it('ignores noise below the threshold and the untrained step 0', () => {
    const drop = curveDrop(steps, dropCurve(60, 0.05, 0.01))
    expect(drop!.step).toBeGreaterThan(60)
    expect(drop!.step).toBeLessThan(70)
  })

  it('is null for a curve that stays on its plateau, or falls by less than the minimum drop', () => {
    expect(curveDrop(steps, dropCurve(1000))).toBeNull()
    expect(curveDrop(steps, dropCurve(100, Math.LN2 - 0.5 * MIN_EMERGENCE_DROP))).toBeNull()
    expect(curveDrop([0], [1])).toBeNull()
  })

  it('skips unscored evaluations (null)', () => {
    const values: (number | null)[] = dropCurve(80)
    values[9] = null
    values[8] = null // steps 80, 90 unmeasured: the crossing is interpolated between 70 and 100
    const drop = curveDrop(steps, values)!
    expect(drop.step).toBeGreaterThan(70)
    expect(drop.step).toBeLessThan(100)
    expect(
      curveDrop(
        steps,
        steps.map(() => null),
      ),
    ).toBeNull()
  })
})

describe('largestFall and headEntropyDrops', () => {
  it('finds the interval of the largest fall and its size', () => {
    const entropy = steps.map((step) => (step < 90 ? 2 : step < 100 ? 1.6 : 0.3))
    expect(largestFall(steps, entropy)).toEqual({ step: 100, fall: expect.closeTo(1.3, 12) })
    expect(
      largestFall(
        steps,
        steps.map((s) => s),
      ),
    ).toBeNull()
  })

  it('one drop per head; a model without attention has none', () => {
    const rows = steps.map((step) => [step <= 40 ? 2 : 0.5, 2])
    const drops = headEntropyDrops(steps, rows, ['L0H0', 'L0H1'])
    expect(drops.map((d) => d.head)).toEqual(['L0H0', 'L0H1'])
    expect(drops[0]!.step).toBeCloseTo(45, 9)
    expect(drops[0]!.largestFall).toEqual({ step: 50, fall: 1.5 })
    expect(drops[1]).toMatchObject({ step: null, largestFall: null })
    expect(
      headEntropyDrops(
        steps,
        steps.map(() => []),
        ['L0H0'],
      ),
    ).toEqual([])
  })

  it('states every definition it uses, with its numbers', () => {
    expect(EMERGENCE_DEFINITIONS.positionEmergence).toContain(`${MIN_EMERGENCE_DROP} nats`)
    expect(EMERGENCE_DEFINITIONS.positionEmergence).toContain('F + (P - F) / 2')
    expect(Object.keys(EMERGENCE_DEFINITIONS)).toEqual([
      'positionEmergence',
      'entropyDrop',
      'largestEntropyFall',
      'emergenceStep',
    ])
  })
})

describe('a small real run: the linear map', () => {
  const run = async (preset: 'gpt' | 'mixer') => {
    const { useBackend } = await import('@attnlab/core')
    await useBackend('wasm')
    const { defaultEmergenceConfig, runEmergence } = await import('../index.ts')
    const base = defaultEmergenceConfig('linear-map')
    return runEmergence({
      ...base,
      task: { kind: 'linear-map', stateSize: 4, onesPerRow: 1 },
      preset,
      model: { nLayers: 1, dModel: 16, nHeads: 2 },
      training: {
        ...base.training,
        steps: 40,
        batchSize: 32,
        lr: 0.03,
        evalEvery: 5,
        validationSize: 64,
        analysisSize: 64,
      },
    })
  }

  it('summary.json: definitions, each position emergence step, each head entropy drop', async () => {
    const { summary } = await run('gpt')
    expect(summary.definitions).toEqual(EMERGENCE_DEFINITIONS)
    const seed = summary.seeds[0]!
    // 2 states of 4 cells: 7 predictions; the 3 cells of the random initial state are never learned.
    expect(seed.positionEmergence).toHaveLength(7)
    expect(seed.positionEmergence.slice(0, 3)).toEqual([null, null, null])
    const learned = seed.positionEmergence.slice(3).filter((s): s is number => s !== null)
    expect(learned.length).toBeGreaterThan(0)
    for (const step of learned) expect(step).toBeGreaterThan(0)
    for (const step of learned) expect(step).toBeLessThanOrEqual(40)
    expect(seed.entropyDrops.map((d) => d.head)).toEqual(['L0H0', 'L0H1'])
  }, 60_000)

  it('the mixer: no heads, no entropy drops, and the report says why instead of attention plots', async () => {
    const result = await run('mixer')
    const seed = result.summary.seeds[0]!
    expect(result.heads).toEqual([])
    expect(seed.entropyDrops).toEqual([])
    expect(seed.positionEmergence).toHaveLength(7)
    const { buildEmergenceReport } = await import('../index.ts')
    const html = await buildEmergenceReport(result)
    expect(html).toContain('This model has no attention')
    expect(html).toContain('Emergence steps per position and per head')
  }, 60_000)
})

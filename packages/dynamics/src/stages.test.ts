import { describe, expect, it } from 'vitest'
import { AttnlabError, Rng, ShapeError } from '@attnlab/core'
import {
  analyzeStages,
  assignHeads,
  classifyPhases,
  detectCrossing,
  detectSpanStages,
  detectTransitions,
  headSimilarity,
  runningMedian,
} from './stages.ts'

const plateaus = [6, 2, 0.5, 0]

/** A noisy three-stage curve (CE-like): plateaus at 6, 2, 0.5, 0 with drops at 100, 300, 600. */
function noisyRun(seed: number, noise: number): { time: number[]; loss: number[] } {
  const rng = Rng.fromSeed(seed)
  const time: number[] = []
  const loss: number[] = []
  const sigmoid = (x: number) => 1 / (1 + Math.exp(-x))
  for (let step = 0; step <= 1000; step += 5) {
    const clean = 6 - 4 * sigmoid((step - 100) / 8) - 1.5 * sigmoid((step - 300) / 8) - 0.5 * sigmoid((step - 600) / 8)
    time.push(step)
    loss.push(clean + noise * rng.normal())
  }
  return { time, loss }
}

describe('detectTransitions', () => {
  it('finds midpoint crossings with linear interpolation', () => {
    const transitions = detectTransitions([0, 1, 2, 3], [6, 5, 1.5, 0.2], [6.12105, 1.945, 0.5, 0])
    expect(transitions.map((t) => t.stage)).toEqual([1, 2, 3])
    expect(transitions[0]?.level).toBeCloseTo(4.033025, 10)
    expect(transitions[0]?.time).toBeCloseTo(1 + (5 - 4.033025) / 3.5, 10)
    expect(transitions[0]?.sampleIndex).toBe(2)
    expect(transitions[2]?.time).toBeCloseTo(2 + (1.5 - 0.25) / 1.3, 10)
  })

  it('reports transitions that never happen as null', () => {
    const transitions = detectTransitions([0, 1, 2], [6, 2.1, 1.9], plateaus)
    expect(transitions.map((t) => t.time === null)).toEqual([false, true, true])
  })

  it('is robust to noise with smoothing and persistence, where the raw crossing is not', () => {
    const { time, loss } = noisyRun(3, 0.15)
    const robust = detectTransitions(time, loss, plateaus, { smoothing: 5, persistence: 3 })
    for (const [j, expected] of [100, 300, 600].entries()) {
      expect(Math.abs((robust[j]?.time as number) - expected)).toBeLessThan(20)
    }
    const naive = detectTransitions(time, loss, plateaus)
    // With noise of 0.15 the raw third crossing (level 0.25) fires early on a downward spike.
    expect(naive[2]?.time as number).toBeLessThan(580)
  })

  it('validates its input', () => {
    expect(() => detectTransitions([0, 1], [1], plateaus)).toThrow(ShapeError)
    expect(() => detectTransitions([], [], plateaus)).toThrow(AttnlabError)
    expect(() => detectTransitions([0, 1], [1, Number.NaN], plateaus)).toThrow(/loss sample 1/)
    expect(() => detectTransitions([1, 0], [1, 1], plateaus)).toThrow(/non-decreasing/)
    expect(() => detectTransitions([0, 1], [1, 1], [1, 2])).toThrow(/strictly decreasing/)
    expect(() => detectTransitions([0, 1], [1, 1], [1])).toThrow(/at least two/)
    expect(() => detectTransitions([0, 1], [1, 1], plateaus, { smoothing: 2 })).toThrow(/odd/)
    expect(() => detectTransitions([0, 1], [1, 1], plateaus, { persistence: 0 })).toThrow(/persistence/)
  })
})

describe('runningMedian', () => {
  it('removes isolated spikes and keeps edges', () => {
    expect(Array.from(runningMedian([1, 1, 9, 1, 1], 3))).toEqual([1, 1, 1, 1, 1])
    expect(Array.from(runningMedian([3, 1, 2], 1))).toEqual([3, 1, 2])
    expect(Array.from(runningMedian([4, 0, 2, 8], 3))).toEqual([2, 2, 2, 5])
  })
})

describe('heads and phases', () => {
  it('headSimilarity is the mean pairwise cosine', () => {
    expect(headSimilarity([[1, 0, 0]])).toBe(1)
    expect(
      headSimilarity([
        [1, 0],
        [2, 0],
      ]),
    ).toBeCloseTo(1, 12)
    expect(
      headSimilarity([
        [1, 0],
        [0, 1],
        [1, 0],
      ]),
    ).toBeCloseTo(1 / 3, 12)
    expect(
      headSimilarity([
        [0, 0],
        [0, 0],
      ]),
    ).toBe(1)
    expect(() => headSimilarity([[1, 0], [1]])).toThrow(ShapeError)
  })

  it('assignHeads gives argmax spans and one holder per span', () => {
    const { heads, holders } = assignHeads([
      [0.9, 0.1, 0],
      [0.6, 0.3, 0.1],
      [0.1, 0.2, 0.7],
    ])
    expect(heads.map((h) => h.span)).toEqual([0, 0, 2])
    expect(holders).toEqual([0, null, 2])
    expect(() => assignHeads([[1, 0], [1]])).toThrow(ShapeError)
  })

  const uniform = [
    [0.2, 0.2, 0.2],
    [0.2, 0.2, 0.2],
  ]
  const together = [
    [0.9, 0.05, 0.05],
    [0.9, 0.05, 0.05],
  ]
  const moving = [
    [0.9, 0.05, 0.05],
    [0.45, 0.45, 0.1],
  ]
  const apart = [
    [0.9, 0.05, 0.05],
    [0.05, 0.9, 0.05],
  ]

  it('labels initial -> competitive -> cooperative, holding the label while a head is in flight', () => {
    const segments = classifyPhases([0, 1, 2, 3, 4], [uniform, together, together, moving, apart])
    expect(segments.map((s) => [s.phase, s.start, s.end])).toEqual([
      ['initial', 0, 0],
      ['competitive', 1, 2],
      ['cooperative', 3, 4],
    ])
    expect(segments[1]?.span).toBe(0)
    expect(segments[1]?.meanSimilarity).toBeCloseTo(1, 12)
  })

  it('merges segments shorter than minSamples (noise)', () => {
    const series = [together, together, apart, together, together, apart, apart, apart]
    expect(
      classifyPhases(
        series.map((_, i) => i),
        series,
      ).map((s) => s.phase),
    ).toEqual(['competitive', 'cooperative', 'competitive', 'cooperative'])
    expect(
      classifyPhases(
        series.map((_, i) => i),
        series,
        { minSamples: 2 },
      ).map((s) => s.phase),
    ).toEqual(['competitive', 'cooperative'])
  })

  it('validates phase options and shapes', () => {
    expect(() => classifyPhases([0], [together], { similarityThreshold: 0 })).toThrow(/similarityThreshold/)
    expect(() => classifyPhases([0], [together], { focusThreshold: 2 })).toThrow(/focusThreshold/)
    expect(() => classifyPhases([0], [together], { minSamples: 0 })).toThrow(/minSamples/)
    expect(() => classifyPhases([0, 1], [together])).toThrow(ShapeError)
    expect(() => classifyPhases([], [])).toThrow(AttnlabError)
  })
})

describe('analyzeStages', () => {
  it('reports transitions, who took which span, and phases on a noisy run', () => {
    const { time, loss } = noisyRun(5, 0.1)
    // Span masses: all heads on span 0 after step 100, head 1 moves to span 1 at 300, head 2 to span 2 at 600.
    const spanMass = time.map((step) => {
      const head = (span: number) => [0, 1, 2].map((j) => (j === span ? 0.9 : 0.05))
      if (step < 100)
        return [
          [0.1, 0.1, 0.1],
          [0.1, 0.1, 0.1],
          [0.1, 0.1, 0.1],
        ]
      return [head(0), head(step < 300 ? 0 : 1), head(step < 600 ? 0 : 2)]
    })
    const analysis = analyzeStages({ time, loss, plateaus, spanMass }, { smoothing: 5, persistence: 3 })
    expect(analysis.stagesReached).toBe(3)
    expect(analysis.transitions.map((t) => t.takenSpans)).toEqual([
      [{ span: 0, head: 0 }],
      [{ span: 1, head: 1 }],
      [{ span: 2, head: 2 }],
    ])
    expect(analysis.phases.map((p) => p.phase)).toEqual(['initial', 'competitive', 'cooperative'])
    expect(Math.abs((analysis.phases[2]?.start as number) - 300)).toBeLessThanOrEqual(5)
    expect(analysis.finalLoss).toBe(loss[loss.length - 1])
  })

  it('works without span masses and checks ownership shapes', () => {
    const analysis = analyzeStages({ time: [0, 1, 2], loss: [6, 1, 0.1], plateaus })
    expect(analysis.phases).toEqual([])
    expect(analysis.transitions.every((t) => t.assignment === null)).toBe(true)
    expect(() => analyzeStages({ time: [0, 1], loss: [6, 1], plateaus, spanMass: [[[1]]] })).toThrow(ShapeError)
    expect(() => analyzeStages({ time: [0, 1], loss: [6, 1], plateaus, ownership: [[[1]]] })).toThrow(ShapeError)
  })
})

describe('detectCrossing', () => {
  it('interpolates the first persistent fall to a level and skips nulls', () => {
    expect(detectCrossing([0, 10, 20], [0.7, 0.6, 0.1], 0.35)).toEqual({ time: 15, sampleIndex: 2 })
    // A dip that does not persist is not a crossing; a null sample is never below.
    expect(detectCrossing([0, 1, 2, 3, 4], [1, 0.2, 1, 0.2, 0.1], 0.5, 2)?.sampleIndex).toBe(3)
    expect(detectCrossing([0, 1, 2], [1, null, 0.2], 0.5)).toEqual({ time: 2, sampleIndex: 2 })
    expect(detectCrossing([0, 1], [1, 0.9], 0.5)).toBeNull()
  })

  it('agrees with detectTransitions on one level', () => {
    const { time, loss } = noisyRun(3, 0.05)
    const [first] = detectTransitions(time, loss, [6, 2], { persistence: 3 })
    const crossing = detectCrossing(time, loss, 4, 3)
    expect(crossing?.time).toBe(first?.time)
    expect(crossing?.sampleIndex).toBe(first?.sampleIndex)
  })

  it('rejects mismatched lengths and a bad persistence', () => {
    expect(() => detectCrossing([0, 1], [1], 0.5)).toThrow(ShapeError)
    expect(() => detectCrossing([0], [1], 0.5, 0)).toThrow(/persistence must be an integer >= 1, got 0/)
  })
})

describe('detectSpanStages', () => {
  // Two heads, two spans: both heads on span 0 at step 10, head 1 takes span 1 at step 30.
  const time = [0, 10, 20, 30, 40]
  const mass = [
    [
      [0.3, 0.3],
      [0.3, 0.3],
    ],
    [
      [0.8, 0.1],
      [0.7, 0.2],
    ],
    [
      [0.9, 0.05],
      [0.6, 0.3],
    ],
    [
      [0.9, 0.05],
      [0.2, 0.7],
    ],
    [
      [0.9, 0.05],
      [0.1, 0.8],
    ],
  ]

  it('finds one stage per newly held span, interpolated at the threshold', () => {
    const stages = detectSpanStages(time, mass)
    expect(stages.map((s) => [s.stage, s.sampleIndex, s.spans, s.heads])).toEqual([
      [1, 1, [0], [0]],
      [2, 3, [1], [1]],
    ])
    expect(stages[0]?.time).toBeCloseTo((10 * (0.5 - 0.3)) / (0.8 - 0.3), 12)
    expect(stages[1]?.time).toBeCloseTo(20 + (10 * (0.5 - 0.3)) / (0.7 - 0.3), 12)
  })

  it('requires persistence (fewer samples at the end)', () => {
    const blip = [mass[0], mass[1], mass[0], mass[0]] as number[][][]
    expect(detectSpanStages([0, 1, 2, 3], blip)).toEqual([])
    expect(detectSpanStages([0, 1, 2, 3], blip, { persistence: 1 })).toHaveLength(1)
    expect(detectSpanStages([0, 1], [mass[0], mass[1]] as number[][][])).toHaveLength(1)
  })

  it('rejects bad options and shapes with typed errors', () => {
    expect(() => detectSpanStages(time, mass, { focusThresold: 0.5 } as never)).toThrow(/did you mean 'focusThreshold'/)
    expect(() => detectSpanStages(time, mass, { focusThreshold: 0 })).toThrow(AttnlabError)
    expect(() => detectSpanStages([0], mass)).toThrow(ShapeError)
  })
})

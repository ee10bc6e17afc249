import { describe, expect, it } from 'vitest'
import { AttnlabError, Rng, ShapeError } from '@attnlab/core'
import { fitTimeScale, mapLossBetweenPlateaus, scaleOdeCurve, stageProgress } from './fit.ts'
import { simulate } from './simulate.ts'

const odePlateaus = [6.12105, 1.945, 0.5, 0]
const cePlateaus = [3.694, 1.561, 0.98, 0.806] // H_n oracles, d=50 singletons

describe('stage progress', () => {
  it('maps plateaus to integers, piecewise linearly, and extrapolates', () => {
    expect(stageProgress(6.12105, odePlateaus)).toBe(0)
    expect(stageProgress(1.945, odePlateaus)).toBe(1)
    expect(stageProgress(1.2225, odePlateaus)).toBeCloseTo(1.5, 12)
    expect(stageProgress(0, odePlateaus)).toBe(3)
    expect(stageProgress(-0.25, odePlateaus)).toBeCloseTo(3.5, 12)
    expect(stageProgress(7, [6, 2, 0])).toBeCloseTo(-0.25, 12)
    expect(mapLossBetweenPlateaus(1.2225, odePlateaus, cePlateaus)).toBeCloseTo((1.561 + 0.98) / 2, 12)
    expect(() => stageProgress(1, [1, 1])).toThrow(AttnlabError)
    expect(() => mapLossBetweenPlateaus(1, odePlateaus, [2, 1])).toThrow(/same number/)
  })
})

describe('fitTimeScale', () => {
  const trajectory = simulate({}, { tMax: 600, points: 300 })
  const ode = { time: trajectory.times, loss: trajectory.loss, plateaus: trajectory.plateaus }
  /** A synthetic noisy run: the ODE at step = scale * t, in CE units, plus noise. */
  function syntheticRun(scale: number, noise: number) {
    const rng = Rng.fromSeed(11)
    const scaled = scaleOdeCurve(ode, { scale, offset: 0 }, cePlateaus)
    const time: number[] = []
    const loss: number[] = []
    for (let step = 0; step <= 600 * scale; step += scale) {
      // interpolate the scaled curve at this step
      let i = 0
      while (i < scaled.step.length - 1 && (scaled.step[i + 1] as number) < step) i++
      const s0 = scaled.step[i] as number
      const s1 = scaled.step[Math.min(i + 1, scaled.step.length - 1)] as number
      const w = s1 > s0 ? Math.min(1, Math.max(0, (step - s0) / (s1 - s0))) : 0
      time.push(step)
      loss.push(
        (scaled.loss[i] as number) * (1 - w) +
          (scaled.loss[Math.min(i + 1, scaled.loss.length - 1)] as number) * w +
          noise * rng.normal(),
      )
    }
    return { time, loss, plateaus: cePlateaus }
  }

  it('recovers a known scale from a noisy CE curve, by curve and by transitions', () => {
    const run = syntheticRun(7.3, 0.02)
    for (const method of ['curve', 'transitions'] as const) {
      const fit = fitTimeScale(ode, run, { method })
      expect(Math.abs(fit.scale / 7.3 - 1)).toBeLessThan(0.03)
      expect(fit.rmse).toBeLessThan(0.2) // the noise alone is ~0.11 progress units on the last stage
      expect(fit.transitions).toHaveLength(3)
      for (const t of fit.transitions) {
        expect(t.observedStep).not.toBeNull()
        expect(Math.abs(t.relativeError as number)).toBeLessThan(0.05)
      }
    }
  })

  it('uses a known offset', () => {
    const run = syntheticRun(4, 0)
    const shifted = { ...run, time: run.time.map((t) => t + 500) }
    const fit = fitTimeScale(ode, shifted, { offset: 500 })
    expect(Math.abs(fit.scale / 4 - 1)).toBeLessThan(0.02)
    expect(fit.transitions[0]?.predictedStep).toBeCloseTo(4 * (fit.transitions[0]?.odeTime as number) + 500, 6)
  })

  it('rejects mismatched or unusable curves', () => {
    const run = syntheticRun(5, 0)
    expect(() => fitTimeScale(ode, { ...run, plateaus: [3, 2, 1] })).toThrow(/same number of stages/)
    expect(() => fitTimeScale(ode, run, { methd: 'curve' } as never)).toThrow(
      new RegExp(
        /Invalid methd: is not a fitTimeScale parameter \(did you mean 'method'\?\); expected one of method, /.source +
          /offset, runDetection, odeDetection$/.source,
      ),
    )
    expect(() => fitTimeScale(ode, run, { runDetection: { smoothng: 5 } } as never)).toThrow(
      /^Invalid runDetection\.smoothng: is not a fitTimeScale runDetection parameter \(did you mean 'smoothing'\?\); /,
    )
    expect(() => fitTimeScale(ode, { ...run, loss: run.loss.slice(1) })).toThrow(ShapeError)
    expect(() => fitTimeScale(ode, { time: [0], loss: [3], plateaus: cePlateaus })).toThrow(/at least two/)
    const flat = { time: [0, 1, 2], loss: [3.7, 3.7, 3.7], plateaus: cePlateaus }
    expect(() => fitTimeScale(ode, flat, { method: 'transitions' })).toThrow(/no stage transition/)
    expect(() => fitTimeScale(ode, run, { method: 'magic' as never })).toThrow(/method/)
    expect(() => fitTimeScale(ode, run, { offset: Number.NaN })).toThrow(/offset/)
  })
})

import { SparseMarkovTask } from '@attnlab/markov'
import { plateauLosses, resolveDynamicsConfig } from '@attnlab/dynamics'
import { describe, expect, it } from 'vitest'
import { odeOverlay } from './ode.ts'

describe('odeOverlay', () => {
  it("sets the ODE up with the task's spans (oldest first; the ODE gets them most important first)", () => {
    // Uneven spans: the oldest has 1 token, the newest (most important, c = m) 2.
    const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 2], m: 1.5 })
    const overlay = odeOverlay(task, 2, 6, [0, 10, 20, 30, 40], [2, 1.6, 1.3, 1.2, 1.1], [2, 1.5, 1.1], 0)
    expect(overlay).not.toBeNull()
    expect(overlay!.config.spans).toEqual([1, 2])
    // L_0 = 1/2 sum |span| c^2 = 1/2 (1 * 1 + 2 * 1.5^2).
    expect(overlay!.odePlateaus[0]).toBeCloseTo(0.5 * (1 + 2 * 1.5 ** 2), 10)
    const config = resolveDynamicsConfig({ nHeads: 2, nCtx: 6, spans: [2, 1], importanceRatio: 1.5 })
    expect(overlay!.odePlateaus).toEqual(plateauLosses(config))
    // The curve is on the run's axes: steps within the run, losses between its plateaus.
    expect(overlay!.curve.step.at(-1)!).toBeLessThanOrEqual(40 * 1.05)
  })

  it('returns null for plateaus that do not decrease', () => {
    const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 2], m: 1.5 })
    expect(odeOverlay(task, 2, 6, [0, 10], [2, 1.9], [2, 2.1, 1.1], 0)).toBeNull()
    expect(odeOverlay(task, 2, 6, [0, 10], [2, 1.9], [2, 1.1], 0)).toBeNull()
  })
})

import { odeOverlay } from '@attnlab/experiments'
import { SparseMarkovTask } from '@attnlab/markov'
import { describe, expect, it } from 'vitest'
import { runCli } from '../cli.test-utils.ts'

describe('odeOverlay', () => {
  it("sets the ODE up with the task's spans as `dynamics simulate --spans` reads them (oldest first)", async () => {
    // Uneven spans: the oldest has 1 token, the newest (most important, c = m) 2.
    const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 2], m: 1.5 })
    const steps = [0, 10, 20, 30, 40]
    const losses = [2, 1.6, 1.3, 1.2, 1.1]
    const overlay = odeOverlay(task, 2, 6, steps, losses, [2, 1.5, 1.1], 0)
    expect(overlay).not.toBeNull()
    expect(overlay!.config.spans).toEqual([1, 2])
    // L_0 = 1/2 sum |span| c^2 = 1/2 (1 * 1 + 2 * 1.5^2).
    expect(overlay!.odePlateaus[0]).toBeCloseTo(0.5 * (1 + 2 * 1.5 ** 2), 10)
    const { code, stdout } = await runCli([
      'dynamics',
      'simulate',
      '--heads',
      '2',
      '--T',
      '6',
      '--spans',
      '1,2',
      '--m',
      '1.5',
      '--json',
    ])
    expect(code).toBe(0)
    expect((JSON.parse(stdout) as { plateaus: number[] }).plateaus).toEqual(overlay!.odePlateaus)
  })
})

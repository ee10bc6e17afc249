import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { AttnlabError, ConfigError } from '@attnlab/core'
import { analyzeTrajectory, simulateAndAnalyze } from './analysis.ts'
import type { DynamicsConfig } from './config.ts'
import { sampleTimes, simulate } from './simulate.ts'
import { detectTransitions } from './stages.ts'

interface GoldenCase {
  name: string
  config: Partial<DynamicsConfig>
  tMax: number
  points: number
  loss: number[]
  transitions: (number | null)[]
}
const golden = JSON.parse(readFileSync(new URL('./__fixtures__/scipy-reference.json', import.meta.url), 'utf8')) as {
  cases: GoldenCase[]
}

const times = (run: { analysis: { transitions: readonly { time: number | null }[] } }) =>
  run.analysis.transitions.map((t) => t.time)

describe('simulate: against an independent scipy solution (tools/dynamics/ode_scipy.py, DOP853 at 1e-11)', () => {
  it.each(golden.cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const trajectory = simulate(c.config, { tMax: c.tMax, points: c.points })
    expect(trajectory.loss).toHaveLength(c.loss.length)
    for (const [i, expected] of c.loss.entries()) {
      expect(Math.abs((trajectory.loss[i] as number) - expected)).toBeLessThan(1e-5 * Math.max(1, expected))
    }
    const transitions = detectTransitions(trajectory.times, trajectory.loss, trajectory.plateaus)
    for (const [j, expected] of c.transitions.entries()) {
      const t = transitions[j]?.time ?? null
      if (expected === null) expect(t).toBeNull()
      else expect(Math.abs((t as number) / expected - 1)).toBeLessThan(1e-6)
    }
  })
})

describe('simulate: closed forms and reference behaviour of the reduced flow', () => {
  it('eps = 0: the heads stay bit-identical and the loss stays on L_1 forever', () => {
    const { trajectory, analysis } = simulateAndAnalyze({ initNoise: 0 }, { tMax: 5000, points: 300 })
    const { nHeads: h, nCtx: T } = trajectory.config
    for (let i = 0; i < trajectory.times.length; i++) {
      const head0 = trajectory.attention.subarray(i * h * T, i * h * T + T)
      for (let k = 1; k < h; k++)
        expect(trajectory.attention.subarray((i * h + k) * T, (i * h + k + 1) * T)).toEqual(head0)
    }
    const L1 = trajectory.plateaus[1] as number
    // The flow approaches the saddle from above and never passes it.
    expect(analysis.finalLoss).toBeCloseTo(L1, 5)
    for (const loss of trajectory.loss) expect(loss).toBeGreaterThanOrEqual(L1 - 1e-9)
    expect(analysis.stagesReached).toBe(1)
    expect(analysis.phases.map((p) => p.phase)).toEqual(['initial', 'competitive'])
  })

  it('h >= K ends at loss 0 with each span fitted by its own head (h = 3 and h = 4)', () => {
    for (const nHeads of [3, 4]) {
      const { trajectory, analysis } = simulateAndAnalyze(
        { nHeads, initNoise: 1e-3, seed: 1 },
        { tMax: 2000, points: 300 },
      )
      expect(analysis.finalLoss).toBeLessThan(1e-4)
      expect(analysis.stagesReached).toBe(3)
      const last = analysis.transitions[2]?.assignment
      expect(last?.holders.every((head) => head !== null)).toBe(true)
      expect(new Set(last?.holders).size).toBe(3) // three different heads
      // The heads' shares of every span add up to 1 (a global minimum); with h = K each span's
      // holder fits (almost) all of it, with h > K one span may be split between two heads.
      const n = trajectory.times.length - 1
      const share = (head: number, span: number) => trajectory.spanShare[(n * nHeads + head) * 3 + span] as number
      for (const [span, head] of (last?.holders ?? []).entries()) {
        let total = 0
        for (let k = 0; k < nHeads; k++) total += share(k, span)
        expect(total).toBeCloseTo(1, 2)
        expect(share(head as number, span)).toBeGreaterThan(nHeads === 3 ? 0.95 : 0.45)
      }
    }
  })

  it('h < K ends on plateau L_h', () => {
    const { analysis } = simulateAndAnalyze({ nHeads: 2, initNoise: 1e-3 }, { tMax: 2000, points: 200 })
    expect(analysis.finalLoss).toBeCloseTo(0.5, 3)
    expect(analysis.stagesReached).toBe(2)
  })

  it(
    'reference (replicator, h=3, T=40, singletons, m=1.7, eps=1e-6): three transitions, t1 near 4.6 for every seed, ' +
      'later ones seed-dependent',
    () => {
      const runs = [0, 1, 2].map((seed) => simulateAndAnalyze({ seed }, { tMax: 800, points: 400 }))
      for (const run of runs) {
        expect(run.analysis.stagesReached).toBe(3)
        const [t1, t2, t3] = times(run) as number[]
        expect(Math.abs((t1 as number) - 4.6)).toBeLessThan(0.1)
        expect(t2).toBeGreaterThan(30)
        expect(t2).toBeLessThan(90)
        expect(t3).toBeGreaterThan(120)
        expect(t3).toBeLessThan(500)
        expect(run.analysis.phases.map((p) => p.phase)).toEqual(['initial', 'competitive', 'cooperative'])
        expect(run.analysis.phases[1]?.span).toBe(0) // all heads on the most important span
      }
      const first = runs.map((run) => times(run)[0] as number)
      expect(Math.max(...first) - Math.min(...first)).toBeLessThan(1e-3)
      const second = runs.map((run) => times(run)[1] as number)
      expect(Math.max(...second) - Math.min(...second)).toBeGreaterThan(1)
      const third = runs.map((run) => times(run)[2] as number)
      expect(Math.max(...third) - Math.min(...third)).toBeGreaterThan(5)
    },
  )

  it('smaller eps delays the cooperative transitions but not the first (grows like log 1/eps)', () => {
    const byEps = [1e-3, 1e-6, 1e-9].map(
      (initNoise) => times(simulateAndAnalyze({ initNoise }, { tMax: 1500, points: 300 })) as number[],
    )
    const [a, b, c] = byEps as [number[], number[], number[]]
    expect(Math.abs((a[0] as number) - (c[0] as number))).toBeLessThan(0.3)
    expect(a[1]).toBeLessThan(b[1] as number)
    expect(b[1]).toBeLessThan(c[1] as number)
    expect(a[2]).toBeLessThan(b[2] as number)
    expect(b[2]).toBeLessThan(c[2] as number)
  })

  it('logit variant: the first transition time grows linearly with T (replicator: like sqrt T)', () => {
    const contexts = [10, 20, 40, 80]
    const logit = contexts.map(
      (nCtx) =>
        detectTransitions(
          ...curve(simulate({ variant: 'logit', nCtx }, { tMax: nCtx, points: 200, spacing: 'linear' })),
        )[0]?.time as number,
    )
    const slopes = logit.map((t, i) => t / (contexts[i] as number))
    // t1 / T is nearly constant (an independent simulation: 5.5, 21.8, 85, 336 for T = 10, 40, 160, 640).
    expect(Math.max(...slopes) / Math.min(...slopes)).toBeLessThan(1.1)
    expect(Math.abs((logit[2] as number) - 21.8)).toBeLessThan(0.5)
    // Doubling T doubles t1 for the logit flow, but multiplies it by about sqrt 2 for the replicator.
    const replicator = [20, 80].map(
      (nCtx) =>
        detectTransitions(...curve(simulate({ nCtx }, { tMax: 40, points: 200, spacing: 'linear' })))[0]
          ?.time as number,
    )
    expect((logit[3] as number) / (logit[1] as number)).toBeGreaterThan(3.6)
    expect((replicator[1] as number) / (replicator[0] as number)).toBeLessThan(2.4)
  })

  it('weight decay and the fast-value limit run and reach the final plateau', () => {
    const decayed = simulateAndAnalyze({ weightDecay: 1e-3, initNoise: 1e-3 }, { tMax: 1000, points: 200 })
    expect(decayed.analysis.stagesReached).toBe(3)
    const fast = simulateAndAnalyze({ fastValue: true, weightDecay: 1e-3, initNoise: 1e-3 }, { tMax: 200, points: 200 })
    expect(fast.analysis.stagesReached).toBe(3)
    expect(fast.analysis.finalLoss).toBeLessThan(1e-3)
    const exact = simulateAndAnalyze({ fastValue: true, initNoise: 0 }, { tMax: 200, points: 100 })
    const L1 = exact.trajectory.plateaus[1] as number
    expect(exact.analysis.finalLoss).toBeGreaterThanOrEqual(L1 - 1e-9)
    expect(exact.analysis.finalLoss).toBeLessThan(L1 + 1e-3)
  })

  it('returns consistent shapes and stats', () => {
    const trajectory = simulate({ nHeads: 2, nCtx: 7, spans: [2, 1] }, { times: [0, 1, 2, 5] })
    expect(Array.from(trajectory.times)).toEqual([0, 1, 2, 5])
    expect(trajectory.values).toHaveLength(4 * 2 * 2)
    expect(trajectory.attention).toHaveLength(4 * 2 * 7)
    expect(trajectory.spanMass).toHaveLength(4 * 2 * 2)
    expect(trajectory.loss[0]).toBeCloseTo(trajectory.plateaus[0] as number, 12)
    expect(trajectory.stats.evaluations).toBeGreaterThan(0)
    const analysis = analyzeTrajectory(trajectory)
    expect(analysis.transitions).toHaveLength(2)
  })
})

function curve(trajectory: ReturnType<typeof simulate>): [Float64Array, Float64Array, readonly number[]] {
  return [trajectory.times, trajectory.loss, trajectory.plateaus]
}

describe('simulate: options and failures', () => {
  it('builds log and linear grids starting at 0 and ending at tMax', () => {
    const log = sampleTimes({ variant: 'replicator' }, { tMax: 100, points: 3 })
    expect(log[0]).toBe(0)
    expect(log[1]).toBeCloseTo(1e-3, 12)
    expect(log[3]).toBe(100)
    expect(sampleTimes({ variant: 'logit' }, { points: 2, spacing: 'linear' })).toEqual([0, 2500, 5000])
  })

  it.each([
    [{ tMax: 0 }, 'tMax'],
    [{ tMax: Number.POSITIVE_INFINITY }, 'tMax'],
    [{ points: 0 }, 'points'],
    [{ spacing: 'cubic' }, 'spacing'],
    [{ times: [] }, 'times'],
    [{ times: [0, 2, 1] }, 'times'],
    [{ times: [-1, 2] }, 'times[0]'],
    [{ relativeTolerance: 0 }, 'relativeTolerance'],
    [{ absoluteTolerance: 2 }, 'absoluteTolerance'],
    [{ maxSteps: 0 }, 'maxSteps'],
  ])('rejects %j', (options, parameter) => {
    expect(() => simulate({}, options as never)).toThrow(ConfigError)
    try {
      simulate({}, options as never)
    } catch (error) {
      expect((error as ConfigError).parameter).toBe(parameter)
    }
  })

  it('stops with TOO_LARGE when the step budget runs out', () => {
    let error: unknown
    try {
      simulate({}, { tMax: 1000, points: 10, maxSteps: 5 })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(AttnlabError)
    expect((error as AttnlabError).code).toBe('TOO_LARGE')
  })

  it('rejects misspelled config fields and option names instead of running the default experiment', () => {
    expect(() => simulate({ importanceRatios: 2, tmax: 10 } as never)).toThrow(
      new RegExp(
        /Invalid importanceRatios: is not a dynamics parameter /.source +
          /\(did you mean 'importanceRatio'\?\); /.source +
          /expected one of nHeads, nCtx, spans, importanceRatio, weights, initNoise, seed, variant, weightDecay, /
            .source +
          /fastValue, spanWeights/.source,
      ),
    )
    expect(() => simulate({}, { tmax: 10 } as never)).toThrow(
      new RegExp(
        /Invalid tmax: is not a simulate parameter \(did you mean 'tMax'\?\); expected one of tMax, points, /.source +
          /spacing, times, relativeTolerance, absoluteTolerance, maxSteps$/.source,
      ),
    )
    expect(() => simulate({}, { point: 3 } as never)).toThrow(ConfigError)
    expect(() => sampleTimes({ variant: 'logit' }, { spaceing: 'linear' } as never)).toThrow(/did you mean 'spacing'/)
    expect(() => simulateAndAnalyze({}, { tMax: 10, points: 3, smoothin: 3 } as never)).toThrow(
      /Invalid smoothin: is not a simulateAndAnalyze parameter \(did you mean 'smoothing'\?\)/,
    )
    const run = simulate({ nHeads: 2, nCtx: 4, spans: [1, 1] }, { tMax: 20, points: 20 })
    expect(() => analyzeTrajectory(run, { persistance: 2 } as never)).toThrow(
      /Invalid persistance: is not a stage analysis parameter \(did you mean 'persistence'\?\)/,
    )
    expect(() => detectTransitions(run.times, run.loss, run.plateaus, { smooth: 3 } as never)).toThrow(
      /is not a transition detection parameter/,
    )
    // A resolved config (with spanWeights) can be simulated again; stage and simulate options combine.
    expect(simulate(run.config, { tMax: 20, points: 20 }).loss).toEqual(run.loss)
    expect(
      simulateAndAnalyze({ nHeads: 2, nCtx: 4, spans: [1, 1] }, { tMax: 20, points: 20, persistence: 2, minSamples: 2 })
        .trajectory.loss,
    ).toEqual(run.loss)
  })
})

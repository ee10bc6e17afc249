import { ConfigError } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { SparseMarkovTask } from './sparse-markov.ts'
import { restrictedContextEntropy } from './sparse-markov-exact.ts'
import { restrictedContextEntropyMonteCarlo, type EntropyEstimate } from './sparse-markov-monte-carlo.ts'

function expectWithin(estimates: readonly EntropyEstimate[], exact: readonly number[], sigmas = 4): void {
  for (const e of estimates) {
    if (e.estimate === null) continue
    const truth = exact[e.contextLength] as number
    const se = e.standardError as number
    expect(
      Math.abs(e.estimate - truth),
      `n = ${e.contextLength} (${e.method}): ${e.estimate} +- ${se} vs exact ${truth}`,
    ).toBeLessThan(sigmas * se + 2e-3)
  }
}

describe('restrictedContextEntropyMonteCarlo', () => {
  it('counting estimates match the exact oracle within their standard errors (pooled and per position)', () => {
    const task = new SparseMarkovTask({ vocabSize: 6, spans: [2, 2, 2] })
    const exact = restrictedContextEntropy(task)
    const mc = restrictedContextEntropyMonteCarlo(task, { sequences: 10_000, positionSpecific: true })
    expect(mc.method).toBe('monte-carlo')
    expect(mc.pooled.map((e) => e.method)).toEqual([
      'counting',
      'counting',
      'counting',
      'counting',
      'counting',
      'counting',
      'direct',
    ])
    expect(mc.pooled.every((e) => e.reliable && e.estimate !== null)).toBe(true)
    expectWithin(mc.pooled, exact.pooled)
    expectWithin(mc.positionSpecific ?? [], exact.positionSpecific)
    mc.truncatedTeacherCrossEntropy.forEach((e, k) => {
      expect(Math.abs(e.estimate - (exact.truncatedTeacherCrossEntropy[k] as number))).toBeLessThan(
        4 * e.standardError + 1e-9,
      )
    })
    expect(mc.topSpans.pooled.map((e) => e.contextLength)).toEqual([0, 1, 2, 3])
    expectWithin(
      mc.topSpans.pooled.map((e, j) => ({ ...e, contextLength: j })),
      exact.topSpans.pooled,
    )
  })

  it('posterior-sampling estimates match the exact oracle where they are reported', () => {
    const task = new SparseMarkovTask({ vocabSize: 4, spans: [2, 2], tau: 0.3, genLen: 5 })
    const exact = restrictedContextEntropy(task)
    const mc = restrictedContextEntropyMonteCarlo(task, {
      sequences: 4000,
      maxCountingContexts: 1,
      contexts: 400,
      sweeps: 32,
      positionSpecific: true,
      seed: 3,
    })
    const posterior = [...mc.pooled, ...(mc.positionSpecific ?? [])].filter((e) => e.method === 'posterior')
    expect(posterior.length).toBe(6)
    expect(posterior.filter((e) => e.reliable).length).toBeGreaterThanOrEqual(4)
    expectWithin(mc.pooled, exact.pooled)
    expectWithin(mc.positionSpecific ?? [], exact.positionSpecific)
    for (const e of posterior) {
      if (!e.reliable) expect(e.estimate).toBeNull()
      expect(e.note.length).toBeGreaterThan(10)
    }
  })

  it('reports the posterior-sampling progress without changing the numbers', () => {
    const task = new SparseMarkovTask({ vocabSize: 4, spans: [2, 2], tau: 0.3, genLen: 5 })
    const options = { sequences: 400, maxCountingContexts: 1, contexts: 60, sweeps: 8, positionSpecific: true, seed: 1 }
    const events: { contextLength: number; positionSpecific: boolean; done: number; total: number }[] = []
    const watched = restrictedContextEntropyMonteCarlo(task, { ...options, onProgress: (p) => events.push(p) })
    const plain = restrictedContextEntropyMonteCarlo(task, options)
    expect(watched.pooled).toEqual(plain.pooled)
    expect(watched.positionSpecific).toEqual(plain.positionSpecific)
    expect(watched.options).toEqual(plain.options)
    expect(Object.keys(watched.options)).not.toContain('onProgress')
    // Lengths 1..3 of C = 4 by posterior sampling (H_0 is counted), pooled and per position: 6 estimates of 60.
    const sampled = [...watched.pooled, ...(watched.positionSpecific ?? [])].filter((e) => e.method === 'posterior')
    expect(sampled.length).toBe(6)
    expect(new Set(events.map((e) => e.total))).toEqual(new Set([6 * 60]))
    expect(events[0]?.done).toBe(0)
    expect(events.at(-1)?.done).toBe(6 * 60)
    for (let i = 1; i < events.length; i++)
      expect((events[i] as { done: number }).done).toBeGreaterThanOrEqual((events[i - 1] as { done: number }).done)
    expect(new Set(events.map((e) => `${e.contextLength}${e.positionSpecific}`)).size).toBe(6)
    expect(() => restrictedContextEntropyMonteCarlo(task, { onProgress: 3 as never })).toThrow(ConfigError)
  })

  it('withdraws a counting estimate whose bias correction is too large', () => {
    const mc = restrictedContextEntropyMonteCarlo(new SparseMarkovTask(), { sequences: 4_000, contextLengths: [2] })
    const [estimate] = mc.pooled as [EntropyEstimate]
    expect(estimate.method).toBe('counting')
    expect(estimate.estimate).toBeNull()
    expect(estimate.note).toMatch(/bias correction .* too large/)
  })

  it('refuses posterior sampling for a nearly deterministic teacher instead of printing a biased number', () => {
    const task = new SparseMarkovTask({ vocabSize: 6, spans: [2, 2, 2] }) // teacher entropy 0.05 nat
    const mc = restrictedContextEntropyMonteCarlo(task, { sequences: 400, maxCountingContexts: 1, contextLengths: [3] })
    const [estimate] = mc.pooled as [EntropyEstimate]
    expect(estimate.estimate).toBeNull()
    expect(estimate.reliable).toBe(false)
    expect(estimate.note).toMatch(/nearly deterministic/)
    // Bounded instead: H_3 lies between H_6 (teacher entropy) and the counted H_0.
    expect(mc.pooled.length).toBe(1)
  })

  it('brackets a value it cannot estimate between estimated neighbours and truncated-teacher losses', () => {
    const task = new SparseMarkovTask({ vocabSize: 6, spans: [2, 2, 2] })
    const exact = restrictedContextEntropy(task)
    const mc = restrictedContextEntropyMonteCarlo(task, {
      sequences: 2_000,
      maxCountingContexts: 40,
      contextLengths: [0, 2, 4, 6],
    })
    const h4 = mc.pooled[2] as EntropyEstimate
    expect(h4.estimate).toBeNull()
    const [lower, upper] = h4.bounds as readonly [number, number]
    expect(lower).toBeLessThanOrEqual(exact.pooled[4] as number)
    expect(upper).toBeGreaterThanOrEqual(exact.pooled[4] as number)
    // The upper end is at most H_2 (+2 SE) and the truncated-teacher loss keeping the two newest spans.
    expect(upper).toBeLessThanOrEqual(
      mc.truncatedTeacherCrossEntropy[2]!.estimate + 2 * mc.truncatedTeacherCrossEntropy[2]!.standardError,
    )
    expect(upper).toBeLessThanOrEqual((mc.pooled[1]?.estimate as number) + 2 * (mc.pooled[1]?.standardError as number))
    expect(mc.pooled[1]?.bounds).toBeNull()
  })

  it('with posteriorSampling: false, reports the uncountable lengths as not estimated, bounded', () => {
    const task = new SparseMarkovTask({ vocabSize: 6, spans: [2, 2, 2] })
    const exact = restrictedContextEntropy(task)
    const options = { sequences: 2_000, maxCountingContexts: 40, contextLengths: [0, 2, 4, 6] }
    const mc = restrictedContextEntropyMonteCarlo(task, { ...options, posteriorSampling: false })
    const h4 = mc.pooled[2] as EntropyEstimate
    expect(h4.method).toBe('none')
    expect(h4.estimate).toBeNull()
    expect(h4.note).toMatch(/posteriorSampling: false/)
    const [lower, upper] = h4.bounds as readonly [number, number]
    expect(lower).toBeLessThanOrEqual(exact.pooled[4] as number)
    expect(upper).toBeGreaterThanOrEqual(exact.pooled[4] as number)
    expect(mc.options.posteriorSampling).toBe(false)
    // The counted lengths are the same numbers as with posterior sampling on.
    const full = restrictedContextEntropyMonteCarlo(task, options)
    expect(full.pooled[2]?.note).not.toMatch(/posteriorSampling/)
    const counted = (list: readonly EntropyEstimate[]): (number | null)[] =>
      list.map((e) => e.estimate).filter((_, i) => i !== 2)
    expect(counted(mc.pooled)).toEqual(counted(full.pooled))
  })

  it('estimates the d = 50, spans [2,2,2] plateau lines it can count, and is deterministic per seed', () => {
    const task = new SparseMarkovTask()
    const mc = restrictedContextEntropyMonteCarlo(task, { sequences: 30_000, contextLengths: [0, 2, 6] })
    const [h0, h2, h6] = mc.pooled.map((e) => e.estimate) as [number, number, number]
    expect(h0).toBeGreaterThan(3.3)
    expect(h0).toBeLessThan(Math.log(50))
    expect(h2).toBeGreaterThan(1.1)
    expect(h2).toBeLessThan(1.9)
    expect(h6).toBeGreaterThan(0.4)
    expect(h6).toBeLessThan(0.75)
    expect(mc.teacherEntropy.estimate).toBe(h6)
    // H_4 (two spans) was not requested: reported as such, not guessed.
    expect(mc.topSpans.pooled[2]?.estimate).toBeNull()
    expect(mc.topSpans.pooled[2]?.note).toMatch(/not among the requested/)
    expect(mc.pooled[1]?.biasCorrection as number).toBeLessThan(0.02)
    const options = { sequences: 400, contextLengths: [0, 6] }
    const first = restrictedContextEntropyMonteCarlo(task, options)
    const again = restrictedContextEntropyMonteCarlo(task, options)
    expect(again.pooled.map((e) => e.estimate)).toEqual(first.pooled.map((e) => e.estimate))
    const other = restrictedContextEntropyMonteCarlo(task, { ...options, seed: 1 })
    expect(other.pooled[0]?.estimate).not.toBe(first.pooled[0]?.estimate)
  }, 300_000) // ~33 s of sampling alone; a loaded 2-core test run can double it

  it('rejects invalid options, naming the option and its range', () => {
    const task = new SparseMarkovTask({ vocabSize: 3, spans: [1, 1] })
    const cases: [Record<string, unknown>, string][] = [
      [{ sweeps: 6 }, 'sweeps'],
      [{ sweeps: 2 }, 'sweeps'],
      [{ sequences: 10, groups: 10 }, 'sequences'],
      [{ groups: 1 }, 'groups'],
      [{ contexts: 5 }, 'contexts'],
      [{ contextLengths: [3] }, 'contextLengths[0]'],
      [{ contextLengths: [] }, 'contextLengths'],
      [{ positionSpecific: 'yes' }, 'positionSpecific'],
      [{ posteriorSampling: 'no' }, 'posteriorSampling'],
      [{ seed: 1.5 }, 'seed'],
      [{ resimulations: -1 }, 'resimulations'],
      [{ maxCountingContexts: 0 }, 'maxCountingContexts'],
    ]
    for (const [options, parameter] of cases) {
      let error: unknown
      try {
        restrictedContextEntropyMonteCarlo(task, options)
      } catch (e) {
        error = e
      }
      expect(error, JSON.stringify(options)).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).parameter).toBe(parameter)
    }
  })
})

import { ConfigError, Rng } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import fixture from './__fixtures__/sparse-markov-exact.json' with { type: 'json' }
import { OracleTooLargeError } from './errors.ts'
import { SparseMarkovTask, type SparseMarkovConfig } from './sparse-markov.ts'
import { restrictedContextEntropy } from './sparse-markov-exact.ts'

function expectClose(actual: readonly number[], expected: readonly number[], tolerance = 1e-10): void {
  expect(actual.length).toBe(expected.length)
  actual.forEach((value, i) => {
    expect(Math.abs(value - (expected[i] as number)), `entry ${i}: ${value} vs ${expected[i]}`).toBeLessThan(tolerance)
  })
}

function expectNonIncreasing(values: readonly number[]): void {
  for (let i = 1; i < values.length; i++)
    expect(values[i] as number).toBeLessThanOrEqual((values[i - 1] as number) + 1e-12)
}

describe('restrictedContextEntropy (exact)', () => {
  it('matches the brute-force numpy enumeration of whole sequences (tools/markov/exact_oracle.py)', () => {
    expect(fixture.cases.length).toBeGreaterThanOrEqual(5)
    for (const testCase of fixture.cases) {
      const task = new SparseMarkovTask(testCase.config as unknown as Partial<SparseMarkovConfig>)
      const oracle = restrictedContextEntropy(task)
      expectClose(oracle.pooled, testCase.expected.pooled)
      expectClose(oracle.positionSpecific, testCase.expected.positionSpecific)
      oracle.perPosition.forEach((row, t) => {
        expectClose(row, testCase.expected.perPosition[t] as number[])
      })
      expectClose(oracle.topSpans.pooled, testCase.expected.topSpansPooled)
      expectClose(oracle.topSpans.positionSpecific, testCase.expected.topSpansPositionSpecific)
      expectClose(oracle.truncatedTeacherCrossEntropy, testCase.expected.truncatedTeacherCrossEntropy)
      for (const probe of testCase.probes) {
        expectClose(
          Array.from(task.nextTokenProbabilities(probe.window, { keepSpans: probe.keepSpans })),
          probe.probabilities,
          1e-12,
        )
      }
    }
  })

  it('is non-increasing in n, position-specific <= pooled, and ends at the teacher entropy', () => {
    const task = new SparseMarkovTask({ vocabSize: 6, spans: [2, 1, 2], tau: 0.2 })
    const oracle = restrictedContextEntropy(task)
    expect(oracle.contextLengths).toEqual([0, 1, 2, 3, 4, 5])
    expectNonIncreasing(oracle.pooled)
    expectNonIncreasing(oracle.positionSpecific)
    oracle.pooled.forEach((h, n) => {
      expect(oracle.positionSpecific[n] as number).toBeLessThanOrEqual(h + 1e-12)
    })
    expect(oracle.pooled[5]).toBe(oracle.teacherEntropy)
    expect(oracle.pooled[0] as number).toBeLessThanOrEqual(Math.log(6))
    // Plateau lines: the j most important spans (newest first here) are suffixes of the window.
    expect(oracle.topSpans.pooled).toEqual([oracle.pooled[0], oracle.pooled[2], oracle.pooled[3], oracle.pooled[5]])
    expectNonIncreasing(oracle.truncatedTeacherCrossEntropy.slice(1))
    oracle.truncatedTeacherCrossEntropy.forEach((ce, k) => {
      expect(ce).toBeGreaterThanOrEqual((oracle.topSpans.pooled[k] as number) - 1e-12)
    })
  })

  it('agrees in distribution with an independent reference computation for d = 50, spans [1,1,1]', () => {
    // Our random streams differ from the reference's, so only orders of magnitude and shape are
    // comparable: reference (seeds 0/1) H = 3.69-3.73, 1.56-1.71, 0.98-1.08, 0.81-0.89.
    const oracle = restrictedContextEntropy(new SparseMarkovTask({ vocabSize: 50, spans: [1, 1, 1], genLen: 20 }))
    const [h0, h1, h2, h3] = oracle.pooled as [number, number, number, number]
    expect(h0).toBeGreaterThan(3.5)
    expect(h0).toBeLessThan(Math.log(50))
    expect(h1).toBeGreaterThan(1.3)
    expect(h1).toBeLessThan(2.1)
    expect(h2).toBeGreaterThan(0.8)
    expect(h2).toBeLessThan(1.35)
    expect(h3).toBeGreaterThan(0.6)
    expect(h3).toBeLessThan(1.1)
    expect(h0 - h1).toBeGreaterThan(h1 - h2)
    expect(h1 - h2).toBeGreaterThan(h2 - h3)
  })

  it('matches the empirical conditional entropy of a large sample within its standard error', () => {
    const task = new SparseMarkovTask({ vocabSize: 3, spans: [1, 1], tau: 0.5, genLen: 5 })
    const oracle = restrictedContextEntropy(task)
    const groups = 20
    const perGroup = 4000
    const C = task.contextLength
    const estimates: number[][] = []
    for (let g = 0; g < groups; g++) {
      const batch = task.sample(perGroup, Rng.fromSeed(100).split(`group ${g}`))
      const row: number[] = []
      for (let n = 0; n <= C; n++) {
        // Plug-in H(Y | last n tokens) from counts of (context, next token), pooled over positions.
        const counts = new Map<string, number[]>()
        for (let b = 0; b < perGroup; b++) {
          for (let p = C; p < task.seqLength; p++) {
            const base = b * task.seqLength
            const key = Array.from(batch.tokens.subarray(base + p - n, base + p)).join(',')
            const entry = counts.get(key) ?? [0, 0, 0]
            entry[batch.tokens[base + p] as number]! += 1
            counts.set(key, entry)
          }
        }
        let total = 0
        let h = 0
        for (const entry of counts.values()) {
          const rowTotal = entry.reduce((a, b) => a + b, 0)
          total += rowTotal
          for (const c of entry) if (c > 0) h -= c * Math.log(c / rowTotal)
        }
        row.push(h / total)
      }
      estimates.push(row)
    }
    for (let n = 0; n <= C; n++) {
      const values = estimates.map((row) => row[n] as number)
      const mean = values.reduce((a, b) => a + b, 0) / groups
      const se = Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / (groups - 1) / groups)
      // 9 contexts at most and 20k windows per group: the plug-in bias (< 1e-3) is well inside 4 SE.
      expect(
        Math.abs(mean - (oracle.pooled[n] as number)),
        `n = ${n}: ${mean} +- ${se} vs ${oracle.pooled[n]}`,
      ).toBeLessThan(4 * se + 1e-3)
    }
  })

  it('throws TOO_LARGE, pointing to the Monte-Carlo estimator, beyond maxStates', () => {
    const task = new SparseMarkovTask()
    let error: unknown
    try {
      restrictedContextEntropy(task)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(OracleTooLargeError)
    expect((error as OracleTooLargeError).code).toBe('TOO_LARGE')
    expect((error as OracleTooLargeError).states).toBe(50 ** 6)
    expect((error as Error).message).toMatch(/1\.56e\+10 states.*restrictedContextEntropyMonteCarlo/)
    expect(() =>
      restrictedContextEntropy(new SparseMarkovTask({ vocabSize: 5, spans: [1, 1] }), { maxStates: 10 }),
    ).toThrow(OracleTooLargeError)
    expect(() => restrictedContextEntropy(task, { maxStates: 0 })).toThrow(ConfigError)
  })

  it('handles overlapping and reversed spans whose top spans are not the newest tokens', () => {
    const task = new SparseMarkovTask({ vocabSize: 4, spans: [1, 2], reverse: true, tau: 0.3 })
    const oracle = restrictedContextEntropy(task)
    // Top-1 span = the oldest token: a different context than the newest token.
    expect(oracle.topSpans.spans).toEqual([[], [0], [0, 1]])
    expect(oracle.topSpans.pooled[1]).not.toBeCloseTo(oracle.pooled[1] as number, 6)
    expect(oracle.topSpans.pooled[2]).toBe(oracle.teacherEntropy)
  })
})

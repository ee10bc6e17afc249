import { SparseMarkovTask, restrictedContextEntropyMonteCarlo } from '@attnlab/markov'
import { describe, expect, it } from 'vitest'
import { boundsInformative, computeOracles, describeOracleValue } from './oracles.ts'
import { describeStageOracle } from './stages.ts'

describe('boundsInformative', () => {
  it('accepts a bound narrower than half the gap between its neighbours and rejects a wider one', () => {
    expect(boundsInformative([1.0, 1.1], 0.7, 1.7)).toBe(true)
    expect(boundsInformative([0.69, 1.41], 0.69, 1.73)).toBe(false)
    // A missing neighbour is replaced by the bound's own end.
    expect(boundsInformative([1.0, 1.1], null, 1.7)).toBe(true)
    expect(boundsInformative([1.0, 1.6], null, 1.7)).toBe(false)
  })
})

describe('computeOracles (Monte Carlo)', () => {
  it("gives the default chain's two-span line the package estimator's bounds, flagged as uninformative", () => {
    const task = new SparseMarkovTask({ m: 1.5 })
    const oracles = computeOracles(task, 0)
    const h4 = oracles.lines.find((o) => o.label.startsWith('H_4'))
    expect(h4?.value).toBeNull()
    // One estimator: the same bounds as `restrictedContextEntropyMonteCarlo` on the span boundaries.
    const reference = restrictedContextEntropyMonteCarlo(task, {
      seed: 0,
      contextLengths: [0, 2, 4, 6],
      posteriorSampling: false,
    })
    expect(h4?.bounds).toEqual(reference.pooled[2]?.bounds)
    expect(h4?.boundsInformative).toBe(false)
    expect(describeOracleValue(h4!)).toMatch(/too wide to test a plateau/)
    // Every line with a value is the package's number.
    const h2 = oracles.lines.find((o) => o.label.startsWith('H_2'))
    expect(h2?.value).toBe(reference.pooled[1]?.estimate)
    expect(oracles.plateaus).toEqual([
      reference.pooled[0]?.estimate,
      reference.pooled[1]?.estimate,
      null,
      reference.pooled[3]?.estimate,
    ])
    // A stage plateau inside the bound is no test: the table says so instead of "0.000 away".
    const described = describeStageOracle({
      label: h4!.label,
      value: null,
      bounds: h4!.bounds,
      distance: 0,
      informative: false,
    })
    expect(described).not.toMatch(/away/)
    expect(described).toMatch(/too wide/)
  }, 300_000) // two Monte-Carlo estimates of the default chain: ~17 s alone, 200 s seen beside other packages' tests
})

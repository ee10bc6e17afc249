import { ConfigError } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { createTask } from './create-task.ts'
import { OracleTooLargeError } from './errors.ts'
import { SparseMarkovTask } from './sparse-markov.ts'
import { taskOracle } from './task-oracle.ts'

// The expected numbers are what `attnlab markov oracle --json` printed before it called taskOracle (same seeds).
const CHAIN = { vocabSize: 4, spans: [1, 1, 1], m: 1.7, tau: 0.1, teacherSeed: 0 }

describe('taskOracle', () => {
  it('is exact when d^C fits maxStates: H_n, top spans, truncated teachers (nats)', () => {
    const oracle = taskOracle(new SparseMarkovTask(CHAIN), { seed: 0 })
    expect(oracle.units).toBe('nats')
    if (!('method' in oracle) || oracle.method !== 'exact') throw new Error('expected exact')
    expect(oracle.restrictedContextEntropy).toEqual([
      1.1791796511987622, 0.1912050638599914, 0.09447413457481812, 0.06987709564608455,
    ])
    expect(oracle.teacherEntropy).toBe(0.06987709564608455)
    expect(oracle.topSpans.spans).toEqual([[], [2], [1, 2], [0, 1, 2]])
    expect(oracle.topSpans.positionSpecific).toEqual([
      1.1606623145887234, 0.1649024577341463, 0.08515909190725726, 0.06987709564608455,
    ])
    expect(oracle.truncatedTeacherCrossEntropy).toEqual([
      1.3862943611198906, 0.404297950816029, 0.32757216306843107, 0.06987709564608455,
    ])
  })

  it('falls back to Monte Carlo beyond maxStates (auto), telling onMonteCarlo d^C; same seed, same numbers', () => {
    const task = new SparseMarkovTask({ vocabSize: 5, spans: [1, 1], tau: 0.5, teacherSeed: 0 })
    const told: number[] = []
    const oracle = taskOracle(task, { maxStates: 10, mcSequences: 2000, seed: 0, onMonteCarlo: (s) => told.push(s) })
    expect(told).toEqual([25])
    if (!('method' in oracle) || oracle.method !== 'monte-carlo') throw new Error('expected monte-carlo')
    expect(oracle.restrictedContextEntropy).toEqual([1.4274063560802706, 0.977570353677601, 0.8923346294647523])
    expect(oracle.restrictedContextEntropyStandardError).toEqual([
      0.0009361193630122722, 0.0013476466897205744, 0.000784188105743509,
    ])
    expect(oracle.truncatedTeacherCrossEntropy).toEqual([1.6094379124341, 1.0303679503105352, 0.8923346294647523])
    expect(oracle.monteCarloOptions.sequences).toBe(2000)
    expect(oracle.positionSpecificEntropy).toBeUndefined()
  })

  it("refuses method 'exact' beyond maxStates with OracleTooLargeError (states, maxStates)", () => {
    const task = new SparseMarkovTask({ vocabSize: 5, spans: [1, 1] })
    const attempt = () => taskOracle(task, { method: 'exact', maxStates: 10 })
    expect(attempt).toThrow(OracleTooLargeError)
    try {
      attempt()
    } catch (error) {
      expect(error).toMatchObject({ code: 'TOO_LARGE', states: 25, maxStates: 10 })
    }
  })

  it('gives the linear map its closed-form floor and the ICL Markov chain its Bayes loss', () => {
    const linear = taskOracle(createTask({ kind: 'linear-map', stateSize: 8 }))
    expect(linear).toMatchObject({ lossFloor: 0.3234686842613078, chanceLoss: Math.LN2 })
    const icl = taskOracle(createTask({ kind: 'icl-markov', vocabSize: 2 }), { seed: 0, sequences: 200 })
    expect(icl).toMatchObject({
      bayesLoss: 0.5125755671804579,
      bayesLossStandardError: 0.012066908001717395,
      sequences: 200,
      chanceLoss: Math.LN2,
    })
  })

  it('refuses a retrieval task (ConfigError naming the task kind)', () => {
    const task = createTask({ kind: 'niah-tokens' })
    expect(() => taskOracle(task)).toThrow(ConfigError)
    expect(() => taskOracle(task)).toThrow(/niah-tokens task/)
  })
})

import { AttnlabError, ConfigError, Rng, ShapeError } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { createTask } from './create-task.ts'
import { randomOrthogonalMatrix } from './orthogonal.ts'
import {
  SPARSE_MARKOV_PRESETS,
  SparseMarkovTask,
  defaultSparseMarkovConfig,
  resolveSparseMarkovConfig,
  type SparseMarkovConfig,
} from './sparse-markov.ts'

function expectConfigError(config: unknown, parameter: string, pattern?: RegExp): void {
  let error: unknown
  try {
    new SparseMarkovTask(config as Partial<SparseMarkovConfig>)
  } catch (e) {
    error = e
  }
  expect(error, `expected a ConfigError for ${JSON.stringify(config)}`).toBeInstanceOf(ConfigError)
  expect((error as ConfigError).parameter).toBe(parameter)
  expect((error as ConfigError).code).toBe('INVALID_CONFIG')
  if (pattern) expect((error as Error).message).toMatch(pattern)
}

describe('SparseMarkovTask configuration', () => {
  it('defaults to the paper minimal setting and freezes the resolved config', () => {
    const task = new SparseMarkovTask()
    expect(task.config).toEqual(defaultSparseMarkovConfig())
    expect(task.vocabSize).toBe(50)
    expect(task.contextLength).toBe(6)
    expect(task.seqLength).toBe(26)
    expect(Object.isFrozen(task.config)).toBe(true)
    expect(Object.isFrozen(task.config.spans)).toBe(true)
    expect(resolveSparseMarkovConfig(SPARSE_MARKOV_PRESETS.full).spans).toEqual([4, 4, 4])
    expect(new SparseMarkovTask(SPARSE_MARKOV_PRESETS.reversed).teacher.weights).toEqual([1.7 ** 2, 1.7, 1])
  })

  it('rejects every invalid parameter, naming it and the allowed range', () => {
    expectConfigError({ vocabSize: 1 }, 'vocabSize', /\[2, 4096\]/)
    expectConfigError({ vocabSize: 2.5 }, 'vocabSize')
    expectConfigError({ spans: [] }, 'spans', /1 to 16 entries/)
    expectConfigError({ spans: 'abc' }, 'spans')
    expectConfigError({ spans: [2, 0, 2] }, 'spans[1]', /\[1, 64\]/)
    expectConfigError({ spans: new Array(17).fill(1) }, 'spans', /1 to 16/)
    expectConfigError({ spans: [40, 30] }, 'spans', /at most 64/)
    expectConfigError({ m: 0 }, 'm', /^Invalid m: must be in \(0, 100\], got 0$/)
    expectConfigError({ m: Number.NaN }, 'm')
    expectConfigError({ tau: 0 }, 'tau', /must be in \(0, 1000\], got 0$/)
    expectConfigError({ tau: -1 }, 'tau')
    expectConfigError({ genLen: 0 }, 'genLen', /\[1, 4096\]/)
    expectConfigError({ reverse: 'yes' }, 'reverse', /true or false/)
    expectConfigError({ stride: 3, spans: [2, 2] }, 'stride', /\[1, 2\]/)
    expectConfigError({ stride: 1, spans: [4, 1] }, 'spans', /newest/)
    expectConfigError({ positionWeights: [1, 1, 1], spans: [2, 2] }, 'positionWeights', /one weight per token/)
    expectConfigError(
      { positionWeights: [1, 0], spans: [2, 2] },
      'positionWeights[1]',
      /must be in \(0, 1000000\], got 0$/,
    )
    expectConfigError({ teacherSeed: 0.5 }, 'teacherSeed')
    expectConfigError({ teacherMatrices: [[1]], spans: [1, 1], vocabSize: 2 }, 'teacherMatrices', /2 to 2/)
    expectConfigError({ teacherMatrices: [[1, 0, 0]], spans: [1], vocabSize: 2 }, 'teacherMatrices[0]', /2 x 2/)
    expectConfigError(
      { teacherMatrices: [[1, 0, 0, Infinity]], spans: [1], vocabSize: 2 },
      'teacherMatrices[0]',
      /entry 3/,
    )
    expectConfigError({ spams: [1] }, 'spams', /not a sparse-markov parameter/)
    expectConfigError(null, 'config')
  })

  it('accepts overlapping spans (stride) and position weights', () => {
    const task = new SparseMarkovTask({ spans: [2, 2, 2], stride: 1, positionWeights: [0.7, 0.3], vocabSize: 5 })
    expect(task.contextLength).toBe(4)
    expect(task.teacher.starts).toEqual([0, 1, 2])
    expect(task.offsetGroups.map((g) => g.offsets)).toEqual([
      [0, 1],
      [1, 2],
      [2, 3],
    ])
  })
})

describe('SparseMarkovTask teacher', () => {
  it('draws Haar-orthogonal matrices from the teacher seed', () => {
    const task = new SparseMarkovTask({ vocabSize: 20, spans: [1, 2] })
    const d = 20
    for (const a of task.teacher.matrices) {
      for (let i = 0; i < d; i++) {
        for (let j = 0; j < d; j++) {
          let dot = 0
          for (let r = 0; r < d; r++) dot += (a[r * d + i] as number) * (a[r * d + j] as number)
          expect(Math.abs(dot - (i === j ? 1 : 0))).toBeLessThan(1e-12)
        }
      }
    }
    const again = new SparseMarkovTask({ vocabSize: 20, spans: [1, 2] })
    expect(Array.from(again.teacher.matrices[1] as Float64Array)).toEqual(
      Array.from(task.teacher.matrices[1] as Float64Array),
    )
    const other = new SparseMarkovTask({ vocabSize: 20, spans: [1, 2], teacherSeed: 1 })
    expect(other.teacher.matrices[0]?.[0]).not.toBe(task.teacher.matrices[0]?.[0])
    expect(() => randomOrthogonalMatrix(0, Rng.fromSeed(0))).toThrow(ConfigError)
  })

  it('weights spans by m^i, newest most important unless reversed', () => {
    const task = new SparseMarkovTask({ spans: [2, 2, 2], m: 2 })
    expect(task.teacher.weights).toEqual([1, 2, 4])
    expect(task.teacher.importanceOrder).toEqual([2, 1, 0])
    expect(task.offsetGroups.map((g) => g.offsets)).toEqual([
      [0, 1],
      [2, 3],
      [4, 5],
    ])
    expect(task.offsetGroups[0]?.name).toContain('newest')
    const reversed = new SparseMarkovTask({ spans: [2, 4, 8], reverse: true })
    expect(reversed.teacher.importanceOrder).toEqual([0, 1, 2])
    expect(reversed.offsetGroups[0]?.offsets).toEqual([12, 13])
  })

  it('computes P(next | window) = softmax(sum_i c_i A_i a_i / tau) from explicit matrices', () => {
    // d = 2, one span of 2 tokens with weights [0.7, 0.3], A = [[1, 2], [3, 4]], m irrelevant (c_0 = 1).
    const task = new SparseMarkovTask({
      vocabSize: 2,
      spans: [2],
      positionWeights: [0.7, 0.3],
      tau: 0.5,
      teacherMatrices: [[1, 2, 3, 4]],
    })
    // window (oldest, newest) = (0, 1): a = 0.7 e0 + 0.3 e1; A a = [0.7 + 0.6, 2.1 + 1.2] = [1.3, 3.3]
    const z = [1.3 / 0.5, 3.3 / 0.5]
    const expected = [Math.exp(z[0] as number), Math.exp(z[1] as number)]
    const total = (expected[0] as number) + (expected[1] as number)
    const p = task.nextTokenProbabilities([0, 1])
    expect(p[0]).toBeCloseTo((expected[0] as number) / total, 12)
    expect(p[1]).toBeCloseTo((expected[1] as number) / total, 12)
    expect(Array.from(task.nextTokenProbabilities([0, 1], { keepSpans: 0 }))).toEqual([0.5, 0.5])
    expect(() => task.nextTokenProbabilities([0])).toThrow(ShapeError)
    expect(() => task.nextTokenProbabilities([0, 2])).toThrow(/token id in \[0, 2\)/)
    expect(() => task.nextTokenProbabilities([0, 1], { keepSpans: 2 })).toThrow(ConfigError)
  })
})

describe('SparseMarkovTask sampling', () => {
  it('lays out C burn-in tokens then genLen scored teacher samples', () => {
    const task = new SparseMarkovTask({ vocabSize: 7, spans: [1, 2], genLen: 5 })
    const batch = task.sample(40, Rng.fromSeed(3))
    expect(batch.batchSize).toBe(40)
    expect(batch.seqLength).toBe(8)
    expect(batch.tokens.length).toBe(320)
    for (let b = 0; b < 40; b++) {
      expect(Array.from(batch.lossMask.subarray(b * 8, b * 8 + 8))).toEqual([0, 0, 0, 1, 1, 1, 1, 1])
    }
    expect(batch.tokens.every((t) => t >= 0 && t < 7)).toBe(true)
    expect(task.parentPositions(2)).toBeUndefined()
    expect(task.parentPositions(5)).toEqual([2, 3, 4])
    expect(() => task.parentPositions(8)).toThrow(ConfigError)
  })

  it('is deterministic per seed and independent of the teacher seed stream', () => {
    const task = new SparseMarkovTask({ vocabSize: 9, spans: [2, 1] })
    const a = task.sample(25, Rng.fromSeed(11))
    const b = new SparseMarkovTask({ vocabSize: 9, spans: [2, 1] }).sample(25, Rng.fromSeed(11))
    expect(Array.from(a.tokens)).toEqual(Array.from(b.tokens))
    const c = task.sample(25, Rng.fromSeed(12))
    expect(Array.from(c.tokens)).not.toEqual(Array.from(a.tokens))
    const otherTeacher = new SparseMarkovTask({ vocabSize: 9, spans: [2, 1], teacherSeed: 5 }).sample(
      25,
      Rng.fromSeed(11),
    )
    // Same burn-in draws, different teacher: the generated tokens differ.
    expect(Array.from(otherTeacher.tokens)).not.toEqual(Array.from(a.tokens))
  })

  it('rejects bad batch sizes', () => {
    const task = new SparseMarkovTask({ vocabSize: 3, spans: [1] })
    expect(() => task.sample(0, Rng.fromSeed(0))).toThrow(/batchSize/)
    expect(() => task.sample(1.5, Rng.fromSeed(0))).toThrow(ConfigError)
  })

  it('draws next tokens with the teacher probabilities (chi-square on one window)', () => {
    const task = new SparseMarkovTask({ vocabSize: 3, spans: [1, 1], tau: 0.7, genLen: 1 })
    const batch = task.sample(30_000, Rng.fromSeed(4))
    const counts = new Map<string, number[]>()
    for (let b = 0; b < batch.batchSize; b++) {
      const key = `${batch.tokens[b * 3]},${batch.tokens[b * 3 + 1]}`
      const row = counts.get(key) ?? [0, 0, 0]
      row[batch.tokens[b * 3 + 2] as number]! += 1
      counts.set(key, row)
    }
    let chiSquare = 0
    let dof = 0
    for (const [key, row] of counts) {
      const window = key.split(',').map(Number)
      const p = task.nextTokenProbabilities(window)
      const n = row.reduce((x, y) => x + y, 0)
      row.forEach((observed, y) => {
        const expected = n * (p[y] as number)
        chiSquare += (observed - expected) ** 2 / expected
      })
      dof += 2
    }
    // 18 degrees of freedom: the 99.9% quantile is 42.3.
    expect(dof).toBe(18)
    expect(chiSquare).toBeLessThan(42.3)
  })

  it('stays exact when the product of exp columns underflows (tiny tau)', () => {
    const task = new SparseMarkovTask({ vocabSize: 10, spans: [3, 3, 3], tau: 1e-3 })
    const batch = task.sample(20, Rng.fromSeed(0))
    const p = task.teacherProbabilities(batch)
    for (let i = 0; i < batch.tokens.length; i++) {
      if (batch.lossMask[i] === 0) continue
      let sum = 0
      for (let y = 0; y < 10; y++) sum += p[i * 10 + y] as number
      expect(sum).toBeCloseTo(1, 5)
      expect(p[i * 10 + (batch.tokens[i] as number)]).toBeGreaterThan(0)
    }
  })
})

describe('SparseMarkovTask.teacherProbabilities', () => {
  const task = new SparseMarkovTask({ vocabSize: 6, spans: [1, 2, 1], genLen: 4 })
  const batch = task.sample(5, Rng.fromSeed(2))

  it('gives P(x_p | previous C tokens) at scored positions and zeros elsewhere', () => {
    const d = 6
    for (const keepSpans of [0, 1, 2, 3]) {
      const p = task.teacherProbabilities(batch, { keepSpans })
      expect(p.length).toBe(5 * 8 * d)
      for (let b = 0; b < 5; b++) {
        for (let pos = 0; pos < 8; pos++) {
          const row = Array.from(p.subarray((b * 8 + pos) * d, (b * 8 + pos + 1) * d))
          if (pos < 4) {
            expect(row.every((x) => x === 0)).toBe(true)
            continue
          }
          const window = Array.from(batch.tokens.subarray(b * 8 + pos - 4, b * 8 + pos))
          const expected = Array.from(task.nextTokenProbabilities(window, { keepSpans }))
          row.forEach((x, y) => {
            expect(x).toBeCloseTo(expected[y] as number, 6)
          })
          if (keepSpans === 0)
            row.forEach((x) => {
              expect(x).toBeCloseTo(1 / 6, 6)
            })
        }
      }
    }
  })

  it('rejects malformed batches, short contexts, bad tokens and bad keepSpans', () => {
    expect(() => task.teacherProbabilities({ ...batch, tokens: new Int32Array(3) })).toThrow(ShapeError)
    expect(() => task.teacherProbabilities({ ...batch, lossMask: new Uint8Array(3) })).toThrow(ShapeError)
    expect(() => task.teacherProbabilities({ ...batch, batchSize: 0 })).toThrow(ShapeError)
    const early = { ...batch, lossMask: Uint8Array.from(batch.lossMask) }
    early.lossMask[2] = 1
    expect(() => task.teacherProbabilities(early)).toThrow(/only 2 tokens precede it/)
    const bad = { ...batch, tokens: Int32Array.from(batch.tokens) }
    bad.tokens[1] = 6
    const error = (() => {
      try {
        task.teacherProbabilities(bad)
      } catch (e) {
        return e
      }
      return undefined
    })()
    expect(error).toBeInstanceOf(AttnlabError)
    expect((error as AttnlabError).code).toBe('INVALID_ARGUMENT')
    expect(() => task.teacherProbabilities(batch, { keepSpans: 4 })).toThrow(/keepSpans/)
    expect(() => task.teacherProbabilities(batch, { keepSpans: -1 })).toThrow(ConfigError)
  })
})

describe('SparseMarkovTask.describe', () => {
  it('round-trips through JSON and createTask to the same teacher and samples', () => {
    const task = new SparseMarkovTask({
      vocabSize: 11,
      spans: [2, 3],
      m: 1.4,
      reverse: true,
      tau: 0.3,
      genLen: 7,
      teacherSeed: 42,
    })
    const description = JSON.parse(JSON.stringify(task.describe())) as Record<string, unknown>
    expect(description.kind).toBe('sparse-markov')
    const rebuilt = createTask(description)
    expect(rebuilt).toBeInstanceOf(SparseMarkovTask)
    expect(Array.from(rebuilt.sample(10, Rng.fromSeed(1)).tokens)).toEqual(
      Array.from(task.sample(10, Rng.fromSeed(1)).tokens),
    )
  })
})

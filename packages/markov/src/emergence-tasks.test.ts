import { ConfigError, Rng, TaskRegistry, UnknownTaskKindError, taskRegistry } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { CellularAutomatonTask } from './cellular-automaton.ts'
import { MARKOV_TASK_FAMILIES, TASK_KINDS, createTask, registerMarkovTasks } from './create-task.ts'
import { IclMarkovTask } from './icl-markov.ts'
import { LinearMapTask } from './linear-map.ts'

function expectConfigError(build: () => unknown, parameter: string, pattern?: RegExp): void {
  let error: unknown
  try {
    build()
  } catch (e) {
    error = e
  }
  expect(error).toBeInstanceOf(ConfigError)
  expect((error as ConfigError).parameter).toBe(parameter)
  if (pattern) expect((error as Error).message).toMatch(pattern)
}

describe('LinearMapTask', () => {
  it('draws a fixed matrix with exactly s ones per row from the matrix seed', () => {
    const task = new LinearMapTask({ stateSize: 12, onesPerRow: 5 })
    for (let i = 0; i < 12; i++) expect(task.matrix.subarray(i * 12, i * 12 + 12).reduce((a, b) => a + b, 0)).toBe(5)
    expect(Array.from(new LinearMapTask({ stateSize: 12, onesPerRow: 5 }).matrix)).toEqual(Array.from(task.matrix))
    expect(Array.from(new LinearMapTask({ stateSize: 12, onesPerRow: 5, matrixSeed: 1 }).matrix)).not.toEqual(
      Array.from(task.matrix),
    )
  })

  it('generates trajectories x_{t+1} = M x_t mod 2 in the documented layout', () => {
    const S = 8
    const task = new LinearMapTask({ stateSize: S, onesPerRow: 3, states: 4, bos: true })
    expect(task.vocabSize).toBe(3)
    expect(task.seqLength).toBe(33)
    const batch = task.sample(20, Rng.fromSeed(0))
    for (let b = 0; b < 20; b++) {
      const seq = batch.tokens.subarray(b * 33, (b + 1) * 33)
      expect(seq[0]).toBe(2)
      for (let t = 1; t < 4; t++) {
        for (let i = 0; i < S; i++) {
          let bit = 0
          for (let j = 0; j < S; j++) bit ^= (task.matrix[i * S + j] as number) & (seq[1 + (t - 1) * S + j] as number)
          expect(seq[1 + t * S + i]).toBe(bit)
        }
      }
      expect(batch.lossMask[b * 33]).toBe(0)
      expect(batch.lossMask.subarray(b * 33 + 1, (b + 1) * 33).every((m) => m === 1)).toBe(true)
    }
    expect(task.parentPositions(3)).toBeUndefined()
    const parents = task.parentPositions(1 + S + 2) as number[]
    expect(parents.length).toBe(3)
    expect(parents.every((p) => p >= 1 && p < 1 + S && task.matrix[2 * S + (p - 1)] === 1)).toBe(true)
    expect(Array.from(task.sample(3, Rng.fromSeed(9)).tokens)).toEqual(
      Array.from(task.sample(3, Rng.fromSeed(9)).tokens),
    )
  })

  it('has the closed-form loss floor ln2 * (random scored bits) / (scored bits)', () => {
    // The paper's two-state trajectories without BOS: ln 2 (S-1)/(2S-1) = 0.3235, 0.3354, 0.3411.
    expect(new LinearMapTask({ stateSize: 8 }).lossFloor()).toBeCloseTo(0.3235, 4)
    expect(new LinearMapTask({ stateSize: 16 }).lossFloor()).toBeCloseTo(0.3354, 4)
    expect(new LinearMapTask({ stateSize: 32 }).lossFloor()).toBeCloseTo(0.3411, 4)
    expect(new LinearMapTask({ stateSize: 8, bos: true, states: 4 }).lossFloor()).toBeCloseTo(Math.LN2 / 4, 12)
    expect(new LinearMapTask({ stateSize: 8, scoreInitialState: false }).lossFloor()).toBe(0)
    // Independently from a sampled mask: ln 2 for scored initial bits, 0 for determined bits.
    for (const config of [
      { stateSize: 5, states: 3 },
      { stateSize: 5, states: 3, bos: true },
      { stateSize: 5, scoreInitialState: false },
    ]) {
      const task = new LinearMapTask(config)
      const batch = task.sample(1, Rng.fromSeed(0))
      let loss = 0
      let scored = 0
      for (let p = 0; p < task.seqLength; p++) {
        if (batch.lossMask[p] === 0) continue
        scored++
        if (task.parentPositions(p) === undefined) loss += Math.LN2
      }
      expect(task.lossFloor()).toBeCloseTo(loss / scored, 12)
    }
  })

  it('rejects invalid parameters', () => {
    expectConfigError(() => new LinearMapTask({ stateSize: 4, onesPerRow: 5 }), 'onesPerRow', /\[1, 4\]/)
    expectConfigError(() => new LinearMapTask({ stateSize: 1 }), 'stateSize')
    expectConfigError(() => new LinearMapTask({ states: 1 }), 'states')
    expectConfigError(() => new LinearMapTask({ bos: 1 as unknown as boolean }), 'bos')
    expectConfigError(() => new LinearMapTask({ size: 3 } as never), 'size')
    expectConfigError(() => new LinearMapTask(null as never), 'config')
    expect(() => new LinearMapTask().sample(0, Rng.fromSeed(0))).toThrow(ConfigError)
    expect(() => new LinearMapTask().parentPositions(-1)).toThrow(ConfigError)
  })
})

describe('CellularAutomatonTask', () => {
  it('applies the Wolfram rule with periodic boundary', () => {
    const S = 7
    for (const rule of [90, 30, 110, 204]) {
      const task = new CellularAutomatonTask({ cells: S, states: 3, rules: [rule] })
      const batch = task.sample(10, Rng.fromSeed(rule))
      for (let b = 0; b < 10; b++) {
        const seq = batch.tokens.subarray(b * 21, (b + 1) * 21)
        for (let t = 1; t < 3; t++) {
          for (let i = 0; i < S; i++) {
            const left = seq[(t - 1) * S + ((i + S - 1) % S)] as number
            const centre = seq[(t - 1) * S + i] as number
            const right = seq[(t - 1) * S + ((i + 1) % S)] as number
            expect(seq[t * S + i]).toBe((rule >> (4 * left + 2 * centre + right)) & 1)
          }
        }
      }
    }
  })

  it('draws the rule per sequence from the configured set', () => {
    const task = new CellularAutomatonTask({ cells: 5, states: 2, rules: [0, 255] })
    const batch = task.sample(200, Rng.fromSeed(1))
    let zeros = 0
    for (let b = 0; b < 200; b++) {
      const next = Array.from(batch.tokens.subarray(b * 10 + 5, b * 10 + 10))
      expect(next.every((x) => x === next[0])).toBe(true)
      if (next[0] === 0) zeros++
    }
    expect(zeros).toBeGreaterThan(60)
    expect(zeros).toBeLessThan(140)
  })

  it('computes the in-context Bayes loss exactly per sequence', () => {
    const S = 6
    // One rule: only the initial bits are uncertain. Scored: positions 1 .. 3S-1.
    const single = new CellularAutomatonTask({ cells: S, states: 3, rules: [110] }).bayesLoss(50, Rng.fromSeed(0))
    expect(single.estimate).toBeCloseTo(((S - 1) * Math.LN2) / (3 * S - 1), 12)
    expect(single.standardError).toBeLessThan(1e-12)
    // Rules 0 and 255: the first determined bit reveals the rule (cost ln 2), the rest are free.
    const pair = new CellularAutomatonTask({ cells: S, states: 3, rules: [0, 255] }).bayesLoss(50, Rng.fromSeed(0))
    expect(pair.estimate).toBeCloseTo((S * Math.LN2) / (3 * S - 1), 12)
    expect(pair.perPosition[S]).toBeCloseTo(Math.LN2, 12)
    expect(pair.perPosition[S + 1]).toBe(0)
    expect(Number.isNaN(pair.perPosition[0] as number)).toBe(true)
    // All 256 rules: between the floor of the single-rule case and chance.
    const all = new CellularAutomatonTask({ cells: S, states: 3 }).bayesLoss(400, Rng.fromSeed(0))
    expect(all.estimate).toBeGreaterThan(single.estimate)
    expect(all.estimate).toBeLessThan(Math.LN2)
    expect(all.standardError).toBeGreaterThan(0)
  })

  it('exposes the neighbourhood as offsets and exact parent positions', () => {
    const task = new CellularAutomatonTask({ cells: 8, bos: true })
    expect(task.offsetGroups[0]?.offsets).toEqual([6, 7, 8])
    // Interior cell 3 of state 1 at position 1 + 8 + 3; the query is one before it.
    const position = 1 + 8 + 3
    expect((task.parentPositions(position) as number[]).map((p) => position - 1 - p).sort((a, b) => a - b)).toEqual([
      6, 7, 8,
    ])
    expect(task.parentPositions(1 + 8)).toEqual([1, 2, 8])
    expect(task.parentPositions(4)).toBeUndefined()
  })

  it('rejects invalid parameters', () => {
    expectConfigError(() => new CellularAutomatonTask({ rules: [256] }), 'rules[0]', /\[0, 255\]/)
    expectConfigError(() => new CellularAutomatonTask({ rules: [30, 30] }), 'rules', /twice/)
    expectConfigError(() => new CellularAutomatonTask({ rules: [] }), 'rules')
    expectConfigError(() => new CellularAutomatonTask({ cells: 2 }), 'cells', /\[3, 1024\]/)
    expectConfigError(() => new CellularAutomatonTask({ states: 1 }), 'states')
    expectConfigError(() => new CellularAutomatonTask().bayesLoss(1, Rng.fromSeed(0)), 'sequences')
  })
})

describe('IclMarkovTask', () => {
  it('samples generated tokens after n uniform ones, deterministically per seed', () => {
    const task = new IclMarkovTask({ vocabSize: 4, order: 2, seqLength: 30 })
    const batch = task.sample(10, Rng.fromSeed(2))
    for (let b = 0; b < 10; b++) {
      expect(Array.from(batch.lossMask.subarray(b * 30, b * 30 + 3))).toEqual([0, 0, 1])
    }
    expect(batch.tokens.every((t) => t >= 0 && t < 4)).toBe(true)
    expect(Array.from(task.sample(10, Rng.fromSeed(2)).tokens)).toEqual(Array.from(batch.tokens))
    expect(task.offsetGroups[0]?.offsets).toEqual([0, 1])
    expect(task.parentPositions(5)).toEqual([3, 4])
    expect(task.parentPositions(1)).toBeUndefined()
  })

  it('draws a fresh table per sequence: a context repeats its own transitions within a sequence', () => {
    // alpha -> 0 makes rows nearly one-hot: within a sequence a context almost always has one successor.
    const task = new IclMarkovTask({ vocabSize: 5, order: 1, alpha: 0.01, seqLength: 60 })
    const batch = task.sample(50, Rng.fromSeed(3))
    let consistent = 0
    let total = 0
    const successorsAcross = new Set<string>()
    for (let b = 0; b < 50; b++) {
      const successor = new Map<number, number>()
      for (let p = 1; p < 60; p++) {
        const c = batch.tokens[b * 60 + p - 1] as number
        const y = batch.tokens[b * 60 + p] as number
        if (successor.has(c)) {
          total++
          if (successor.get(c) === y) consistent++
        } else successor.set(c, y)
        if (c === (batch.tokens[b * 60] as number)) successorsAcross.add(`${c}->${successor.get(c)}`)
      }
    }
    expect(consistent / total).toBeGreaterThan(0.95)
    expect(successorsAcross.size).toBeGreaterThan(5) // different tables across sequences
  })

  it('Bayes loss of the counting estimator matches exact enumeration on a tiny configuration', () => {
    // k = 2, order 1, 6 tokens, alpha = 0.5: enumerate the 64 sequences with their Dirichlet-multinomial
    // marginal probability m(x) = (1/2) prod_rows B(alpha + N_r0, alpha + N_r1) / B(alpha, alpha).
    const alpha = 0.5
    const L = 6
    const marginal = (x: number[]): number => {
      const counts = [
        [0, 0],
        [0, 0],
      ]
      for (let p = 1; p < x.length; p++) counts[x[p - 1] as number]![x[p] as number]! += 1
      let value = 0.5
      for (const [a, b] of counts as [number, number][]) {
        for (let i = 0; i < a; i++) value *= alpha + i
        for (let j = 0; j < b; j++) value *= alpha + j
        for (let l = 0; l < a + b; l++) value /= 2 * alpha + l
      }
      return value
    }
    let exact = 0
    for (let code = 0; code < 2 ** L; code++) {
      const x = Array.from({ length: L }, (_, i) => (code >> (L - 1 - i)) & 1)
      const probability = marginal(x)
      let loss = 0
      for (let p = 1; p < L; p++) loss -= Math.log(marginal(x.slice(0, p + 1)) / marginal(x.slice(0, p)))
      exact += (probability * loss) / (L - 1)
    }
    const task = new IclMarkovTask({ vocabSize: 2, order: 1, alpha, seqLength: L })
    const estimate = task.bayesLoss(40_000, Rng.fromSeed(5))
    expect(Math.abs(estimate.estimate - exact)).toBeLessThan(4 * estimate.standardError)
    expect(estimate.perPosition[1]).toBeCloseTo(Math.LN2, 9) // no counts yet: ln k
    expect(Number.isNaN(estimate.perPosition[0] as number)).toBe(true)
  })

  it('rejects invalid parameters', () => {
    expectConfigError(() => new IclMarkovTask({ vocabSize: 1 }), 'vocabSize')
    expectConfigError(() => new IclMarkovTask({ vocabSize: 20, order: 4 }), 'order', /65536/)
    expectConfigError(() => new IclMarkovTask({ alpha: 0 }), 'alpha', /must be in \(0, 1000\], got 0$/)
    expectConfigError(() => new IclMarkovTask({ order: 3, seqLength: 3 }), 'seqLength', /\[4, 65536\]/)
  })
})

describe('createTask', () => {
  it('rebuilds every task kind from its JSON description', () => {
    const tasks = [
      createTask({ kind: 'sparse-markov', vocabSize: 5, spans: [1, 2] }),
      createTask({ kind: 'linear-map', stateSize: 6, onesPerRow: 2, matrixSeed: 4 }),
      createTask({ kind: 'cellular-automaton', cells: 5, rules: [30, 90] }),
      createTask({ kind: 'icl-markov', vocabSize: 3, order: 2, seqLength: 20 }),
      createTask('linear-map'),
    ]
    for (const task of tasks) {
      const rebuilt = createTask(JSON.parse(JSON.stringify(task.describe())) as Record<string, unknown>)
      expect(rebuilt.kind).toBe(task.kind)
      expect(rebuilt.describe()).toEqual(task.describe())
      expect(Array.from(rebuilt.sample(4, Rng.fromSeed(7)).tokens)).toEqual(
        Array.from(task.sample(4, Rng.fromSeed(7)).tokens),
      )
    }
  })

  it('rejects unknown kinds and non-descriptions', () => {
    expectConfigError(() => createTask('markov' as never), 'kind', /sparse-markov, linear-map/)
    expectConfigError(() => createTask({ spans: [1] } as never), 'kind')
    expectConfigError(() => createTask(42 as never), 'kind')
    expectConfigError(() => createTask({ kind: 'linear-map', stateSize: 0 }), 'stateSize')
    expect(() => createTask('sparse-markof' as never)).toThrow(/did you mean 'sparse-markov'/)
  })

  it('resolves through the core task registry, where registerMarkovTasks puts the four families', () => {
    expect(MARKOV_TASK_FAMILIES.map((family) => family.kind)).toEqual([...TASK_KINDS])
    const registry = registerMarkovTasks(new TaskRegistry())
    expect(registry.kinds()).toEqual([...TASK_KINDS])
    expect(registerMarkovTasks(registry)).toBe(registry) // idempotent
    const description = { kind: 'icl-markov', vocabSize: 3, order: 1, seqLength: 12 }
    expect(registry.create(description).describe()).toEqual(createTask(description).describe())
    createTask('linear-map')
    for (const kind of TASK_KINDS) expect(taskRegistry.has(kind)).toBe(true)
  })

  it("rejects another package's kind even when it is registered (createTask returns this package's tasks)", () => {
    taskRegistry.register({ kind: 'copy', create: () => createTask('linear-map') })
    expect(taskRegistry.create('copy').kind).toBe('linear-map')
    expect(() => createTask('copy' as never)).toThrow(UnknownTaskKindError)
  })
})

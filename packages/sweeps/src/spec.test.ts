// The sweep spec: parsing (YAML and JSON), every validation error, expansion order, stable ids.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { SweepSpecError, canonicalJson, expandTrials, parseSweepSpec, trialId } from './index.ts'

const TINY = readFileSync(new URL('./__fixtures__/tiny.yaml', import.meta.url), 'utf8')

/** The error parseSweepSpec throws for `text`. */
function specError(text: string, file = 'sweep.yaml'): SweepSpecError {
  try {
    parseSweepSpec(text, file)
  } catch (error) {
    expect(error).toBeInstanceOf(SweepSpecError)
    return error as SweepSpecError
  }
  throw new Error('expected a SweepSpecError')
}

const HEAD = 'name: s\nexperiment: emergence\n'

describe('parseSweepSpec', () => {
  it('reads the tiny spec: defaults under base, grid, seeds as a count', () => {
    const spec = parseSweepSpec(TINY, 'tiny.yaml')
    expect(spec.name).toBe('tiny')
    expect(spec.seeds).toEqual([0, 1])
    expect(spec.grid).toEqual({ 'task.genLen': [4, 6] })
    expect(spec.zip).toEqual([])
    expect(Object.isFrozen(spec.grid)).toBe(true)
  })

  it('reads the same spec as JSON', () => {
    const json = JSON.stringify({
      name: 'tiny',
      experiment: 'emergence',
      base: { task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1], tau: 0.3 } },
      grid: { 'task.genLen': [4, 6] },
      seeds: [3, 5],
    })
    expect(parseSweepSpec(json, 'tiny.json').seeds).toEqual([3, 5])
  })

  it('refuses an unknown key with a did-you-mean', () => {
    const error = specError(`${HEAD}seds: 3\n`)
    expect(error.path).toBe('seds')
    expect(error.message).toBe(
      "sweep.yaml: seds: unknown key (did you mean 'seeds'?); allowed: " +
        'name, description, experiment, base, grid, zip, seeds',
    )
    expect(error.code).toBe('INVALID_CONFIG')
  })

  it('refuses an unknown experiment with a did-you-mean', () => {
    const error = specError('name: s\nexperiment: emergnce\n')
    expect(error.path).toBe('experiment')
    expect(error.message).toContain("'emergnce' is not an experiment (did you mean 'emergence'?)")
  })

  it('refuses wrong types, naming the key and what was expected', () => {
    expect(specError('name: 3\nexperiment: emergence\n').message).toBe(
      'sweep.yaml: name: expected a name of letters, digits, ".", "_" or "-" (at most 100 characters), got 3',
    )
    expect(specError(`${HEAD}grid: [1, 2]\n`).message).toMatch(/^sweep.yaml: grid: expected an object mapping/)
    expect(specError(`${HEAD}grid:\n  task.genLen: 4\n`).message).toBe(
      'sweep.yaml: grid.task.genLen: expected a non-empty list of values, got 4',
    )
    expect(specError('- a\n- b\n').message).toMatch(/^sweep.yaml: expected an object of name, description/)
    expect(specError(`${HEAD}grid: {a: [1}\n`).message).toMatch(/^sweep.yaml: does not parse: /)
  })

  it('names a NaN or Infinity (YAML .nan, .inf) at its own path, not as a malformed parent', () => {
    expect(specError(`${HEAD}base:\n  task: {kind: sparse-markov, tau: .nan}\n`).message).toBe(
      'sweep.yaml: base.task.tau: NaN is not a finite number (settings are JSON values: no NaN or Infinity)',
    )
    expect(specError(`${HEAD}grid:\n  training.lr: [0.1, -.inf]\n`).message).toBe(
      'sweep.yaml: grid.training.lr.1: -Infinity is not a finite number (settings are JSON values: no NaN or Infinity)',
    )
  })

  it('refuses empty grids and empty lists', () => {
    expect(specError(`${HEAD}grid: {}\n`).message).toBe(
      'sweep.yaml: grid: an empty grid; give at least one parameter (or omit grid to sweep seeds)',
    )
    expect(specError(`${HEAD}grid:\n  task.genLen: []\n`).message).toBe(
      'sweep.yaml: grid.task.genLen: an empty list; expected at least one value',
    )
    expect(specError(`${HEAD}grid:\n  task.genLen: [4, 4]\n`).message).toBe(
      'sweep.yaml: grid.task.genLen: lists 4 twice; expected distinct values',
    )
  })

  it('refuses zip lists of unequal length and paths swept twice', () => {
    const error = specError(`${HEAD}zip:\n  training.lr: [0.1, 0.2]\n  training.batchSize: [8]\n`)
    expect(error.path).toBe('zip.training.batchSize')
    expect(error.message).toContain('has 1 values but training.lr has 2')
    expect(specError(`${HEAD}grid:\n  training.lr: [0.1]\nzip:\n  training: [{}]\n`).message).toContain(
      'zip.training: overlaps grid.training.lr',
    )
  })

  it('refuses bad seeds and seeds set anywhere but seeds', () => {
    expect(specError(`${HEAD}seeds: 0\n`).message).toMatch(/^sweep.yaml: seeds: expected a count of seeds .* got 0$/)
    expect(specError(`${HEAD}seeds: [1, -2]\n`).path).toBe('seeds.1')
    expect(specError(`${HEAD}seeds: [1, 1]\n`).message).toBe(
      'sweep.yaml: seeds: lists 1 twice; expected distinct values',
    )
    expect(specError(`${HEAD}seeds: two\n`).message).toContain('got the string "two"')
    expect(specError(`${HEAD}grid:\n  seeds: [[1], [2]]\n`).message).toContain("'seeds' is set per trial")
  })

  it("refuses a grid value the experiment's validator refuses, naming the key and value", () => {
    const error = specError(`${HEAD}grid:\n  training.steps: [10, 0]\n`)
    expect(error.path).toBe('grid.training.steps')
    expect(error.message).toBe(
      'sweep.yaml: grid.training.steps: value 0 refused by the emergence experiment (trial 1: training.steps = 0, ' +
        'seed 0): Invalid training.steps: must be an integer >= 1, got 0',
    )
    const typo = specError(`${HEAD}grid:\n  training.stps: [10]\n`)
    expect(typo.message).toContain("(did you mean 'steps'?)")
    expect(specError(`${HEAD}base:\n  training: { lr: -1 }\n`).path).toBe('base')
    // A grid path under a parameter the experiment does not have (train has lr, not training.lr) is the grid's.
    const nested = specError('name: s\nexperiment: train\ngrid:\n  training.lr: [0.1]\n')
    expect(nested.path).toBe('grid.training.lr')
    expect(nested.message).toMatch(/^sweep.yaml: grid.training.lr: value 0.1 refused by the train experiment/)
  })

  it('a YAML syntax error is one line ending in its position, not a dangling colon', () => {
    const message = specError('this: is: not: [yaml\n').message
    expect(message).toMatch(/^sweep.yaml: does not parse: .* at line 1, column \d+$/)
    // JSON.parse quotes the text around the error, line breaks included: kept, escaped, on one line.
    const json = specError('name: s\nexperiment: emergence\n', 'sweep.json').message
    expect(json).toMatch(/^sweep.json: does not parse: Unexpected token .*"name: s\\n.* is not valid JSON$/)
    expect(json).not.toContain('\n')
  })
})

describe('expandTrials', () => {
  it('expands grid x zip x seeds in the documented order', async () => {
    const spec = parseSweepSpec(
      `${HEAD}base:\n  task: { kind: sparse-markov, vocabSize: 8, spans: [1, 1] }\n` +
        'grid:\n  task.genLen: [4, 6]\n  task.tau: [0.3, 0.5]\n' +
        'zip:\n  training.lr: [0.05, 0.1]\n  training.batchSize: [8, 16]\nseeds: [7, 9]\n',
      'order.yaml',
    )
    const trials = await expandTrials(spec)
    expect(trials).toHaveLength(16)
    const row = (i: number): string => {
      const t = trials[i]
      return t === undefined ? '' : `${canonicalJson(t.params)} ${t.seed}`
    }
    expect(row(0)).toBe('{"task.genLen":4,"task.tau":0.3,"training.batchSize":8,"training.lr":0.05} 7')
    expect(row(1)).toBe('{"task.genLen":4,"task.tau":0.3,"training.batchSize":8,"training.lr":0.05} 9')
    expect(row(2)).toBe('{"task.genLen":4,"task.tau":0.3,"training.batchSize":16,"training.lr":0.1} 7')
    expect(row(4)).toBe('{"task.genLen":4,"task.tau":0.5,"training.batchSize":8,"training.lr":0.05} 7')
    expect(row(8)).toBe('{"task.genLen":6,"task.tau":0.3,"training.batchSize":8,"training.lr":0.05} 7')
    expect(trials.map((t) => t.index)).toEqual([...Array(16).keys()])
    expect(new Set(trials.map((t) => t.id)).size).toBe(16)
    const first = trials[0]
    expect(first?.settings).toMatchObject({
      task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1], genLen: 4, tau: 0.3, m: 1.5 },
      training: { lr: 0.05, batchSize: 8, steps: 1500 },
      seeds: [7],
    })
  })

  it('gives stable ids: a golden id, the same for the same settings in any sweep', async () => {
    const trials = await expandTrials(parseSweepSpec(TINY, 'tiny.yaml'))
    expect(trials.map((t) => t.id)).toEqual(GOLDEN_IDS)
    // Renamed, reordered and with other seeds, the shared trial keeps its id.
    const other = parseSweepSpec(TINY.replace('name: tiny', 'name: other').replace('[4, 6]', '[6, 4]'), 'o.yaml')
    const again = await expandTrials(other)
    expect(again.find((t) => t.seed === 0 && t.params['task.genLen'] === 4)?.id).toBe(GOLDEN_IDS[0])
    expect(await trialId(trials[0] as (typeof trials)[number])).toBe(GOLDEN_IDS[0])
  })

  it('leaves null settings out of the id (null means none, like an absent optional setting)', async () => {
    const plain = await trialId({ experiment: 'emergence', settings: { a: 1, b: { c: [null, 2] } } })
    const withNulls = { a: 1, b: { c: [null, 2], d: null }, e: null }
    expect(await trialId({ experiment: 'emergence', settings: withNulls })).toBe(plain)
    // A null list entry is data, not an absent setting.
    expect(await trialId({ experiment: 'emergence', settings: { a: 1, b: { c: [2] } } })).not.toBe(plain)
  })

  it('hashes the canonical JSON it documents (checked against Python hashlib)', async () => {
    // python3: hashlib.sha256(b'{"experiment":"emergence","format":"attnlab-sweep-trial/1",'
    //   b'"settings":{"a":"x","b":[1,{"c":1,"d":2.5}]}}').hexdigest()[:16]
    expect(await trialId({ experiment: 'emergence', settings: { b: [1, { d: 2.5, c: 1 }], a: 'x' } })).toBe(
      'c36625b1b0dc3c40',
    )
  })
})

// The ids of the tiny spec's 4 trials (pinned: a change means every existing sweep directory's
// trials would be run again).
const GOLDEN_IDS: readonly string[] = ['0815ebc5dfd6d420', '5cadb8c2f871cff9', '4cc1b52339c75f01', '4033bfd43bbacfbd']

// Fuzz tests of the text formats that came last: sweep specs (YAML and JSON, as `attnlab sweep run`
// reads them) and Hugging Face tokenizer.json files (as loadTokenizer reads them). Every field replaced
// by a hostile value, bytes cut, flipped or made non-UTF-8: the input is accepted (a spec expands to
// its trials; a tokenizer encodes and decodes), or one typed error on one line names the file. Through
// the CLI, a bad spec is a usage error (exit 2) that creates no --out.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { AttnlabError } from '@attnlab/core'
import {
  expectAcceptedOrRejected,
  fuzzSettings,
  HOSTILE_JSON_VALUES,
  jsonPaths,
  mutateBytes,
  withJsonValue,
  type ByteMutation,
} from '@attnlab/core/testing'
import { expandTrials, parseSweepSpec } from '@attnlab/sweeps'
import { loadTokenizer } from '@attnlab/transformer/io'
import fc from 'fast-check'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { runCli, useTempDir } from './cli.test-utils.ts'

const here = dirname(fileURLToPath(import.meta.url))
const SPEC = resolve(here, '../../../examples/sweeps/emergence-genlen.yaml')
const TOKENIZER = resolve(here, '../../../../shared/models/tinystories656K/tokenizer.json')
const HAVE_TOKENIZER = existsSync(TOKENIZER)
if (!HAVE_TOKENIZER) console.warn(`[attnlab] ${TOKENIZER} is absent: the tokenizer.json fuzz is skipped`)

const dir = useTempDir('attnlab-specs-fuzz-')
const tried = new Map<string, number>()
const count = (kind: string): void => void tried.set(kind, (tried.get(kind) ?? 0) + 1)
afterEach(() => {
  vi.restoreAllMocks()
})
afterAll(() => console.info(`spec fuzz, inputs tried: ${[...tried].map(([k, v]) => `${k} ${v}`).join(', ')}`))

const bytesMutation = (length: number): fc.Arbitrary<ByteMutation> =>
  fc.oneof(
    fc.record({ kind: fc.constant('truncate' as const), length: fc.nat({ max: length - 1 }) }),
    fc.record({ kind: fc.constant('flip' as const), bit: fc.nat({ max: 8 * length - 1 }) }),
    fc.record({
      kind: fc.constant('write' as const),
      offset: fc.nat({ max: length - 1 }),
      bytes: fc.constantFrom(Uint8Array.of(0xff), Uint8Array.of(0xc3), Uint8Array.of(0x0a), Uint8Array.of(0x7b)),
    }),
  )

/** Parses a spec file as the CLI does and expands it (no hang, no table sized by a hostile value). */
async function parseAndExpand(text: string, file: string): Promise<void> {
  const spec = parseSweepSpec(text, file)
  const trials = await expandTrials(spec)
  expect(trials.length).toBeGreaterThan(0)
}

/**
 * Every number of a train, an emergence and a sparse-eval spec given NaN, Infinity, -1, 0, 1e300 and a word (as
 * YAML): a usage error (exit 2, one line naming the spec) before any trial runs and before --out exists, unless
 * the field takes the value on purpose (a spec that still expands, listed here with why; it is not run).
 */
describe('every number of a spec refuses NaN, Infinity, -1, 0, 1e300 and a word (exit 2, nothing created)', () => {
  const HOSTILE_YAML = { NaN: '.nan', Infinity: '.inf', '-1': '-1', '0': '0', '1e300': '1e300', many: 'many' } as const
  type Hostile = keyof typeof HOSTILE_YAML
  const ACCEPTED: Readonly<Record<string, readonly Hostile[]>> = {
    // A train trial with checkpointEvery 0 checkpoints only at the end, with evalEvery 0 evaluates only at the end
    // (as `attnlab train --checkpoint-every 0 --eval-every 0`).
    'train base.checkpointEvery': ['0'],
    'train base.evalEvery': ['0'],
    // 0 turns the feature off (as the flags' 0): online training, no weight decay, no momentum, no warmup; Adam's
    // betas are in [0, 1) (PyTorch's range; 0 keeps no running average).
    'train base.trainSize': ['0'],
    'train base.optimizer.weightDecay': ['0'],
    'train base.optimizer.beta1': ['0'],
    'train base.optimizer.beta2': ['0'],
    'train base.schedule.warmupSteps': ['0'],
    'emergence base.training.trainSize': ['0'],
    'emergence base.training.optimizer.momentum': ['0'],
    'emergence base.training.optimizer.weightDecay': ['0'],
    'emergence base.training.schedule.warmupSteps': ['0'],
    // A target sparsity of 0 is the dense baseline (as `sparse compare --sparsity 0`).
    'sparse-eval grid.sparsities.0.0': ['0'],
  }
  const SPECS: Record<string, unknown> = {
    train: {
      name: 'hostile-train',
      experiment: 'train',
      base: {
        task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 },
        steps: 3,
        batchSize: 8,
        validationSize: 16,
        trainSize: 32,
        gradClip: 1,
        optimizer: { kind: 'adamw', weightDecay: 0.01, beta1: 0.9, beta2: 0.99 },
        schedule: { kind: 'warmup-cosine', warmupSteps: 1 },
        evalEvery: 1,
        checkpointEvery: 1,
      },
      grid: { lr: [0.05, 0.1] },
      seeds: 2,
    },
    emergence: {
      name: 'hostile-emergence',
      experiment: 'emergence',
      base: {
        task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1], tau: 0.3 },
        training: {
          steps: 3,
          batchSize: 8,
          lr: 0.05,
          validationSize: 16,
          analysisSize: 8,
          evalEvery: 1,
          trainSize: 32,
          gradClip: 1,
          optimizer: { kind: 'sgd', momentum: 0.9, weightDecay: 0.01 },
          schedule: { kind: 'warmup-cosine', warmupSteps: 1 },
        },
      },
      grid: { 'task.genLen': [4, 8] },
      seeds: 2,
    },
    // The model is read when a trial runs (never here: every value below is refused before).
    'sparse-eval': {
      name: 'hostile-sparse-eval',
      experiment: 'sparse-eval',
      base: {
        model: '/nonexistent/attnlab-specs-fuzz-model',
        task: { kind: 'niah-tokens', needles: 4 },
        lengths: [64],
        samples: 2,
      },
      grid: { sparsities: [[0.5]] },
    },
  }
  const numericPaths = (value: unknown): (string | number)[][] =>
    jsonPaths(value).filter((path) => {
      let node: unknown = value
      for (const key of path) node = (node as Record<string | number, unknown>)[key]
      return typeof node === 'number'
    })
  let refused = 0
  let accepted = 0
  afterAll(() => console.info(`spec values: ${refused} refused with exit 2, ${accepted} accepted by design`))

  for (const [experiment, spec] of Object.entries(SPECS)) {
    it(`${experiment} spec: every number x {NaN, Infinity, -1, 0, 1e300, a word}`, async () => {
      const gaps: string[] = []
      // The spec itself is valid: each refusal below is the hostile value's.
      await parseAndExpand(JSON.stringify(spec), join(dir(), `${experiment}.yaml`))
      for (const path of numericPaths(spec)) {
        const name = path.join('.')
        for (const hostile of Object.keys(HOSTILE_YAML) as Hostile[]) {
          count(`${experiment} spec values`)
          // JSON is YAML: the marker is swapped for the YAML spelling of the value (NaN and Infinity have no JSON).
          const text = (JSON.stringify(withJsonValue(spec, path, '@@HOSTILE@@')) as string).replace(
            '"@@HOSTILE@@"',
            HOSTILE_YAML[hostile],
          )
          const file = join(dir(), `${experiment}-${path.join('-')}-${hostile}.yaml`)
          writeFileSync(file, text)
          let expands = true
          try {
            await parseAndExpand(text, file)
          } catch {
            expands = false
          }
          if (expands) {
            if ((ACCEPTED[`${experiment} ${name}`] ?? []).includes(hostile)) accepted++
            else gaps.push(`${experiment} ${name} ${hostile}`)
            continue
          }
          const out = join(dir(), `out-${experiment}-${path.join('-')}-${hostile}`)
          const { code, stderr } = await runCli(['sweep', 'run', file, '--out', out, '--backend', 'cpu'])
          const errors = stderr.split('\n').filter((line) => line.startsWith('attnlab: error'))
          expect(code, `${name} ${hostile}: ${stderr}`).toBe(2)
          expect(errors, `${name} ${hostile}: ${stderr}`).toHaveLength(1)
          expect(errors[0], `${name} ${hostile}`).toContain(file)
          expect(existsSync(out), `${name} ${hostile}: ${out} was created`).toBe(false)
          refused++
        }
      }
      if (gaps.length > 0) console.info(`${experiment} spec values accepted: ${gaps.join('; ')}`)
      expect(gaps.join('; '), 'hostile spec values that expand to trials').toBe('')
    }, 300_000)
  }
})

describe('sweep specs (fuzz)', () => {
  const yaml = readFileSync(SPEC, 'utf8')
  // The example spec as JSON (what its YAML says).
  const value: unknown = {
    name: 'emergence-genlen',
    description: 'first-stage emergence step and final loss against the generated length, 3 seeds',
    experiment: 'emergence',
    base: {
      task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1], tau: 0.3 },
      training: { steps: 150, batchSize: 64, lr: 0.08, validationSize: 128, analysisSize: 64, evalEvery: 5 },
    },
    grid: { 'task.genLen': [4, 8, 16] },
    seeds: 3,
  }
  const paths = jsonPaths(value)

  it('hostile values in any field (as JSON): expanded, or one SweepSpecError naming the file', async () => {
    const file = join(dir(), 'spec.json')
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: paths.length - 1 }),
        fc.constantFrom(...HOSTILE_JSON_VALUES, 1e6, 2 ** 31, [1, 1], 'train', 'emergence', { 'task.genLen': [] }),
        async (index, replacement) => {
          count('sweep spec fields')
          // A removed root is an empty file.
          const text = JSON.stringify(withJsonValue(value, paths[index] as (string | number)[], replacement)) ?? ''
          // Choosing an experiment loads its module: allow that, not a table sized by a hostile value.
          await expectAcceptedOrRejected(() => parseAndExpand(text, file), {
            file,
            inputBytes: text.length,
            maxAllocation: 16 * 2 ** 20,
          })
        },
      ),
      fuzzSettings(300),
    )
  })

  it('YAML byte corruptions: accepted and expanded, or one SweepSpecError naming the file', async () => {
    const file = join(dir(), 'spec.yaml')
    const bytes = new TextEncoder().encode(yaml)
    await fc.assert(
      fc.asyncProperty(bytesMutation(bytes.byteLength), async (m) => {
        count('sweep spec bytes')
        const text = new TextDecoder().decode(mutateBytes(bytes, m))
        await expectAcceptedOrRejected(() => parseAndExpand(text, file), { file, inputBytes: text.length })
      }),
      fuzzSettings(300),
    )
  })

  it('through the CLI: a corrupt spec is exit 2 with one line naming it, and no --out is created', async () => {
    const bytes = new TextEncoder().encode(yaml)
    await fc.assert(
      fc.asyncProperty(bytesMutation(bytes.byteLength), fc.nat(), async (m, id) => {
        const text = new TextDecoder().decode(mutateBytes(bytes, m))
        const file = join(dir(), `cli-${id}.yaml`)
        writeFileSync(file, text)
        let valid = true
        try {
          await parseAndExpand(text, file)
        } catch {
          valid = false
        }
        if (valid) return // a corruption that is still a valid spec would run its trials
        count('sweep run (CLI)')
        const out = join(dir(), `cli-out-${id}`)
        const { code, stderr } = await runCli(['sweep', 'run', file, '--out', out, '--backend', 'cpu'])
        const errors = stderr.split('\n').filter((line) => line.startsWith('attnlab: error'))
        expect(code, stderr).toBe(2)
        expect(errors, stderr).toHaveLength(1)
        expect(errors[0], stderr).toContain(file)
        expect(existsSync(out), `${out} was created`).toBe(false)
      }),
      fuzzSettings(60),
    )
  })
})

describe.skipIf(!HAVE_TOKENIZER)('tokenizer.json (fuzz)', () => {
  const text = HAVE_TOKENIZER ? readFileSync(TOKENIZER, 'utf8') : '{}'
  const json = JSON.parse(text) as Record<string, unknown>
  // The vocabulary and merges hold thousands of entries: fuzz their first five and every other field.
  const model = (json.model ?? {}) as { vocab?: Record<string, number> }
  const firstWords = new Set(Object.keys(model.vocab ?? {}).slice(0, 5))
  const paths = jsonPaths(json).filter((path) => {
    const [top, second, third] = path
    if (top !== 'model' || third === undefined) return true
    if (second === 'merges') return typeof third === 'number' && third < 5
    if (second === 'vocab') return firstWords.has(String(third))
    return true
  })
  const folder = (): string => join(dir(), 'tokenizer')
  const file = (): string => join(folder(), 'tokenizer.json')

  async function load(bytes: Uint8Array): Promise<void> {
    writeFileSync(file(), bytes)
    await expectAcceptedOrRejected(
      async () => {
        const tokenizer = await loadTokenizer(file())
        try {
          tokenizer.decode(tokenizer.encode('Once upon a time, a cat sat.'))
        } catch (error) {
          // A vocabulary that cannot spell the text is refused for the text: typed, one line.
          if (!(error instanceof AttnlabError)) throw error
          expect(error.message).not.toContain('\n')
        }
      },
      { file: file(), inputBytes: bytes.byteLength },
    )
  }

  it('hostile values in any field: loads (and encodes) or one typed error naming the file', async () => {
    mkdirSync(folder(), { recursive: true })
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: paths.length - 1 }),
        fc.constantFrom(...HOSTILE_JSON_VALUES, 'BPE', 'WordPiece', 'Unigram', 'Sequence', 'ByteLevel'),
        async (index, replacement) => {
          count('tokenizer.json fields')
          const edited = withJsonValue(json, paths[index] as (string | number)[], replacement)
          await load(new TextEncoder().encode(JSON.stringify(edited)))
        },
      ),
      // Each load builds the real 2048-token tokenizer (seconds on a loaded machine): a small CI budget.
      fuzzSettings(8),
    )
  })

  it('byte corruptions (cut, flipped, non-UTF-8): loads or one typed error naming the file', async () => {
    mkdirSync(folder(), { recursive: true })
    const bytes = new TextEncoder().encode(text)
    await fc.assert(
      fc.asyncProperty(bytesMutation(bytes.byteLength), async (m) => {
        count('tokenizer.json bytes')
        await load(mutateBytes(bytes, m))
      }),
      fuzzSettings(100),
    )
  })
})

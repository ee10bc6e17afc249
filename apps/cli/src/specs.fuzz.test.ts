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

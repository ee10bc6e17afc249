// Fuzz tests of an emergence run directory being resumed (what `attnlab emergence --resume DIR` does):
// config.json with hostile values in every field, byte corruptions of config.json and metrics.jsonl.
// Reading, resolving and checking the record either accepts it, or gives one typed error naming the
// directory; an accepted record then resumes (or is refused with a typed error), never a TypeError.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { AttnlabError, useBackend } from '@attnlab/core'
import {
  expectAcceptedOrRejected,
  fuzzSettings,
  HOSTILE_JSON_VALUES,
  jsonPaths,
  mutateBytes,
  withJsonValue,
  type ByteMutation,
} from '@attnlab/core/testing'
import * as tf from '@tensorflow/tfjs-core'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defaultEmergenceConfig, resolveEmergenceRecord, runEmergence, type EmergenceConfig } from '../index.ts'
import { checkResumable, emergenceDirectoryStore, readEmergenceRecord } from '../node.ts'

const TINY: EmergenceConfig = {
  task: { kind: 'sparse-markov', vocabSize: 6, spans: [1, 1], genLen: 4, tau: 0.3 },
  preset: 'minimal',
  model: {},
  training: {
    ...defaultEmergenceConfig().training,
    steps: 2,
    batchSize: 4,
    validationSize: 8,
    analysisSize: 4,
    evalEvery: 1,
  },
  seeds: [0],
}

const root = mkdtempSync(join(tmpdir(), 'attnlab-emergence-fuzz-'))
const good = join(root, 'good')
const dir = join(root, 'fuzzed')
const tried = new Map<string, number>()
let config: Uint8Array
let metrics: Uint8Array

beforeAll(async () => {
  await useBackend('cpu')
  await runEmergence(TINY, { store: emergenceDirectoryStore(good, { prepare: async () => mkdirSync(good) }) })
  config = new Uint8Array(readFileSync(join(good, 'config.json')))
  metrics = new Uint8Array(readFileSync(join(good, 'metrics.jsonl')))
})
afterAll(() => {
  rmSync(root, { recursive: true, force: true })
  console.info(`emergence run directory fuzz, inputs tried: ${[...tried].map(([k, v]) => `${k} ${v}`).join(', ')}`)
})

/** Resumes the fuzzed directory up to 3 steps, as the CLI does: read, resolve, check, run. */
async function resume(): Promise<void> {
  const record = resolveEmergenceRecord(await readEmergenceRecord(dir), { steps: 3 })
  await checkResumable(dir, record.record)
  try {
    await runEmergence(record, { store: emergenceDirectoryStore(dir), resume: true })
  } catch (error) {
    // A record that reads but cannot run is refused by the experiment: typed and on one line.
    if (!(error instanceof AttnlabError)) throw error
    expect(error.message).not.toContain('\n')
  }
}

async function check(kind: string, name: string, bytes: Uint8Array): Promise<void> {
  tried.set(kind, (tried.get(kind) ?? 0) + 1)
  rmSync(dir, { recursive: true, force: true })
  cpSync(good, dir, { recursive: true })
  writeFileSync(join(dir, name), bytes)
  const before = tf.memory().numTensors
  await expectAcceptedOrRejected(resume, { file: dir, inputBytes: bytes.byteLength })
  expect(tf.memory().numTensors, 'no tensors left by a resume').toBe(before)
}

const mutation: (length: number) => fc.Arbitrary<ByteMutation> = (length) =>
  fc.oneof(
    fc.record({ kind: fc.constant('truncate' as const), length: fc.nat({ max: length - 1 }) }),
    fc.record({ kind: fc.constant('flip' as const), bit: fc.nat({ max: 8 * length - 1 }) }),
    fc.record({
      kind: fc.constant('write' as const),
      offset: fc.nat({ max: length - 1 }),
      bytes: fc.constantFrom(Uint8Array.of(0xff), Uint8Array.of(0x0a), Uint8Array.of(0x7d, 0x7b), Uint8Array.of(0)),
    }),
  )

describe('emergence run directories under corruption (fuzz)', () => {
  it('config.json with hostile values in any field: resumes or one typed error naming the directory', async () => {
    const json = JSON.parse(new TextDecoder().decode(config)) as unknown
    const paths = jsonPaths(json)
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: paths.length - 1 }),
        fc.constantFrom(...HOSTILE_JSON_VALUES, 'attnlab-emergence/1', 'sparse-markov', 'gpt', 'cpu', 1e6),
        async (index, value) => {
          const edited = withJsonValue(json, paths[index] as (string | number)[], value)
          await check('config.json fields', 'config.json', new TextEncoder().encode(JSON.stringify(edited)))
        },
      ),
      fuzzSettings(100),
    )
  })

  it('config.json and metrics.jsonl byte corruptions: resumes or one typed error naming the directory', async () => {
    await fc.assert(
      fc.asyncProperty(fc.boolean(), mutation(1 << 16), async (onConfig, m) => {
        const bytes = onConfig ? config : metrics
        // Offsets are drawn for a long file and wrap into this one (mutateBytes); a cut is folded in too.
        const folded: ByteMutation = m.kind === 'truncate' ? { ...m, length: m.length % bytes.byteLength } : m
        const name = onConfig ? 'config.json' : 'metrics.jsonl'
        await check(`${name} bytes`, name, mutateBytes(bytes, folded))
      }),
      fuzzSettings(30),
    )
  })
})

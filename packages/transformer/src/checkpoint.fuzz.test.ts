// Fuzz tests of attnlab checkpoints (loadCheckpoint, then a resume from what it accepts). Byte
// corruptions of any file are caught by the manifest's sizes and SHA-256; to reach the readers behind
// them, JSON fields (manifest.json, config.json, trainer.json) get hostile values and the safetensors
// files get corruptions with the manifest rewritten to match. Every input either loads (and resumes,
// or is refused by the trainer with a typed error) or gives one CheckpointError naming the file.
import { createHash } from 'node:crypto'
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { AttnlabError, useBackend } from '@attnlab/core'
import {
  expectAcceptedOrRejected,
  fuzzSettings,
  HOSTILE_INTEGERS,
  HOSTILE_JSON_VALUES,
  jsonPaths,
  mutateBytes,
  withJsonValue,
  type ByteMutation,
} from '@attnlab/core/testing'
import { SparseMarkovTask } from '@attnlab/markov'
import * as tf from '@tensorflow/tfjs-core'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CheckpointError, loadCheckpoint, saveCheckpoint } from './checkpoint.ts'
import { createConfig } from './config.ts'
import { createTransformer } from './model.ts'
import { train, type TrainerState } from './train.ts'

const task = new SparseMarkovTask({ vocabSize: 6, spans: [1, 1], genLen: 4, tau: 0.3 })
const config = createConfig({
  architecture: 'gpt',
  dVocab: 6,
  nCtx: 5,
  dModel: 8,
  nLayers: 1,
  nHeads: 2,
  dHead: 4,
  dMlp: 8,
})
const options = { steps: 3, batchSize: 4, lr: 0.01, validation: 4, analysis: false as const, seed: 5 }
const root = mkdtempSync(join(tmpdir(), 'attnlab-checkpoint-fuzz-'))
const good = join(root, 'good')
const dir = join(root, 'fuzzed')
const tried = new Map<string, number>()
let files: Map<string, Uint8Array>

beforeAll(async () => {
  await useBackend('cpu')
  const model = createTransformer(config)
  let state: TrainerState | undefined
  await train(model, task, {
    ...options,
    steps: 2,
    onCheckpoint: (s) => {
      state = s
    },
  })
  await saveCheckpoint(good, model, state, { note: 'fuzz' })
  model.dispose()
  files = new Map(
    ['manifest.json', 'config.json', 'model.safetensors', 'optimizer.safetensors', 'trainer.json'].map((name) => [
      name,
      new Uint8Array(readFileSync(join(good, name))),
    ]),
  )
})
afterAll(() => {
  rmSync(root, { recursive: true, force: true })
  console.info(`checkpoint fuzz, inputs tried: ${[...tried].map(([k, v]) => `${k} ${v}`).join(', ')}`)
})

/** Writes `good` with `name` replaced by `bytes`; `consistent` rewrites the manifest's entry to match. */
function writeVariant(name: string, bytes: Uint8Array, consistent: boolean): void {
  rmSync(dir, { recursive: true, force: true })
  cpSync(good, dir, { recursive: true })
  writeFileSync(join(dir, name), bytes)
  if (consistent && name !== 'manifest.json') {
    const manifest = JSON.parse(new TextDecoder().decode(files.get('manifest.json'))) as {
      files: Record<string, unknown>
    }
    manifest.files[name] = { sha256: createHash('sha256').update(bytes).digest('hex'), bytes: bytes.byteLength }
    writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest))
  }
}

/** Loads the variant; when accepted, resumes training from it (a typed refusal by the trainer is fine). */
async function loadAndResume(): Promise<void> {
  const loaded = await loadCheckpoint(dir)
  const model = createTransformer(loaded.config)
  try {
    model.setWeights(loaded.weights)
    if (loaded.trainerState !== null) {
      try {
        await train(model, task, { ...options, resume: loaded.trainerState })
      } catch (error) {
        // The trainer's own refusal of a state that loads but does not fit this run: typed, one line.
        if (!(error instanceof AttnlabError)) throw error
        expect(error.message).not.toContain('\n')
      }
    }
  } finally {
    model.dispose()
  }
}

async function check(kind: string, name: string, bytes: Uint8Array, consistent: boolean, mustReject = false) {
  tried.set(kind, (tried.get(kind) ?? 0) + 1)
  writeVariant(name, bytes, consistent)
  const before = tf.memory().numTensors
  const outcome = await expectAcceptedOrRejected(loadAndResume, {
    // A manifest that no longer matches a file is reported for that file; weights that no longer fit
    // config.json, for the weights file ("tensor 'embed.W_E' has shape [6,8] but the configuration implies [64,8]").
    file: name === 'manifest.json' ? [...files.keys()] : name === 'config.json' ? [name, ...SAFETENSORS] : name,
    inputBytes: bytes.byteLength,
    mustReject,
  })
  if (outcome.error !== undefined) expect(outcome.error).toBeInstanceOf(CheckpointError)
  expect(tf.memory().numTensors, 'no tensors left by a load').toBe(before)
}

const SAFETENSORS = ['model.safetensors', 'optimizer.safetensors']
const encode = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value))

describe('attnlab checkpoints under corruption (fuzz)', () => {
  it('the valid checkpoint loads and resumes', async () => {
    await check('valid', 'config.json', files.get('config.json') as Uint8Array, true)
  })

  it('any byte corruption of any file is rejected by the manifest (sizes, SHA-256) or parsed', async () => {
    const names = [...files.keys()]
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...names),
        fc.oneof(
          fc.record({ kind: fc.constant('truncate' as const), length: fc.nat({ max: 4000 }) }),
          fc.record({ kind: fc.constant('flip' as const), bit: fc.nat({ max: 32000 }) }),
          fc.record({ kind: fc.constant('append' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 4 }) }),
        ) as fc.Arbitrary<ByteMutation>,
        async (name, m) => {
          const bytes = mutateBytes(files.get(name) as Uint8Array, m)
          const changed = bytes.byteLength !== (files.get(name) as Uint8Array).byteLength || m.kind === 'flip'
          // Only manifest.json itself is unprotected: a flip in its whitespace may still parse.
          await check('byte corruption', name, bytes, false, changed && name !== 'manifest.json')
        },
      ),
      fuzzSettings(80),
    )
  })

  it('hostile values in every JSON field (manifest rewritten to match): loads or one CheckpointError', async () => {
    const jsonFiles = ['manifest.json', 'config.json', 'trainer.json'].map((name) => {
      const value = JSON.parse(new TextDecoder().decode(files.get(name))) as unknown
      return { name, value, paths: jsonPaths(value) }
    })
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: jsonFiles.length - 1 }),
        fc.nat(),
        fc.constantFrom(...HOSTILE_JSON_VALUES, 'adamw', 'sgd', 'attnlab-checkpoint/1', 'F32'),
        async (which, pathIndex, value) => {
          const { name, value: json, paths } = jsonFiles[which] as (typeof jsonFiles)[number]
          const path = paths[pathIndex % paths.length] as (string | number)[]
          await check(`${name} fields`, name, encode(withJsonValue(json, path, value)), true)
        },
      ),
      fuzzSettings(200),
    )
  })

  it('corrupt safetensors with a matching manifest: one CheckpointError naming the file', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('model.safetensors', 'optimizer.safetensors'),
        fc.oneof(
          fc.record({ kind: fc.constant('truncate' as const), length: fc.nat({ max: 3000 }) }),
          fc.record({ kind: fc.constant('flip' as const), bit: fc.nat({ max: 8 * 600 }) }),
          fc.record({
            kind: fc.constant('integer' as const),
            offset: fc.constant(0),
            width: fc.constant(8 as const),
            value: fc.constantFrom(...HOSTILE_INTEGERS),
          }),
        ) as fc.Arbitrary<ByteMutation>,
        async (name, m) => {
          const bytes = mutateBytes(files.get(name) as Uint8Array, m)
          await check('safetensors (manifest matching)', name, bytes, true, m.kind === 'truncate')
        },
      ),
      fuzzSettings(100),
    )
  })

  it('sizes claimed far beyond the files are refused before anything of that size is allocated', async () => {
    // Every number of config.json (dimensions, vocabulary, context; weights that no longer fit are refused), the
    // safetensors length words, and the manifest's byte counts, with a manifest that matches.
    const config = JSON.parse(new TextDecoder().decode(files.get('config.json'))) as Record<string, unknown>
    for (const [key, value] of Object.entries(config)) {
      if (typeof value !== 'number') continue
      for (const claim of [2 ** 14, 2 ** 20, 2 ** 24]) {
        await check('claimed sizes', 'config.json', encode({ ...config, [key]: claim }), true)
      }
    }
    for (const name of SAFETENSORS) {
      for (const claim of [2 ** 20, 2 ** 26, 99_999_999]) {
        const bytes = (files.get(name) as Uint8Array).slice()
        new DataView(bytes.buffer).setBigUint64(0, BigInt(claim), true)
        await check('claimed sizes', name, bytes, true, true)
      }
    }
    const manifest = JSON.parse(new TextDecoder().decode(files.get('manifest.json'))) as {
      files: Record<string, { bytes: number }>
    }
    for (const name of Object.keys(manifest.files)) {
      for (const claim of [2 ** 30, 2 ** 40]) {
        const claimed = { ...manifest, files: { ...manifest.files, [name]: { ...manifest.files[name], bytes: claim } } }
        await check('claimed sizes', 'manifest.json', encode(claimed), false, true)
      }
    }
  })

  it('non-UTF-8 and non-JSON JSON files: one CheckpointError naming the file', async () => {
    for (const name of ['manifest.json', 'config.json', 'trainer.json']) {
      for (const raw of [[0xff, 0xfe], [0x7b], [0x6e, 0x75, 0x6c, 0x6c], [0x5b, 0x5d], [0x31], [0x22, 0x22]]) {
        await check('non-JSON', name, new Uint8Array(raw), true, true)
      }
    }
  })
})

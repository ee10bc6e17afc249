// Fuzz tests of the model-file readers as users call them (paths on disk): llama2.c version 0 and 1,
// tokenizer.bin, Hugging Face directories (config.json, model.safetensors). Every corruption either
// still loads or gives one typed error naming the file; never a crash, a hang, or an allocation sized
// from a header's claims. ATTNLAB_FUZZ_SCALE multiplies the budgets (pnpm bench).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
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
import * as tf from '@tensorflow/tfjs-core'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { randomWeights } from '../__fixtures__/import/weights.ts'
import { createConfig } from '../config.ts'
import { readLlama2cFile, saveModelDirectory } from './files.ts'
import { rotateHalfToInterleaved } from './layout.ts'
import { llamaToHuggingFace } from './llama-weights.ts'
import { LLAMA2C_MAGIC, serializeLlama2cCheckpoint } from './llama2c.ts'
import { loadModel, loadTokenizer } from './load.ts'
import { Llama2cTokenizer } from './tokenizer.ts'

const root = mkdtempSync(join(tmpdir(), 'attnlab-import-fuzz-'))
const tried = new Map<string, number>()
beforeAll(async () => {
  await useBackend('cpu')
})
afterAll(() => {
  rmSync(root, { recursive: true, force: true })
  console.info(`import fuzz, inputs tried: ${[...tried].map(([k, v]) => `${k} ${v}`).join(', ')}`)
})

const config = createConfig({
  architecture: 'llama',
  dVocab: 12,
  nCtx: 6,
  dModel: 8,
  nLayers: 2,
  nHeads: 2,
  nKvHeads: 1,
  dMlp: 12,
  tiedEmbeddings: false,
})
const weights = randomWeights(config, 3)

/** A version 1 file, written here independently of the library (which writes version 0 only). */
function version1(): Uint8Array {
  const hf = llamaToHuggingFace(config, weights)
  const get = (name: string): Float32Array => (hf.get(name) as { data: Float32Array }).data
  const parts: Float32Array[] = []
  const layers = (suffix: string, f: (d: Float32Array) => Float32Array = (d) => d): void => {
    for (let l = 0; l < config.nLayers; l++) parts.push(f(get(`model.layers.${l}.${suffix}`)))
  }
  layers('input_layernorm.weight')
  layers('post_attention_layernorm.weight')
  parts.push(get('model.norm.weight'), get('model.embed_tokens.weight'))
  layers('self_attn.q_proj.weight', (d) => rotateHalfToInterleaved(d, config.nHeads, config.dHead, config.dModel))
  layers('self_attn.k_proj.weight', (d) => rotateHalfToInterleaved(d, config.nKvHeads, config.dHead, config.dModel))
  for (const suffix of ['self_attn.v_proj', 'self_attn.o_proj', 'mlp.gate_proj', 'mlp.down_proj', 'mlp.up_proj'])
    layers(`${suffix}.weight`)
  parts.push(get('lm_head.weight'))
  const out = new Uint8Array(256 + 4 * parts.reduce((n, p) => n + p.length, 0))
  const view = new DataView(out.buffer)
  view.setUint32(0, LLAMA2C_MAGIC, true)
  view.setInt32(4, 1, true)
  const { dModel, dMlp, nLayers, nHeads, nKvHeads, dVocab, nCtx } = config
  ;[dModel, dMlp, nLayers, nHeads, nKvHeads, dVocab, nCtx].forEach((v, i) => {
    view.setInt32(8 + 4 * i, v, true)
  })
  let offset = 256
  for (const part of parts) {
    new Uint8Array(out.buffer, offset, 4 * part.length).set(
      new Uint8Array(part.buffer, part.byteOffset, 4 * part.length),
    )
    offset += 4 * part.length
  }
  return out
}

/** Region boundaries of a llama2.c file of `config` (header, then each float32 array in file order). */
function llama2cBoundaries(version: 0 | 1): number[] {
  const { dModel: d, dMlp: h, nLayers: L, dVocab: v, nCtx: s, dHead } = config
  const kv = dHead * config.nKvHeads
  const sizes =
    version === 0
      ? [v * d, L * d, L * d * d, L * kv * d, L * kv * d, L * d * d, L * d, L * h * d, L * d * h, L * h * d, d].concat([
          (s * dHead) / 2,
          (s * dHead) / 2,
          v * d,
        ])
      : [L * d, L * d, d, v * d, L * d * d, L * kv * d, L * kv * d, L * d * d, L * h * d, L * d * h, L * h * d, v * d]
  const out = [0, 4, 8, version === 0 ? 28 : 256]
  for (const size of sizes) out.push((out.at(-1) as number) + 4 * size)
  return out
}

/** int32 sizes and counts far beyond any test file: a reader that allocates from its header's claims fails. */
const CLAIMED_SIZES = [2 ** 16, 2 ** 20, 2 ** 24, 2 ** 28, 2 ** 31 - 1]

function byteMutation(length: number, integerOffsets: readonly number[]): fc.Arbitrary<ByteMutation> {
  return fc.oneof(
    fc.record({ kind: fc.constant('truncate' as const), length: fc.nat({ max: length - 1 }) }),
    fc.record({ kind: fc.constant('append' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
    fc.record({ kind: fc.constant('flip' as const), bit: fc.nat({ max: 8 * length - 1 }) }),
    // Flips in the first bytes (headers, sizes), where they matter most.
    fc.record({ kind: fc.constant('flip' as const), bit: fc.nat({ max: 8 * 64 - 1 }) }),
    fc.record({
      kind: fc.constant('write' as const),
      offset: fc.nat({ max: length - 1 }),
      bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
    }),
    fc.record({
      kind: fc.constant('integer' as const),
      offset: fc.constantFrom(...integerOffsets),
      width: fc.constant(4 as const),
      value: fc.constantFrom(...HOSTILE_INTEGERS),
    }),
  )
}

async function check(
  parser: string,
  file: string,
  bytes: Uint8Array,
  load: () => Promise<unknown>,
  mustReject: boolean,
  named = file,
): Promise<void> {
  tried.set(parser, (tried.get(parser) ?? 0) + 1)
  writeFileSync(file, bytes)
  const before = tf.memory().numTensors
  await expectAcceptedOrRejected(load, { file: named, inputBytes: bytes.byteLength, mustReject })
  expect(tf.memory().numTensors, 'no tensors left by a load').toBe(before)
}

/** Reads a llama2.c file and, when it is accepted, builds the model (and disposes it). */
async function loadLlama2c(path: string): Promise<void> {
  const checkpoint = await readLlama2cFile(path)
  expect(checkpoint.config.dVocab).toBeGreaterThan(0)
}

describe('llama2.c checkpoints under corruption (fuzz)', () => {
  for (const version of [0, 1] as const) {
    const valid = version === 0 ? serializeLlama2cCheckpoint(config, weights) : version1()
    const path = join(root, `v${version}.bin`)
    const parser = `llama2.c v${version}`
    const headerInts = version === 0 ? [0, 4, 8, 12, 16, 20, 24] : [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 252]

    it(`version ${version}: the valid file loads, truncation at every region boundary (+-1) is rejected`, async () => {
      await check(parser, path, valid, () => loadLlama2c(path), false)
      for (const boundary of llama2cBoundaries(version)) {
        for (const length of [boundary - 1, boundary, boundary + 1]) {
          if (length >= 0 && length < valid.byteLength)
            await check(parser, path, valid.slice(0, length), () => loadLlama2c(path), true)
        }
      }
    })

    it(`version ${version}: header sizes claiming gigabytes: refused before allocating that much`, async () => {
      for (const offset of headerInts.filter((o) => version === 0 || (o >= 8 && o <= 32))) {
        for (const claim of CLAIMED_SIZES) {
          const bytes = valid.slice()
          new DataView(bytes.buffer).setInt32(offset, claim, true)
          // Version 1 stores no RoPE tables: its seq_len (a maximum) sizes nothing in the file and may be large.
          await check(parser, path, bytes, () => loadLlama2c(path), version === 0 || offset !== 32)
        }
      }
    })

    it(`version ${version}: random corruptions load or give one typed error naming the file`, async () => {
      await fc.assert(
        fc.asyncProperty(byteMutation(valid.byteLength, headerInts), async (m) => {
          const mustReject = m.kind === 'truncate' || m.kind === 'append'
          await check(parser, path, mutateBytes(valid, m), () => loadLlama2c(path), mustReject)
        }),
        fuzzSettings(150),
      )
    })
  }

  it('a model folder: a corrupt model.bin through loadModel builds nothing and names the file', async () => {
    const dir = join(root, 'folder')
    rmSync(dir, { recursive: true, force: true })
    const { mkdirSync } = await import('node:fs')
    mkdirSync(dir)
    const valid = serializeLlama2cCheckpoint(config, weights)
    const path = join(dir, 'model.bin')
    await fc.assert(
      fc.asyncProperty(byteMutation(valid.byteLength, [0, 4, 8, 12, 16, 20, 24]), async (m) => {
        await check(
          'loadModel(llama2.c folder)',
          path,
          mutateBytes(valid, m),
          async () => {
            const loaded = await loadModel(dir)
            loaded.model.dispose()
          },
          m.kind === 'truncate' || m.kind === 'append',
        )
      }),
      fuzzSettings(60),
    )
  })
})

describe('tokenizer.bin under corruption (fuzz)', () => {
  const pieces = ['<unk>', '<s>', '</s>', ' ', 'a', 'b', 'ab', ' ab', 'ba', '<0x41>', '<0xFF>', 'abba']
  const valid = Llama2cTokenizer.fromPieces(
    pieces,
    pieces.map((_, i) => -i),
  ).serialize()
  const path = join(root, 'tokenizer.bin')
  // Record boundaries: header, then per token score (4), length (4), bytes.
  const boundaries = [0, 4]
  for (const piece of pieces) {
    const end = boundaries.at(-1) as number
    boundaries.push(end + 4, end + 8, end + 8 + new TextEncoder().encode(piece).byteLength)
  }
  const lengthFields = boundaries.filter((_, i) => i >= 2 && i % 3 === 2)
  /** Loads and, when accepted, encodes and decodes (what a user does next: no crash, no hang). */
  const load = async (vocabSize?: number): Promise<void> => {
    const tokenizer = await loadTokenizer(path, vocabSize === undefined ? {} : { vocabSize })
    try {
      tokenizer.decode(tokenizer.encode('abba ab\u00ff\u00e9 ba'))
    } catch (error) {
      // A vocabulary that cannot spell the text is refused for the text, typed and on one line.
      if (!(error instanceof AttnlabError)) throw error
      expect(error.message).not.toContain('\n')
    }
  }

  it('the valid file loads; truncation inside any record is rejected', async () => {
    await check('tokenizer.bin', path, valid, () => load(pieces.length), false)
    for (const boundary of boundaries) {
      for (const length of [boundary - 1, boundary, boundary + 1]) {
        if (length < 0 || length >= valid.byteLength) continue
        // A cut exactly between records is a shorter vocabulary: rejected against the model's size.
        await check('tokenizer.bin', path, valid.slice(0, length), () => load(pieces.length), true)
      }
    }
  })

  it('random corruptions (lengths, scores, bytes) load or give one typed error naming the file', async () => {
    await fc.assert(
      fc.asyncProperty(byteMutation(valid.byteLength, [0, ...lengthFields]), fc.boolean(), async (m, sized) => {
        const mustReject = sized && (m.kind === 'truncate' || m.kind === 'append')
        await check(
          'tokenizer.bin',
          path,
          mutateBytes(valid, m),
          () => load(sized ? pieces.length : undefined),
          mustReject,
        )
      }),
      fuzzSettings(300),
    )
  })

  it('lengths claiming gigabytes are refused before anything that size is allocated', async () => {
    for (const offset of [0, ...lengthFields]) {
      for (const claim of CLAIMED_SIZES) {
        const bytes = valid.slice()
        new DataView(bytes.buffer).setInt32(offset, claim, true)
        // The maximum token length alone is a claim a valid vocabulary may exceed: no refusal required there.
        await check('tokenizer.bin', path, bytes, () => load(pieces.length), offset !== 0)
        // A token length within a maximum that claims as much.
        new DataView(bytes.buffer).setInt32(0, claim, true)
        await check('tokenizer.bin', path, bytes, () => load(pieces.length), offset !== 0)
      }
    }
  })

  it('JSON and text given as a tokenizer.bin are refused by name', async () => {
    for (const text of ['{"model": {"type": "BPE"}}', '{ not json', '  {', '[1,2]', '\ufeff{"a":1}', '{\u00ff']) {
      await check('tokenizer.bin', path, new TextEncoder().encode(text), () => load(), true)
    }
  })
})

describe('Hugging Face directories under corruption (fuzz)', () => {
  const dir = join(root, 'hf')
  let files: Map<string, Uint8Array>
  beforeAll(async () => {
    await saveModelDirectory(dir, { config: { ...config, tiedEmbeddings: false }, weights }, { format: 'huggingface' })
    files = new Map(
      ['config.json', 'model.safetensors'].map((name) => [name, new Uint8Array(readFileSync(join(dir, name)))]),
    )
  })
  const restore = (): void => {
    for (const [name, bytes] of files) writeFileSync(join(dir, name), bytes)
  }
  const load = async (): Promise<void> => {
    const loaded = await loadModel(dir)
    loaded.model.dispose()
  }

  it('config.json with hostile values in any field: loads or one typed error naming config.json', async () => {
    const json = JSON.parse(new TextDecoder().decode(files.get('config.json'))) as unknown
    const paths = jsonPaths(json)
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: paths.length - 1 }),
        fc.constantFrom(...HOSTILE_JSON_VALUES, 'llama', 'LlamaForCausalLM', 'silu', 'gelu', 65536, 2 ** 31 - 1),
        async (index, value) => {
          restore()
          const edited = withJsonValue(json, paths[index] as (string | number)[], value)
          const bytes = new TextEncoder().encode(JSON.stringify(edited))
          await check('config.json', join(dir, 'config.json'), bytes, load, false, dir)
        },
      ),
      fuzzSettings(250),
    )
  })

  it('config.json byte corruptions (non-UTF-8, non-JSON, truncated): one typed error naming config.json', async () => {
    const valid = files.get('config.json') as Uint8Array
    await fc.assert(
      fc.asyncProperty(byteMutation(valid.byteLength, [0]), async (m) => {
        restore()
        await check('config.json', join(dir, 'config.json'), mutateBytes(valid, m), load, false, dir)
      }),
      fuzzSettings(150),
    )
  })

  it('model.safetensors corruptions: loads or one typed error naming model.safetensors', async () => {
    const valid = files.get('model.safetensors') as Uint8Array
    await fc.assert(
      fc.asyncProperty(byteMutation(valid.byteLength, [0, 4]), async (m) => {
        restore()
        const mustReject = m.kind === 'truncate' || m.kind === 'append'
        // Named: the shard for a malformed file, the directory for weights that do not fit its config.json.
        const bytes = mutateBytes(valid, m)
        await check('model.safetensors (HF)', join(dir, 'model.safetensors'), bytes, load, mustReject, dir)
      }),
      fuzzSettings(150),
    )
  })
})

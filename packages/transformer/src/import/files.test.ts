import { mkdtemp, mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as tf from '@tensorflow/tfjs-core'
import {
  type AttnlabError,
  parseSafetensors,
  SafetensorsError,
  serializeSafetensors,
  useBackend,
  type SafetensorsTensorInput,
} from '@attnlab/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { randomWeights, sameWeights } from '../__fixtures__/import/weights.ts'
import { createConfig, presetConfig, type TransformerConfig } from '../config.ts'
import { saveCheckpoint } from '../checkpoint.ts'
import { createTransformer } from '../model.ts'
import { ModelFileError, UnsupportedModelError } from './errors.ts'
import { readHuggingFaceDirectory, saveModelDirectory } from './files.ts'
import { serializeLlama2cCheckpoint } from './llama2c.ts'
import { loadModel, loadTokenizer } from './load.ts'
import { Llama2cTokenizer } from './tokenizer.ts'

let root: string
beforeAll(async () => {
  await useBackend('cpu')
  root = await mkdtemp(join(tmpdir(), 'attnlab-import-'))
})
afterAll(async () => {
  await rm(root, { recursive: true, force: true })
})

let counter = 0
const fresh = (): string => join(root, `case-${counter++}`)

const llama = createConfig({
  architecture: 'llama',
  dVocab: 24,
  nCtx: 16,
  dModel: 16,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dMlp: 20,
  tiedEmbeddings: true,
})
const llamaUntied = createConfig({ ...llama, tiedEmbeddings: false, ropeTheta: 250000 })

async function rewriteTensors(
  dir: string,
  edit: (tensors: Record<string, SafetensorsTensorInput>) => void,
  file = 'model.safetensors',
): Promise<void> {
  const parsed = parseSafetensors(new Uint8Array(await readFile(join(dir, file))))
  const tensors: Record<string, SafetensorsTensorInput> = {}
  for (const [name, entry] of parsed.tensors)
    tensors[name] = { dtype: entry.dtype, shape: entry.shape, data: entry.bytes.slice() }
  edit(tensors)
  await writeFile(join(dir, file), serializeSafetensors(tensors, parsed.metadata))
}

/** Raw safetensors bytes from a header object and a data length (for malformed files). */
function rawSafetensors(header: unknown, dataBytes: number, headerLength?: number): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header))
  const out = new Uint8Array(8 + json.byteLength + dataBytes)
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLength ?? json.byteLength), true)
  out.set(json, 8)
  return out
}

async function expectRejects(promise: Promise<unknown>, check: (error: unknown) => void): Promise<void> {
  try {
    await promise
  } catch (error) {
    check(error)
    return
  }
  expect.fail('did not throw')
}

const fileError = (reason: string, message?: RegExp) => (error: unknown) => {
  expect(error, String(error)).toBeInstanceOf(ModelFileError)
  expect((error as ModelFileError).reason).toBe(reason)
  if (message !== undefined) expect((error as Error).message).toMatch(message)
}

describe('Hugging Face directories: export and import round trips', () => {
  it(
    'writes LlamaForCausalLM names (no lm_head when tied) with format=pt metadata, and reads back bit-identical ' +
      'weights',
    async () => {
      for (const config of [llama, llamaUntied]) {
        const dir = fresh()
        const weights = randomWeights(config, 11)
        const saved = await saveModelDirectory(dir, { config, weights })
        expect(saved).toEqual({ format: 'huggingface', files: ['config.json', 'model.safetensors'] })
        const file = parseSafetensors(new Uint8Array(await readFile(join(dir, 'model.safetensors'))))
        expect(file.metadata).toEqual({ format: 'pt' })
        expect(file.tensors.has('lm_head.weight')).toBe(!config.tiedEmbeddings)
        expect(file.tensors.get('model.layers.1.self_attn.k_proj.weight')?.shape).toEqual([8, 16])
        expect(file.tensors.get('model.layers.0.mlp.down_proj.weight')?.shape).toEqual([16, 20])
        const json = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'))
        expect(json.model_type).toBe('llama')
        const read = await readHuggingFaceDirectory(dir)
        expect(read.format).toBe('huggingface')
        expect(read.config).toEqual(config)
        expect(sameWeights(read.weights, weights)).toBeUndefined()
      }
    },
  )

  it('exports q/k/v/o biases as LlamaForCausalLM attention_bias and reads them back', async () => {
    const config = createConfig({ ...llama, bias: true })
    const weights = randomWeights(config, 12)
    for (const [name, tensor] of weights) if (/mlp\.b_(in|out)$/.test(name)) tensor.data.fill(0)
    const dir = fresh()
    await saveModelDirectory(dir, { config, weights })
    const json = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'))
    expect(json.attention_bias).toBe(true)
    const names = [...parseSafetensors(new Uint8Array(await readFile(join(dir, 'model.safetensors')))).tensors.keys()]
    expect(names).toContain('model.layers.0.self_attn.o_proj.bias')
    expect(names.some((n) => n.includes('mlp') && n.endsWith('.bias'))).toBe(false)
    expect(sameWeights((await readHuggingFaceDirectory(dir)).weights, weights)).toBeUndefined()
    // Non-zero MLP biases cannot be a LlamaForCausalLM: auto falls back to the attnlab format.
    const withMlpBias = randomWeights(config, 13)
    await expect(
      saveModelDirectory(fresh(), { config, weights: withMlpBias }, { format: 'huggingface' }),
    ).rejects.toThrow(/non-zero MLP biases/)
    const auto = fresh()
    expect((await saveModelDirectory(auto, { config, weights: withMlpBias })).format).toBe('attnlab')
    expect(sameWeights((await readHuggingFaceDirectory(auto)).weights, withMlpBias)).toBeUndefined()
  })

  it('exports minimal, gpt and non-standard llama models in the attnlab format and reads them back', async () => {
    const configs: TransformerConfig[] = [
      presetConfig('minimal', { dVocab: 5, nCtx: 4 }),
      presetConfig('gpt-nano'),
      createConfig({ ...llama, attnScale: 1 }),
    ]
    for (const config of configs) {
      const dir = fresh()
      const weights = randomWeights(config, 14)
      const tokenizer = Llama2cTokenizer.fromPieces(['<unk>', '<s>', '</s>', ' ', 'a'], [0, 0, 0, -1, -2])
      expect(await saveModelDirectory(dir, { config, weights }, { tokenizer })).toEqual({
        format: 'attnlab',
        files: ['config.json', 'model.safetensors', 'tokenizer.bin'],
      })
      const read = await readHuggingFaceDirectory(dir)
      expect(read.format).toBe('attnlab')
      expect(read.config).toEqual(config)
      expect(read.specialTokens).toEqual({ bos: 1, eos: [2] })
      expect(sameWeights(read.weights, weights)).toBeUndefined()
      expect((await readFile(join(dir, 'tokenizer.bin'))).byteLength).toBe(tokenizer.serialize().byteLength)
    }
    await expect(
      saveModelDirectory(
        fresh(),
        {
          config: presetConfig('gpt-nano', { bias: false }),
          weights: randomWeights(presetConfig('gpt-nano', { bias: false }), 1),
        },
        { format: 'huggingface' },
      ),
    ).rejects.toThrow(UnsupportedModelError)
  })

  it('refuses misspelled or bad saveModelDirectory and loadTokenizer options, writing nothing', async () => {
    const model = { config: llama, weights: randomWeights(llama, 2) }
    const cases: [unknown, RegExp][] = [
      [{ fromat: 'attnlab' }, /^Invalid fromat: is not a saveModelDirectory parameter \(did you mean 'format'\?\); /],
      [{ format: 'hf' }, /^Invalid format: got 'hf'; expected one of auto, huggingface, attnlab$/],
      [{ tokenizer: 'tokenizer.bin' }, /^Invalid tokenizer: got 'tokenizer.bin'; expected a Llama2cTokenizer /],
      [
        { tokenizer: new Map() },
        /^Invalid tokenizer: got a Map; expected a Llama2cTokenizer \(stored as tokenizer.bin\)$/,
      ],
      [{ specialTokens: { bos: -1 } }, /^Invalid specialTokens.bos: must be an integer >= 0, got -1$/],
      [{ specialTokens: { eos: [2, 1.5] } }, /^Invalid specialTokens.eos\[1\]: must be an integer >= 0, got 1.5$/],
      [{ specialTokens: { eso: [2] } }, /^Invalid specialTokens.eso: is not a saveModelDirectory specialTokens /],
      [null, /^Invalid config: got null; expected an object of saveModelDirectory parameters$/],
    ]
    for (const [options, message] of cases) {
      const dir = fresh()
      await expect(saveModelDirectory(dir, model, options as never)).rejects.toThrow(message)
      await expect(readdir(dir)).rejects.toThrow(/ENOENT/) // nothing written
    }
    // Given special tokens are declared as given; undefined entries are absent.
    const dir = fresh()
    await saveModelDirectory(dir, model, { specialTokens: { bos: 3, eos: undefined } })
    expect((await readHuggingFaceDirectory(dir)).specialTokens).toEqual({ bos: 3 })

    const tokenizerFile = join(fresh(), 'tokenizer.bin')
    await mkdir(join(tokenizerFile, '..'), { recursive: true })
    const tokenizer = Llama2cTokenizer.fromPieces(['<unk>', '<s>', '</s>', ' ', 'a'], [0, 0, 0, -1, -2])
    await writeFile(tokenizerFile, tokenizer.serialize())
    await expect(loadTokenizer(tokenizerFile, { vocabsize: 5 } as never)).rejects.toThrow(
      /^Invalid vocabsize: is not a loadTokenizer parameter \(did you mean 'vocabSize'\?\); expected one of vocabSize,/,
    )
    await expect(loadTokenizer(tokenizerFile, { vocabSize: 0 })).rejects.toThrow(
      /^Invalid vocabSize: must be an integer >= 1, got 0$/,
    )
    await expect(loadTokenizer(tokenizerFile, { bosId: '1' } as never)).rejects.toThrow(
      /^Invalid bosId: must be an integer, got '1'$/,
    )
    await expect(loadTokenizer(tokenizerFile, { dummyPrefix: 1 } as never)).rejects.toThrow(
      /^Invalid dummyPrefix: got 1; expected true or false$/,
    )
    // dummyPrefix is a tokenizer.json option: a llama2.c tokenizer refuses false (and accepts true, what it does).
    await expect(loadTokenizer(tokenizerFile, { dummyPrefix: false })).rejects.toThrow(
      /^Invalid dummyPrefix: applies to a Hugging Face tokenizer\.json, but .*tokenizer\.bin is a llama2\.c tokenizer/,
    )
    expect((await loadTokenizer(tokenizerFile, { dummyPrefix: true })).vocabSize).toBe(5)
    // Checked before the file is read: a bad option on a missing file names the option.
    await expect(loadTokenizer(join(root, 'missing.bin'), { eosId: 0.5 })).rejects.toThrow(/^Invalid eosId: /)
    // An id outside the vocabulary is the tokenizer's (a file) problem, as before.
    await expect(loadTokenizer(tokenizerFile, { bosId: 7 })).rejects.toThrow(ModelFileError)
    const loaded = await loadTokenizer(tokenizerFile, { vocabSize: 5, bosId: 1, eosId: undefined })
    expect([loaded.vocabSize, loaded.bosId, loaded.eosId]).toEqual([5, 1, 2])
  })

  it('replaces an existing directory atomically and leaves it untouched when the export fails', async () => {
    const dir = fresh()
    await saveModelDirectory(dir, { config: llama, weights: randomWeights(llama, 1) })
    const before = await readFile(join(dir, 'model.safetensors'))
    const broken = randomWeights(llama, 2)
    broken.delete('blocks.0.attn.W_Q')
    await expect(saveModelDirectory(dir, { config: llama, weights: broken })).rejects.toThrow(
      /missing: 'blocks\.0\.attn\.W_Q'/,
    )
    expect(await readFile(join(dir, 'model.safetensors'))).toEqual(before)
    await saveModelDirectory(dir, { config: llamaUntied, weights: randomWeights(llamaUntied, 3) })
    expect((await readHuggingFaceDirectory(dir)).config).toEqual(llamaUntied)
    expect((await readdir(root)).filter((n) => n.includes('.tmp-'))).toEqual([])
  })

  it('reads sharded directories and F16/BF16 tensors (widened exactly)', async () => {
    const dir = fresh()
    const weights = randomWeights(llamaUntied, 15)
    await saveModelDirectory(dir, { config: llamaUntied, weights })
    // Split into two shards with an index; store one shard as BF16 and one as F16.
    const parsed = parseSafetensors(new Uint8Array(await readFile(join(dir, 'model.safetensors'))))
    const names = [...parsed.tensors.keys()]
    const toHalf = (values: Float32Array, kind: 'F16' | 'BF16'): Uint16Array => {
      const out = new Uint16Array(values.length)
      const f32 = new Float32Array(1)
      const u32 = new Uint32Array(f32.buffer)
      values.forEach((v, i) => {
        f32[0] = v
        if (kind === 'BF16')
          out[i] = u32[0]! >>> 16 // truncation: exactly representable
        else {
          const half = Math.round(v * 1024) / 1024 // values |v| < 2 on a 2^-10 grid are exact F16
          f32[0] = half
          const bits = u32[0]!
          const sign = (bits >>> 16) & 0x8000
          const exponent = ((bits >>> 23) & 0xff) - 127 + 15
          const mantissa = (bits >>> 13) & 0x3ff
          out[i] =
            half === 0
              ? sign
              : exponent <= 0
                ? sign | (Math.round(Math.abs(half) / 2 ** -24) & 0x3ff)
                : sign | (exponent << 10) | mantissa
        }
      })
      return out
    }
    const expected = new Map<string, Float32Array>()
    const shards: Record<string, Record<string, SafetensorsTensorInput>> = { 'a.safetensors': {}, 'b.safetensors': {} }
    const weightMap: Record<string, string> = {}
    names.forEach((name, i) => {
      const entry = parsed.tensors.get(name)!
      const values = new Float32Array(entry.bytes.slice().buffer)
      const shard = i % 2 === 0 ? 'a.safetensors' : 'b.safetensors'
      const kind = shard === 'a.safetensors' ? 'BF16' : 'F16'
      const half = toHalf(values, kind)
      shards[shard]![name] = { dtype: kind, shape: entry.shape, data: half }
      weightMap[name] = shard
      const back = new Float32Array(values.length)
      if (kind === 'BF16') new Uint32Array(back.buffer).set(Array.from(half, (h) => h << 16))
      else
        values.forEach((v, j) => {
          back[j] = Math.round(v * 1024) / 1024
        })
      expected.set(name, back)
    })
    await rm(join(dir, 'model.safetensors'))
    for (const [shard, tensors] of Object.entries(shards))
      await writeFile(join(dir, shard), serializeSafetensors(tensors))
    await writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }))
    const read = await readHuggingFaceDirectory(dir)
    const viaHf = await saveAndReadHf(read.config, read.weights)
    for (const [name, values] of expected) expect(viaHf.get(name), name).toEqual(values)
  })
})

/** attnlab weights -> the Hugging Face tensors they export to (float32). */
async function saveAndReadHf(
  config: TransformerConfig,
  weights: ReadonlyMap<string, { shape: readonly number[]; data: Float32Array }>,
): Promise<Map<string, Float32Array>> {
  const dir = fresh()
  await saveModelDirectory(dir, { config, weights })
  const parsed = parseSafetensors(new Uint8Array(await readFile(join(dir, 'model.safetensors'))))
  return new Map([...parsed.tensors].map(([name, entry]) => [name, new Float32Array(entry.bytes.slice().buffer)]))
}

describe('Hugging Face directories: bad input', () => {
  let good: string
  beforeAll(async () => {
    good = fresh()
    await saveModelDirectory(good, { config: llama, weights: randomWeights(llama, 21) })
  })
  const copyGood = async (): Promise<string> => {
    const dir = fresh()
    await mkdir(dir)
    for (const name of await readdir(good)) await writeFile(join(dir, name), await readFile(join(good, name)))
    return dir
  }

  it(
    'a missing directory, a directory without config.json, ' + 'a directory without weights, pickle-only weights',
    async () => {
      await expectRejects(
        readHuggingFaceDirectory(join(root, 'nope')),
        fileError('missing-file', /model directory not found/),
      )
      const empty = fresh()
      await mkdir(empty)
      await writeFile(join(empty, 'notes.txt'), 'hi')
      await expectRejects(
        readHuggingFaceDirectory(empty),
        fileError('missing-file', /has no config\.json \(found: notes\.txt\)/),
      )
      const noWeights = await copyGood()
      await rm(join(noWeights, 'model.safetensors'))
      await expectRejects(
        readHuggingFaceDirectory(noWeights),
        fileError('missing-file', /neither model\.safetensors nor model\.safetensors\.index\.json/),
      )
      await writeFile(join(noWeights, 'pytorch_model.bin'), 'x')
      await expectRejects(readHuggingFaceDirectory(noWeights), (error) => {
        expect(error).toBeInstanceOf(UnsupportedModelError)
        expect((error as Error).message).toMatch(/PyTorch pickle weights \('pytorch_model\.bin'\)/)
      })
    },
  )

  it('config.json that is not JSON, or describes another architecture', async () => {
    const dir = await copyGood()
    await writeFile(join(dir, 'config.json'), '{ "model_type": ')
    await expectRejects(readHuggingFaceDirectory(dir), fileError('invalid-json', /config\.json is not valid JSON/))
    await writeFile(
      join(dir, 'config.json'),
      JSON.stringify({ model_type: 'gptj', architectures: ['GPTJForCausalLM'] }),
    )
    await expectRejects(readHuggingFaceDirectory(dir), (error) => {
      expect(error).toBeInstanceOf(UnsupportedModelError)
      expect((error as AttnlabError).code).toBe('UNSUPPORTED')
      expect((error as Error).message).toMatch(
        /"gptj".*is not supported.*'llama', 'mistral', 'qwen2'.*'gpt2', 'gpt_neox'/,
      )
    })
  })

  it('a missing tensor, listing what was expected and what was found', async () => {
    const dir = await copyGood()
    await rewriteTensors(dir, (t) => {
      delete t['model.layers.1.mlp.up_proj.weight']
      delete t['model.norm.weight']
    })
    await expectRejects(readHuggingFaceDirectory(dir), (error) => {
      fileError(
        'missing-tensor',
        new RegExp(
          /2 of the 20 tensors the configuration needs are missing: 'model\.layers\.1\.mlp\.up_proj\.weight', /.source +
            /'model\.norm\.weight'\. Found 18 tensors: 'model\.embed_tokens\.weight'/.source,
        ),
      )(error)
      expect((error as ModelFileError).details.missing).toEqual([
        'model.layers.1.mlp.up_proj.weight',
        'model.norm.weight',
      ])
    })
  })

  it('an unexpected tensor (nothing is dropped silently), but rotary inv_freq buffers are ignored', async () => {
    const dir = await copyGood()
    await rewriteTensors(dir, (t) => {
      t['model.layers.0.self_attn.rotary_emb.inv_freq'] = { dtype: 'F32', shape: [2], data: new Float32Array([1, 0.1]) }
    })
    expect((await readHuggingFaceDirectory(dir)).config).toEqual(llama)
    await rewriteTensors(dir, (t) => {
      t['model.layers.0.self_attn.q_proj.bias'] = { dtype: 'F32', shape: [16], data: new Float32Array(16) }
    })
    await expectRejects(
      readHuggingFaceDirectory(dir),
      fileError(
        'unexpected-tensor',
        /1 tensors have no place in the configured model: 'model\.layers\.0\.self_attn\.q_proj\.bias'/,
      ),
    )
  })

  it('a tensor of the wrong shape, naming it and both shapes', async () => {
    const dir = await copyGood()
    await rewriteTensors(dir, (t) => {
      t['model.layers.0.self_attn.k_proj.weight'] = { dtype: 'F32', shape: [16, 8], data: new Float32Array(128) }
    })
    await expectRejects(readHuggingFaceDirectory(dir), (error) => {
      fileError(
        'shape-mismatch',
        /'model\.layers\.0\.self_attn\.k_proj\.weight' is \[16, 8\], expected \[8, 16\]/,
      )(error)
      expect((error as ModelFileError).tensor).toBe('model.layers.0.self_attn.k_proj.weight')
    })
  })

  it('a non-float dtype and non-finite values', async () => {
    const dir = await copyGood()
    await rewriteTensors(dir, (t) => {
      t['model.norm.weight'] = { dtype: 'I32', shape: [16], data: new Int32Array(16) }
    })
    await expectRejects(
      readHuggingFaceDirectory(dir),
      fileError('invalid-header', /'model\.norm\.weight' has dtype I32/),
    )
    await rewriteTensors(dir, (t) => {
      const data = new Float32Array(16).fill(1)
      data[3] = Number.POSITIVE_INFINITY
      t['model.norm.weight'] = { dtype: 'F32', shape: [16], data }
    })
    await expectRejects(
      readHuggingFaceDirectory(dir),
      fileError('non-finite', /'model\.norm\.weight' holds Infinity at flat index 3/),
    )
  })

  it(
    'malformed safetensors: truncated, oversized header, overlapping offsets, byte count disagreeing with the ' +
      'shape',
    async () => {
      const dir = await copyGood()
      const bytes = new Uint8Array(await readFile(join(good, 'model.safetensors')))
      const expectSafetensors = (message: RegExp, tensor?: string) => (error: unknown) => {
        expect(error, String(error)).toBeInstanceOf(SafetensorsError)
        expect((error as SafetensorsError).code).toBe('INVALID_SAFETENSORS')
        expect((error as Error).message).toMatch(/model\.safetensors: /)
        expect((error as Error).message).toMatch(message)
        if (tensor !== undefined) expect((error as SafetensorsError).tensor).toBe(tensor)
      }
      await writeFile(join(dir, 'model.safetensors'), bytes.subarray(0, bytes.byteLength - 10))
      await expectRejects(readHuggingFaceDirectory(dir), expectSafetensors(/run past the end of the data/))
      await writeFile(join(dir, 'model.safetensors'), rawSafetensors({}, 0, 200_000_000))
      await expectRejects(readHuggingFaceDirectory(dir), expectSafetensors(/header length 200000000 exceeds the limit/))
      await writeFile(join(dir, 'model.safetensors'), rawSafetensors({}, 0, 4096))
      await expectRejects(
        readHuggingFaceDirectory(dir),
        expectSafetensors(/file is truncated: the header says 4096 bytes/),
      )
      const overlap = {
        'model.norm.weight': { dtype: 'F32', shape: [4], data_offsets: [0, 16] },
        'model.embed_tokens.weight': { dtype: 'F32', shape: [4], data_offsets: [8, 24] },
      }
      await writeFile(join(dir, 'model.safetensors'), rawSafetensors(overlap, 24))
      await expectRejects(
        readHuggingFaceDirectory(dir),
        expectSafetensors(/overlap another tensor/, 'model.embed_tokens.weight'),
      )
      const wrongCount = { 'model.norm.weight': { dtype: 'F32', shape: [5], data_offsets: [0, 16] } }
      await writeFile(join(dir, 'model.safetensors'), rawSafetensors(wrongCount, 16))
      await expectRejects(
        readHuggingFaceDirectory(dir),
        expectSafetensors(/16 bytes stored but dtype F32 and shape \[5\] need 20/, 'model.norm.weight'),
      )
    },
  )

  it('sharded directories whose index and shards disagree, or that name files outside the directory', async () => {
    const dir = await copyGood()
    const names = [...parseSafetensors(new Uint8Array(await readFile(join(dir, 'model.safetensors')))).tensors.keys()]
    const index = (map: Record<string, string>) =>
      writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: map }))
    const all = Object.fromEntries(names.map((n) => [n, 'model.safetensors']))
    await index({ ...all, 'model.extra.weight': 'model.safetensors' })
    await expectRejects(
      readHuggingFaceDirectory(dir),
      fileError('missing-tensor', /places 'model\.extra\.weight' in 'model\.safetensors', which does not hold it/),
    )
    const { 'model.norm.weight': _, ...withoutNorm } = all
    void _
    await index(withoutNorm)
    await expectRejects(
      readHuggingFaceDirectory(dir),
      fileError(
        'unexpected-tensor',
        /holds 'model\.norm\.weight', which model\.safetensors\.index\.json does not list/,
      ),
    )
    await index({ ...all, 'model.norm.weight': 'missing-shard.safetensors' })
    await expectRejects(
      readHuggingFaceDirectory(dir),
      fileError(
        'missing-file',
        new RegExp(
          /missing-shard\.safetensors: shard 'missing-shard\.safetensors' named by /.source +
            /model\.safetensors\.index\.json not found/.source,
        ),
      ),
    )
    await index({ ...all, 'model.norm.weight': '../elsewhere.safetensors' })
    await expectRejects(readHuggingFaceDirectory(dir), fileError('invalid-json', /is not a file name in the directory/))
    await writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {} }))
    await expectRejects(readHuggingFaceDirectory(dir), fileError('invalid-json', /no "weight_map" object/))
  })

  it('a tied checkpoint that also stores lm_head: accepted when equal, rejected when different', async () => {
    const dir = await copyGood()
    await rewriteTensors(dir, (t) => {
      t['lm_head.weight'] = t['model.embed_tokens.weight']!
    })
    expect((await readHuggingFaceDirectory(dir)).config.tiedEmbeddings).toBe(true)
    await rewriteTensors(dir, (t) => {
      t['lm_head.weight'] = { dtype: 'F32', shape: [24, 16], data: new Float32Array(24 * 16) }
    })
    await expectRejects(
      readHuggingFaceDirectory(dir),
      fileError('invalid-header', /tie_word_embeddings is true but 'lm_head\.weight' differs/),
    )
  })

  it('tied embeddings stored once: as lm_head.weight (with or without a metadata alias), or by alias', async () => {
    const weights = randomWeights(llama, 21)
    const storeOnce = async (config: TransformerConfig, keep: string, drop: string, alias: boolean) => {
      const dir = fresh()
      await saveModelDirectory(dir, { config, weights: randomWeights(config, 21) })
      const parsed = parseSafetensors(new Uint8Array(await readFile(join(dir, 'model.safetensors'))))
      const tensors: Record<string, SafetensorsTensorInput> = {}
      for (const [name, entry] of parsed.tensors) {
        tensors[name] = { dtype: entry.dtype, shape: entry.shape, data: entry.bytes.slice() }
      }
      const embedding = tensors['model.embed_tokens.weight']!
      delete tensors[drop]
      tensors[keep] = embedding
      const metadata = alias ? { format: 'pt', [drop]: keep } : { format: 'pt' }
      await writeFile(join(dir, 'model.safetensors'), serializeSafetensors(tensors, metadata))
      return dir
    }
    // Tied, only lm_head.weight stored: from the metadata alias, and from tie_word_embeddings alone.
    for (const alias of [true, false]) {
      const dir = await storeOnce(llama, 'lm_head.weight', 'model.embed_tokens.weight', alias)
      const read = await readHuggingFaceDirectory(dir)
      expect(sameWeights(read.weights, weights)).toBeUndefined()
      const note = alias ? /stored once, as 'lm_head\.weight' \(safetensors __metadata__ alias\)/ : /tie_word_emb/
      expect(read.notes.join('\n')).toMatch(note)
    }
    // Untied config, the classifier deduplicated into the embedding by a metadata alias: W_U = W_E^T.
    const untied = await storeOnce(llamaUntied, 'model.embed_tokens.weight', 'lm_head.weight', true)
    const read = await readHuggingFaceDirectory(untied)
    const embed = read.weights.get('embed.W_E')!
    const unembed = read.weights.get('unembed.W_U')!
    expect(unembed.shape).toEqual([16, 24])
    expect(unembed.data[3 * 24 + 5]).toBe(embed.data[5 * 16 + 3])
    // Untied and no alias: nothing is guessed.
    const guess = await storeOnce(llamaUntied, 'model.embed_tokens.weight', 'lm_head.weight', false)
    await expectRejects(readHuggingFaceDirectory(guess), fileError('missing-tensor', /'lm_head\.weight'/))
  })

  it('nothing is loaded partially: a failing loadModel creates no tensor', async () => {
    const broken = await copyGood()
    await rewriteTensors(broken, (t) => {
      delete t['model.norm.weight']
    })
    const truncatedBin = join(root, 'truncated.bin')
    await writeFile(truncatedBin, new Uint8Array(40))
    const before = tf.memory().numTensors
    await expect(loadModel(broken)).rejects.toThrow(ModelFileError)
    await expect(loadModel(truncatedBin)).rejects.toThrow(/truncated|bytes are missing/)
    await expect(loadModel(good, { tokenizer: join(root, 'missing-tokenizer.bin') })).rejects.toThrow(
      /tokenizer not found/,
    )
    expect(tf.memory().numTensors).toBe(before)
  })
})

describe('loadModel', () => {
  it(
    'loads Hugging Face, attnlab-native and training-checkpoint directories and finds tokenizer.bin beside the ' +
      'weights',
    async () => {
      const tokenizer = Llama2cTokenizer.fromPieces(
        Array.from({ length: 24 }, (_, i) => (i === 3 ? ' ' : `t${i}`)),
        new Array(24).fill(0),
      )
      const dir = fresh()
      const weights = randomWeights(llama, 31)
      await saveModelDirectory(dir, { config: llama, weights }, { tokenizer })
      const loaded = await loadModel(join(dir, 'config.json'))
      try {
        expect(loaded.format).toBe('huggingface')
        expect(loaded.tokenizer?.vocabSize).toBe(24)
        expect(loaded.tokenizerPath).toBe(join(dir, 'tokenizer.bin'))
        expect(sameWeights(await loaded.model.getWeightData(), weights)).toBeUndefined()
      } finally {
        loaded.model.dispose()
      }
      const noTokenizer = await loadModel(dir, { tokenizer: false })
      expect(noTokenizer.tokenizer).toBeUndefined()
      noTokenizer.model.dispose()
      // A tokenizer whose vocabulary is not the model's.
      const wrong = join(root, 'wrong-tokenizer.bin')
      await writeFile(wrong, Llama2cTokenizer.fromPieces(['a', 'b', 'c'], [0, 0, 0]).serialize())
      await expect(loadModel(dir, { tokenizer: wrong })).rejects.toThrow(
        /holds 3 tokens but the model's vocabulary has 24/,
      )
      // A training checkpoint directory (manifest.json).
      const model = createTransformer(presetConfig('gpt-nano'))
      const checkpoint = fresh()
      await saveCheckpoint(checkpoint, model)
      const fromCheckpoint = await loadModel(checkpoint)
      expect(fromCheckpoint.format).toBe('checkpoint')
      expect(sameWeights(await fromCheckpoint.model.getWeightData(), await model.getWeightData())).toBeUndefined()
      fromCheckpoint.model.dispose()
      model.dispose()
    },
  )

  it('a folder holding model.bin and no config.json means that llama2.c file (tokenizer.bin beside it)', async () => {
    const folder = fresh()
    await mkdir(folder)
    const weights = randomWeights(llama, 32)
    await writeFile(join(folder, 'model.bin'), serializeLlama2cCheckpoint(llama, weights))
    const tokenizer = Llama2cTokenizer.fromPieces(
      Array.from({ length: 24 }, (_, i) => `t${i}`),
      new Array(24).fill(0),
    )
    await writeFile(join(folder, 'tokenizer.bin'), tokenizer.serialize())
    const loaded = await loadModel(folder)
    try {
      expect(loaded.format).toBe('llama2c')
      expect(loaded.tokenizerPath).toBe(join(folder, 'tokenizer.bin'))
      const file = join(folder, 'model.bin')
      expect(loaded.notes[0]).toBe(`no config.json in ${folder}: read the llama2.c checkpoint ${file}`)
      expect(sameWeights(await loaded.model.getWeightData(), weights)).toBeUndefined()
    } finally {
      loaded.model.dispose()
    }
    // With a config.json too, the folder is a model directory (config.json wins).
    await saveModelDirectory(join(folder, 'hf'), { config: llama, weights })
    await writeFile(join(folder, 'config.json'), await readFile(join(folder, 'hf', 'config.json')))
    await expectRejects(loadModel(folder), fileError('missing-file', /neither model\.safetensors nor/))
  })
})

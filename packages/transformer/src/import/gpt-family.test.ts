import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as tf from '@tensorflow/tfjs-core'
import { parseSafetensors, serializeSafetensors, type SafetensorsTensorInput } from '@attnlab/core'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '@attnlab/core/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import expected from '../__fixtures__/import/hf-gpt/expected.json' with { type: 'json' }
import { randomWeights, sameWeights } from '../__fixtures__/import/weights.ts'
import { createConfig } from '../config.ts'
import { generate } from '../generate.ts'
import { hookName } from '../hooks.ts'
import { createTransformer, type Transformer } from '../model.ts'
import { ModelFileError, UnsupportedModelError } from './errors.ts'
import { readHuggingFaceDirectory, saveModelDirectory } from './files.ts'
import { gptFamilyConfigFromHuggingFace, gptFamilyModelTypeFor } from './gpt-family.ts'
import { serializeLlama2cCheckpoint } from './llama2c.ts'
import { loadModel } from './load.ts'

// Reference logits and greedy ids: tools/import/gpt_reference.py (PyTorch, GPT2LMHeadModel / GPTNeoXForCausalLM
// semantics written from the papers and the Hugging Face layout). Regenerate with
//   /usr/bin/python3 tools/import/gpt_reference.py fixtures
const HERE = dirname(fileURLToPath(import.meta.url))
const FIXTURES = join(HERE, '../__fixtures__/import/hf-gpt')
const REPO = join(HERE, '../../../..')
const PYTHON = '/usr/bin/python3'
type Case = keyof typeof expected

let root: string
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'attnlab-gpt-family-'))
})
afterAll(async () => {
  await rm(root, { recursive: true, force: true })
})
let counter = 0
const fresh = (): string => join(root, `case-${counter++}`)

async function logitsOf(model: Transformer, tokens: readonly number[]): Promise<Float32Array> {
  const logits = model.forward([tokens])
  const values = (await logits.data()) as Float32Array
  logits.dispose()
  return values
}

/** Copies a fixture directory, passing its tensors (raw bytes) through `edit`. */
async function copyFixture(
  name: Case,
  edit: (tensors: Record<string, SafetensorsTensorInput>) => Record<string, SafetensorsTensorInput> = (t) => t,
  editConfig: (json: Record<string, unknown>) => void = () => {},
): Promise<string> {
  const dir = fresh()
  await mkdir(dir)
  const parsed = parseSafetensors(new Uint8Array(await readFile(join(FIXTURES, name, 'model.safetensors'))))
  const tensors: Record<string, SafetensorsTensorInput> = {}
  for (const [tensor, entry] of parsed.tensors)
    tensors[tensor] = { dtype: entry.dtype, shape: entry.shape, data: entry.bytes.slice() }
  await writeFile(join(dir, 'model.safetensors'), serializeSafetensors(edit(tensors), parsed.metadata))
  const json = JSON.parse(await readFile(join(FIXTURES, name, 'config.json'), 'utf8')) as Record<string, unknown>
  editConfig(json)
  await writeFile(join(dir, 'config.json'), JSON.stringify(json))
  return dir
}

describeWithBackends('GPT-2 and GPT-NeoX directories against the PyTorch reference (gpt_reference.py)', () => {
  for (const [name, reference] of Object.entries(expected)) {
    it(`${name} (${reference.dtype}): logits match, greedy generation matches`, async () => {
      const loaded = await loadModel(join(FIXTURES, name), { tokenizer: false })
      try {
        expect(loaded.format).toBe('huggingface')
        const values = await expectNoLeaks(() => logitsOf(loaded.model, reference.tokens))
        expectArraysClose(values, reference.logits.flat(), 1e-4, 1e-4)
        // KV-cached decoding (rotary positions from the cache's offset) against the reference's full recomputation.
        const before = tf.memory().numTensors
        const { tokens } = await generate(loaded.model, reference.tokens, {
          maxTokens: reference.greedy.length - reference.tokens.length,
          temperature: 0,
        })
        expect(tf.memory().numTensors).toBe(before)
        expect([...reference.tokens, ...(tokens[0] as number[])]).toEqual(reference.greedy)
      } finally {
        loaded.model.dispose()
      }
    })
  }

  it('reads GPT-2 names without the transformer. prefix (the hub gpt2 layout), ignoring mask buffers', async () => {
    const reference = expected['gpt2-tied']
    const dir = await copyFixture('gpt2-tied', (tensors) => {
      const out: Record<string, SafetensorsTensorInput> = {}
      for (const [name, tensor] of Object.entries(tensors)) out[name.replace(/^transformer\./, '')] = tensor
      for (const l of [0, 1]) {
        out[`h.${l}.attn.bias`] = { dtype: 'F32', shape: [1, 1, 32, 32], data: new Float32Array(32 * 32).fill(1) }
        out[`h.${l}.attn.masked_bias`] = { dtype: 'F32', shape: [], data: new Float32Array([-1e4]) }
      }
      return out
    })
    const loaded = await loadModel(dir, { tokenizer: false })
    try {
      expectArraysClose(await logitsOf(loaded.model, reference.tokens), reference.logits.flat(), 1e-4, 1e-4)
    } finally {
      loaded.model.dispose()
    }
  })
})

describe('GPT-2 and GPT-NeoX configurations', () => {
  it('maps gpt2 onto gpt (learned positions, tied), gpt_neox onto gpt (partial rotary, parallel)', async () => {
    const gpt2 = await readHuggingFaceDirectory(join(FIXTURES, 'gpt2-tied'))
    expect(gpt2.config).toMatchObject({
      architecture: 'gpt',
      positional: 'learned',
      normalization: 'layernorm',
      bias: true,
      tiedEmbeddings: true,
      actFn: 'gelu_new',
      dModel: 32,
      nHeads: 4,
      dHead: 8,
      dMlp: 64,
      nCtx: 32,
      attnScale: 1 / Math.sqrt(8),
      parallelResidual: false,
    })
    expect(gpt2.specialTokens).toEqual({ bos: 50, eos: [50] })
    const neox = await readHuggingFaceDirectory(join(FIXTURES, 'neox-parallel'))
    expect(neox.config).toMatchObject({
      architecture: 'gpt',
      positional: 'rotary',
      rotaryDims: 4,
      ropeTheta: 10000,
      parallelResidual: true,
      tiedEmbeddings: false,
      actFn: 'gelu',
      dHead: 16,
    })
    const sequential = await readHuggingFaceDirectory(join(FIXTURES, 'neox-sequential-f16'))
    expect(sequential.config).toMatchObject({ rotaryDims: 4, dHead: 8, ropeTheta: 500, parallelResidual: false })
  })

  const neoxBase = {
    model_type: 'gpt_neox',
    hidden_size: 32,
    num_attention_heads: 4,
    num_hidden_layers: 1,
    intermediate_size: 64,
    vocab_size: 50,
    use_parallel_residual: true,
  }
  const gpt2Base = { model_type: 'gpt2', n_embd: 32, n_head: 4, n_layer: 1, vocab_size: 50 }

  it('uses the Hugging Face defaults for omitted keys and says so; a full rotary is rotaryDims 0', () => {
    const info = gptFamilyConfigFromHuggingFace(neoxBase, 'gpt_neox')
    expect(info.config).toMatchObject({ nCtx: 2048, rotaryDims: 2, ropeTheta: 10000, normEps: 1e-5, actFn: 'gelu' })
    expect(info.notes.join('\n')).toMatch(/rotary_pct not given; using the GPTNeoXForCausalLM default 0.25/)
    expect(gptFamilyConfigFromHuggingFace({ ...neoxBase, rotary_pct: 1 }, 'gpt_neox').config.rotaryDims).toBe(0)
    expect(
      gptFamilyConfigFromHuggingFace({ ...neoxBase, partial_rotary_factor: 0.5 }, 'gpt_neox').config.rotaryDims,
    ).toBe(4)
    const gpt2 = gptFamilyConfigFromHuggingFace(gpt2Base, 'gpt2')
    expect(gpt2.config).toMatchObject({ nCtx: 1024, dMlp: 128, tiedEmbeddings: true, actFn: 'gelu_new' })
    expect(gptFamilyConfigFromHuggingFace({ ...gpt2Base, scale_attn_weights: false }, 'gpt2').config.attnScale).toBe(1)
    const unscaled = { ...neoxBase, rope_scaling: { rope_type: 'default' } }
    expect(gptFamilyConfigFromHuggingFace(unscaled, 'gpt_neox').config.ropeTheta).toBe(10000)
  })

  it('refuses options the gpt architecture would compute differently, naming the key', () => {
    const unsupported: [Record<string, unknown>, 'gpt2' | 'gpt_neox', string][] = [
      [{ ...gpt2Base, scale_attn_by_inverse_layer_idx: true }, 'gpt2', 'scale_attn_by_inverse_layer_idx'],
      [{ ...gpt2Base, add_cross_attention: true }, 'gpt2', 'add_cross_attention'],
      [{ ...gpt2Base, activation_function: 'quick_gelu' }, 'gpt2', 'activation_function'],
      [{ ...neoxBase, rope_scaling: { type: 'linear', factor: 2 } }, 'gpt_neox', 'rope_scaling'],
      [{ ...neoxBase, attention_bias: false }, 'gpt_neox', 'attention_bias'],
      [{ ...neoxBase, rotary_pct: 0.1 }, 'gpt_neox', 'rotary_pct'],
    ]
    for (const [json, type, key] of unsupported) {
      expect(() => gptFamilyConfigFromHuggingFace(json, type)).toThrow(UnsupportedModelError)
      expect(() => gptFamilyConfigFromHuggingFace(json, type)).toThrow(new RegExp(`'${key}'`))
    }
    const { use_parallel_residual: _, ...noParallel } = neoxBase
    const invalid: [Record<string, unknown>, 'gpt2' | 'gpt_neox', string, RegExp][] = [
      [noParallel, 'gpt_neox', 'use_parallel_residual', /lacks 'use_parallel_residual' \(true or false/],
      [{ ...neoxBase, rotary_pct: 0 }, 'gpt_neox', 'rotary_pct', /'rotary_pct' is 0; expected a fraction in \(0, 1\]/],
      [{ ...neoxBase, rotary_pct: 1.5 }, 'gpt_neox', 'rotary_pct', /'rotary_pct' is 1.5/],
      [{ ...neoxBase, num_attention_heads: 5 }, 'gpt_neox', 'num_attention_heads', /not divisible/],
      [{ ...gpt2Base, n_embd: undefined }, 'gpt2', 'n_embd', /lacks 'n_embd'/],
      [{ ...gpt2Base, n_layer: 1.5 }, 'gpt2', 'n_layer', /'n_layer' is 1.5; expected a positive integer/],
    ]
    for (const [json, type, key, message] of invalid) {
      let error: unknown
      try {
        gptFamilyConfigFromHuggingFace(json, type)
      } catch (caught) {
        error = caught
      }
      expect(error).toBeInstanceOf(ModelFileError)
      expect(error).toMatchObject({ reason: 'invalid-header', details: { tensor: key } })
      expect((error as Error).message).toMatch(message)
    }
  })
})

describe('GPT-2 and GPT-NeoX directories with missing or mis-shaped tensors', () => {
  it('names the missing tensor', async () => {
    const dir = await copyFixture('neox-parallel', (tensors) => {
      delete tensors['gpt_neox.layers.1.attention.query_key_value.bias']
      return tensors
    })
    await expect(readHuggingFaceDirectory(dir)).rejects.toMatchObject({
      reason: 'missing-tensor',
      details: { tensor: 'gpt_neox.layers.1.attention.query_key_value.bias' },
    })
  })

  it('names the mis-shaped tensor and an unexpected one', async () => {
    const transposed = await copyFixture('gpt2-tied', (tensors) => {
      const entry = tensors['transformer.h.0.attn.c_attn.weight'] as SafetensorsTensorInput
      tensors['transformer.h.0.attn.c_attn.weight'] = { ...entry, shape: [96, 32] }
      return tensors
    })
    await expect(readHuggingFaceDirectory(transposed)).rejects.toThrow(
      /'transformer.h.0.attn.c_attn.weight' is \[96, 32\], expected \[32, 96\]/,
    )
    const extra = await copyFixture('neox-sequential-f16', (tensors) => ({
      ...tensors,
      'gpt_neox.layers.2.mlp.dense_h_to_4h.bias': { dtype: 'F16', shape: [48], data: new Uint8Array(96) },
    }))
    await expect(readHuggingFaceDirectory(extra)).rejects.toMatchObject({
      reason: 'unexpected-tensor',
      details: { tensor: 'gpt_neox.layers.2.mlp.dense_h_to_4h.bias' },
    })
  })

  it('refuses a tied GPT-2 file whose lm_head differs from wte, and reads one that equals it', async () => {
    const same = await copyFixture('gpt2-tied', (tensors) => ({
      ...tensors,
      'lm_head.weight': tensors['transformer.wte.weight'] as SafetensorsTensorInput,
    }))
    expect((await readHuggingFaceDirectory(same)).config.tiedEmbeddings).toBe(true)
    const differs = await copyFixture('gpt2-tied', (tensors) => {
      const wte = tensors['transformer.wte.weight'] as SafetensorsTensorInput
      return { ...tensors, 'lm_head.weight': { ...wte, data: new Uint8Array(wte.data.byteLength) } }
    })
    await expect(readHuggingFaceDirectory(differs)).rejects.toThrow(/'lm_head.weight' differs from/)
  })
})

describe('exporting gpt models as GPT-2 and GPT-NeoX directories', () => {
  for (const name of ['gpt2-tied', 'neox-parallel'] as const) {
    it(`${name}: the export holds the fixture's tensors bit for bit, and loads back to the same logits`, async () => {
      const read = await readHuggingFaceDirectory(join(FIXTURES, name))
      const dir = fresh()
      const saved = await saveModelDirectory(dir, read, { format: 'huggingface', specialTokens: read.specialTokens })
      expect(saved.format).toBe('huggingface')
      const exported = parseSafetensors(new Uint8Array(await readFile(join(dir, 'model.safetensors'))))
      const original = parseSafetensors(new Uint8Array(await readFile(join(FIXTURES, name, 'model.safetensors'))))
      expect([...exported.tensors.keys()].sort()).toEqual([...original.tensors.keys()].sort())
      for (const [tensor, entry] of original.tensors) {
        expect(exported.tensors.get(tensor)?.shape, tensor).toEqual(entry.shape)
        expect(Buffer.from(exported.tensors.get(tensor)?.bytes ?? []).equals(Buffer.from(entry.bytes)), tensor).toBe(
          true,
        )
      }
      const json = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'))
      const fixtureJson = JSON.parse(await readFile(join(FIXTURES, name, 'config.json'), 'utf8'))
      expect(json).toMatchObject(Object.fromEntries(Object.entries(fixtureJson).filter(([k]) => k !== 'torch_dtype')))
      const back = await readHuggingFaceDirectory(dir)
      expect(back.config).toEqual(read.config)
      expect(sameWeights(back.weights, read.weights)).toBeUndefined()
    })
  }

  it('round-trips random gpt_neox-like and gpt2-like models; refuses what neither class has', async () => {
    const neox = createConfig({
      architecture: 'gpt',
      dVocab: 30,
      nCtx: 24,
      dModel: 24,
      nLayers: 2,
      nHeads: 2,
      positional: 'rotary',
      rotaryDims: 6,
      parallelResidual: true,
      actFn: 'gelu',
      tiedEmbeddings: false,
      seed: 7,
    })
    const gpt2 = createConfig({ architecture: 'gpt', dVocab: 30, nCtx: 12, dModel: 24, nLayers: 1, nHeads: 3 })
    for (const [config, modelType] of [
      [neox, 'gpt_neox'],
      [gpt2, 'gpt2'],
    ] as const) {
      expect(gptFamilyModelTypeFor(config)).toEqual({ modelType })
      const weights = randomWeights(config, 3)
      const dir = fresh()
      await saveModelDirectory(dir, { config, weights }, { format: 'huggingface' })
      expect(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')).model_type).toBe(modelType)
      const back = await readHuggingFaceDirectory(dir)
      expect(back.config).toEqual(config)
      expect(sameWeights(back.weights, weights)).toBeUndefined()
    }
    // auto keeps the attnlab format for gpt models.
    expect((await saveModelDirectory(fresh(), { config: gpt2, weights: randomWeights(gpt2, 1) })).format).toBe(
      'attnlab',
    )
    const noBias = createConfig({ ...gpt2, bias: false })
    await expect(
      saveModelDirectory(fresh(), { config: noBias, weights: randomWeights(noBias, 1) }, { format: 'huggingface' }),
    ).rejects.toThrow(/GPT2LMHeadModel \/ GPTNeoXForCausalLM cannot express a model without biases/)
    const llamaPartial = createConfig({
      architecture: 'llama',
      dVocab: 20,
      nCtx: 8,
      dModel: 16,
      nHeads: 2,
      rotaryDims: 4,
    })
    await expect(
      saveModelDirectory(
        fresh(),
        { config: llamaPartial, weights: randomWeights(llamaPartial, 1) },
        { format: 'huggingface' },
      ),
    ).rejects.toThrow(/LlamaForCausalLM cannot express a partial rotary \(rotaryDims 4\)/)
    expect(() => serializeLlama2cCheckpoint(llamaPartial, randomWeights(llamaPartial, 1))).toThrow(
      /llama2.c checkpoint cannot express a partial rotary \(rotaryDims 4\)/,
    )
  })

  const torch = existsSync(PYTHON) && hasTorch()
  if (!torch) console.log(`[attnlab] ${PYTHON} with torch is missing: the live gpt_reference.py run is skipped`)
  it.skipIf(!torch)(
    'the reference script reads an exported GPT-NeoX directory and agrees with attnlab',
    async () => {
      const config = createConfig({
        architecture: 'gpt',
        dVocab: 40,
        nCtx: 16,
        dModel: 24,
        nLayers: 2,
        nHeads: 3,
        positional: 'rotary',
        rotaryDims: 4,
        parallelResidual: false,
        actFn: 'gelu',
        tiedEmbeddings: false,
      })
      const weights = randomWeights(config, 9, 0.3)
      const dir = fresh()
      await saveModelDirectory(dir, { config, weights }, { format: 'huggingface' })
      const tokens = [3, 1, 4, 1, 5, 9, 2, 6]
      const script = join(REPO, 'tools/import/gpt_reference.py')
      const out = JSON.parse(
        execFileSync(PYTHON, [script, 'logits', dir, tokens.join(','), '14'], { encoding: 'utf8' }),
      ) as { logits: number[][]; greedy: number[] }
      const model = createTransformer(config)
      try {
        model.setWeights(weights)
        expectArraysClose(await logitsOf(model, tokens), out.logits.flat(), 1e-4, 1e-4)
        const { tokens: ids } = await generate(model, tokens, { maxTokens: 6, temperature: 0 })
        expect([...tokens, ...(ids[0] as number[])]).toEqual(out.greedy)
      } finally {
        model.dispose()
      }
    },
    120_000,
  )
})

function hasTorch(): boolean {
  try {
    execFileSync(PYTHON, ['-c', 'import torch, numpy'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

describe('parallel residual blocks and their hooks', () => {
  it('resid_post = resid_pre + attn_out + mlp_out, and hook_resid_mid does not fire', async () => {
    const config = createConfig({
      architecture: 'gpt',
      dVocab: 20,
      nCtx: 8,
      dModel: 16,
      nLayers: 1,
      nHeads: 2,
      positional: 'rotary',
      rotaryDims: 4,
      parallelResidual: true,
    })
    const model = createTransformer(config)
    try {
      const before = tf.memory().numTensors
      const { logits, cache } = model.runWithCache([[1, 2, 3, 4, 5]])
      logits.dispose()
      try {
        expect(cache.has(hookName.residMid(0))).toBe(false)
        const sum = tf.tidy(() =>
          tf.add(
            cache.get(hookName.residPre(0)),
            tf.add(cache.get(hookName.attnOut(0)), cache.get(hookName.mlpOut(0))),
          ),
        )
        expectArraysClose(await sum.data(), await cache.get(hookName.residPost(0)).data(), 1e-6, 1e-6)
        sum.dispose()
      } finally {
        cache.dispose()
      }
      expect(tf.memory().numTensors).toBe(before)
    } finally {
      model.dispose()
    }
  })
})

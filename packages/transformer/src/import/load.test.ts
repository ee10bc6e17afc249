import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, expectArraysClose, expectNoLeaks, testBackends } from '@attnlab/core/testing'
import { existsSync } from 'node:fs'
import { afterAll, beforeAll, expect, it } from 'vitest'
import {
  AIDREAMS,
  HAVE_AIDREAMS,
  REFERENCE_IDS_FROM_BOS,
  REFERENCE_TEXT,
  REPO_ROOT,
} from '../__fixtures__/import/aidreams.ts'
import expected from '../__fixtures__/import/hf-tiny/expected.json' with { type: 'json' }
import { sameWeights } from '../__fixtures__/import/weights.ts'
import { generate } from '../generate.ts'
import type { Transformer } from '../model.ts'
import { saveModelDirectory } from './files.ts'
import { serializeLlama2cCheckpoint } from './llama2c.ts'
import { loadModel, type LoadedModel } from './load.ts'
import type { Llama2cTokenizer, Tokenizer } from './tokenizer.ts'

const HF_TINY = join(dirname(fileURLToPath(import.meta.url)), '../__fixtures__/import/hf-tiny')

let root: string
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'attnlab-load-'))
})
afterAll(async () => {
  await rm(root, { recursive: true, force: true })
})

async function logitsOf(model: Transformer, tokens: readonly number[]): Promise<Float32Array> {
  const logits = model.forward([tokens])
  const values = (await logits.data()) as Float32Array
  logits.dispose()
  return values
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let max = 0
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs((a[i] as number) - (b[i] as number)))
  return max
}

describeWithBackends('Hugging Face checkpoints against the PyTorch reference (tools/import/hf_reference.py)', () => {
  for (const [name, reference] of Object.entries(expected)) {
    it(`${name} (${reference.dtype}): logits match`, async () => {
      const loaded = await loadModel(join(HF_TINY, name))
      try {
        expect(loaded.format).toBe('huggingface')
        const values = await expectNoLeaks(() => logitsOf(loaded.model, reference.tokens))
        expectArraysClose(values, reference.logits.flat(), 1e-4, 1e-4)
      } finally {
        loaded.model.dispose()
      }
    })
  }

  it('blames a bad maxContext or a misspelled option, not the model files', async () => {
    const dir = join(HF_TINY, 'mistral-window')
    for (const maxContext of [-5, 0, 1.5, Number.NaN]) {
      await expect(loadModel(dir, { maxContext })).rejects.toMatchObject({
        name: 'ConfigError',
        code: 'INVALID_CONFIG',
        parameter: 'maxContext',
      })
    }
    await expect(loadModel(dir, { maxContext: -5 })).rejects.toThrow(
      'Invalid maxContext: -5 must be a positive integer (the number of positions to keep)',
    )
    await expect(loadModel(dir, { ropeTheta: -1 })).rejects.toThrow(
      /Invalid ropeTheta: -1 must be a positive finite number/,
    )
    await expect(loadModel(dir, { maxContex: 4 } as never)).rejects.toThrow(
      /^Invalid maxContex: is not a loadModel parameter \(did you mean 'maxContext'\?\); expected one of tokenizer, /,
    )
    await expect(loadModel(dir, { tokenizer: 5 } as never)).rejects.toThrow(
      /^Invalid tokenizer: must be a path or false, got 5$/,
    )
    await expect(loadModel(dir, { dummyPrefix: 'no' } as never)).rejects.toThrow(
      /^Invalid dummyPrefix: got 'no'; expected true or false$/,
    )
  })

  it('a tokenizer.json beside the model is read (and a broken one named); tokenizer.model gets advice', async () => {
    const dir = await mkdtemp(join(root, 'with-tokenizer-json-'))
    for (const name of ['config.json', 'model.safetensors'])
      await copyFile(join(HF_TINY, 'mistral-window', name), join(dir, name))
    await writeFile(join(dir, 'tokenizer.json'), '{"model": {"type": "Unknown"}}')
    await expect(loadModel(dir)).rejects.toThrow(
      /tokenizer\.json: @huggingface\/tokenizers cannot build this tokenizer/,
    )
    let loaded = await loadModel(dir, { tokenizer: false })
    expect(loaded.tokenizer).toBeUndefined()
    loaded.model.dispose()
    const vocab = Object.fromEntries(Array.from({ length: 24 }, (_, i) => [String.fromCharCode(97 + i), i]))
    const json = { model: { type: 'BPE', vocab, merges: [] } }
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(json))
    loaded = await loadModel(dir)
    expect(loaded.tokenizerPath).toBe(join(dir, 'tokenizer.json'))
    expect(loaded.tokenizer?.kind).toBe('huggingface')
    expect(loaded.tokenizer?.encode('abc', { bos: false })).toEqual([0, 1, 2])
    loaded.model.dispose()
    await rm(join(dir, 'tokenizer.json'))
    // A SentencePiece tokenizer.model is what llama2.c's tokenizer.py converts.
    await writeFile(join(dir, 'tokenizer.model'), 'x')
    loaded = await loadModel(dir)
    expect(loaded.notes.join('\n')).toMatch(
      /convert tokenizer\.model to a tokenizer\.bin with llama2\.c's tokenizer\.py/,
    )
    loaded.model.dispose()
  })

  it('mistral: the context is capped at the sliding window', async () => {
    const loaded = await loadModel(join(HF_TINY, 'mistral-window'))
    expect(loaded.model.config.nCtx).toBe(8)
    expect(loaded.notes.join()).toMatch(/sliding window/)
    loaded.model.dispose()
  })
})

describeWithBackends(`aidreams260K, both formats (${HAVE_AIDREAMS ? 'present' : 'ABSENT: skipped'})`, () => {
  let bin: LoadedModel
  let hf: LoadedModel
  beforeAll(async () => {
    if (!HAVE_AIDREAMS) return
    bin = await loadModel(AIDREAMS.bin)
    hf = await loadModel(AIDREAMS.hf, { tokenizer: AIDREAMS.tokenizer })
  })
  afterAll(() => {
    bin?.model.dispose()
    hf?.model.dispose()
  })

  it.skipIf(!HAVE_AIDREAMS)('finds tokenizer.bin beside model.bin and reads the expected configuration', () => {
    expect(bin.format).toBe('llama2c')
    expect(bin.tokenizerPath).toBe(AIDREAMS.tokenizer)
    expect(hf.format).toBe('huggingface')
    expect(bin.model.config).toEqual(hf.model.config)
    expect(bin.model.config).toMatchObject({
      dModel: 64,
      dMlp: 172,
      nLayers: 4,
      nHeads: 4,
      nKvHeads: 4,
      dVocab: 512,
      nCtx: 128,
      normEps: 1e-5,
      ropeTheta: 10000,
      tiedEmbeddings: true,
    })
  })

  it.skipIf(!HAVE_AIDREAMS)(
    'greedy decoding of "I dreamed" (BOS, 60 positions) gives the README text token for token, in both formats',
    async () => {
      for (const loaded of [bin, hf]) {
        const tokenizer = loaded.tokenizer as Llama2cTokenizer
        const prompt = tokenizer.encode('I dreamed')
        expect(prompt).toEqual([1, 303, 281, 269, 435, 447, 328])
        // llama2.c's `-n 60` runs positions 0..59 and prints the tokens of positions 1..60.
        const before = tf.memory().numTensors
        const { tokens, stopReasons } = await generate(loaded.model, prompt, {
          maxTokens: 61 - prompt.length,
          temperature: 0,
          eosToken: [tokenizer.eosId, tokenizer.bosId],
        })
        expect(tf.memory().numTensors).toBe(before)
        expect(stopReasons).toEqual(['max-tokens'])
        expect(tokenizer.decode([...prompt, ...(tokens[0] as number[])])).toBe(REFERENCE_TEXT)
      }
    },
  )

  it.skipIf(!HAVE_AIDREAMS)('from BOS alone the first 12 greedy ids are the README ones, in both formats', async () => {
    for (const loaded of [bin, hf]) {
      const { tokens } = await generate(loaded.model, [1], { maxTokens: 12, temperature: 0 })
      expect(tokens[0]).toEqual(REFERENCE_IDS_FROM_BOS)
    }
  })

  it.skipIf(!HAVE_AIDREAMS)(
    'the two formats give the same logits on a 128-token prompt (max abs difference < 1e-4)',
    async () => {
      const tokenizer = bin.tokenizer!
      const text =
        `${REFERENCE_TEXT}. ` + `${REFERENCE_TEXT} Then the dream shifts: numbers, rivers of light, and a quiet voice.`
      const prompt = tokenizer.encode(text).slice(0, 128)
      expect(prompt.length).toBe(128)
      const a = await logitsOf(bin.model, prompt)
      const b = await logitsOf(hf.model, prompt)
      const difference = maxAbsDiff(a, b)
      console.log(
        `[${tf.getBackend()}] aidreams260K llama2.c vs HF: max |logit difference| over 128 x 512 = ` +
          `${difference.toExponential(3)}`,
      )
      expect(difference).toBeLessThan(1e-4)
    },
  )

  it.skipIf(!HAVE_AIDREAMS)(
    'exports to Hugging Face and llama2.c files that load back with identical weights and logits',
    async () => {
      const config = bin.model.config
      const weights = await bin.model.getWeightData()
      const dir = join(root, `aidreams-hf-${tf.getBackend()}`)
      expect(
        await saveModelDirectory(dir, { config, weights }, { tokenizer: bin.tokenizer as Llama2cTokenizer }),
      ).toEqual({
        format: 'huggingface',
        files: ['config.json', 'model.safetensors', 'tokenizer.bin'],
      })
      const file = join(root, `aidreams-${tf.getBackend()}.bin`)
      await writeFile(file, serializeLlama2cCheckpoint(config, weights))
      const prompt = bin.tokenizer!.encode('I dreamed of a garden')
      const reference = await logitsOf(bin.model, prompt)
      for (const path of [dir, file]) {
        const again = await loadModel(path, { tokenizer: AIDREAMS.tokenizer })
        try {
          expect(again.model.config).toEqual(config)
          expect(sameWeights(await again.model.getWeightData(), weights)).toBeUndefined()
          expect(maxAbsDiff(await logitsOf(again.model, prompt), reference)).toBe(0)
        } finally {
          again.model.dispose()
        }
      }
    },
  )
})

const TINYSTORIES = join(REPO_ROOT, '../shared/models/tinystories656K')
const HAVE_TINYSTORIES = ['model.safetensors', 'tokenizer.json'].every((name) => existsSync(join(TINYSTORIES, name)))
if (!HAVE_TINYSTORIES) console.warn(`[attnlab] ${TINYSTORIES} is absent: the tied-embedding test on it is skipped`)

const TINYSTORIES_STATE = HAVE_TINYSTORIES ? 'present' : 'ABSENT: skipped'
// The first greedy ids from BOS ("Once upon a time, there was a little girl named Lily. She ", read back
// through tokenizer.json's vocabulary below): every mode checks its logits against them in one forward pass.
const STORY_START = [147, 201, 282, 215, 286, 598, 1662]
// The 40-step greedy decode is the slow part (40 passes through the KV cache) and tests the decode loop,
// which generate.test.ts covers on every mode: it runs on one mode, stock wasm (always there, and fast).
const DECODE_MODE = testBackends().includes('wasm') ? 'wasm' : testBackends()[0]
const TINYSTORIES_SUITE = `tinystories656K: tied embeddings stored once as lm_head.weight (${TINYSTORIES_STATE})`
describeWithBackends(TINYSTORIES_SUITE, (_, mode) => {
  it.skipIf(!HAVE_TINYSTORIES)('loads, and greedy decoding from BOS tells a TinyStories story', async () => {
    const loaded = await loadModel(TINYSTORIES, { dummyPrefix: false })
    try {
      expect(loaded.format).toBe('huggingface')
      expect(loaded.model.config).toMatchObject({
        dModel: 128,
        nLayers: 2,
        nHeads: 8,
        nKvHeads: 4,
        dVocab: 2048,
        tiedEmbeddings: true,
      })
      expect(loaded.notes.join('\n')).toMatch(/'model\.embed_tokens\.weight' is stored once, as 'lm_head\.weight'/)
      const before = tf.memory().numTensors
      // The logits from BOS + the story's start: each position's argmax is the next greedy id.
      const predicted = tf.tidy(() => tf.argMax(loaded.model.forward([[1, ...STORY_START.slice(0, -1)]]), -1))
      expect(await predicted.array()).toEqual([STORY_START])
      predicted.dispose()
      const decode = mode === DECODE_MODE
      const { tokens } = decode
        ? await generate(loaded.model, [1], { maxTokens: 40, temperature: 0 })
        : { tokens: [STORY_START] }
      expect(tf.memory().numTensors).toBe(before)
      if (decode) expect((tokens[0] as number[]).slice(0, STORY_START.length)).toEqual(STORY_START)
      // Its tokenizer.json is found beside it; the model was trained without the leading '▁' (its README).
      expect(loaded.tokenizerPath).toBe(join(TINYSTORIES, 'tokenizer.json'))
      const text = (loaded.tokenizer as Tokenizer).decode(tokens[0] as number[])
      console.log(`[${tf.getBackend()}] tinystories656K greedy from BOS: ${JSON.stringify(text)}`)
      // A wrong embedding (or a transposed one) gives no words; the model's training set opens stories this way.
      expect(text).toMatch(/^Once upon a time, there was a /)
      expect(text).toMatch(/^[A-Za-z ,.'!?\n]+$/)
    } finally {
      loaded.model.dispose()
    }
  })
})

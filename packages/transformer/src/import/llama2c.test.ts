import { readFileSync } from 'node:fs'
import { parseSafetensors, safetensorsToFloat32 } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { AIDREAMS, HAVE_AIDREAMS } from '../__fixtures__/import/aidreams.ts'
import { randomWeights, sameWeights } from '../__fixtures__/import/weights.ts'
import { createConfig, type TransformerConfig } from '../config.ts'
import { ModelFileError, UnsupportedModelError } from './errors.ts'
import { rotateHalfToInterleaved, type TensorMap } from './layout.ts'
import {
  LLAMA2C_MAGIC,
  llama2cFileBytes,
  parseLlama2cCheckpoint,
  parseLlama2cHeader,
  readLlama2cCheckpoint,
  serializeLlama2cCheckpoint,
} from './llama2c.ts'
import { llamaToHuggingFace } from './llama-weights.ts'

const tiedGqa = createConfig({
  architecture: 'llama',
  dVocab: 20,
  nCtx: 12,
  dModel: 16,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dMlp: 24,
  tiedEmbeddings: true,
})
const untied = createConfig({
  architecture: 'llama',
  dVocab: 18,
  nCtx: 10,
  dModel: 12,
  nLayers: 1,
  nHeads: 2,
  dMlp: 20,
  tiedEmbeddings: false,
  ropeTheta: 500000,
})

function expectModelFileError(fn: () => unknown, reason: string, message?: RegExp): ModelFileError {
  try {
    fn()
  } catch (error) {
    expect(error, String(error)).toBeInstanceOf(ModelFileError)
    const e = error as ModelFileError
    expect(e.reason).toBe(reason)
    expect(e.code).toBe('INVALID_CHECKPOINT')
    if (message !== undefined) expect(e.message).toMatch(message)
    return e
  }
  return expect.fail('did not throw')
}

/** A version 1 file, written here independently of the library's writer. */
function version1(config: TransformerConfig, weights: TensorMap): Uint8Array {
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
  layers('self_attn.v_proj.weight')
  layers('self_attn.o_proj.weight')
  layers('mlp.gate_proj.weight')
  layers('mlp.down_proj.weight')
  layers('mlp.up_proj.weight')
  if (!config.tiedEmbeddings) parts.push(get('lm_head.weight'))
  const floats = parts.reduce((n, p) => n + p.length, 0)
  const out = new Uint8Array(256 + 4 * floats)
  const view = new DataView(out.buffer)
  view.setUint32(0, LLAMA2C_MAGIC, true)
  view.setInt32(4, 1, true)
  ;[config.dModel, config.dMlp, config.nLayers, config.nHeads, config.nKvHeads, config.dVocab, config.nCtx].forEach(
    (v, i) => {
      view.setInt32(8 + 4 * i, v, true)
    },
  )
  view.setUint8(36, config.tiedEmbeddings ? 1 : 0)
  let offset = 256
  for (const part of parts) {
    for (const v of part) {
      view.setFloat32(offset, v, true)
      offset += 4
    }
  }
  return out
}

describe('llama2.c checkpoints', () => {
  it('round-trips tied GQA and untied models through the legacy format bit for bit', () => {
    for (const config of [tiedGqa, untied]) {
      const weights = randomWeights(config, 7)
      const bytes = serializeLlama2cCheckpoint(config, weights)
      expect(bytes.byteLength).toBe(llama2cFileBytes(parseLlama2cHeader(bytes).header))
      const read = readLlama2cCheckpoint(bytes)
      expect(read.format).toBe('llama2c')
      expect(read.config).toEqual(config)
      expect(sameWeights(read.weights, weights)).toBeUndefined()
      expect(read.specialTokens).toEqual({ bos: 1, eos: [2] })
    }
  })

  it('marks a separate classifier with a negative vocab_size', () => {
    const bytes = serializeLlama2cCheckpoint(untied, randomWeights(untied, 1))
    expect(new DataView(bytes.buffer).getInt32(20, true)).toBe(-18)
    expect(parseLlama2cHeader(bytes).header.sharedClassifier).toBe(false)
  })

  it('reads RoPE theta back from the RoPE tables, and falls back to 10000 when they say nothing', () => {
    const bytes = serializeLlama2cCheckpoint(untied, randomWeights(untied, 2))
    const parsed = parseLlama2cCheckpoint(bytes)
    expect(parsed.config.ropeTheta).toBe(500000)
    expect(parsed.notes.join()).toMatch(/500000 \(read back/)
    // Zero the tables: no theta can be inferred.
    const header = parsed.header
    const tableFloats = 2 * header.seqLen * (header.dim / header.nHeads / 2)
    const zeroed = bytes.slice()
    const classifierBytes = 4 * header.vocabSize * header.dim
    zeroed.fill(0, zeroed.byteLength - classifierBytes - 4 * tableFloats, zeroed.byteLength - classifierBytes)
    const fallback = parseLlama2cCheckpoint(zeroed)
    expect(fallback.config.ropeTheta).toBe(10000)
    expect(fallback.notes.join()).toMatch(/default/)
    expect(parseLlama2cCheckpoint(bytes, { ropeTheta: 20000 }).notes.join()).toMatch(/20000 as requested.*500000/)
  })

  it('reads float32 version 1 files (magic "ak42") into the same weights', () => {
    for (const config of [tiedGqa, untied]) {
      const weights = randomWeights(config, 3)
      const read = readLlama2cCheckpoint(version1(config, weights), { ropeTheta: config.ropeTheta })
      expect(read.config).toEqual(config)
      expect(sameWeights(read.weights, weights)).toBeUndefined()
    }
  })

  describe('rejects bad files with typed errors', () => {
    const weights = randomWeights(tiedGqa, 4)
    const good = serializeLlama2cCheckpoint(tiedGqa, weights)

    it('truncated: shorter than a header, header only, one float short', () => {
      expectModelFileError(
        () => parseLlama2cCheckpoint(good.subarray(0, 20), { file: 'm.bin' }),
        'truncated',
        /^m\.bin: 20 bytes is shorter than a llama2\.c header/,
      )
      expectModelFileError(
        () => parseLlama2cCheckpoint(good.subarray(0, 28)),
        'truncated',
        /describes \d+: \d+ bytes are missing/,
      )
      const e = expectModelFileError(
        () => parseLlama2cCheckpoint(good.subarray(0, good.byteLength - 4)),
        'truncated',
        /4 bytes are missing/,
      )
      expect(e.details.expectedBytes).toBe(good.byteLength)
    })

    it('truncated by a corrupt header that describes more bytes than 2^53: no 20-digit byte count', () => {
      const bytes = new Uint8Array(28 + 64)
      const view = new DataView(bytes.buffer)
      ;[1 << 30, 1 << 30, 64, 64, 64, 32000, 256].forEach((value, i) => {
        view.setInt32(i * 4, value, true)
      })
      const e = expectModelFileError(
        () => parseLlama2cCheckpoint(bytes),
        'truncated',
        /describes about 2\.07e\+21, more than any file \(corrupt header\?\)$/,
      )
      expect(e.message).not.toMatch(/\d{17}/)
    })

    it('oversized: trailing bytes, and a separate classifier behind a positive vocab_size', () => {
      const longer = new Uint8Array(good.byteLength + 8)
      longer.set(good)
      expectModelFileError(() => parseLlama2cCheckpoint(longer), 'oversized', /8 unexplained trailing bytes$/)
      // An untied file whose vocab_size sign was lost.
      const flipped = serializeLlama2cCheckpoint(untied, randomWeights(untied, 5))
      new DataView(flipped.buffer).setInt32(20, 18, true)
      expectModelFileError(() => parseLlama2cCheckpoint(flipped), 'oversized', /exactly one \[18, 12\] classifier/)
    })

    it('inconsistent headers: zero or negative sizes, indivisible heads, odd head width', () => {
      const withHeader = (values: number[]): Uint8Array => {
        const copy = good.slice()
        values.forEach((v, i) => {
          new DataView(copy.buffer).setInt32(4 * i, v, true)
        })
        return copy
      }
      expectModelFileError(() => parseLlama2cCheckpoint(withHeader([0])), 'invalid-header', /dim is 0/)
      expectModelFileError(() => parseLlama2cCheckpoint(withHeader([16, 24, -2])), 'invalid-header', /n_layers is -2/)
      expectModelFileError(
        () => parseLlama2cCheckpoint(withHeader([16, 24, 2, 3])),
        'invalid-header',
        /dim 16 is not divisible by n_heads 3/,
      )
      expectModelFileError(
        () => parseLlama2cCheckpoint(withHeader([16, 24, 2, 4, 3])),
        'invalid-header',
        /n_heads 4 is not divisible by n_kv_heads 3/,
      )
      expectModelFileError(
        () => parseLlama2cCheckpoint(withHeader([12, 24, 2, 4, 2])),
        'invalid-header',
        /head width .* 3 is odd/,
      )
      expectModelFileError(
        () => parseLlama2cCheckpoint(withHeader([16, 24, 2, 4, 2, 0])),
        'invalid-header',
        /vocab_size is 0/,
      )
    })

    it('non-finite weights, naming the tensor', () => {
      const copy = good.slice()
      new DataView(copy.buffer).setFloat32(28 + 4 * 5, Number.NaN, true) // inside the token embedding
      const e = expectModelFileError(() => readLlama2cCheckpoint(copy), 'non-finite', /model\.embed_tokens\.weight/)
      expect(e.tensor).toBe('model.embed_tokens.weight')
    })

    it('int8 (version 2) and unknown versions are unsupported, not misread', () => {
      const v2 = new Uint8Array(256)
      new DataView(v2.buffer).setUint32(0, LLAMA2C_MAGIC, true)
      new DataView(v2.buffer).setInt32(4, 2, true)
      expect(() => parseLlama2cCheckpoint(v2)).toThrow(UnsupportedModelError)
      expect(() => parseLlama2cCheckpoint(v2)).toThrow(/int8-quantized/)
      new DataView(v2.buffer).setInt32(4, 9, true)
      expect(() => parseLlama2cCheckpoint(v2)).toThrow(/unknown llama2.c checkpoint version 9/)
      expectModelFileError(() => parseLlama2cCheckpoint(v2.subarray(0, 100)), 'truncated', /version 1 header/)
    })

    it('the writer refuses what the format cannot express', () => {
      const gpt = createConfig({ architecture: 'gpt' })
      expect(() => serializeLlama2cCheckpoint(gpt, new Map())).toThrow(/architecture 'gpt'/)
      const biased = createConfig({
        architecture: 'llama',
        dVocab: 8,
        nCtx: 4,
        dModel: 8,
        nLayers: 1,
        nHeads: 2,
        dMlp: 8,
        bias: true,
      })
      expect(() => serializeLlama2cCheckpoint(biased, randomWeights(biased, 1))).toThrow(/biases/)
    })
  })
})

describe.skipIf(!HAVE_AIDREAMS)('aidreams260K model.bin against its Hugging Face copy', () => {
  it('the header, the file size and RoPE theta are as the README says', () => {
    const bytes = new Uint8Array(readFileSync(AIDREAMS.bin))
    const parsed = parseLlama2cCheckpoint(bytes, { file: AIDREAMS.bin })
    expect(parsed.header).toEqual({
      version: 0,
      dim: 64,
      hiddenDim: 172,
      nLayers: 4,
      nHeads: 4,
      nKvHeads: 4,
      vocabSize: 512,
      seqLen: 128,
      sharedClassifier: true,
    })
    expect(llama2cFileBytes(parsed.header)).toBe(bytes.byteLength)
    expect(parsed.config.ropeTheta).toBe(10000)
  })

  it('after the interleaved -> rotate-half permutation, every tensor equals the HF safetensors bit for bit', () => {
    const parsed = parseLlama2cCheckpoint(new Uint8Array(readFileSync(AIDREAMS.bin)))
    const hf = parseSafetensors(new Uint8Array(readFileSync(`${AIDREAMS.hf}/model.safetensors`)))
    expect([...parsed.tensors.keys()].sort()).toEqual([...hf.tensors.keys()].sort())
    for (const [name, tensor] of parsed.tensors) {
      const entry = hf.tensors.get(name)
      if (entry === undefined) expect.fail(`HF file lacks ${name}`)
      expect(entry.shape, name).toEqual(tensor.shape)
      expect(
        sameWeights(
          new Map([[name, tensor]]),
          new Map([[name, { shape: entry.shape, data: safetensorsToFloat32(entry) }]]),
        ),
      ).toBeUndefined()
    }
    // The permutation matters: q_proj as stored in model.bin (interleaved) differs from HF's.
    const raw = new Float32Array(
      readFileSync(AIDREAMS.bin).buffer.slice(28 + 4 * (512 * 64 + 4 * 64), 28 + 4 * (512 * 64 + 4 * 64 + 64 * 64)),
    )
    const hfQ = safetensorsToFloat32(hf.tensors.get('model.layers.0.self_attn.q_proj.weight') as never)
    expect(raw.some((v, i) => v !== hfQ[i])).toBe(true)
  })
})

describe('llama2.c reader fuzzing', () => {
  it(
    'random truncations, header edits and byte flips either ' + 'parse or throw a typed error, never anything else',
    async () => {
      const { Rng } = await import('@attnlab/core')
      const rng = Rng.fromSeed(2024)
      const good = serializeLlama2cCheckpoint(tiedGqa, randomWeights(tiedGqa, 9))
      let typed = 0
      for (let trial = 0; trial < 400; trial++) {
        let bytes = good.slice()
        const kind = trial % 4
        if (kind === 0) bytes = bytes.subarray(0, rng.int(bytes.byteLength))
        else if (kind === 1)
          new DataView(bytes.buffer).setInt32(
            4 * rng.int(7),
            rng.int(2 ** 31) - 2 ** 30 * (rng.int(2) === 0 ? 0 : 2),
            true,
          )
        else if (kind === 2) for (let i = 0; i < 8; i++) bytes[rng.int(bytes.byteLength)] = rng.int(256)
        else {
          const longer = new Uint8Array(bytes.byteLength + 1 + rng.int(64))
          longer.set(bytes)
          bytes = longer
        }
        try {
          readLlama2cCheckpoint(bytes)
        } catch (error) {
          if (!(error instanceof ModelFileError || error instanceof UnsupportedModelError)) throw error
          typed++
        }
      }
      expect(typed).toBeGreaterThan(250)
    },
  )
})

/**
 * llama2.c checkpoints (Karpathy, `karpathy/llama2.c`: `export.py`, `run.c`): reading the
 * legacy format (version 0) and the float32 version 1 format into attnlab `llama` weights, and
 * writing the legacy format.
 *
 * Legacy (version 0) layout, all little-endian:
 * - header: 7 int32 `dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len`;
 *   a negative `vocab_size` means the classifier is stored separately (`|vocab_size|` tokens);
 * - float32 arrays, each row-major in PyTorch's `[out, in]` layout: `token_embedding
 *   [vocab, dim]`, `rms_att [layers, dim]`, `wq [layers, dim, dim]`, `wk [layers, kv_dim, dim]`,
 *   `wv [layers, kv_dim, dim]`, `wo [layers, dim, dim]`, `rms_ffn [layers, dim]`,
 *   `w1 [layers, hidden, dim]`, `w2 [layers, dim, hidden]`, `w3 [layers, hidden, dim]`,
 *   `rms_final [dim]`, `freq_cis_real [seq_len, head_dim/2]`, `freq_cis_imag [seq_len,
 *   head_dim/2]`, then `wcls [vocab, dim]` only when the classifier is separate.
 *   (`kv_dim = dim * n_kv_heads / n_heads`, `head_dim = dim / n_heads`.)
 *
 * Version 1 (`export.py --version 1`): uint32 magic `0x616b3432` ("ak42"), int32 version 1, the
 * same 7 int32 (vocab positive), a uint8 shared-classifier flag, zero padding to 256 bytes, then
 * float32 `rms_att` (all layers), `rms_ffn`, `rms_final`, `token_embedding`, `wq`, `wk`, `wv`,
 * `wo`, `w1`, `w2`, `w3` (each for all layers), and `wcls` when not shared. Version 2 (int8
 * quantized) is rejected as unsupported.
 *
 * llama2.c's RoPE rotates interleaved pairs `(2i, 2i+1)`; the reader permutes the rows of `wq`
 * and `wk` into the rotate-half layout attnlab (and Hugging Face) use (see
 * {@link interleavedToRotateHalf}). RMSNorm epsilon is `1e-5` (hard-coded in `run.c`). RoPE
 * theta is read back from the legacy file's RoPE tables when they are consistent, else
 * llama2.c's `10000`.
 *
 * @module
 */
import { ConfigError, formatNumber } from '@attnlab/core'
import { createConfig, type TransformerConfig } from '../config.ts'
import type { ImportedCheckpoint } from './checkpoint.ts'
import { ModelFileError, UnsupportedModelError } from './errors.ts'
import { llamaFromHuggingFace, llamaToHuggingFace } from './llama-weights.ts'
import { interleavedToRotateHalf, rotateHalfToInterleaved, type Float32Tensor, type TensorMap } from './layout.ts'

/** Bytes of the legacy header (7 int32). @category Import */
export const LLAMA2C_LEGACY_HEADER_BYTES = 28
/** Bytes of the version 1 header (padded). @category Import */
export const LLAMA2C_V1_HEADER_BYTES = 256
/** The version 1/2 magic number, `"ak42"` read as a little-endian uint32. @category Import */
export const LLAMA2C_MAGIC = 0x616b3432
/** RMSNorm epsilon of llama2.c's `run.c`. @category Import */
export const LLAMA2C_NORM_EPS = 1e-5
/** RoPE theta of llama2.c's `run.c` (and Llama 2). @category Import */
export const LLAMA2C_ROPE_THETA = 10000

/**
 * The header of a llama2.c checkpoint, decoded.
 *
 * @category Import
 */
export interface Llama2cHeader {
  /** File format version: 0 (legacy) or 1 (float32 with magic). */
  readonly version: 0 | 1
  /** `dim`: width of the residual stream (attnlab `dModel`). */
  readonly dim: number
  /** `hidden_dim`: MLP width (attnlab `dMlp`). */
  readonly hiddenDim: number
  /** `n_layers`. */
  readonly nLayers: number
  /** `n_heads`: query heads. */
  readonly nHeads: number
  /** `n_kv_heads`: key/value heads. */
  readonly nKvHeads: number
  /** `|vocab_size|`. */
  readonly vocabSize: number
  /** `seq_len`: the context the model was trained for (attnlab `nCtx`). */
  readonly seqLen: number
  /** The classifier is the token embedding (legacy: `vocab_size > 0`). */
  readonly sharedClassifier: boolean
}

/**
 * Options of {@link readLlama2cCheckpoint}.
 *
 * @category Import
 */
export interface Llama2cReadOptions {
  /** The file name, for error messages. */
  readonly file?: string
  /**
   * RoPE base to use. Default: read back from the legacy file's RoPE tables when they are
   * consistent with one theta, else `10000` (what `run.c` uses).
   */
  readonly ropeTheta?: number
  /** RMSNorm epsilon (default `1e-5`, as in `run.c`). */
  readonly normEps?: number
}

/**
 * A parsed llama2.c file: its header and the weights in Hugging Face `LlamaForCausalLM` names
 * and layout (RoPE rows already permuted to rotate-half).
 *
 * @category Import
 */
export interface Llama2cCheckpoint {
  /** The decoded header. */
  readonly header: Llama2cHeader
  /** The configuration the header implies. */
  readonly config: TransformerConfig
  /** Hugging Face tensor names to values (`lm_head.weight` only for a separate classifier). */
  readonly tensors: TensorMap
  /** Notes on choices made (RoPE theta). */
  readonly notes: readonly string[]
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1

function readFloats(bytes: Uint8Array, byteOffset: number, count: number): Float32Array {
  const start = bytes.byteOffset + byteOffset
  if (LITTLE_ENDIAN) {
    if (start % 4 === 0) return new Float32Array(bytes.buffer, start, count).slice()
    return new Float32Array(bytes.buffer.slice(start, start + 4 * count))
  }
  const view = new DataView(bytes.buffer, start, 4 * count)
  const out = new Float32Array(count)
  for (let i = 0; i < count; i++) out[i] = view.getFloat32(4 * i, true)
  return out
}

interface Segment {
  readonly name: string
  readonly shape: readonly number[]
}

/** The float32 arrays of a file, in order (names are llama2.c's). */
function segments(header: Llama2cHeader): Segment[] {
  const { dim, hiddenDim: hidden, nLayers: L, nHeads, nKvHeads, vocabSize: vocab, seqLen } = header
  const headDim = dim / nHeads
  const kvDim = headDim * nKvHeads
  const embedding: Segment = { name: 'token_embedding_table', shape: [vocab, dim] }
  const rmsAtt: Segment = { name: 'rms_att_weight', shape: [L, dim] }
  const rmsFfn: Segment = { name: 'rms_ffn_weight', shape: [L, dim] }
  const rmsFinal: Segment = { name: 'rms_final_weight', shape: [dim] }
  const matrices: Segment[] = [
    { name: 'wq', shape: [L, dim, dim] },
    { name: 'wk', shape: [L, kvDim, dim] },
    { name: 'wv', shape: [L, kvDim, dim] },
    { name: 'wo', shape: [L, dim, dim] },
  ]
  const ffn: Segment[] = [
    { name: 'w1', shape: [L, hidden, dim] },
    { name: 'w2', shape: [L, dim, hidden] },
    { name: 'w3', shape: [L, hidden, dim] },
  ]
  const classifier: Segment[] = header.sharedClassifier ? [] : [{ name: 'wcls', shape: [vocab, dim] }]
  if (header.version === 0) {
    return [
      embedding,
      rmsAtt,
      ...matrices,
      rmsFfn,
      ...ffn,
      rmsFinal,
      { name: 'freq_cis_real', shape: [seqLen, headDim / 2] },
      { name: 'freq_cis_imag', shape: [seqLen, headDim / 2] },
      ...classifier,
    ]
  }
  return [rmsAtt, rmsFfn, rmsFinal, embedding, ...matrices, ...ffn, ...classifier]
}

function count(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1)
}

/**
 * Decodes and validates a llama2.c header (both versions) without reading any weight.
 *
 * @param bytes - the file (at least its header)
 * @param file - the file name, for messages
 * @returns the header and the byte offset where the weights begin
 * @throws {@link ModelFileError} `truncated` (file shorter than a header) or `invalid-header`
 *   (non-positive sizes, `dim` not divisible by `n_heads`, `n_heads` not divisible by
 *   `n_kv_heads`, odd head width)
 * @throws {@link UnsupportedModelError} for version 2 (int8) and unknown versions
 * @category Import
 */
export function parseLlama2cHeader(bytes: Uint8Array, file?: string): { header: Llama2cHeader; dataOffset: number } {
  if (bytes.byteLength < LLAMA2C_LEGACY_HEADER_BYTES) {
    throw new ModelFileError(
      'truncated',
      `${bytes.byteLength} bytes is shorter than a llama2.c header (7 int32 = ${LLAMA2C_LEGACY_HEADER_BYTES} bytes)`,
      { file },
    )
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let version: 0 | 1 = 0
  let base = 0
  let dataOffset = LLAMA2C_LEGACY_HEADER_BYTES
  if (view.getUint32(0, true) === LLAMA2C_MAGIC) {
    if (bytes.byteLength < LLAMA2C_V1_HEADER_BYTES) {
      throw new ModelFileError(
        'truncated',
        `${bytes.byteLength} bytes is shorter than a llama2.c version 1 header (${LLAMA2C_V1_HEADER_BYTES} bytes)`,
        { file },
      )
    }
    const fileVersion = view.getInt32(4, true)
    if (fileVersion === 2) {
      throw new UnsupportedModelError(
        'llama2.c version 2 checkpoints are int8-quantized (Q8_0); attnlab reads float32 checkpoints: re-export with ' +
          'export.py --version 0 or 1',
        { file, version: fileVersion },
      )
    }
    if (fileVersion !== 1) {
      throw new UnsupportedModelError(
        `unknown llama2.c checkpoint version ${fileVersion} (supported: legacy 0 and float32 version 1)`,
        {
          file,
          version: fileVersion,
        },
      )
    }
    version = 1
    base = 8
    dataOffset = LLAMA2C_V1_HEADER_BYTES
  }
  const fields = ['dim', 'hidden_dim', 'n_layers', 'n_heads', 'n_kv_heads', 'vocab_size', 'seq_len'] as const
  const values = fields.map((_, i) => view.getInt32(base + 4 * i, true))
  const [dim, hiddenDim, nLayers, nHeads, nKvHeads, rawVocab, seqLen] = values as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ]
  for (const [i, name] of fields.entries()) {
    const value = values[i] as number
    const ok = name === 'vocab_size' ? value !== 0 && (version === 0 || value > 0) : value > 0
    if (!ok) {
      throw new ModelFileError(
        'invalid-header',
        `header field ${name} is ${value}; expected a positive ` +
          `integer${name === 'vocab_size' && version === 0 ? ' (negative marks a separate classifier)' : ''} ` +
          `(header: ${fields.map((f, j) => `${f}=${values[j]}`).join(', ')}). Is this a llama2.c checkpoint?`,
        { file, tensor: name, value },
      )
    }
  }
  const sharedClassifier = version === 0 ? rawVocab > 0 : view.getUint8(base + 28) !== 0
  if (dim % nHeads !== 0) {
    throw new ModelFileError('invalid-header', `dim ${dim} is not divisible by n_heads ${nHeads}`, {
      file,
      tensor: 'dim',
    })
  }
  if (nHeads % nKvHeads !== 0) {
    throw new ModelFileError('invalid-header', `n_heads ${nHeads} is not divisible by n_kv_heads ${nKvHeads}`, {
      file,
      tensor: 'n_kv_heads',
    })
  }
  if ((dim / nHeads) % 2 !== 0) {
    throw new ModelFileError('invalid-header', `head width dim / n_heads = ${dim / nHeads} is odd; RoPE needs pairs`, {
      file,
      tensor: 'dim',
    })
  }
  return {
    header: {
      version,
      dim,
      hiddenDim,
      nLayers,
      nHeads,
      nKvHeads,
      vocabSize: Math.abs(rawVocab),
      seqLen,
      sharedClassifier,
    },
    dataOffset,
  }
}

/**
 * The exact size in bytes of a llama2.c file with this header.
 *
 * @category Import
 */
export function llama2cFileBytes(header: Llama2cHeader): number {
  const offset = header.version === 0 ? LLAMA2C_LEGACY_HEADER_BYTES : LLAMA2C_V1_HEADER_BYTES
  return offset + 4 * segments(header).reduce((sum, segment) => sum + count(segment.shape), 0)
}

/** Infers RoPE theta from the legacy RoPE tables, or returns undefined if they are not consistent. */
function thetaFromTables(real: Float32Array, imag: Float32Array, seqLen: number, headDim: number): number | undefined {
  const half = headDim / 2
  if (half < 2 || seqLen < 2) return undefined
  // Position 1 holds (cos f_i, sin f_i) with f_i = theta^(-2i/headDim); f_1 gives theta.
  const f1 = Math.atan2(imag[half + 1] as number, real[half + 1] as number)
  if (!(f1 > 0 && f1 < 1)) return undefined
  let theta = f1 ** (-headDim / 2)
  if (!Number.isFinite(theta) || theta <= 1) return undefined
  const rounded = Math.round(theta)
  if (Math.abs(rounded - theta) <= 1e-3 * theta) theta = rounded
  const tolerance = 2e-3
  for (let pos = 0; pos < seqLen; pos++) {
    for (let i = 0; i < half; i++) {
      const angle = pos * theta ** ((-2 * i) / headDim)
      const k = pos * half + i
      if (
        Math.abs(Math.cos(angle) - (real[k] as number)) > tolerance ||
        Math.abs(Math.sin(angle) - (imag[k] as number)) > tolerance
      ) {
        return undefined
      }
    }
  }
  return theta
}

/**
 * Parses a llama2.c checkpoint into Hugging Face-layout tensors. The file size is checked
 * exactly against the header before any weight is read.
 *
 * @param bytes - the whole file
 * @param options - file name for messages, RoPE theta / epsilon overrides
 * @throws {@link ModelFileError} `truncated` (fewer bytes than the header describes),
 *   `oversized` (more bytes; the message says when the excess is exactly one classifier, i.e.
 *   the sign of `vocab_size` is wrong) or `invalid-header`
 * @throws {@link UnsupportedModelError} for int8 (version 2) files
 * @category Import
 */
export function parseLlama2cCheckpoint(bytes: Uint8Array, options: Llama2cReadOptions = {}): Llama2cCheckpoint {
  const file = options.file
  const { header, dataOffset } = parseLlama2cHeader(bytes, file)
  const expected = llama2cFileBytes(header)
  const describe =
    `dim=${header.dim}, hidden_dim=${header.hiddenDim}, n_layers=${header.nLayers}, ` +
    `n_heads=${header.nHeads}, n_kv_heads=${header.nKvHeads}, ` +
    `vocab_size=${header.sharedClassifier ? '' : '-'}${header.vocabSize}, seq_len=${header.seqLen}`
  if (bytes.byteLength < expected) {
    throw new ModelFileError(
      'truncated',
      `file has ${bytes.byteLength} bytes but its header (${describe}) describes ` +
        (Number.isSafeInteger(expected)
          ? `${expected}: ${expected - bytes.byteLength} bytes are missing`
          : `${formatNumber(expected)}, more than any file (corrupt header?)`),
      { file, expectedBytes: expected, actualBytes: bytes.byteLength },
    )
  }
  if (bytes.byteLength > expected) {
    const excess = bytes.byteLength - expected
    const classifierBytes = 4 * header.vocabSize * header.dim
    const hint =
      header.sharedClassifier && excess === classifierBytes
        ? ` - exactly one [${header.vocabSize}, ${header.dim}] classifier: the header says it is shared ` +
          '(vocab_size > 0) but a separate one follows'
        : ''
    throw new ModelFileError(
      'oversized',
      `file has ${bytes.byteLength} bytes but its header (${describe}) describes ${expected}: ${excess} unexplained ` +
        `trailing bytes${hint}`,
      { file, expectedBytes: expected, actualBytes: bytes.byteLength },
    )
  }
  const arrays = new Map<string, Float32Array>()
  let offset = dataOffset
  for (const segment of segments(header)) {
    const n = count(segment.shape)
    arrays.set(segment.name, readFloats(bytes, offset, n))
    offset += 4 * n
  }
  const { dim, hiddenDim, nLayers, nHeads, nKvHeads, vocabSize, seqLen } = header
  const headDim = dim / nHeads
  const kvDim = headDim * nKvHeads
  const notes: string[] = []
  let ropeTheta = options.ropeTheta
  if (header.version === 0) {
    const inferred = thetaFromTables(
      arrays.get('freq_cis_real') as Float32Array,
      arrays.get('freq_cis_imag') as Float32Array,
      seqLen,
      headDim,
    )
    if (ropeTheta === undefined) {
      ropeTheta = inferred ?? LLAMA2C_ROPE_THETA
      notes.push(
        inferred === undefined
          ? `RoPE theta ${LLAMA2C_ROPE_THETA} (llama2.c's default; the file's RoPE tables do not determine one)`
          : `RoPE theta ${inferred} (read back from the file's RoPE tables)`,
      )
    } else if (inferred !== undefined && Math.abs(inferred - ropeTheta) > 1e-3 * ropeTheta) {
      notes.push(`RoPE theta ${ropeTheta} as requested, although the file's RoPE tables were computed with ${inferred}`)
    }
  } else if (ropeTheta === undefined) {
    ropeTheta = LLAMA2C_ROPE_THETA
    notes.push(`RoPE theta ${LLAMA2C_ROPE_THETA} (llama2.c's default; version 1 files do not store it)`)
  }
  let config: TransformerConfig
  try {
    config = createConfig({
      architecture: 'llama',
      dVocab: vocabSize,
      nCtx: seqLen,
      dModel: dim,
      nLayers,
      nHeads,
      nKvHeads,
      dHead: headDim,
      dMlp: hiddenDim,
      normEps: options.normEps ?? LLAMA2C_NORM_EPS,
      ropeTheta,
      tiedEmbeddings: header.sharedClassifier,
      bias: false,
    })
  } catch (error) {
    if (error instanceof ConfigError)
      throw new ModelFileError('invalid-header', error.message, { file, tensor: error.parameter }, { cause: error })
    throw error
  }
  const layer = (name: string, l: number, rows: number, cols: number): Float32Array => {
    const all = arrays.get(name) as Float32Array
    return all.slice(l * rows * cols, (l + 1) * rows * cols)
  }
  const tensors: TensorMap = new Map()
  const put = (name: string, shape: readonly number[], data: Float32Array): void => {
    tensors.set(name, { shape, data })
  }
  put('model.embed_tokens.weight', [vocabSize, dim], arrays.get('token_embedding_table') as Float32Array)
  for (let l = 0; l < nLayers; l++) {
    const p = `model.layers.${l}`
    put(`${p}.input_layernorm.weight`, [dim], layer('rms_att_weight', l, 1, dim))
    put(
      `${p}.self_attn.q_proj.weight`,
      [dim, dim],
      interleavedToRotateHalf(layer('wq', l, dim, dim), nHeads, headDim, dim),
    )
    put(
      `${p}.self_attn.k_proj.weight`,
      [kvDim, dim],
      interleavedToRotateHalf(layer('wk', l, kvDim, dim), nKvHeads, headDim, dim),
    )
    put(`${p}.self_attn.v_proj.weight`, [kvDim, dim], layer('wv', l, kvDim, dim))
    put(`${p}.self_attn.o_proj.weight`, [dim, dim], layer('wo', l, dim, dim))
    put(`${p}.post_attention_layernorm.weight`, [dim], layer('rms_ffn_weight', l, 1, dim))
    put(`${p}.mlp.gate_proj.weight`, [hiddenDim, dim], layer('w1', l, hiddenDim, dim))
    put(`${p}.mlp.down_proj.weight`, [dim, hiddenDim], layer('w2', l, dim, hiddenDim))
    put(`${p}.mlp.up_proj.weight`, [hiddenDim, dim], layer('w3', l, hiddenDim, dim))
  }
  put('model.norm.weight', [dim], arrays.get('rms_final_weight') as Float32Array)
  if (!header.sharedClassifier) put('lm_head.weight', [vocabSize, dim], arrays.get('wcls') as Float32Array)
  return { header, config, tensors, notes }
}

/**
 * Reads a llama2.c checkpoint into attnlab `llama` weights (validated, not yet in a model).
 *
 * @param bytes - the whole `.bin` file
 * @param options - file name for messages, RoPE theta / epsilon overrides
 * @returns configuration, weights by attnlab name, BOS 1 / EOS 2, notes
 * @throws {@link ModelFileError} for truncated, oversized, inconsistent or non-finite files
 * @throws {@link UnsupportedModelError} for int8 (version 2) files
 * @example
 * ```ts
 * const checkpoint = readLlama2cCheckpoint(new Uint8Array(await readFile('model.bin')))
 * console.log(checkpoint.config.dModel, checkpoint.weights.get('blocks.0.attn.W_Q')?.shape)
 * ```
 * @category Import
 */
export function readLlama2cCheckpoint(bytes: Uint8Array, options: Llama2cReadOptions = {}): ImportedCheckpoint {
  const parsed = parseLlama2cCheckpoint(bytes, options)
  const shapes = new Map([...parsed.tensors].map(([name, tensor]) => [name, tensor.shape]))
  const weights = llamaFromHuggingFace(
    parsed.config,
    shapes,
    (name) => (parsed.tensors.get(name) as Float32Tensor).data,
    {
      file: options.file,
    },
  )
  return { format: 'llama2c', config: parsed.config, weights, specialTokens: { bos: 1, eos: [2] }, notes: parsed.notes }
}

/**
 * Writes attnlab `llama` weights as a legacy (version 0) llama2.c checkpoint that llama2.c's
 * `run.c` reads: RoPE rows permuted back to interleaved pairs, RoPE tables for the model's
 * theta, a negative `vocab_size` and a trailing classifier when untied.
 *
 * @param config - a `llama` configuration with RMSNorm, SwiGLU, no biases and
 *   `dModel = nHeads * dHead` (what the format can express)
 * @param weights - every parameter by attnlab name
 * @returns the file bytes
 * @throws {@link UnsupportedModelError} when the configuration is not expressible in the format
 * @throws {@link ModelFileError} when `weights` does not match `config`
 * @category Import
 */
export function serializeLlama2cCheckpoint(
  config: TransformerConfig,
  weights: ReadonlyMap<string, Float32Tensor>,
): Uint8Array {
  const problems: string[] = []
  if (config.architecture !== 'llama') problems.push(`architecture '${config.architecture}' (needs 'llama')`)
  if (config.bias) problems.push('biases')
  if (!config.gatedMlp || config.actFn !== 'silu' || config.attnOnly) problems.push('an MLP other than SwiGLU')
  if (config.normalization !== 'rmsnorm') problems.push(`'${config.normalization}' normalization`)
  if (config.nHeads * config.dHead !== config.dModel)
    problems.push(`nHeads * dHead = ${config.nHeads * config.dHead} != dModel ${config.dModel}`)
  if (Math.abs(config.attnScale * Math.sqrt(config.dHead) - 1) > 1e-6)
    problems.push(`attnScale ${config.attnScale} (llama2.c uses 1/sqrt(dHead))`)
  if (config.parallelResidual) problems.push('parallel attention and MLP (parallelResidual)')
  if (config.rotaryDims !== 0 && config.rotaryDims !== config.dHead)
    problems.push(`a partial rotary (rotaryDims ${config.rotaryDims})`)
  if (problems.length > 0) {
    throw new UnsupportedModelError(`a llama2.c checkpoint cannot express ${problems.join(', ')}`)
  }
  const hf = llamaToHuggingFace(config, weights)
  const header: Llama2cHeader = {
    version: 0,
    dim: config.dModel,
    hiddenDim: config.dMlp,
    nLayers: config.nLayers,
    nHeads: config.nHeads,
    nKvHeads: config.nKvHeads,
    vocabSize: config.dVocab,
    seqLen: config.nCtx,
    sharedClassifier: config.tiedEmbeddings,
  }
  const out = new Uint8Array(llama2cFileBytes(header))
  const view = new DataView(out.buffer)
  const ints = [
    header.dim,
    header.hiddenDim,
    header.nLayers,
    header.nHeads,
    header.nKvHeads,
    header.sharedClassifier ? header.vocabSize : -header.vocabSize,
    header.seqLen,
  ]
  ints.forEach((value, i) => {
    view.setInt32(4 * i, value, true)
  })
  let offset = LLAMA2C_LEGACY_HEADER_BYTES
  const write = (data: Float32Array): void => {
    for (let i = 0; i < data.length; i++) view.setFloat32(offset + 4 * i, data[i] as number, true)
    offset += 4 * data.length
  }
  const get = (name: string): Float32Array => (hf.get(name) as Float32Tensor).data
  const dHead = config.dHead
  const perLayer = (suffix: string, transform?: (data: Float32Array) => Float32Array): void => {
    for (let l = 0; l < config.nLayers; l++) {
      const data = get(`model.layers.${l}.${suffix}`)
      write(transform === undefined ? data : transform(data))
    }
  }
  write(get('model.embed_tokens.weight'))
  perLayer('input_layernorm.weight')
  perLayer('self_attn.q_proj.weight', (d) => rotateHalfToInterleaved(d, config.nHeads, dHead, config.dModel))
  perLayer('self_attn.k_proj.weight', (d) => rotateHalfToInterleaved(d, config.nKvHeads, dHead, config.dModel))
  perLayer('self_attn.v_proj.weight')
  perLayer('self_attn.o_proj.weight')
  perLayer('post_attention_layernorm.weight')
  perLayer('mlp.gate_proj.weight')
  perLayer('mlp.down_proj.weight')
  perLayer('mlp.up_proj.weight')
  write(get('model.norm.weight'))
  const half = dHead / 2
  const real = new Float32Array(config.nCtx * half)
  const imag = new Float32Array(config.nCtx * half)
  for (let pos = 0; pos < config.nCtx; pos++) {
    for (let i = 0; i < half; i++) {
      const angle = pos * config.ropeTheta ** ((-2 * i) / dHead)
      real[pos * half + i] = Math.cos(angle)
      imag[pos * half + i] = Math.sin(angle)
    }
  }
  write(real)
  write(imag)
  if (!config.tiedEmbeddings) write(get('lm_head.weight'))
  return out
}

/**
 * Checkpoint files on disk (Node only): reading llama2.c `.bin` files and Hugging Face / attnlab
 * model directories, and writing directories atomically. Node modules are imported lazily inside
 * each function, so importing `@attnlab/transformer` in a browser stays possible (these
 * functions then throw `UNSUPPORTED`, naming the bytes-based function to use instead).
 *
 * @module
 */
import {
  IoError,
  isNodeRuntime,
  parseSafetensors,
  safetensorsToFloat32,
  SafetensorsError,
  serializeSafetensors,
  type SafetensorsEntry,
  UnsupportedError,
  type SafetensorsFile,
  type SafetensorsTensorInput,
} from '@attnlab/core'
import { configSchema, enumField, integerField, listField, parseConfig, showValue, z } from '@attnlab/core/schema'
import type { TransformerConfig } from '../config.ts'
import { parameterShapes } from '../model.ts'
import type { ImportedCheckpoint, SpecialTokens } from './checkpoint.ts'
import { ModelFileError, UnsupportedModelError } from './errors.ts'
import {
  gptFamilyConfigFor,
  gptFamilyFromHuggingFace,
  gptFamilyModelTypeFor,
  gptFamilyToHuggingFace,
  type GptFamilyModelType,
} from './gpt-family.ts'
import {
  attnlabConfigFor,
  ATTNLAB_MODEL_TYPE,
  configFromHuggingFace,
  huggingFaceConfigFor,
  huggingFaceIncompatibility,
  type HuggingFaceConfigOptions,
} from './huggingface.ts'
import { readLlama2cCheckpoint, type Llama2cReadOptions } from './llama2c.ts'
import {
  checkTensorSet,
  huggingFaceBiasLayout,
  llamaFromHuggingFace,
  llamaToHuggingFace,
  tiedEmbeddingAliases,
} from './llama-weights.ts'
import type { Float32Tensor, TensorMap } from './layout.ts'
import { Llama2cTokenizer } from './tokenizer.ts'

/** The single-file weights name of a Hugging Face directory. @category Import */
export const HF_WEIGHTS_FILE = 'model.safetensors'
/** The index of sharded Hugging Face weights. @category Import */
export const HF_INDEX_FILE = 'model.safetensors.index.json'
/** The configuration file of a Hugging Face directory. @category Import */
export const HF_CONFIG_FILE = 'config.json'
/** The llama2.c tokenizer file name attnlab looks for and writes. @category Import */
export const LLAMA2C_TOKENIZER_FILE = 'tokenizer.bin'
/** The llama2.c checkpoint a model folder may hold instead of `config.json` (`loadModel` reads it). @category Import */
export const LLAMA2C_MODEL_FILE = 'model.bin'

/**
 * Throws a clear `UNSUPPORTED` error outside Node.js (a browser bundle replaces `node:fs` with an
 * empty stub, so the file functions would otherwise fail with a misleading "not found").
 *
 * @param operation - the public function, named in the message
 */
export function requireNode(operation: string): void {
  if (isNodeRuntime()) return
  throw new UnsupportedError(
    `${operation} reads or writes files and needs Node.js; in a browser, fetch the bytes and use ` +
      'readLlama2cCheckpoint or parseSafetensors + modelFromCheckpoint, and Llama2cTokenizer.fromBytes',
    { operation },
  )
}

/** `node:fs/promises`, after {@link requireNode}. */
export async function fs(operation: string): Promise<typeof import('node:fs/promises')> {
  requireNode(operation)
  return import('node:fs/promises')
}

/** `node:path`, after {@link requireNode}. */
export async function pathModule(operation: string): Promise<typeof import('node:path')> {
  requireNode(operation)
  return import('node:path')
}

/**
 * Reads a whole file, mapping "not found" and other I/O failures to typed errors.
 *
 * @throws {@link ModelFileError} `missing-file` when it does not exist; `IoError` when it cannot be read
 */
export async function readFileBytes(path: string, what = 'file', operation = 'reading a file'): Promise<Uint8Array> {
  const { readFile } = await fs(operation)
  try {
    const buffer = await readFile(path)
    return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT')
      throw new ModelFileError('missing-file', `${what} not found`, { file: path }, { cause: error })
    if (code === 'EISDIR')
      throw new ModelFileError(
        'missing-file',
        `${what} expected, but this is a directory`,
        { file: path },
        { cause: error },
      )
    throw new IoError(`cannot read '${path}': ${(error as Error).message}`, { path }, { cause: error })
  }
}

async function readJson(path: string, what: string): Promise<unknown> {
  const text = new TextDecoder().decode(await readFileBytes(path, what))
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new ModelFileError(
      'invalid-json',
      // JSON.parse quotes the text around the fault, newlines included: keep the message on one line.
      `${what} is not valid JSON (${(error as Error).message.replace(/\s+/g, ' ')})`,
      { file: path },
      { cause: error },
    )
  }
}

async function exists(path: string): Promise<boolean> {
  const { stat } = await fs('readHuggingFaceDirectory')
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

/**
 * Reads a llama2.c `.bin` checkpoint file (see {@link readLlama2cCheckpoint}).
 *
 * @param path - the `.bin` file
 * @param options - RoPE theta / epsilon overrides
 * @throws {@link ModelFileError} (`missing-file`, `truncated`, `oversized`, `invalid-header`,
 *   `non-finite`); {@link UnsupportedModelError} for int8 files
 * @throws `UnsupportedError` (`@attnlab/core`) outside Node.js (in a browser: fetch the bytes and parse them)
 * @category Import
 */
export async function readLlama2cFile(
  path: string,
  options: Omit<Llama2cReadOptions, 'file'> = {},
): Promise<ImportedCheckpoint> {
  const bytes = await readFileBytes(path, 'llama2.c checkpoint', 'readLlama2cFile')
  return readLlama2cCheckpoint(bytes, { ...options, file: path })
}

/** The weights of a directory: every tensor entry by name, with the shard it came from. */
interface DirectoryTensors {
  readonly entries: Map<string, SafetensorsEntry>
  readonly files: readonly string[]
  /** The `__metadata__` of every shard, merged (it names tensors stored once under another name). */
  readonly metadata: Readonly<Record<string, string>>
}

function parseShard(bytes: Uint8Array, path: string): SafetensorsFile {
  try {
    return parseSafetensors(bytes)
  } catch (error) {
    if (error instanceof SafetensorsError) {
      throw new SafetensorsError(`${path}: ${error.message}`, error.tensor, { file: path })
    }
    throw error
  }
}

async function readDirectoryTensors(dir: string): Promise<DirectoryTensors> {
  const { join } = await pathModule('readHuggingFaceDirectory')
  const indexPath = join(dir, HF_INDEX_FILE)
  if (await exists(indexPath)) {
    const index = await readJson(indexPath, HF_INDEX_FILE)
    const weightMap =
      typeof index === 'object' && index !== null ? (index as Record<string, unknown>).weight_map : undefined
    if (typeof weightMap !== 'object' || weightMap === null || Array.isArray(weightMap)) {
      throw new ModelFileError('invalid-json', `${HF_INDEX_FILE} has no "weight_map" object`, { file: indexPath })
    }
    const map = weightMap as Record<string, unknown>
    const shards = new Map<string, string[]>()
    for (const [tensor, shard] of Object.entries(map)) {
      if (
        typeof shard !== 'string' ||
        shard.length === 0 ||
        shard.includes('/') ||
        shard.includes('\\') ||
        shard === '.' ||
        shard === '..'
      ) {
        throw new ModelFileError(
          'invalid-json',
          `weight_map['${tensor}'] = ${JSON.stringify(shard)} is not a file name in the directory`,
          {
            file: indexPath,
            tensor,
          },
        )
      }
      const list = shards.get(shard) ?? []
      list.push(tensor)
      shards.set(shard, list)
    }
    for (const shard of shards.keys()) {
      if (!(await exists(join(dir, shard)))) {
        throw new ModelFileError('missing-file', `shard '${shard}' named by ${HF_INDEX_FILE} not found`, {
          file: join(dir, shard),
        })
      }
    }
    // Read and validate every shard before converting anything.
    const entries = new Map<string, SafetensorsEntry>()
    const metadata: Record<string, string> = {}
    for (const [shard, listed] of shards) {
      const shardPath = join(dir, shard)
      const parsed = parseShard(await readFileBytes(shardPath, `shard '${shard}' named by ${HF_INDEX_FILE}`), shardPath)
      Object.assign(metadata, parsed.metadata)
      const tensors = parsed.tensors
      for (const name of listed) {
        if (!tensors.has(name)) {
          throw new ModelFileError(
            'missing-tensor',
            `${HF_INDEX_FILE} places '${name}' in '${shard}', which does not hold it`,
            { file: shardPath, tensor: name },
          )
        }
      }
      for (const [name, entry] of tensors) {
        if (map[name] !== shard) {
          throw new ModelFileError(
            'unexpected-tensor',
            map[name] === undefined
              ? `shard '${shard}' holds '${name}', which ${HF_INDEX_FILE} does not list`
              : `shard '${shard}' holds '${name}', which ${HF_INDEX_FILE} places in '${String(map[name])}'`,
            { file: shardPath, tensor: name },
          )
        }
        entries.set(name, entry)
      }
    }
    return { entries, files: [...shards.keys()].map((s) => join(dir, s)), metadata }
  }
  const single = join(dir, HF_WEIGHTS_FILE)
  if (await exists(single)) {
    const parsed = parseShard(await readFileBytes(single, HF_WEIGHTS_FILE), single)
    return { entries: new Map(parsed.tensors), files: [single], metadata: parsed.metadata }
  }
  const { readdir } = await fs('readHuggingFaceDirectory')
  const names = await readdir(dir)
  const pickle =
    names.find((n) => n.endsWith('.bin') && n.startsWith('pytorch_model')) ??
    names.find((n) => n.endsWith('.pt') || n.endsWith('.pth'))
  if (pickle !== undefined) {
    throw new UnsupportedModelError(
      `only PyTorch pickle weights ('${pickle}') were found; attnlab reads safetensors (${HF_WEIGHTS_FILE} or ` +
        `${HF_INDEX_FILE}). Convert with transformers: model.save_pretrained(dir, safe_serialization=True)`,
      { file: dir },
    )
  }
  throw new ModelFileError(
    'missing-file',
    `no weights: neither ${HF_WEIGHTS_FILE} nor ${HF_INDEX_FILE} is in the directory (found: ` +
      `${names.join(', ') || 'nothing'})`,
    {
      file: dir,
    },
  )
}

const FLOAT_DTYPES = new Set(['F32', 'F16', 'BF16', 'F64'])

/**
 * Options of {@link readHuggingFaceDirectory}.
 *
 * @category Import
 */
export type HuggingFaceReadOptions = Omit<HuggingFaceConfigOptions, 'file'>

/**
 * Reads a Hugging Face model directory (`config.json` + `model.safetensors`, or sharded with
 * `model.safetensors.index.json`) or an attnlab-native directory. Every shard is read and
 * validated (header, offsets, names, shapes, dtypes) before any value is converted; F16, BF16
 * and F64 are converted to float32.
 *
 * @param dir - the directory
 * @param options - context cap
 * @returns configuration, weights by attnlab name, special tokens, notes
 * @throws {@link ModelFileError} `missing-file` (no `config.json`, no weights, missing shard),
 *   `invalid-json`, `invalid-header`, `missing-tensor`, `unexpected-tensor` (including index
 *   and shard disagreeing), `shape-mismatch`, `non-finite`
 * @throws `SafetensorsError` (`INVALID_SAFETENSORS`) for a malformed safetensors file (oversized
 *   header, offsets out of bounds or overlapping...), naming the file and tensor
 * @throws {@link UnsupportedModelError} for other architectures or features (see
 *   {@link configFromHuggingFace}) and pickle-only directories
 * @throws `UnsupportedError` (`@attnlab/core`) outside Node.js (in a browser: fetch the bytes and parse them)
 * @category Import
 */
export async function readHuggingFaceDirectory(
  dir: string,
  options: HuggingFaceReadOptions = {},
): Promise<ImportedCheckpoint> {
  const { join } = await pathModule('readHuggingFaceDirectory')
  const { stat } = await fs('readHuggingFaceDirectory')
  let isDirectory = false
  try {
    isDirectory = (await stat(dir)).isDirectory()
  } catch (error) {
    throw new ModelFileError('missing-file', 'model directory not found', { file: dir }, { cause: error })
  }
  if (!isDirectory)
    throw new ModelFileError('missing-file', 'expected a model directory (config.json + model.safetensors)', {
      file: dir,
    })
  const configPath = join(dir, HF_CONFIG_FILE)
  if (!(await exists(configPath))) {
    const { readdir } = await fs('readHuggingFaceDirectory')
    const names = await readdir(dir)
    throw new ModelFileError(
      'missing-file',
      `not a model directory: it has no ${HF_CONFIG_FILE} (found: ` +
        `${names.slice(0, 10).join(', ') || 'nothing'}${names.length > 10 ? ', ...' : ''})`,
      { file: dir },
    )
  }
  const info = configFromHuggingFace(await readJson(configPath, HF_CONFIG_FILE), { ...options, file: configPath })
  const { entries, metadata } = await readDirectoryTensors(dir)
  for (const entry of entries.values()) {
    if (!FLOAT_DTYPES.has(entry.dtype)) {
      throw new ModelFileError(
        'invalid-header',
        `tensor '${entry.name}' has dtype ${entry.dtype}; weights must be F32, F16, BF16 or F64`,
        {
          file: dir,
          tensor: entry.name,
        },
      )
    }
  }
  const notes = [...info.notes]
  const gptFamily = info.modelType === 'gpt2' || info.modelType === 'gpt_neox' ? info.modelType : undefined
  if (info.modelType !== ATTNLAB_MODEL_TYPE && gptFamily === undefined) {
    // Tied embeddings stored once (only lm_head.weight, or a __metadata__ alias): read the stored tensor twice.
    const tied = tiedEmbeddingAliases(info.config, new Set(entries.keys()), metadata)
    for (const [absent, stored] of tied.aliases) entries.set(absent, entries.get(stored) as SafetensorsEntry)
    notes.push(...tied.notes)
  }
  const shapes = new Map([...entries].map(([name, entry]) => [name, entry.shape]))
  const read = (name: string): Float32Array => safetensorsToFloat32(entries.get(name) as SafetensorsEntry)
  let weights: TensorMap
  if (info.modelType === ATTNLAB_MODEL_TYPE) {
    const expected = new Map(parameterShapes(info.config))
    checkTensorSet(expected, shapes, { file: dir })
    weights = new Map()
    for (const [name, shape] of expected) {
      const data = read(name)
      const bad = data.findIndex((v) => !Number.isFinite(v))
      if (bad >= 0) {
        throw new ModelFileError(
          'non-finite',
          `tensor '${name}' holds ${data[bad]} at flat index ${bad}; weights must be finite`,
          { file: dir, tensor: name },
        )
      }
      weights.set(name, { shape, data })
    }
  } else if (gptFamily !== undefined) {
    weights = gptFamilyFromHuggingFace(info.config, gptFamily, shapes, read, { file: dir })
  } else {
    weights = llamaFromHuggingFace(info.config, shapes, read, { file: dir, biases: info.biases })
  }
  const format = info.modelType === ATTNLAB_MODEL_TYPE ? 'attnlab' : 'huggingface'
  return { format, config: info.config, weights, specialTokens: info.specialTokens, notes }
}

/** A value as a message names it: a class instance by its class (a tokenizer's JSON would fill the screen). */
function describeObject(value: unknown): string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return showValue(value)
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name
  return typeof name === 'string' && name !== 'Object' ? `a ${name}` : showValue(value)
}

/**
 * The schema of {@link SaveModelOptions}: each option's meaning and default, declared once.
 *
 * @category Import
 */
export const saveModelOptionsSchema = configSchema({
  /**
   * `huggingface`: a `LlamaForCausalLM` directory for `llama` models, a `GPT2LMHeadModel` (learned positions) or
   * `GPTNeoXForCausalLM` (rotary positions) directory for `gpt` models; `attnlab`: the attnlab-native directory
   * (any model); `auto` (default): `LlamaForCausalLM` when a `llama` model can be expressed exactly, else attnlab
   * (a `gpt` model is written as GPT-2 / GPT-NeoX only when asked for).
   */
  format: enumField('directory format (auto: Hugging Face llama when exact, else attnlab)', [
    'auto',
    'huggingface',
    'attnlab',
  ]).default('auto'),
  /** A tokenizer to store as `tokenizer.bin` beside the weights (a llama2.c tokenizer). */
  tokenizer: z
    .custom<Llama2cTokenizer>((value) => value instanceof Llama2cTokenizer, {
      error: (issue) => `got ${describeObject(issue.input)}; expected a Llama2cTokenizer (stored as tokenizer.bin)`,
    })
    .optional(),
  /** BOS/EOS ids to declare in `config.json` (default: the tokenizer's, if given). */
  specialTokens: configSchema({
    /** Beginning of sequence. */
    bos: integerField('beginning-of-sequence id', { min: 0 }).optional(),
    /** End of sequence (some models have several). */
    eos: listField('end-of-sequence ids', integerField('an end-of-sequence id', { min: 0 }), 0).optional(),
  }).optional(),
})

/**
 * Options of {@link saveModelDirectory} (see {@link saveModelOptionsSchema}).
 *
 * @category Import
 */
export type SaveModelOptions = Readonly<z.input<typeof saveModelOptionsSchema>>

/**
 * What {@link saveModelDirectory} wrote.
 *
 * @category Import
 */
export interface SavedModel {
  /** The format written. */
  readonly format: 'huggingface' | 'attnlab'
  /** The files written, relative to the directory. */
  readonly files: readonly string[]
}

/**
 * Writes a model as a directory, atomically (a temporary sibling renamed into place; an
 * existing directory is replaced only once everything is written): `config.json`,
 * `model.safetensors` (float32, metadata `format: pt`, as `transformers` expects), and
 * `tokenizer.bin` when a tokenizer is given. The Hugging Face form uses `LlamaForCausalLM`'s,
 * `GPT2LMHeadModel`'s or `GPTNeoXForCausalLM`'s exact tensor names (tied models store no unembedding, as
 * `save_pretrained` does) and loads back bit-identically with {@link readHuggingFaceDirectory}.
 *
 * @param dir - the directory to create or replace
 * @param model - the configuration and every parameter (e.g. `{ config: model.config,
 *   weights: await model.getWeightData() }`)
 * @param options - format, tokenizer, special tokens ({@link saveModelOptionsSchema})
 * @returns the format and files written
 * @throws {@link UnsupportedModelError} when `format: 'huggingface'` is asked for a model
 *   the Hugging Face classes cannot express (the message says why)
 * @throws {@link ModelFileError} when the weights do not match the configuration;
 *   `IoError` when the directory cannot be written
 * @throws `UnsupportedError` (`@attnlab/core`) outside Node.js (in a browser: fetch the bytes and parse them)
 * @throws `ConfigError` (`@attnlab/core`) naming the option for an unknown option name (with a did-you-mean), an
 *   unknown format, a tokenizer that is not a `Llama2cTokenizer` or bad special-token ids, before anything is written
 * @category Import
 */
export async function saveModelDirectory(
  dir: string,
  model: { readonly config: TransformerConfig; readonly weights: ReadonlyMap<string, Float32Tensor> },
  options: SaveModelOptions = {},
): Promise<SavedModel> {
  const settings = parseConfig(saveModelOptionsSchema, options, 'saveModelDirectory')
  requireNode('saveModelDirectory')
  const { config, weights } = model
  const requested = settings.format
  const reason = huggingFaceIncompatibility(config)
  const biases = reason === undefined ? huggingFaceBiasLayout(config, weights) : undefined
  const canHuggingFace = reason === undefined && biases !== undefined
  // gpt models are written as GPT-2 / GPT-NeoX only when asked for (auto keeps the attnlab format for them).
  const gpt = config.architecture === 'gpt' && requested === 'huggingface' ? gptFamilyModelTypeFor(config) : undefined
  const gptFamily: GptFamilyModelType | undefined = gpt !== undefined && 'modelType' in gpt ? gpt.modelType : undefined
  if (requested === 'huggingface' && !canHuggingFace && gptFamily === undefined) {
    const cannot =
      gpt !== undefined && 'reason' in gpt
        ? `GPT2LMHeadModel / GPTNeoXForCausalLM cannot express ${gpt.reason}`
        : `LlamaForCausalLM cannot express ${reason ?? 'non-zero MLP biases'}`
    throw new UnsupportedModelError(`${cannot}; save with format 'attnlab' (or 'auto')`, { file: dir })
  }
  const format = requested === 'attnlab' || (!canHuggingFace && gptFamily === undefined) ? 'attnlab' : 'huggingface'
  const tokenizer = settings.tokenizer
  const given = settings.specialTokens
  const specialTokens: SpecialTokens =
    given === undefined
      ? tokenizer === undefined
        ? {}
        : { bos: tokenizer.bosId, eos: [tokenizer.eosId] }
      : {
          ...(given.bos === undefined ? {} : { bos: given.bos }),
          ...(given.eos === undefined ? {} : { eos: given.eos }),
        }
  let json: Record<string, unknown>
  let tensors: TensorMap
  if (gptFamily !== undefined) {
    json = gptFamilyConfigFor(config, specialTokens)
    tensors = gptFamilyToHuggingFace(config, weights).tensors
  } else if (format === 'huggingface') {
    json = huggingFaceConfigFor(config, biases, specialTokens)
    tensors = llamaToHuggingFace(config, weights, biases)
  } else {
    json = attnlabConfigFor(config, specialTokens)
    const expected = new Map(parameterShapes(config))
    checkTensorSet(expected, new Map([...weights].map(([name, tensor]) => [name, tensor.shape])))
    tensors = new Map([...expected.keys()].map((name) => [name, weights.get(name) as Float32Tensor]))
  }
  const record: Record<string, SafetensorsTensorInput> = {}
  for (const [name, tensor] of tensors) record[name] = { dtype: 'F32', shape: [...tensor.shape], data: tensor.data }
  const safetensors = serializeSafetensors(record, { format: 'pt' })
  const files = [HF_CONFIG_FILE, HF_WEIGHTS_FILE]
  if (tokenizer !== undefined) files.push(LLAMA2C_TOKENIZER_FILE)
  const { writeDirectoryAtomic } = await import('@attnlab/core/node')
  const { join } = await pathModule('saveModelDirectory')
  const { writeFile } = await fs('saveModelDirectory')
  await writeDirectoryAtomic(dir, async (temp) => {
    await writeFile(join(temp, HF_CONFIG_FILE), `${JSON.stringify(json, null, 2)}\n`)
    await writeFile(join(temp, HF_WEIGHTS_FILE), safetensors)
    if (tokenizer !== undefined) await writeFile(join(temp, LLAMA2C_TOKENIZER_FILE), tokenizer.serialize())
  })
  return { format, files }
}

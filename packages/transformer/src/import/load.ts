/**
 * One entry point for real checkpoints: {@link loadModel} takes a llama2.c `.bin` file or a
 * Hugging Face / attnlab model directory and returns a ready model (and its tokenizer when one
 * is found or given). {@link modelFromCheckpoint} puts already-read weights into a model.
 *
 * @module
 */
import { ConfigError, type AttentionKernel } from '@attnlab/core'
import { booleanField, configSchema, integerField, parseConfig, showValue, z } from '@attnlab/core/schema'
import { createTransformer, transformerOptionsSchema, type Transformer } from '../model.ts'
import type { CheckpointFormat, ImportedCheckpoint, SpecialTokens } from './checkpoint.ts'
import { ModelFileError } from './errors.ts'
import { huggingFaceConfigOptionsSchema } from './huggingface.ts'
import {
  fs,
  HF_CONFIG_FILE,
  LLAMA2C_MODEL_FILE,
  LLAMA2C_TOKENIZER_FILE,
  pathModule,
  readFileBytes,
  readHuggingFaceDirectory,
  readLlama2cFile,
} from './files.ts'
import { Llama2cTokenizer, type Tokenizer } from './tokenizer.ts'
import { HuggingFaceTokenizer } from './tokenizer-json.ts'

/** A Hugging Face tokenizer file. */
export const HF_TOKENIZER_FILE = 'tokenizer.json'
/** The settings that go with a Hugging Face `tokenizer.json`. */
export const HF_TOKENIZER_CONFIG_FILE = 'tokenizer_config.json'

/**
 * The schema of {@link LoadModelOptions}: each option's meaning, range and default, declared once.
 *
 * @category Import
 */
export const loadModelOptionsSchema = configSchema({
  /**
   * A tokenizer to load with the model: a llama2.c `tokenizer.bin` or a Hugging Face
   * `tokenizer.json` (told apart by content; see {@link loadTokenizer}). Default: the one found
   * beside a `.bin` checkpoint (`tokenizer.bin`, else `tokenizer.json`) or inside a model
   * directory (`tokenizer.json`, else `tokenizer.bin`). `false`: no tokenizer.
   */
  tokenizer: z
    .custom<string | false>((value) => typeof value === 'string' || value === false, {
      error: (issue) => `must be a path or false, got ${showValue(issue.input)}`,
    })
    .optional(),
  /**
   * For a `tokenizer.json`: keep the leading `▁` its normalizer prepends (default `true`);
   * `false` for models trained without it (see `HuggingFaceTokenizerOptions.dummyPrefix`).
   * A llama2.c tokenizer always prepends its space, as `run.c` does.
   */
  dummyPrefix: booleanField("for a tokenizer.json: keep the leading '▁' its normalizer prepends").optional(),
  /** Attention kernel of the model (default dense). */
  attention: transformerOptionsSchema.shape.attention,
  /** Cap the context of Hugging Face models at this many positions (a positive integer). */
  maxContext: huggingFaceConfigOptionsSchema.shape.maxContext,
  /** RoPE theta for llama2.c checkpoints (default: read from the file, else 10000); a positive finite number. */
  ropeTheta: z
    .custom<number>((value) => typeof value === 'number' && Number.isFinite(value) && value > 0, {
      error: (issue) => `${showValue(issue.input)} must be a positive finite number`,
    })
    .optional(),
})

/**
 * Options of {@link loadModel} (see {@link loadModelOptionsSchema}).
 *
 * @category Import
 */
export type LoadModelOptions = Readonly<z.input<typeof loadModelOptionsSchema>>

/**
 * A loaded model and what came with it. The caller owns `model` (call `model.dispose()`).
 *
 * @category Import
 */
export interface LoadedModel {
  /** The model, weights loaded. */
  readonly model: Transformer
  /** The tokenizer, when one was given or found. */
  readonly tokenizer: Tokenizer | undefined
  /** Where the tokenizer came from, when there is one. */
  readonly tokenizerPath: string | undefined
  /** The format the model was read from. */
  readonly format: CheckpointFormat
  /** BOS/EOS ids the checkpoint (or tokenizer) declares. */
  readonly specialTokens: SpecialTokens
  /** Choices made while reading (inferred RoPE theta, capped context...). */
  readonly notes: readonly string[]
}

/**
 * Puts validated checkpoint weights into a new model. The model is created only now, after the
 * checkpoint was fully read and checked, and disposed again if assigning fails, so a failed load
 * never leaves a half-loaded model behind.
 *
 * @param checkpoint - from `readLlama2cCheckpoint`, `readLlama2cFile` or
 *   `readHuggingFaceDirectory`
 * @param options - the attention kernel
 * @returns the model (caller disposes)
 * @throws `ShapeError` / `AttnlabError` from `setWeights` if the weights do not match the
 *   configuration (impossible for checkpoints read by this library)
 * @category Import
 */
export function modelFromCheckpoint(
  checkpoint: ImportedCheckpoint,
  options: { readonly attention?: AttentionKernel } = {},
): Transformer {
  const model = createTransformer(
    checkpoint.config,
    options.attention === undefined ? {} : { attention: options.attention },
  )
  try {
    model.setWeights(checkpoint.weights)
  } catch (error) {
    model.dispose()
    throw error
  }
  return model
}

/**
 * The schema of {@link LoadTokenizerOptions}: each option's meaning and range, declared once (the
 * BOS/EOS ids against the tokenizer's vocabulary are checked by the tokenizer, as a file problem).
 *
 * @category Tokenizer
 */
export const loadTokenizerOptionsSchema = configSchema({
  /** The model's vocabulary size: a tokenizer.bin must hold exactly this many tokens, a tokenizer.json at most. */
  vocabSize: integerField("the model's vocabulary size (a tokenizer.bin holds exactly this many, a .json at most)", {
    min: 1,
  }).optional(),
  /** BOS id (default: llama2.c's 1; for a tokenizer.json, its `tokenizer_config.json`'s `bos_token`). */
  bosId: integerField('BOS id (default: llama2.c 1, or the tokenizer_config.json bos_token)').optional(),
  /** EOS id (default: llama2.c's 2; for a tokenizer.json, its `tokenizer_config.json`'s `eos_token`). */
  eosId: integerField('EOS id (default: llama2.c 2, or the tokenizer_config.json eos_token)').optional(),
  /** For a tokenizer.json: keep the leading `▁` (default `true`; see `HuggingFaceTokenizerOptions.dummyPrefix`). */
  dummyPrefix: loadModelOptionsSchema.shape.dummyPrefix,
})

/**
 * Options of {@link loadTokenizer} (see {@link loadTokenizerOptionsSchema}).
 *
 * @category Tokenizer
 */
export type LoadTokenizerOptions = Readonly<z.input<typeof loadTokenizerOptionsSchema>>

/** Whether the bytes are a JSON object (after an optional byte-order mark and white space). */
function looksLikeJson(bytes: Uint8Array): boolean {
  let start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0
  while (start < bytes.byteLength && [0x20, 0x09, 0x0a, 0x0d].includes(bytes[start] as number)) start++
  if (bytes[start] !== 0x7b) return false
  try {
    JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
    return true
  } catch {
    return false
  }
}

/**
 * Reads a tokenizer file: a llama2.c `tokenizer.bin` ({@link Llama2cTokenizer}) or a Hugging
 * Face `tokenizer.json` ({@link HuggingFaceTokenizer}, with the `tokenizer_config.json` beside
 * it when there is one), told apart by content (a JSON object is a `tokenizer.json`).
 *
 * @param path - the file
 * @param options - expected vocabulary size (the model's `dVocab`), BOS/EOS ids, `dummyPrefix`
 * @throws {@link ModelFileError} `missing-file`, `truncated`, `invalid-header`, `inconsistent`
 *   (a vocabulary that does not fit the model's), `invalid-json` (a `tokenizer.json` or
 *   `tokenizer_config.json` that is not a tokenizer)
 * @throws `AttnlabError` (`@attnlab/core`) `UNSUPPORTED` outside Node.js (in a browser: fetch the
 *   bytes and use `Llama2cTokenizer.fromBytes` or `HuggingFaceTokenizer.fromJson`)
 * @throws `ConfigError` (`@attnlab/core`) naming the option for an unknown option name (with a
 *   did-you-mean) or a value of the wrong kind ({@link loadTokenizerOptionsSchema}), before reading;
 *   `dummyPrefix: false` with a llama2.c tokenizer (it has no such option)
 * @example
 * ```ts
 * const tokenizer = await loadTokenizer('models/tinystories656K/tokenizer.json', { dummyPrefix: false })
 * tokenizer.decode(tokenizer.encode('Once upon a time')) // 'Once upon a time'
 * ```
 * @category Tokenizer
 */
export async function loadTokenizer(path: string, options: LoadTokenizerOptions = {}): Promise<Tokenizer> {
  const { dummyPrefix, ...given } = parseConfig(loadTokenizerOptionsSchema, options, 'loadTokenizer')
  const bytes = await readFileBytes(path, 'tokenizer', 'loadTokenizer')
  // Options given as undefined are absent (exactOptionalPropertyTypes: the tokenizers take no undefined).
  const rest = Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined)) as {
    vocabSize?: number
    bosId?: number
    eosId?: number
  }
  if (!looksLikeJson(bytes)) {
    if (dummyPrefix === false) {
      throw new ConfigError(
        'dummyPrefix',
        `applies to a Hugging Face tokenizer.json, but ${path} is a llama2.c tokenizer, which always prepends its ` +
          'space (as run.c does); drop dummyPrefix: false',
        { file: path },
      )
    }
    return Llama2cTokenizer.fromBytes(bytes, { ...rest, file: path })
  }
  const { dirname, join } = await pathModule('loadTokenizer')
  const configPath = join(dirname(path), HF_TOKENIZER_CONFIG_FILE)
  const { stat } = await fs('loadTokenizer')
  const hasConfig = await stat(configPath).then(
    (s) => s.isFile(),
    () => false,
  )
  const decoder = new TextDecoder('utf-8')
  let config: object = {}
  if (hasConfig) {
    const text = decoder.decode(await readFileBytes(configPath, 'tokenizer', 'loadTokenizer'))
    let parsed: unknown
    try {
      parsed = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)
    } catch (error) {
      throw new ModelFileError('invalid-json', `not valid JSON (${(error as Error).message})`, { file: configPath })
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new ModelFileError('invalid-json', 'not a JSON object', { file: configPath })
    config = parsed
  }
  return HuggingFaceTokenizer.fromJson(decoder.decode(bytes), config, {
    ...rest,
    file: path,
    ...(dummyPrefix === undefined ? {} : { dummyPrefix }),
  })
}

/** The first of `names` that is a file in `dir`, if any. */
async function firstFile(dir: string, names: readonly string[]): Promise<string | undefined> {
  const { stat } = await fs('loadModel')
  const { join } = await pathModule('loadModel')
  for (const name of names) {
    const candidate = join(dir, name)
    const found = await stat(candidate).then(
      (s) => s.isFile(),
      () => false,
    )
    if (found) return candidate
  }
  return undefined
}

async function isTrainingCheckpoint(manifestPath: string): Promise<boolean> {
  const { readFile } = await fs('loadModel')
  try {
    const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as { format?: unknown }
    return typeof manifest.format === 'string' && manifest.format.startsWith('attnlab-checkpoint/')
  } catch {
    return false
  }
}

/** Whether `dir` holds `model.bin` and neither `config.json` nor a training checkpoint's `manifest.json`. */
async function isLlama2cFolder(dir: string): Promise<boolean> {
  const { stat } = await fs('loadModel')
  const { join } = await pathModule('loadModel')
  const isFile = (name: string): Promise<boolean> =>
    stat(join(dir, name)).then(
      (s) => s.isFile(),
      () => false,
    )
  return (await isFile(LLAMA2C_MODEL_FILE)) && !(await isFile(HF_CONFIG_FILE)) && !(await isFile('manifest.json'))
}

async function kindOf(path: string): Promise<'directory' | 'file'> {
  const { stat } = await fs('loadModel')
  try {
    return (await stat(path)).isDirectory() ? 'directory' : 'file'
  } catch (error) {
    throw new ModelFileError(
      'missing-file',
      'model not found (expected a llama2.c .bin file or a model directory with config.json)',
      { file: path },
      { cause: error },
    )
  }
}

/**
 * Loads a model from a llama2.c `.bin` checkpoint or a Hugging Face (or attnlab-native) model
 * directory, plus its tokenizer (a llama2.c `tokenizer.bin` or a Hugging Face `tokenizer.json`)
 * when one is given or found beside it. Everything is read
 * and validated before the model is created.
 *
 * Formats: llama2.c legacy and version 1 float32 files; Hugging Face `model_type` `llama`,
 * `mistral`, `qwen2` with `model.safetensors` or sharded `model.safetensors.index.json` in
 * F32/F16/BF16; attnlab-native directories written by `saveModelDirectory`; attnlab training
 * checkpoints (a `manifest.json` of format `attnlab-checkpoint/1`, validated by
 * `loadCheckpoint`). A path to a directory's `config.json` or `model.safetensors` means the
 * directory; a folder holding a llama2.c `model.bin` and no `config.json` (like
 * the aidreams260K model's) means that `model.bin` (its `tokenizer.bin` is found beside it).
 * A directory's `tokenizer.json` (with its `tokenizer_config.json`) is found and read through
 * `@huggingface/tokenizers`; `dummyPrefix: false` drops its leading `▁`.
 *
 * @param path - a `.bin` file or a model directory
 * @param options - tokenizer path (or `false`), `dummyPrefix`, attention kernel, context cap, RoPE theta
 * @returns the model (caller disposes), the tokenizer, format, special tokens and notes
 * @throws {@link ModelFileError} for missing, truncated, oversized or inconsistent files (a
 *   directory without `config.json` included) and for a tokenizer whose vocabulary is not the
 *   model's; `SafetensorsError` for malformed safetensors; `CheckpointError` for a corrupt
 *   training checkpoint; {@link UnsupportedModelError} for
 *   architectures and features attnlab cannot run exactly
 * @example
 * ```ts
 * const { model, tokenizer } = await loadModel('models/aidreams260K/model.bin')
 * const ids = tokenizer!.encode('I dreamed')
 * const logits = model.forward([ids]) // [1, ids.length, 512]
 * ```
 * @throws `AttnlabError` (`@attnlab/core`) `UNSUPPORTED` outside Node.js (in a browser: fetch the bytes and parse them)
 * @throws `ConfigError` (`@attnlab/core`) naming the option for an unknown option name, a
 *   `maxContext` that is not a positive integer or a `ropeTheta` that is not a positive number
 * @category Import
 */
export async function loadModel(path: string, options: LoadModelOptions = {}): Promise<LoadedModel> {
  parseConfig(loadModelOptionsSchema, options, 'loadModel')
  const { basename, dirname, join } = await pathModule('loadModel')
  let target = path
  let kind = await kindOf(path)
  if (
    kind === 'file' &&
    (basename(path) === HF_CONFIG_FILE || path.endsWith('.safetensors') || path.endsWith('.safetensors.index.json'))
  ) {
    target = dirname(path)
    kind = 'directory'
  }
  const folderNotes: string[] = []
  if (kind === 'directory' && (await isLlama2cFolder(target))) {
    // A folder holding a llama2.c model.bin (and no config.json) means that file.
    target = join(target, LLAMA2C_MODEL_FILE)
    kind = 'file'
    folderNotes.push(`no ${HF_CONFIG_FILE} in ${path}: read the llama2.c checkpoint ${target}`)
  }
  let checkpoint: ImportedCheckpoint
  if (kind === 'directory' && (await isTrainingCheckpoint(join(target, 'manifest.json')))) {
    const { loadCheckpoint } = await import('../checkpoint.ts')
    const loaded = await loadCheckpoint(target)
    checkpoint = { format: 'checkpoint', config: loaded.config, weights: loaded.weights, specialTokens: {}, notes: [] }
  } else if (kind === 'directory') {
    checkpoint = await readHuggingFaceDirectory(
      target,
      options.maxContext === undefined ? {} : { maxContext: options.maxContext },
    )
  } else {
    checkpoint = await readLlama2cFile(target, options.ropeTheta === undefined ? {} : { ropeTheta: options.ropeTheta })
  }
  let tokenizer: Tokenizer | undefined
  let tokenizerPath: string | undefined
  const tokenizerOptions: LoadTokenizerOptions = {
    vocabSize: checkpoint.config.dVocab,
    ...(checkpoint.specialTokens.bos === undefined ? {} : { bosId: checkpoint.specialTokens.bos }),
    ...(checkpoint.specialTokens.eos?.[0] === undefined ? {} : { eosId: checkpoint.specialTokens.eos[0] }),
    ...(options.dummyPrefix === undefined ? {} : { dummyPrefix: options.dummyPrefix }),
  }
  if (typeof options.tokenizer === 'string') {
    tokenizerPath = options.tokenizer
    tokenizer = await loadTokenizer(options.tokenizer, tokenizerOptions)
  } else if (options.tokenizer === undefined) {
    // A Hugging Face directory ships tokenizer.json; a llama2.c file sits beside tokenizer.bin.
    const names =
      kind === 'directory' ? [HF_TOKENIZER_FILE, LLAMA2C_TOKENIZER_FILE] : [LLAMA2C_TOKENIZER_FILE, HF_TOKENIZER_FILE]
    const candidate = await firstFile(kind === 'directory' ? target : dirname(target), names)
    if (candidate !== undefined && candidate !== target) {
      tokenizerPath = candidate
      tokenizer = await loadTokenizer(candidate, tokenizerOptions)
    }
  }
  const notes = [...folderNotes, ...checkpoint.notes]
  if (tokenizerPath !== undefined && options.tokenizer === undefined)
    notes.push(`tokenizer found beside the model: ${tokenizerPath}`)
  if (tokenizer === undefined && kind === 'directory' && options.tokenizer === undefined) {
    const { readdir } = await fs('loadModel')
    if ((await readdir(target)).includes('tokenizer.model')) {
      notes.push(
        'tokenizer.model found, but attnlab reads tokenizer.bin and tokenizer.json files; convert tokenizer.model ' +
          "to a tokenizer.bin with llama2.c's tokenizer.py",
      )
    }
  }
  const model = modelFromCheckpoint(checkpoint, options.attention === undefined ? {} : { attention: options.attention })
  const specialTokens: SpecialTokens =
    tokenizer === undefined
      ? checkpoint.specialTokens
      : {
          ...(tokenizer.bosId === undefined ? {} : { bos: tokenizer.bosId }),
          ...(checkpoint.specialTokens.eos === undefined && tokenizer.eosId === undefined
            ? {}
            : { eos: checkpoint.specialTokens.eos ?? [tokenizer.eosId as number] }),
        }
  return { model, tokenizer, tokenizerPath, format: checkpoint.format, specialTokens, notes }
}

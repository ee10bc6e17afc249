/**
 * Hugging Face model configurations (`config.json`) to and from attnlab configurations, and the
 * attnlab-native variant of the directory format. Pure functions (no file access; see
 * `files.ts` for directories on disk).
 *
 * Supported `model_type`s, all run by attnlab's `llama` architecture (RMSNorm, rotate-half RoPE,
 * SwiGLU, grouped-query attention):
 * - `llama` (`LlamaForCausalLM`): optionally `attention_bias` (q/k/v/o biases); `mlp_bias`,
 *   `rope_scaling` other than the default, and activations other than `silu` are rejected.
 * - `mistral` (`MistralForCausalLM`): a Llama with an optional sliding window; when the window
 *   is shorter than `max_position_embeddings`, the context is capped at the window, which keeps
 *   the computation exact.
 * - `qwen2` (`Qwen2ForCausalLM`): a Llama with q/k/v biases; a sliding window in use
 *   (`use_sliding_window: true`) is rejected.
 *
 * `gpt2` (`GPT2LMHeadModel`) and `gpt_neox` (`GPTNeoXForCausalLM`, Pythia) run on attnlab's `gpt` architecture
 * (see `gpt-family.ts`). Everything else is rejected with {@link UnsupportedModelError}, naming what was found and
 * what is supported.
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import { configSchema, customField, parseConfig, showValue, z } from '@attnlab/core/schema'
import { configFromJSON, configToJSON, createConfig, type TransformerConfig } from '../config.ts'
import type { SpecialTokens } from './checkpoint.ts'
import { configFromFile, ModelFileError, UnsupportedModelError } from './errors.ts'
import { gptFamilyConfigFromHuggingFace, isGptFamily, type GptFamilyModelType } from './gpt-family.ts'
import { NO_BIASES, type LlamaBiasLayout } from './llama-weights.ts'

/**
 * Hugging Face `model_type`s attnlab loads into its `llama` architecture.
 *
 * @category Import
 */
export type HuggingFaceModelType = 'llama' | 'mistral' | 'qwen2'

/** The `model_type` of attnlab-native directories. @category Import */
export const ATTNLAB_MODEL_TYPE = 'attnlab'

/** The version of the attnlab-native directory format written by this library. @category Import */
export const ATTNLAB_FORMAT_VERSION = 1

const SUPPORTED: readonly HuggingFaceModelType[] = ['llama', 'mistral', 'qwen2']

const CLASS_NAMES: Readonly<Record<HuggingFaceModelType, string>> = {
  llama: 'LlamaForCausalLM',
  mistral: 'MistralForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
}

/**
 * Defaults of the `transformers` configuration classes for fields a `config.json` may omit.
 * (`LlamaConfig`, `MistralConfig`, `Qwen2Config`.)
 */
const DEFAULTS: Readonly<Record<HuggingFaceModelType, { maxPositions: number; normEps: number; ropeTheta: number }>> = {
  llama: { maxPositions: 2048, normEps: 1e-6, ropeTheta: 10000 },
  mistral: { maxPositions: 4096 * 32, normEps: 1e-6, ropeTheta: 10000 },
  qwen2: { maxPositions: 32768, normEps: 1e-6, ropeTheta: 10000 },
}

/**
 * The schema of {@link HuggingFaceConfigOptions} (its `maxContext` is also `loadModel`'s).
 *
 * @category Import
 */
export const huggingFaceConfigOptionsSchema = configSchema({
  /** The file, for messages. */
  file: customField<string>('the file, for messages').optional(),
  /**
   * Cap the context (`nCtx`) at this many positions (models declare up to 131072 positions;
   * attnlab precomputes nothing per position, but a smaller cap rejects longer inputs early).
   * A positive integer.
   */
  maxContext: z
    .custom<number>((value) => typeof value === 'number' && Number.isSafeInteger(value) && value >= 1, {
      error: (issue) => `${showValue(issue.input)} must be a positive integer (the number of positions to keep)`,
    })
    .optional(),
})

/**
 * Options of {@link configFromHuggingFace} (see {@link huggingFaceConfigOptionsSchema}).
 *
 * @category Import
 */
export type HuggingFaceConfigOptions = Readonly<z.input<typeof huggingFaceConfigOptionsSchema>>

/**
 * A Hugging Face configuration, understood.
 *
 * @category Import
 */
export interface HuggingFaceModelInfo {
  /** The `model_type` (or `attnlab` for attnlab-native directories). */
  readonly modelType: HuggingFaceModelType | GptFamilyModelType | typeof ATTNLAB_MODEL_TYPE
  /** The attnlab configuration. */
  readonly config: TransformerConfig
  /** Which biases the checkpoint stores (llama family; GPT-2 and GPT-NeoX store them all: `NO_BIASES` here). */
  readonly biases: LlamaBiasLayout
  /** `bos_token_id` / `eos_token_id`, when the config declares them. */
  readonly specialTokens: SpecialTokens
  /** Choices made while reading (defaults used, capped context...). */
  readonly notes: readonly string[]
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * Understands a parsed `config.json`.
 *
 * @param json - the parsed `config.json`
 * @param options - file name for messages, context cap
 * @returns the attnlab configuration, the bias layout, special tokens and notes
 * @throws {@link UnsupportedModelError} for another `model_type` (the message lists the
 *   supported ones), RoPE scaling, partial rotary, an activation other than `silu`, MLP biases,
 *   an active Qwen2 sliding window; for `gpt2` / `gpt_neox` the options `gptFamilyConfigFromHuggingFace` refuses
 * @throws {@link ModelFileError} `invalid-json` when the JSON is not an object or
 *   `invalid-header` when a required field is missing or out of range (named)
 * @throws `ConfigError` (`@attnlab/core`) naming the option for an unknown option or a
 *   `maxContext` that is not a positive integer
 * @category Import
 */
export function configFromHuggingFace(json: unknown, options: HuggingFaceConfigOptions = {}): HuggingFaceModelInfo {
  parseConfig(huggingFaceConfigOptionsSchema, options, 'configFromHuggingFace')
  const file = options.file
  if (!isRecord(json)) throw new ModelFileError('invalid-json', 'config.json is not a JSON object', { file })
  const modelType = json.model_type
  if (modelType === ATTNLAB_MODEL_TYPE) return attnlabNativeConfig(json, options)
  if (isGptFamily(json)) {
    const { maxContext } = options
    const extras = nativeExtras(json)
    const { config, notes } = gptFamilyConfigFromHuggingFace(json, json.model_type, { file, maxContext, extras })
    return { modelType: json.model_type, config, biases: NO_BIASES, specialTokens: specialTokens(json), notes }
  }
  if (typeof modelType !== 'string' || !(SUPPORTED as readonly string[]).includes(modelType)) {
    const architectures = Array.isArray(json.architectures) ? ` (architectures: ${json.architectures.join(', ')})` : ''
    throw new UnsupportedModelError(
      `model_type ${JSON.stringify(modelType)}${architectures} is not supported; attnlab loads Hugging Face ` +
        `model_type ${SUPPORTED.map((t) => `'${t}'`).join(', ')} ` +
        `(into its llama architecture), 'gpt2', 'gpt_neox' (into its gpt architecture) and attnlab-native ` +
        `directories (model_type '${ATTNLAB_MODEL_TYPE}')`,
      { file, modelType },
    )
  }
  const type = modelType as HuggingFaceModelType
  const defaults = DEFAULTS[type]
  const notes: string[] = []
  const int = (key: string, fallback?: number): number => {
    const value = json[key] ?? fallback
    if (value === undefined || value === null) {
      throw new ModelFileError('invalid-header', `config.json lacks '${key}' (a positive integer)`, {
        file,
        tensor: key,
      })
    }
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
      throw new ModelFileError(
        'invalid-header',
        `config.json '${key}' is ${JSON.stringify(value)}; expected a positive integer`,
        { file, tensor: key },
      )
    }
    return value
  }
  const num = (key: string, fallback: number): number => {
    const raw = json[key]
    if (raw === undefined || raw === null) {
      notes.push(`${key} not given; using the ${CLASS_NAMES[type]} default ${fallback}`)
      return fallback
    }
    if (typeof raw !== 'number' || !Number.isFinite(raw) || raw <= 0) {
      throw new ModelFileError(
        'invalid-header',
        `config.json '${key}' is ${JSON.stringify(raw)}; expected a positive number`,
        { file, tensor: key },
      )
    }
    return raw
  }
  const flag = (key: string, fallback: boolean): boolean => {
    const raw = json[key]
    if (raw === undefined || raw === null) return fallback
    if (typeof raw !== 'boolean') {
      throw new ModelFileError(
        'invalid-header',
        `config.json '${key}' is ${JSON.stringify(raw)}; expected true or false`,
        { file, tensor: key },
      )
    }
    return raw
  }
  const unsupported = (what: string, key: string): never => {
    throw new UnsupportedModelError(
      `${what} (config.json '${key}' = ${JSON.stringify(json[key])}); attnlab's llama architecture would compute ` +
        'something else, so the model is not loaded',
      {
        file,
        field: key,
      },
    )
  }

  const dModel = int('hidden_size')
  const nHeads = int('num_attention_heads')
  const nKvHeads = int('num_key_value_heads', nHeads)
  if (dModel % nHeads !== 0 && (json.head_dim === undefined || json.head_dim === null)) {
    // Without head_dim the head size is hidden_size / num_attention_heads, which must divide.
    throw new ModelFileError(
      'invalid-header',
      `config.json hidden_size ${dModel} is not divisible by num_attention_heads ${nHeads}, and it lacks ` +
        `'head_dim' (a positive integer) to give the head size explicitly`,
      { file, tensor: 'head_dim' },
    )
  }
  const dHead = int('head_dim', dModel / nHeads)
  const dMlp = int('intermediate_size')
  const nLayers = int('num_hidden_layers')
  const dVocab = int('vocab_size')
  let nCtx = int('max_position_embeddings', defaults.maxPositions)
  const hiddenAct = json.hidden_act ?? json.hidden_activation ?? 'silu'
  if (hiddenAct !== 'silu' && hiddenAct !== 'swish')
    unsupported(`activation ${JSON.stringify(hiddenAct)} (the llama architecture's SwiGLU uses silu)`, 'hidden_act')
  const ropeScaling = json.rope_scaling
  if (ropeScaling !== undefined && ropeScaling !== null) {
    const kind = isRecord(ropeScaling) ? (ropeScaling.rope_type ?? ropeScaling.type) : undefined
    if (kind !== 'default') unsupported(`RoPE scaling ${JSON.stringify(kind)}`, 'rope_scaling')
  }
  if (
    json.partial_rotary_factor !== undefined &&
    json.partial_rotary_factor !== null &&
    json.partial_rotary_factor !== 1
  ) {
    unsupported('partial rotary embeddings', 'partial_rotary_factor')
  }
  if (flag('mlp_bias', false))
    unsupported('MLP biases (the llama architecture has no bias on the SwiGLU gate)', 'mlp_bias')
  let biases: LlamaBiasLayout = NO_BIASES
  if (type === 'llama' && flag('attention_bias', false)) biases = { qkv: true, o: true }
  if (type === 'qwen2') {
    biases = { qkv: true, o: false }
    if (flag('use_sliding_window', false))
      unsupported('an active sliding window (Qwen2 use_sliding_window)', 'use_sliding_window')
  }
  if (type === 'mistral' && json.sliding_window !== undefined && json.sliding_window !== null) {
    const window = int('sliding_window')
    if (window < nCtx) {
      notes.push(
        `context capped at the sliding window: ${window} positions (max_position_embeddings ${nCtx}); within the ` +
          'window sliding-window attention is full causal attention',
      )
      nCtx = window
    }
  }
  if (options.maxContext !== undefined && options.maxContext < nCtx) {
    notes.push(`context capped at ${options.maxContext} positions as asked (the model declares ${nCtx})`)
    nCtx = options.maxContext
  }
  const normEps = num('rms_norm_eps', defaults.normEps)
  const ropeTheta = num('rope_theta', defaults.ropeTheta)
  const tied = flag('tie_word_embeddings', false)
  const config = configFromFile(file, () =>
    createConfig({
      ...nativeExtras(json),
      architecture: 'llama',
      dVocab,
      nCtx,
      dModel,
      nLayers,
      nHeads,
      nKvHeads,
      dHead,
      dMlp,
      normEps,
      ropeTheta,
      tiedEmbeddings: tied,
      bias: biases.qkv || biases.o,
    }),
  )
  return { modelType: type, config, biases, specialTokens: specialTokens(json), notes }
}

/** Fields an attnlab export stored under `attnlab_config` that Hugging Face has no name for. */
function nativeExtras(
  json: Record<string, unknown>,
): Partial<Pick<TransformerConfig, 'seed' | 'initRange' | 'dropout'>> {
  const stored = json.attnlab_config
  if (!isRecord(stored)) return {}
  const out: { seed?: number; initRange?: number; dropout?: number } = {}
  if (typeof stored.seed === 'number') out.seed = stored.seed
  if (typeof stored.initRange === 'number') out.initRange = stored.initRange
  if (typeof stored.dropout === 'number') out.dropout = stored.dropout
  return out
}

function specialTokens(json: Record<string, unknown>): SpecialTokens {
  const out: { bos?: number; eos?: number[] } = {}
  if (typeof json.bos_token_id === 'number' && Number.isSafeInteger(json.bos_token_id)) out.bos = json.bos_token_id
  const eos = json.eos_token_id
  if (typeof eos === 'number' && Number.isSafeInteger(eos)) out.eos = [eos]
  else if (Array.isArray(eos) && eos.every((e) => typeof e === 'number' && Number.isSafeInteger(e)))
    out.eos = eos as number[]
  return out
}

function attnlabNativeConfig(json: Record<string, unknown>, options: HuggingFaceConfigOptions): HuggingFaceModelInfo {
  const file = options.file
  const version = json.attnlab_format_version
  if (version !== ATTNLAB_FORMAT_VERSION) {
    throw new UnsupportedModelError(
      `attnlab format version ${JSON.stringify(version)} is not supported (this library reads version ` +
        `${ATTNLAB_FORMAT_VERSION})`,
      {
        file,
      },
    )
  }
  let config: TransformerConfig
  try {
    config = configFromJSON(json.attnlab_config)
  } catch (error) {
    if (error instanceof ConfigError) {
      throw new ModelFileError(
        'invalid-header',
        `attnlab_config: ${error.message}`,
        { file, tensor: error.parameter },
        { cause: error },
      )
    }
    throw error
  }
  const notes: string[] = []
  if (options.maxContext !== undefined && options.maxContext < config.nCtx) {
    if (config.architecture === 'minimal' || config.positional === 'learned') {
      notes.push(`context not capped: the ${config.architecture} model has one parameter row per position`)
    } else {
      config = createConfig({ ...config, nCtx: options.maxContext })
      notes.push(`context capped at ${options.maxContext} positions as asked`)
    }
  }
  return { modelType: ATTNLAB_MODEL_TYPE, config, biases: NO_BIASES, specialTokens: specialTokens(json), notes }
}

/**
 * Whether Hugging Face's `LlamaForCausalLM` computes exactly what this attnlab configuration
 * computes (so a model can be exported in the Hugging Face format): `llama` architecture,
 * RMSNorm, rotary positions, SwiGLU, `attnScale = 1/sqrt(dHead)`, no dropout-only differences.
 * Biases are handled separately ({@link huggingFaceBiasLayout}).
 *
 * @param config - any attnlab configuration
 * @returns `undefined` when compatible, else the reason it is not
 * @category Import
 */
export function huggingFaceIncompatibility(config: TransformerConfig): string | undefined {
  if (config.architecture !== 'llama') return `architecture '${config.architecture}' (Hugging Face export covers llama)`
  if (config.normalization !== 'rmsnorm') return `normalization '${config.normalization}'`
  if (config.positional !== 'rotary') return `positional '${config.positional}'`
  if (config.attnOnly || !config.gatedMlp || config.actFn !== 'silu') return 'an MLP other than SwiGLU'
  if (config.parallelResidual) return 'parallel attention and MLP (parallelResidual)'
  if (config.rotaryDims !== 0 && config.rotaryDims !== config.dHead)
    return `a partial rotary (rotaryDims ${config.rotaryDims})`
  if (Math.abs(config.attnScale * Math.sqrt(config.dHead) - 1) > 1e-6)
    return `attnScale ${config.attnScale} (LlamaForCausalLM uses 1/sqrt(dHead))`
  return undefined
}

/**
 * The `config.json` of a Hugging Face `LlamaForCausalLM` export of an attnlab `llama` model.
 * Every field `transformers` reads is written; the full attnlab configuration is kept under
 * `attnlab_config` (ignored by `transformers`) so fields Hugging Face has no name for (seed,
 * init range, dropout) survive a round trip.
 *
 * @param config - a configuration {@link huggingFaceIncompatibility} accepts
 * @param biases - the bias layout of the exported tensors
 * @param specialTokens - BOS/EOS ids to declare
 * @returns the JSON object
 * @throws {@link UnsupportedModelError} when the configuration is not expressible
 * @category Import
 */
export function huggingFaceConfigFor(
  config: TransformerConfig,
  biases: LlamaBiasLayout = NO_BIASES,
  specialTokens: SpecialTokens = {},
): Record<string, unknown> {
  const reason = huggingFaceIncompatibility(config)
  if (reason !== undefined)
    throw new UnsupportedModelError(`LlamaForCausalLM cannot express ${reason}; export in the attnlab format instead`)
  if (biases.qkv !== biases.o)
    throw new UnsupportedModelError('LlamaForCausalLM biases come as q/k/v/o together (attention_bias)')
  const json: Record<string, unknown> = {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_size: config.dModel,
    intermediate_size: config.dMlp,
    num_hidden_layers: config.nLayers,
    num_attention_heads: config.nHeads,
    num_key_value_heads: config.nKvHeads,
    head_dim: config.dHead,
    vocab_size: config.dVocab,
    max_position_embeddings: config.nCtx,
    rms_norm_eps: config.normEps,
    rope_theta: config.ropeTheta,
    rope_scaling: null,
    tie_word_embeddings: config.tiedEmbeddings,
    hidden_act: 'silu',
    attention_bias: biases.qkv,
    attention_dropout: 0,
    mlp_bias: false,
    initializer_range: config.initRange,
    torch_dtype: 'float32',
  }
  if (specialTokens.bos !== undefined) json.bos_token_id = specialTokens.bos
  if (specialTokens.eos !== undefined)
    json.eos_token_id = specialTokens.eos.length === 1 ? specialTokens.eos[0] : [...specialTokens.eos]
  json.attnlab_config = configToJSON(config)
  return json
}

/**
 * The `config.json` of an attnlab-native export (any architecture): `model_type: "attnlab"`,
 * the format version and the full configuration. `transformers` does not load these.
 *
 * @param config - any attnlab configuration
 * @param specialTokens - BOS/EOS ids to declare
 * @category Import
 */
export function attnlabConfigFor(
  config: TransformerConfig,
  specialTokens: SpecialTokens = {},
): Record<string, unknown> {
  const json: Record<string, unknown> = {
    model_type: ATTNLAB_MODEL_TYPE,
    architectures: ['AttnlabTransformer'],
    attnlab_format_version: ATTNLAB_FORMAT_VERSION,
    attnlab_config: configToJSON(config),
  }
  if (specialTokens.bos !== undefined) json.bos_token_id = specialTokens.bos
  if (specialTokens.eos !== undefined)
    json.eos_token_id = specialTokens.eos.length === 1 ? specialTokens.eos[0] : [...specialTokens.eos]
  return json
}

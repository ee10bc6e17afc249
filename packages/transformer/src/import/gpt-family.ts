/**
 * Hugging Face GPT-2 (`GPT2LMHeadModel`) and GPT-NeoX / Pythia (`GPTNeoXForCausalLM`) directories to and from
 * attnlab's `gpt` architecture: the `config.json` mapping and the weight mapping. Pure functions (no file access;
 * `files.ts` reads and writes the directories).
 *
 * GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners", sec. 2.3) is attnlab's `gpt`
 * exactly: learned positions, pre-LN blocks, LayerNorms with biases, biased projections, `1/sqrt(dHead)` scores,
 * GELU (`gelu_new`, the tanh form), final LayerNorm, the unembedding tied to the token embedding. Its `Conv1D`
 * weights are stored `[in, out]`, and `attn.c_attn` fuses the queries, keys and values as `q | k | v` column
 * blocks of `n_embd` each.
 *
 * GPT-NeoX (Black et al., "GPT-NeoX-20B", arXiv 2204.06745, sec. 2.1; the Pythia suite, Biderman et al., arXiv
 * 2304.01373) is `gpt` with rotary positions on the first `rotaryDims = floor(dHead * rotary_pct)` dimensions of
 * each head (rotate-half), parallel attention and MLP (`use_parallel_residual`) and a separate unembedding
 * (`embed_out`); its `attention.query_key_value` (`nn.Linear`, `[out, in]`) lays its output out per head as
 * `[nHeads, 3, dHead]` (each head's q, k, v together), not as q | k | v blocks.
 *
 * | attnlab | shape | GPT-2 (`transformer.` prefix optional) | GPT-NeoX (`gpt_neox.`) |
 * | --- | --- | --- | --- |
 * | `embed.W_E` | `[dVocab, dModel]` | `wte.weight` | `embed_in.weight` |
 * | `pos_embed.W_pos` | `[nCtx, dModel]` | `wpe.weight` | (rotary) |
 * | `blocks.{l}.ln1.w`, `.b` | `[dModel]` | `h.{l}.ln_1.weight`, `.bias` | `layers.{l}.input_layernorm.*` |
 * | `blocks.{l}.attn.W_Q`, `W_K`, `W_V` | `[nHeads, dModel, dHead]` | `h.{l}.attn.c_attn.weight` | (see below) |
 * | `blocks.{l}.attn.b_Q`, `b_K`, `b_V` | `[nHeads, dHead]` | `h.{l}.attn.c_attn.bias` | (see below) |
 * | `blocks.{l}.attn.W_O`, `b_O` | `[nHeads, dHead, dModel]`, `[dModel]` | `h.{l}.attn.c_proj.*` | `...dense.*` |
 * | `blocks.{l}.ln2.w`, `.b` | `[dModel]` | `h.{l}.ln_2.*` | `layers.{l}.post_attention_layernorm.*` |
 * | `blocks.{l}.mlp.W_in`, `b_in` | `[dModel, dMlp]`, `[dMlp]` | `h.{l}.mlp.c_fc.*` | `...mlp.dense_h_to_4h.*` |
 * | `blocks.{l}.mlp.W_out`, `b_out` | `[dMlp, dModel]`, `[dModel]` | `h.{l}.mlp.c_proj.*` | `...mlp.dense_4h_to_h.*` |
 * | `ln_final.w`, `.b` | `[dModel]` | `ln_f.*` | `final_layer_norm.*` |
 * | `unembed.W_U` (untied only) | `[dModel, dVocab]` | `lm_head.weight` `[dVocab, dModel]` | `embed_out.weight` |
 *
 * GPT-2's `c_attn.weight` is `[dModel, 3 dModel]` (`Conv1D`, q | k | v column blocks); GPT-NeoX's
 * `layers.{l}.attention.query_key_value.weight` is `[3 dModel, dModel]` (`nn.Linear`, output rows per head
 * `[nHeads, 3, dHead]`), its bias `[3 dModel]` laid out alike; `...dense` is `layers.{l}.attention.dense`.
 *
 * @module
 */
import { configToJSON, createConfig, type ActivationFunction, type TransformerConfig } from '../config.ts'
import type { SpecialTokens } from './checkpoint.ts'
import { configFromFile, ModelFileError, UnsupportedModelError } from './errors.ts'
import { checkTensorSet } from './llama-weights.ts'
import { headsToOutLinear, numel, outLinearToHeads, transpose2d, type Float32Tensor, type TensorMap } from './layout.ts'

/**
 * The Hugging Face `model_type`s loaded into attnlab's `gpt` architecture.
 *
 * @category Import
 */
export type GptFamilyModelType = 'gpt2' | 'gpt_neox'

/** The Hugging Face model class of each `model_type`, as `config.json`'s `architectures` names it. */
const CLASS_NAMES: Readonly<Record<GptFamilyModelType, string>> = {
  gpt2: 'GPT2LMHeadModel',
  gpt_neox: 'GPTNeoXForCausalLM',
}

/** Hugging Face activation names (`ACT2FN`) to attnlab's. `gelu_pytorch_tanh` is the same tanh form. */
const ACTIVATIONS: Readonly<Record<string, ActivationFunction>> = {
  gelu_new: 'gelu_new',
  gelu_pytorch_tanh: 'gelu_new',
  gelu: 'gelu',
  relu: 'relu',
  silu: 'silu',
  swish: 'silu',
}

/** Options of {@link gptFamilyConfigFromHuggingFace}. @category Import */
export interface GptFamilyConfigOptions {
  /** The file, for messages. */
  readonly file?: string | undefined
  /** Cap the context at this many positions (rotary models only: learned positions are one parameter row each). */
  readonly maxContext?: number | undefined
  /** Fields Hugging Face has no name for (seed, init range, dropout), from an attnlab export's `attnlab_config`. */
  readonly extras?: Partial<Pick<TransformerConfig, 'seed' | 'initRange' | 'dropout'>>
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * Understands the `config.json` of a GPT-2 or GPT-NeoX directory.
 *
 * GPT-2 keys: `n_embd`, `n_head`, `n_layer`, `vocab_size` (required), `n_positions` (default 1024), `n_inner`
 * (default `4 n_embd`), `layer_norm_epsilon` (1e-5), `activation_function` (`gelu_new`), `scale_attn_weights`
 * (true; false gives `attnScale` 1), `tie_word_embeddings` (true). GPT-NeoX keys: `hidden_size`,
 * `num_attention_heads`, `num_hidden_layers`, `intermediate_size`, `vocab_size`, `use_parallel_residual`
 * (required), `max_position_embeddings` (2048), `rotary_pct` or `partial_rotary_factor` (0.25),
 * `rotary_emb_base` or `rope_theta` (10000), `layer_norm_eps` (1e-5), `hidden_act` (`gelu`, exact erf),
 * `tie_word_embeddings` (false).
 *
 * @param json - the parsed `config.json` (an object)
 * @param modelType - its `model_type`
 * @param options - file for messages, context cap, attnlab extras
 * @returns the attnlab `gpt` configuration and notes on defaults used
 * @throws {@link ModelFileError} `invalid-header` naming the key, for a missing or out-of-range key (including
 *   GPT-NeoX without `use_parallel_residual`, or a `rotary_pct` outside (0, 1])
 * @throws {@link UnsupportedModelError} naming the key, for options the `gpt` architecture would compute
 *   differently: GPT-2 `scale_attn_by_inverse_layer_idx` or `add_cross_attention`, GPT-NeoX without attention
 *   biases, RoPE scaling, a rotary width that is not an even number of dimensions, unknown activations
 * @category Import
 */
export function gptFamilyConfigFromHuggingFace(
  json: Record<string, unknown>,
  modelType: GptFamilyModelType,
  options: GptFamilyConfigOptions = {},
): { readonly config: TransformerConfig; readonly notes: readonly string[] } {
  const { file } = options
  const notes: string[] = []
  const className = CLASS_NAMES[modelType]
  const invalid = (key: string, expected: string): never => {
    throw new ModelFileError(
      'invalid-header',
      json[key] === undefined || json[key] === null
        ? `config.json lacks '${key}' (${expected})`
        : `config.json '${key}' is ${JSON.stringify(json[key])}; expected ${expected}`,
      { file, tensor: key },
    )
  }
  const unsupported = (what: string, key: string): never => {
    throw new UnsupportedModelError(
      `${what} (config.json '${key}' = ${JSON.stringify(json[key])}); attnlab's gpt architecture would compute ` +
        `something else, so the ${className} is not loaded`,
      { file, field: key },
    )
  }
  const int = (key: string, fallback?: number): number => {
    const value = json[key] ?? fallback
    if (value === undefined || value === null) return invalid(key, 'a positive integer')
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0)
      return invalid(key, 'a positive integer')
    if (json[key] === undefined || json[key] === null)
      notes.push(`${key} not given; using the ${className} default ${value}`)
    return value
  }
  const num = (key: string, fallback: number): number => {
    const raw = json[key]
    if (raw === undefined || raw === null) {
      notes.push(`${key} not given; using the ${className} default ${fallback}`)
      return fallback
    }
    if (typeof raw !== 'number' || !Number.isFinite(raw) || raw <= 0) return invalid(key, 'a positive number')
    return raw
  }
  const flag = (key: string, fallback: boolean | undefined): boolean => {
    const raw = json[key]
    if (raw === undefined || raw === null) {
      if (fallback === undefined) return invalid(key, `true or false (${className} must say which block it runs)`)
      return fallback
    }
    if (typeof raw !== 'boolean') return invalid(key, 'true or false')
    return raw
  }
  const act = (key: string, fallback: string): ActivationFunction => {
    const raw = json[key] ?? fallback
    const mapped = typeof raw === 'string' ? ACTIVATIONS[raw] : undefined
    if (mapped === undefined || !Object.hasOwn(ACTIVATIONS, raw as string)) {
      return unsupported(`activation ${JSON.stringify(raw)} (supported: ${Object.keys(ACTIVATIONS).join(', ')})`, key)
    }
    return mapped
  }
  const headsOf = (widthKey: string, headsKey: string): { dModel: number; nHeads: number; dHead: number } => {
    const dModel = int(widthKey)
    const nHeads = int(headsKey)
    if (dModel % nHeads !== 0) {
      throw new ModelFileError(
        'invalid-header',
        `config.json '${widthKey}' ${dModel} is not divisible by '${headsKey}' ${nHeads} (${className} splits the ` +
          'width into equal heads)',
        { file, tensor: headsKey },
      )
    }
    return { dModel, nHeads, dHead: dModel / nHeads }
  }

  let input: Parameters<typeof createConfig>[0]
  if (modelType === 'gpt2') {
    if (flag('scale_attn_by_inverse_layer_idx', false))
      unsupported('attention scores scaled by 1 / (layer index + 1)', 'scale_attn_by_inverse_layer_idx')
    if (flag('add_cross_attention', false))
      unsupported('cross-attention (an encoder-decoder block)', 'add_cross_attention')
    const { dModel, nHeads } = headsOf('n_embd', 'n_head')
    const nPositions = int('n_positions', typeof json.n_ctx === 'number' ? json.n_ctx : 1024)
    if (options.maxContext !== undefined && options.maxContext < nPositions)
      notes.push(`context not capped: GPT-2 has one learned position embedding per position (${nPositions})`)
    const inner = json.n_inner
    input = {
      architecture: 'gpt',
      dVocab: int('vocab_size'),
      nCtx: nPositions,
      dModel,
      nLayers: int('n_layer'),
      nHeads,
      dMlp: inner === undefined || inner === null ? 4 * dModel : int('n_inner'),
      normEps: num('layer_norm_epsilon', 1e-5),
      actFn: act('activation_function', 'gelu_new'),
      tiedEmbeddings: flag('tie_word_embeddings', true),
      ...(flag('scale_attn_weights', true) ? {} : { attnScale: 1 }),
    }
  } else {
    if (!flag('attention_bias', true))
      unsupported('attention without biases (attnlab biases all or none)', 'attention_bias')
    const scaling = json.rope_scaling
    const scalingType = isRecord(scaling) ? (scaling.rope_type ?? scaling.type) : scaling
    if (scaling !== undefined && scaling !== null && scalingType !== 'default')
      unsupported('RoPE scaling', 'rope_scaling')
    const { dModel, nHeads, dHead } = headsOf('hidden_size', 'num_attention_heads')
    const parallelResidual = flag('use_parallel_residual', undefined)
    const pctKey =
      json.rotary_pct === undefined && json.partial_rotary_factor !== undefined ? 'partial_rotary_factor' : 'rotary_pct'
    const pct = json[pctKey] ?? 0.25
    if (json[pctKey] === undefined) notes.push(`rotary_pct not given; using the ${className} default 0.25`)
    if (typeof pct !== 'number' || !(pct > 0 && pct <= 1)) return invalid(pctKey, 'a fraction in (0, 1]')
    // transformers: rotary_ndims = int(head_size * rotary_pct)
    const rotary = Math.floor(dHead * pct)
    if (rotary < 2 || rotary % 2 !== 0) {
      unsupported(
        `a rotary width of ${rotary} dimensions (floor(dHead ${dHead} * ${pct})); RoPE rotates an even number >= 2`,
        pctKey,
      )
    }
    const baseKey =
      json.rotary_emb_base === undefined && json.rope_theta !== undefined ? 'rope_theta' : 'rotary_emb_base'
    let nCtx = int('max_position_embeddings', 2048)
    if (options.maxContext !== undefined && options.maxContext < nCtx) {
      notes.push(`context capped at ${options.maxContext} positions as asked (the model declares ${nCtx})`)
      nCtx = options.maxContext
    }
    input = {
      architecture: 'gpt',
      dVocab: int('vocab_size'),
      nCtx,
      dModel,
      nLayers: int('num_hidden_layers'),
      nHeads,
      dMlp: int('intermediate_size'),
      normEps: num('layer_norm_eps', 1e-5),
      positional: 'rotary',
      ropeTheta: num(baseKey, 10000),
      rotaryDims: rotary === dHead ? 0 : rotary,
      parallelResidual,
      actFn: act('hidden_act', 'gelu'),
      tiedEmbeddings: flag('tie_word_embeddings', false),
    }
  }
  return { config: configFromFile(file, () => createConfig({ ...options.extras, ...input, bias: true })), notes }
}

/**
 * Why a configuration is not exactly a Hugging Face `GPT2LMHeadModel` or `GPTNeoXForCausalLM` (the model type is
 * chosen by the positions: `learned` is GPT-2, `rotary` GPT-NeoX).
 *
 * @param config - any attnlab configuration
 * @returns the model type when compatible, else the reason it is not
 * @category Import
 */
export function gptFamilyModelTypeFor(
  config: TransformerConfig,
): { readonly modelType: GptFamilyModelType } | { readonly reason: string } {
  if (config.architecture !== 'gpt')
    return { reason: `architecture '${config.architecture}' (gpt2 and gpt_neox are gpt)` }
  if (config.normalization !== 'layernorm') return { reason: `normalization '${config.normalization}'` }
  if (!config.bias) return { reason: 'a model without biases' }
  if (config.attnOnly || config.gatedMlp) return { reason: 'an attention-only or gated MLP' }
  if (config.nKvHeads !== config.nHeads) return { reason: 'grouped-query attention' }
  if (config.nHeads * config.dHead !== config.dModel) return { reason: `nHeads * dHead != dModel ${config.dModel}` }
  const standardScale = Math.abs(config.attnScale * Math.sqrt(config.dHead) - 1) <= 1e-6
  if (config.positional === 'learned') {
    if (config.parallelResidual) return { reason: 'parallel residual blocks with learned positions' }
    if (!standardScale && config.attnScale !== 1) return { reason: `attnScale ${config.attnScale}` }
    return { modelType: 'gpt2' }
  }
  if (!standardScale) return { reason: `attnScale ${config.attnScale} (GPTNeoXForCausalLM uses 1/sqrt(dHead))` }
  const rotary = config.rotaryDims === 0 ? config.dHead : config.rotaryDims
  if (Math.floor(config.dHead * (rotary / config.dHead)) !== rotary) return { reason: `rotaryDims ${rotary}` }
  return { modelType: 'gpt_neox' }
}

/**
 * The `config.json` of a Hugging Face `GPT2LMHeadModel` or `GPTNeoXForCausalLM` export of an attnlab `gpt` model.
 * Every key `transformers` reads is written; the full attnlab configuration is kept under `attnlab_config` so the
 * fields Hugging Face has no name for (seed, init range) survive a round trip.
 *
 * @param config - a configuration {@link gptFamilyModelTypeFor} accepts
 * @param specialTokens - BOS/EOS ids to declare
 * @returns the JSON object
 * @throws {@link UnsupportedModelError} naming the reason when neither class expresses the configuration
 * @category Import
 */
export function gptFamilyConfigFor(
  config: TransformerConfig,
  specialTokens: SpecialTokens = {},
): Record<string, unknown> {
  const type = gptFamilyModelTypeFor(config)
  if ('reason' in type)
    throw new UnsupportedModelError(`GPT2LMHeadModel / GPTNeoXForCausalLM cannot express ${type.reason}`)
  const activation = config.actFn
  let json: Record<string, unknown>
  if (type.modelType === 'gpt2') {
    json = {
      architectures: ['GPT2LMHeadModel'],
      model_type: 'gpt2',
      n_embd: config.dModel,
      n_head: config.nHeads,
      n_layer: config.nLayers,
      n_positions: config.nCtx,
      n_ctx: config.nCtx,
      n_inner: config.dMlp,
      vocab_size: config.dVocab,
      layer_norm_epsilon: config.normEps,
      activation_function: activation,
      scale_attn_weights: !(config.attnScale === 1 && config.dHead !== 1),
      scale_attn_by_inverse_layer_idx: false,
      reorder_and_upcast_attn: false,
      add_cross_attention: false,
      tie_word_embeddings: config.tiedEmbeddings,
      resid_pdrop: config.dropout,
      embd_pdrop: config.dropout,
      attn_pdrop: config.dropout,
      initializer_range: config.initRange,
      torch_dtype: 'float32',
    }
  } else {
    const rotary = config.rotaryDims === 0 ? config.dHead : config.rotaryDims
    json = {
      architectures: ['GPTNeoXForCausalLM'],
      model_type: 'gpt_neox',
      hidden_size: config.dModel,
      num_attention_heads: config.nHeads,
      num_hidden_layers: config.nLayers,
      intermediate_size: config.dMlp,
      vocab_size: config.dVocab,
      max_position_embeddings: config.nCtx,
      rotary_pct: rotary / config.dHead,
      rotary_emb_base: config.ropeTheta,
      layer_norm_eps: config.normEps,
      use_parallel_residual: config.parallelResidual,
      hidden_act: activation,
      attention_bias: true,
      rope_scaling: null,
      tie_word_embeddings: config.tiedEmbeddings,
      attention_dropout: config.dropout,
      hidden_dropout: config.dropout,
      initializer_range: config.initRange,
      torch_dtype: 'float32',
    }
  }
  if (specialTokens.bos !== undefined) json.bos_token_id = specialTokens.bos
  if (specialTokens.eos !== undefined)
    json.eos_token_id = specialTokens.eos.length === 1 ? specialTokens.eos[0] : [...specialTokens.eos]
  json.attnlab_config = configToJSON(config)
  return json
}

// ---------------------------------------------------------------------------------------------- weights

/** One Hugging Face tensor and the attnlab parameters it holds (several for a fused q/k/v). */
interface FusedRule {
  readonly hf: string
  readonly hfShape: readonly number[]
  readonly attnlab: readonly { readonly name: string; readonly shape: readonly number[] }[]
  /** Hugging Face values to the attnlab parameters, in `attnlab` order. */
  readonly split: (data: Float32Array) => Float32Array[]
  /** The attnlab parameters (in `attnlab` order) to the Hugging Face values. */
  readonly merge: (parts: readonly Float32Array[]) => Float32Array
}

const copy = (data: Float32Array): Float32Array => new Float32Array(data)

function single(
  hf: string,
  hfShape: readonly number[],
  name: string,
  shape: readonly number[],
  toAttnlab: (data: Float32Array) => Float32Array = copy,
  toHf: (data: Float32Array) => Float32Array = copy,
): FusedRule {
  return {
    hf,
    hfShape,
    attnlab: [{ name, shape }],
    split: (data) => [toAttnlab(data)],
    merge: ([part]) => toHf(part as Float32Array),
  }
}

/**
 * A fused q/k/v projection: `index(j, h, i, d)` is the flat Hugging Face index of input `i`, head `h`, slot `j`
 * (0 q, 1 k, 2 v), width `d`; the attnlab side is `W_Q`, `W_K`, `W_V` as `[nHeads, dModel, dHead]` (or the biases,
 * `[nHeads, dHead]`, with `inputs` 1).
 */
function fusedQkv(
  hf: string,
  hfShape: readonly number[],
  names: readonly [string, string, string],
  config: TransformerConfig,
  inputs: number,
  index: (j: number, h: number, i: number, d: number) => number,
): FusedRule {
  const { nHeads, dHead } = config
  const shape = inputs === 1 ? [nHeads, dHead] : [nHeads, inputs, dHead]
  const size = nHeads * inputs * dHead
  const each = (visit: (j: number, flat: number, hfIndex: number) => void): void => {
    for (let j = 0; j < 3; j++)
      for (let h = 0; h < nHeads; h++)
        for (let i = 0; i < inputs; i++)
          for (let d = 0; d < dHead; d++) visit(j, (h * inputs + i) * dHead + d, index(j, h, i, d))
  }
  return {
    hf,
    hfShape,
    attnlab: names.map((name) => ({ name, shape })),
    split: (data) => {
      const parts = [new Float32Array(size), new Float32Array(size), new Float32Array(size)]
      each((j, flat, hfIndex) => {
        ;(parts[j] as Float32Array)[flat] = data[hfIndex] as number
      })
      return parts
    },
    merge: (parts) => {
      const out = new Float32Array(3 * size)
      each((j, flat, hfIndex) => {
        out[hfIndex] = (parts[j] as Float32Array)[flat] as number
      })
      return out
    },
  }
}

/** The names a GPT-2 checkpoint prefixes with `transformer.` (everything but `lm_head.weight`). */
const GPT2_PREFIX = 'transformer.'

/**
 * The weight mapping of a `gpt` configuration in a model type's Hugging Face layout.
 *
 * @param prefix - GPT-2 only: `transformer.` (what `save_pretrained` writes) or `''` (the original OpenAI export's
 *   names, as on the Hugging Face hub's `gpt2`)
 */
function gptFamilyRules(config: TransformerConfig, modelType: GptFamilyModelType, prefix = GPT2_PREFIX): FusedRule[] {
  const { dModel, dVocab, nCtx, nHeads, dHead, dMlp, nLayers } = config
  const gpt2 = modelType === 'gpt2'
  const body = gpt2 ? prefix : 'gpt_neox.'
  const norm = (hf: string, attnlab: string): FusedRule[] => [
    single(`${hf}.weight`, [dModel], `${attnlab}.w`, [dModel]),
    single(`${hf}.bias`, [dModel], `${attnlab}.b`, [dModel]),
  ]
  const rules: FusedRule[] = [
    single(`${body}${gpt2 ? 'wte' : 'embed_in'}.weight`, [dVocab, dModel], 'embed.W_E', [dVocab, dModel]),
  ]
  if (gpt2) rules.push(single(`${body}wpe.weight`, [nCtx, dModel], 'pos_embed.W_pos', [nCtx, dModel]))
  for (let l = 0; l < nLayers; l++) {
    const a = `blocks.${l}`
    const qkv = [`${a}.attn.W_Q`, `${a}.attn.W_K`, `${a}.attn.W_V`] as const
    const qkvBias = [`${a}.attn.b_Q`, `${a}.attn.b_K`, `${a}.attn.b_V`] as const
    if (gpt2) {
      const h = `${body}h.${l}`
      // Conv1D [in, out]: column j * dModel + h * dHead + d of row i.
      rules.push(
        ...norm(`${h}.ln_1`, `${a}.ln1`),
        fusedQkv(`${h}.attn.c_attn.weight`, [dModel, 3 * dModel], qkv, config, dModel, (j, hd, i, d) => {
          return i * 3 * dModel + j * dModel + hd * dHead + d
        }),
        fusedQkv(
          `${h}.attn.c_attn.bias`,
          [3 * dModel],
          qkvBias,
          config,
          1,
          (j, hd, _i, d) => j * dModel + hd * dHead + d,
        ),
        // [nHeads * dHead, dModel] is W_O's row-major layout already.
        single(`${h}.attn.c_proj.weight`, [dModel, dModel], `${a}.attn.W_O`, [nHeads, dHead, dModel]),
        single(`${h}.attn.c_proj.bias`, [dModel], `${a}.attn.b_O`, [dModel]),
        ...norm(`${h}.ln_2`, `${a}.ln2`),
        single(`${h}.mlp.c_fc.weight`, [dModel, dMlp], `${a}.mlp.W_in`, [dModel, dMlp]),
        single(`${h}.mlp.c_fc.bias`, [dMlp], `${a}.mlp.b_in`, [dMlp]),
        single(`${h}.mlp.c_proj.weight`, [dMlp, dModel], `${a}.mlp.W_out`, [dMlp, dModel]),
        single(`${h}.mlp.c_proj.bias`, [dModel], `${a}.mlp.b_out`, [dModel]),
      )
    } else {
      const h = `gpt_neox.layers.${l}`
      // nn.Linear [out, in], output row (h * 3 + j) * dHead + d: each head's q, k, v together.
      rules.push(
        ...norm(`${h}.input_layernorm`, `${a}.ln1`),
        fusedQkv(`${h}.attention.query_key_value.weight`, [3 * dModel, dModel], qkv, config, dModel, (j, hd, i, d) => {
          return ((hd * 3 + j) * dHead + d) * dModel + i
        }),
        fusedQkv(`${h}.attention.query_key_value.bias`, [3 * dModel], qkvBias, config, 1, (j, hd, _i, d) => {
          return (hd * 3 + j) * dHead + d
        }),
        single(
          `${h}.attention.dense.weight`,
          [dModel, dModel],
          `${a}.attn.W_O`,
          [nHeads, dHead, dModel],
          (data) => outLinearToHeads(data, nHeads, dHead, dModel),
          (data) => headsToOutLinear(data, nHeads, dHead, dModel),
        ),
        single(`${h}.attention.dense.bias`, [dModel], `${a}.attn.b_O`, [dModel]),
        ...norm(`${h}.post_attention_layernorm`, `${a}.ln2`),
        single(
          `${h}.mlp.dense_h_to_4h.weight`,
          [dMlp, dModel],
          `${a}.mlp.W_in`,
          [dModel, dMlp],
          (data) => transpose2d(data, dMlp, dModel),
          (data) => transpose2d(data, dModel, dMlp),
        ),
        single(`${h}.mlp.dense_h_to_4h.bias`, [dMlp], `${a}.mlp.b_in`, [dMlp]),
        single(
          `${h}.mlp.dense_4h_to_h.weight`,
          [dModel, dMlp],
          `${a}.mlp.W_out`,
          [dMlp, dModel],
          (data) => transpose2d(data, dModel, dMlp),
          (data) => transpose2d(data, dMlp, dModel),
        ),
        single(`${h}.mlp.dense_4h_to_h.bias`, [dModel], `${a}.mlp.b_out`, [dModel]),
      )
    }
  }
  rules.push(...norm(`${body}${gpt2 ? 'ln_f' : 'final_layer_norm'}`, 'ln_final'))
  if (!config.tiedEmbeddings) {
    rules.push(
      single(
        unembedName(modelType),
        [dVocab, dModel],
        'unembed.W_U',
        [dModel, dVocab],
        (data) => transpose2d(data, dVocab, dModel),
        (data) => transpose2d(data, dModel, dVocab),
      ),
    )
  }
  return rules
}

function unembedName(modelType: GptFamilyModelType): string {
  return modelType === 'gpt2' ? 'lm_head.weight' : 'embed_out.weight'
}

/** Buffers older checkpoints store beside the weights (causal masks, RoPE frequencies): not weights. */
const BUFFERS: Readonly<Record<GptFamilyModelType, RegExp>> = {
  gpt2: /^(transformer\.)?h\.\d+\.attn\.(bias|masked_bias)$/,
  gpt_neox: /^gpt_neox\.layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)$/,
}

/**
 * The tensors of the equivalent Hugging Face checkpoint: exact names (GPT-2 with the `transformer.` prefix, as
 * `save_pretrained` writes it) and shapes, in checkpoint order; no unembedding when tied.
 *
 * @param config - a `gpt` configuration {@link gptFamilyModelTypeFor} accepts
 * @param modelType - `gpt2` or `gpt_neox`
 * @returns name to shape
 * @category Import
 */
export function huggingFaceGptShapes(
  config: TransformerConfig,
  modelType: GptFamilyModelType,
): Map<string, readonly number[]> {
  return new Map(gptFamilyRules(config, modelType).map((rule) => [rule.hf, rule.hfShape]))
}

/**
 * Hugging Face GPT-2 or GPT-NeoX tensors to attnlab `gpt` parameters. Validates the whole set first (names,
 * shapes; GPT-2 names with or without the `transformer.` prefix; causal-mask and RoPE buffers ignored), then
 * converts and checks every value is finite. A tied model whose file also stores the unembedding loads when it
 * equals the embedding.
 *
 * @param config - the configuration {@link gptFamilyConfigFromHuggingFace} returned
 * @param modelType - `gpt2` or `gpt_neox`
 * @param shapes - name to shape of every tensor present
 * @param read - a tensor's float32 values by name; called only after every name and shape has been checked
 * @param options - `file` for messages
 * @returns attnlab parameters by TransformerLens name (new arrays)
 * @throws {@link ModelFileError} `missing-tensor`, `unexpected-tensor`, `shape-mismatch` or `non-finite` naming
 *   the tensors at fault; `invalid-header` when a tied file's unembedding differs from its embedding
 * @category Import
 */
export function gptFamilyFromHuggingFace(
  config: TransformerConfig,
  modelType: GptFamilyModelType,
  shapes: ReadonlyMap<string, readonly number[]>,
  read: (name: string) => Float32Array,
  options: { readonly file?: string | undefined } = {},
): TensorMap {
  const { file } = options
  const prefixed = modelType !== 'gpt2' || [...shapes.keys()].some((name) => name.startsWith(GPT2_PREFIX))
  const rules = gptFamilyRules(config, modelType, prefixed ? GPT2_PREFIX : '')
  const head = unembedName(modelType)
  const tiedHead = config.tiedEmbeddings && shapes.has(head)
  const found = tiedHead ? new Map([...shapes].filter(([name]) => name !== head)) : shapes
  const buffers = BUFFERS[modelType]
  checkTensorSet(new Map(rules.map((rule) => [rule.hf, rule.hfShape])), found, {
    file,
    ignore: (name) => buffers.test(name),
  })
  const embedRule = rules[0] as FusedRule
  if (tiedHead) {
    const shape = shapes.get(head) as readonly number[]
    if (shape.length !== 2 || shape[0] !== config.dVocab || shape[1] !== config.dModel) {
      throw new ModelFileError(
        'shape-mismatch',
        `1 tensors have the wrong shape: '${head}' is [${shape.join(', ')}], expected [${config.dVocab}, ` +
          `${config.dModel}]`,
        { file, tensor: head },
      )
    }
  }
  const out: TensorMap = new Map()
  for (const rule of rules) {
    const data = read(rule.hf)
    if (data.length !== numel(rule.hfShape)) {
      throw new ModelFileError(
        'shape-mismatch',
        `tensor '${rule.hf}' has ${data.length} values, expected ${numel(rule.hfShape)}`,
        {
          file,
          tensor: rule.hf,
        },
      )
    }
    const bad = data.findIndex((v) => !Number.isFinite(v))
    if (bad >= 0) {
      throw new ModelFileError(
        'non-finite',
        `tensor '${rule.hf}' holds ${data[bad]} at flat index ${bad}; weights must be finite`,
        {
          file,
          tensor: rule.hf,
          index: bad,
        },
      )
    }
    const parts = rule.split(data)
    rule.attnlab.forEach((target, i) => {
      out.set(target.name, { shape: target.shape, data: parts[i] as Float32Array })
    })
  }
  if (tiedHead) {
    const stored = read(head)
    const embed = read(embedRule.hf)
    if (!(stored.length === embed.length && stored.every((v, i) => v === embed[i]))) {
      throw new ModelFileError(
        'invalid-header',
        `tie_word_embeddings is true but '${head}' differs from '${embedRule.hf}'; set tie_word_embeddings to false ` +
          'to load a separate unembedding',
        { file, tensor: head },
      )
    }
  }
  return out
}

/**
 * attnlab `gpt` parameters to Hugging Face GPT-2 (`transformer.`-prefixed names, `Conv1D` `[in, out]` weights,
 * fused `c_attn`) or GPT-NeoX tensors (per-head fused `query_key_value`, `nn.Linear` `[out, in]`); no
 * unembedding when tied, as `save_pretrained` writes them.
 *
 * @param config - a configuration {@link gptFamilyModelTypeFor} accepts
 * @param weights - every parameter by TransformerLens name (see `parameterShapes`)
 * @returns Hugging Face tensors in checkpoint order, and the model type written
 * @throws {@link UnsupportedModelError} naming the reason when neither class expresses the configuration
 * @throws {@link ModelFileError} `missing-tensor` / `unexpected-tensor` / `shape-mismatch` when `weights` does not
 *   match the configuration
 * @category Import
 */
export function gptFamilyToHuggingFace(
  config: TransformerConfig,
  weights: ReadonlyMap<string, Float32Tensor>,
): { readonly modelType: GptFamilyModelType; readonly tensors: TensorMap } {
  const type = gptFamilyModelTypeFor(config)
  if ('reason' in type)
    throw new UnsupportedModelError(`GPT2LMHeadModel / GPTNeoXForCausalLM cannot express ${type.reason}`)
  const rules = gptFamilyRules(config, type.modelType)
  checkTensorSet(
    new Map(rules.flatMap((rule) => rule.attnlab.map((target) => [target.name, target.shape] as const))),
    new Map([...weights].map(([name, tensor]) => [name, tensor.shape])),
  )
  const tensors: TensorMap = new Map()
  for (const rule of rules) {
    const parts = rule.attnlab.map((target) => (weights.get(target.name) as Float32Tensor).data)
    tensors.set(rule.hf, { shape: rule.hfShape, data: rule.merge(parts) })
  }
  return { modelType: type.modelType, tensors }
}

/** Whether a parsed `config.json` names one of the {@link GptFamilyModelType}s. */
export function isGptFamily(json: unknown): json is Record<string, unknown> & { model_type: GptFamilyModelType } {
  return isRecord(json) && (json.model_type === 'gpt2' || json.model_type === 'gpt_neox')
}

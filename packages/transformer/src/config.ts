/**
 * Transformer configuration: one interface for the four architectures (`minimal`, `gpt`,
 * `llama`, `mixer`), validated at construction and frozen, with named presets.
 *
 * Field names follow TransformerLens' `HookedTransformerConfig` in camelCase (`dModel`,
 * `nHeads`, `nKvHeads`, `dHead`, `nLayers`, `nCtx`, `dVocab`, `dMlp`, `normalization`,
 * `positional`, `attnOnly`, `actFn`).
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import {
  booleanField,
  configSchema,
  customField,
  enumField,
  integerField,
  numberField,
  parseConfig,
  showValue,
  type z,
} from '@attnlab/core/schema'

/**
 * Initialisation of the minimal model's query matrices: a number `eps` means `U(-eps, eps)`
 * (0 gives exactly zero), `'xavier'` means Xavier/Glorot uniform `U(-a, a)`,
 * `a = sqrt(6 / (dModel + dModel))`. Paper (b)'s init ablation (Figure 4): eps in {0, 1e-9, 1e-6,
 * 1e-3} or Xavier.
 *
 * @category Config
 */
export type QueryInit = number | 'xavier'

/**
 * The transformer configuration's one declaration: every field's type, range and meaning (the
 * CLI's model flags take their help and ranges from it). The defaults depend on the architecture
 * (see {@link defaultTransformerConfig}) and some fields are derived from others by
 * {@link createConfig}; rules across fields (`nKvHeads` divides `nHeads`, the minimal model's
 * fixed fields) are checked there too.
 *
 * @category Config
 */
export const transformerConfigSchema = configSchema({
  /**
   * Model family.
   *
   * - `minimal`: the minimal model of Yüksel, Alvarez Lucendo & Flammarion, "Incremental Learning
   *   of Sparse Attention Patterns in Transformers" (arXiv 2602.19143; as configured in the
   *   authors' released code): input
   *   `[onehot(token); onehot(position)]`, one attention-only block, no embedding, unembedding,
   *   LayerNorm, MLP, residual or output projection, key = input, disentangled heads with their own
   *   full-width `W_Q` and `W_V`, head outputs summed, logits = the first `dVocab` coordinates,
   *   scores not scaled by `1/sqrt(d)`.
   * - `gpt`: pre-LN GPT-2 decoder (learned positions, GELU MLP or attention-only, final LN, tied or
   *   untied unembedding, dropout).
   * - `llama`: Llama 2 (RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention, no biases).
   * - `mixer`: a causal MLP-Mixer (Tolstikhin et al., arXiv 2105.01601, sec. 2; the architecture Baherwani et
   *   al., arXiv 2606.25010, compare with the transformer): the GPT pass with each block's attention replaced by a
   *   token-mixing MLP over positions whose weights are masked lower-triangular (position `p` mixes positions
   *   `<= p` only), one per channel group of `dHead` channels (`nHeads` groups, `dModel = nHeads * dHead`),
   *   `dTokenMlp` hidden units per position; no attention (see `mixer.ts`).
   */
  architecture: enumField('model family', ['minimal', 'gpt', 'llama', 'mixer']),
  /** Vocabulary size (token ids `0 .. dVocab - 1`). */
  dVocab: integerField('vocabulary size', { min: 1, max: 1_048_576 }),
  /** Maximum sequence length (positions `0 .. nCtx - 1`). */
  nCtx: integerField('maximum sequence length', { min: 1, max: 16_777_216 }),
  /** Width of the residual stream. For `minimal` it is `dVocab + nCtx` (the one-hot input). */
  dModel: integerField('residual width (gpt/llama/mixer)', { min: 1, max: 65_536 }),
  /**
   * Number of blocks (`minimal`: 1), at most 1024 (far above any real model's; a corrupt `config.json` with
   * `nLayers` 2^31 would otherwise make the parameter list itself exhaust memory).
   */
  nLayers: integerField('blocks (gpt/llama/mixer)', { min: 1, max: 1024 }),
  /** Query heads per block. */
  nHeads: integerField('attention heads (the mixer: channel groups of dHead)', { min: 1, max: 65_536 }),
  /** Key/value heads (grouped-query attention); divides `nHeads`. `minimal`, `gpt`: `nHeads`. */
  nKvHeads: integerField('key/value heads (llama grouped-query attention)', { min: 1, max: 65_536 }),
  /** Width of each head's queries and keys (`minimal`: `dModel`, full width). */
  dHead: integerField('width of each head (default dModel / nHeads; minimal: dModel)', { min: 1, max: 65_536 }),
  /** Hidden width of the MLP (0 when `attnOnly`; the mixer's channel-mixing MLP). */
  dMlp: integerField("MLP width (gpt/llama, the mixer's channel MLP; default 4 d-model, llama 8/3; 0 = no MLP)", {
    min: 0,
    max: 1_048_576,
  }),
  /** Attention-only blocks (no MLP; the mixer: token mixing only). Always true for `minimal`. */
  attnOnly: booleanField(
    'blocks without an MLP: attention only (gpt/llama); the mixer: token mixing only, its channel-mixing MLP dropped',
  ),
  /** Normalisation layer kind: LayerNorm (gpt), RMSNorm (llama) or none (minimal). */
  normalization: enumField('normalisation layers', ['layernorm', 'rmsnorm', 'none']),
  /** Epsilon inside LayerNorm / RMSNorm. */
  normEps: numberField('epsilon inside LayerNorm / RMSNorm', { min: 0, minExclusive: true, max: 1 }),
  /**
   * Positional scheme: `learned` absolute embeddings added to the token embedding (gpt),
   * `rotary` (RoPE on queries and keys, llama), or `onehot` (the minimal model's concatenated
   * one-hot position, occupying coordinates `dVocab .. dVocab + nCtx - 1` of the input).
   */
  positional: enumField('how positions enter', ['learned', 'rotary', 'onehot']),
  /** RoPE base (`theta`), used when `positional === 'rotary'`. */
  ropeTheta: numberField('RoPE base theta (rotary positions)', { min: 1 }),
  /**
   * How many dimensions of each query and key head RoPE rotates, when `positional === 'rotary'`: the first
   * `rotaryDims` of the `dHead` (rotate-half over those, frequencies `theta^(-2i / rotaryDims)`), the rest pass
   * through unchanged: GPT-NeoX's partial rotary embedding (Black et al., "GPT-NeoX-20B", arXiv 2204.06745,
   * sec. 2.1.1: `rotary_pct` 0.25 of each head; Pythia, Biderman et al., arXiv 2304.01373, uses the same). `0`
   * (the default) rotates the whole head, as Llama does (Su et al., RoFormer, arXiv 2104.09864, sec. 3.4); else an
   * even number in `2 .. dHead`. Must be 0 without rotary positions.
   */
  rotaryDims: integerField('rotary: dimensions of each head RoPE rotates (0 = all of dHead; GPT-NeoX rotary_pct)', {
    min: 0,
  }),
  /**
   * MLP activation (`llama`: `silu` on the gate of a gated MLP). `gelu_new` is GPT-2's tanh
   * approximation (TransformerLens' name); `gelu` the exact erf form; `silu`; `relu`.
   */
  actFn: enumField('MLP activation', ['gelu_new', 'gelu', 'relu', 'silu']),
  /** Gated MLP (`W_gate`, SwiGLU when `actFn === 'silu'`). */
  gatedMlp: booleanField('gated MLP (SwiGLU with silu)'),
  /**
   * Parallel attention and MLP (GPT-NeoX's `use_parallel_residual`, Black et al., arXiv 2204.06745, sec. 2.1.2; GPT-J):
   * each block computes `x + attn(ln1(x)) + mlp(ln2(x))`, both branches reading the block input, instead of
   * `h = x + attn(ln1(x))`, `h + mlp(ln2(h))`. There is then no residual stream between the branches, so
   * `blocks.{l}.hook_resid_mid` does not fire (as in TransformerLens' `parallel_attn_mlp`); `hook_resid_pre`,
   * `hook_attn_out`, `hook_mlp_out` and `hook_resid_post` do. Default false; `gpt` and `llama` only.
   */
  parallelResidual: booleanField('attention and MLP both read the block input: x + attn(ln1(x)) + mlp(ln2(x))'),
  /** Linear layers have biases (`b_Q, b_K, b_V, b_O, b_in, b_out`) and LayerNorms a bias `b`. */
  bias: booleanField('linear layers and LayerNorms have biases'),
  /** The unembedding is the transposed token embedding (`unembed.W_U` is then not a parameter). */
  tiedEmbeddings: booleanField('the unembedding is the transposed token embedding'),
  /** Dropout probability on the embedding, attention pattern and residual branches (training only). */
  dropout: numberField('dropout probability', { min: 0, max: 1, maxExclusive: true }),
  /** Multiplier of `q . k` before the softmax (`1/sqrt(dHead)`; `minimal`: 1). */
  attnScale: numberField('multiplier of q.k before the softmax (default 1/sqrt(dHead); minimal: 1)', {
    min: 0,
    minExclusive: true,
  }),
  /**
   * Hidden units per position of the mixer's causal token-mixing MLP (its hidden width is `dTokenMlp * nCtx` per
   * channel group); 0 for the other architectures.
   */
  dTokenMlp: integerField('mixer: hidden units per position of the causal token-mixing MLP', { min: 0 }),
  /** Standard deviation of the normal initialisation of gpt/llama/mixer weight matrices. */
  initRange: numberField('standard deviation of the initial gpt/llama weights', { min: 0 }),
  /** Initialisation of the minimal model's `W_Q` (see {@link QueryInit}; checked by {@link createConfig}). */
  queryInit: customField<QueryInit>("minimal: W_Q ~ U(-eps, eps) (0 = exactly zero) or 'xavier'"),
  /** Seed of the weight initialisation (`Rng.fromSeed(seed).split('init')`). */
  seed: integerField('seed of the weight initialisation'),
})

/**
 * The four model families one implementation covers (see {@link transformerConfigSchema}).
 *
 * @category Config
 */
export type Architecture = z.output<typeof transformerConfigSchema.shape.architecture>

/** Normalisation layers: LayerNorm (gpt), RMSNorm (llama) or none (minimal). @category Config */
export type Normalization = z.output<typeof transformerConfigSchema.shape.normalization>

/**
 * How positions enter: `learned` absolute embeddings added to the token embedding (gpt),
 * `rotary` (RoPE on queries and keys, llama), or `onehot` (the minimal model's concatenated
 * one-hot position, occupying coordinates `dVocab .. dVocab + nCtx - 1` of the input).
 *
 * @category Config
 */
export type Positional = z.output<typeof transformerConfigSchema.shape.positional>

/**
 * MLP activation. `gelu_new` is GPT-2's tanh approximation (TransformerLens' name); `gelu` the
 * exact erf form; `silu` (Llama's SwiGLU uses it on the gate); `relu`.
 *
 * @category Config
 */
export type ActivationFunction = z.output<typeof transformerConfigSchema.shape.actFn>

/**
 * A resolved, validated, frozen transformer configuration (what a model was built with), its
 * fields declared by {@link transformerConfigSchema}. Create one with {@link createConfig} (or
 * {@link presetConfig}).
 *
 * @category Config
 */
export type TransformerConfig = Readonly<z.output<typeof transformerConfigSchema>>

/** The configuration's fields, in declaration order. */
const FIELDS = Object.keys(transformerConfigSchema.shape) as (keyof TransformerConfig)[]

/** What {@link createConfig} validates: the architecture and any subset of the other fields. */
const transformerConfigInputSchema = transformerConfigSchema.partial().required({ architecture: true })

/**
 * What a user passes to {@link createConfig}: any subset of {@link TransformerConfig}; the rest
 * comes from the architecture's defaults.
 *
 * @category Config
 */
export type TransformerConfigInput = { readonly architecture: Architecture } & Partial<
  Omit<TransformerConfig, 'architecture'>
>

/** Names of the built-in presets. @category Config */
export type PresetName = 'minimal' | 'gpt' | 'gpt-nano' | 'llama' | 'llama-260k' | 'mixer'

/**
 * The minimal model's default query initialisation, `U(-1e-5, 1e-5)`: small enough that the
 * heads stay together through the first plateau (all heads attend alike, as in the paper's
 * Figure 1), large enough that their differences survive float32 and the heads separate
 * deterministically on every backend. The paper's `1e-9` is below float32 resolution here (the
 * scores `~1e-9` vanish inside `exp`), so heads stay bit-identical (the "symmetry trap": with
 * `W_V = 0` every head gets the same gradient); pass `queryInit: 1e-9` to study that.
 *
 * @category Config
 */
export const DEFAULT_MINIMAL_QUERY_INIT = 1e-5

/** A configuration being resolved (mutable; `attnScale` derived last unless given). */
type ConfigDraft = Omit<z.output<typeof transformerConfigSchema>, 'attnScale'> & { attnScale?: number }

function base(architecture: Architecture): ConfigDraft {
  switch (architecture) {
    case 'minimal':
      // d = 50, spans [2,2,2]: sequences of C + 20 = 26 tokens, the model sees 25.
      return {
        architecture,
        dVocab: 50,
        nCtx: 25,
        dModel: 75,
        nLayers: 1,
        nHeads: 3,
        nKvHeads: 3,
        dHead: 75,
        dMlp: 0,
        attnOnly: true,
        normalization: 'none',
        normEps: 1e-5,
        positional: 'onehot',
        ropeTheta: 10000,
        rotaryDims: 0,
        actFn: 'gelu_new',
        gatedMlp: false,
        parallelResidual: false,
        bias: false,
        tiedEmbeddings: false,
        dropout: 0,
        attnScale: 1,
        dTokenMlp: 0,
        initRange: 0.02,
        queryInit: DEFAULT_MINIMAL_QUERY_INIT,
        seed: 0,
      }
    case 'gpt':
      return {
        architecture,
        dVocab: 64,
        nCtx: 64,
        dModel: 64,
        nLayers: 2,
        nHeads: 4,
        nKvHeads: 4,
        dHead: 16,
        dMlp: 256,
        attnOnly: false,
        normalization: 'layernorm',
        normEps: 1e-5,
        positional: 'learned',
        ropeTheta: 10000,
        rotaryDims: 0,
        actFn: 'gelu_new',
        gatedMlp: false,
        parallelResidual: false,
        bias: true,
        tiedEmbeddings: true,
        dropout: 0,
        dTokenMlp: 0,
        initRange: 0.02,
        queryInit: 'xavier',
        seed: 0,
      }
    case 'llama':
      return {
        architecture,
        dVocab: 512,
        nCtx: 128,
        dModel: 64,
        nLayers: 4,
        nHeads: 4,
        nKvHeads: 4,
        dHead: 16,
        dMlp: 172,
        attnOnly: false,
        normalization: 'rmsnorm',
        normEps: 1e-5,
        positional: 'rotary',
        ropeTheta: 10000,
        rotaryDims: 0,
        actFn: 'silu',
        gatedMlp: true,
        parallelResidual: false,
        bias: false,
        tiedEmbeddings: true,
        dropout: 0,
        dTokenMlp: 0,
        initRange: 0.02,
        queryInit: 'xavier',
        seed: 0,
      }
    case 'mixer':
      // The gpt default's shape, its attention replaced by token mixing (4 groups of 16 channels).
      return {
        architecture,
        dVocab: 64,
        nCtx: 64,
        dModel: 64,
        nLayers: 2,
        nHeads: 4,
        nKvHeads: 4,
        dHead: 16,
        dMlp: 256,
        attnOnly: false,
        normalization: 'layernorm',
        normEps: 1e-5,
        positional: 'learned',
        ropeTheta: 10000,
        rotaryDims: 0,
        actFn: 'gelu_new',
        gatedMlp: false,
        parallelResidual: false,
        bias: true,
        tiedEmbeddings: true,
        dropout: 0,
        dTokenMlp: 2,
        initRange: 0.02,
        queryInit: 'xavier',
        seed: 0,
      }
  }
}

/**
 * The default configuration of an architecture (the `minimal` default is the paper's model for
 * d = 50, spans [2,2,2]; `gpt` a 2-layer, 4-head, dModel 64 model; `llama` the aidreams260K
 * shape).
 *
 * @category Config
 */
export function defaultTransformerConfig(architecture: Architecture = 'gpt'): TransformerConfig {
  return createConfig({ architecture })
}

/**
 * The MLP width derived from `dModel` when `dMlp` is not given: `4 dModel` for an ungated MLP
 * (Vaswani et al., arXiv:1706.03762, section 3.3); for a gated one (SwiGLU) two thirds of that,
 * `floor(8 dModel / 3)` rounded up to a multiple of 4, which keeps the parameter count of the
 * ungated MLP (Shazeer, arXiv:2002.05202, section 2) and reproduces llama2.c's rule with
 * `multiple_of = 4` (dModel 64 gives the aidreams260K model's 172).
 */
function derivedMlpWidth(dModel: number, gated: boolean): number {
  if (!gated) return 4 * dModel
  return 4 * Math.ceil(Math.floor((8 * dModel) / 3) / 4)
}

/**
 * Resolves, validates and freezes a configuration. Unspecified fields come from the
 * architecture's defaults; for `minimal`, `dModel` and `dHead` default to `dVocab + nCtx`.
 *
 * @param input - the architecture and any fields to override
 * @returns a frozen {@link TransformerConfig}
 * @throws `ConfigError` (`@attnlab/core`) naming the field, for unknown fields, out-of-range values and
 *   inconsistent combinations (e.g. `nHeads` not divisible by `nKvHeads`, `minimal` with a
 *   `dModel` other than `dVocab + nCtx`, `rotary` with an odd `dHead`)
 * @example
 * ```ts
 * const config = createConfig({ architecture: 'gpt', nLayers: 4, dModel: 128, nHeads: 8, dHead: 16 })
 * ```
 * @category Config
 */
export function createConfig(input: TransformerConfigInput): TransformerConfig {
  const given = parseConfig(transformerConfigInputSchema, input, 'transformer')
  const architecture = given.architecture
  const merged: ConfigDraft = { ...base(architecture) }
  for (const [key, value] of Object.entries(given)) if (value !== undefined) Object.assign(merged, { [key]: value })
  if (architecture === 'minimal') {
    if (given.dModel === undefined) merged.dModel = merged.dVocab + merged.nCtx
    if (given.dHead === undefined) merged.dHead = merged.dModel
    if (given.nKvHeads === undefined) merged.nKvHeads = merged.nHeads
  } else {
    if (given.nKvHeads === undefined) merged.nKvHeads = merged.nHeads
    // The mixer's width is nHeads channel groups of dHead (free width: dModel follows them).
    if (architecture === 'mixer' && given.dHead !== undefined && given.dModel === undefined) {
      merged.dModel = merged.nHeads * merged.dHead
      if (given.dMlp === undefined && given.attnOnly !== true)
        merged.dMlp = derivedMlpWidth(merged.dModel, merged.gatedMlp)
    }
    if (given.dHead === undefined && (given.dModel !== undefined || given.nHeads !== undefined)) {
      const { dModel, nHeads } = merged
      if (dModel % nHeads !== 0) {
        throw new ConfigError(
          'dHead',
          `not given, and dModel ${dModel} is not divisible by nHeads ${nHeads}; give dHead explicitly`,
        )
      }
      merged.dHead = dModel / nHeads
    }
    if (given.attnOnly === true && given.dMlp === undefined) merged.dMlp = 0
    // An attention-only model has no MLP to gate: the architecture's default gating is dropped.
    if (given.attnOnly === true && given.gatedMlp === undefined) merged.gatedMlp = false
    if (given.dMlp === undefined && given.dModel !== undefined && given.attnOnly !== true) {
      merged.dMlp = derivedMlpWidth(merged.dModel, merged.gatedMlp)
    }
  }
  if (!merged.attnOnly && merged.dMlp < 1) {
    throw new ConfigError('dMlp', `must be an integer >= 1 unless attnOnly is true, got ${merged.dMlp}`, {
      value: merged.dMlp,
    })
  }
  if (merged.attnOnly && merged.dMlp !== 0 && given.dMlp !== undefined) {
    throw new ConfigError(
      'dMlp',
      `${String(merged.dMlp)} given with attnOnly: true; an attention-only model has no MLP (dMlp 0)`,
    )
  }
  const resolved: TransformerConfig = {
    ...merged,
    dMlp: merged.attnOnly ? 0 : merged.dMlp,
    attnScale: merged.attnScale ?? 1 / Math.sqrt(merged.dHead),
  }
  // The fields in the schema's order (what configToJSON writes).
  const config = Object.fromEntries(FIELDS.map((key) => [key, resolved[key]])) as TransformerConfig
  const queryInit = config.queryInit
  if (!(queryInit === 'xavier' || (typeof queryInit === 'number' && Number.isFinite(queryInit) && queryInit >= 0))) {
    throw new ConfigError(
      'queryInit',
      `${showValue(queryInit)} is neither a non-negative number (eps of U(-eps, eps)) nor 'xavier'`,
      { value: queryInit },
    )
  }
  if (config.nHeads % config.nKvHeads !== 0) {
    throw new ConfigError(
      'nKvHeads',
      `${config.nKvHeads} does not divide nHeads ${config.nHeads} (grouped-query attention needs whole groups)`,
    )
  }
  // Architecture invariants.
  if (architecture === 'minimal') {
    const fixed: [keyof TransformerConfig, unknown][] = [
      ['nLayers', 1],
      ['attnOnly', true],
      ['normalization', 'none'],
      ['positional', 'onehot'],
      ['bias', false],
      ['tiedEmbeddings', false],
      ['rotaryDims', 0],
      ['parallelResidual', false],
    ]
    for (const [key, value] of fixed) {
      if (config[key] !== value) {
        throw new ConfigError(key, `the minimal model requires ${key} = ${String(value)} (got ${String(config[key])})`)
      }
    }
    if (config.dModel !== config.dVocab + config.nCtx) {
      throw new ConfigError(
        'dModel',
        `the minimal model's input is [onehot(token); onehot(position)], so dModel must be dVocab + nCtx = ` +
          `${config.dVocab + config.nCtx} (got ${config.dModel})`,
      )
    }
    if (config.dHead !== config.dModel) {
      throw new ConfigError(
        'dHead',
        `the minimal model's heads are full width: dHead must equal dModel ${config.dModel} (got ${config.dHead})`,
      )
    }
    if (config.nKvHeads !== config.nHeads) {
      throw new ConfigError(
        'nKvHeads',
        `the minimal model has no key projection; nKvHeads must equal nHeads (got ${config.nKvHeads})`,
      )
    }
  } else {
    if (config.positional === 'onehot') {
      throw new ConfigError(
        'positional',
        `'onehot' positions belong to the minimal model; ${architecture} uses 'learned' or 'rotary'`,
      )
    }
    if (config.normalization === 'none' && architecture === 'llama') {
      throw new ConfigError('normalization', `llama uses 'rmsnorm' (got 'none')`)
    }
    if (config.positional === 'rotary' && config.dHead % 2 !== 0) {
      throw new ConfigError(
        'dHead',
        `rotary embeddings rotate pairs of dimensions: dHead must be even (got ${config.dHead})`,
      )
    }
    if (config.rotaryDims !== 0) checkRotaryDims(config)
    if (config.gatedMlp && config.attnOnly) {
      throw new ConfigError('gatedMlp', 'an attention-only model has no MLP to gate')
    }
  }
  if (architecture === 'mixer') checkMixer(config)
  else if (config.dTokenMlp !== 0) {
    throw new ConfigError(
      'dTokenMlp',
      `${config.dTokenMlp} given for the ${architecture} model; only the mixer has a token-mixing MLP (expected 0)`,
      { value: config.dTokenMlp },
    )
  }
  checkSize(config)
  return Object.freeze(config)
}

/**
 * The most float32 elements one tensor of a model may hold: 2^28 (1 GiB). A typed array and the tfjs wasm heap
 * stop at 4 GiB, and training holds each weight with its gradient and two Adam moments.
 */
const MAX_TENSOR_ELEMENTS = 2 ** 28

/** The most parameters a model may have: 2^28 (1 GiB of float32; 4 GiB with gradients and Adam's moments). */
const MAX_PARAMETERS = 2 ** 28

/** `n` in a short form: `5.63e+9` above a million, else the integer. */
function showCount(n: number): string {
  return n >= 1e6 ? n.toPrecision(3) : String(n)
}

/**
 * Refuses a configuration whose largest weight or whose parameter count is beyond what float32 typed arrays
 * and the wasm heap hold, before anything is allocated. The error names the field with the largest size among
 * the tensor's dimensions. Attention scores are not counted: `nCtx` is a maximum, and the fused and sparse
 * kernels attend in memory linear in the positions (a request that cannot fit is refused where it is made).
 */
function checkSize(config: TransformerConfig): void {
  const { dVocab, nCtx, dModel, nHeads, nKvHeads, dHead, dMlp, nLayers, dTokenMlp } = config
  type Dims = readonly (readonly [keyof TransformerConfig, number])[]
  const tensors: [string, Dims][] = [
    [
      'embed.W_E',
      [
        ['dVocab', dVocab],
        ['dModel', dModel],
      ],
    ],
    [
      'pos_embed.W_pos',
      [
        ['nCtx', nCtx],
        ['dModel', dModel],
      ],
    ],
    [
      'attn.W_Q',
      [
        ['nHeads', nHeads],
        ['dModel', dModel],
        ['dHead', dHead],
      ],
    ],
    [
      'attn.W_K',
      [
        ['nKvHeads', nKvHeads],
        ['dModel', dModel],
        ['dHead', dHead],
      ],
    ],
    [
      'mlp.W_in',
      [
        ['dModel', dModel],
        ['dMlp', dMlp],
      ],
    ],
    [
      'token-mixing MLP',
      [
        ['nHeads', nHeads],
        ['nCtx', nCtx],
        ['dTokenMlp', dTokenMlp],
        ['nCtx', nCtx],
      ],
    ],
  ]
  const size = (dims: Dims): number => dims.reduce((product, [, n]) => product * n, 1)
  const largestField = (dims: Dims): keyof TransformerConfig =>
    dims.reduce((best, dim) => (dim[1] > best[1] ? dim : best))[0]
  const shape = (dims: Dims): string => dims.map(([field, n]) => `${field} ${n}`).join(' x ')
  for (const [name, dims] of tensors) {
    const elements = size(dims)
    if (elements > MAX_TENSOR_ELEMENTS) {
      throw new ConfigError(
        largestField(dims),
        `the model is too large: ${name} [${shape(dims)}] has ${showCount(elements)} float32 elements ` +
          `(${((elements * 4) / 2 ** 30).toFixed(2)} GiB); at most ${MAX_TENSOR_ELEMENTS} (1 GiB) fit one typed array`,
      )
    }
  }
  // An upper bound: the minimal model has only W_Q and W_V, the mixer no attention but its token-mixing MLP.
  const mlp = (config.gatedMlp ? 3 : 2) * dModel * dMlp
  const perBlock =
    config.architecture === 'minimal'
      ? 2 * nHeads * dModel * dHead
      : (nHeads + 2 * nKvHeads + nHeads) * dModel * dHead + mlp + 2 * nHeads * nCtx * dTokenMlp * nCtx
  const parameters = nLayers * perBlock + 2 * dVocab * dModel + nCtx * dModel
  if (parameters > MAX_PARAMETERS) {
    const dims: Dims = [
      ['nLayers', nLayers],
      ['nHeads', nHeads],
      ['dModel', dModel],
      ['dHead', dHead],
      ['dMlp', dMlp],
    ]
    throw new ConfigError(
      largestField(dims),
      `the model is too large: about ${showCount(parameters)} parameters (${shape(dims)}); ` +
        `at most ${MAX_PARAMETERS} (1 GiB of float32) fit the wasm heap with gradients and Adam's moments`,
    )
  }
}

/** A partial rotary embedding's width: rotary positions, an even number of dimensions, at most `dHead`. */
function checkRotaryDims(config: TransformerConfig): void {
  const { rotaryDims, dHead } = config
  if (config.positional !== 'rotary') {
    throw new ConfigError(
      'rotaryDims',
      `${rotaryDims} given with positional '${config.positional}'; only rotary positions rotate (expected 0)`,
      { value: rotaryDims },
    )
  }
  if (rotaryDims % 2 !== 0 || rotaryDims > dHead) {
    throw new ConfigError(
      'rotaryDims',
      `${rotaryDims} is not an even number of dimensions in 2 .. dHead ${dHead} (RoPE rotates pairs; 0 = all)`,
      { value: rotaryDims },
    )
  }
}

/** The mixer's rules: channel groups tile the width, learned positions, no grouped keys, a token-mixing width. */
function checkMixer(config: TransformerConfig): void {
  if (config.nHeads * config.dHead !== config.dModel) {
    throw new ConfigError(
      'dHead',
      `the mixer splits dModel ${config.dModel} into nHeads ${config.nHeads} channel groups of dHead channels, so ` +
        `nHeads * dHead must equal dModel (got ${config.nHeads} * ${config.dHead} = ${config.nHeads * config.dHead})`,
    )
  }
  if (config.positional !== 'learned') {
    throw new ConfigError('positional', `the mixer uses 'learned' positions (got '${config.positional}')`)
  }
  if (config.nKvHeads !== config.nHeads) {
    throw new ConfigError(
      'nKvHeads',
      `the mixer has no keys or values; nKvHeads must equal nHeads ${config.nHeads} (got ${config.nKvHeads})`,
    )
  }
  if (config.parallelResidual) {
    throw new ConfigError(
      'parallelResidual',
      'the mixer has no attention branch to run beside its MLP (expected false)',
    )
  }
  if (config.dTokenMlp < 1) {
    throw new ConfigError('dTokenMlp', `the mixer needs dTokenMlp >= 1 hidden units per position (got 0)`, {
      value: config.dTokenMlp,
    })
  }
}

/**
 * A named preset, optionally with overrides.
 *
 * - `minimal`: Yüksel et al.'s minimal model for d = 50, spans [2,2,2] (3 heads, dModel 75,
 *   nCtx 25).
 * - `gpt`: 2 layers, 4 heads, dModel 64, dMlp 256, nCtx 64, dVocab 64, LayerNorm, GELU, tied.
 * - `gpt-nano`: 1 layer, 2 heads, dModel 16, dMlp 32, nCtx 16, dVocab 16 (for tests).
 * - `llama`, `llama-260k`: the shape of the aidreams260K Llama 2 checkpoint (dModel 64, 4 layers,
 *   4 heads, dMlp 172, dVocab 512, nCtx 128, RMSNorm eps 1e-5, theta 10000, tied).
 * - `mixer`: the causal MLP-Mixer (Tolstikhin et al., arXiv 2105.01601) with the `gpt` preset's shape: 2 blocks,
 *   4 channel groups of 16 (`nHeads` x `dHead` = `dModel` 64), 2 token-mixing hidden units per position, channel
 *   MLP 256, LayerNorm, GELU, biases, learned positions, tied embeddings. At a fixed total width give `dModel` and
 *   `nHeads` (`dHead = dModel / nHeads`); with free width give `nHeads` and `dHead` (`dModel = nHeads * dHead`).
 *
 * The preset's fields are defaults, like the architecture's: what `createConfig` derives from
 * an overridden field is derived again unless the overrides give it too (`dHead` from `dModel` /
 * `nHeads`, `nKvHeads` from `nHeads`, `dMlp` from `dModel`, and `dMlp` 0 with no gating for
 * `attnOnly: true`), so `presetConfig('gpt-nano', { attnOnly: true })` is the attention-only nano
 * model.
 *
 * @param name - preset name
 * @param overrides - fields to change
 * @throws `ConfigError` (`@attnlab/core`) for an unknown preset or invalid overrides
 * @example
 * ```ts
 * const config = presetConfig('llama', { dModel: 96, attnOnly: true }) // dHead 24, dMlp 0
 * ```
 * @category Config
 */
export function presetConfig(
  name: PresetName,
  overrides: Partial<Omit<TransformerConfig, 'architecture'>> = {},
): TransformerConfig {
  const preset = PRESET_INPUTS[name] as TransformerConfigInput | undefined
  if (preset === undefined || !Object.hasOwn(PRESET_INPUTS, name)) {
    const known = Object.keys(PRESET_INPUTS).join(', ')
    throw new ConfigError('preset', `'${String(name)}' is not a preset; expected one of ${known}`, { value: name })
  }
  // The preset's fields are defaults like the architecture's: a field derived from an overridden
  // one is derived again by createConfig (dHead from dModel / nHeads, nKvHeads from nHeads, dMlp
  // from dModel or attnOnly) unless the overrides give it too.
  const given = (key: keyof TransformerConfig): boolean => (overrides as Record<string, unknown>)[key] !== undefined
  const dropped = new Set<string>()
  if ((given('dModel') || given('nHeads')) && !given('dHead')) dropped.add('dHead')
  if (given('nHeads') && !given('nKvHeads')) dropped.add('nKvHeads')
  if ((given('dModel') || overrides.attnOnly === true) && !given('dMlp')) dropped.add('dMlp')
  const kept = Object.fromEntries(Object.entries(preset).filter(([key]) => !dropped.has(key)))
  return createConfig({ ...kept, ...overrides, architecture: preset.architecture } as TransformerConfigInput)
}

/** What each preset sets over its architecture's defaults. */
const PRESET_INPUTS: Readonly<Record<PresetName, TransformerConfigInput>> = {
  minimal: { architecture: 'minimal' },
  gpt: { architecture: 'gpt' },
  'gpt-nano': { architecture: 'gpt', dVocab: 16, nCtx: 16, dModel: 16, nLayers: 1, nHeads: 2, dHead: 8, dMlp: 32 },
  llama: { architecture: 'llama' },
  'llama-260k': { architecture: 'llama' },
  mixer: { architecture: 'mixer' },
}

/**
 * Whether models of this configuration have attention (hence `attn.*` hook points, attention patterns and their
 * metrics): every architecture but the `mixer`, whose blocks mix positions by a token-mixing MLP instead.
 *
 * @param config - a resolved configuration
 * @category Config
 */
export function hasAttention(config: Pick<TransformerConfig, 'architecture'>): boolean {
  return config.architecture !== 'mixer'
}

/**
 * The configuration as plain JSON (for checkpoints), in camelCase.
 *
 * @category Config
 */
export function configToJSON(config: TransformerConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const key of FIELDS) out[key] = config[key]
  return out
}

/**
 * Rebuilds a configuration from {@link configToJSON} output (validated like {@link createConfig}).
 *
 * @throws `ConfigError` (`@attnlab/core`) naming the field when the JSON is not a valid configuration
 * @category Config
 */
export function configFromJSON(json: unknown): TransformerConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new ConfigError('config', 'expected a JSON object', { value: json })
  }
  const record = json as Record<string, unknown>
  return createConfig(record as unknown as TransformerConfigInput)
}

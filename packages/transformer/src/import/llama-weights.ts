/**
 * The weight mapping between attnlab's `llama` parameters (TransformerLens names and per-head
 * layouts) and Hugging Face `LlamaForCausalLM` tensors (PyTorch `nn.Linear` `[out, in]`
 * layout, rotate-half RoPE). llama2.c checkpoints are first put into the Hugging Face form
 * (see `llama2c.ts`), so this is the one mapping both importers share.
 *
 * | attnlab | shape | Hugging Face | shape |
 * | --- | --- | --- | --- |
 * | `embed.W_E` | `[dVocab, dModel]` | `model.embed_tokens.weight` | `[dVocab, dModel]` |
 * | `blocks.{l}.ln1.w` | `[dModel]` | `model.layers.{l}.input_layernorm.weight` | `[dModel]` |
 * | `blocks.{l}.attn.W_Q` | `[nHeads, dModel, dHead]` | `...self_attn.q_proj.weight` | `[nHeads*dHead, dModel]` |
 * | `blocks.{l}.attn.W_K`, `W_V` | `[nKvHeads, dModel, dHead]` | `...{k,v}_proj.weight` | `[nKvHeads*dHead, dModel]` |
 * | `blocks.{l}.attn.W_O` | `[nHeads, dHead, dModel]` | `...self_attn.o_proj.weight` | `[dModel, nHeads*dHead]` |
 * | `blocks.{l}.ln2.w` | `[dModel]` | `...post_attention_layernorm.weight` | `[dModel]` |
 * | `blocks.{l}.mlp.W_gate` | `[dModel, dMlp]` | `...mlp.gate_proj.weight` (llama2.c `w1`) | `[dMlp, dModel]` |
 * | `blocks.{l}.mlp.W_in` | `[dModel, dMlp]` | `...mlp.up_proj.weight` (llama2.c `w3`) | `[dMlp, dModel]` |
 * | `blocks.{l}.mlp.W_out` | `[dMlp, dModel]` | `...mlp.down_proj.weight` (llama2.c `w2`) | `[dModel, dMlp]` |
 * | `ln_final.w` | `[dModel]` | `model.norm.weight` | `[dModel]` |
 * | `unembed.W_U` (untied only) | `[dModel, dVocab]` | `lm_head.weight` | `[dVocab, dModel]` |
 *
 * The MLP is `W_out^T (silu(x W_gate) * (x W_in))` (TransformerLens' gated MLP, Hugging Face's
 * `down_proj(act(gate_proj(x)) * up_proj(x))`).
 *
 * @module
 */
import type { TransformerConfig } from '../config.ts'
import { ModelFileError, UnsupportedModelError } from './errors.ts'
import {
  headsToLinear,
  headsToOutLinear,
  linearToHeads,
  numel,
  outLinearToHeads,
  transpose2d,
  type Float32Tensor,
  type TensorMap,
} from './layout.ts'

/**
 * Which biases a Hugging Face checkpoint stores: `qkv` (`q_proj`, `k_proj`, `v_proj` biases:
 * Qwen2, or Llama with `attention_bias`) and `o` (`o_proj` bias: Llama with `attention_bias`).
 * attnlab's `llama` with `bias: true` has `b_Q, b_K, b_V, b_O, b_in, b_out`; the ones the
 * checkpoint lacks are zero (exact: a zero bias is no bias).
 *
 * @category Import
 */
export interface LlamaBiasLayout {
  /** The checkpoint has `q_proj`, `k_proj` and `v_proj` biases. */
  readonly qkv: boolean
  /** The checkpoint has an `o_proj` bias. */
  readonly o: boolean
}

/** No biases (Llama 2, Mistral). */
export const NO_BIASES: LlamaBiasLayout = Object.freeze({ qkv: false, o: false })

/**
 * One tensor of the mapping: its name and shape on each side and the conversions. `hf`
 * undefined: the Hugging Face checkpoint has no such tensor; it is zero on import and must be
 * zero on export.
 */
interface TensorRule {
  readonly attnlab: string
  readonly attnlabShape: readonly number[]
  readonly hf: string | undefined
  readonly hfShape: readonly number[]
  readonly toAttnlab: (data: Float32Array) => Float32Array
  readonly toHf: (data: Float32Array) => Float32Array
}

const identity = (data: Float32Array): Float32Array => new Float32Array(data)

function llamaRules(config: TransformerConfig, biases: LlamaBiasLayout): TensorRule[] {
  const { dModel, dVocab, nHeads, nKvHeads, dHead, dMlp, nLayers } = config
  const rules: TensorRule[] = [
    {
      attnlab: 'embed.W_E',
      attnlabShape: [dVocab, dModel],
      hf: 'model.embed_tokens.weight',
      hfShape: [dVocab, dModel],
      toAttnlab: identity,
      toHf: identity,
    },
  ]
  for (let l = 0; l < nLayers; l++) {
    const a = `blocks.${l}`
    const h = `model.layers.${l}`
    const heads = (name: string, hfName: string, count: number): TensorRule => ({
      attnlab: `${a}.attn.${name}`,
      attnlabShape: [count, dModel, dHead],
      hf: `${h}.self_attn.${hfName}.weight`,
      hfShape: [count * dHead, dModel],
      toAttnlab: (data) => linearToHeads(data, count, dModel, dHead),
      toHf: (data) => headsToLinear(data, count, dModel, dHead),
    })
    const headBias = (name: string, hfName: string, count: number): TensorRule => ({
      attnlab: `${a}.attn.${name}`,
      attnlabShape: [count, dHead],
      hf: biases.qkv ? `${h}.self_attn.${hfName}.bias` : undefined,
      hfShape: [count * dHead],
      toAttnlab: identity,
      toHf: identity,
    })
    const mlpIn = (name: string, hfName: string): TensorRule => ({
      attnlab: `${a}.mlp.${name}`,
      attnlabShape: [dModel, dMlp],
      hf: `${h}.mlp.${hfName}.weight`,
      hfShape: [dMlp, dModel],
      toAttnlab: (data) => transpose2d(data, dMlp, dModel),
      toHf: (data) => transpose2d(data, dModel, dMlp),
    })
    rules.push(
      {
        attnlab: `${a}.ln1.w`,
        attnlabShape: [dModel],
        hf: `${h}.input_layernorm.weight`,
        hfShape: [dModel],
        toAttnlab: identity,
        toHf: identity,
      },
      heads('W_Q', 'q_proj', nHeads),
      heads('W_K', 'k_proj', nKvHeads),
      heads('W_V', 'v_proj', nKvHeads),
      {
        attnlab: `${a}.attn.W_O`,
        attnlabShape: [nHeads, dHead, dModel],
        hf: `${h}.self_attn.o_proj.weight`,
        hfShape: [dModel, nHeads * dHead],
        toAttnlab: (data) => outLinearToHeads(data, nHeads, dHead, dModel),
        toHf: (data) => headsToOutLinear(data, nHeads, dHead, dModel),
      },
    )
    if (config.bias) {
      rules.push(
        headBias('b_Q', 'q_proj', nHeads),
        headBias('b_K', 'k_proj', nKvHeads),
        headBias('b_V', 'v_proj', nKvHeads),
        {
          attnlab: `${a}.attn.b_O`,
          attnlabShape: [dModel],
          hf: biases.o ? `${h}.self_attn.o_proj.bias` : undefined,
          hfShape: [dModel],
          toAttnlab: identity,
          toHf: identity,
        },
      )
    }
    rules.push(
      {
        attnlab: `${a}.ln2.w`,
        attnlabShape: [dModel],
        hf: `${h}.post_attention_layernorm.weight`,
        hfShape: [dModel],
        toAttnlab: identity,
        toHf: identity,
      },
      mlpIn('W_in', 'up_proj'),
      mlpIn('W_gate', 'gate_proj'),
      {
        attnlab: `${a}.mlp.W_out`,
        attnlabShape: [dMlp, dModel],
        hf: `${h}.mlp.down_proj.weight`,
        hfShape: [dModel, dMlp],
        toAttnlab: (data) => transpose2d(data, dModel, dMlp),
        toHf: (data) => transpose2d(data, dMlp, dModel),
      },
    )
    if (config.bias) {
      for (const [name, shape] of [
        ['b_in', [dMlp]],
        ['b_out', [dModel]],
      ] as const) {
        rules.push({
          attnlab: `${a}.mlp.${name}`,
          attnlabShape: shape,
          hf: undefined,
          hfShape: shape,
          toAttnlab: identity,
          toHf: identity,
        })
      }
    }
  }
  rules.push({
    attnlab: 'ln_final.w',
    attnlabShape: [dModel],
    hf: 'model.norm.weight',
    hfShape: [dModel],
    toAttnlab: identity,
    toHf: identity,
  })
  if (!config.tiedEmbeddings) {
    rules.push({
      attnlab: 'unembed.W_U',
      attnlabShape: [dModel, dVocab],
      hf: 'lm_head.weight',
      hfShape: [dVocab, dModel],
      toAttnlab: (data) => transpose2d(data, dVocab, dModel),
      toHf: (data) => transpose2d(data, dModel, dVocab),
    })
  }
  return rules
}

/**
 * The tensors of the equivalent Hugging Face checkpoint (`LlamaForCausalLM`, or
 * `Qwen2ForCausalLM` with `qkv` biases): exact names and shapes, in checkpoint order
 * (`lm_head.weight` only when untied, as `save_pretrained` writes it).
 *
 * @param config - a `llama` configuration
 * @param biases - which biases the checkpoint stores (default none; must be none when
 *   `config.bias` is false)
 * @returns name to shape
 * @category Import
 */
export function huggingFaceLlamaShapes(
  config: TransformerConfig,
  biases: LlamaBiasLayout = NO_BIASES,
): Map<string, readonly number[]> {
  const out = new Map<string, readonly number[]>()
  for (const rule of llamaRules(config, biases)) if (rule.hf !== undefined) out.set(rule.hf, rule.hfShape)
  return out
}

/** The Hugging Face name of the token embedding. */
const HF_EMBED = 'model.embed_tokens.weight'
/** The Hugging Face name of the classifier (unembedding). */
const HF_HEAD = 'lm_head.weight'

/**
 * Where the token embedding or the classifier is really stored, for checkpoints that store
 * tied embeddings once. Two ways a file says so:
 * - the safetensors `__metadata__` maps the absent name to the stored one (what
 *   `safetensors.torch.save_model` writes for shared tensors), in either direction
 *   (`model.embed_tokens.weight` -> `lm_head.weight` or the reverse);
 * - `tie_word_embeddings: true` (`config.tiedEmbeddings`) with only `lm_head.weight` stored.
 *
 * @param config - the model's `llama` configuration
 * @param stored - the names of the tensors the files hold
 * @param metadata - the safetensors `__metadata__` (of every shard, merged)
 * @returns absent name to the stored name to read in its place (empty when nothing is tied
 *   away), and a note per alias for the load notes
 * @category Import
 */
export function tiedEmbeddingAliases(
  config: TransformerConfig,
  stored: ReadonlySet<string>,
  metadata: Readonly<Record<string, string>> = {},
): { readonly aliases: ReadonlyMap<string, string>; readonly notes: readonly string[] } {
  const aliases = new Map<string, string>()
  const notes: string[] = []
  for (const [absent, other] of [
    [HF_EMBED, HF_HEAD],
    [HF_HEAD, HF_EMBED],
  ] as const) {
    if (stored.has(absent) || !stored.has(other)) continue
    if (metadata[absent] === other) {
      aliases.set(absent, other)
      notes.push(`'${absent}' is stored once, as '${other}' (safetensors __metadata__ alias)`)
    } else if (absent === HF_EMBED && config.tiedEmbeddings) {
      aliases.set(absent, other)
      notes.push(`'${absent}' is absent; read from '${other}' (tie_word_embeddings is true)`)
    }
  }
  return { aliases, notes }
}

/** The names of tensors a Hugging Face checkpoint may carry that hold no learned weight. */
const IGNORABLE_HF = /^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$/

/** Options of {@link checkTensorSet}. */
export interface TensorSetCheck {
  /** The file (or directory) the tensors come from, for messages. */
  readonly file?: string | undefined
  /** Names present in the file that are allowed and ignored. */
  readonly ignore?: (name: string) => boolean
}

function listNames(names: readonly string[], limit = 12): string {
  const shown = names.slice(0, limit).map((n) => `'${n}'`)
  return names.length > limit ? `${shown.join(', ')} and ${names.length - limit} more` : shown.join(', ')
}

/**
 * Checks that the tensors found are exactly the tensors expected, with the expected shapes.
 * Reports every missing tensor, every unexpected tensor, or every shape mismatch in one error.
 *
 * @param expected - name to shape, what the configuration needs
 * @param found - name to shape, what the file holds
 * @throws {@link ModelFileError} `missing-tensor`, `unexpected-tensor` or `shape-mismatch`,
 *   listing the names (and shapes) expected and found
 */
export function checkTensorSet(
  expected: ReadonlyMap<string, readonly number[]>,
  found: ReadonlyMap<string, readonly number[]>,
  options: TensorSetCheck = {},
): void {
  const file = options.file
  const missing = [...expected.keys()].filter((name) => !found.has(name))
  if (missing.length > 0) {
    throw new ModelFileError(
      'missing-tensor',
      `${missing.length} of the ${expected.size} tensors the configuration needs are missing: ${listNames(missing)}. ` +
        `Found ${found.size} tensors: ${listNames([...found.keys()], 8)}`,
      { file, tensor: missing[0], missing, expected: [...expected.keys()], found: [...found.keys()] },
    )
  }
  const unexpected = [...found.keys()].filter((name) => !expected.has(name) && !(options.ignore?.(name) ?? false))
  if (unexpected.length > 0) {
    throw new ModelFileError(
      'unexpected-tensor',
      `${unexpected.length} tensors have no place in the configured model: ${listNames(unexpected)} ` +
        `(nothing is dropped silently; expected exactly: ${listNames([...expected.keys()], 8)})`,
      { file, tensor: unexpected[0], unexpected, expected: [...expected.keys()] },
    )
  }
  const mismatched: string[] = []
  for (const [name, shape] of expected) {
    const actual = found.get(name) as readonly number[]
    if (actual.length !== shape.length || actual.some((d, i) => d !== shape[i])) {
      mismatched.push(`'${name}' is [${actual.join(', ')}], expected [${shape.join(', ')}]`)
    }
  }
  if (mismatched.length > 0) {
    const first = mismatched[0] as string
    throw new ModelFileError(
      'shape-mismatch',
      `${mismatched.length} tensors have the wrong shape: ${mismatched.slice(0, 8).join('; ')}`,
      {
        file,
        tensor: first.slice(1, first.indexOf("'", 1)),
        mismatched,
      },
    )
  }
}

function checkFinite(name: string, data: Float32Array, file: string | undefined): void {
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i])) {
      throw new ModelFileError(
        'non-finite',
        `tensor '${name}' holds ${data[i]} at flat index ${i}; weights must be finite`,
        {
          file,
          tensor: name,
          index: i,
        },
      )
    }
  }
}

/**
 * Hugging Face `LlamaForCausalLM` / `MistralForCausalLM` / `Qwen2ForCausalLM` tensors (names,
 * `[out, in]` layout, rotate-half RoPE) to attnlab `llama` parameters. Validates the whole set
 * first (names, shapes), then converts and checks every value is finite.
 *
 * @param config - the `llama` configuration the tensors belong to
 * @param shapes - name to shape of every tensor present
 * @param read - returns a tensor's values (float32, row-major) by Hugging Face name; called only
 *   after every name and shape has been checked
 * @param options - `biases` the checkpoint stores (default none); `file` for messages; `ignore`
 *   for buffers that carry no weights (default: `rotary_emb.inv_freq`)
 * @returns attnlab parameters by TransformerLens name (new arrays; biases the checkpoint lacks
 *   are zero)
 * @throws {@link ModelFileError} `missing-tensor`, `unexpected-tensor`, `shape-mismatch` or
 *   `non-finite`, naming the tensors at fault; `invalid-header` when a tied checkpoint also
 *   stores an `lm_head.weight` that differs from the embedding
 * @category Import
 */
export function llamaFromHuggingFace(
  config: TransformerConfig,
  shapes: ReadonlyMap<string, readonly number[]>,
  read: (name: string) => Float32Array,
  options: TensorSetCheck & { readonly biases?: LlamaBiasLayout } = {},
): TensorMap {
  const biases = options.biases ?? NO_BIASES
  const rules = llamaRules(config, biases)
  const expected = huggingFaceLlamaShapes(config, biases)
  const ignore = options.ignore ?? ((name: string) => IGNORABLE_HF.test(name))
  let found = shapes
  // A tied model whose file also stores lm_head (some exporters do): allowed when equal.
  const tiedHead = config.tiedEmbeddings && shapes.has('lm_head.weight')
  if (tiedHead) {
    found = new Map([...shapes].filter(([name]) => name !== 'lm_head.weight'))
  }
  checkTensorSet(expected, found, { file: options.file, ignore })
  if (tiedHead) {
    const head = shapes.get('lm_head.weight') as readonly number[]
    if (head.length !== 2 || head[0] !== config.dVocab || head[1] !== config.dModel) {
      throw new ModelFileError(
        'shape-mismatch',
        `1 tensors have the wrong shape: 'lm_head.weight' is [${head.join(', ')}], expected [${config.dVocab}, ` +
          `${config.dModel}]`,
        {
          file: options.file,
          tensor: 'lm_head.weight',
        },
      )
    }
  }
  const out: TensorMap = new Map()
  for (const rule of rules) {
    if (rule.hf === undefined) {
      out.set(rule.attnlab, { shape: rule.attnlabShape, data: new Float32Array(numel(rule.attnlabShape)) })
      continue
    }
    const data = read(rule.hf)
    if (data.length !== numel(rule.hfShape)) {
      throw new ModelFileError(
        'shape-mismatch',
        `tensor '${rule.hf}' has ${data.length} values, expected ${numel(rule.hfShape)}`,
        {
          file: options.file,
          tensor: rule.hf,
        },
      )
    }
    checkFinite(rule.hf, data, options.file)
    out.set(rule.attnlab, { shape: rule.attnlabShape, data: rule.toAttnlab(data) })
  }
  if (tiedHead) {
    const head = read('lm_head.weight')
    const embed = out.get('embed.W_E') as Float32Tensor
    const equal = head.length === embed.data.length && head.every((v, i) => v === embed.data[i])
    if (!equal) {
      throw new ModelFileError(
        'invalid-header',
        `tie_word_embeddings is true but 'lm_head.weight' differs from 'model.embed_tokens.weight'; ` +
          `set tie_word_embeddings to false to load a separate classifier`,
        { file: options.file, tensor: 'lm_head.weight' },
      )
    }
  }
  return out
}

/**
 * The bias layout a Hugging Face export of this model needs: none without biases; with biases,
 * `q/k/v/o` (Llama `attention_bias: true`) when the MLP biases `b_in`, `b_out` are all zero.
 *
 * @param config - a `llama` configuration
 * @param weights - its parameters (the MLP biases are inspected)
 * @returns the layout, or `undefined` when the model has non-zero MLP biases (which
 *   `LlamaForCausalLM` cannot express next to a bias-free gate)
 * @category Import
 */
export function huggingFaceBiasLayout(
  config: TransformerConfig,
  weights: ReadonlyMap<string, Float32Tensor>,
): LlamaBiasLayout | undefined {
  if (!config.bias) return NO_BIASES
  for (let l = 0; l < config.nLayers; l++) {
    for (const name of [`blocks.${l}.mlp.b_in`, `blocks.${l}.mlp.b_out`]) {
      const tensor = weights.get(name)
      if (tensor?.data.some((v) => v !== 0)) return undefined
    }
  }
  return { qkv: true, o: true }
}

/**
 * attnlab `llama` parameters to Hugging Face `LlamaForCausalLM` tensors (exact names,
 * `[out, in]` layout, rotate-half RoPE; no `lm_head.weight` when tied, as `save_pretrained`
 * writes it).
 *
 * @param config - the model's `llama` configuration
 * @param weights - every parameter by TransformerLens name (see `parameterShapes`)
 * @param biases - the bias layout to write (default: {@link huggingFaceBiasLayout})
 * @returns Hugging Face tensors in checkpoint order
 * @throws {@link ModelFileError} `missing-tensor` / `unexpected-tensor` / `shape-mismatch` when
 *   `weights` does not match the configuration
 * @throws {@link UnsupportedModelError} when a parameter the layout has no tensor for is not
 *   zero (e.g. MLP biases)
 * @category Import
 */
export function llamaToHuggingFace(
  config: TransformerConfig,
  weights: ReadonlyMap<string, Float32Tensor>,
  biases: LlamaBiasLayout | undefined = huggingFaceBiasLayout(config, weights),
): TensorMap {
  if (biases === undefined) {
    throw new UnsupportedModelError(
      'this model has non-zero MLP biases (b_in, b_out), which LlamaForCausalLM cannot express; export it in the ' +
        'attnlab format',
    )
  }
  const rules = llamaRules(config, biases)
  checkTensorSet(
    new Map(rules.map((rule) => [rule.attnlab, rule.attnlabShape])),
    new Map([...weights].map(([name, tensor]) => [name, tensor.shape])),
  )
  const out: TensorMap = new Map()
  for (const rule of rules) {
    const tensor = weights.get(rule.attnlab) as Float32Tensor
    if (rule.hf === undefined) {
      if (tensor.data.some((v) => v !== 0)) {
        throw new UnsupportedModelError(
          `parameter '${rule.attnlab}' is not zero, but the Hugging Face layout has no tensor for it`,
        )
      }
      continue
    }
    out.set(rule.hf, { shape: rule.hfShape, data: rule.toHf(tensor.data) })
  }
  return out
}

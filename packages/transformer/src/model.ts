/**
 * The transformer: one readable implementation of four architectures (`minimal`, `gpt`,
 * `llama`, `mixer`; see {@link Architecture}), in dependency order Attention -> Mlp -> Block ->
 * Transformer, built from tfjs-core ops and `tf.variable`s, with TransformerLens hook points,
 * batched head masks, and pluggable attention through `@attnlab/core`'s `AttentionKernel`.
 *
 * Conventions:
 * - Inside the model the residual stream is 2-D, `[batch * pos, dModel]`, so every projection is
 *   one rank-2 matmul (the fast path on wasm); hooks see TransformerLens shapes
 *   (`[batch, pos, dModel]`, reshaped for free).
 * - Parameters are stored in TransformerLens layout and names (`blocks.0.attn.W_Q` is
 *   `[nHeads, dModel, dHead]`); the fused projection matrices are assembled from them on each
 *   forward pass (a few small copies, differentiable).
 * - Queries, keys and values are computed by one fused QKV matmul; attention runs per
 *   `[batch, heads]` without loops over heads; embeddings use `@attnlab/core/kernels`' `gatherRows`,
 *   which trains on every backend (tfjs-wasm lacks `tf.gather`'s gradient).
 * - One path per module. What differs between architectures is composed in, once per model
 *   (`ArchitectureParts` in `pass.ts`): GPT and Llama share the standard parts here (their
 *   differences are configuration); the minimal model (Yüksel et al., arXiv 2602.19143: one-hot
 *   input, no key projection, heads summed, no residual, its structured path) has its parts in
 *   `minimal.ts`; the MLP-Mixer (no attention: a causal token-mixing MLP in its place) has its
 *   block's token mixing in `mixer.ts`. Fast paths are the kernels' (`denseAttention` runs the fused attention op on
 *   the packed projections), never a branch here.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import {
  ConfigError,
  InvalidArgumentError,
  Rng,
  ShapeError,
  syncReadsAllowed,
  denseAttention,
  type AttentionContext,
  type AttentionHooks,
  type AttentionKernel,
  type AttentionPrefillInput,
  type AttentionResult,
} from '@attnlab/core'
import { gatherRows, layerNorm, linear, requireAttnlabKernels } from '@attnlab/core/kernels'
import { booleanField, configSchema, customField, parseConfig, type z } from '@attnlab/core/schema'
import { configToJSON, type Architecture, type TransformerConfig } from './config.ts'
import {
  HookRunner,
  hookName,
  type BlockHookName,
  type ForwardHook,
  type HookFunction,
  type HookName,
  type HookSelector,
} from './hooks.ts'
import type { KVCache } from './kv-cache.ts'
import { minimalArchitecture } from './minimal.ts'
import { mixerParts } from './mixer.ts'
import { activation, applyRotary, dropout, rmsNorm } from './ops.ts'
import {
  fromPosition,
  headMaskFor,
  headsToColumns,
  lazyProjected,
  param,
  type ArchitectureParts,
  type AttentionProjections,
  type ModelBlock,
  type ParameterSpec,
  type Parameters,
  type PassContext,
  type Projected,
  type ResidualHook,
} from './pass.ts'

/**
 * Token ids: an int32 tensor `[batch, pos]`, or nested arrays.
 *
 * @category Model
 */
export type TokenInput = tf.Tensor2D | readonly (readonly number[])[]

/**
 * What one attention call reported (see `AttentionResult` in `@attnlab/core`).
 *
 * @category Model
 */
export interface AttentionReport {
  /** Block index. */
  readonly layer: number
  /** Kernel name. */
  readonly kernel: string
  /** Query-key pairs computed (summed over batch and heads). */
  readonly computedPairs: number
  /** Causal pairs a dense computation computes. */
  readonly totalPairs: number
  /** Method-specific numbers. */
  readonly extra?: Readonly<Record<string, number>>
}

/**
 * The schema of {@link ForwardOptions}: each option's meaning and default, declared once (the
 * values a schema cannot check, such as a head mask's shape or `logitsFrom` against the
 * sequence, are checked by the pass itself).
 *
 * @category Model
 */
export const forwardOptionsSchema = configSchema({
  /** Temporary hooks for this pass only (never stored on the model). */
  fwdHooks: customField<readonly ForwardHook[]>('temporary hooks for this pass only').optional(),
  /**
   * Per-head multipliers of `hook_z` (1 keeps a head, 0 knocks it out): `[nLayers, nHeads]`
   * (same for every sequence) or `[batch, nLayers, nHeads]` (one pattern per sequence, so many
   * knockout patterns run in one batched pass). Applied before `hook_z` runs, so the hook and a
   * cache see the masked values.
   */
  headMask: customField<tf.Tensor>(
    'per-head multipliers of hook_z, [nLayers, nHeads] or [batch, nLayers, nHeads] (0 knocks a head out)',
  ).optional(),
  /** Attention kernel for this pass (default: the model's {@link Transformer.attention}). */
  attention: customField<AttentionKernel>("attention kernel for this pass (default: the model's)").optional(),
  /** Training mode: dropout is applied (when `config.dropout > 0`) with masks drawn from `rng`. Default false. */
  training: booleanField('training mode: dropout is applied with masks drawn from rng').default(false),
  /** Random stream for dropout (required when training with dropout > 0). */
  rng: customField<Rng>('random stream for dropout (required when training with dropout > 0)').optional(),
  /** If given, each attention call's accounting is pushed here. */
  attentionReports: customField<AttentionReport[]>("each attention call's accounting is pushed here").optional(),
  /**
   * Compute logits only for positions `logitsFrom .. pos - 1` (default 0: all); the result is then
   * `[batch, pos - logitsFrom, dVocab]`. Trainers use it to skip positions no loss scores (the
   * minimal model saves that share of its largest matmuls). Checked against the sequence: an
   * integer in `[0, pos - 1]`, else a `ShapeError`.
   */
  logitsFrom: customField<number>('compute logits only from this position on (default 0: all)').optional(),
})

/**
 * Options of a forward pass (see {@link forwardOptionsSchema}).
 *
 * @category Model
 */
export type ForwardOptions = Readonly<z.input<typeof forwardOptionsSchema>>

/**
 * The schema of {@link RunWithCacheOptions}: what to record, and the forward options a cached
 * pass takes ({@link forwardOptionsSchema}'s `headMask`, `fwdHooks`, `attention`).
 *
 * @category Model
 */
export const runWithCacheOptionsSchema = configSchema({
  /** Which activations to keep: a name, a list of names, or a predicate (default: all). */
  namesFilter: customField<HookName | readonly HookName[] | ((name: HookName) => boolean)>(
    'which activations to keep: a name, a list of names or a predicate (default: all)',
  ).optional(),
  /** As the forward pass's `headMask`. */
  headMask: forwardOptionsSchema.shape.headMask,
  /** Extra hooks that run before caching (e.g. an intervention). */
  fwdHooks: customField<readonly ForwardHook[]>('extra hooks that run before caching').optional(),
  /** As the forward pass's `attention`. */
  attention: forwardOptionsSchema.shape.attention,
})

/**
 * Options of {@link Transformer.runWithCache} (see {@link runWithCacheOptionsSchema}).
 *
 * @category Model
 */
export type RunWithCacheOptions = Readonly<z.input<typeof runWithCacheOptionsSchema>>

/**
 * The schema of {@link ForwardCachedOptions}: the forward options a pass with a KV cache takes
 * ({@link forwardOptionsSchema} without `training` and `rng`: generation never trains).
 *
 * @category Model
 */
export const forwardCachedOptionsSchema = forwardOptionsSchema.omit({ training: true, rng: true })

/**
 * Options of {@link Transformer.forwardCached} (see {@link forwardCachedOptionsSchema}).
 *
 * @category Model
 */
export type ForwardCachedOptions = Readonly<z.input<typeof forwardCachedOptionsSchema>>

/**
 * The schema of {@link SetWeightsOptions}: each option's meaning and default, declared once.
 *
 * @category Model
 */
export const setWeightsOptionsSchema = configSchema({
  /** Every parameter must be given (default true); false replaces only the parameters given. */
  strict: booleanField('every parameter must be given (false: replace only the parameters given)').default(true),
})

/**
 * Options of {@link Transformer.setWeights} (see {@link setWeightsOptionsSchema}).
 *
 * @category Model
 */
export type SetWeightsOptions = Readonly<z.input<typeof setWeightsOptionsSchema>>

/**
 * Activations recorded by {@link Transformer.runWithCache}. Owns its tensors: call
 * {@link ActivationCache.dispose} when done.
 *
 * @category Model
 */
export class ActivationCache {
  private readonly entries = new Map<HookName, tf.Tensor>()
  private disposed = false

  /** @internal */
  set(name: HookName, tensor: tf.Tensor): void {
    const previous = this.entries.get(name)
    if (previous !== undefined) previous.dispose()
    this.entries.set(name, tensor)
  }

  /**
   * The activation recorded at `name` (owned by the cache: do not dispose it).
   *
   * @throws `InvalidArgumentError` (`@attnlab/core`) naming the available activations if absent
   */
  get(name: HookName): tf.Tensor {
    const tensor = this.entries.get(name)
    if (tensor === undefined || this.disposed) {
      throw new InvalidArgumentError(
        this.disposed
          ? `activation cache was disposed; cannot read '${name}'`
          : `'${name}' is not in the cache; cached: ${[...this.entries.keys()].join(', ') || 'nothing'}`,
        { name },
      )
    }
    return tensor
  }

  /** Whether `name` was recorded. */
  has(name: HookName): boolean {
    return !this.disposed && this.entries.has(name)
  }

  /** The recorded names, in forward order. */
  names(): HookName[] {
    return [...this.entries.keys()]
  }

  /** Number of recorded activations. */
  get size(): number {
    return this.entries.size
  }

  /** Frees every recorded tensor. Safe to call twice. */
  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    for (const tensor of this.entries.values()) tensor.dispose()
    this.entries.clear()
  }
}

/** A handle to a permanent hook added with {@link Transformer.addHook}. @category Model */
export interface HookHandle {
  /** Removes the hook (idempotent). */
  remove(): void
}

/**
 * The schema of {@link TransformerOptions}.
 *
 * @category Model
 */
export const transformerOptionsSchema = configSchema({
  /** The attention kernel (default `denseAttention` of `@attnlab/core`). */
  attention: customField<AttentionKernel>('the attention kernel (default dense)').optional(),
})

/** Options of {@link createTransformer} (see {@link transformerOptionsSchema}). @category Model */
export type TransformerOptions = Readonly<z.input<typeof transformerOptionsSchema>>

// =====================================================================================
// Attention
// =====================================================================================

/** GPT and Llama: one fused QKV matmul (`[W_Q | W_K | W_V]`) and the output projection `W_O`. */
class StandardProjections implements AttentionProjections {
  constructor(
    private readonly parameters: Parameters,
    private readonly config: TransformerConfig,
    readonly layer: number,
  ) {}

  private name(suffix: string): string {
    return `blocks.${this.layer}.attn.${suffix}`
  }

  project(x: tf.Tensor2D, context: PassContext): Projected {
    const { batch, pos } = context
    const { nHeads, nKvHeads, dHead } = this.config
    const qkv = linear(x, this.qkvWeights(), this.qkvBias()) // [batch * pos, (nHeads + 2 nKvHeads) * dHead]
    // [batch, pos, 3 * nHeads * dHead] when every head has its own key and value
    const packed = nKvHeads === nHeads ? (tf.reshape(qkv, [batch, pos, 3 * nHeads * dHead]) as tf.Tensor3D) : undefined
    return lazyProjected(packed, () => {
      const [q2, k2, v2] = tf.split(qkv, [nHeads * dHead, nKvHeads * dHead, nKvHeads * dHead], 1) as [
        tf.Tensor2D,
        tf.Tensor2D,
        tf.Tensor2D,
      ]
      return {
        q: tf.reshape(q2, [batch, pos, nHeads, dHead]), // [batch, pos, nHeads, dHead]
        k: tf.reshape(k2, [batch, pos, nKvHeads, dHead]), // [batch, pos, nKvHeads, dHead]
        v: tf.reshape(v2, [batch, pos, nKvHeads, dHead]), // [batch, pos, nKvHeads, dHead]
      }
    })
  }

  output(z: tf.Tensor4D, context: PassContext): tf.Tensor2D {
    const { batch, pos } = context
    const { nHeads, dModel } = this.config
    const dValue = z.shape[3]
    const wO = param(this.parameters, this.name('W_O')) // [nHeads, dHead, dModel]
    if (!context.hooks.has(hookName.result(this.layer))) {
      return linear(
        tf.reshape(z, [batch * pos, nHeads * dValue]),
        tf.reshape(wO, [nHeads * dValue, dModel]) as tf.Tensor2D,
        this.outBias(),
      ) // [batch * pos, dModel]
    }
    // Per-head outputs (TransformerLens hook_result), materialised only when hooked.
    // [nHeads, batch * pos, dHead]
    const zHeads = tf.reshape(tf.transpose(z, [2, 0, 1, 3]), [nHeads, batch * pos, dValue])
    const perHead = tf.matMul(zHeads, wO as tf.Tensor3D) // [nHeads, batch * pos, dModel]
    const result4 = context.hooks.run(
      hookName.result(this.layer),
      tf.reshape(tf.transpose(perHead, [1, 0, 2]), [batch, pos, nHeads, dModel]) as tf.Tensor4D,
    ) // [batch, pos, nHeads, dModel]
    const out = tf.reshape(tf.sum(result4, 2), [batch * pos, dModel]) as tf.Tensor2D // [batch * pos, dModel]
    return this.config.bias ? (tf.add(out, param(this.parameters, this.name('b_O'))) as tf.Tensor2D) : out
  }

  /** `[W_Q | W_K | W_V]` as one `[dModel, (nHeads + 2 nKvHeads) * dHead]` matrix. */
  private qkvWeights(): tf.Tensor2D {
    return tf.concat(
      [
        headsToColumns(param(this.parameters, this.name('W_Q'))), // [dModel, nHeads * dHead]
        headsToColumns(param(this.parameters, this.name('W_K'))), // [dModel, nKvHeads * dHead]
        headsToColumns(param(this.parameters, this.name('W_V'))), // [dModel, nKvHeads * dHead]
      ],
      1,
    ) as tf.Tensor2D
  }

  /** `[b_Q | b_K | b_V]`, `[(nHeads + 2 nKvHeads) * dHead]`, or null without biases. */
  private qkvBias(): tf.Tensor1D | null {
    if (!this.config.bias) return null
    return tf.concat(
      [
        tf.reshape(param(this.parameters, this.name('b_Q')), [-1]),
        tf.reshape(param(this.parameters, this.name('b_K')), [-1]),
        tf.reshape(param(this.parameters, this.name('b_V')), [-1]),
      ],
      0,
    ) as tf.Tensor1D
  }

  private outBias(): tf.Tensor1D | null {
    return this.config.bias ? (param(this.parameters, this.name('b_O')) as tf.Tensor1D) : null
  }
}

/**
 * One block's attention: projections, hooks on queries, keys and values, rotary embedding, the
 * attention kernel (prefill or cached decode), head masks, `hook_z`, output. One path for every
 * architecture and kernel: what differs is the {@link AttentionProjections} it is built with and
 * the kernel in the pass (a fused fast path is the kernel's business, see
 * `AttentionPrefillInput.packed` in `@attnlab/core`).
 */
class Attention {
  constructor(
    private readonly config: TransformerConfig,
    private readonly projections: AttentionProjections,
    readonly layer: number,
  ) {}

  /**
   * @param x - the block's normalised input (minimal: the one-hot input), `[batch * pos, dModel]`
   * @returns the attention output `[batch * pos, dModel]`
   */
  forward(x: tf.Tensor2D, context: PassContext): tf.Tensor2D {
    const input = this.kernelInput(this.projections.project(x, context), context)
    const result = this.runKernel(input, context)
    let z = this.headsOf(result, context) // [batch, pos, nHeads, dValue]
    const mask = headMaskFor(context, this.layer)
    if (mask !== null)
      z = tf.mul(z, tf.reshape(mask, [mask.shape[0] as number, 1, this.config.nHeads, 1])) as tf.Tensor4D
    z = context.hooks.run(hookName.z(this.layer), z)
    return this.projections.output(z, context) // [batch * pos, dModel]
  }

  /**
   * The kernel's input: hooked (and rotated) queries, keys and values as `[batch, heads, pos, d]`,
   * plus the packed projections when nothing in this pass reads the heads apart.
   */
  private kernelInput(projected: Projected, context: PassContext): AttentionPrefillInput {
    const { hooks } = context
    const layer = this.layer
    const heads = (): { q: tf.Tensor4D; k: tf.Tensor4D; v: tf.Tensor4D } => {
      let q = hooks.run(hookName.q(layer), projected.q) // [batch, pos, nHeads, dHead]
      let k = hooks.run(hookName.k(layer), projected.k) // [batch, pos, nKvHeads, dHead]
      const v = hooks.run(hookName.v(layer), projected.v) // [batch, pos, nKvHeads, dValue]
      if (this.config.positional === 'rotary') {
        const { ropeTheta, rotaryDims } = this.config
        q = hooks.run(hookName.rotQ(layer), applyRotary(q, context.start, ropeTheta, rotaryDims))
        k = hooks.run(hookName.rotK(layer), applyRotary(k, context.start, ropeTheta, rotaryDims))
      }
      return {
        q: tf.transpose(q, [0, 2, 1, 3]), // [batch, nHeads, pos, dHead]
        k: tf.transpose(k, [0, 2, 1, 3]), // [batch, nKvHeads, pos, dHead]
        v: tf.transpose(v, [0, 2, 1, 3]), // [batch, nKvHeads, pos, dValue]
      }
    }
    const common = { scale: this.config.attnScale, layer }
    if (projected.qkv === undefined || !this.packable(context)) return { ...heads(), ...common }
    const lazy = lazyProjected(undefined, heads)
    return {
      get q() {
        return lazy.q
      },
      get k() {
        return lazy.k
      },
      get v() {
        return lazy.v
      },
      ...common,
      packed: { qkv: projected.qkv, nHeads: this.config.nHeads },
    }
  }

  /**
   * Whether the kernel may take the packed projections: nothing of this pass reads or changes the
   * heads apart (no hook on q/k/v/z/result, no rotary embedding, no KV cache, no head mask).
   * Scores, pattern and attention dropout are the kernel's to check (`needsPattern`).
   */
  private packable(context: PassContext): boolean {
    if (context.cache !== null || this.config.positional === 'rotary' || headMaskFor(context, this.layer) !== null)
      return false
    if (!context.hooks.active) return true
    const { q, k, v, z, result } = hookName
    return [q, k, v, z, result].every((point) => !context.hooks.has(point(this.layer)))
  }

  /** Prefill (training, plain forward, prompt) or cached decode, with the call's accounting. */
  private runKernel(input: AttentionPrefillInput, context: PassContext): AttentionResult {
    const kernel = context.attention
    const kernelContext = this.kernelContext(context)
    const layerCache = context.cache?.layers[this.layer]
    let result: AttentionResult
    if (context.cache !== null && layerCache !== undefined && layerCache.positions > 0) {
      context.cache.append(this.layer, input.k, input.v)
      result = kernel.decode(
        { q: input.q, cache: layerCache, position: context.start, scale: input.scale, layer: this.layer },
        kernelContext,
      )
    } else {
      if (context.cache !== null && layerCache !== undefined) {
        context.cache.append(this.layer, input.k, input.v)
        layerCache.promptLength = context.pos
      }
      result = kernel.prefill(input, kernelContext)
      if (context.cache !== null && layerCache !== undefined) kernel.afterPrefill?.(input, layerCache)
    }
    context.reports?.push({
      layer: this.layer,
      kernel: kernel.name,
      computedPairs: result.computedPairs,
      totalPairs: result.totalPairs,
      ...(result.extra === undefined ? {} : { extra: result.extra }),
    })
    return result
  }

  /** The heads' outputs position-major, `[batch, pos, nHeads, dValue]`. */
  private headsOf(result: AttentionResult, context: PassContext): tf.Tensor4D {
    if (result.zByPosition === undefined) return tf.transpose(result.z, [0, 2, 1, 3]) as tf.Tensor4D
    const { batch, pos } = context
    const { nHeads } = this.config
    return tf.reshape(result.zByPosition, [batch, pos, nHeads, result.zByPosition.shape[2] / nHeads]) as tf.Tensor4D
  }

  /** The hooks the kernel calls on the scores and pattern (plus attention dropout when training). */
  private kernelContext(context: PassContext): AttentionContext {
    const scoresName = hookName.attnScores(this.layer)
    const patternName = hookName.pattern(this.layer)
    const hooks: { attnScores?: (s: tf.Tensor4D) => tf.Tensor4D; pattern?: (p: tf.Tensor4D) => tf.Tensor4D } = {}
    if (context.hooks.has(scoresName)) hooks.attnScores = (scores) => context.hooks.run(scoresName, scores)
    const dropPattern = context.rng !== null && this.config.dropout > 0
    if (context.hooks.has(patternName) || dropPattern) {
      hooks.pattern = (pattern) => {
        const hooked = context.hooks.run(patternName, pattern)
        return dropPattern ? dropout(hooked, this.config.dropout, context.rng as Rng) : hooked
      }
    }
    return {
      hooks: hooks as AttentionHooks,
      needsPattern: hooks.attnScores !== undefined || hooks.pattern !== undefined,
    }
  }
}

// =====================================================================================
// Mlp
// =====================================================================================

/** The MLP: `W_out act(x W_in + b_in) + b_out`, or gated `W_out (act(x W_gate) * (x W_in))` (SwiGLU). */
class Mlp {
  constructor(
    private readonly parameters: Parameters,
    private readonly config: TransformerConfig,
    readonly layer: number,
  ) {}

  private name(suffix: string): string {
    return `blocks.${this.layer}.mlp.${suffix}`
  }

  /**
   * @param x - normalised input `[batch * pos, dModel]`
   * @returns `[batch * pos, dModel]`
   */
  forward(x: tf.Tensor2D, context: PassContext): tf.Tensor2D {
    const { batch, pos } = context
    const { dMlp, gatedMlp, bias } = this.config
    const hook = (
      name: BlockHookName<'mlp.hook_pre' | 'mlp.hook_pre_linear' | 'mlp.hook_post'>,
      t: tf.Tensor2D,
    ): tf.Tensor2D =>
      tf.reshape(context.hooks.run(name, tf.reshape(t, [batch, pos, dMlp])), [batch * pos, dMlp]) as tf.Tensor2D
    let post: tf.Tensor2D
    if (gatedMlp) {
      const fused = tf.concat(
        [param(this.parameters, this.name('W_gate')), param(this.parameters, this.name('W_in'))],
        1,
      ) // [dModel, 2 dMlp]
      // [batch * pos, dMlp] each
      let [gate, up] = tf.split(linear(x, fused as tf.Tensor2D), 2, 1) as [tf.Tensor2D, tf.Tensor2D]
      if (bias) {
        up = tf.add(up, param(this.parameters, this.name('b_in'))) as tf.Tensor2D
      }
      gate = hook(hookName.mlpPre(this.layer), gate)
      up = hook(hookName.mlpPreLinear(this.layer), up)
      post = tf.mul(activation(gate, this.config.actFn), up) as tf.Tensor2D // [batch * pos, dMlp]
    } else {
      const wIn = param(this.parameters, this.name('W_in')) as tf.Tensor2D
      const bIn = bias ? (param(this.parameters, this.name('b_in')) as tf.Tensor1D) : null
      const hooked = context.hooks.has(hookName.mlpPre(this.layer))
      if (this.config.actFn === 'gelu_new' && !hooked) {
        post = linear(x, wIn, bIn, 'gelu_new') // [batch * pos, dMlp]: matmul, bias and GELU fused
      } else {
        const pre = hook(hookName.mlpPre(this.layer), linear(x, wIn, bIn)) // [batch * pos, dMlp]
        post = activation(pre, this.config.actFn) // [batch * pos, dMlp]
      }
    }
    post = hook(hookName.mlpPost(this.layer), post)
    const bOut = bias ? (param(this.parameters, this.name('b_out')) as tf.Tensor1D) : null
    return linear(post, param(this.parameters, this.name('W_out')) as tf.Tensor2D, bOut) // [batch * pos, dModel]
  }
}

// =====================================================================================
// Block
// =====================================================================================

/**
 * A pre-norm block: `resid + attn(ln1(resid))`, then `+ mlp(ln2(.))`; with `parallelResidual`
 * `resid + attn(ln1(resid)) + mlp(ln2(resid))`; minimal: attention only, no residual; the mixer: its token mixing in
 * the attention's place.
 */
class Block {
  readonly attention: ModelBlock
  readonly mlp: Mlp | null
  /** Whether the attention output is added to the block input (false for the minimal model). */
  private readonly residual: boolean

  constructor(
    private readonly parameters: Parameters,
    private readonly config: TransformerConfig,
    readonly layer: number,
    architecture: ArchitectureParts,
  ) {
    this.attention =
      architecture.tokenMixing === undefined
        ? new Attention(config, architecture.projections(parameters, config, layer), layer)
        : architecture.tokenMixing(parameters, config, layer)
    this.mlp = config.attnOnly ? null : new Mlp(parameters, config, layer)
    this.residual = architecture.residual
  }

  private normalize(x: tf.Tensor2D, which: 'ln1' | 'ln2', context: PassContext): tf.Tensor2D {
    const { normalization, normEps, bias, dModel } = this.config
    if (normalization === 'none') return x
    const prefix = `blocks.${this.layer}.${which}`
    const w = param(this.parameters, `${prefix}.w`) as tf.Tensor1D
    const normalized =
      normalization === 'layernorm'
        ? layerNorm(x, w, bias ? (param(this.parameters, `${prefix}.b`) as tf.Tensor1D) : null, normEps)
        : rmsNorm(x, w, normEps) // [batch * pos, dModel]
    return this.hook(hookName[which](this.layer), normalized, context, dModel)
  }

  private hook(name: HookName, x: tf.Tensor2D, context: PassContext, width: number): tf.Tensor2D {
    if (!context.hooks.has(name)) return x
    const { batch, pos } = context
    return tf.reshape(context.hooks.run(name, tf.reshape(x, [batch, pos, width])), [batch * pos, width]) as tf.Tensor2D
  }

  private drop(x: tf.Tensor2D, context: PassContext): tf.Tensor2D {
    return context.rng !== null && this.config.dropout > 0 ? dropout(x, this.config.dropout, context.rng) : x
  }

  /**
   * @param residual - `[batch * pos, dModel]`
   * @returns the block output `[batch * pos, dModel]` (minimal: the summed head outputs, no residual)
   */
  forward(residual: tf.Tensor2D, context: PassContext): tf.Tensor2D {
    const { dModel } = this.config
    const residPre = this.hook(hookName.residPre(this.layer), residual, context, dModel) // [batch * pos, dModel]
    if (this.config.parallelResidual && this.mlp !== null) return this.parallelForward(residPre, this.mlp, context)
    const attnOut = this.hook(
      hookName.attnOut(this.layer),
      this.drop(this.attention.forward(this.normalize(residPre, 'ln1', context), context), context),
      context,
      dModel,
    )
    // [batch * pos, dModel] (the minimal model has no residual connection)
    const residMid = this.residual ? (tf.add(residPre, attnOut) as tf.Tensor2D) : attnOut
    if (this.mlp === null) return this.hook(hookName.residPost(this.layer), residMid, context, dModel)
    const residMidHooked = this.hook(hookName.residMid(this.layer), residMid, context, dModel)
    const mlpOut = this.hook(
      hookName.mlpOut(this.layer),
      this.drop(this.mlp.forward(this.normalize(residMidHooked, 'ln2', context), context), context),
      context,
      dModel,
    )
    // [batch * pos, dModel]
    return this.hook(hookName.residPost(this.layer), tf.add(residMidHooked, mlpOut) as tf.Tensor2D, context, dModel)
  }

  /**
   * GPT-NeoX's parallel block (Black et al., arXiv 2204.06745, sec. 2.1.2): `x + attn(ln1(x)) + mlp(ln2(x))`, both
   * branches reading the block input; no residual stream between them, so no `hook_resid_mid`.
   *
   * @param residPre - the (hooked) block input, `[batch * pos, dModel]`
   * @returns the block output `[batch * pos, dModel]`
   */
  private parallelForward(residPre: tf.Tensor2D, mlp: Mlp, context: PassContext): tf.Tensor2D {
    const { dModel } = this.config
    const attnOut = this.hook(
      hookName.attnOut(this.layer),
      this.drop(this.attention.forward(this.normalize(residPre, 'ln1', context), context), context),
      context,
      dModel,
    ) // [batch * pos, dModel]
    const mlpOut = this.hook(
      hookName.mlpOut(this.layer),
      this.drop(mlp.forward(this.normalize(residPre, 'ln2', context), context), context),
      context,
      dModel,
    ) // [batch * pos, dModel]
    const residPost = tf.add(residPre, tf.add(attnOut, mlpOut)) as tf.Tensor2D // [batch * pos, dModel]
    return this.hook(hookName.residPost(this.layer), residPost, context, dModel)
  }
}

// =====================================================================================
// Transformer
// =====================================================================================

/** `N(0, std^2)` entries. */
function normalInit(std: number): ParameterSpec['init'] {
  return (rng, size) => rng.fillNormal(new Float32Array(size), 0, std)
}
const zerosInit: ParameterSpec['init'] = (_rng, size) => new Float32Array(size)
const onesInit: ParameterSpec['init'] = (_rng, size) => new Float32Array(size).fill(1)

/**
 * The parameters of a configuration, in a fixed order, with TransformerLens names and shapes.
 *
 * @param config - a resolved configuration
 * @returns `[name, shape]` pairs
 * @category Model
 */
export function parameterShapes(config: TransformerConfig): [string, number[]][] {
  return parameterSpecs(config).map((spec) => [spec.name, [...spec.shape]])
}

function parameterSpecs(config: TransformerConfig): ParameterSpec[] {
  return architectureOf(config).parameterSpecs(config)
}

/** GPT and Llama parameters (the minimal model's are in `minimal.ts`). */
function standardParameterSpecs(config: TransformerConfig): ParameterSpec[] {
  const { dVocab, nCtx, dModel, nLayers, nHeads, nKvHeads, dHead, dMlp, initRange } = config
  const specs: ParameterSpec[] = []
  const outputStd = initRange / Math.sqrt(2 * nLayers) // GPT-2: residual projections scaled by 1/sqrt(2 nLayers)
  const layerNormBias = config.normalization === 'layernorm' && config.bias
  specs.push({ name: 'embed.W_E', shape: [dVocab, dModel], init: normalInit(initRange) })
  if (config.positional === 'learned')
    specs.push({ name: 'pos_embed.W_pos', shape: [nCtx, dModel], init: normalInit(initRange) })
  for (let l = 0; l < nLayers; l++) {
    const p = `blocks.${l}`
    specs.push({ name: `${p}.ln1.w`, shape: [dModel], init: onesInit })
    if (layerNormBias) specs.push({ name: `${p}.ln1.b`, shape: [dModel], init: zerosInit })
    specs.push({ name: `${p}.attn.W_Q`, shape: [nHeads, dModel, dHead], init: normalInit(initRange) })
    specs.push({ name: `${p}.attn.W_K`, shape: [nKvHeads, dModel, dHead], init: normalInit(initRange) })
    specs.push({ name: `${p}.attn.W_V`, shape: [nKvHeads, dModel, dHead], init: normalInit(initRange) })
    specs.push({ name: `${p}.attn.W_O`, shape: [nHeads, dHead, dModel], init: normalInit(outputStd) })
    if (config.bias) {
      specs.push({ name: `${p}.attn.b_Q`, shape: [nHeads, dHead], init: zerosInit })
      specs.push({ name: `${p}.attn.b_K`, shape: [nKvHeads, dHead], init: zerosInit })
      specs.push({ name: `${p}.attn.b_V`, shape: [nKvHeads, dHead], init: zerosInit })
      specs.push({ name: `${p}.attn.b_O`, shape: [dModel], init: zerosInit })
    }
    if (!config.attnOnly) {
      specs.push({ name: `${p}.ln2.w`, shape: [dModel], init: onesInit })
      if (layerNormBias) specs.push({ name: `${p}.ln2.b`, shape: [dModel], init: zerosInit })
      specs.push({ name: `${p}.mlp.W_in`, shape: [dModel, dMlp], init: normalInit(initRange) })
      if (config.gatedMlp) specs.push({ name: `${p}.mlp.W_gate`, shape: [dModel, dMlp], init: normalInit(initRange) })
      specs.push({ name: `${p}.mlp.W_out`, shape: [dMlp, dModel], init: normalInit(outputStd) })
      if (config.bias) {
        specs.push({ name: `${p}.mlp.b_in`, shape: [dMlp], init: zerosInit })
        specs.push({ name: `${p}.mlp.b_out`, shape: [dModel], init: zerosInit })
      }
    }
  }
  specs.push({ name: 'ln_final.w', shape: [dModel], init: onesInit })
  if (layerNormBias) specs.push({ name: 'ln_final.b', shape: [dModel], init: zerosInit })
  if (!config.tiedEmbeddings) specs.push({ name: 'unembed.W_U', shape: [dModel, dVocab], init: normalInit(initRange) })
  return specs
}

/** Embeddings (+ learned positions), the blocks, the final norm and the unembedding. */
function standardForward(
  parameters: Parameters,
  blocks: readonly ModelBlock[],
  context: PassContext,
  hook2: ResidualHook,
): tf.Tensor2D {
  const { batch, pos, tokens, config } = context
  // Embeddings.
  const flatTokens = tf.reshape(tokens, [batch * pos]) as tf.Tensor1D
  // [batch * pos, dModel]
  let residual = hook2(hookName.embed, gatherRows(param(parameters, 'embed.W_E') as tf.Tensor2D, flatTokens))
  if (config.positional === 'learned') {
    const positions = tf.reshape(
      tf.add(tf.range(context.start, context.start + pos, 1, 'int32'), tf.zeros([batch, pos], 'int32')),
      [batch * pos],
    ) as tf.Tensor1D
    const posEmbed = hook2(
      hookName.posEmbed,
      gatherRows(param(parameters, 'pos_embed.W_pos') as tf.Tensor2D, positions),
    ) // [batch * pos, dModel]
    residual = tf.add(residual, posEmbed) as tf.Tensor2D
  }
  if (context.rng !== null && config.dropout > 0) residual = dropout(residual, config.dropout, context.rng)
  for (const block of blocks) residual = block.forward(residual, context) // [batch * pos, dModel]
  // Final norm and unembedding.
  const w = param(parameters, 'ln_final.w') as tf.Tensor1D
  const normalized =
    config.normalization === 'layernorm'
      ? layerNorm(
          residual,
          w,
          parameters.has('ln_final.b') ? (param(parameters, 'ln_final.b') as tf.Tensor1D) : null,
          config.normEps,
        )
      : config.normalization === 'rmsnorm'
        ? rmsNorm(residual, w, config.normEps)
        : residual
  // [batch * outPos, dModel]
  const final = fromPosition(hook2(hookName.lnFinal, normalized), batch, pos, context.logitsFrom)
  // [dModel, dVocab]
  const wU = config.tiedEmbeddings ? tf.transpose(param(parameters, 'embed.W_E')) : param(parameters, 'unembed.W_U')
  return linear(final, wU as tf.Tensor2D) // [batch * outPos, dVocab]
}

const standardArchitecture: ArchitectureParts = Object.freeze({
  parameterSpecs: standardParameterSpecs,
  projections: (parameters: Parameters, config: TransformerConfig, layer: number) =>
    new StandardProjections(parameters, config, layer),
  residual: true,
  forward: standardForward,
})

/** Each architecture's parts: the minimal model's (`minimal.ts`), the standard ones, the mixer's (`mixer.ts`). */
const ARCHITECTURES: Readonly<Record<Architecture, ArchitectureParts>> = Object.freeze({
  minimal: minimalArchitecture,
  gpt: standardArchitecture,
  llama: standardArchitecture,
  // The mixer's blocks in the standard pass (embeddings, final norm, unembedding).
  mixer: Object.freeze({ ...mixerParts, forward: standardForward }),
})

/** The parts of `config`'s architecture. */
function architectureOf(config: TransformerConfig): ArchitectureParts {
  return ARCHITECTURES[config.architecture]
}

/**
 * A transformer with TransformerLens-style hook points. Create with {@link createTransformer};
 * free its weights with {@link Transformer.dispose}.
 *
 * @example
 * ```ts
 * const model = createTransformer(presetConfig('gpt'))
 * const logits = model.forward([[1, 2, 3]]) // [1, 3, dVocab]
 * const { cache } = model.runWithCache([[1, 2, 3]], { namesFilter: (n) => n.endsWith('hook_pattern') })
 * cache.get('blocks.0.attn.hook_pattern') // [1, nHeads, 3, 3]
 * cache.dispose(); logits.dispose(); model.dispose()
 * ```
 * @category Model
 */
export class Transformer {
  /** The resolved, frozen configuration. */
  readonly config: TransformerConfig
  /** The attention kernel used when a call does not pass one. */
  attention: AttentionKernel
  private readonly parameters = new Map<string, tf.Variable>()
  private readonly blocks: Block[]
  private readonly architecture: ArchitectureParts
  private readonly permanentHooks: { selector: HookSelector; hook: HookFunction; id: number }[] = []
  private nextHookId = 0
  private disposed = false

  /**
   * @param config - a resolved configuration (see {@link createConfig})
   * @param options - the attention kernel
   */
  constructor(config: TransformerConfig, options: TransformerOptions = {}) {
    if (!Object.isFrozen(config))
      throw new ConfigError(
        'config',
        'pass a configuration from createConfig() or presetConfig() (it must be resolved and frozen)',
      )
    const settings = parseConfig(transformerOptionsSchema, options, 'createTransformer')
    this.config = config
    this.attention = settings.attention ?? denseAttention
    const root = Rng.fromSeed(config.seed).split('init')
    for (const spec of parameterSpecs(config)) {
      const size = spec.shape.reduce((n, d) => n * d, 1)
      const values = spec.init(root.split(spec.name), size)
      // In tidy, so the variable is the only owner of its memory (in-place optimizer updates need that).
      this.parameters.set(
        spec.name,
        tf.tidy(() => tf.variable(tf.tensor(values, [...spec.shape], 'float32'), true)),
      )
    }
    this.architecture = architectureOf(config)
    this.blocks = Array.from(
      { length: config.nLayers },
      (_, l) => new Block(this.parameters, config, l, this.architecture),
    )
  }

  private checkAlive(): void {
    if (this.disposed) throw new InvalidArgumentError('this model was disposed')
  }

  // ---------------------------------------------------------------- weights

  /** Parameter names in a fixed order (TransformerLens names). */
  parameterNames(): string[] {
    return [...this.parameters.keys()]
  }

  /** Number of trainable scalars. */
  numParameters(): number {
    let n = 0
    for (const v of this.parameters.values()) n += v.size
    return n
  }

  /**
   * The live parameter variables by name (owned by the model: read them, do not dispose them).
   * Tied models have no `unembed.W_U` (the logits use `embed.W_E` transposed).
   */
  getWeights(): ReadonlyMap<string, tf.Variable> {
    this.checkAlive()
    return this.parameters
  }

  /**
   * Copies each parameter's values out (for saving).
   *
   * @returns name -> `{ shape, data }`, in {@link Transformer.parameterNames} order
   */
  async getWeightData(): Promise<Map<string, { shape: number[]; data: Float32Array }>> {
    this.checkAlive()
    const out = new Map<string, { shape: number[]; data: Float32Array }>()
    // A copy: on cpu `data()` hands back the tensor's own buffer, which the in-place optimizer kernels overwrite.
    for (const [name, variable] of this.parameters)
      out.set(name, { shape: [...variable.shape], data: ((await variable.data()) as Float32Array).slice() })
    return out
  }

  /**
   * Replaces parameter values. Every shape is checked before anything is assigned, so a failed
   * call changes nothing.
   *
   * @param weights - name -> tensor or `{ shape, data }` (float32)
   * @param options - `strict` (default true): every parameter must be given ({@link setWeightsOptionsSchema})
   * @throws `ShapeError` (`@attnlab/core`) naming the tensor whose shape differs;
   *   `InvalidArgumentError` (`@attnlab/core`) for an unknown name or (strict) a missing one;
   *   `ConfigError` (`@attnlab/core`) for an unknown option name (with a did-you-mean) or a `strict` that is not a
   *   boolean
   */
  setWeights(
    weights:
      | ReadonlyMap<string, tf.Tensor | { shape: readonly number[]; data: Float32Array }>
      | Readonly<Record<string, tf.Tensor | { shape: readonly number[]; data: Float32Array }>>,
    options: SetWeightsOptions = {},
  ): void {
    this.checkAlive()
    const settings = parseConfig(setWeightsOptionsSchema, options, 'setWeights')
    const entries = weights instanceof Map ? [...weights.entries()] : Object.entries(weights)
    const seen = new Set<string>()
    for (const [name, value] of entries) {
      const variable = this.parameters.get(name)
      if (variable === undefined) {
        throw new InvalidArgumentError(
          `unknown parameter '${name}'; this ${this.config.architecture} model has: ` +
            `${this.parameterNames().join(', ')}`,
          { name },
        )
      }
      const shape: readonly number[] = value instanceof tf.Tensor ? value.shape : value.shape
      if (shape.length !== variable.shape.length || shape.some((d, i) => d !== variable.shape[i])) {
        throw new ShapeError(
          `parameter '${name}' has shape [${variable.shape.join(', ')}] but the value has shape [${shape.join(', ')}]`,
          {
            name,
            shape: [...shape],
            expected: [...variable.shape],
          },
        )
      }
      if (!(value instanceof tf.Tensor) && value.data.length !== variable.size) {
        throw new ShapeError(
          `parameter '${name}': ${value.data.length} values for shape [${shape.join(', ')}] (${variable.size} ` +
            'expected)',
          { name },
        )
      }
      seen.add(name)
    }
    if (settings.strict) {
      const missing = this.parameterNames().filter((n) => !seen.has(n))
      if (missing.length > 0)
        throw new InvalidArgumentError(`setWeights is missing parameters: ${missing.join(', ')}`, {
          missing,
        })
    }
    tf.tidy(() => {
      for (const [name, value] of entries) {
        const variable = this.parameters.get(name) as tf.Variable
        // A copy of `data`: on cpu a tensor keeps the array it is made from, and the in-place optimizer kernels
        // would overwrite the caller's array.
        variable.assign(
          value instanceof tf.Tensor
            ? tf.cast(value, 'float32')
            : tf.tensor(value.data.slice(), [...value.shape], 'float32'),
        )
      }
    })
  }

  // ---------------------------------------------------------------- hooks

  /**
   * Adds a permanent hook (TransformerLens `add_hook(..., is_permanent=True)`); it runs on every
   * pass until removed.
   *
   * @returns a handle whose `remove()` detaches it
   */
  addHook(selector: HookSelector, hook: HookFunction): HookHandle {
    const id = this.nextHookId++
    this.permanentHooks.push({ selector, hook, id })
    return {
      remove: () => {
        const index = this.permanentHooks.findIndex((h) => h.id === id)
        if (index >= 0) this.permanentHooks.splice(index, 1)
      },
    }
  }

  /** Removes every permanent hook. */
  resetHooks(): void {
    this.permanentHooks.length = 0
  }

  /** Number of permanent hooks attached. */
  get hookCount(): number {
    return this.permanentHooks.length
  }

  // ---------------------------------------------------------------- forward passes

  /**
   * Logits of every position: `[batch, pos, dVocab]` (caller disposes).
   *
   * @param tokens - `[batch, pos]` token ids, `pos <= nCtx`
   * @param options - hooks, head mask, kernel, training mode
   * @throws `ShapeError` (`@attnlab/core`) for a token array of the wrong rank/size or a bad head mask;
   *   `InvalidArgumentError` (`@attnlab/core`) for a token id outside `[0, dVocab)` (token arrays always;
   *   token tensors on every backend but `webgpu`, which reads nothing back); `ConfigError`
   *   (`@attnlab/core`) for an unknown option name (with a did-you-mean) or a `training` that is not a boolean
   */
  forward(tokens: TokenInput, options: ForwardOptions = {}): tf.Tensor3D {
    return this.forwardInternal(tokens, parseConfig(forwardOptionsSchema, options, 'forward'), null, false)
  }

  /**
   * A forward pass with temporary hooks (TransformerLens `run_with_hooks`). The hooks are never
   * attached to the model, so they are gone when this returns or throws.
   *
   * @returns logits `[batch, pos, dVocab]` (caller disposes)
   */
  runWithHooks(
    tokens: TokenInput,
    options: { fwdHooks: readonly ForwardHook[]; headMask?: tf.Tensor; attention?: AttentionKernel },
  ): tf.Tensor3D {
    return this.forward(tokens, options)
  }

  /**
   * A forward pass that records activations (TransformerLens `run_with_cache`).
   *
   * @returns the logits `[batch, pos, dVocab]` and an {@link ActivationCache}; the caller owns
   *   and disposes both
   * @example
   * ```ts
   * const { logits, cache } = model.runWithCache(tokens, { namesFilter: ['blocks.0.attn.hook_pattern'] })
   * ```
   */
  runWithCache(tokens: TokenInput, options: RunWithCacheOptions = {}): { logits: tf.Tensor3D; cache: ActivationCache } {
    const settings = parseConfig(runWithCacheOptionsSchema, options, 'runWithCache')
    const filter = settings.namesFilter
    const wanted: (name: HookName) => boolean =
      filter === undefined
        ? () => true
        : typeof filter === 'function'
          ? filter
          : typeof filter === 'string'
            ? (n) => n === filter
            : (n) => filter.includes(n)
    const cache = new ActivationCache()
    const record: HookFunction = (activation, context) => {
      cache.set(context.name, tf.keep(tf.clone(activation)))
    }
    try {
      const logits = this.forward(tokens, {
        fwdHooks: [...(settings.fwdHooks ?? []), [wanted, record]],
        ...(settings.headMask === undefined ? {} : { headMask: settings.headMask }),
        ...(settings.attention === undefined ? {} : { attention: settings.attention }),
      })
      return { logits, cache }
    } catch (error) {
      cache.dispose()
      throw error
    }
  }

  /**
   * Runs tokens through the model with a KV cache (generation): the first call (empty cache) is a
   * prefill of the prompt through the kernel's `prefill` (+ `afterPrefill`); later calls take one
   * new position per sequence through the kernel's `decode`.
   *
   * @param tokens - `[batch, pos]` (prefill) or `[batch, 1]` (decode)
   * @param cache - the run's cache (see {@link KVCache})
   * @param options - hooks, head mask, kernel, reports, `logitsFrom` ({@link forwardCachedOptionsSchema})
   * @returns logits `[batch, pos, dVocab]` (caller disposes)
   * @throws `ShapeError` (`@attnlab/core`) when decoding more than one position at a time or past `nCtx`;
   *   `ConfigError` (`@attnlab/core`) for an unknown option name (with a did-you-mean; `training` and `rng` are
   *   not options of a cached pass)
   */
  forwardCached(tokens: TokenInput, cache: KVCache, options: ForwardCachedOptions = {}): tf.Tensor3D {
    const settings = parseConfig(forwardCachedOptionsSchema, options, 'forwardCached')
    if (cache.layers.length !== this.config.nLayers) {
      throw new ShapeError(`KV cache has ${cache.layers.length} layers but the model has ${this.config.nLayers}`)
    }
    return this.forwardInternal(tokens, settings, cache, false)
  }

  /** @internal Forward pass for the trainer: tokens already validated. */
  forwardTrusted(tokens: tf.Tensor2D, options: ForwardOptions): tf.Tensor3D {
    return this.forwardInternal(tokens, options, null, true)
  }

  private forwardInternal(
    tokens: TokenInput,
    options: ForwardOptions,
    cache: KVCache | null,
    trusted: boolean,
  ): tf.Tensor3D {
    this.checkAlive()
    const hooks = new HookRunner([
      ...this.permanentHooks.map((h) => [h.selector, h.hook] as const),
      ...(options.fwdHooks ?? []),
    ])
    const training = options.training === true
    if (training && this.config.dropout > 0 && options.rng === undefined) {
      throw new ConfigError('rng', `training with dropout ${this.config.dropout} needs a random stream (options.rng)`)
    }
    requireAttnlabKernels()
    return tf.tidy(() => {
      const tokenTensor = trusted ? (tokens as tf.Tensor2D) : this.toTokens(tokens)
      const [batch, pos] = tokenTensor.shape
      const start = cache === null ? 0 : cache.positions
      if (cache !== null && start > 0 && pos !== 1) {
        throw new ShapeError(
          `decoding with a KV cache takes one position at a time (got ${pos}); the cache holds ${start} positions`,
        )
      }
      if (start + pos > this.config.nCtx) {
        throw new ShapeError(
          `sequence of ${start + pos} positions exceeds the context length nCtx = ${this.config.nCtx}`,
          { positions: start + pos, nCtx: this.config.nCtx },
        )
      }
      const context: PassContext = {
        config: this.config,
        batch,
        pos,
        start,
        tokens: tokenTensor,
        hooks,
        headMask: this.resolveHeadMask(options.headMask, batch),
        attention: options.attention ?? this.attention,
        cache,
        rng: training && this.config.dropout > 0 ? (options.rng as Rng) : null,
        reports: options.attentionReports,
        logitsFrom: this.checkLogitsFrom(options.logitsFrom, pos),
      }
      const logits = this.run(context) // [batch * (pos - logitsFrom), dVocab]
      return tf.reshape(logits, [batch, pos - context.logitsFrom, this.config.dVocab]) as tf.Tensor3D
    })
  }

  private checkLogitsFrom(from: number | undefined, pos: number): number {
    if (from === undefined) return 0
    if (!Number.isSafeInteger(from) || from < 0 || from >= pos) {
      throw new ShapeError(`logitsFrom ${from} must be an integer in [0, ${pos - 1}] for ${pos} positions`, {
        value: from,
      })
    }
    return from
  }

  private toTokens(tokens: TokenInput): tf.Tensor2D {
    let tensor: tf.Tensor2D
    if (tokens instanceof tf.Tensor) {
      if (tokens.rank !== 2)
        throw new ShapeError(`tokens must be [batch, pos]; got shape [${tokens.shape.join(', ')}]`, {
          shape: [...tokens.shape],
        })
      if (tokens.dtype !== 'int32')
        throw new ShapeError(`tokens must be int32; got ${tokens.dtype}`, { dtype: tokens.dtype })
      tensor = tokens
    } else {
      if (!Array.isArray(tokens) || tokens.length === 0 || !Array.isArray(tokens[0])) {
        throw new ShapeError('tokens must be a non-empty array of token-id arrays ([batch, pos])')
      }
      const pos = (tokens[0] as readonly number[]).length
      const flat = new Int32Array(tokens.length * pos)
      tokens.forEach((row, b) => {
        if (!Array.isArray(row) || row.length !== pos) {
          throw new ShapeError(
            `token row ${b} has length ${Array.isArray(row) ? row.length : 'n/a'} but row 0 has ${pos} (rows must ` +
              'have equal length)',
          )
        }
        row.forEach((t, p) => {
          if (!Number.isInteger(t))
            throw new InvalidArgumentError(`token [${b}, ${p}] = ${t} is not an integer`, { value: t })
          flat[b * pos + p] = t
        })
      })
      checkTokenIds(flat, pos, this.config.dVocab)
      tensor = tf.tensor2d(flat, [tokens.length, pos], 'int32')
    }
    if (tensor.shape[1] === 0 || tensor.shape[0] === 0)
      throw new ShapeError(`tokens must have at least one sequence and one position; got [${tensor.shape.join(', ')}]`)
    // A tensor's ids are checked where they can be read synchronously: on every backend but webgpu (a
    // synchronous read loses or stalls the GPU device there; arrays were checked above).
    if (tokens instanceof tf.Tensor && syncReadsAllowed())
      checkTokenIds(tensor.dataSync() as Int32Array, tensor.shape[1], this.config.dVocab)
    return tensor
  }

  private resolveHeadMask(mask: tf.Tensor | undefined, batch: number): tf.Tensor3D | null {
    if (mask === undefined) return null
    const { nLayers, nHeads } = this.config
    if (mask.rank === 2 && mask.shape[0] === nLayers && mask.shape[1] === nHeads)
      return tf.reshape(tf.cast(mask, 'float32'), [1, nLayers, nHeads])
    if (mask.rank === 3 && mask.shape[0] === batch && mask.shape[1] === nLayers && mask.shape[2] === nHeads)
      return tf.cast(mask, 'float32') as tf.Tensor3D
    throw new ShapeError(
      `headMask has shape [${mask.shape.join(', ')}]; expected [nLayers, nHeads] = [${nLayers}, ${nHeads}] or ` +
        `[batch, nLayers, nHeads] = [${batch}, ${nLayers}, ${nHeads}]`,
      {
        shape: [...mask.shape],
      },
    )
  }

  /** The forward pass proper: `[batch * (pos - logitsFrom), dVocab]` logits. */
  private run(context: PassContext): tf.Tensor2D {
    const { batch, pos, hooks } = context
    const { dModel } = this.config
    const as3 = (x: tf.Tensor2D): tf.Tensor3D => tf.reshape(x, [batch, pos, dModel]) as tf.Tensor3D
    const from3 = (x: tf.Tensor): tf.Tensor2D => tf.reshape(x, [batch * pos, dModel]) as tf.Tensor2D
    const hook2 = (name: HookName, x: tf.Tensor2D): tf.Tensor2D =>
      hooks.has(name) ? from3(hooks.run(name, as3(x))) : x
    return this.architecture.forward(this.parameters, this.blocks, context, hook2)
  }

  /** The configuration as JSON (for checkpoints and reports). */
  toJSON(): Record<string, unknown> {
    return configToJSON(this.config)
  }

  /** Frees the model's variables. Safe to call twice; the model is unusable afterwards. */
  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    for (const variable of this.parameters.values()) variable.dispose()
    this.parameters.clear()
    this.permanentHooks.length = 0
  }
}

/**
 * Builds a transformer with freshly initialised weights (seeded by `config.seed`).
 *
 * Initialisation: gpt/llama weight matrices `N(0, initRange^2)`, the residual output projections
 * (`W_O`, `W_out`) `N(0, (initRange / sqrt(2 nLayers))^2)` (GPT-2), biases 0, norm weights 1;
 * minimal `W_Q ~ U(-eps, eps)` (or Xavier) and `W_V = 0` (paper (b)'s init ablation).
 *
 * @param config - from {@link createConfig} or {@link presetConfig}
 * @param options - attention kernel
 * @throws `ConfigError` (`@attnlab/core`) if `config` was not resolved by `createConfig`
 * @category Model
 */
export function createTransformer(config: TransformerConfig, options: TransformerOptions = {}): Transformer {
  return new Transformer(config, options)
}

/** Throws when a token id is outside `[0, dVocab)`; `values` are `[batch, pos]` row-major. */
function checkTokenIds(values: ArrayLike<number>, pos: number, dVocab: number): void {
  for (let i = 0; i < values.length; i++) {
    const t = values[i] as number
    if (t < 0 || t >= dVocab) {
      throw new InvalidArgumentError(
        `token [${Math.floor(i / pos)}, ${i % pos}] = ${t} is outside the vocabulary [0, ${dVocab})`,
        { value: t },
      )
    }
  }
}

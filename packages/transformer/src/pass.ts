/**
 * The plumbing of one forward pass shared by the model's modules (`model.ts`) and the minimal
 * model (`minimal.ts`): the pass context passed down the module tree, parameter lookups, and the
 * parts an architecture plugs into the shared modules ({@link ArchitectureParts}).
 * Internal to the package (not exported by the barrel).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { type AttentionKernel, InvalidArgumentError, type Rng } from '@attnlab/core'
import type { TransformerConfig } from './config.ts'
import type { HookName, HookRunner } from './hooks.ts'
import type { KVCache } from './kv-cache.ts'
import type { AttentionReport } from './model.ts'

/** Everything one forward pass needs, passed down the module tree. */
export interface PassContext {
  readonly config: TransformerConfig
  readonly batch: number
  readonly pos: number
  /** Absolute position of the first token (0 except when decoding with a KV cache). */
  readonly start: number
  /** `[batch, pos]` int32. */
  readonly tokens: tf.Tensor2D
  readonly hooks: HookRunner
  /** `[batch or 1, nLayers, nHeads]` or null. */
  readonly headMask: tf.Tensor3D | null
  readonly attention: AttentionKernel
  readonly cache: KVCache | null
  /** Dropout stream when training with dropout > 0, else null. */
  readonly rng: Rng | null
  readonly reports: AttentionReport[] | undefined
  /** First position whose logits are computed. */
  readonly logitsFrom: number
}

/** Parameter lookup shared by the modules. */
export type Parameters = ReadonlyMap<string, tf.Variable>

/**
 * The parameter named `name` (TransformerLens name, e.g. `blocks.0.attn.W_Q`).
 *
 * @throws `InvalidArgumentError` (code `INVALID_ARGUMENT`) when the model has no such parameter
 */
export function param(parameters: Parameters, name: string): tf.Variable {
  const value = parameters.get(name)
  if (value === undefined) throw new InvalidArgumentError(`the model has no parameter '${name}'`)
  return value
}

/** `[heads, dModel, dHead]` (TransformerLens) -> `[dModel, heads * dHead]` (one matmul for all heads). */
export function headsToColumns(w: tf.Tensor): tf.Tensor2D {
  const [heads, dModel, dHead] = w.shape as [number, number, number]
  return tf.reshape(tf.transpose(w, [1, 0, 2]), [dModel, heads * dHead]) // [dModel, heads * dHead]
}

/** Block `layer`'s head mask, `[batch or 1, nHeads]`, or null when the pass has none. */
export function headMaskFor(context: PassContext, layer: number): tf.Tensor | null {
  if (context.headMask === null) return null
  const [maskBatch, , heads] = context.headMask.shape
  // [batch or 1, nHeads]
  return tf.reshape(tf.slice(context.headMask, [0, layer, 0], [maskBatch, 1, heads]), [maskBatch, heads])
}

/** Rows of positions `from .. pos - 1` of a `[batch * pos, width]` tensor. */
export function fromPosition(x: tf.Tensor2D, batch: number, pos: number, from: number): tf.Tensor2D {
  if (from === 0) return x
  const width = x.shape[1] as number
  return tf.reshape(tf.slice(tf.reshape(x, [batch, pos, width]), [0, from, 0], [-1, -1, -1]), [
    batch * (pos - from),
    width,
  ]) as tf.Tensor2D
}

// ---- the parts an architecture plugs into the shared modules (model.ts; minimal.ts) ----

/** Shape and initialisation of one parameter. */
export interface ParameterSpec {
  readonly name: string
  readonly shape: readonly number[]
  readonly init: (rng: Rng, size: number) => Float32Array
}

/**
 * Queries, keys and values of one block, `[batch, pos, heads, d]` each, and, when they are plain
 * slices of one tensor, that tensor (see `AttentionPrefillInput.packed` in `@attnlab/core`).
 */
export interface Projected {
  readonly q: tf.Tensor4D
  readonly k: tf.Tensor4D
  readonly v: tf.Tensor4D
  /** `[batch, pos, 3 * nHeads * dHead]`, or undefined when the projections are not one tensor. */
  readonly qkv: tf.Tensor3D | undefined
}

/**
 * What differs between architectures in a block's attention: how queries, keys and values are
 * projected from the block input, and how the heads' outputs become the attention output. The
 * standard projections are below; the minimal model's (no key projection, heads summed) are in
 * `minimal.ts`.
 */
export interface AttentionProjections {
  /**
   * @param x - the block's normalised input, `[batch * pos, dModel]`
   * @returns `q` `[batch, pos, nHeads, dHead]`, `k`, `v` `[batch, pos, nKvHeads, dHead | dValue]`,
   *   computed on first read
   */
  project(x: tf.Tensor2D, context: PassContext): Projected
  /**
   * Runs `hook_result` (when hooked) and returns the attention output.
   *
   * @param z - the heads' outputs after the head mask and `hook_z`, `[batch, pos, nHeads, dValue]`
   * @returns `[batch * pos, dModel]`
   */
  output(z: tf.Tensor4D, context: PassContext): tf.Tensor2D
}

/** `project`'s tensors computed on first read (a kernel that takes the packed tensor never reads them). */
export function lazyProjected(qkv: tf.Tensor3D | undefined, compute: () => Omit<Projected, 'qkv'>): Projected {
  let heads: Omit<Projected, 'qkv'> | undefined
  const get = (): Omit<Projected, 'qkv'> => {
    heads ??= compute()
    return heads
  }
  return {
    get q() {
      return get().q
    },
    get k() {
      return get().k
    },
    get v() {
      return get().v
    },
    qkv,
  }
}

/** Runs a hook on a `[batch * pos, dModel]` tensor (seen as `[batch, pos, dModel]`; identity when not hooked). */
export type ResidualHook = (name: HookName, x: tf.Tensor2D) => tf.Tensor2D

/** A block as the architecture's forward pass sees it. */
export interface ModelBlock {
  /** `[batch * pos, dModel]` -> `[batch * pos, dModel]`. */
  forward(x: tf.Tensor2D, context: PassContext): tf.Tensor2D
}

/** What every architecture gives (see {@link ArchitectureParts}). */
interface ArchitectureBase {
  /** The parameters in a fixed order, with TransformerLens names, shapes and initialisation. */
  parameterSpecs(config: TransformerConfig): ParameterSpec[]
  /** Whether a block adds its attention (or token-mixing) and MLP outputs to its input. */
  readonly residual: boolean
  /**
   * Input -> blocks -> logits `[batch * (pos - logitsFrom), dVocab]`.
   *
   * @param hook - runs a residual-stream hook point (`hook_embed`, `ln_final.hook_normalized`, ...)
   */
  forward(parameters: Parameters, blocks: readonly ModelBlock[], context: PassContext, hook: ResidualHook): tf.Tensor2D
}

/** An architecture whose blocks move information between positions by attention, from its projections. */
export interface AttentionArchitectureParts extends ArchitectureBase {
  /** Block `layer`'s attention projections. */
  projections(parameters: Parameters, config: TransformerConfig, layer: number): AttentionProjections
  readonly tokenMixing?: undefined
}

/**
 * An architecture without attention, whose blocks move information between positions by their own sublayer in
 * the attention's place (the MLP-Mixer's causal token mixing, `mixer.ts`); the rest of the block is the same.
 */
export interface TokenMixingArchitectureParts extends ArchitectureBase {
  /**
   * Block `layer`'s token-mixing sublayer: `[batch * pos, dModel]` (the normalised block input) ->
   * `[batch * pos, dModel]` (what `hook_attn_out` sees).
   */
  tokenMixing(parameters: Parameters, config: TransformerConfig, layer: number): ModelBlock
  readonly projections?: undefined
}

/**
 * What differs between architectures at the model level, chosen once per model
 * ({@link architectureOf}): the parameters, a block's attention projections (or its token-mixing
 * sublayer), whether blocks are residual, and the pass around the blocks. GPT and Llama share the
 * standard parts (their differences are configuration: norm, positions, MLP); the minimal model's
 * are in `minimal.ts`, the MLP-Mixer's in `mixer.ts`.
 */
export type ArchitectureParts = AttentionArchitectureParts | TokenMixingArchitectureParts

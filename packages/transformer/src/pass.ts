/**
 * The plumbing of one forward pass shared by the model's modules (`model.ts`) and the minimal
 * model (`minimal.ts`): the pass context passed down the module tree and parameter lookups.
 * Internal to the package (not exported by the barrel).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { type AttentionKernel, InvalidArgumentError, type Rng } from '@attnlab/core'
import type { TransformerConfig } from './config.ts'
import type { HookRunner } from './hooks.ts'
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

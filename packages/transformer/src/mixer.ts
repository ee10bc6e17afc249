/**
 * The causal MLP-Mixer (Tolstikhin et al., "MLP-Mixer: An all-MLP Architecture for Vision", arXiv 2105.01601,
 * sec. 2; made causal for next-token prediction), the attention-free architecture Baherwani et al. (arXiv
 * 2606.25010, "alternative architectures") compare with the transformer on the linear map. `model.ts` runs it
 * through the same Block and pass as `gpt`: token and learned position embeddings, pre-norm residual blocks,
 * final LayerNorm, unembedding. The block's attention is replaced by a causal token-mixing MLP over positions:
 *
 * - the width is `nHeads` channel groups of `dHead` channels (`dModel = nHeads * dHead`); group `g` has its own
 *   token-mixing MLP, shared by its `dHead` channels (as a head's attention pattern is shared by its `dHead`
 *   value channels), so `nHeads = 1` is Tolstikhin et al.'s Mixer, one token-mixing MLP shared by every channel;
 * - group `g`'s MLP maps the column of positions `x[0..pos-1, c]` of each channel `c` of the group through
 *   `dTokenMlp * nCtx` hidden units, `dTokenMlp` per position: `h[q, k] = act(sum_{r <= q} W_in[g, q k, r]
 *   x[r, c] + b_in[g, q k])`, `y[p, c] = sum_{q <= p, k} W_out[g, p, q k] h[q, k] + b_out[g, p]`. Both weight
 *   matrices are masked lower-triangular (the masked entries are 0 from the start and get no gradient), so
 *   position `p`'s output depends on positions `<= p` only;
 * - then, as in every block, the channel-mixing MLP (`mlp.*`, `dMlp`) with its own norm and residual.
 *
 * Hook points: `hook_embed`, `hook_pos_embed`, `blocks.{l}.hook_resid_pre|mid|post`, `blocks.{l}.ln1|ln2
 * .hook_normalized`, `blocks.{l}.hook_attn_out` (the token-mixing sublayer's output, the attention output's
 * place), `blocks.{l}.mlp.hook_pre|post`, `blocks.{l}.hook_mlp_out`, `ln_final.hook_normalized`. The attention
 * hooks (`blocks.{l}.attn.hook_q|k|v|rot_q|rot_k|attn_scores|pattern|z|result`) do not exist: a hook on them
 * never runs. A head mask `[nLayers, nHeads]` scales each channel group's token-mixing output (knocking a group
 * out keeps only the residual and the channel MLP at its channels). There is no KV cache: `forwardCached` (and so
 * `generate`) throws. Internal to the package (not exported by the barrel).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError } from '@attnlab/core'
import type { TransformerConfig } from './config.ts'
import { activation } from './ops.ts'
import {
  headMaskFor,
  param,
  type ModelBlock,
  type ParameterSpec,
  type Parameters,
  type PassContext,
  type TokenMixingArchitectureParts,
} from './pass.ts'

/** `N(0, std^2)` entries where `keep(row, column)` of a `[groups, rows, columns]` matrix, 0 elsewhere. */
function maskedNormalInit(
  std: number,
  rows: number,
  columns: number,
  keep: (row: number, column: number) => boolean,
): ParameterSpec['init'] {
  return (rng, size) => {
    const values = rng.fillNormal(new Float32Array(size), 0, std)
    for (let i = 0; i < size; i++) {
      const within = i % (rows * columns)
      if (!keep(Math.floor(within / columns), within % columns)) values[i] = 0
    }
    return values
  }
}

function normalInit(std: number): ParameterSpec['init'] {
  return (rng, size) => rng.fillNormal(new Float32Array(size), 0, std)
}
const zerosInit: ParameterSpec['init'] = (_rng, size) => new Float32Array(size)
const onesInit: ParameterSpec['init'] = (_rng, size) => new Float32Array(size).fill(1)

/** `W_in`'s causal mask: hidden unit `hidden` (of position `floor(hidden / dTokenMlp)`) reads input `position`. */
const readsInput =
  (dTokenMlp: number) =>
  (hidden: number, position: number): boolean =>
    position <= Math.floor(hidden / dTokenMlp)

/** `W_out`'s causal mask: output `position` reads hidden unit `hidden` (of position `floor(hidden / dTokenMlp)`). */
const readsHidden =
  (dTokenMlp: number) =>
  (position: number, hidden: number): boolean =>
    Math.floor(hidden / dTokenMlp) <= position

/**
 * The mixer's parameters, in a fixed order with TransformerLens-style names: `embed.W_E` `[dVocab, dModel]`,
 * `pos_embed.W_pos` `[nCtx, dModel]`, per block `ln1`, `token_mix.W_in` `[nHeads, nCtx * dTokenMlp, nCtx]`,
 * `token_mix.b_in` `[nHeads, nCtx * dTokenMlp]`, `token_mix.W_out` `[nHeads, nCtx, nCtx * dTokenMlp]`,
 * `token_mix.b_out` `[nHeads, nCtx]`, `ln2`, `mlp.W_in|W_gate|W_out|b_in|b_out` (as `gpt`), then `ln_final`
 * and (untied) `unembed.W_U`. Weights `N(0, initRange^2)`, the residual outputs (`token_mix.W_out`,
 * `mlp.W_out`) `N(0, (initRange / sqrt(2 nLayers))^2)` (GPT-2), biases 0, norm weights 1.
 */
function mixerParameterSpecs(config: TransformerConfig): ParameterSpec[] {
  const { dVocab, nCtx, dModel, nLayers, nHeads, dMlp, dTokenMlp, initRange } = config
  const hidden = nCtx * dTokenMlp
  const outputStd = initRange / Math.sqrt(2 * nLayers)
  const layerNormBias = config.normalization === 'layernorm' && config.bias
  const specs: ParameterSpec[] = [
    { name: 'embed.W_E', shape: [dVocab, dModel], init: normalInit(initRange) },
    { name: 'pos_embed.W_pos', shape: [nCtx, dModel], init: normalInit(initRange) },
  ]
  const norm = (name: string): void => {
    specs.push({ name: `${name}.w`, shape: [dModel], init: onesInit })
    if (layerNormBias) specs.push({ name: `${name}.b`, shape: [dModel], init: zerosInit })
  }
  for (let l = 0; l < nLayers; l++) {
    const p = `blocks.${l}`
    norm(`${p}.ln1`)
    specs.push({
      name: `${p}.token_mix.W_in`,
      shape: [nHeads, hidden, nCtx],
      init: maskedNormalInit(initRange, hidden, nCtx, readsInput(dTokenMlp)),
    })
    if (config.bias) specs.push({ name: `${p}.token_mix.b_in`, shape: [nHeads, hidden], init: zerosInit })
    specs.push({
      name: `${p}.token_mix.W_out`,
      shape: [nHeads, nCtx, hidden],
      init: maskedNormalInit(outputStd, nCtx, hidden, readsHidden(dTokenMlp)),
    })
    if (config.bias) specs.push({ name: `${p}.token_mix.b_out`, shape: [nHeads, nCtx], init: zerosInit })
    if (!config.attnOnly) {
      norm(`${p}.ln2`)
      specs.push({ name: `${p}.mlp.W_in`, shape: [dModel, dMlp], init: normalInit(initRange) })
      if (config.gatedMlp) specs.push({ name: `${p}.mlp.W_gate`, shape: [dModel, dMlp], init: normalInit(initRange) })
      specs.push({ name: `${p}.mlp.W_out`, shape: [dMlp, dModel], init: normalInit(outputStd) })
      if (config.bias) {
        specs.push({ name: `${p}.mlp.b_in`, shape: [dMlp], init: zerosInit })
        specs.push({ name: `${p}.mlp.b_out`, shape: [dModel], init: zerosInit })
      }
    }
  }
  norm('ln_final')
  if (!config.tiedEmbeddings) specs.push({ name: 'unembed.W_U', shape: [dModel, dVocab], init: normalInit(initRange) })
  return specs
}

/** A `[rows, columns]` 0/1 mask, 1 where `keep(row, column)`. */
function maskTensor(rows: number, columns: number, keep: (row: number, column: number) => boolean): tf.Tensor2D {
  const values = new Float32Array(rows * columns)
  for (let r = 0; r < rows; r++) for (let c = 0; c < columns; c++) if (keep(r, c)) values[r * columns + c] = 1
  return tf.tensor2d(values, [rows, columns])
}

/**
 * One block's causal token mixing: per channel group, an MLP over positions whose weights are masked
 * lower-triangular (see the module comment).
 */
class TokenMixing implements ModelBlock {
  constructor(
    private readonly parameters: Parameters,
    private readonly config: TransformerConfig,
    readonly layer: number,
  ) {}

  private name(suffix: string): string {
    return `blocks.${this.layer}.token_mix.${suffix}`
  }

  /**
   * @param x - the block's normalised input, `[batch * pos, dModel]`
   * @returns the token-mixing output `[batch * pos, dModel]` (position `p` from positions `<= p`)
   * @throws `InvalidArgumentError` (`@attnlab/core`) with a KV cache (the mixer has none)
   */
  forward(x: tf.Tensor2D, context: PassContext): tf.Tensor2D {
    if (context.cache !== null) {
      throw new InvalidArgumentError(
        'the mixer has no KV cache (forwardCached, generate): run forward on the whole prefix instead',
      )
    }
    const { batch, pos } = context
    const { nHeads, dHead, dModel, dTokenMlp, bias } = this.config
    const hidden = pos * dTokenMlp
    // [nHeads, pos, batch * dHead]: each group's channels as columns over positions
    const columns = tf.reshape(tf.transpose(tf.reshape(x, [batch, pos, nHeads, dHead]), [2, 1, 0, 3]), [
      nHeads,
      pos,
      batch * dHead,
    ]) as tf.Tensor3D
    // [nHeads, pos * dTokenMlp, pos], masked: hidden unit (q, k) reads positions <= q
    const wIn = tf.mul(
      tf.slice(param(this.parameters, this.name('W_in')), [0, 0, 0], [nHeads, hidden, pos]),
      maskTensor(hidden, pos, readsInput(dTokenMlp)),
    ) as tf.Tensor3D
    let pre = tf.matMul(wIn, columns) // [nHeads, pos * dTokenMlp, batch * dHead]
    if (bias) {
      const bIn = tf.slice(param(this.parameters, this.name('b_in')), [0, 0], [nHeads, hidden])
      pre = tf.add(pre, tf.reshape(bIn, [nHeads, hidden, 1]))
    }
    const post = activation(pre, this.config.actFn) // [nHeads, pos * dTokenMlp, batch * dHead]
    // [nHeads, pos, pos * dTokenMlp], masked: output position p reads hidden units of positions <= p
    const wOut = tf.mul(
      tf.slice(param(this.parameters, this.name('W_out')), [0, 0, 0], [nHeads, pos, hidden]),
      maskTensor(pos, hidden, readsHidden(dTokenMlp)),
    ) as tf.Tensor3D
    let out = tf.matMul(wOut, post) // [nHeads, pos, batch * dHead]
    if (bias) {
      const bOut = tf.slice(param(this.parameters, this.name('b_out')), [0, 0], [nHeads, pos])
      out = tf.add(out, tf.reshape(bOut, [nHeads, pos, 1]))
    }
    let grouped = tf.reshape(out, [nHeads, pos, batch, dHead]) // [nHeads, pos, batch, dHead]
    const mask = headMaskFor(context, this.layer) // [batch or 1, nHeads]
    if (mask !== null) {
      // [nHeads, 1, batch or 1, 1]
      grouped = tf.mul(grouped, tf.reshape(tf.transpose(mask), [nHeads, 1, mask.shape[0] as number, 1]))
    }
    // [batch * pos, dModel]
    return tf.reshape(tf.transpose(grouped, [2, 1, 0, 3]), [batch * pos, dModel]) as tf.Tensor2D
  }
}

/**
 * The mixer's parts of the shared modules (see `ArchitectureParts` in `pass.ts`); `model.ts` adds the
 * standard pass around the blocks (embeddings, final norm, unembedding), which the mixer shares with `gpt`.
 */
export const mixerParts: Omit<TokenMixingArchitectureParts, 'forward'> = Object.freeze({
  parameterSpecs: mixerParameterSpecs,
  tokenMixing: (parameters: Parameters, config: TransformerConfig, layer: number) =>
    new TokenMixing(parameters, config, layer),
  residual: true,
})

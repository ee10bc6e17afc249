/**
 * `AttnlabPairScores`: causal attention scores of queries against one-hot keys (Yüksel et al., arXiv
 * 2602.19143: the minimal model's key is its one-hot input), `q [batch, pos, heads, width]`, `tokens
 * [batch, pos]` -> `[batch, heads, pos, pos]`.
 *
 * One kernel in tfjs' layout: the kernel ({@link pairScoresKernelConfig}, registered on the active backend by
 * `useBackend`), its gradient ({@link pairScoresGradConfig}) and the op that calls it.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ShapeError } from '../../errors.ts'
import { pairScoresComposite, usesComposites } from './composite.ts'
import { STRUCTURED_KERNELS } from './names.ts'
import { pairScatter } from './pair-scatter.ts'
import { requireKernel, runJs, type KernelArgs } from './run-js.ts'

function pairScoresKernel({ inputs, backend, attrs }: KernelArgs): tf.TensorInfo {
  const q = inputs.q as tf.TensorInfo
  const tokens = inputs.tokens as tf.TensorInfo
  const [batch, pos, heads, width] = q.shape as [number, number, number, number]
  const offset = attrs.offset as number
  const maskValue = attrs.maskValue as number
  return runJs(backend, [q, tokens], [batch, heads, pos, pos], ([qv, tv], out) => {
    const qs = qv as Float32Array
    const ts = tv as Int32Array
    for (let b = 0; b < batch; b++) {
      const tokenBase = b * pos
      for (let h = 0; h < heads; h++) {
        for (let i = 0; i < pos; i++) {
          const qRow = ((b * pos + i) * heads + h) * width
          const outRow = ((b * heads + h) * pos + i) * pos
          for (let j = 0; j <= i; j++) {
            out[outRow + j] = (qs[qRow + (ts[tokenBase + j] as number)] as number) + (qs[qRow + offset + j] as number)
          }
          for (let j = i + 1; j < pos; j++) out[outRow + j] = maskValue
        }
      }
    }
  })
}

/** The kernel (tfjs `registerKernel` config without the backend: it runs on every backend). */
export const pairScoresKernelConfig = Object.freeze({
  kernelName: STRUCTURED_KERNELS.pairScores,
  kernelFunc: pairScoresKernel as unknown as tf.KernelFunc,
})

/** The gradient of `pairScores` (tfjs `registerGradient` config). */
export const pairScoresGradConfig: tf.GradConfig = {
  kernelName: STRUCTURED_KERNELS.pairScores,
  inputsToSave: ['q', 'tokens'],
  gradFunc: (dy, [q, tokens], attrs) => ({
    q: () => pairScatter(dy as tf.Tensor4D, tokens as tf.Tensor2D, q!.shape[3] as number, attrs.offset as number),
    tokens: () => tf.cast(tf.zerosLike(tokens!), 'float32'),
  }),
}

/**
 * Causal attention scores against one-hot keys `x_j = onehot(tokens[b, j]) + onehot(offset + j)`:
 * `out[b, h, i, j] = q[b, i, h, tokens[b, j]] + q[b, i, h, offset + j]` for `j <= i`, `maskValue`
 * for `j > i`. Equals `q . x_j` without materialising `x`.
 *
 * @param q - queries, `[batch, pos, heads, width]`
 * @param tokens - `[batch, pos]` int32, each `< offset`
 * @param offset - where the position one-hots start (`dVocab`); `offset + pos <= width`
 * @param maskValue - value above the diagonal (`-Infinity` for scores)
 * @returns `[batch, heads, pos, pos]`
 * @throws `ShapeError` (from `@attnlab/core`) for inconsistent shapes
 * @throws `KernelsUnavailableError` when the active backend was not started by `useBackend`
 * @remarks On `webgl` and `webgpu` this is a composition of stock tfjs ops (no read-back; `composite.ts`).
 * @category Kernels
 */
export function pairScores(q: tf.Tensor4D, tokens: tf.Tensor2D, offset: number, maskValue: number): tf.Tensor4D {
  const [batch, pos, , width] = q.shape
  if (tokens.dtype !== 'int32' || tokens.shape[0] !== batch || tokens.shape[1] !== pos || offset + pos > width) {
    throw new ShapeError(
      `pairScores: q [${q.shape}] needs int32 tokens [${batch}, ${pos}] and offset + pos <= width (offset ` +
        `${offset}); got ${tokens.dtype} [${tokens.shape}]`,
    )
  }
  requireKernel(STRUCTURED_KERNELS.pairScores)
  if (usesComposites()) return pairScoresComposite(q, tokens, offset, maskValue)
  return tf.engine().runKernel(STRUCTURED_KERNELS.pairScores, { q, tokens } as unknown as tf.NamedTensorMap, {
    offset,
    maskValue,
  }) as tf.Tensor4D
}

/**
 * `AttnlabPairScatter`: the attention-weighted one-hot input `sum_j p[b, h, i, j] x_j` (the gradient
 * of `AttnlabPairScores`), `p [batch, heads, pos, pos]`, `tokens [batch, pos]` -> `[batch, pos,
 * heads, width]`.
 *
 * One kernel in tfjs' layout: the kernel ({@link pairScatterKernelConfig}, registered on the active backend by
 * `useBackend`), its gradient ({@link pairScatterGradConfig}) and the op that calls it.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ShapeError } from '../../errors.ts'
import { pairScatterComposite, usesComposites } from './composite.ts'
import { STRUCTURED_KERNELS } from './names.ts'
import { pairScores } from './pair-scores.ts'
import { requireKernel, runJs, type KernelArgs } from './run-js.ts'

function pairScatterKernel({ inputs, backend, attrs }: KernelArgs): tf.TensorInfo {
  const p = inputs.p as tf.TensorInfo
  const tokens = inputs.tokens as tf.TensorInfo
  const [batch, heads, pos] = p.shape as [number, number, number, number]
  const offset = attrs.offset as number
  const width = attrs.width as number
  return runJs(backend, [p, tokens], [batch, pos, heads, width], ([pv, tv], out) => {
    const ps = pv as Float32Array
    const ts = tv as Int32Array
    for (let b = 0; b < batch; b++) {
      const tokenBase = b * pos
      for (let h = 0; h < heads; h++) {
        for (let i = 0; i < pos; i++) {
          const pRow = ((b * heads + h) * pos + i) * pos
          const outRow = ((b * pos + i) * heads + h) * width
          for (let j = 0; j <= i; j++) {
            const value = ps[pRow + j] as number
            const t = outRow + (ts[tokenBase + j] as number)
            out[t] = (out[t] as number) + value
            const o = outRow + offset + j
            out[o] = (out[o] as number) + value
          }
        }
      }
    }
  })
}

/** The kernel (tfjs `registerKernel` config without the backend: it runs on every backend). */
export const pairScatterKernelConfig = Object.freeze({
  kernelName: STRUCTURED_KERNELS.pairScatter,
  kernelFunc: pairScatterKernel as unknown as tf.KernelFunc,
})

/** The gradient of `pairScatter` (tfjs `registerGradient` config). */
export const pairScatterGradConfig: tf.GradConfig = {
  kernelName: STRUCTURED_KERNELS.pairScatter,
  inputsToSave: ['tokens'],
  gradFunc: (dy, [tokens], attrs) => ({
    p: () => pairScores(dy as tf.Tensor4D, tokens as tf.Tensor2D, attrs.offset as number, 0),
    tokens: () => tf.cast(tf.zerosLike(tokens!), 'float32'),
  }),
}

/**
 * The attention-weighted one-hot input: `out[b, i, h, :] = sum_{j <= i} p[b, h, i, j] x_j` with
 * `x_j = onehot(tokens[b, j]) + onehot(offset + j)` of length `width` (entries of `p` above the
 * diagonal are ignored).
 *
 * @param p - attention probabilities, `[batch, heads, pos, pos]`
 * @param tokens - `[batch, pos]` int32
 * @param width - length of the one-hot input (`dModel`)
 * @param offset - where the position one-hots start (`dVocab`)
 * @returns `[batch, pos, heads, width]`
 * @throws `ShapeError` (from `@attnlab/core`) for inconsistent shapes
 * @throws `KernelsUnavailableError` when the active backend was not started by `useBackend`
 * @remarks On `webgl` and `webgpu` this is a composition of stock tfjs ops (no read-back; `composite.ts`).
 * @category Kernels
 */
export function pairScatter(p: tf.Tensor4D, tokens: tf.Tensor2D, width: number, offset: number): tf.Tensor4D {
  const [batch, , pos] = p.shape
  if (
    tokens.dtype !== 'int32' ||
    tokens.shape[0] !== batch ||
    tokens.shape[1] !== pos ||
    p.shape[3] !== pos ||
    offset + pos > width
  ) {
    throw new ShapeError(
      `pairScatter: p [${p.shape}] needs int32 tokens [${batch}, ${pos}] and offset + pos <= width; got ` +
        `${tokens.dtype} [${tokens.shape}], width ${width}, offset ${offset}`,
    )
  }
  requireKernel(STRUCTURED_KERNELS.pairScatter)
  if (usesComposites()) return pairScatterComposite(p, tokens, width, offset)
  return tf.engine().runKernel(STRUCTURED_KERNELS.pairScatter, { p, tokens } as unknown as tf.NamedTensorMap, {
    offset,
    width,
  }) as tf.Tensor4D
}

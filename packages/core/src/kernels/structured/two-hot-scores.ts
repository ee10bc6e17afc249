/**
 * `AttnlabTwoHotScores`: the minimal model's attention scores straight from `W_Q` (Yüksel et al.,
 * arXiv 2602.19143), four lookups per causal pair, `w [heads, width, width]`, `tokens [batch, pos]`
 * -> `[batch, heads, pos, pos]`.
 *
 * One kernel in tfjs' layout: the kernel ({@link twoHotScoresKernelConfig}, registered on the active backend by
 * `useBackend`), its gradient ({@link twoHotScoresGradConfig}) and the op that calls it.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ShapeError } from '../../errors.ts'
import { twoHotScoresComposite, usesComposites } from './composite.ts'
import { STRUCTURED_KERNELS } from './names.ts'
import { twoHotScoresGrad } from './two-hot-scores-grad.ts'
import { requireKernel, runJs, type KernelArgs } from './run-js.ts'

function twoHotScoresKernel({ inputs, backend, attrs }: KernelArgs): tf.TensorInfo {
  const w = inputs.w as tf.TensorInfo
  const tokens = inputs.tokens as tf.TensorInfo
  const [heads, width] = w.shape as [number, number, number]
  const [batch, pos] = tokens.shape as [number, number]
  const offset = attrs.offset as number
  const maskValue = attrs.maskValue as number
  return runJs(backend, [w, tokens], [batch, heads, pos, pos], ([wv, tv], out) => {
    const ws = wv as Float32Array
    const ts = tv as Int32Array
    for (let b = 0; b < batch; b++) {
      const tokenBase = b * pos
      for (let h = 0; h < heads; h++) {
        const table = h * width * width
        for (let i = 0; i < pos; i++) {
          const rowToken = table + (ts[tokenBase + i] as number) * width // W[h, t_i, :]
          const rowPosition = table + (offset + i) * width // W[h, o + i, :]
          const outRow = ((b * heads + h) * pos + i) * pos
          for (let j = 0; j <= i; j++) {
            const columnToken = ts[tokenBase + j] as number
            const columnPosition = offset + j
            out[outRow + j] =
              (ws[rowToken + columnToken] as number) +
              (ws[rowToken + columnPosition] as number) +
              (ws[rowPosition + columnToken] as number) +
              (ws[rowPosition + columnPosition] as number)
          }
          for (let j = i + 1; j < pos; j++) out[outRow + j] = maskValue
        }
      }
    }
  })
}

/** The kernel (tfjs `registerKernel` config without the backend: it runs on every backend). */
export const twoHotScoresKernelConfig = Object.freeze({
  kernelName: STRUCTURED_KERNELS.twoHotScores,
  kernelFunc: twoHotScoresKernel as unknown as tf.KernelFunc,
})

/** The gradient of `twoHotScores` (tfjs `registerGradient` config). */
export const twoHotScoresGradConfig: tf.GradConfig = {
  kernelName: STRUCTURED_KERNELS.twoHotScores,
  inputsToSave: ['w', 'tokens'],
  gradFunc: (dy, [w, tokens], attrs) => ({
    w: () => twoHotScoresGrad(dy as tf.Tensor4D, tokens as tf.Tensor2D, w!.shape[1] as number, attrs.offset as number),
    tokens: () => tf.cast(tf.zerosLike(tokens!), 'float32'),
  }),
}

/**
 * The minimal model's attention scores computed from the query matrices directly: with
 * `x_i = onehot(t_i) + onehot(offset + i)`, `out[b, h, i, j] = x_i W^h x_j^T =
 * W[h, t_i, t_j] + W[h, t_i, offset + j] + W[h, offset + i, t_j] + W[h, offset + i, offset + j]`
 * for `j <= i` and `maskValue` above the diagonal (key = input, no scaling). Four lookups per
 * causal pair; the gradient adds `dScores` back into those four entries of `W`.
 *
 * @param w - `W_Q`, `[heads, width, width]` (TransformerLens layout: input row, query column)
 * @param tokens - `[batch, pos]` int32, each `< offset`
 * @param offset - where the position one-hots start (`dVocab`); `offset + pos <= width`
 * @param maskValue - value above the diagonal (`-Infinity` for scores)
 * @returns `[batch, heads, pos, pos]`
 * @throws `ShapeError` (from `@attnlab/core`) for inconsistent shapes
 * @throws `KernelsUnavailableError` when the active backend was not started by `useBackend`
 * @remarks On `webgl` and `webgpu` this is a composition of stock tfjs ops (no read-back; `composite.ts`).
 * @category Kernels
 */
export function twoHotScores(w: tf.Tensor3D, tokens: tf.Tensor2D, offset: number, maskValue: number): tf.Tensor4D {
  const [, rows, columns] = w.shape
  const [, pos] = tokens.shape
  if (rows !== columns || tokens.dtype !== 'int32' || tokens.rank !== 2 || offset + pos > rows) {
    throw new ShapeError(
      `twoHotScores: w [${w.shape}] must be [heads, width, width] and int32 tokens [batch, pos] with offset + pos <= ` +
        `width; got ${tokens.dtype} [${tokens.shape}], offset ${offset}`,
    )
  }
  requireKernel(STRUCTURED_KERNELS.twoHotScores)
  if (usesComposites()) return twoHotScoresComposite(w, tokens, offset, maskValue)
  return tf.engine().runKernel(STRUCTURED_KERNELS.twoHotScores, { w, tokens } as unknown as tf.NamedTensorMap, {
    offset,
    maskValue,
  }) as tf.Tensor4D
}

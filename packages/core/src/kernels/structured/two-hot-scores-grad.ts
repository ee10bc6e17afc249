/**
 * `AttnlabTwoHotScoresGrad`: the gradient of `AttnlabTwoHotScores` with respect to `W_Q` (four
 * scatter-adds per pair into a small table), `dy [batch, heads, pos, pos]`, `tokens [batch, pos]` ->
 * `[heads, width, width]`.
 *
 * One kernel in tfjs' layout: the kernel ({@link twoHotScoresGradKernelConfig}, registered on the active backend by
 * `useBackend`), its gradient ({@link twoHotScoresGradGradConfig}) and the op that calls it.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { twoHotScoresGradComposite, usesComposites } from './composite.ts'
import { STRUCTURED_KERNELS } from './names.ts'
import { twoHotScores } from './two-hot-scores.ts'
import { requireKernel, runJs, type KernelArgs } from './run-js.ts'

function twoHotScoresGradKernel({ inputs, backend, attrs }: KernelArgs): tf.TensorInfo {
  const dy = inputs.dy as tf.TensorInfo
  const tokens = inputs.tokens as tf.TensorInfo
  const [batch, heads, pos] = dy.shape as [number, number, number, number]
  const offset = attrs.offset as number
  const width = attrs.width as number
  return runJs(backend, [dy, tokens], [heads, width, width], ([dv, tv], out) => {
    const ds = dv as Float32Array
    const ts = tv as Int32Array
    for (let b = 0; b < batch; b++) {
      const tokenBase = b * pos
      for (let h = 0; h < heads; h++) {
        const table = h * width * width
        for (let i = 0; i < pos; i++) {
          const rowToken = table + (ts[tokenBase + i] as number) * width
          const rowPosition = table + (offset + i) * width
          const dyRow = ((b * heads + h) * pos + i) * pos
          for (let j = 0; j <= i; j++) {
            const g = ds[dyRow + j] as number
            const columnToken = ts[tokenBase + j] as number
            const columnPosition = offset + j
            out[rowToken + columnToken] = (out[rowToken + columnToken] as number) + g
            out[rowToken + columnPosition] = (out[rowToken + columnPosition] as number) + g
            out[rowPosition + columnToken] = (out[rowPosition + columnToken] as number) + g
            out[rowPosition + columnPosition] = (out[rowPosition + columnPosition] as number) + g
          }
        }
      }
    }
  })
}

/** The kernel (tfjs `registerKernel` config without the backend: it runs on every backend). */
export const twoHotScoresGradKernelConfig = Object.freeze({
  kernelName: STRUCTURED_KERNELS.twoHotScoresGrad,
  kernelFunc: twoHotScoresGradKernel as unknown as tf.KernelFunc,
})

/** The gradient of `twoHotScoresGrad` (tfjs `registerGradient` config). */
export const twoHotScoresGradGradConfig: tf.GradConfig = {
  // The gradient kernel is linear in dy; its adjoint is the score gather itself.
  kernelName: STRUCTURED_KERNELS.twoHotScoresGrad,
  inputsToSave: ['tokens'],
  gradFunc: (dy, [tokens], attrs) => ({
    dy: () => twoHotScores(dy as tf.Tensor3D, tokens as tf.Tensor2D, attrs.offset as number, 0),
    tokens: () => tf.cast(tf.zerosLike(tokens!), 'float32'),
  }),
}

/**
 * The gradient of {@link twoHotScores} with respect to `w`: `dW[h, r, c] = sum` of the
 * `dScores[b, h, i, j]` (`j <= i`) whose pair `(x_i, x_j)` has a one at row `r` and column `c`.
 *
 * @param dScores - `[batch, heads, pos, pos]`
 * @param tokens - `[batch, pos]` int32
 * @param width - `dModel`
 * @param offset - `dVocab`
 * @returns `[heads, width, width]`
 * @throws `KernelsUnavailableError` when the active backend was not started by `useBackend`
 * @remarks On `webgl` and `webgpu` this is a composition of stock tfjs ops (no read-back; `composite.ts`).
 * @category Kernels
 */
export function twoHotScoresGrad(
  dScores: tf.Tensor4D,
  tokens: tf.Tensor2D,
  width: number,
  offset: number,
): tf.Tensor3D {
  requireKernel(STRUCTURED_KERNELS.twoHotScoresGrad)
  if (usesComposites()) return twoHotScoresGradComposite(dScores, tokens, width, offset)
  return tf
    .engine()
    .runKernel(STRUCTURED_KERNELS.twoHotScoresGrad, { dy: dScores, tokens } as unknown as tf.NamedTensorMap, {
      offset,
      width,
    }) as tf.Tensor3D
}

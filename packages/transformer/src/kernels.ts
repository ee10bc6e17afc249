/**
 * Gather/scatter kernels for the minimal model's one-hot structured inputs when its attention
 * is hooked (scores/pattern hooks, head masks), written in plain JavaScript loops over the
 * backend's memory and registered (with gradients) for every backend. Without hooks the model
 * uses `@attnlab/core`'s `oneHotAttention` (one fused kernel each way); embeddings use core's
 * `gatherRows`.
 *
 * Why: the minimal model's input is two one-hots, so the attention scores `(x W_Q) x^T` are
 * gathers (see `docs/performance.md`). On tfjs-wasm the generic `tf.gather` costs ~150 ns per
 * element; these loops cost 1-2 ns per element on both `cpu` and `wasm`.
 *
 * Kernels (each is the other's gradient):
 * - `AttnlabPairScores` (`q [batch, pos, heads, width]`, `tokens [batch, pos]`) ->
 *   `[batch, heads, pos, pos]`: the score of query `i` with the key whose one-hot input has ones
 *   at `tokens[b, j]` and `offset + j`, i.e. `q[b, i, h, tokens[b, j]] + q[b, i, h, offset + j]`,
 *   for `j <= i`, and `maskValue` above the diagonal; and `AttnlabPairScatter` (`p [batch, heads,
 *   pos, pos]`, `tokens`) -> `[batch, pos, heads, width]`, `sum_j p[b, h, i, j] x_j` (the
 *   attention-weighted input, lower triangle only).
 *
 * - `AttnlabTwoHotScores` (`w [heads, width, width]`, `tokens [batch, pos]`) ->
 *   `[batch, heads, pos, pos]`: the minimal model's scores straight from `W_Q`,
 *   `x_i W_Q^h x_j^T = W[t_i, t_j] + W[t_i, o + j] + W[o + i, t_j] + W[o + i, o + j]` (four lookups
 *   per causal pair, no query tensor), and its gradient `AttnlabTwoHotScoresGrad` (`dScores`,
 *   `tokens`) -> `[heads, width, width]` (four scatter-adds per pair into a small table).
 *
 * Registration happens in {@link ensureKernels} (called by the model), not at import.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ShapeError } from '@attnlab/core'

/** Kernel names (stable; registered for every backend by {@link ensureKernels}). @category Kernels */
export const KERNEL_NAMES = Object.freeze({
  pairScores: 'AttnlabPairScores',
  pairScatter: 'AttnlabPairScatter',
  twoHotScores: 'AttnlabTwoHotScores',
  twoHotScoresGrad: 'AttnlabTwoHotScoresGrad',
})

const BACKENDS = ['cpu', 'wasm', 'webgl', 'webgpu', 'tensorflow'] as const

type TypedArray = Float32Array | Int32Array
interface WasmLike {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo
  typedArrayFromHeap(info: tf.TensorInfo): tf.backend_util.TypedArray
}
interface GenericBackend {
  readSync(dataId: tf.DataId): tf.backend_util.BackendValues
  makeTensorInfo(shape: number[], dtype: tf.DataType, values?: tf.backend_util.BackendValues): tf.TensorInfo
}

/**
 * Runs `compute` on the inputs' values and a zero-filled float32 output of `shape`, using the
 * wasm heap directly when the backend is wasm (no copies) and readSync/makeTensorInfo otherwise.
 */
function runJs(
  backend: unknown,
  inputs: readonly tf.TensorInfo[],
  shape: number[],
  compute: (values: TypedArray[], out: Float32Array) => void,
): tf.TensorInfo {
  const wasm = backend as Partial<WasmLike>
  if (typeof wasm.makeOutput === 'function' && typeof wasm.typedArrayFromHeap === 'function') {
    // Allocate first: allocation may grow (and detach) the heap, invalidating earlier views.
    const out = wasm.makeOutput(shape, 'float32')
    const values = inputs.map((t) => wasm.typedArrayFromHeap!(t) as TypedArray)
    const outValues = wasm.typedArrayFromHeap(out) as Float32Array
    outValues.fill(0)
    compute(values, outValues)
    return out
  }
  const generic = backend as GenericBackend
  const values = inputs.map((t) => generic.readSync(t.dataId) as TypedArray)
  const outValues = new Float32Array(shape.reduce((n, d) => n * d, 1))
  compute(values, outValues)
  return generic.makeTensorInfo(shape, 'float32', outValues)
}

// ---- pairs ----

/** What tfjs passes a kernel function. */
interface KernelArgs {
  inputs: tf.NamedTensorInfoMap
  backend: unknown
  attrs: tf.NamedAttrMap
}

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

let registered = false

/**
 * Registers the kernels of this module and their gradients for every backend attnlab knows
 * (`cpu`, `wasm`, and the GPU/native backends through a read-back fallback). Idempotent.
 *
 * @category Kernels
 */
export function ensureKernels(): void {
  if (registered) return
  const kernels: [string, tf.KernelFunc][] = [
    [KERNEL_NAMES.pairScores, pairScoresKernel as unknown as tf.KernelFunc],
    [KERNEL_NAMES.pairScatter, pairScatterKernel as unknown as tf.KernelFunc],
    [KERNEL_NAMES.twoHotScores, twoHotScoresKernel as unknown as tf.KernelFunc],
    [KERNEL_NAMES.twoHotScoresGrad, twoHotScoresGradKernel as unknown as tf.KernelFunc],
  ]
  for (const [kernelName, kernelFunc] of kernels) {
    for (const backendName of BACKENDS) {
      if (tf.getKernel(kernelName, backendName) === undefined)
        tf.registerKernel({ kernelName, backendName, kernelFunc })
    }
  }
  const gradients: tf.GradConfig[] = [
    {
      kernelName: KERNEL_NAMES.pairScores,
      inputsToSave: ['q', 'tokens'],
      gradFunc: (dy, [q, tokens], attrs) => ({
        q: () => pairScatter(dy as tf.Tensor4D, tokens as tf.Tensor2D, q!.shape[3] as number, attrs.offset as number),
        tokens: () => tf.cast(tf.zerosLike(tokens!), 'float32'),
      }),
    },
    {
      kernelName: KERNEL_NAMES.pairScatter,
      inputsToSave: ['tokens'],
      gradFunc: (dy, [tokens], attrs) => ({
        p: () => pairScores(dy as tf.Tensor4D, tokens as tf.Tensor2D, attrs.offset as number, 0),
        tokens: () => tf.cast(tf.zerosLike(tokens!), 'float32'),
      }),
    },
    {
      kernelName: KERNEL_NAMES.twoHotScores,
      inputsToSave: ['w', 'tokens'],
      gradFunc: (dy, [w, tokens], attrs) => ({
        w: () =>
          twoHotScoresGrad(dy as tf.Tensor4D, tokens as tf.Tensor2D, w!.shape[1] as number, attrs.offset as number),
        tokens: () => tf.cast(tf.zerosLike(tokens!), 'float32'),
      }),
    },
    {
      // The gradient kernel is linear in dy; its adjoint is the score gather itself.
      kernelName: KERNEL_NAMES.twoHotScoresGrad,
      inputsToSave: ['tokens'],
      gradFunc: (dy, [tokens], attrs) => ({
        dy: () => twoHotScores(dy as tf.Tensor3D, tokens as tf.Tensor2D, attrs.offset as number, 0),
        tokens: () => tf.cast(tf.zerosLike(tokens!), 'float32'),
      }),
    },
  ]
  for (const config of gradients) {
    if (tf.getGradient(config.kernelName) === undefined) tf.registerGradient(config)
  }
  registered = true
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
 * @throws `ShapeError` (`@attnlab/core`) for inconsistent shapes
 * @category Kernels
 */
export function pairScores(q: tf.Tensor4D, tokens: tf.Tensor2D, offset: number, maskValue: number): tf.Tensor4D {
  ensureKernels()
  const [batch, pos, , width] = q.shape
  if (tokens.dtype !== 'int32' || tokens.shape[0] !== batch || tokens.shape[1] !== pos || offset + pos > width) {
    throw new ShapeError(
      `pairScores: q [${q.shape}] needs int32 tokens [${batch}, ${pos}] and offset + pos <= width (offset ` +
        `${offset}); got ${tokens.dtype} [${tokens.shape}]`,
    )
  }
  return tf.engine().runKernel(KERNEL_NAMES.pairScores, { q, tokens } as unknown as tf.NamedTensorMap, {
    offset,
    maskValue,
  }) as tf.Tensor4D
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
 * @throws `ShapeError` (`@attnlab/core`) for inconsistent shapes
 * @category Kernels
 */
export function pairScatter(p: tf.Tensor4D, tokens: tf.Tensor2D, width: number, offset: number): tf.Tensor4D {
  ensureKernels()
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
  return tf.engine().runKernel(KERNEL_NAMES.pairScatter, { p, tokens } as unknown as tf.NamedTensorMap, {
    offset,
    width,
  }) as tf.Tensor4D
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
 * @throws `ShapeError` (`@attnlab/core`) for inconsistent shapes
 * @category Kernels
 */
export function twoHotScores(w: tf.Tensor3D, tokens: tf.Tensor2D, offset: number, maskValue: number): tf.Tensor4D {
  ensureKernels()
  const [, rows, columns] = w.shape
  const [, pos] = tokens.shape
  if (rows !== columns || tokens.dtype !== 'int32' || tokens.rank !== 2 || offset + pos > rows) {
    throw new ShapeError(
      `twoHotScores: w [${w.shape}] must be [heads, width, width] and int32 tokens [batch, pos] with offset + pos <= ` +
        `width; got ${tokens.dtype} [${tokens.shape}], offset ${offset}`,
    )
  }
  return tf.engine().runKernel(KERNEL_NAMES.twoHotScores, { w, tokens } as unknown as tf.NamedTensorMap, {
    offset,
    maskValue,
  }) as tf.Tensor4D
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
 * @category Kernels
 */
export function twoHotScoresGrad(
  dScores: tf.Tensor4D,
  tokens: tf.Tensor2D,
  width: number,
  offset: number,
): tf.Tensor3D {
  ensureKernels()
  return tf.engine().runKernel(KERNEL_NAMES.twoHotScoresGrad, { dy: dScores, tokens } as unknown as tf.NamedTensorMap, {
    offset,
    width,
  }) as tf.Tensor3D
}

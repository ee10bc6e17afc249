// Plain double-precision reference implementations of the fused ops, used by the op tests as an
// independent check (forward values, and gradients by central differences along random
// directions). Written from the formulas in each op's TSDoc, not from the kernels.
import * as tf from '@tensorflow/tfjs-core'
import { activeKernels, registerAttnlabKernels } from '../kernels/register.ts'
import type { Rng } from '../rng.ts'

export type Vec = Float64Array

export function randomArray(rng: Rng, n: number, scale = 1): Float32Array {
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) out[i] = (2 * rng.float() - 1) * scale
  return out
}

/** Runs `fn` with attnlab kernels unregistered on the active backend (the composite path). */
export function withoutKernels<T>(fn: () => T): T {
  const registration = activeKernels()
  if (registration === undefined) return fn()
  const { backendName, provider } = registration
  registration.dispose()
  try {
    return fn()
  } finally {
    registerAttnlabKernels(backendName, provider)
  }
}

/**
 * The gradient of `sum(f(inputs) * weights)` with respect to each input, via `tf.grads` with
 * `dy = weights` (no gradients of stock ops are needed: tfjs-core's Node build registers none).
 */
export function gradients(
  f: (...xs: tf.Tensor[]) => tf.Tensor,
  inputs: tf.Tensor[],
  weights: tf.Tensor,
): { value: Float32Array; grads: Float32Array[] } {
  return tf.tidy(() => {
    const value = f(...inputs)
    const g = tf.grads((...xs: tf.Tensor[]) => f(...xs))(inputs, weights)
    return { value: value.dataSync() as Float32Array, grads: g.map((t) => t.dataSync() as Float32Array) }
  })
}

/**
 * Checks `grad` (flat, for input `index` of a double reference function `f`) along `directions`
 * random directions: <grad, u> == (L(x + h u) - L(x - h u)) / 2h with L = sum(f(x) * weights).
 * Returns the largest relative error.
 */
export function directionalError(
  f: (xs: Vec[]) => Vec,
  xs: Vec[],
  index: number,
  weights: Vec,
  grad: ArrayLike<number>,
  rng: Rng,
  directions = 3,
  h = 1e-6,
): number {
  const loss = (ys: Vec[]): number => {
    const out = f(ys)
    let s = 0
    for (let i = 0; i < out.length; i++) s += out[i]! * weights[i]!
    return s
  }
  let worst = 0
  for (let d = 0; d < directions; d++) {
    const u = new Float64Array(xs[index]!.length)
    for (let i = 0; i < u.length; i++) u[i] = 2 * rng.float() - 1
    const plus = xs.map((x, i) => (i === index ? x.map((v, j) => v + h * u[j]!) : x))
    const minus = xs.map((x, i) => (i === index ? x.map((v, j) => v - h * u[j]!) : x))
    const numeric = (loss(plus) - loss(minus)) / (2 * h)
    let analytic = 0
    for (let i = 0; i < u.length; i++) analytic += grad[i]! * u[i]!
    worst = Math.max(worst, Math.abs(numeric - analytic) / Math.max(1e-3, Math.abs(numeric)))
  }
  return worst
}

export const toVec = (a: ArrayLike<number>): Vec => Float64Array.from(a)

// ---- reference forwards (double precision) ----------------------------------------------------

export function refLinear(
  x: Vec,
  w: Vec,
  bias: Vec | null,
  rows: number,
  inner: number,
  cols: number,
  gelu: boolean,
): Vec {
  const out = new Float64Array(rows * cols)
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      let s = bias === null ? 0 : bias[j]!
      for (let k = 0; k < inner; k++) s += x[i * inner + k]! * w[k * cols + j]!
      out[i * cols + j] = gelu ? 0.5 * s * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (s + 0.044715 * s ** 3))) : s
    }
  }
  return out
}

export function refLayerNorm(x: Vec, gain: Vec, bias: Vec | null, rows: number, cols: number, eps: number): Vec {
  const out = new Float64Array(rows * cols)
  for (let r = 0; r < rows; r++) {
    let mean = 0
    for (let j = 0; j < cols; j++) mean += x[r * cols + j]! / cols
    let variance = 0
    for (let j = 0; j < cols; j++) variance += (x[r * cols + j]! - mean) ** 2 / cols
    for (let j = 0; j < cols; j++)
      out[r * cols + j] =
        ((x[r * cols + j]! - mean) / Math.sqrt(variance + eps)) * gain[j]! + (bias === null ? 0 : bias[j]!)
  }
  return out
}

/** qkv [b, t, 3, h, d] -> z [b, t, h, d] */
export function refAttention(
  qkv: Vec,
  batch: number,
  pos: number,
  nHeads: number,
  dHead: number,
  scale: number,
  causal: boolean,
): Vec {
  const width = nHeads * dHead
  const z = new Float64Array(batch * pos * width)
  const at = (b: number, t: number, part: number, h: number, d: number): number =>
    qkv[((b * pos + t) * 3 + part) * width + h * dHead + d]!
  for (let b = 0; b < batch; b++)
    for (let h = 0; h < nHeads; h++)
      for (let i = 0; i < pos; i++) {
        const n = causal ? i + 1 : pos
        const s: number[] = []
        for (let j = 0; j < n; j++) {
          let dot = 0
          for (let d = 0; d < dHead; d++) dot += at(b, i, 0, h, d) * at(b, j, 1, h, d)
          s.push(scale * dot)
        }
        const max = Math.max(...s)
        const e = s.map((v) => Math.exp(v - max))
        const sum = e.reduce((a, c) => a + c, 0)
        for (let d = 0; d < dHead; d++) {
          let acc = 0
          for (let j = 0; j < n; j++) acc += (e[j]! / sum) * at(b, j, 2, h, d)
          z[(b * pos + i) * width + h * dHead + d] = acc
        }
      }
  return z
}

export function refCrossEntropy(
  logits: Vec,
  labels: ArrayLike<number>,
  weights: ArrayLike<number>,
  rows: number,
  cols: number,
): Vec {
  let total = 0
  let weightSum = 0
  for (let r = 0; r < rows; r++) {
    const row = Array.from(logits.subarray(r * cols, (r + 1) * cols))
    const max = Math.max(...row)
    const lse = max + Math.log(row.reduce((a, v) => a + Math.exp(v - max), 0))
    total += weights[r]! * (lse - row[labels[r]!]!)
    weightSum += weights[r]!
  }
  return Float64Array.of(total / Math.max(weightSum, 1e-12))
}

/** Dense minimal-model attention with explicit one-hot inputs. */
export function refOneHot(
  tokens: ArrayLike<number>,
  wq: Vec,
  wv: Vec,
  batch: number,
  pos: number,
  nHeads: number,
  dModel: number,
  dValue: number,
  dVocab: number,
  outCols: number,
  scale: number,
): Vec {
  const out = new Float64Array(batch * pos * outCols)
  for (let b = 0; b < batch; b++) {
    const x = (t: number): Float64Array => {
      const v = new Float64Array(dModel)
      v[tokens[b * pos + t]!] = 1
      v[dVocab + t] = 1
      return v
    }
    const xs = Array.from({ length: pos }, (_, t) => x(t))
    for (let h = 0; h < nHeads; h++) {
      const project = (v: Float64Array, w: Vec, cols: number): Float64Array => {
        const r = new Float64Array(cols)
        for (let i = 0; i < dModel; i++)
          if (v[i] !== 0) for (let c = 0; c < cols; c++) r[c]! += v[i]! * w[(h * dModel + i) * cols + c]!
        return r
      }
      const qs = xs.map((v) => project(v, wq, dModel))
      const vs = xs.map((v) => project(v, wv, dValue))
      for (let t = 0; t < pos; t++) {
        const s: number[] = []
        for (let u = 0; u <= t; u++) {
          let dot = 0
          for (let i = 0; i < dModel; i++) dot += qs[t]![i]! * xs[u]![i]!
          s.push(scale * dot)
        }
        const max = Math.max(...s)
        const e = s.map((v) => Math.exp(v - max))
        const sum = e.reduce((a, c) => a + c, 0)
        for (let c = 0; c < outCols; c++) {
          let acc = 0
          for (let u = 0; u <= t; u++) acc += (e[u]! / sum) * vs[u]![c]!
          out[(b * pos + t) * outCols + c]! += acc
        }
      }
    }
  }
  return out
}

// Independent, straightforward references for the tests: plain loops in float64, no tfjs and no
// code shared with the package.
import * as tf from '@tensorflow/tfjs-core'
import { Rng } from '@attnlab/core'

export interface Qkv {
  q: Float32Array // [H, T, d]
  k: Float32Array // [Hkv, T, d]
  v: Float32Array // [Hkv, T, dv]
  H: number
  Hkv: number
  T: number
  d: number
  dv: number
}

export function randomQkv(seed: number, H: number, Hkv: number, T: number, d: number, dv = d, std = 1): Qkv {
  const rng = Rng.fromSeed(seed)
  return {
    q: rng.split('q').fillNormal(new Float32Array(H * T * d), 0, std),
    k: rng.split('k').fillNormal(new Float32Array(Hkv * T * d), 0, std),
    v: rng.split('v').fillNormal(new Float32Array(Hkv * T * dv), 0, 1),
    H,
    Hkv,
    T,
    d,
    dv,
  }
}

export function tensors(x: Qkv): { q: tf.Tensor3D; k: tf.Tensor3D; v: tf.Tensor3D } {
  return {
    q: tf.tensor3d(x.q, [x.H, x.T, x.d]),
    k: tf.tensor3d(x.k, [x.Hkv, x.T, x.d]),
    v: tf.tensor3d(x.v, [x.Hkv, x.T, x.dv]),
  }
}

/** softmax(scale q.k) v over the keys allowed by mask[h][i][j] (or causal when mask is null). */
export function referenceAttention(x: Qkv, mask: Uint8Array | null, scale = 1 / Math.sqrt(x.d)): Float64Array {
  const { H, Hkv, T, d, dv } = x
  const out = new Float64Array(H * T * dv)
  const group = H / Hkv
  for (let h = 0; h < H; h++) {
    const kv = Math.floor(h / group)
    for (let i = 0; i < T; i++) {
      const scores: number[] = []
      const keys: number[] = []
      for (let j = 0; j < T; j++) {
        const allowed = mask === null ? j <= i : mask[(h * T + i) * T + j] === 1
        if (!allowed) continue
        let s = 0
        for (let c = 0; c < d; c++) s += (x.q[(h * T + i) * d + c] as number) * (x.k[(kv * T + j) * d + c] as number)
        scores.push(s * scale)
        keys.push(j)
      }
      const max = Math.max(...scores)
      const w = scores.map((s) => Math.exp(s - max))
      const z = w.reduce((a, b) => a + b, 0)
      keys.forEach((j, n) => {
        for (let c = 0; c < dv; c++)
          out[(h * T + i) * dv + c] =
            (out[(h * T + i) * dv + c] as number) + ((w[n] as number) / z) * (x.v[(kv * T + j) * dv + c] as number)
      })
    }
  }
  return out
}

/** One decode query per head [H, d] over keys [Hkv, P, d] restricted to mask [H, P]. */
export function referenceDecode(
  qNew: Float32Array,
  keys: Float32Array,
  values: Float32Array,
  mask: Uint8Array | null,
  H: number,
  Hkv: number,
  P: number,
  d: number,
  dv: number,
  scale = 1 / Math.sqrt(d),
): Float64Array {
  const out = new Float64Array(H * dv)
  const group = H / Hkv
  for (let h = 0; h < H; h++) {
    const kv = Math.floor(h / group)
    const scores: number[] = []
    const idx: number[] = []
    for (let j = 0; j < P; j++) {
      if (mask !== null && mask[h * P + j] !== 1) continue
      let s = 0
      for (let c = 0; c < d; c++) s += (qNew[h * d + c] as number) * (keys[(kv * P + j) * d + c] as number)
      scores.push(s * scale)
      idx.push(j)
    }
    const max = Math.max(...scores)
    const w = scores.map((s) => Math.exp(s - max))
    const z = w.reduce((a, b) => a + b, 0)
    idx.forEach((j, n) => {
      for (let c = 0; c < dv; c++)
        out[h * dv + c] =
          (out[h * dv + c] as number) + ((w[n] as number) / z) * (values[(kv * P + j) * dv + c] as number)
    })
  }
  return out
}

/** Concatenates prompt [Hkv, T, d] and the new token [Hkv, d] into [Hkv, T+1, d]. */
export function appendToken(
  prompt: Float32Array,
  token: Float32Array,
  Hkv: number,
  T: number,
  d: number,
): Float32Array {
  const out = new Float32Array(Hkv * (T + 1) * d)
  for (let kv = 0; kv < Hkv; kv++) {
    out.set(prompt.subarray(kv * T * d, (kv + 1) * T * d), kv * (T + 1) * d)
    out.set(token.subarray(kv * d, (kv + 1) * d), (kv * (T + 1) + T) * d)
  }
  return out
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`)
  let m = 0
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs((a[i] as number) - (b[i] as number)))
  return m
}

/** Window probabilities of the last W queries [H, W, T], float64, causal in the corner. */
export function referenceWindowProbabilities(x: Qkv, W: number, scale = 1 / Math.sqrt(x.d)): Float64Array {
  const { H, Hkv, T, d } = x
  const out = new Float64Array(H * W * T)
  const group = H / Hkv
  for (let h = 0; h < H; h++) {
    const kv = Math.floor(h / group)
    for (let i = 0; i < W; i++) {
      const pos = T - W + i
      const s: number[] = []
      for (let j = 0; j <= pos; j++) {
        let dot = 0
        for (let c = 0; c < d; c++)
          dot += (x.q[(h * T + pos) * d + c] as number) * (x.k[(kv * T + j) * d + c] as number)
        s.push(dot * scale)
      }
      const max = Math.max(...s)
      const e = s.map((v) => Math.exp(v - max))
      const z = e.reduce((a, b) => a + b, 0)
      e.forEach((v, j) => {
        out[(h * W + i) * T + j] = v / z
      })
    }
  }
  return out
}

/**
 * The `js` kernel provider: every kernel of {@link KernelProvider} as plain JavaScript loops.
 * It is the reference the other providers are tested against, the `cpu` backend's kernels, and
 * the last resort on `wasm` when WebAssembly kernels cannot load. Arithmetic is in doubles (JS
 * numbers); every intermediate the other providers store in float32 (projected rows, scores,
 * exponentials, probabilities) is stored in float32 here too, so float32 effects that experiments
 * depend on (e.g. `exp(1e-9)` rounding to 1: the minimal model's symmetry trap) are the same on
 * every provider.
 *
 * @module
 */
import { pageSelectJs } from './page-select-js.ts'
import { sparseAttentionJs } from './sparse-attention-js.ts'
import type { AdamWHyper, FloatArray, IntArray, KernelProvider, OneHotAttentionShape } from './provider.ts'

const GELU_C = Math.sqrt(2 / Math.PI)
const GELU_A = 0.044715

function gemm(
  transposeA: boolean,
  transposeB: boolean,
  batch: number,
  m: number,
  n: number,
  k: number,
  a: FloatArray,
  strideA: number,
  b: FloatArray,
  strideB: number,
  c: FloatArray,
): void {
  const row = new Float64Array(n)
  for (let p = 0; p < batch; p++) {
    const a0 = p * strideA
    const b0 = p * strideB
    const c0 = p * m * n
    for (let i = 0; i < m; i++) {
      row.fill(0)
      for (let l = 0; l < k; l++) {
        const x = transposeA ? a[a0 + l * m + i]! : a[a0 + i * k + l]!
        if (x === 0) continue
        if (transposeB) for (let j = 0; j < n; j++) row[j]! += x * b[b0 + j * k + l]!
        else for (let j = 0; j < n; j++) row[j]! += x * b[b0 + l * n + j]!
      }
      for (let j = 0; j < n; j++) c[c0 + i * n + j] = row[j]!
    }
  }
}

function softmaxRow(x: FloatArray, xOffset: number, y: FloatArray, yOffset: number, n: number, scale: number): void {
  let max = -Infinity
  for (let j = 0; j < n; j++) max = Math.max(max, scale * x[xOffset + j]!)
  if (max === -Infinity) {
    y.fill(0, yOffset, yOffset + n)
    return
  }
  let sum = 0
  for (let j = 0; j < n; j++) {
    y[yOffset + j] = Math.exp(scale * x[xOffset + j]! - max)
    sum += y[yOffset + j]!
  }
  const inverse = 1 / sum
  for (let j = 0; j < n; j++) y[yOffset + j]! *= inverse
}

function softmax(x: FloatArray, y: FloatArray, rows: number, cols: number): void {
  for (let r = 0; r < rows; r++) softmaxRow(x, r * cols, y, r * cols, cols, 1)
}

function gatherRows(table: FloatArray, indices: IntArray, out: FloatArray, n: number, k: number, width: number): void {
  for (let r = 0; r < n; r++) {
    const o = r * width
    const first = indices[r * k]! * width
    for (let j = 0; j < width; j++) out[o + j] = table[first + j]!
    for (let m = 1; m < k; m++) {
      const src = indices[r * k + m]! * width
      for (let j = 0; j < width; j++) out[o + j]! += table[src + j]!
    }
  }
}

function scatterRows(
  updates: FloatArray,
  indices: IntArray,
  out: FloatArray,
  n: number,
  k: number,
  width: number,
  rows: number,
): void {
  out.fill(0, 0, rows * width)
  for (let r = 0; r < n; r++) {
    const src = r * width
    for (let m = 0; m < k; m++) {
      const o = indices[r * k + m]! * width
      for (let j = 0; j < width; j++) out[o + j]! += updates[src + j]!
    }
  }
}

function addBias(c: FloatArray, rows: number, cols: number, bias: FloatArray): void {
  for (let r = 0; r < rows; r++) {
    const o = r * cols
    for (let j = 0; j < cols; j++) c[o + j]! += bias[j]!
  }
}

function columnSum(x: FloatArray, out: FloatArray, rows: number, cols: number): void {
  const sum = new Float64Array(cols)
  for (let r = 0; r < rows; r++) {
    const o = r * cols
    for (let j = 0; j < cols; j++) sum[j]! += x[o + j]!
  }
  out.set(sum.subarray(0, cols))
}

function geluForward(x: FloatArray, y: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) {
    const v = x[i]!
    y[i] = 0.5 * v * (1 + Math.tanh(GELU_C * (v + GELU_A * v * v * v)))
  }
}

function geluBackward(x: FloatArray, dy: FloatArray, dx: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) {
    const v = x[i]!
    const t = Math.tanh(GELU_C * (v + GELU_A * v * v * v))
    dx[i] = dy[i]! * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * GELU_C * (1 + 3 * GELU_A * v * v))
  }
}

function layerNormForward(
  x: FloatArray,
  gain: FloatArray,
  bias: FloatArray | null,
  y: FloatArray,
  mean: FloatArray,
  rstd: FloatArray,
  rows: number,
  cols: number,
  eps: number,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * cols
    let s = 0
    for (let j = 0; j < cols; j++) s += x[o + j]!
    const mu = s / cols
    let ss = 0
    for (let j = 0; j < cols; j++) {
      const c = x[o + j]! - mu
      ss += c * c
    }
    const rs = 1 / Math.sqrt(ss / cols + eps)
    mean[r] = mu
    rstd[r] = rs
    for (let j = 0; j < cols; j++) y[o + j] = (x[o + j]! - mu) * rs * gain[j]! + (bias === null ? 0 : bias[j]!)
  }
}

function layerNormBackward(
  x: FloatArray,
  gain: FloatArray,
  mean: FloatArray,
  rstd: FloatArray,
  dy: FloatArray,
  dx: FloatArray,
  dGain: FloatArray,
  dBias: FloatArray | null,
  rows: number,
  cols: number,
): void {
  const dg = new Float64Array(cols)
  const db = new Float64Array(cols)
  for (let r = 0; r < rows; r++) {
    const o = r * cols
    const mu = mean[r]!
    const rs = rstd[r]!
    let sumD = 0
    let sumDX = 0
    for (let j = 0; j < cols; j++) {
      const xh = (x[o + j]! - mu) * rs
      const g = dy[o + j]!
      const d = g * gain[j]!
      sumD += d
      sumDX += d * xh
      dg[j]! += g * xh
      db[j]! += g
    }
    const meanD = sumD / cols
    const meanDX = sumDX / cols
    for (let j = 0; j < cols; j++) {
      const xh = (x[o + j]! - mu) * rs
      dx[o + j] = rs * (dy[o + j]! * gain[j]! - meanD - xh * meanDX)
    }
  }
  dGain.set(dg)
  if (dBias !== null) dBias.set(db)
}

function attentionForward(
  qkv: FloatArray,
  out: FloatArray,
  probs: FloatArray,
  batch: number,
  pos: number,
  nHeads: number,
  dHead: number,
  scale: number,
  causal: boolean,
): void {
  const width = nHeads * dHead
  const stride = 3 * width
  const scores = new Float32Array(pos)
  const acc = new Float64Array(dHead)
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < nHeads; h++) {
      const q0 = b * pos * stride + h * dHead
      const k0 = q0 + width
      const v0 = q0 + 2 * width
      const p0 = (b * nHeads + h) * pos * pos
      for (let i = 0; i < pos; i++) {
        const n = causal ? i + 1 : pos
        const qi = q0 + i * stride
        let max = -Infinity
        for (let j = 0; j < n; j++) {
          const kj = k0 + j * stride
          let s = 0
          for (let d = 0; d < dHead; d++) s += qkv[qi + d]! * qkv[kj + d]!
          scores[j] = s * scale
          if (scores[j]! > max) max = scores[j]!
        }
        let sum = 0
        for (let j = 0; j < n; j++) {
          scores[j] = Math.exp(scores[j]! - max)
          sum += scores[j]!
        }
        const pi = p0 + i * pos
        acc.fill(0)
        for (let j = 0; j < n; j++) {
          const p = scores[j]! / sum
          probs[pi + j] = p
          const vj = v0 + j * stride
          for (let d = 0; d < dHead; d++) acc[d]! += probs[pi + j]! * qkv[vj + d]!
        }
        probs.fill(0, pi + n, pi + pos)
        const oi = (b * pos + i) * width + h * dHead
        for (let d = 0; d < dHead; d++) out[oi + d] = acc[d]!
      }
    }
  }
}

function attentionBackward(
  qkv: FloatArray,
  probs: FloatArray,
  dOut: FloatArray,
  dQkv: FloatArray,
  batch: number,
  pos: number,
  nHeads: number,
  dHead: number,
  scale: number,
  causal: boolean,
): void {
  const width = nHeads * dHead
  const stride = 3 * width
  const dScores = new Float64Array(pos)
  const dq = new Float64Array(dHead)
  const dk = new Float64Array(pos * dHead)
  const dv = new Float64Array(pos * dHead)
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < nHeads; h++) {
      const q0 = b * pos * stride + h * dHead
      const k0 = q0 + width
      const v0 = q0 + 2 * width
      const p0 = (b * nHeads + h) * pos * pos
      dk.fill(0)
      dv.fill(0)
      for (let i = 0; i < pos; i++) {
        const n = causal ? i + 1 : pos
        const pi = p0 + i * pos
        const oi = (b * pos + i) * width + h * dHead
        let dot = 0
        for (let j = 0; j < n; j++) {
          const vj = v0 + j * stride
          const p = probs[pi + j]!
          let s = 0
          for (let d = 0; d < dHead; d++) {
            const g = dOut[oi + d]!
            s += g * qkv[vj + d]!
            dv[j * dHead + d]! += p * g
          }
          dScores[j] = s
          dot += p * s
        }
        dq.fill(0)
        const qi = q0 + i * stride
        for (let j = 0; j < n; j++) {
          const g = probs[pi + j]! * (dScores[j]! - dot) * scale
          if (g === 0) continue
          const kj = k0 + j * stride
          for (let d = 0; d < dHead; d++) {
            dq[d]! += g * qkv[kj + d]!
            dk[j * dHead + d]! += g * qkv[qi + d]!
          }
        }
        for (let d = 0; d < dHead; d++) dQkv[qi + d] = dq[d]!
      }
      for (let j = 0; j < pos; j++) {
        for (let d = 0; d < dHead; d++) {
          dQkv[k0 + j * stride + d] = dk[j * dHead + d]!
          dQkv[v0 + j * stride + d] = dv[j * dHead + d]!
        }
      }
    }
  }
}

function weightTotal(weights: FloatArray | null, rows: number): number {
  if (weights === null) return Math.max(rows, 1e-12)
  let total = 0
  for (let r = 0; r < rows; r++) total += weights[r]!
  return Math.max(total, 1e-12)
}

function softmaxCrossEntropy(
  logits: FloatArray,
  labels: IntArray,
  weights: FloatArray | null,
  rows: number,
  cols: number,
): number {
  let total = 0
  for (let r = 0; r < rows; r++) {
    const w = weights === null ? 1 : weights[r]!
    if (w === 0) continue
    const o = r * cols
    let max = -Infinity
    for (let j = 0; j < cols; j++) max = Math.max(max, logits[o + j]!)
    let sum = 0
    for (let j = 0; j < cols; j++) sum += Math.exp(logits[o + j]! - max)
    total += w * (Math.log(sum) + max - logits[o + labels[r]!]!)
  }
  return total / weightTotal(weights, rows)
}

function softmaxCrossEntropyBackward(
  logits: FloatArray,
  labels: IntArray,
  weights: FloatArray | null,
  rows: number,
  cols: number,
  dLoss: number,
  dLogits: FloatArray,
): void {
  const scale = dLoss / weightTotal(weights, rows)
  for (let r = 0; r < rows; r++) {
    const o = r * cols
    const g = scale * (weights === null ? 1 : weights[r]!)
    if (g === 0) {
      dLogits.fill(0, o, o + cols)
      continue
    }
    softmaxRow(logits, o, dLogits, o, cols, 1)
    for (let j = 0; j < cols; j++) dLogits[o + j]! *= g
    dLogits[o + labels[r]!]! -= g
  }
}

function oneHotAttentionForward(
  tokens: IntArray,
  wq: FloatArray,
  wv: FloatArray,
  logits: FloatArray,
  probs: FloatArray,
  shape: OneHotAttentionShape,
): void {
  const { batch, pos, nHeads, dModel, dValue, dVocab, outCols, scale, from } = shape
  const q = new Float32Array(pos * dModel)
  const v = new Float32Array(pos * outCols)
  const row = new Float32Array(pos)
  const acc = new Float64Array(pos * outCols)
  for (let b = 0; b < batch; b++) {
    const t0 = b * pos
    acc.fill(0)
    for (let h = 0; h < nHeads; h++) {
      const wq0 = h * dModel * dModel
      const wv0 = h * dModel * dValue
      for (let t = 0; t < pos; t++) {
        const a = wq0 + tokens[t0 + t]! * dModel
        const p = wq0 + (dVocab + t) * dModel
        for (let e = 0; e < dModel; e++) q[t * dModel + e] = wq[a + e]! + wq[p + e]!
        const va = wv0 + tokens[t0 + t]! * dValue
        const vp = wv0 + (dVocab + t) * dValue
        for (let e = 0; e < outCols; e++) v[t * outCols + e] = wv[va + e]! + wv[vp + e]!
      }
      const p0 = (b * nHeads + h) * pos * pos
      probs.fill(0, p0, p0 + from * pos)
      for (let t = from; t < pos; t++) {
        let max = -Infinity
        for (let s = 0; s <= t; s++) {
          row[s] = scale * (q[t * dModel + tokens[t0 + s]!]! + q[t * dModel + dVocab + s]!)
          if (row[s]! > max) max = row[s]!
        }
        let sum = 0
        for (let s = 0; s <= t; s++) {
          row[s] = Math.exp(row[s]! - max)
          sum += row[s]!
        }
        const pt = p0 + t * pos
        for (let s = 0; s <= t; s++) {
          probs[pt + s] = row[s]! / sum
          const a = probs[pt + s]!
          for (let e = 0; e < outCols; e++) acc[t * outCols + e]! += a * v[s * outCols + e]!
        }
        probs.fill(0, pt + t + 1, pt + pos)
      }
    }
    const out0 = b * (pos - from) * outCols
    for (let i = 0; i < (pos - from) * outCols; i++) logits[out0 + i] = acc[from * outCols + i]!
  }
}

function oneHotAttentionBackward(
  tokens: IntArray,
  _wq: FloatArray,
  wv: FloatArray,
  probs: FloatArray,
  dLogits: FloatArray,
  dWq: FloatArray,
  dWv: FloatArray,
  shape: OneHotAttentionShape,
): void {
  const { batch, pos, nHeads, dModel, dValue, dVocab, outCols, scale, from } = shape
  const gq = new Float64Array(nHeads * dModel * dModel)
  const gv = new Float64Array(nHeads * dModel * dValue)
  const v = new Float32Array(pos * outCols)
  const dv = new Float64Array(pos * outCols)
  const dq = new Float64Array(pos * dModel)
  const dA = new Float64Array(pos)
  for (let b = 0; b < batch; b++) {
    const t0 = b * pos
    for (let h = 0; h < nHeads; h++) {
      const wq0 = h * dModel * dModel
      const wv0 = h * dModel * dValue
      for (let t = 0; t < pos; t++) {
        const va = wv0 + tokens[t0 + t]! * dValue
        const vp = wv0 + (dVocab + t) * dValue
        for (let e = 0; e < outCols; e++) v[t * outCols + e] = wv[va + e]! + wv[vp + e]!
      }
      dv.fill(0)
      dq.fill(0)
      const p0 = (b * nHeads + h) * pos * pos
      for (let t = from; t < pos; t++) {
        const go = (b * (pos - from) + t - from) * outCols
        const pt = p0 + t * pos
        let dot = 0
        for (let s = 0; s <= t; s++) {
          const p = probs[pt + s]!
          let g = 0
          for (let e = 0; e < outCols; e++) {
            const d = dLogits[go + e]!
            g += d * v[s * outCols + e]!
            dv[s * outCols + e]! += p * d
          }
          dA[s] = g
          dot += p * g
        }
        for (let s = 0; s <= t; s++) {
          const g = probs[pt + s]! * (dA[s]! - dot) * scale
          dq[t * dModel + tokens[t0 + s]!]! += g
          dq[t * dModel + dVocab + s]! += g
        }
      }
      for (let t = 0; t < pos; t++) {
        const a = wq0 + tokens[t0 + t]! * dModel
        const p = wq0 + (dVocab + t) * dModel
        for (let e = 0; e < dModel; e++) {
          const g = dq[t * dModel + e]!
          gq[a + e]! += g
          gq[p + e]! += g
        }
        const va = wv0 + tokens[t0 + t]! * dValue
        const vp = wv0 + (dVocab + t) * dValue
        for (let e = 0; e < outCols; e++) {
          const g = dv[t * outCols + e]!
          gv[va + e]! += g
          gv[vp + e]! += g
        }
      }
    }
  }
  dWq.set(gq)
  dWv.set(gv)
}

function adamw(p: FloatArray, g: FloatArray, m: FloatArray, v: FloatArray, n: number, hyper: AdamWHyper): void {
  // Every operation rounded to float32, like the native and wasm kernels: an update computed in
  // doubles breaks float32 properties experiments rely on (identical heads stay identical).
  const f = Math.fround
  const { lr, step } = hyper
  const beta1 = f(hyper.beta1)
  const beta2 = f(hyper.beta2)
  const eps = f(hyper.eps)
  const stepSize = f(lr / (1 - hyper.beta1 ** step))
  const rootCorrection = f(1 / Math.sqrt(1 - hyper.beta2 ** step))
  const decay = f(1 - lr * hyper.weightDecay)
  const oneMinusBeta1 = f(1 - beta1)
  const oneMinusBeta2 = f(1 - beta2)
  for (let i = 0; i < n; i++) {
    const gi = g[i]!
    const mi = f(f(beta1 * m[i]!) + f(oneMinusBeta1 * gi))
    const vi = f(f(beta2 * v[i]!) + f(f(oneMinusBeta2 * gi) * gi))
    m[i] = mi
    v[i] = vi
    const denominator = f(f(f(Math.sqrt(vi)) * rootCorrection) + eps)
    p[i] = f(f(p[i]! * decay) - f(f(stepSize * mi) / denominator))
  }
}

/**
 * The plain-JavaScript {@link KernelProvider}: single-threaded, no SIMD, exact to double
 * precision before the final float32 rounding. Works on any backend's arrays.
 *
 * @category Kernels
 */
export const jsKernelProvider: KernelProvider = Object.freeze({
  name: 'js',
  fastMatMul: false,
  gemm,
  softmax,
  gatherRows,
  scatterRows,
  addBias,
  columnSum,
  geluForward,
  geluBackward,
  layerNormForward,
  layerNormBackward,
  attentionForward,
  attentionBackward,
  softmaxCrossEntropy,
  softmaxCrossEntropyBackward,
  oneHotAttentionForward,
  oneHotAttentionBackward,
  adamw,
  sparseAttention: sparseAttentionJs,
  pageSelect: pageSelectJs,
  setThreads: () => {},
  threads: () => 1,
})

// attnlab's kernels in AssemblyScript, compiled to WebAssembly SIMD128
// (packages/core/src/kernels/attnlab-kernels.wasm; `pnpm --filter @attnlab/core build:kernels`).
//
// The module IMPORTS the tfjs wasm backend's own memory (env.memory): every pointer below is a
// byte address in that heap, so kernels read and write tensors in place. It must have no data
// segments (they would be written over the backend's heap at instantiation) and no start function,
// and it never allocates: scratch space comes from the caller (malloc'ed through tfjs' _malloc).
// scripts/build-wasm-kernels.mjs checks the sections. Math is table-free for the same reason
// (AssemblyScript's Mathf.exp/log carry lookup tables in data segments).
//
// Layouts and semantics: src/kernels/provider.ts (KernelProvider); the plain-JS reference is
// src/kernels/js-provider.ts.

// @ts-nocheck  (AssemblyScript, not TypeScript)

const MR: i32 = 4 // rows per gemm micro-tile
const NR: i32 = 8 // columns per gemm micro-tile (two f32x4)
const KC: i32 = 256 // packed depth

@inline function ld(p: usize): f32 { return load<f32>(p) }
@inline function st(p: usize, v: f32): void { store<f32>(p, v) }
@inline function at(base: usize, i: i64): usize { return base + (<usize>i << 2) }
@inline function ldi(base: usize, i: i64): i32 { return load<i32>(base + (<usize>i << 2)) }

// exp (Cephes-style range reduction + degree-6 polynomial, ~2 ulp). Exactly 0 below -87.3: a
// denormal result (masked scores) would slow every later operation that reads it.
@inline function expf(x: f32): f32 {
  if (!(x >= -87.3)) return x != x ? x : 0
  x = min(x, <f32>88.7)
  const n = Mathf.floor(x * 1.44269504088896341 + 0.5)
  const r = x - n * <f32>0.693359375 + n * <f32>2.12194440e-4
  let q: f32 = 1.9875691500e-4
  q = q * r + 1.3981999507e-3
  q = q * r + 8.3334519073e-3
  q = q * r + 4.1665795894e-2
  q = q * r + 1.6666665459e-1
  q = q * r + 5.0000001201e-1
  const y = q * r * r + r + 1
  return y * reinterpret<f32>((<i32>n + 127) << 23)
}

// log for v > 0 (Cephes logf): v = m 2^e, m in [sqrt(1/2), sqrt(2)).
@inline function logf(v: f32): f32 {
  const bits = reinterpret<i32>(v)
  let e = <f32>(((bits >> 23) & 0xff) - 126)
  let x = reinterpret<f32>((bits & 0x007fffff) | 0x3f000000) // [0.5, 1)
  if (x < 0.70710678118654752) { e -= 1; x = x + x - 1 } else { x = x - 1 }
  const z = x * x
  let y: f32 = 7.0376836292e-2
  y = y * x - 1.1514610310e-1
  y = y * x + 1.1676998740e-1
  y = y * x - 1.2420140846e-1
  y = y * x + 1.4249322787e-1
  y = y * x - 1.6668057665e-1
  y = y * x + 2.0000714765e-1
  y = y * x - 2.4999993993e-1
  y = y * x + 3.3333331174e-1
  y = y * x * z
  y += -2.12194440e-4 * e
  y += -0.5 * z
  return x + y + 0.693359375 * e
}

// ---- gemm ----------------------------------------------------------------------------------

@inline function aAt(A: usize, tA: bool, M: i32, K: i32, i: i32, k: i32): f32 {
  return tA ? ld(at(A, <i64>k * M + i)) : ld(at(A, <i64>i * K + k))
}

function packB(B: usize, tB: bool, K: i32, N: i32, kb: i32, kc: i32, Bp: usize): void {
  const panels = (N + NR - 1) / NR
  for (let p = 0; p < panels; p++) {
    const j0 = p * NR
    const nj = min(NR, N - j0)
    for (let k = 0; k < kc; k++) {
      const row = at(Bp, (<i64>p * kc + k) * NR)
      if (!tB && nj == NR) {
        const src = at(B, <i64>(kb + k) * N + j0)
        v128.store(row, v128.load(src))
        v128.store(row, v128.load(src, 16), 16)
        continue
      }
      for (let j = 0; j < NR; j++) {
        let v: f32 = 0
        if (j < nj) v = tB ? ld(at(B, <i64>(j0 + j) * K + kb + k)) : ld(at(B, <i64>(kb + k) * N + j0 + j))
        st(at(row, j), v)
      }
    }
  }
}

function packA(A: usize, tA: bool, M: i32, K: i32, ib: i32, kb: i32, kc: i32, Ap: usize): void {
  const ni = min(MR, M - ib)
  for (let k = 0; k < kc; k++) {
    for (let i = 0; i < MR; i++) {
      st(at(Ap, <i64>k * MR + i), i < ni ? aAt(A, tA, M, K, ib + i, kb + k) : <f32>0)
    }
  }
}

@inline function laneOf(v: v128, j: i32): f32 {
  return j == 0 ? f32x4.extract_lane(v, 0) : j == 1 ? f32x4.extract_lane(v, 1) : j == 2 ? f32x4.extract_lane(v, 2) : f32x4.extract_lane(v, 3)
}

/**
 * C[b] = op(A[b]) op(B[b]) (C[b] is M x N, batch stride M*N); strides of A and B in floats
 * (0 broadcasts). scratch: >= gemmScratchFloats(N) floats.
 */
export function gemm(tA: bool, tB: bool, batch: i32, M: i32, N: i32, K: i32, A: usize, sA: i32, B: usize, sB: i32,
  C: usize, scratch: usize): void {
  const panels = (N + NR - 1) / NR
  const Bp = scratch
  const Ap = at(scratch, <i64>panels * NR * KC)
  for (let b = 0; b < batch; b++) {
    const a = at(A, <i64>b * sA), bb = at(B, <i64>b * sB), c = at(C, <i64>b * M * N)
    for (let kb = 0; kb < K; kb += KC) {
      const kc = min(KC, K - kb)
      packB(bb, tB, K, N, kb, kc, Bp)
      for (let ib = 0; ib < M; ib += MR) {
        packA(a, tA, M, K, ib, kb, kc, Ap)
        const ni = min(MR, M - ib)
        for (let p = 0; p < panels; p++) {
          let c00 = f32x4.splat(0), c01 = f32x4.splat(0), c10 = f32x4.splat(0), c11 = f32x4.splat(0)
          let c20 = f32x4.splat(0), c21 = f32x4.splat(0), c30 = f32x4.splat(0), c31 = f32x4.splat(0)
          let bp = at(Bp, <i64>p * kc * NR)
          let ap = Ap
          for (let k = 0; k < kc; k++) {
            const b0 = v128.load(bp), b1 = v128.load(bp, 16)
            const a0 = v128.load32_splat(ap), a1 = v128.load32_splat(ap, 4)
            const a2 = v128.load32_splat(ap, 8), a3 = v128.load32_splat(ap, 12)
            c00 = f32x4.add(c00, f32x4.mul(a0, b0)); c01 = f32x4.add(c01, f32x4.mul(a0, b1))
            c10 = f32x4.add(c10, f32x4.mul(a1, b0)); c11 = f32x4.add(c11, f32x4.mul(a1, b1))
            c20 = f32x4.add(c20, f32x4.mul(a2, b0)); c21 = f32x4.add(c21, f32x4.mul(a2, b1))
            c30 = f32x4.add(c30, f32x4.mul(a3, b0)); c31 = f32x4.add(c31, f32x4.mul(a3, b1))
            bp += NR << 2
            ap += MR << 2
          }
          const j0 = p * NR
          const nj = min(NR, N - j0)
          for (let i = 0; i < ni; i++) {
            const lo = i == 0 ? c00 : i == 1 ? c10 : i == 2 ? c20 : c30
            const hi = i == 0 ? c01 : i == 1 ? c11 : i == 2 ? c21 : c31
            const row = at(c, <i64>(ib + i) * N + j0)
            if (nj == NR) {
              let r0 = lo, r1 = hi
              if (kb > 0) { r0 = f32x4.add(r0, v128.load(row)); r1 = f32x4.add(r1, v128.load(row, 16)) }
              v128.store(row, r0); v128.store(row, r1, 16)
            } else {
              for (let j = 0; j < nj; j++) {
                const v = j < 4 ? laneOf(lo, j) : laneOf(hi, j - 4)
                st(at(row, j), kb > 0 ? ld(at(row, j)) + v : v)
              }
            }
          }
        }
      }
    }
  }
}

/** Scratch floats gemm needs for N output columns. */
export function gemmScratchFloats(N: i32): i32 {
  return ((N + NR - 1) / NR) * NR * KC + MR * KC
}

// ---- softmax ---------------------------------------------------------------------------------

@inline function softmaxRow(x: usize, y: usize, n: i32, scale: f32): void {
  let mx = -Infinity as f32
  for (let j = 0; j < n; j++) mx = max(mx, ld(at(x, j)) * scale)
  if (mx == -Infinity) { for (let j = 0; j < n; j++) st(at(y, j), 0); return }
  let sum: f32 = 0
  for (let j = 0; j < n; j++) { const e = expf(ld(at(x, j)) * scale - mx); st(at(y, j), e); sum += e }
  const inv: f32 = 1 / sum
  for (let j = 0; j < n; j++) st(at(y, j), ld(at(y, j)) * inv)
}

export function softmax(x: usize, y: usize, rows: i32, cols: i32): void {
  for (let r = 0; r < rows; r++) softmaxRow(at(x, <i64>r * cols), at(y, <i64>r * cols), cols, 1)
}

// ---- fused attention (qkv [B, T, 3, H, dh], out [B, T, H, dh], probs [B, H, T, T]) ----------
// scratch: >= attentionScratchFloats(T, dh) floats.

export function attentionScratchFloats(T: i32, dh: i32): i32 {
  const dp = (dh + 3) & ~3, Tp = (T + 3) & ~3
  return 3 * T * dp + dp * Tp + 2 * T * Tp + 2 * dp
}

function gather(src: usize, rowStride: i32, T: i32, dh: i32, dp: i32, Tp: i32, rows: usize, cols: usize): void {
  for (let i = 0; i < T; i++) {
    for (let d = 0; d < dp; d++) {
      const v: f32 = d < dh ? ld(at(src, <i64>i * rowStride + d)) : 0
      if (rows) st(at(rows, <i64>i * dp + d), v)
      if (cols) st(at(cols, <i64>d * Tp + i), v)
    }
  }
}

// row[0:nPad) = a[0:dh] . M[0:dh, 0:nPad) with M [dh, Tp]
@inline function rowTimesMatrix(a: usize, M: usize, dh: i32, Tp: i32, n: i32, row: usize): void {
  for (let j = 0; j < n; j += 4) v128.store(at(row, j), f32x4.splat(0))
  for (let d = 0; d < dh; d++) {
    const ad = f32x4.splat(ld(at(a, d)))
    const m = at(M, <i64>d * Tp)
    for (let j = 0; j < n; j += 4) {
      const p = at(row, j)
      v128.store(p, f32x4.add(v128.load(p), f32x4.mul(ad, v128.load(at(m, j)))))
    }
  }
}

// out[0:dp) = sum_j w[j] X[j, 0:dp)  (X rows of dp floats)
@inline function weightedRowSum(w: usize, X: usize, dp: i32, n: i32, out: usize): void {
  for (let d = 0; d < dp; d += 4) {
    let acc = f32x4.splat(0)
    for (let j = 0; j < n; j++) acc = f32x4.add(acc, f32x4.mul(f32x4.splat(ld(at(w, j))), v128.load(at(X, <i64>j * dp + d))))
    v128.store(at(out, d), acc)
  }
}

export function attentionForward(qkv: usize, out: usize, probs: usize, B: i32, T: i32, H: i32, dh: i32, scale: f32,
  causal: bool, scratch: usize): void {
  const dModel = H * dh, rs = 3 * dModel
  const dp = (dh + 3) & ~3, Tp = (T + 3) & ~3
  const Q = scratch, V = at(Q, <i64>T * dp), Kt = at(V, <i64>T * dp), row = at(Kt, <i64>dp * Tp), o = at(row, Tp)
  for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) {
    const base = at(qkv, <i64>b * T * rs + h * dh)
    gather(base, rs, T, dh, dp, Tp, Q, 0)
    gather(at(base, dModel), rs, T, dh, dp, Tp, 0, Kt)
    gather(at(base, 2 * dModel), rs, T, dh, dp, Tp, V, 0)
    const P = at(probs, (<i64>b * H + h) * T * T)
    for (let i = 0; i < T; i++) {
      const n = causal ? i + 1 : T
      const nPad = (n + 3) & ~3
      rowTimesMatrix(at(Q, <i64>i * dp), Kt, dh, Tp, nPad, row)
      const pi = at(P, <i64>i * T)
      softmaxRow(row, pi, n, scale)
      for (let j = n; j < T; j++) st(at(pi, j), 0)
      weightedRowSum(pi, V, dp, n, o)
      const oi = at(out, (<i64>b * T + i) * dModel + h * dh)
      for (let d = 0; d < dh; d++) st(at(oi, d), ld(at(o, d)))
    }
  }
}

export function attentionBackward(qkv: usize, probs: usize, dOut: usize, dqkv: usize, B: i32, T: i32, H: i32, dh: i32,
  scale: f32, causal: bool, scratch: usize): void {
  const dModel = H * dh, rs = 3 * dModel
  const dp = (dh + 3) & ~3, Tp = (T + 3) & ~3
  const Q = scratch, K = at(Q, <i64>T * dp), dO = at(K, <i64>T * dp), Vt = at(dO, <i64>T * dp), dS = at(Vt, <i64>dp * Tp)
  const acc = at(dS, <i64>T * Tp), acc2 = at(acc, dp)
  for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) {
    const base = at(qkv, <i64>b * T * rs + h * dh), dbase = at(dqkv, <i64>b * T * rs + h * dh)
    gather(base, rs, T, dh, dp, Tp, Q, 0)
    gather(at(base, dModel), rs, T, dh, dp, Tp, K, 0)
    gather(at(base, 2 * dModel), rs, T, dh, dp, Tp, 0, Vt)
    gather(at(dOut, <i64>b * T * dModel + h * dh), dModel, T, dh, dp, Tp, dO, 0)
    const P = at(probs, (<i64>b * H + h) * T * T)
    for (let i = 0; i < T; i++) {
      const n = causal ? i + 1 : T
      const nPad = (n + 3) & ~3
      const pi = at(P, <i64>i * T), dsi = at(dS, <i64>i * Tp)
      rowTimesMatrix(at(dO, <i64>i * dp), Vt, dh, Tp, nPad, dsi)
      let dot: f32 = 0
      for (let j = 0; j < n; j++) dot += ld(at(pi, j)) * ld(at(dsi, j))
      for (let j = 0; j < n; j++) st(at(dsi, j), ld(at(pi, j)) * (ld(at(dsi, j)) - dot) * scale)
      for (let j = n; j < T; j++) st(at(dsi, j), 0)
      weightedRowSum(dsi, K, dp, n, acc) // dQ_i
      const dqi = at(dbase, <i64>i * rs)
      for (let d = 0; d < dh; d++) st(at(dqi, d), ld(at(acc, d)))
    }
    for (let j = 0; j < T; j++) {
      const i0 = causal ? j : 0
      for (let d = 0; d < dp; d += 4) {
        let dk = f32x4.splat(0), dv = f32x4.splat(0)
        for (let i = i0; i < T; i++) {
          dk = f32x4.add(dk, f32x4.mul(f32x4.splat(ld(at(dS, <i64>i * Tp + j))), v128.load(at(Q, <i64>i * dp + d))))
          dv = f32x4.add(dv, f32x4.mul(f32x4.splat(ld(at(P, <i64>i * T + j))), v128.load(at(dO, <i64>i * dp + d))))
        }
        v128.store(at(acc, d), dk)
        v128.store(at(acc2, d), dv)
      }
      const dkj = at(dbase, <i64>j * rs + dModel), dvj = at(dbase, <i64>j * rs + 2 * dModel)
      for (let d = 0; d < dh; d++) { st(at(dkj, d), ld(at(acc, d))); st(at(dvj, d), ld(at(acc2, d))) }
    }
  }
}

// ---- loss, normalisation, activations, optimizer ---------------------------------------------

@inline function weightTotal(weights: usize, rows: i32): f64 {
  let total: f64 = 0
  for (let r = 0; r < rows; r++) total += <f64>ld(at(weights, r))
  return max(total, 1e-12)
}

export function softmaxCrossEntropy(logits: usize, labels: usize, weights: usize, rows: i32, cols: i32): f64 {
  let total: f64 = 0
  for (let r = 0; r < rows; r++) {
    const w = ld(at(weights, r))
    if (w == 0) continue
    const x = at(logits, <i64>r * cols)
    let mx = -Infinity as f32
    for (let j = 0; j < cols; j++) mx = max(mx, ld(at(x, j)))
    let sum: f32 = 0
    for (let j = 0; j < cols; j++) sum += expf(ld(at(x, j)) - mx)
    total += <f64>w * <f64>(logf(sum) + mx - ld(at(x, ldi(labels, r))))
  }
  return total / weightTotal(weights, rows)
}

export function softmaxCrossEntropyBackward(logits: usize, labels: usize, weights: usize, rows: i32, cols: i32, dLoss: f32, dLogits: usize): void {
  const scale = <f32>(<f64>dLoss / weightTotal(weights, rows))
  for (let r = 0; r < rows; r++) {
    const x = at(logits, <i64>r * cols), d = at(dLogits, <i64>r * cols)
    const g = scale * ld(at(weights, r))
    if (g == 0) { for (let j = 0; j < cols; j++) st(at(d, j), 0); continue }
    softmaxRow(x, d, cols, 1)
    for (let j = 0; j < cols; j++) st(at(d, j), ld(at(d, j)) * g)
    const y = at(d, ldi(labels, r))
    st(y, ld(y) - g)
  }
}

// out[r, :] = sum_m table[idx[r, m], :]   (indices in range: checked by the caller)
export function gatherRows(table: usize, indices: usize, out: usize, n: i32, k: i32, width: i32): void {
  for (let r = 0; r < n; r++) {
    const o = at(out, <i64>r * width)
    const first = at(table, <i64>ldi(indices, <i64>r * k) * width)
    let j = 0
    for (; j + 4 <= width; j += 4) v128.store(at(o, j), v128.load(at(first, j)))
    for (; j < width; j++) st(at(o, j), ld(at(first, j)))
    for (let m = 1; m < k; m++) {
      const src = at(table, <i64>ldi(indices, <i64>r * k + m) * width)
      addRowsInPlace(o, src, width)
    }
  }
}

// out [rows, width] = 0; out[idx[r, m], :] += updates[r, :]
export function scatterRows(updates: usize, indices: usize, out: usize, n: i32, k: i32, width: i32, rows: i32): void {
  for (let i: i64 = 0; i < <i64>rows * width; i++) st(at(out, i), 0)
  for (let r = 0; r < n; r++) {
    const src = at(updates, <i64>r * width)
    for (let m = 0; m < k; m++) addRowsInPlace(at(out, <i64>ldi(indices, <i64>r * k + m) * width), src, width)
  }
}

@inline function addRowsInPlace(dst: usize, src: usize, n: i32): void {
  let e = 0
  for (; e + 4 <= n; e += 4) v128.store(at(dst, e), f32x4.add(v128.load(at(dst, e)), v128.load(at(src, e))))
  for (; e < n; e++) st(at(dst, e), ld(at(dst, e)) + ld(at(src, e)))
}

export function addBias(C: usize, rows: i32, cols: i32, bias: usize): void {
  for (let r = 0; r < rows; r++) {
    const c = at(C, <i64>r * cols)
    let j = 0
    for (; j + 4 <= cols; j += 4) v128.store(at(c, j), f32x4.add(v128.load(at(c, j)), v128.load(at(bias, j))))
    for (; j < cols; j++) st(at(c, j), ld(at(c, j)) + ld(at(bias, j)))
  }
}

const GELU_C: f32 = 0.7978845608028654
const GELU_A: f32 = 0.044715
@inline function tanhf(u: f32): f32 { return 1 - 2 / (expf(2 * u) + 1) }

export function geluForward(x: usize, y: usize, n: i32): void {
  for (let i = 0; i < n; i++) { const v = ld(at(x, i)); st(at(y, i), 0.5 * v * (1 + tanhf(GELU_C * (v + GELU_A * v * v * v)))) }
}

export function geluBackward(x: usize, dy: usize, dx: usize, n: i32): void {
  for (let i = 0; i < n; i++) {
    const v = ld(at(x, i)), t = tanhf(GELU_C * (v + GELU_A * v * v * v))
    st(at(dx, i), ld(at(dy, i)) * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * GELU_C * (1 + 3 * GELU_A * v * v)))
  }
}

export function columnSum(x: usize, out: usize, rows: i32, cols: i32): void {
  for (let j = 0; j < cols; j++) st(at(out, j), 0)
  for (let r = 0; r < rows; r++) {
    const xr = at(x, <i64>r * cols)
    let j = 0
    for (; j + 4 <= cols; j += 4) v128.store(at(out, j), f32x4.add(v128.load(at(out, j)), v128.load(at(xr, j))))
    for (; j < cols; j++) st(at(out, j), ld(at(out, j)) + ld(at(xr, j)))
  }
}

export function layerNormForward(x: usize, g: usize, b: usize, y: usize, mean: usize, rstd: usize, rows: i32, cols: i32, eps: f32): void {
  for (let r = 0; r < rows; r++) {
    const xr = at(x, <i64>r * cols), yr = at(y, <i64>r * cols)
    let s: f32 = 0
    for (let j = 0; j < cols; j++) s += ld(at(xr, j))
    const mu = s / <f32>cols
    let ss: f32 = 0
    for (let j = 0; j < cols; j++) { const c = ld(at(xr, j)) - mu; ss += c * c }
    const rs: f32 = 1 / Mathf.sqrt(ss / <f32>cols + eps)
    st(at(mean, r), mu); st(at(rstd, r), rs)
    for (let j = 0; j < cols; j++) st(at(yr, j), (ld(at(xr, j)) - mu) * rs * ld(at(g, j)) + (b ? ld(at(b, j)) : 0))
  }
}

export function layerNormBackward(x: usize, g: usize, mean: usize, rstd: usize, dy: usize, dx: usize, dg: usize, db: usize, rows: i32, cols: i32): void {
  for (let j = 0; j < cols; j++) { st(at(dg, j), 0); if (db) st(at(db, j), 0) }
  for (let r = 0; r < rows; r++) {
    const xr = at(x, <i64>r * cols), dyr = at(dy, <i64>r * cols), dxr = at(dx, <i64>r * cols)
    const mu = ld(at(mean, r)), rs = ld(at(rstd, r))
    let sumD: f32 = 0, sumDX: f32 = 0
    for (let j = 0; j < cols; j++) {
      const xh = (ld(at(xr, j)) - mu) * rs, dyj = ld(at(dyr, j)), d = dyj * ld(at(g, j))
      sumD += d; sumDX += d * xh
      st(at(dg, j), ld(at(dg, j)) + dyj * xh)
      if (db) st(at(db, j), ld(at(db, j)) + dyj)
    }
    const mD = sumD / <f32>cols, mDX = sumDX / <f32>cols
    for (let j = 0; j < cols; j++) {
      const xh = (ld(at(xr, j)) - mu) * rs
      st(at(dxr, j), rs * (ld(at(dyr, j)) * ld(at(g, j)) - mD - xh * mDX))
    }
  }
}

// Bias corrections come from the caller (Mathf.pow would bring lookup tables):
// stepSize = lr / (1 - beta1^t), rbc2 = 1 / sqrt(1 - beta2^t), decay = 1 - lr wd.
export function adamw(p: usize, g: usize, m: usize, v: usize, n: i32, stepSize: f32, rbc2: f32, beta1: f32, beta2: f32, eps: f32, decay: f32): void {
  for (let i = 0; i < n; i++) {
    const gi = ld(at(g, i))
    const mi = beta1 * ld(at(m, i)) + (1 - beta1) * gi
    const vi = beta2 * ld(at(v, i)) + (1 - beta2) * gi * gi
    st(at(m, i), mi); st(at(v, i), vi)
    st(at(p, i), ld(at(p, i)) * decay - stepSize * mi / (Mathf.sqrt(vi) * rbc2 + eps))
  }
}

// ---- minimal-model attention on one-hot inputs (gather form) ----------------------------------
// wq [H, D, D], wv [H, D, dV]; tokens [B, T]; logits [B, T - from, c] (queries t >= from);
// probs [B, H, T, T] (rows t < from zero).
// scratch >= oneHotScratchFloats(T, D, c) floats.

export function oneHotScratchFloats(T: i32, D: i32, c: i32): i32 {
  return T * D + 2 * T * c + T
}

@inline function addRows(dst: usize, a: usize, b: usize, n: i32): void {
  let e = 0
  for (; e + 4 <= n; e += 4) v128.store(at(dst, e), f32x4.add(v128.load(at(a, e)), v128.load(at(b, e))))
  for (; e < n; e++) st(at(dst, e), ld(at(a, e)) + ld(at(b, e)))
}

export function oneHotAttentionForward(tokens: usize, wq: usize, wv: usize, logits: usize, probs: usize,
  B: i32, T: i32, H: i32, D: i32, dV: i32, d: i32, c: i32, scale: f32, from: i32, scratch: usize): void {
  const q = scratch, v = at(q, <i64>T * D), row = at(v, <i64>T * c)
  const To = T - from // output positions per sequence
  for (let i: i64 = 0; i < <i64>B * To * c; i++) st(at(logits, i), 0)
  for (let b = 0; b < B; b++) {
    const tok = at(tokens, <i64>b * T)
    for (let h = 0; h < H; h++) {
      const wq0 = at(wq, <i64>h * D * D), wv0 = at(wv, <i64>h * D * dV)
      for (let t = 0; t < T; t++) {
        const tk = ldi(tok, t)
        addRows(at(q, <i64>t * D), at(wq0, <i64>tk * D), at(wq0, <i64>(d + t) * D), D)
        addRows(at(v, <i64>t * c), at(wv0, <i64>tk * dV), at(wv0, <i64>(d + t) * dV), c)
      }
      const P = at(probs, (<i64>b * H + h) * T * T)
      for (let i = 0; i < from * T; i++) st(at(P, i), 0)
      for (let t = from; t < T; t++) {
        const qt = at(q, <i64>t * D)
        for (let s = 0; s <= t; s++) st(at(row, s), ld(at(qt, ldi(tok, s))) + ld(at(qt, d + s)))
        const pt = at(P, <i64>t * T)
        softmaxRow(row, pt, t + 1, scale)
        const out = at(logits, (<i64>b * To + t - from) * c)
        for (let s = 0; s <= t; s++) {
          const av = f32x4.splat(ld(at(pt, s))), a = ld(at(pt, s))
          const vs = at(v, <i64>s * c)
          let e = 0
          for (; e + 4 <= c; e += 4) v128.store(at(out, e), f32x4.add(v128.load(at(out, e)), f32x4.mul(av, v128.load(at(vs, e)))))
          for (; e < c; e++) st(at(out, e), ld(at(out, e)) + a * ld(at(vs, e)))
        }
        for (let s = t + 1; s < T; s++) st(at(pt, s), 0)
      }
    }
  }
}

export function oneHotAttentionBackward(tokens: usize, wq: usize, wv: usize, probs: usize, dLogits: usize, dwq: usize,
  dwv: usize, B: i32, T: i32, H: i32, D: i32, dV: i32, d: i32, c: i32, scale: f32, from: i32, scratch: usize): void {
  const To = T - from
  for (let i: i64 = 0; i < <i64>H * D * D; i++) st(at(dwq, i), 0)
  for (let i: i64 = 0; i < <i64>H * D * dV; i++) st(at(dwv, i), 0)
  const dq = scratch, v = at(dq, <i64>T * D), dv = at(v, <i64>T * c), dA = at(dv, <i64>T * c)
  for (let b = 0; b < B; b++) {
    const tok = at(tokens, <i64>b * T)
    for (let h = 0; h < H; h++) {
      const wv0 = at(wv, <i64>h * D * dV)
      for (let t = 0; t < T; t++) addRows(at(v, <i64>t * c), at(wv0, <i64>ldi(tok, t) * dV), at(wv0, <i64>(d + t) * dV), c)
      for (let i = 0; i < T * c; i++) st(at(dv, i), 0)
      for (let i = 0; i < T * D; i++) st(at(dq, i), 0)
      const P = at(probs, (<i64>b * H + h) * T * T)
      for (let t = from; t < T; t++) {
        const go = at(dLogits, (<i64>b * To + t - from) * c), pt = at(P, <i64>t * T)
        let dot: f32 = 0
        for (let s = 0; s <= t; s++) {
          const p = ld(at(pt, s)), vs = at(v, <i64>s * c), dvs = at(dv, <i64>s * c), pv = f32x4.splat(p)
          let gv = f32x4.splat(0), e = 0
          for (; e + 4 <= c; e += 4) {
            const g4 = v128.load(at(go, e))
            gv = f32x4.add(gv, f32x4.mul(g4, v128.load(at(vs, e))))
            v128.store(at(dvs, e), f32x4.add(v128.load(at(dvs, e)), f32x4.mul(pv, g4)))
          }
          let g = f32x4.extract_lane(gv, 0) + f32x4.extract_lane(gv, 1) + f32x4.extract_lane(gv, 2) + f32x4.extract_lane(gv, 3)
          for (; e < c; e++) { const ge = ld(at(go, e)); g += ge * ld(at(vs, e)); st(at(dvs, e), ld(at(dvs, e)) + p * ge) }
          st(at(dA, s), g); dot += p * g
        }
        const dqt = at(dq, <i64>t * D)
        for (let s = 0; s <= t; s++) {
          const g = ld(at(pt, s)) * (ld(at(dA, s)) - dot) * scale
          const c1 = at(dqt, ldi(tok, s)), c2 = at(dqt, d + s)
          st(c1, ld(c1) + g); st(c2, ld(c2) + g)
        }
      }
      const gq0 = at(dwq, <i64>h * D * D), gv0 = at(dwv, <i64>h * D * dV)
      for (let t = 0; t < T; t++) {
        const tk = ldi(tok, t)
        const dqt = at(dq, <i64>t * D), ga = at(gq0, <i64>tk * D), gp = at(gq0, <i64>(d + t) * D)
        addRows(ga, ga, dqt, D); addRows(gp, gp, dqt, D)
        const dvt = at(dv, <i64>t * c), wa = at(gv0, <i64>tk * dV), wp = at(gv0, <i64>(d + t) * dV)
        addRows(wa, wa, dvt, c); addRows(wp, wp, dvt, c)
      }
    }
  }
}

// ---- sparse attention over key spans (provider.ts: KernelProvider.sparseAttention) ----------
// q [heads, rows, dh], k [heads / group, keys, dh], v [.., keys, dv], out [heads, rows, dv]. Per
// (head, tile): keys in ascending chunks of up to SCHUNK gathered from the tile's spans, an online
// softmax per row (FlashAttention, arXiv 2205.14135, Algorithm 1). scratch: sparseScratchFloats.

const SCHUNK: i32 = 64

export function sparseScratchFloats(dh: i32, dv: i32, tileRows: i32): i32 {
  const dp = (dh + 3) & ~3, dvp = (dv + 3) & ~3
  return dp * SCHUNK + tileRows * dp + SCHUNK + 2 * tileRows + tileRows * dvp + SCHUNK
}

function sparseTile(q: usize, k: usize, v: usize, out: usize, spans: usize, s0: i32, s1: i32, r0: i32, r1: i32,
  dh: i32, dv: i32, scale: f32, causalOffset: i32, scratch: usize): void {
  const n = r1 - r0
  const dp = (dh + 3) & ~3, dvp = (dv + 3) & ~3
  const Kt = scratch, Q = at(Kt, <i64>dp * SCHUNK), S = at(Q, <i64>n * dp), M = at(S, SCHUNK), L = at(M, n)
  const A = at(L, n), I = at(A, <i64>n * dvp)
  const packed = n >= 4
  for (let r = 0; r < n; r++) {
    const qr = at(Q, <i64>r * dp)
    for (let d = 0; d < dp; d++) st(at(qr, d), d < dh ? ld(at(q, <i64>(r0 + r) * dh + d)) * scale : 0)
    st(at(M, r), -Infinity)
    st(at(L, r), 0)
    for (let d = 0; d < dvp; d++) st(at(A, <i64>r * dvp + d), 0)
  }
  const lastKey = <i64>r1 - 1 + causalOffset
  let span = s0
  let next: i64 = s0 < s1 ? <i64>ldi(spans, 2 * s0) : 0
  for (;;) {
    let c = 0
    while (c < SCHUNK && span < s1) {
      let stop = <i64>ldi(spans, 2 * span + 1)
      if (stop > lastKey + 1) stop = lastKey + 1
      if (next >= stop) {
        span++
        if (span < s1) next = <i64>ldi(spans, 2 * span)
        continue
      }
      store<i32>(at(I, c), <i32>next)
      next++
      c++
    }
    if (c == 0) break
    if (packed) {
      for (let j = 0; j < c; j++) {
        const kr = at(k, <i64>ldi(I, j) * dh)
        for (let d = 0; d < dh; d++) st(at(Kt, <i64>d * SCHUNK + j), ld(at(kr, d)))
      }
      for (let j = c; j < ((c + 3) & ~3); j++) for (let d = 0; d < dh; d++) st(at(Kt, <i64>d * SCHUNK + j), 0)
    }
    for (let r = 0; r < n; r++) {
      const limit = <i64>(r0 + r) + causalOffset
      let cn = c
      while (cn > 0 && <i64>ldi(I, cn - 1) > limit) cn--
      if (cn == 0) continue
      const qr = at(Q, <i64>r * dp)
      if (packed) {
        rowTimesMatrix(qr, Kt, dh, SCHUNK, (cn + 3) & ~3, S)
      } else {
        for (let j = 0; j < cn; j++) {
          const kr = at(k, <i64>ldi(I, j) * dh)
          let acc = f32x4.splat(0)
          let d = 0
          for (; d + 4 <= dh; d += 4) acc = f32x4.add(acc, f32x4.mul(v128.load(at(qr, d)), v128.load(at(kr, d))))
          let dot = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 2) +
            f32x4.extract_lane(acc, 3)
          for (; d < dh; d++) dot += ld(at(qr, d)) * ld(at(kr, d))
          st(at(S, j), dot)
        }
      }
      const m0 = ld(at(M, r))
      let mx = m0
      for (let j = 0; j < cn; j++) mx = max(mx, ld(at(S, j)))
      const ar = at(A, <i64>r * dvp)
      if (mx != m0) {
        const correction: f32 = m0 == -Infinity ? 0 : expf(m0 - mx)
        st(at(L, r), ld(at(L, r)) * correction)
        const cv = f32x4.splat(correction)
        for (let d = 0; d < dvp; d += 4) v128.store(at(ar, d), f32x4.mul(v128.load(at(ar, d)), cv))
        st(at(M, r), mx)
      }
      let sum: f32 = 0
      for (let j = 0; j < cn; j++) { const e = expf(ld(at(S, j)) - mx); st(at(S, j), e); sum += e }
      st(at(L, r), ld(at(L, r)) + sum)
      let d = 0
      for (; d + 4 <= dv; d += 4) {
        let acc = v128.load(at(ar, d))
        for (let j = 0; j < cn; j++)
          acc = f32x4.add(acc, f32x4.mul(f32x4.splat(ld(at(S, j))), v128.load(at(v, <i64>ldi(I, j) * dv + d))))
        v128.store(at(ar, d), acc)
      }
      for (; d < dv; d++) {
        let acc = ld(at(ar, d))
        for (let j = 0; j < cn; j++) acc += ld(at(S, j)) * ld(at(v, <i64>ldi(I, j) * dv + d))
        st(at(ar, d), acc)
      }
    }
  }
  for (let r = 0; r < n; r++) {
    const l = ld(at(L, r))
    const inv: f32 = l > 0 ? 1 / l : 0
    const o = at(out, <i64>(r0 + r) * dv)
    for (let d = 0; d < dv; d++) st(at(o, d), ld(at(A, <i64>r * dvp + d)) * inv)
  }
}

export function sparseAttention(q: usize, k: usize, v: usize, out: usize, tileStarts: usize, spans: usize,
  heads: i32, group: i32, rows: i32, keys: i32, dh: i32, dv: i32, tileRows: i32, scale: f32, causalOffset: i32,
  scratch: usize): void {
  const tiles = (rows + tileRows - 1) / tileRows
  for (let head = 0; head < heads; head++) {
    const kv = head / group
    for (let t = 0; t < tiles; t++) {
      const u = head * tiles + t
      const r0 = t * tileRows, r1 = min(rows, r0 + tileRows)
      sparseTile(at(q, <i64>head * rows * dh), at(k, <i64>kv * keys * dh), at(v, <i64>kv * keys * dv),
        at(out, <i64>head * rows * dv), spans, ldi(tileStarts, u), ldi(tileStarts, u + 1), r0, r1, dh, dv, scale,
        causalOffset, scratch)
    }
  }
}

// ---- Quest's page selection (provider.ts: KernelProvider.pageSelect) ----------------------------
// q [heads, dh], bounds [heads / group, 2, dh, capacity] (page minima then maxima, d-major), chosen
// [heads, budget]: the min(budget, pages) pages of largest sum_d max(q_d min, q_d max), ascending
// (ties to the lower page, NaN last); with share a GQA group's scores are summed and its heads get
// the same pages. Summed d by d over four pages at a time (the native and JavaScript order).
// scratch: pageScratchFloats(pages).

export function pageScratchFloats(pages: i32): i32 {
  return 4 * ((pages + 3) & ~3)
}

function pageScoresRow(q: usize, lo0: usize, hi0: usize, pages: i32, capacity: i32, dh: i32, score: usize): void {
  const p4 = (pages + 3) & ~3
  for (let p = 0; p < p4; p++) st(at(score, p), 0)
  for (let d = 0; d < dh; d++) {
    const x = ld(at(q, d))
    const xv = f32x4.splat(x)
    // max(x lo, x hi) = x (x < 0 ? lo : hi) bit for bit when lo <= hi: one bound read per dimension
    const b = at(x < 0 ? lo0 : hi0, <i64>d * capacity)
    let p = 0
    for (; p + 4 <= pages; p += 4) {
      v128.store(at(score, p), f32x4.add(v128.load(at(score, p)), f32x4.mul(xv, v128.load(at(b, p)))))
    }
    for (; p < pages; p++) st(at(score, p), ld(at(score, p)) + x * ld(at(b, p)))
  }
}

/** The value of rank `rank` (ascending) among values[0 .. count) (no NaN), by quickselect (reorders). */
function kthSmallestF32(values: usize, count: i32, rank: i32): f32 {
  let lo = 0, hi = count - 1
  while (hi > lo) {
    const pivot = ld(at(values, (lo + hi) >> 1))
    let i = lo, j = hi
    while (i <= j) {
      while (ld(at(values, i)) < pivot) i++
      while (ld(at(values, j)) > pivot) j--
      if (i <= j) {
        const t = ld(at(values, i))
        st(at(values, i), ld(at(values, j)))
        st(at(values, j), t)
        i++
        j--
      }
    }
    if (rank <= j) hi = j
    else if (rank >= i) lo = i
    else return ld(at(values, rank))
  }
  return ld(at(values, lo))
}

function topKAscending(score: usize, n: i32, k: i32, out: usize, numbers: usize, chosen: usize): void {
  if (k > n) k = n
  if (k < 0) k = 0
  let m = 0
  for (let i = 0; i < n; i++) {
    store<i32>(at(chosen, i), 0)
    const x = ld(at(score, i))
    if (x == x) { st(at(numbers, m), x); m++ }
  }
  if (k >= m) {
    let nans = k - m
    for (let i = 0; i < n; i++) {
      const x = ld(at(score, i))
      if (x == x) store<i32>(at(chosen, i), 1)
      else if (nans > 0) { store<i32>(at(chosen, i), 1); nans-- }
    }
  } else if (k > 0) {
    const threshold = kthSmallestF32(numbers, m, m - k)
    let left = k
    for (let i = 0; i < n; i++) if (ld(at(score, i)) > threshold) { store<i32>(at(chosen, i), 1); left-- }
    for (let i = 0; i < n && left > 0; i++) if (ld(at(score, i)) == threshold) { store<i32>(at(chosen, i), 1); left-- }
  }
  let c = 0
  for (let i = 0; i < n; i++) if (ldi(chosen, i) != 0) { store<i32>(at(out, c), i); c++ }
}

export function pageSelect(q: usize, bounds: usize, chosen: usize, heads: i32, group: i32, pages: i32, capacity: i32,
  dh: i32, budget: i32, share: i32, scratch: usize): void {
  const p4 = (pages + 3) & ~3
  const score = scratch, sum = at(scratch, p4), numbers = at(sum, p4), marks = at(numbers, p4)
  const k = min(budget, pages)
  const rowFloats = <i64>2 * dh * capacity
  const kvRows = heads / group
  if (share == 0) {
    for (let h = 0; h < heads; h++) {
      const lo = at(bounds, <i64>(h / group) * rowFloats), hi = at(lo, <i64>dh * capacity)
      pageScoresRow(at(q, <i64>h * dh), lo, hi, pages, capacity, dh, score)
      topKAscending(score, pages, k, at(chosen, <i64>h * budget), numbers, marks)
    }
    return
  }
  for (let kv = 0; kv < kvRows; kv++) {
    const lo = at(bounds, <i64>kv * rowFloats), hi = at(lo, <i64>dh * capacity)
    for (let p = 0; p < p4; p++) st(at(sum, p), 0)
    for (let g = 0; g < group; g++) {
      pageScoresRow(at(q, <i64>(kv * group + g) * dh), lo, hi, pages, capacity, dh, score)
      for (let p = 0; p < pages; p++) st(at(sum, p), ld(at(sum, p)) + ld(at(score, p)))
    }
    const first = at(chosen, <i64>kv * group * budget)
    topKAscending(sum, pages, k, first, numbers, marks)
    for (let g = 1; g < group; g++) memory.copy(at(first, <i64>g * budget), first, <usize>k << 2)
  }
}

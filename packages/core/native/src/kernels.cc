// attnlab native kernels (see kernels.h).
//
// Vectorisation is left to the compiler: GCC/Clang vector extensions (`v16`, 16 floats) lower to
// one AVX-512 register, two AVX2 registers or four SSE registers depending on the target. On
// x86-64 with GCC the hot functions are compiled once per x86-64 level (target_clones: v4 =
// AVX-512, v3 = AVX2+FMA, baseline) and the best clone is picked at load time, so one binary runs
// on any x86-64 machine (no -march=native: a build survives a change of CPU).
//
// Denormals: exp() returns exactly 0 below -87.3 and the N-API layer runs every kernel with
// FTZ/DAZ set (restored afterwards): denormal operands make x86 arithmetic 30-100x slower, and
// near-sparse attention produces them.
#include "kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(ATTN_NO_CLONES)
#define ATTN_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define ATTN_HAVE_CLONES 1
#else
#define ATTN_MULTIVERSION
#endif

namespace attn {

namespace {

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));  // unaligned access
typedef int32_t v16i __attribute__((vector_size(64)));

constexpr int MR = 8;    // rows of C per micro-tile
constexpr int NR = 32;   // columns of C per micro-tile (two v16)
constexpr int KC = 256;  // depth of a packed block

int gThreads = 1;

#if defined(__x86_64__) || defined(__i386__)
// OpenMP workers have their own MXCSR: give them FTZ/DAZ like the calling thread (addon.cc).
inline void workerFtz() { _mm_setcsr(_mm_getcsr() | 0x8040); }
#else
inline void workerFtz() {}
#endif

// Packs op(B)[kb:kb+kc, :] into panels of NR columns: Bp[panel][k][NR], zero padded.
void packB(const float* B, bool transB, int K, int N, int kb, int kc, float* Bp) {
  const int panels = (N + NR - 1) / NR;
  for (int p = 0; p < panels; p++) {
    float* dst = Bp + (int64_t)p * kc * NR;
    const int j0 = p * NR, nj = std::min(NR, N - j0);
    for (int k = 0; k < kc; k++) {
      float* row = dst + (int64_t)k * NR;
      if (!transB) {
        const float* src = B + (int64_t)(kb + k) * N + j0;
        for (int j = 0; j < nj; j++) row[j] = src[j];
      } else {
        for (int j = 0; j < nj; j++) row[j] = B[(int64_t)(j0 + j) * K + kb + k];
      }
      for (int j = nj; j < NR; j++) row[j] = 0.f;
    }
  }
}

// Packs op(A)[ib:ib+MR, kb:kb+kc] as Ap[k][MR], zero padded.
void packA(const float* A, bool transA, int M, int K, int ib, int kb, int kc, float* Ap) {
  const int ni = std::min(MR, M - ib);
  if (transA) {
    for (int k = 0; k < kc; k++) {
      const float* src = A + (int64_t)(kb + k) * M + ib;
      float* dst = Ap + (int64_t)k * MR;
      for (int i = 0; i < ni; i++) dst[i] = src[i];
      for (int i = ni; i < MR; i++) dst[i] = 0.f;
    }
  } else {
    for (int i = 0; i < ni; i++) {
      const float* src = A + (int64_t)(ib + i) * K + kb;
      for (int k = 0; k < kc; k++) Ap[(int64_t)k * MR + i] = src[k];
    }
    for (int i = ni; i < MR; i++)
      for (int k = 0; k < kc; k++) Ap[(int64_t)k * MR + i] = 0.f;
  }
}

// acc[MR][NR] = Ap^T Bp over kc. Sixteen v16 accumulators stay in registers on AVX-512.
inline __attribute__((always_inline)) void microKernel(int kc, const float* __restrict Ap,
                                                        const float* __restrict Bp,
                                                        float* __restrict acc) {
  v16 c[MR][2];
  for (int i = 0; i < MR; i++) c[i][0] = c[i][1] = v16{};
  for (int k = 0; k < kc; k++) {
    const v16 b0 = *(const v16u*)(Bp + k * NR);
    const v16 b1 = *(const v16u*)(Bp + k * NR + 16);
    const float* a = Ap + k * MR;
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      c[i][0] += a[i] * b0;
      c[i][1] += a[i] * b1;
    }
  }
  for (int i = 0; i < MR; i++) {
    *(v16u*)(acc + i * NR) = c[i][0];
    *(v16u*)(acc + i * NR + 16) = c[i][1];
  }
}

// One row block [ib, ib+MR) of C for one packed depth block (first: store, else accumulate).
ATTN_MULTIVERSION
void gemmRowBlock(const float* A, bool transA, int M, int N, int K, int ib, int kb, int kc,
                  const float* Bp, float* C, bool first, float* Ap) {
  packA(A, transA, M, K, ib, kb, kc, Ap);
  alignas(64) float acc[MR * NR];
  const int panels = (N + NR - 1) / NR;
  const int ni = std::min(MR, M - ib);
  for (int p = 0; p < panels; p++) {
    microKernel(kc, Ap, Bp + (int64_t)p * kc * NR, acc);
    const int j0 = p * NR, nj = std::min(NR, N - j0);
    for (int i = 0; i < ni; i++) {
      float* c = C + (int64_t)(ib + i) * N + j0;
      const float* a = acc + i * NR;
      if (first) {
        for (int j = 0; j < nj; j++) c[j] = a[j];
      } else {
        for (int j = 0; j < nj; j++) c[j] += a[j];
      }
    }
  }
}

thread_local std::vector<float> tlsA, tlsB;

void gemmOne(bool transA, bool transB, int M, int N, int K, const float* A, const float* B,
             float* C, bool parallelRows) {
  if (K == 0) {
    std::fill(C, C + (int64_t)M * N, 0.f);
    return;
  }
  const int panels = (N + NR - 1) / NR;
  const int blocks = (M + MR - 1) / MR;
  // One parallel region per product (not one per depth block): every thread packs B itself and
  // keeps the same static share of row blocks for every depth block, so no barrier is needed
  // between blocks and each element of C is computed by one thread in a fixed order (the result
  // does not depend on the thread count).
  const bool parallel = parallelRows && gThreads > 1 && blocks >= 2 * gThreads;
#pragma omp parallel num_threads(gThreads) if (parallel)
  {
    workerFtz();
    tlsB.resize((size_t)panels * KC * NR);
    tlsA.resize((size_t)MR * KC);
    float* Bp = tlsB.data();
    for (int kb = 0; kb < K; kb += KC) {
      const int kc = std::min(KC, K - kb);
      packB(B, transB, K, N, kb, kc, Bp);
#pragma omp for schedule(static) nowait
      for (int blk = 0; blk < blocks; blk++) {
        gemmRowBlock(A, transA, M, N, K, blk * MR, kb, kc, Bp, C, kb == 0, tlsA.data());
      }
    }
  }
}

// exp(x) for x <= 88.7 (Cephes-style range reduction + degree-6 polynomial, ~2 ulp), branch-free
// so loops over it vectorise. Exactly 0 below -87.3 (never a denormal).
inline float expApprox(float x) {
  const bool under = x < -87.3f;
  x = std::max(x, -87.3f);
  x = std::min(x, 88.7f);
  // Round to nearest by adding and subtracting 1.5 * 2^23 (no floor(): a libm call on baseline x86-64).
  const float magic = 12582912.f;
  const float n = (x * 1.44269504088896341f + magic) - magic;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.f;
  const int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return under ? 0.f : y * scale;
}

// The same exp on 16 lanes.
inline __attribute__((always_inline)) v16 expV(v16 x) {
  const v16 lo = v16{} - 87.3f, hi = v16{} + 88.7f;
  const auto under = x < lo;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const float magic = 12582912.f;  // 1.5 * 2^23: adding and subtracting it rounds to nearest
  const v16 n = (x * 1.44269504088896341f + magic) - magic;
  const v16 r = x - n * 0.693359375f + n * 2.12194440e-4f;
  v16 p = v16{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const v16 y = p * r * r + r + 1.f;
  const v16i bits = (__builtin_convertvector(n, v16i) + 127) << 23;
  const v16 e = y * (v16)bits;
  return under ? v16{} : e;
}

inline float hmax(v16 v) {
  float m = v[0];
  for (int i = 1; i < 16; i++) m = std::max(m, v[i]);
  return m;
}
inline float hsum(v16 v) {
  float s = 0.f;
  for (int i = 0; i < 16; i++) s += v[i];
  return s;
}

// In place: row[0:n) = softmax(scale * row[0:n)); row[n:nPad) = 0, nPad = n rounded up to 16.
inline __attribute__((always_inline)) void softmaxRowPadded(float* row, int n, float scale) {
  const int nPad = (n + 15) / 16 * 16;
  for (int j = n; j < nPad; j++) row[j] = -INFINITY;
  v16 m = v16{} - INFINITY;
  for (int j = 0; j < nPad; j += 16) {
    const v16 s = *(v16u*)(row + j) * scale;
    m = s > m ? s : m;
  }
  const float mx = hmax(m);
  if (mx == -INFINITY) {
    for (int j = 0; j < nPad; j++) row[j] = 0.f;
    return;
  }
  v16 sum = {};
  for (int j = 0; j < nPad; j += 16) {
    v16 e = expV(*(v16u*)(row + j) * scale - mx);
    if (j + 16 > n) {
      for (int l = n - j; l < 16; l++) e[l] = 0.f;
    }
    *(v16u*)(row + j) = e;
    sum += e;
  }
  const float inv = 1.f / hsum(sum);
  for (int j = 0; j < nPad; j += 16) *(v16u*)(row + j) *= inv;
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

inline float tanhApprox(float u) { return 1.f - 2.f / (expApprox(2.f * u) + 1.f); }

}  // namespace

void setThreads(int n) { gThreads = std::max(1, n); }
int getThreads() { return gThreads; }
bool haveOpenMP() {
#ifdef _OPENMP
  return true;
#else
  return false;
#endif
}

const char* cpuLevel() {
#if defined(ATTN_HAVE_CLONES)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "x86-64-v4";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "x86-64-v3";
  return "baseline";
#elif defined(__x86_64__)
  return "baseline (no multiversioning)";
#else
  return "generic";
#endif
}

void gemm(bool transA, bool transB, int batch, int M, int N, int K, const float* A, int64_t strideA,
          const float* B, int64_t strideB, float* C) {
  if (batch == 1) {
    gemmOne(transA, transB, M, N, K, A, B, C, true);
    return;
  }
#pragma omp parallel for schedule(static) if (gThreads > 1) num_threads(gThreads)
  for (int b = 0; b < batch; b++) {
    workerFtz();
    gemmOne(transA, transB, M, N, K, A + b * strideA, B + b * strideB, C + (int64_t)b * M * N, false);
  }
}

ATTN_MULTIVERSION
void softmaxRows(const float* x, float* y, int64_t rows, int cols) {
  for (int64_t r = 0; r < rows; r++) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float mx = -INFINITY;
    for (int j = 0; j < cols; j++) mx = std::max(mx, xr[j]);
    if (mx == -INFINITY) {
      for (int j = 0; j < cols; j++) yr[j] = 0.f;
      continue;
    }
    // Store, then reduce: GCC does not vectorise a store fused with a reduction under omp simd.
#pragma omp simd
    for (int j = 0; j < cols; j++) yr[j] = expApprox(xr[j] - mx);
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < cols; j++) sum += yr[j];
    const float inv = 1.f / sum;
#pragma omp simd
    for (int j = 0; j < cols; j++) yr[j] *= inv;
  }
}

ATTN_MULTIVERSION
void gatherRows(const float* table, const int32_t* indices, float* out, int64_t n, int k, int width) {
  for (int64_t r = 0; r < n; r++) {
    float* o = out + r * width;
    const float* first = table + (int64_t)indices[r * k] * width;
#pragma omp simd
    for (int j = 0; j < width; j++) o[j] = first[j];
    for (int m = 1; m < k; m++) {
      const float* src = table + (int64_t)indices[r * k + m] * width;
#pragma omp simd
      for (int j = 0; j < width; j++) o[j] += src[j];
    }
  }
}

ATTN_MULTIVERSION
void scatterRows(const float* updates, const int32_t* indices, float* out, int64_t n, int k, int width,
                 int64_t rows) {
  std::fill(out, out + rows * width, 0.f);
  for (int64_t r = 0; r < n; r++) {
    const float* src = updates + r * width;
    for (int m = 0; m < k; m++) {
      float* o = out + (int64_t)indices[r * k + m] * width;
#pragma omp simd
      for (int j = 0; j < width; j++) o[j] += src[j];
    }
  }
}

ATTN_MULTIVERSION
void addBias(float* C, int64_t rows, int cols, const float* bias) {
  for (int64_t r = 0; r < rows; r++) {
    float* c = C + r * cols;
#pragma omp simd
    for (int j = 0; j < cols; j++) c[j] += bias[j];
  }
}

ATTN_MULTIVERSION
void columnSum(const float* x, float* out, int64_t rows, int cols) {
  for (int j = 0; j < cols; j++) out[j] = 0.f;
  for (int64_t r = 0; r < rows; r++) {
    const float* xr = x + r * cols;
#pragma omp simd
    for (int j = 0; j < cols; j++) out[j] += xr[j];
  }
}

ATTN_MULTIVERSION
void geluForward(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + tanhApprox(kGeluC * (v + kGeluA * v * v * v)));
  }
}

ATTN_MULTIVERSION
void geluBackward(const float* x, const float* dy, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i];
    const float t = tanhApprox(kGeluC * (v + kGeluA * v * v * v));
    const float d = 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * kGeluC * (1.f + 3.f * kGeluA * v * v);
    dx[i] = dy[i] * d;
  }
}

ATTN_MULTIVERSION
void layerNormForward(const float* x, const float* g, const float* b, float* y, float* mean,
                      float* rstd, int64_t rows, int cols, float eps) {
  for (int64_t r = 0; r < rows; r++) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < cols; j++) s += xr[j];
    const float mu = s / cols;
    float ss = 0.f;
#pragma omp simd reduction(+ : ss)
    for (int j = 0; j < cols; j++) ss += (xr[j] - mu) * (xr[j] - mu);
    const float rs = 1.f / std::sqrt(ss / cols + eps);
    mean[r] = mu;
    rstd[r] = rs;
    if (b != nullptr) {
#pragma omp simd
      for (int j = 0; j < cols; j++) yr[j] = (xr[j] - mu) * rs * g[j] + b[j];
    } else {
#pragma omp simd
      for (int j = 0; j < cols; j++) yr[j] = (xr[j] - mu) * rs * g[j];
    }
  }
}

ATTN_MULTIVERSION
void layerNormBackward(const float* x, const float* g, const float* mean, const float* rstd,
                       const float* dy, float* dx, float* dg, float* db, int64_t rows, int cols) {
  std::vector<float> dbScratch;
  if (db == nullptr) {
    dbScratch.assign(cols, 0.f);
    db = dbScratch.data();
  }
  for (int j = 0; j < cols; j++) dg[j] = db[j] = 0.f;
  for (int64_t r = 0; r < rows; r++) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    const float mu = mean[r], rs = rstd[r];
    float sumD = 0.f, sumDX = 0.f;
#pragma omp simd reduction(+ : sumD, sumDX)
    for (int j = 0; j < cols; j++) {
      const float xh = (xr[j] - mu) * rs;
      const float d = dyr[j] * g[j];
      sumD += d;
      sumDX += d * xh;
    }
#pragma omp simd
    for (int j = 0; j < cols; j++) {
      dg[j] += dyr[j] * (xr[j] - mu) * rs;
      db[j] += dyr[j];
    }
    const float mD = sumD / cols, mDX = sumDX / cols;
#pragma omp simd
    for (int j = 0; j < cols; j++) {
      const float xh = (xr[j] - mu) * rs;
      dxr[j] = rs * (dyr[j] * g[j] - mD - xh * mDX);
    }
  }
}

namespace {

// Per-thread scratch for one (batch, head) slice. Head vectors are padded to dp (a multiple of
// 16 floats) and the key axis to Tp (a multiple of 16), so inner loops are whole v16 operations.
struct HeadScratch {
  int T = 0, dp = 0, Tp = 0;
  std::vector<float> q, k, v, kt, vt, dO, dq, dk, dv, dS;
  void resize(int T_, int dh) {
    T = T_;
    dp = (dh + 15) / 16 * 16;
    Tp = (T + 15) / 16 * 16;
    for (auto* b : {&q, &k, &v, &dO, &dq, &dk, &dv}) b->assign((size_t)T * dp, 0.f);
    for (auto* b : {&kt, &vt}) b->assign((size_t)dp * Tp, 0.f);
    dS.assign((size_t)T * Tp, 0.f);
  }
};
thread_local HeadScratch tlsHead;

void gatherHead(const float* src, int64_t rowStride, int T, int dh, int dp, int Tp, float* rows,
                float* cols) {
  for (int i = 0; i < T; i++)
    for (int d = 0; d < dh; d++) {
      const float v = src[i * rowStride + d];
      if (rows) rows[i * dp + d] = v;
      if (cols) cols[d * Tp + i] = v;
    }
}

// row[0:n) = sum_d a[d] * M[d, 0:n) with M [dh, Tp]; n rounded up to whole v16 (M is padded).
inline __attribute__((always_inline)) void rowTimesMatrix(const float* a, const float* M, int dh,
                                                           int Tp, int n, float* row) {
  for (int j0 = 0; j0 < n; j0 += 64) {
    v16 acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {};
    const int chunks = std::min(4, (n - j0 + 15) / 16);
    for (int d = 0; d < dh; d++) {
      const float ad = a[d];
      const float* m = M + (int64_t)d * Tp + j0;
      acc0 += ad * *(const v16u*)m;
      if (chunks > 1) acc1 += ad * *(const v16u*)(m + 16);
      if (chunks > 2) acc2 += ad * *(const v16u*)(m + 32);
      if (chunks > 3) acc3 += ad * *(const v16u*)(m + 48);
    }
    *(v16u*)(row + j0) = acc0;
    if (chunks > 1) *(v16u*)(row + j0 + 16) = acc1;
    if (chunks > 2) *(v16u*)(row + j0 + 32) = acc2;
    if (chunks > 3) *(v16u*)(row + j0 + 48) = acc3;
  }
}

// sum_{j<n} w[j] * X[j, d0:d0+16] (X rows strided by dp); four chains hide FMA latency.
inline __attribute__((always_inline)) v16 weightedRowSum(const float* w, const float* X, int dp,
                                                          int d0, int n) {
  v16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    a0 += w[j] * *(const v16u*)(X + (int64_t)j * dp + d0);
    a1 += w[j + 1] * *(const v16u*)(X + (int64_t)(j + 1) * dp + d0);
    a2 += w[j + 2] * *(const v16u*)(X + (int64_t)(j + 2) * dp + d0);
    a3 += w[j + 3] * *(const v16u*)(X + (int64_t)(j + 3) * dp + d0);
  }
  for (; j < n; j++) a0 += w[j] * *(const v16u*)(X + (int64_t)j * dp + d0);
  return (a0 + a1) + (a2 + a3);
}

ATTN_MULTIVERSION
void attentionForwardHead(const float* qkv, int64_t rowStride, int64_t dModel, float* out,
                          float* P, int T, int dh, float scale, bool causal) {
  HeadScratch& s = tlsHead;
  if (s.T != T || s.dp != (dh + 15) / 16 * 16) s.resize(T, dh);
  const int dp = s.dp, Tp = s.Tp;
  gatherHead(qkv, rowStride, T, dh, dp, Tp, s.q.data(), nullptr);
  gatherHead(qkv + dModel, rowStride, T, dh, dp, Tp, nullptr, s.kt.data());
  gatherHead(qkv + 2 * dModel, rowStride, T, dh, dp, Tp, s.v.data(), nullptr);
  float* row = s.dS.data();  // [Tp] scratch row
  for (int i = 0; i < T; i++) {
    const int n = causal ? i + 1 : T;
    rowTimesMatrix(s.q.data() + i * dp, s.kt.data(), dh, Tp, n, row);
    softmaxRowPadded(row, n, scale);
    float* pi = P + (int64_t)i * T;
    const int nPad = std::min(T, (n + 15) / 16 * 16);
    std::memcpy(pi, row, sizeof(float) * nPad);
    for (int j = nPad; j < T; j++) pi[j] = 0.f;
    float* oi = out + (int64_t)i * dModel;
    for (int d0 = 0; d0 < dp; d0 += 16) {
      const v16 acc = weightedRowSum(pi, s.v.data(), dp, d0, n);
      for (int d = d0; d < std::min(dh, d0 + 16); d++) oi[d] = acc[d - d0];
    }
  }
}

// Pass 1 (query rows): dP = dO V^T, dS = P (dP - rowsum(P dP)) scale, dQ = dS K.
// Pass 2 (key rows): dK = dS^T Q, dV = P^T dO.
ATTN_MULTIVERSION
void attentionBackwardHead(const float* qkv, int64_t rowStride, int64_t dModel, const float* P,
                           const float* dOut, float* dqkv, int T, int dh, float scale,
                           bool causal) {
  HeadScratch& s = tlsHead;
  if (s.T != T || s.dp != (dh + 15) / 16 * 16) s.resize(T, dh);
  const int dp = s.dp, Tp = s.Tp;
  gatherHead(qkv, rowStride, T, dh, dp, Tp, s.q.data(), nullptr);
  gatherHead(qkv + dModel, rowStride, T, dh, dp, Tp, s.k.data(), nullptr);
  gatherHead(qkv + 2 * dModel, rowStride, T, dh, dp, Tp, nullptr, s.vt.data());
  gatherHead(dOut, dModel, T, dh, dp, Tp, s.dO.data(), nullptr);
  float* dS = s.dS.data();
  for (int i = 0; i < T; i++) {
    const int n = causal ? i + 1 : T;
    const float* pi = P + (int64_t)i * T;
    float* dsi = dS + (int64_t)i * Tp;
    rowTimesMatrix(s.dO.data() + i * dp, s.vt.data(), dh, Tp, n, dsi);
    float dot = 0.f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < n; j++) dot += pi[j] * dsi[j];
#pragma omp simd
    for (int j = 0; j < n; j++) dsi[j] = pi[j] * (dsi[j] - dot) * scale;
    for (int d0 = 0; d0 < dp; d0 += 16)
      *(v16u*)(s.dq.data() + i * dp + d0) = weightedRowSum(dsi, s.k.data(), dp, d0, n);
  }
  for (int j = 0; j < T; j++) {
    const int i0 = causal ? j : 0;
    for (int d0 = 0; d0 < dp; d0 += 16) {
      v16 dk = {}, dv = {};
      for (int i = i0; i < T; i++) {
        dk += dS[(int64_t)i * Tp + j] * *(const v16u*)(s.q.data() + i * dp + d0);
        dv += P[(int64_t)i * T + j] * *(const v16u*)(s.dO.data() + i * dp + d0);
      }
      *(v16u*)(s.dk.data() + j * dp + d0) = dk;
      *(v16u*)(s.dv.data() + j * dp + d0) = dv;
    }
  }
  for (int i = 0; i < T; i++)
    for (int d = 0; d < dh; d++) {
      dqkv[i * rowStride + d] = s.dq[i * dp + d];
      dqkv[i * rowStride + dModel + d] = s.dk[i * dp + d];
      dqkv[i * rowStride + 2 * dModel + d] = s.dv[i * dp + d];
    }
}

}  // namespace

void attentionForward(const float* qkv, float* out, float* probs, int B, int T, int H, int dh,
                      float scale, bool causal) {
  const int64_t dModel = (int64_t)H * dh, rowStride = 3 * dModel;
#pragma omp parallel for collapse(2) schedule(static) if (gThreads > 1) num_threads(gThreads)
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      workerFtz();
      attentionForwardHead(qkv + (int64_t)b * T * rowStride + (int64_t)h * dh, rowStride, dModel,
                           out + (int64_t)b * T * dModel + (int64_t)h * dh,
                           probs + ((int64_t)b * H + h) * T * T, T, dh, scale, causal);
    }
}

void attentionBackward(const float* qkv, const float* probs, const float* dOut, float* dqkv,
                       int B, int T, int H, int dh, float scale, bool causal) {
  const int64_t dModel = (int64_t)H * dh, rowStride = 3 * dModel;
#pragma omp parallel for collapse(2) schedule(static) if (gThreads > 1) num_threads(gThreads)
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      workerFtz();
      const int64_t off = (int64_t)b * T * rowStride + (int64_t)h * dh;
      attentionBackwardHead(qkv + off, rowStride, dModel, probs + ((int64_t)b * H + h) * T * T,
                            dOut + (int64_t)b * T * dModel + (int64_t)h * dh, dqkv + off, T, dh,
                            scale, causal);
    }
}

namespace {

inline __attribute__((always_inline)) void addRows(float* __restrict dst, const float* a, const float* b, int n) {
#pragma omp simd
  for (int e = 0; e < n; e++) dst[e] = a[e] + b[e];
}
// Returns sum_e a[e] b[e] and adds p a[e] to y[e] (explicit 16-lane vectors: GCC does not
// vectorise this fused reduction + update through `omp simd` here).
inline __attribute__((always_inline)) float dotAndAxpy(const float* a, const float* b, float* y, float p, int n) {
  v16 acc = {};
  int e = 0;
  for (; e + 16 <= n; e += 16) {
    const v16 av = *(const v16u*)(a + e);
    acc += av * *(const v16u*)(b + e);
    *(v16u*)(y + e) += p * av;
  }
  float g = hsum(acc);
  for (; e < n; e++) {
    g += a[e] * b[e];
    y[e] += p * a[e];
  }
  return g;
}

inline __attribute__((always_inline)) void accumulate(float* __restrict dst, const float* __restrict src, int n) {
#pragma omp simd
  for (int e = 0; e < n; e++) dst[e] += src[e];
}

ATTN_MULTIVERSION
void oneHotForwardSequence(const int32_t* tok, const float* wq, const float* wv, float* logits,
                           float* probs, const OneHotShape& s, float* __restrict q,
                           float* __restrict v, float* __restrict row) {
  const int T = s.T, D = s.D, dV = s.dV, d = s.d, c = s.c, from = s.from, H = s.H;
  const float scale = s.scale;
  std::fill(logits, logits + (int64_t)(T - from) * c, 0.f);
  for (int h = 0; h < H; h++) {
    const float* wq0 = wq + (int64_t)h * D * D;
    const float* wv0 = wv + (int64_t)h * D * dV;
    for (int t = 0; t < T; t++) {
      addRows(q + (int64_t)t * D, wq0 + (int64_t)tok[t] * D, wq0 + (int64_t)(d + t) * D, D);
      addRows(v + (int64_t)t * c, wv0 + (int64_t)tok[t] * dV, wv0 + (int64_t)(d + t) * dV, c);
    }
    float* P = probs + (int64_t)h * T * T;
    std::fill(P, P + (int64_t)from * T, 0.f);
    for (int t = from; t < T; t++) {
      const float* qt = q + (int64_t)t * D;
      float mx = -INFINITY;
      for (int u = 0; u <= t; u++) {
        row[u] = scale * (qt[tok[u]] + qt[d + u]);
        mx = std::max(mx, row[u]);
      }
      float sum = 0.f;
      for (int u = 0; u <= t; u++) sum += (row[u] = expApprox(row[u] - mx));
      const float inv = 1.f / sum;
      float* pt = P + (int64_t)t * T;
      float* out = logits + (int64_t)(t - from) * c;
      for (int u = 0; u <= t; u++) {
        const float a = pt[u] = row[u] * inv;
        const float* vu = v + (int64_t)u * c;
#pragma omp simd
        for (int e = 0; e < c; e++) out[e] += a * vu[e];
      }
      for (int u = t + 1; u < T; u++) pt[u] = 0.f;
    }
  }
}

ATTN_MULTIVERSION
void oneHotBackwardSequence(const int32_t* tok, const float* wv, const float* probs,
                            const float* dOut, float* dwq, float* dwv, const OneHotShape& s,
                            float* __restrict v, float* __restrict dv, float* __restrict dq,
                            float* __restrict dA) {
  const int T = s.T, D = s.D, dV = s.dV, d = s.d, c = s.c, from = s.from, H = s.H;
  const float scale = s.scale;
  for (int h = 0; h < H; h++) {
    const float* wv0 = wv + (int64_t)h * D * dV;
    for (int t = 0; t < T; t++)
      addRows(v + (int64_t)t * c, wv0 + (int64_t)tok[t] * dV, wv0 + (int64_t)(d + t) * dV, c);
    std::fill(dv, dv + (int64_t)T * c, 0.f);
    std::fill(dq, dq + (int64_t)T * D, 0.f);
    const float* P = probs + (int64_t)h * T * T;
    for (int t = from; t < T; t++) {
      const float* pt = P + (int64_t)t * T;
      const float* go = dOut + (int64_t)(t - from) * c;
      float dot = 0.f;
      for (int u = 0; u <= t; u++) {
        const float* vu = v + (int64_t)u * c;
        float* dvu = dv + (int64_t)u * c;
        const float p = pt[u];
        const float g = dotAndAxpy(go, vu, dvu, p, c);
        dA[u] = g;
        dot += p * g;
      }
      float* dqt = dq + (int64_t)t * D;
      for (int u = 0; u <= t; u++) {
        const float g = pt[u] * (dA[u] - dot) * scale;
        dqt[tok[u]] += g;
        dqt[d + u] += g;
      }
    }
    float* gq0 = dwq + (int64_t)h * D * D;
    float* gv0 = dwv + (int64_t)h * D * dV;
    for (int t = 0; t < T; t++) {
      accumulate(gq0 + (int64_t)tok[t] * D, dq + (int64_t)t * D, D);
      accumulate(gq0 + (int64_t)(d + t) * D, dq + (int64_t)t * D, D);
      accumulate(gv0 + (int64_t)tok[t] * dV, dv + (int64_t)t * c, c);
      accumulate(gv0 + (int64_t)(d + t) * dV, dv + (int64_t)t * c, c);
    }
  }
}

}  // namespace

void oneHotAttentionForward(const int32_t* tokens, const float* wq, const float* wv, float* logits,
                            float* probs, const OneHotShape& s) {
#pragma omp parallel num_threads(gThreads) if (gThreads > 1)
  {
    workerFtz();
    std::vector<float> q((size_t)s.T * s.D), v((size_t)s.T * s.c), row(s.T);
#pragma omp for schedule(static)
    for (int b = 0; b < s.B; b++)
      oneHotForwardSequence(tokens + (int64_t)b * s.T, wq, wv, logits + (int64_t)b * (s.T - s.from) * s.c,
                            probs + (int64_t)b * s.H * s.T * s.T, s, q.data(), v.data(), row.data());
  }
}

void oneHotAttentionBackward(const int32_t* tokens, const float* wq, const float* wv,
                             const float* probs, const float* dLogits, float* dwq, float* dwv,
                             const OneHotShape& s) {
  (void)wq;
  const int64_t nq = (int64_t)s.H * s.D * s.D, nv = (int64_t)s.H * s.D * s.dV;
  std::fill(dwq, dwq + nq, 0.f);
  std::fill(dwv, dwv + nv, 0.f);
  const int threads = std::max(1, std::min(gThreads, s.B));
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    workerFtz();
    int id = 0;
#ifdef _OPENMP
    id = omp_get_thread_num();
#endif
    // Thread 0 accumulates straight into the outputs; others into private tables, added at the end.
    std::vector<float> gq, gv;
    float* myq = dwq;
    float* myv = dwv;
    if (id > 0) {
      gq.assign(nq, 0.f);
      gv.assign(nv, 0.f);
      myq = gq.data();
      myv = gv.data();
    }
    std::vector<float> v((size_t)s.T * s.c), dv((size_t)s.T * s.c), dq((size_t)s.T * s.D), dA(s.T);
#pragma omp for schedule(static)
    for (int b = 0; b < s.B; b++)
      oneHotBackwardSequence(tokens + (int64_t)b * s.T, wv, probs + (int64_t)b * s.H * s.T * s.T,
                             dLogits + (int64_t)b * (s.T - s.from) * s.c, myq, myv, s, v.data(), dv.data(),
                             dq.data(), dA.data());
    if (id > 0) {
#pragma omp critical
      {
        accumulate(dwq, myq, (int)nq);
        accumulate(dwv, myv, (int)nv);
      }
    }
  }
}

ATTN_MULTIVERSION
double softmaxCrossEntropy(const float* logits, const int32_t* labels, const float* weights,
                           int64_t rows, int cols) {
  double total = 0, weightSum = 0;
  for (int64_t r = 0; r < rows; r++) {
    const float w = weights[r];
    weightSum += w;
    if (w == 0.f) continue;
    const float* x = logits + r * cols;
    float mx = x[0];
    for (int j = 1; j < cols; j++) mx = std::max(mx, x[j]);
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < cols; j++) sum += expApprox(x[j] - mx);
    total += (double)w * (double)(std::log(sum) + mx - x[labels[r]]);
  }
  return total / std::max(weightSum, 1e-12);
}

ATTN_MULTIVERSION
void softmaxCrossEntropyBackward(const float* logits, const int32_t* labels, const float* weights,
                                 int64_t rows, int cols, float dLoss, float* dLogits) {
  double weightSum = 0;
  for (int64_t r = 0; r < rows; r++) weightSum += weights[r];
  const double scale = (double)dLoss / std::max(weightSum, 1e-12);
  for (int64_t r = 0; r < rows; r++) {
    const float* x = logits + r * cols;
    float* d = dLogits + r * cols;
    const float g = (float)(scale * weights[r]);
    if (g == 0.f) {
      std::fill(d, d + cols, 0.f);
      continue;
    }
    float mx = x[0];
    for (int j = 1; j < cols; j++) mx = std::max(mx, x[j]);
#pragma omp simd
    for (int j = 0; j < cols; j++) d[j] = expApprox(x[j] - mx);
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < cols; j++) sum += d[j];
    const float k = g / sum;
    for (int j = 0; j < cols; j++) d[j] *= k;
    d[labels[r]] -= g;
  }
}

ATTN_MULTIVERSION
void adamw(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
           float beta2, float eps, float weightDecay, int step) {
  const double bc1 = 1.0 - std::pow((double)beta1, step);
  const double bc2 = 1.0 - std::pow((double)beta2, step);
  const float stepSize = (float)(lr / bc1), decay = 1.f - lr * weightDecay;
  const float rbc2 = (float)(1.0 / std::sqrt(bc2));
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    const float gi = g[i];
    const float mi = beta1 * m[i] + (1.f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - stepSize * mi / (std::sqrt(vi) * rbc2 + eps);
  }
}

}  // namespace attn

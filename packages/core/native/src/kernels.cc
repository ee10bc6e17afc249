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
#include "pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));

constexpr int MR = 8;    // rows of C per micro-tile
constexpr int NR = 32;   // columns of C per micro-tile (two v16)
constexpr int KC = 256;  // depth of a packed block

// Elementwise / row kernels use the thread team only above this many elements.
constexpr int64_t kParallelMin = 1 << 15;
inline bool parallelFor(int64_t elements) { return pool::threads() > 1 && elements >= kParallelMin; }
// Units per thread for the team's dynamic claiming: several, so that a thread that joins late
// (waking up, or its core busy with other work) leaves its share to the others.
constexpr int kUnitsPerThread = 4;


// Packs op(B)[kb:kb+kc, :] panels [p0, p1) of NR columns: Bp[panel - p0][k][NR], zero padded.
void packB(const float* B, bool transB, int K, int N, int kb, int kc, int p0, int p1, float* Bp) {
  for (int p = p0; p < p1; p++) {
    float* dst = Bp + (int64_t)(p - p0) * kc * NR;
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

// The same on op(A) in place: element (i, k) of the row block at a[i * rowStride + k * depthStride]
// (a full block needs no packing: the operands are broadcast from memory either way, and the
// products and their order are those of the packed kernel).
template <bool TransA>
inline __attribute__((always_inline)) void microKernelDirect(int kc, const float* __restrict a,
                                                              int64_t lda,
                                                              const float* __restrict Bp,
                                                              float* __restrict acc) {
  v16 c[MR][2];
  for (int i = 0; i < MR; i++) c[i][0] = c[i][1] = v16{};
  for (int k = 0; k < kc; k++) {
    const v16 b0 = *(const v16u*)(Bp + k * NR);
    const v16 b1 = *(const v16u*)(Bp + k * NR + 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      const float ai = TransA ? a[(int64_t)k * lda + i] : a[(int64_t)i * lda + k];
      c[i][0] += ai * b0;
      c[i][1] += ai * b1;
    }
  }
  for (int i = 0; i < MR; i++) {
    *(v16u*)(acc + i * NR) = c[i][0];
    *(v16u*)(acc + i * NR + 16) = c[i][1];
  }
}

// One row block [ib, ib+MR) of C for one packed depth block (first: store, else accumulate),
// over the packed panels [p0, p1) of B (Bp points at panel p0).
ATTN_MULTIVERSION
void gemmRowBlock(const float* A, bool transA, int M, int N, int K, int ib, int kb, int kc,
                  const float* Bp, int p0, int p1, float* C, bool first, float* Ap) {
  alignas(64) float acc[MR * NR];
  const int ni = std::min(MR, M - ib);
  // Only a partial row block (zero padded) is packed.
  if (ni < MR) packA(A, transA, M, K, ib, kb, kc, Ap);
  const float* a = transA ? A + (int64_t)kb * M + ib : A + (int64_t)ib * K + kb;
  for (int p = p0; p < p1; p++) {
    const float* bp = Bp + (int64_t)(p - p0) * kc * NR;
    if (ni < MR)
      microKernel(kc, Ap, bp, acc);
    else if (transA)
      microKernelDirect<true>(kc, a, M, bp, acc);
    else
      microKernelDirect<false>(kc, a, K, bp, acc);
    const int j0 = p * NR, nj = std::min(NR, N - j0);
    if (nj == NR) {
      // Whole tile: vector stores (a per-row copy loop became a memcpy call per 32 floats).
      for (int i = 0; i < ni; i++) {
        float* c = C + (int64_t)(ib + i) * N + j0;
        const v16 a0 = *(const v16u*)(acc + i * NR), a1 = *(const v16u*)(acc + i * NR + 16);
        if (first) {
          *(v16u*)c = a0;
          *(v16u*)(c + 16) = a1;
        } else {
          *(v16u*)c += a0;
          *(v16u*)(c + 16) += a1;
        }
      }
      continue;
    }
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

// f(r0, r1) over [0, rows) in contiguous ranges on the thread team when the work (rows * perRow
// elements) is large enough. For kernels whose rows are independent (any split gives the same
// result).
template <class F>
void parallelRows(int64_t rows, int64_t perRow, F&& f) {
  if (!parallelFor(rows * perRow) || rows < 2) {
    f((int64_t)0, rows);
    return;
  }
  const int64_t units = std::min<int64_t>(rows, (int64_t)kUnitsPerThread * pool::threads());
  pool::run(units, [&](int64_t u) { f(rows * u / units, rows * (u + 1) / units); });
}

void gemmOne(bool transA, bool transB, int M, int N, int K, const float* A, const float* B,
             float* C, bool parallelOk) {
  if (K == 0) {
    std::fill(C, C + (int64_t)M * N, 0.f);
    return;
  }
  const int panels = (N + NR - 1) / NR;
  const int blocks = (M + MR - 1) / MR;
  // The work is split in units of row blocks (each unit packs all of op(B) itself) or, when op(B)
  // is the larger operand (N > M: the weight gradients X^T dY with K = batch rows), of column
  // panels (each unit packs only its panels of op(B), and all of op(A)). Either way every element
  // of C is computed with the same depth blocks in the same order by the same micro-kernel, so
  // the result does not depend on the split or the thread count. Units loop over depth blocks
  // themselves: no barrier per depth block. Deep products (several depth blocks) repack per unit,
  // so they get fewer units.
  const int threads = parallelOk && (int64_t)M * N * K >= (1 << 17) ? pool::threads() : 1;
  const int perThread = K > KC ? 2 : kUnitsPerThread;
  const bool splitPanels = N > M && panels >= 2;
  const int64_t units = threads <= 1 ? 1 : std::min<int64_t>(splitPanels ? panels : blocks, (int64_t)perThread * threads);
  pool::run(units, [&](int64_t u) {
    int p0 = 0, p1 = panels, b0 = 0, b1 = blocks;
    if (splitPanels) {
      p0 = (int)(panels * u / units);
      p1 = (int)(panels * (u + 1) / units);
    } else {
      b0 = (int)(blocks * u / units);
      b1 = (int)(blocks * (u + 1) / units);
    }
    if (p1 <= p0 || b1 <= b0) return;
    tlsB.resize((size_t)(p1 - p0) * KC * NR);
    tlsA.resize((size_t)MR * KC);
    float* Bp = tlsB.data();
    for (int kb = 0; kb < K; kb += KC) {
      const int kc = std::min(KC, K - kb);
      packB(B, transB, K, N, kb, kc, p0, p1, Bp);
      for (int blk = b0; blk < b1; blk++)
        gemmRowBlock(A, transA, M, N, K, blk * MR, kb, kc, Bp, p0, p1, C, kb == 0, tlsA.data());
    }
  });
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

// Whether x[0:n) holds a NaN (std::max and vector max skip NaN operands).
inline bool rowHasNaN(const float* x, int n) {
  for (int j = 0; j < n; j++) {
    if (x[j] != x[j]) return true;
  }
  return false;
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
    // Every entry is -inf (fully masked: zeros) or NaN, which the max skips: NaN must propagate
    // as on every other backend, not read as a masked row.
    const float fill = rowHasNaN(row, n) ? NAN : 0.f;
    for (int j = 0; j < n; j++) row[j] = fill;
    for (int j = n; j < nPad; j++) row[j] = 0.f;
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

void setThreads(int n) { pool::setThreads(n); }
int getThreads() { return pool::threads(); }
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
  pool::run(pool::threads() > 1 ? batch : 1, [&](int64_t u) {
    const int64_t b0 = pool::threads() > 1 ? u : 0, b1 = pool::threads() > 1 ? u + 1 : batch;
    for (int64_t b = b0; b < b1; b++)
      gemmOne(transA, transB, M, N, K, A + b * strideA, B + b * strideB, C + b * M * N, false);
  });
}

namespace {

ATTN_MULTIVERSION
void softmaxRowsRange(const float* x, float* y, int64_t r0, int64_t r1, int cols) {
  for (int64_t r = r0; r < r1; r++) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float mx = -INFINITY;
    for (int j = 0; j < cols; j++) mx = std::max(mx, xr[j]);
    if (mx == -INFINITY) {  // all -inf (masked: zeros) or NaN (skipped by the max: propagate)
      const float fill = rowHasNaN(xr, cols) ? NAN : 0.f;
      for (int j = 0; j < cols; j++) yr[j] = fill;
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
void gatherRowsRange(const float* table, const int32_t* indices, float* out, int64_t r0,
                     int64_t r1, int k, int width) {
  for (int64_t r = r0; r < r1; r++) {
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
void addBiasRange(float* C, int64_t r0, int64_t r1, int cols, const float* bias) {
  for (int64_t r = r0; r < r1; r++) {
    float* c = C + r * cols;
#pragma omp simd
    for (int j = 0; j < cols; j++) c[j] += bias[j];
  }
}

// out[j0:j1) = sum over rows of x[r, j0:j1), rows in order.
ATTN_MULTIVERSION
void columnSumRange(const float* x, float* out, int64_t rows, int cols, int j0, int j1) {
  for (int j = j0; j < j1; j++) out[j] = 0.f;
  for (int64_t r = 0; r < rows; r++) {
    const float* xr = x + r * cols;
#pragma omp simd
    for (int j = j0; j < j1; j++) out[j] += xr[j];
  }
}

// dst[0:n) += src[0:n).
inline void accumulateRow(float* __restrict dst, const float* __restrict src, int n) {
#pragma omp simd
  for (int j = 0; j < n; j++) dst[j] += src[j];
}

ATTN_MULTIVERSION
void addRange(const float* a, const float* b, float* out, int64_t i0, int64_t i1) {
#pragma omp simd
  for (int64_t i = i0; i < i1; i++) out[i] = a[i] + b[i];
}

ATTN_MULTIVERSION
void geluForwardRange(const float* x, float* y, int64_t i0, int64_t i1) {
#pragma omp simd
  for (int64_t i = i0; i < i1; i++) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + tanhApprox(kGeluC * (v + kGeluA * v * v * v)));
  }
}

ATTN_MULTIVERSION
void geluBackwardRange(const float* x, const float* dy, float* dx, int64_t i0, int64_t i1) {
#pragma omp simd
  for (int64_t i = i0; i < i1; i++) {
    const float v = x[i];
    const float t = tanhApprox(kGeluC * (v + kGeluA * v * v * v));
    const float d = 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * kGeluC * (1.f + 3.f * kGeluA * v * v);
    dx[i] = dy[i] * d;
  }
}

ATTN_MULTIVERSION
void layerNormForwardRange(const float* x, const float* g, const float* b, float* y, float* mean,
                           float* rstd, int64_t r0, int64_t r1, int cols, float eps) {
  for (int64_t r = r0; r < r1; r++) {
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

// dx for rows [r0, r1); with gradients (dg, db non-null, zeroed by the caller) also their
// per-column sums over these rows, in row order.
ATTN_MULTIVERSION
void layerNormBackwardRows(const float* x, const float* g, const float* mean, const float* rstd,
                           const float* dy, float* dx, float* dg, float* db, int64_t r0,
                           int64_t r1, int cols) {
  for (int64_t r = r0; r < r1; r++) {
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
    if (dg != nullptr) {
#pragma omp simd
      for (int j = 0; j < cols; j++) {
        dg[j] += dyr[j] * (xr[j] - mu) * rs;
        db[j] += dyr[j];
      }
    }
    const float mD = sumD / cols, mDX = sumDX / cols;
#pragma omp simd
    for (int j = 0; j < cols; j++) {
      const float xh = (xr[j] - mu) * rs;
      dxr[j] = rs * (dyr[j] * g[j] - mD - xh * mDX);
    }
  }
}

}  // namespace

// The row kernels below split rows between threads; each output element is computed the same way
// whatever the split, so results do not depend on the thread count.

void softmaxRows(const float* x, float* y, int64_t rows, int cols) {
  parallelRows(rows, cols, [&](int64_t r0, int64_t r1) { softmaxRowsRange(x, y, r0, r1, cols); });
}

void gatherRows(const float* table, const int32_t* indices, float* out, int64_t n, int k, int width) {
  parallelRows(n, (int64_t)k * width, [&](int64_t r0, int64_t r1) { gatherRowsRange(table, indices, out, r0, r1, k, width); });
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

void addBias(float* C, int64_t rows, int cols, const float* bias) {
  parallelRows(rows, cols, [&](int64_t r0, int64_t r1) { addBiasRange(C, r0, r1, cols, bias); });
}

// Sums over rows (column sums, LayerNorm's gain / bias gradients) are taken per chunk of rows and
// the chunks' partial sums added in chunk order. The chunks depend only on the number of rows, so
// the result is the same for any thread count.
inline int64_t rowChunks(int64_t rows, int cols) {
  if ((int64_t)rows * cols < kParallelMin) return 1;
  return std::max<int64_t>(1, std::min<int64_t>(16, rows / 256));
}

// Per-chunk partial rows, each padded to whole 64-byte lines (chunks run on different threads:
// sharing a cache line between two partial rows made the sums 2x slower than one thread).
struct Partials {
  int64_t chunks;
  int stride;
  std::vector<float> storage;
  float* base;
  Partials(int64_t chunks_, int cols) : chunks(chunks_), stride((cols + 15) / 16 * 16) {
    storage.assign((size_t)(chunks * stride + 16), 0.f);
    base = storage.data() + ((16 - ((uintptr_t)storage.data() / sizeof(float)) % 16) % 16);
  }
  float* row(int64_t c) { return base + c * stride; }
  // out[j] = sum_c row(c)[j], c in order.
  void sumInto(float* out, int cols) {
    for (int j = 0; j < cols; j++) out[j] = base[j];
    for (int64_t c = 1; c < chunks; c++) accumulateRow(out, row(c), cols);
  }
};

void columnSum(const float* x, float* out, int64_t rows, int cols) {
  const int64_t chunks = rowChunks(rows, cols);
  if (chunks == 1) {
    columnSumRange(x, out, rows, cols, 0, cols);
    return;
  }
  Partials partial(chunks, cols);
  pool::run(chunks, [&](int64_t c) {
    const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    columnSumRange(x + r0 * cols, partial.row(c), r1 - r0, cols, 0, cols);
  });
  partial.sumInto(out, cols);
}

void addArrays(const float* a, const float* b, float* out, int64_t n) {
  parallelRows(n, 1, [&](int64_t i0, int64_t i1) { addRange(a, b, out, i0, i1); });
}

void geluForward(const float* x, float* y, int64_t n) {
  parallelRows(n, 1, [&](int64_t i0, int64_t i1) { geluForwardRange(x, y, i0, i1); });
}

void geluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  parallelRows(n, 1, [&](int64_t i0, int64_t i1) { geluBackwardRange(x, dy, dx, i0, i1); });
}

void layerNormForward(const float* x, const float* g, const float* b, float* y, float* mean,
                      float* rstd, int64_t rows, int cols, float eps) {
  parallelRows(rows, cols, [&](int64_t r0, int64_t r1) { layerNormForwardRange(x, g, b, y, mean, rstd, r0, r1, cols, eps); });
}

void layerNormBackward(const float* x, const float* g, const float* mean, const float* rstd,
                       const float* dy, float* dx, float* dg, float* db, int64_t rows, int cols) {
  std::vector<float> dbScratch;
  if (db == nullptr) {
    dbScratch.assign(cols, 0.f);
    db = dbScratch.data();
  }
  const int64_t chunks = rowChunks(rows, cols);
  if (chunks == 1) {
    for (int j = 0; j < cols; j++) dg[j] = db[j] = 0.f;
    layerNormBackwardRows(x, g, mean, rstd, dy, dx, dg, db, 0, rows, cols);
    return;
  }
  // dx by rows, and per chunk partial gain / bias gradients.
  Partials pg(chunks, cols), pb(chunks, cols);
  pool::run(chunks, [&](int64_t c) {
    const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    layerNormBackwardRows(x, g, mean, rstd, dy, dx, pg.row(c), pb.row(c), r0, r1, cols);
  });
  pg.sumInto(dg, cols);
  pb.sumInto(db, cols);
}

namespace {

// Per-thread scratch for one (batch, head) slice. Head vectors are padded to dp (a multiple of
// 16 floats) and the key axis to Tp (a multiple of 16), so inner loops are whole v16 operations;
// keys, values and their gradients are held transposed ([dh, Tp]) so they run along the keys.
constexpr int kRowBlock = 4;  // query rows per block in the attention backward
struct HeadScratch {
  int T = 0, dp = 0, Tp = 0;
  std::vector<float> q, k, v, kt, vt, dO, dq, dkT, dvT, rows;
  void resize(int T_, int dh) {
    T = T_;
    dp = (dh + 15) / 16 * 16;
    Tp = (T + 15) / 16 * 16;
    for (auto* b : {&q, &k, &v, &dO, &dq}) b->assign((size_t)T * dp, 0.f);
    for (auto* b : {&kt, &vt, &dkT, &dvT}) b->assign((size_t)dp * Tp, 0.f);
    rows.assign((size_t)2 * kRowBlock * Tp, 0.f);  // probability and gradient rows of a row block
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

// Lanes l < count of x, `fill` elsewhere (a vector select, no per-lane stores).
inline __attribute__((always_inline)) v16 firstLanes(v16 x, int count, float fill = 0.f) {
  const v16i lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const v16i keep = lane < count;
  const v16 other = v16{} + fill;
  return (v16)(((v16i)x & keep) | ((v16i)other & ~keep));
}

// The softmax of row[0:n) * scale in place (entries n .. round16(n) set to 0); returns the row's
// log-sum-exp of the scaled scores, max + log(sum) (+inf for a row of -inf: every p = 0; NaN for a
// row with NaN), from which the backward pass recomputes p = exp(scale s - lse).
inline __attribute__((always_inline)) float softmaxRowLse(float* row, int n, float scale) {
  const int nPad = (n + 15) / 16 * 16;
  v16 m = v16{} - INFINITY;
  for (int j = 0; j < nPad; j += 16) {
    v16 s = *(v16u*)(row + j) * scale;
    if (j + 16 > n) s = firstLanes(s, n - j, -INFINITY);
    m = s > m ? s : m;
  }
  const float mx = hmax(m);
  if (mx == -INFINITY) {
    const bool nan = rowHasNaN(row, n);
    for (int j = 0; j < n; j++) row[j] = nan ? NAN : 0.f;
    for (int j = n; j < nPad; j++) row[j] = 0.f;
    return nan ? NAN : INFINITY;
  }
  v16 sum = {};
  for (int j = 0; j < nPad; j += 16) {
    v16 e = expV(*(v16u*)(row + j) * scale - mx);
    if (j + 16 > n) e = firstLanes(e, n - j);
    *(v16u*)(row + j) = e;
    sum += e;
  }
  const float total = hsum(sum);
  const float inv = 1.f / total;
  for (int j = 0; j < nPad; j += 16) *(v16u*)(row + j) *= inv;
  return mx + std::log(total);
}

// Forward of one (batch, head) slice without the T x T pattern (FlashAttention's saved statistics,
// arXiv 2205.14135, Algorithm 1-2): per query row the scores along the keys (vectorised over keys,
// not over dHead), the softmax in a scratch row, out = p V as dHead dot products along the keys
// with V transposed, and the row's log-sum-exp into lse[T].
ATTN_MULTIVERSION
void attentionForwardHead(const float* qkv, int64_t rowStride, int64_t dModel, float* out,
                          float* lse, int T, int dh, float scale, bool causal) {
  HeadScratch& s = tlsHead;
  if (s.T != T || s.dp != (dh + 15) / 16 * 16) s.resize(T, dh);
  const int dp = s.dp, Tp = s.Tp;
  gatherHead(qkv, rowStride, T, dh, dp, Tp, s.q.data(), nullptr);
  gatherHead(qkv + dModel, rowStride, T, dh, dp, Tp, nullptr, s.kt.data());
  gatherHead(qkv + 2 * dModel, rowStride, T, dh, dp, Tp, s.v.data(), nullptr);
  float* row = s.rows.data();  // [Tp] scratch row
  for (int i = 0; i < T; i++) {
    const int n = causal ? i + 1 : T;
    rowTimesMatrix(s.q.data() + i * dp, s.kt.data(), dh, Tp, n, row);
    lse[i] = softmaxRowLse(row, n, scale);
    float* oi = out + (int64_t)i * dModel;
    for (int d0 = 0; d0 < dp; d0 += 16) {
      const v16 acc = weightedRowSum(row, s.v.data(), dp, d0, n);
      for (int d = d0; d < std::min(dh, d0 + 16); d++) oi[d] = acc[d - d0];
    }
  }
}

// Backward of one slice from the saved log-sum-exp (FlashAttention, arXiv 2205.14135, Algorithm 4):
// per query row p = exp(scale q k^T - lse) recomputed, dP = dO V^T, dS = p (dP - rowsum(p dP))
// scale, dQ = dS K; dK^T += q dS and dV^T += dO p accumulate along the keys (transposed, so every
// update is a vector along the keys), transposed back at the end.
ATTN_MULTIVERSION
void attentionBackwardHead(const float* qkv, int64_t rowStride, int64_t dModel, const float* lse,
                           const float* dOut, float* dqkv, int T, int dh, float scale,
                           bool causal) {
  HeadScratch& s = tlsHead;
  if (s.T != T || s.dp != (dh + 15) / 16 * 16) s.resize(T, dh);
  const int dp = s.dp, Tp = s.Tp;
  gatherHead(qkv, rowStride, T, dh, dp, Tp, s.q.data(), nullptr);
  gatherHead(qkv + dModel, rowStride, T, dh, dp, Tp, s.k.data(), s.kt.data());
  gatherHead(qkv + 2 * dModel, rowStride, T, dh, dp, Tp, nullptr, s.vt.data());
  gatherHead(dOut, dModel, T, dh, dp, Tp, s.dO.data(), nullptr);
  float* dkT = s.dkT.data();
  float* dvT = s.dvT.data();
  std::fill(dkT, dkT + (int64_t)dh * Tp, 0.f);
  std::fill(dvT, dvT + (int64_t)dh * Tp, 0.f);
  // Blocks of kRowBlock query rows: each row's p and dS, then dK^T and dV^T updated once per block
  // (one load and store of each accumulator vector for all the block's rows).
  for (int i0 = 0; i0 < T; i0 += kRowBlock) {
    const int rowsInBlock = std::min(kRowBlock, T - i0);
    const int blockPad = ((causal ? i0 + rowsInBlock : T) + 15) / 16 * 16;
    for (int r = 0; r < rowsInBlock; r++) {
      const int i = i0 + r;
      float* p = s.rows.data() + (int64_t)2 * r * Tp;
      float* dpRow = p + Tp;
      const int n = causal ? i + 1 : T;
      const int nPad = (n + 15) / 16 * 16;
      const float* qi = s.q.data() + i * dp;
      const float* gi = s.dO.data() + i * dp;
      rowTimesMatrix(qi, s.kt.data(), dh, Tp, n, p);
      const float l = lse[i];
      for (int j = 0; j < nPad; j += 16) {
        v16 e = expV(*(v16u*)(p + j) * scale - l);
        if (j + 16 > n) e = firstLanes(e, n - j);
        *(v16u*)(p + j) = e;
      }
      rowTimesMatrix(gi, s.vt.data(), dh, Tp, n, dpRow);
      v16 dotv = {};
      for (int j = 0; j < nPad; j += 16) dotv += *(v16u*)(p + j) * *(v16u*)(dpRow + j);
      const float dot = hsum(dotv);
      for (int j = 0; j < nPad; j += 16) {
        const v16 pj = *(v16u*)(p + j);
        *(v16u*)(dpRow + j) = pj * (*(v16u*)(dpRow + j) - dot) * scale;  // dS row
      }
      for (int j = nPad; j < blockPad; j += 16) {
        *(v16u*)(p + j) = v16{};
        *(v16u*)(dpRow + j) = v16{};
      }
      float* dqi = s.dq.data() + i * dp;
      for (int d0 = 0; d0 < dp; d0 += 16) *(v16u*)(dqi + d0) = weightedRowSum(dpRow, s.k.data(), dp, d0, n);
    }
    for (int d = 0; d < dh; d++) {
      float* dk = dkT + (int64_t)d * Tp;
      float* dv = dvT + (int64_t)d * Tp;
      for (int j = 0; j < blockPad; j += 16) {
        v16 ak = *(v16u*)(dk + j), av = *(v16u*)(dv + j);
        for (int r = 0; r < rowsInBlock; r++) {
          const float* p = s.rows.data() + (int64_t)2 * r * Tp;
          const int i = i0 + r;
          ak += s.q[i * dp + d] * *(const v16u*)(p + Tp + j);
          av += s.dO[i * dp + d] * *(const v16u*)(p + j);
        }
        *(v16u*)(dk + j) = ak;
        *(v16u*)(dv + j) = av;
      }
    }
  }
  for (int i = 0; i < T; i++)
    for (int d = 0; d < dh; d++) {
      dqkv[i * rowStride + d] = s.dq[i * dp + d];
      dqkv[i * rowStride + dModel + d] = dkT[(int64_t)d * Tp + i];
      dqkv[i * rowStride + 2 * dModel + d] = dvT[(int64_t)d * Tp + i];
    }
}


// ---- training attention in 16-row / 16-key tiles (head sizes up to 64) -------------------------
//
// The forward puts 16 query rows in the lanes of a vector: every score, the running softmax
// statistics and the output accumulators are whole vectors, with no horizontal max or sum per
// row, and the causal mask touches only the 16 keys on the diagonal. The backward puts 16 keys in
// the lanes (FlashAttention-2, Dao 2023, arXiv 2307.08691, Algorithm 2: key blocks outside, query
// rows inside, D = rowsum(dO o O) from the forward's output): dK and dV of the block stay in
// registers over all its query rows, and dQ takes the block's dS rows afterwards as one small
// [rows, 16] x [16, dHead] product. Heads are zero-padded to DH in {8, 16, 32, 64}; larger heads
// use the row kernels above.

struct TileScratch {
  int T = 0, DH = 0, Tp = 0;
  // rows [T, DH]; transposed [DH, Tp]; tiles [Tp, 16]
  std::vector<float> q, k, v, dO, dq, qT, kT, vT, D, tile, pTile;
  void resize(int T_, int DH_) {
    if (T == T_ && DH == DH_) return;
    T = T_;
    DH = DH_;
    Tp = (T + 15) / 16 * 16;
    for (auto* b : {&q, &k, &v, &dO, &dq}) b->assign((size_t)Tp * DH, 0.f);
    for (auto* b : {&qT, &kT, &vT}) b->assign((size_t)DH * Tp, 0.f);
    D.assign((size_t)Tp, 0.f);
    tile.assign((size_t)Tp * 16, 0.f);
    pTile.assign((size_t)Tp * 16, 0.f);
  }
};
thread_local TileScratch tlsTile;

// Lanes l >= from of x, `fill` below (the causal mask of a query tile against key `from` rows in).
inline __attribute__((always_inline)) v16 lanesFrom(v16 x, int from, float fill) {
  const v16i lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const v16i keep = lane >= from;
  const v16 other = v16{} + fill;
  return (v16)(((v16i)x & keep) | ((v16i)other & ~keep));
}

// Copies one head's [T, dh] block (rows strided by rowStride) into rows [T, DH] and / or the
// transpose [DH, Tp]; the padding (d >= dh, i >= T) stays zero from TileScratch::resize.
template <int DH>
inline __attribute__((always_inline)) void gatherTile(const float* src, int64_t rowStride, int T, int dh, int Tp,
                                                      float* rows, float* cols) {
  for (int i = 0; i < T; i++)
    for (int d = 0; d < dh; d++) {
      const float x = src[i * rowStride + d];
      if (rows) rows[i * DH + d] = x;
      if (cols) cols[d * Tp + i] = x;
    }
}

template <int DH>
inline __attribute__((always_inline)) void tileForwardHead(const float* qkv, int64_t rowStride, int64_t dModel,
                                                           float* out, float* lse, int T, int dh, float scale,
                                                           bool causal) {
  TileScratch& s = tlsTile;
  s.resize(T, DH);
  const int Tp = s.Tp;
  float* qT = s.qT.data();
  const float* k = s.k.data();
  const float* v = s.v.data();
  float* tile = s.tile.data();
  gatherTile<DH>(qkv, rowStride, T, dh, Tp, nullptr, qT);
  gatherTile<DH>(qkv + dModel, rowStride, T, dh, Tp, s.k.data(), nullptr);
  gatherTile<DH>(qkv + 2 * dModel, rowStride, T, dh, Tp, s.v.data(), nullptr);
  for (int i0 = 0; i0 < T; i0 += 16) {
    const int keys = causal ? std::min(T, i0 + 16) : T;
    // scores of the tile's 16 rows against every key it sees, and their running max
    v16 m = v16{} - INFINITY;
    for (int j = 0; j < keys; j++) {
      const float* kj = k + (int64_t)j * DH;
      v16 a = {};
      for (int d = 0; d < DH; d++) a += *(const v16u*)(qT + (int64_t)d * Tp + i0) * kj[d];
      a *= scale;
      if (causal && j > i0) a = lanesFrom(a, j - i0, -INFINITY);
      *(v16u*)(tile + (int64_t)j * 16) = a;
      m = a > m ? a : m;  // a NaN score leaves m: it reaches the sum through exp below
    }
    const v16 mSafe = m == -INFINITY ? v16{} : m;  // a row of -inf: every p = 0
    v16 sum = {};
    v16 o[DH <= 16 ? DH : 16];
    float* outTile = out + (int64_t)i0 * dModel;
    const int rows = std::min(16, T - i0);
    auto store = [&](int d0, int nd, v16 inv) {
      for (int r = 0; r < rows; r++)
        for (int c = 0; c < nd && d0 + c < dh; c++) outTile[(int64_t)r * dModel + d0 + c] = o[c][r] * inv[r];
    };
    if constexpr (DH <= 16) {
      for (int c = 0; c < DH; c++) o[c] = v16{};
      for (int j = 0; j < keys; j++) {
        const v16 e = expV(*(const v16u*)(tile + (int64_t)j * 16) - mSafe);
        sum += e;
        const float* vj = v + (int64_t)j * DH;
        for (int c = 0; c < DH; c++) o[c] += e * vj[c];
      }
      const v16 inv = sum > 0.f ? 1.f / sum : v16{};
      store(0, DH, inv);
    } else {
      for (int j = 0; j < keys; j++) {
        const v16 e = expV(*(const v16u*)(tile + (int64_t)j * 16) - mSafe);
        *(v16u*)(tile + (int64_t)j * 16) = e;
        sum += e;
      }
      const v16 inv = sum > 0.f ? 1.f / sum : v16{};
      for (int d0 = 0; d0 < DH && d0 < dh; d0 += 16) {
        for (int c = 0; c < 16; c++) o[c] = v16{};
        for (int j = 0; j < keys; j++) {
          const v16 e = *(const v16u*)(tile + (int64_t)j * 16);
          const float* vj = v + (int64_t)j * DH + d0;
          for (int c = 0; c < 16; c++) o[c] += e * vj[c];
        }
        store(d0, 16, inv);
      }
    }
    for (int r = 0; r < rows; r++) {
      const float total = sum[r];
      lse[i0 + r] = total != total ? NAN : m[r] == -INFINITY ? INFINITY : m[r] + std::log(total);
    }
  }
}

template <int DH>
inline __attribute__((always_inline)) void tileBackwardHead(const float* qkv, int64_t rowStride, int64_t dModel,
                                                            const float* lse, const float* dOut, const float* out,
                                                            float* dqkv, int T, int dh, float scale, bool causal) {
  TileScratch& s = tlsTile;
  s.resize(T, DH);
  const int Tp = s.Tp;
  float* q = s.q.data();
  float* dO = s.dO.data();
  float* dq = s.dq.data();
  const float* kT = s.kT.data();
  const float* vT = s.vT.data();
  const float* k = s.k.data();
  float* D = s.D.data();
  float* tile = s.tile.data();
  gatherTile<DH>(qkv, rowStride, T, dh, Tp, q, nullptr);
  gatherTile<DH>(qkv + dModel, rowStride, T, dh, Tp, s.k.data(), s.kT.data());
  gatherTile<DH>(qkv + 2 * dModel, rowStride, T, dh, Tp, nullptr, s.vT.data());
  gatherTile<DH>(dOut, dModel, T, dh, Tp, dO, nullptr);
  std::fill(dq, dq + (int64_t)T * DH, 0.f);
  for (int i = 0; i < T; i++) {
    float acc = 0.f;
    for (int d = 0; d < dh; d++) acc += dOut[i * dModel + d] * out[i * dModel + d];
    D[i] = acc;
  }
  float* pTile = s.pTile.data();
  for (int j0 = 0; j0 < T; j0 += 16) {
    const int first = causal ? j0 : 0;
    const int validKeys = std::min(16, T - j0);
    // p and dS of every query row against the block's 16 keys (masked lanes exactly 0)
    for (int i = first; i < T; i++) {
      const float* qi = q + (int64_t)i * DH;
      const float* gi = dO + (int64_t)i * DH;
      v16 a = {}, g = {};
      for (int d = 0; d < DH; d++) {
        a += qi[d] * *(const v16u*)(kT + (int64_t)d * Tp + j0);
        g += gi[d] * *(const v16u*)(vT + (int64_t)d * Tp + j0);
      }
      v16 pr = expV(a * scale - lse[i]);
      v16 dsr = pr * (g - D[i]) * scale;
      const int visible = causal ? std::min(validKeys, i - j0 + 1) : validKeys;
      if (visible < 16) {
        pr = firstLanes(pr, visible);
        dsr = firstLanes(dsr, visible);
      }
      *(v16u*)(pTile + (int64_t)i * 16) = pr;
      *(v16u*)(tile + (int64_t)i * 16) = dsr;
    }
    // dK^T = dS^T Q and dV^T = P^T dO over the rows, in chunks of at most 16 accumulators each
    constexpr int C = DH <= 8 ? DH : 16;
    for (int d0 = 0; d0 < DH; d0 += C) {
      v16 dk[C], dv[C];
      for (int c = 0; c < C; c++) dk[c] = dv[c] = v16{};
      if constexpr (DH <= 8) {
        for (int i = first; i < T; i++) {
          const v16 pr = *(const v16u*)(pTile + (int64_t)i * 16);
          const v16 dsr = *(const v16u*)(tile + (int64_t)i * 16);
          for (int c = 0; c < C; c++) {
            dk[c] += dsr * q[(int64_t)i * DH + d0 + c];
            dv[c] += pr * dO[(int64_t)i * DH + d0 + c];
          }
        }
      } else {
        for (int i = first; i < T; i++) {
          const v16 dsr = *(const v16u*)(tile + (int64_t)i * 16);
          for (int c = 0; c < C; c++) dk[c] += dsr * q[(int64_t)i * DH + d0 + c];
        }
        for (int i = first; i < T; i++) {
          const v16 pr = *(const v16u*)(pTile + (int64_t)i * 16);
          for (int c = 0; c < C; c++) dv[c] += pr * dO[(int64_t)i * DH + d0 + c];
        }
      }
      for (int l = 0; l < validKeys; l++) {
        float* dst = dqkv + (int64_t)(j0 + l) * rowStride;
        for (int c = 0; c < C && d0 + c < dh; c++) {
          dst[dModel + d0 + c] = dk[c][l];
          dst[2 * dModel + d0 + c] = dv[c][l];
        }
      }
    }
    // dQ[i] += sum_l dS[i, l] K[j0 + l] for the rows that saw this block
    const float* kBlock = k + (int64_t)j0 * DH;
    for (int i = first; i < T; i++) {
      const float* w = tile + (int64_t)i * 16;
      float* dqi = dq + (int64_t)i * DH;
      if constexpr (DH == 8) {
        v8 acc = *(const v8u*)dqi;
        for (int l = 0; l < 16; l++) acc += w[l] * *(const v8u*)(kBlock + l * DH);
        *(v8u*)dqi = acc;
      } else {
        constexpr int V = DH / 16;
        v16 acc[V];
        for (int c = 0; c < V; c++) acc[c] = *(const v16u*)(dqi + 16 * c);
        for (int l = 0; l < 16; l++) {
          const float wl = w[l];
          for (int c = 0; c < V; c++) acc[c] += wl * *(const v16u*)(kBlock + l * DH + 16 * c);
        }
        for (int c = 0; c < V; c++) *(v16u*)(dqi + 16 * c) = acc[c];
      }
    }
  }
  for (int i = 0; i < T; i++)
    for (int d = 0; d < dh; d++) dqkv[i * rowStride + d] = dq[(int64_t)i * DH + d];
}

// The head size a tile kernel pads dh to, or 0 (the row kernels).
inline int tileHeadSize(int dh) { return dh <= 8 ? 8 : dh <= 16 ? 16 : dh <= 32 ? 32 : dh <= 64 ? 64 : 0; }

ATTN_MULTIVERSION
void tileForward(const float* qkv, int64_t rowStride, int64_t dModel, float* out, float* lse, int T, int dh,
                 float scale, bool causal) {
  switch (tileHeadSize(dh)) {
    case 8: return tileForwardHead<8>(qkv, rowStride, dModel, out, lse, T, dh, scale, causal);
    case 16: return tileForwardHead<16>(qkv, rowStride, dModel, out, lse, T, dh, scale, causal);
    case 32: return tileForwardHead<32>(qkv, rowStride, dModel, out, lse, T, dh, scale, causal);
    default: return tileForwardHead<64>(qkv, rowStride, dModel, out, lse, T, dh, scale, causal);
  }
}

ATTN_MULTIVERSION
void tileBackward(const float* qkv, int64_t rowStride, int64_t dModel, const float* lse, const float* dOut,
                  const float* out, float* dqkv, int T, int dh, float scale, bool causal) {
  switch (tileHeadSize(dh)) {
    case 8: return tileBackwardHead<8>(qkv, rowStride, dModel, lse, dOut, out, dqkv, T, dh, scale, causal);
    case 16: return tileBackwardHead<16>(qkv, rowStride, dModel, lse, dOut, out, dqkv, T, dh, scale, causal);
    case 32: return tileBackwardHead<32>(qkv, rowStride, dModel, lse, dOut, out, dqkv, T, dh, scale, causal);
    default: return tileBackwardHead<64>(qkv, rowStride, dModel, lse, dOut, out, dqkv, T, dh, scale, causal);
  }
}

}  // namespace

void attentionForward(const float* qkv, float* out, float* lse, int B, int T, int H, int dh,
                      float scale, bool causal) {
  const int64_t dModel = (int64_t)H * dh, rowStride = 3 * dModel;
  // Units of (batch, head) slices; each slice is computed the same way on any thread.
  const int64_t slices = (int64_t)B * H;
  const int64_t units = pool::threads() > 1 ? std::min<int64_t>(slices, 8 * pool::threads()) : 1;
  pool::run(units, [&](int64_t u) {
    for (int64_t bh = slices * u / units; bh < slices * (u + 1) / units; bh++) {
      const int64_t b = bh / H, h = bh % H;
      const float* x = qkv + (int64_t)b * T * rowStride + (int64_t)h * dh;
      float* o = out + (int64_t)b * T * dModel + (int64_t)h * dh;
      float* l = lse + ((int64_t)b * H + h) * T;
      if (tileHeadSize(dh) != 0) {
        tileForward(x, rowStride, dModel, o, l, T, dh, scale, causal);
      } else {
        attentionForwardHead(x, rowStride, dModel, o, l, T, dh, scale, causal);
      }
    }
  });
}

void attentionBackward(const float* qkv, const float* lse, const float* dOut, const float* out, float* dqkv,
                       int B, int T, int H, int dh, float scale, bool causal) {
  const int64_t dModel = (int64_t)H * dh, rowStride = 3 * dModel;
  const int64_t slices = (int64_t)B * H;
  const int64_t units = pool::threads() > 1 ? std::min<int64_t>(slices, 8 * pool::threads()) : 1;
  pool::run(units, [&](int64_t u) {
    for (int64_t bh = slices * u / units; bh < slices * (u + 1) / units; bh++) {
      const int64_t b = bh / H, h = bh % H;
      const int64_t off = (int64_t)b * T * rowStride + (int64_t)h * dh;
      const int64_t headOff = (int64_t)b * T * dModel + (int64_t)h * dh;
      const float* l = lse + ((int64_t)b * H + h) * T;
      if (out != nullptr && tileHeadSize(dh) != 0) {
        tileBackward(qkv + off, rowStride, dModel, l, dOut + headOff, out + headOff, dqkv + off, T, dh, scale,
                     causal);
      } else {
        attentionBackwardHead(qkv + off, rowStride, dModel, l, dOut + headOff, dqkv + off, T, dh, scale, causal);
      }
    }
  });
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
  const int64_t units = pool::threads() > 1 ? std::min<int64_t>(s.B, 8 * pool::threads()) : 1;
  pool::run(units, [&](int64_t u) {
    thread_local std::vector<float> q, v, row;
    q.resize((size_t)s.T * s.D);
    v.resize((size_t)s.T * s.c);
    row.resize(s.T);
    for (int64_t b = s.B * u / units; b < s.B * (u + 1) / units; b++)
      oneHotForwardSequence(tokens + b * s.T, wq, wv, logits + b * (s.T - s.from) * s.c,
                            probs + b * s.H * s.T * s.T, s, q.data(), v.data(), row.data());
  });
}

void oneHotAttentionBackward(const int32_t* tokens, const float* wq, const float* wv,
                             const float* probs, const float* dLogits, float* dwq, float* dwv,
                             const OneHotShape& s) {
  (void)wq;
  const int64_t nq = (int64_t)s.H * s.D * s.D, nv = (int64_t)s.H * s.D * s.dV;
  std::fill(dwq, dwq + nq, 0.f);
  std::fill(dwv, dwv + nv, 0.f);
  // The sequences are split in a fixed number of parts (not one per thread): part 0 accumulates
  // straight into the outputs, the others into their own tables, added in part order at the end,
  // so the result is the same for any thread count.
  const int64_t parts = std::min<int64_t>(s.B, 4);
  std::vector<float> extra((size_t)((parts - 1) * (nq + nv)), 0.f);
  pool::run(parts, [&](int64_t part) {
    float* myq = part == 0 ? dwq : extra.data() + (part - 1) * (nq + nv);
    float* myv = part == 0 ? dwv : myq + nq;
    thread_local std::vector<float> v, dv, dq, dA;
    v.resize((size_t)s.T * s.c);
    dv.resize((size_t)s.T * s.c);
    dq.resize((size_t)s.T * s.D);
    dA.resize(s.T);
    for (int64_t b = s.B * part / parts; b < s.B * (part + 1) / parts; b++)
      oneHotBackwardSequence(tokens + b * s.T, wv, probs + b * s.H * s.T * s.T,
                             dLogits + b * (s.T - s.from) * s.c, myq, myv, s, v.data(), dv.data(),
                             dq.data(), dA.data());
  });
  for (int64_t part = 1; part < parts; part++) {
    const float* tq = extra.data() + (part - 1) * (nq + nv);
    accumulate(dwq, tq, (int)nq);
    accumulate(dwv, tq + nq, (int)nv);
  }
}

namespace {

// Per-row weighted losses (rows with weight 0 give 0).
ATTN_MULTIVERSION
void crossEntropyRows(const float* logits, const int32_t* labels, const float* weights,
                      int64_t r0, int64_t r1, int cols, double* loss) {
  for (int64_t r = r0; r < r1; r++) {
    const float w = weights[r];
    if (w == 0.f) {
      loss[r] = 0;
      continue;
    }
    const float* x = logits + r * cols;
    float mx = x[0];
    for (int j = 1; j < cols; j++) mx = std::max(mx, x[j]);
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < cols; j++) sum += expApprox(x[j] - mx);
    loss[r] = (double)w * (double)(std::log(sum) + mx - x[labels[r]]);
  }
}

ATTN_MULTIVERSION
void crossEntropyBackwardRows(const float* logits, const int32_t* labels, const float* weights,
                              int64_t r0, int64_t r1, int cols, double scale, float* dLogits) {
  for (int64_t r = r0; r < r1; r++) {
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

}  // namespace

// Rows in parallel; the per-row losses are then summed in row order (thread-count independent).
double softmaxCrossEntropy(const float* logits, const int32_t* labels, const float* weights,
                           int64_t rows, int cols) {
  std::vector<double> loss((size_t)rows);
  parallelRows(rows, cols, [&](int64_t r0, int64_t r1) { crossEntropyRows(logits, labels, weights, r0, r1, cols, loss.data()); });
  double total = 0, weightSum = 0;
  for (int64_t r = 0; r < rows; r++) {
    weightSum += weights[r];
    total += loss[r];
  }
  return total / std::max(weightSum, 1e-12);
}

void softmaxCrossEntropyBackward(const float* logits, const int32_t* labels, const float* weights,
                                 int64_t rows, int cols, float dLoss, float* dLogits) {
  double weightSum = 0;
  for (int64_t r = 0; r < rows; r++) weightSum += weights[r];
  const double scale = (double)dLoss / std::max(weightSum, 1e-12);
  parallelRows(rows, cols, [&](int64_t r0, int64_t r1) { crossEntropyBackwardRows(logits, labels, weights, r0, r1, cols, scale, dLogits); });
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

// ---- sparse attention over key spans ----------------------------------------------------------
// One unit = one (query head, query tile). Keys come in chunks of up to kChunk (ascending, from
// the tile's spans); per row an online softmax (running max m, sum l, rescaled accumulator), as
// in FlashAttention (Dao et al. 2022, arXiv 2205.14135, Algorithm 1): no row of scores longer
// than one chunk is ever stored.

namespace {

constexpr int kChunk = 64;

struct SparseScratch {
  int dp = 0, dvp = 0, rows = 0;
  std::vector<float> kt, q, s, m, l, acc;
  std::vector<int32_t> idx;
  void resize(int dh, int dv, int tileRows) {
    dp = (dh + 15) / 16 * 16;
    dvp = (dv + 15) / 16 * 16;
    rows = tileRows;
    kt.assign((size_t)dp * kChunk, 0.f);
    q.assign((size_t)tileRows * dp, 0.f);
    s.assign(kChunk, 0.f);
    m.assign(tileRows, 0.f);
    l.assign(tileRows, 0.f);
    acc.assign((size_t)tileRows * dvp, 0.f);
    idx.assign(2 * kChunk, 0);
  }
};
thread_local SparseScratch tlsSparse;

ATTN_MULTIVERSION
void sparseTile(const float* q, const float* k, const float* v, float* out, const int32_t* spans,
                int64_t s0, int64_t s1, int r0, int r1, const SparseShape& sh) {
  SparseScratch& w = tlsSparse;
  const int dh = sh.dh, dv = sh.dv, n = r1 - r0;
  if (w.dp != (dh + 15) / 16 * 16 || w.dvp != (dv + 15) / 16 * 16 || w.rows < n)
    w.resize(dh, dv, std::max(n, sh.tileRows));
  const int dp = w.dp, dvp = w.dvp;
  const bool packed = n >= 4;  // decode-like tiles: direct dot products, no transposed copy
  for (int r = 0; r < n; r++) {
    float* qr = w.q.data() + (int64_t)r * dp;
    for (int d = 0; d < dh; d++) qr[d] = q[(int64_t)(r0 + r) * dh + d] * sh.scale;
    for (int d = dh; d < dp; d++) qr[d] = 0.f;
    w.m[r] = -INFINITY;
    w.l[r] = 0.f;
    std::fill(w.acc.begin() + (int64_t)r * dvp, w.acc.begin() + (int64_t)(r + 1) * dvp, 0.f);
  }
  const int64_t lastKey = (int64_t)r1 - 1 + sh.causalOffset;  // no row reads a key after this
  int64_t span = s0, next = s0 < s1 ? spans[2 * s0] : 0;
  float* s = w.s.data();
  // Two chunks of key indices: the next one is gathered (and, for decode-like tiles, its rows
  // requested) before the current one is computed.
  int32_t* idx = w.idx.data();
  int32_t* ahead = w.idx.data() + kChunk;
  auto gather = [&](int32_t* into) {
    int c = 0;
    while (c < kChunk && span < s1) {
      const int64_t stop = std::min<int64_t>(spans[2 * span + 1], lastKey + 1);
      if (next >= stop) {
        span++;
        if (span < s1) next = spans[2 * span];
        continue;
      }
      into[c++] = (int32_t)next++;
    }
    if (!packed) {
      // Decode-like tiles read scattered runs (Quest's pages): request every key and value row of the
      // chunk a chunk ahead, so the loads overlap the computation instead of restarting the hardware
      // prefetcher at each run (64-byte lines).
      for (int j = 0; j < c; j++) {
        const char* kr = (const char*)(k + (int64_t)into[j] * dh);
        const char* vr = (const char*)(v + (int64_t)into[j] * dv);
        for (int64_t b = 0; b < (int64_t)dh * 4; b += 64) __builtin_prefetch(kr + b, 0, 3);
        for (int64_t b = 0; b < (int64_t)dv * 4; b += 64) __builtin_prefetch(vr + b, 0, 3);
      }
    }
    return c;
  };
  int cAhead = gather(ahead);
  for (;;) {
    std::swap(idx, ahead);
    const int c = cAhead;
    if (c == 0) break;
    cAhead = gather(ahead);
    if (packed) {
      for (int j = 0; j < c; j++) {
        const float* kr = k + (int64_t)idx[j] * dh;
        for (int d = 0; d < dh; d++) w.kt[(int64_t)d * kChunk + j] = kr[d];
      }
      for (int j = c; j < (c + 15) / 16 * 16; j++)
        for (int d = 0; d < dh; d++) w.kt[(int64_t)d * kChunk + j] = 0.f;
    }
    for (int r = 0; r < n; r++) {
      const int64_t limit = (int64_t)(r0 + r) + sh.causalOffset;
      int cn = c;
      while (cn > 0 && idx[cn - 1] > limit) cn--;
      if (cn == 0) continue;
      const float* qr = w.q.data() + (int64_t)r * dp;
      if (packed) {
        rowTimesMatrix(qr, w.kt.data(), dh, kChunk, cn, s);
      } else {
        for (int j = 0; j < cn; j++) {
          const float* kr = k + (int64_t)idx[j] * dh;
          float dot = 0.f;
#pragma omp simd reduction(+ : dot)
          for (int d = 0; d < dh; d++) dot += qr[d] * kr[d];
          s[j] = dot;
        }
      }
      float mx = w.m[r];
      for (int j = 0; j < cn; j++) mx = std::max(mx, s[j]);
      float* acc = w.acc.data() + (int64_t)r * dvp;
      if (mx != w.m[r]) {
        const float correction = w.m[r] == -INFINITY ? 0.f : expApprox(w.m[r] - mx);
        w.l[r] *= correction;
        for (int d = 0; d < dvp; d++) acc[d] *= correction;
        w.m[r] = mx;
      }
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < cn; j++) {
        s[j] = expApprox(s[j] - mx);
        sum += s[j];
      }
      w.l[r] += sum;
      for (int d0 = 0; d0 < dvp; d0 += 16) {
        v16 a0 = {}, a1 = {};
        int j = 0;
        for (; j + 2 <= cn; j += 2) {
          const float* va = v + (int64_t)idx[j] * dv + d0;
          const float* vb = v + (int64_t)idx[j + 1] * dv + d0;
          if (d0 + 16 <= dv) {
            a0 += s[j] * *(const v16u*)va;
            a1 += s[j + 1] * *(const v16u*)vb;
          } else {
            for (int d = 0; d < dv - d0; d++) {
              a0[d] += s[j] * va[d];
              a1[d] += s[j + 1] * vb[d];
            }
          }
        }
        for (; j < cn; j++) {
          const float* va = v + (int64_t)idx[j] * dv + d0;
          if (d0 + 16 <= dv) a0 += s[j] * *(const v16u*)va;
          else
            for (int d = 0; d < dv - d0; d++) a0[d] += s[j] * va[d];
        }
        *(v16u*)(acc + d0) += a0 + a1;
      }
    }
  }
  for (int r = 0; r < n; r++) {
    const float inv = w.l[r] > 0.f ? 1.f / w.l[r] : 0.f;
    const float* acc = w.acc.data() + (int64_t)r * dvp;
    float* o = out + (int64_t)(r0 + r) * dv;
    for (int d = 0; d < dv; d++) o[d] = acc[d] * inv;
  }
}

}  // namespace

void sparseAttention(const float* q, const float* k, const float* v, float* out,
                     const int32_t* tileStarts, const int32_t* spans, const SparseShape& sh) {
  const int64_t tiles = (sh.rows + sh.tileRows - 1) / sh.tileRows;
  const int64_t units = sh.heads * tiles;
  pool::run(units, [&](int64_t u) {
    const int64_t head = u / tiles, t = u % tiles;
    const int64_t kv = head / sh.group;
    const int r0 = (int)(t * sh.tileRows), r1 = (int)std::min<int64_t>(sh.rows, (t + 1) * sh.tileRows);
    sparseTile(q + head * sh.rows * sh.dh, k + kv * sh.keys * sh.dh, v + kv * sh.keys * sh.dv,
               out + head * sh.rows * sh.dv, spans, tileStarts[u], tileStarts[u + 1], r0, r1, sh);
  });
}

namespace {

// Quest's page upper bounds of one query head, d by d (vectorised over pages, each page summed
// over d in order, so every engine gets the same float32 sums): score[p] = sum_d max(q_d min[d][p],
// q_d max[d][p]), each term computed as q_d (q_d < 0 ? min : max).
ATTN_MULTIVERSION
void pageScoresRow(const float* q, const float* bmin, const float* bmax, int pages, int64_t capacity, int dh,
                   float* score) {
  for (int p = 0; p < pages; p++) score[p] = 0.f;
  // max(x lo, x hi) is x hi for x >= 0 (or NaN) and x lo for x < 0, bit for bit, special values
  // included (lo <= hi on full pages, and a zero lo and hi share their sign): one bound read per
  // dimension, half the memory of reading both.
  for (int d = 0; d < dh; d++) {
    const float x = q[d];
    const float* b = (x < 0.f ? bmin : bmax) + (int64_t)d * capacity;
#pragma omp simd
    for (int p = 0; p < pages; p++) score[p] += x * b[p];
  }
}

// The k largest of score[0 .. n) (ties to the lower index, NaN below every number), ascending
// indices into out: the k-th largest number by nth_element, then every index above it and the
// lowest indices equal to it.
void topKAscending(const float* score, int n, int k, int32_t* out, std::vector<float>& numbers,
                   std::vector<uint8_t>& chosen) {
  k = std::max(0, std::min(k, n));
  numbers.clear();
  chosen.assign(n, 0);
  for (int i = 0; i < n; i++)
    if (!std::isnan(score[i])) numbers.push_back(score[i]);
  const int m = (int)numbers.size();
  if (k >= m) {
    int nans = k - m;
    for (int i = 0; i < n; i++) {
      if (!std::isnan(score[i])) chosen[i] = 1;
      else if (nans > 0) {
        chosen[i] = 1;
        nans--;
      }
    }
  } else if (k > 0) {
    std::nth_element(numbers.begin(), numbers.begin() + (m - k), numbers.end());
    const float threshold = numbers[m - k];
    int left = k;
    for (int i = 0; i < n; i++)
      if (score[i] > threshold) {
        chosen[i] = 1;
        left--;
      }
    for (int i = 0; i < n && left > 0; i++)
      if (score[i] == threshold) {
        chosen[i] = 1;
        left--;
      }
  }
  int c = 0;
  for (int i = 0; i < n; i++)
    if (chosen[i]) out[c++] = i;
}

struct PageScratch {
  std::vector<float> score, sum, numbers;
  std::vector<uint8_t> chosen;
};
thread_local PageScratch tlsPages;

}  // namespace

void pageSelect(const float* q, const float* bounds, int32_t* chosen, const PageShape& sh) {
  const int64_t kvRows = sh.heads / sh.group;
  const int k = std::min(sh.budget, sh.pages);
  const int64_t rowFloats = 2 * (int64_t)sh.dh * sh.capacity;
  // one unit per KV row with shared pages, else per query head
  const int64_t units = sh.share ? kvRows : sh.heads;
  pool::run(units, [&](int64_t u) {
    PageScratch& w = tlsPages;
    w.score.resize(sh.pages);
    const int64_t kv = sh.share ? u : u / sh.group;
    const float* bmin = bounds + kv * rowFloats;
    const float* bmax = bmin + (int64_t)sh.dh * sh.capacity;
    if (!sh.share) {
      pageScoresRow(q + u * sh.dh, bmin, bmax, sh.pages, sh.capacity, sh.dh, w.score.data());
      topKAscending(w.score.data(), sh.pages, k, chosen + u * sh.budget, w.numbers, w.chosen);
      return;
    }
    w.sum.assign(sh.pages, 0.f);
    for (int g = 0; g < sh.group; g++) {
      pageScoresRow(q + (kv * sh.group + g) * sh.dh, bmin, bmax, sh.pages, sh.capacity, sh.dh, w.score.data());
      for (int p = 0; p < sh.pages; p++) w.sum[p] += w.score[p];
    }
    int32_t* first = chosen + kv * sh.group * sh.budget;
    topKAscending(w.sum.data(), sh.pages, k, first, w.numbers, w.chosen);
    for (int g = 1; g < sh.group; g++) std::copy(first, first + k, first + g * sh.budget);
  });
}

}  // namespace attn

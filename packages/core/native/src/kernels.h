// attnlab native kernels: plain C++17 on raw float pointers (no Node, no tfjs). Row-major.
// Semantics and layouts: packages/core/src/kernels/provider.ts (KernelProvider); the plain-JS
// reference is src/kernels/js-provider.ts. Inputs are validated by the caller.
#pragma once
#include <cstdint>

namespace attn {

// C[b] = op(A[b]) @ op(B[b]) for b < batch; op(A) is M x K (stored K x M if transA), op(B) is
// K x N (stored N x K if transB), C[b] is M x N (batch stride M*N). Strides of 0 broadcast.
void gemm(bool transA, bool transB, int batch, int M, int N, int K, const float* A, int64_t strideA,
          const float* B, int64_t strideB, float* C);
// y = softmax(x) over rows of length cols; -inf entries give exactly 0.
void softmaxRows(const float* x, float* y, int64_t rows, int cols);
// out[r, :] = sum_m table[indices[r, m], :] (indices in range), and its adjoint (out zeroed first).
void gatherRows(const float* table, const int32_t* indices, float* out, int64_t n, int k, int width);
void scatterRows(const float* updates, const int32_t* indices, float* out, int64_t n, int k, int width,
                 int64_t rows);
// C[r, :] += bias.
void addBias(float* C, int64_t rows, int cols, const float* bias);
// out = a + b (n elements).
void addArrays(const float* a, const float* b, float* out, int64_t n);
// out[j] = sum_r x[r, j].
void columnSum(const float* x, float* out, int64_t rows, int cols);
// GELU, tanh approximation, and its derivative times dy.
void geluForward(const float* x, float* y, int64_t n);
void geluBackward(const float* x, const float* dy, float* dx, int64_t n);
// LayerNorm over rows; b / db may be null (no bias).
void layerNormForward(const float* x, const float* g, const float* b, float* y, float* mean,
                      float* rstd, int64_t rows, int cols, float eps);
void layerNormBackward(const float* x, const float* g, const float* mean, const float* rstd,
                       const float* dy, float* dx, float* dg, float* db, int64_t rows, int cols);
// Multi-head attention on qkv [B, T, 3, H, dh] -> out [B, T, H, dh] and the rows' log-sum-exp of
// the scaled scores lse [B, H, T] (no T x T pattern: the backward recomputes it from lse). The
// backward takes the forward's out for D = rowsum(dO o out) (FlashAttention-2); with out null, or
// dh > 64, it runs the row kernels, which compute D from the recomputed pattern instead.
void attentionForward(const float* qkv, float* out, float* lse, int B, int T, int H, int dh,
                      float scale, bool causal);
void attentionBackward(const float* qkv, const float* lse, const float* dOut, const float* out,
                       float* dqkv, int B, int T, int H, int dh, float scale, bool causal);
// Weighted mean softmax cross-entropy (nats) and its gradient.
double softmaxCrossEntropy(const float* logits, const int32_t* labels, const float* weights,
                           int64_t rows, int cols);
void softmaxCrossEntropyBackward(const float* logits, const int32_t* labels, const float* weights,
                                 int64_t rows, int cols, float dLoss, float* dLogits);
// The minimal model's attention on one-hot inputs (gather form). wq [H, D, D], wv [H, D, dV],
// tokens [B, T] in [0, d), logits [B, T - from, c] (queries t >= from), probs [B, H, T, T]
// (rows t < from zero).
struct OneHotShape {
  int B, T, H, D, dV, d, c;
  float scale;
  int from;
};
void oneHotAttentionForward(const int32_t* tokens, const float* wq, const float* wv, float* logits,
                            float* probs, const OneHotShape& s);
void oneHotAttentionBackward(const int32_t* tokens, const float* wq, const float* wv,
                             const float* probs, const float* dLogits, float* dwq, float* dwv,
                             const OneHotShape& s);
// Sparse attention over key spans (provider.ts, KernelProvider.sparseAttention): q [heads, rows,
// dh], k [heads / group, keys, dh], v [heads / group, keys, dv], out [heads, rows, dv]; tile u =
// head * tiles + t (rows [t tileRows, ...)) reads keys in spans[2 s], spans[2 s + 1] for s in
// [tileStarts[u], tileStarts[u + 1]) (ascending, disjoint), row i only keys <= i + causalOffset.
struct SparseShape {
  int64_t heads;
  int group, rows, keys, dh, dv, tileRows;
  float scale;
  int64_t causalOffset;
};
void sparseAttention(const float* q, const float* k, const float* v, float* out,
                     const int32_t* tileStarts, const int32_t* spans, const SparseShape& s);

// Quest's page selection (provider.ts, KernelProvider.pageSelect): q [heads, dh], bounds [heads /
// group, 2, dh, capacity] (per KV row the page minima then maxima, d-major), chosen [heads, budget]:
// the min(budget, pages) pages of largest upper bound sum_d max(q_d min, q_d max) in ascending order
// (ties to the lower page, NaN last); with share the bounds of a GQA group's heads are summed.
struct PageShape {
  int64_t heads;
  int group, pages, dh, budget;
  int64_t capacity;
  bool share;
};
void pageSelect(const float* q, const float* bounds, int32_t* chosen, const PageShape& s);

// AdamW in place (PyTorch semantics), step from 1.
void adamw(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
           float beta2, float eps, float weightDecay, int step);

// Threads of the kernels' team, the caller included (pool.h). Results do not depend on it: work is
// split so that every output element is computed the same way on any thread, and sums over rows
// use chunks that depend only on the shapes.
void setThreads(int n);
int getThreads();
// Whether -fopenmp was used (omp simd hints only).
bool haveOpenMP();
// Which clone of the multiversioned kernels this CPU runs ("x86-64-v4", "x86-64-v3", "baseline").
const char* cpuLevel();

}  // namespace attn

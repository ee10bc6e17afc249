/**
 * The contract every kernel provider implements: plain compute functions on flat, row-major
 * float32/int32 arrays. The registration layer ({@link registerAttnlabKernels}) turns tfjs
 * tensors into such arrays (views of the backend's own memory: no copies) and calls these.
 *
 * Three providers implement it: `native` (a C++ Node addon, `@attnlab/core/node`), `wasm`
 * (AssemblyScript compiled to WebAssembly SIMD, computing on the tfjs wasm backend's heap; Node
 * and browsers) and `js` (plain JavaScript: the reference, and the `cpu` backend's kernels).
 *
 * Conventions shared by every function: arrays are row-major; sizes are element counts; inputs
 * are already validated (shapes, token ranges) by the caller; outputs are fully overwritten. A
 * call may grow the wasm backend's memory (the `wasm` provider allocates scratch there), which
 * detaches views of it: callers take fresh views for every call.
 *
 * @module
 */

/** The names of the kernel providers. @category Kernels */
export type KernelProviderName = 'native' | 'wasm' | 'js'

/** A contiguous float32 array (often a view of a tfjs backend's memory). @category Kernels */
export type FloatArray = Float32Array
/** A contiguous int32 array (token ids, labels). @category Kernels */
export type IntArray = Int32Array

/**
 * Compute kernels on flat arrays. All matrices are row-major.
 *
 * @category Kernels
 */
export interface KernelProvider {
  /** Which implementation this is. */
  readonly name: KernelProviderName
  /**
   * Whether this provider's matmul beats the backend's own for every shape, so it may replace
   * the stock `BatchMatMul` / `_FusedMatMul` kernels (true for `native` and `wasm` on the wasm
   * backend, false for `js`).
   */
  readonly fastMatMul: boolean
  /**
   * `c[i] = op(a[i]) @ op(b[i])` for `i < batch`, where `op(a[i])` is `[m, k]` (stored `[k, m]`
   * when `transposeA`), `op(b[i])` is `[k, n]` (stored `[n, k]` when `transposeB`) and `c[i]`
   * is `[m, n]`. Batch strides are in elements; a stride of 0 broadcasts that operand.
   */
  gemm(
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
  ): void
  /** `y = softmax(x)` over the last axis of `x [rows, cols]`; `-Infinity` gives exactly 0. */
  softmax(x: FloatArray, y: FloatArray, rows: number, cols: number): void
  /**
   * Row gathers: `out[r, :] = sum_m table[indices[r, m], :]` for `table [rows, width]`,
   * `indices [n, k]` (in range), `out [n, width]` (k = 1: an embedding lookup).
   */
  gatherRows(table: FloatArray, indices: IntArray, out: FloatArray, n: number, k: number, width: number): void
  /**
   * The adjoint of {@link KernelProvider.gatherRows}: `out [rows, width]` = 0, then
   * `out[indices[r, m], :] += updates[r, :]`.
   */
  scatterRows(
    updates: FloatArray,
    indices: IntArray,
    out: FloatArray,
    n: number,
    k: number,
    width: number,
    rows: number,
  ): void
  /** `c[r, :] += bias` for `c [rows, cols]`, `bias [cols]` (in place). */
  addBias(c: FloatArray, rows: number, cols: number, bias: FloatArray): void
  /**
   * `out = a + b` elementwise (`n` elements). Optional: when present, the stock `Add` kernel is
   * replaced for float32 inputs of one shape (residual streams and their gradients).
   */
  add?(a: FloatArray, b: FloatArray, out: FloatArray, n: number): void
  /** `out[j] = sum_r x[r, j]` for `x [rows, cols]`. */
  columnSum(x: FloatArray, out: FloatArray, rows: number, cols: number): void
  /** GELU, tanh approximation (`gelu_new`): `y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, `n` elements. */
  geluForward(x: FloatArray, y: FloatArray, n: number): void
  /** `dx = dy * gelu'(x)` for the tanh approximation, `n` elements. */
  geluBackward(x: FloatArray, dy: FloatArray, dx: FloatArray, n: number): void
  /**
   * LayerNorm over the last axis of `x [rows, cols]`: `y = (x - mean) * rstd * gain + bias`
   * (`rstd = 1 / sqrt(var + eps)`, biased variance); writes `mean [rows]` and `rstd [rows]`.
   * `bias` may be null (no bias).
   */
  layerNormForward(
    x: FloatArray,
    gain: FloatArray,
    bias: FloatArray | null,
    y: FloatArray,
    mean: FloatArray,
    rstd: FloatArray,
    rows: number,
    cols: number,
    eps: number,
  ): void
  /** Gradients of {@link KernelProvider.layerNormForward}: `dx`, `dGain` and (unless null) `dBias`. */
  layerNormBackward(
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
  ): void
  /**
   * What {@link KernelProvider.attentionForward} saves for the backward pass in `probs`:
   * `'probabilities'` (default) the pattern `[batch, nHeads, pos, pos]`; `'logSumExp'` only each
   * query row's log-sum-exp of the scaled scores, `[batch, nHeads, pos]`, from which the backward
   * recomputes the pattern (FlashAttention, Dao et al. 2022, arXiv 2205.14135, §3.1): no `T x T`
   * buffer is written or read.
   */
  readonly attentionSaves?: 'probabilities' | 'logSumExp'
  /**
   * Multi-head attention on a fused projection: `qkv [batch, pos, 3 * nHeads * dHead]` (column
   * blocks q | k | v, heads contiguous inside each) -> `out [batch, pos, nHeads * dHead]` and in
   * `probs` what {@link KernelProvider.attentionSaves} names: the pattern `[batch, nHeads, pos, pos]`
   * (exactly 0 above the diagonal when `causal`) or the rows' log-sum-exp `[batch, nHeads, pos]`.
   */
  attentionForward(
    qkv: FloatArray,
    out: FloatArray,
    probs: FloatArray,
    batch: number,
    pos: number,
    nHeads: number,
    dHead: number,
    scale: number,
    causal: boolean,
  ): void
  /**
   * `dQkv [batch, pos, 3 * nHeads * dHead]` from `dOut [batch, pos, nHeads * dHead]`. `out` is the
   * forward's output `[batch, pos, nHeads * dHead]` when the caller has it: a provider that saves
   * `'logSumExp'` may use it for `D = rowsum(dOut * out)` (FlashAttention-2, Dao 2023, arXiv
   * 2307.08691, Algorithm 2) instead of recomputing `D` from the pattern; others ignore it.
   */
  attentionBackward(
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
    out?: FloatArray,
  ): void
  /**
   * Weighted mean softmax cross-entropy (nats): `sum_r w_r (logsumexp(x_r) - x_r[label_r]) /
   * max(sum_r w_r, 1e-12)` for `logits [rows, cols]`, `labels [rows]` in `[0, cols)`, and
   * `weights [rows]` (null = all ones).
   */
  softmaxCrossEntropy(
    logits: FloatArray,
    labels: IntArray,
    weights: FloatArray | null,
    rows: number,
    cols: number,
  ): number
  /** `dLogits = dLoss * w_r (softmax(x_r) - onehot(label_r)) / max(sum w, 1e-12)`. */
  softmaxCrossEntropyBackward(
    logits: FloatArray,
    labels: IntArray,
    weights: FloatArray | null,
    rows: number,
    cols: number,
    dLoss: number,
    dLogits: FloatArray,
  ): void
  /**
   * The minimal model's attention layer on one-hot inputs `x_t = onehot(tokens[b, t]) +
   * onehot(dVocab + t)` (width `dModel`), computed with gathers: per head `h`,
   * `S = scale (X W_Q^h) X^T` (causal), `A = softmax(S)`, `logits += A X W_V^h[:, :outCols]`.
   * `wq [nHeads, dModel, dModel]`, `wv [nHeads, dModel, dValue]` (TransformerLens layout),
   * `tokens [batch, pos]` in `[0, dVocab)`, `dVocab + pos <= dModel`. Writes
   * `logits [batch, pos - from, outCols]` (queries `t >= from`) and `probs [batch, nHeads, pos, pos]`.
   */
  oneHotAttentionForward(
    tokens: IntArray,
    wq: FloatArray,
    wv: FloatArray,
    logits: FloatArray,
    probs: FloatArray,
    shape: OneHotAttentionShape,
  ): void
  /** `dWq [nHeads, dModel, dModel]` and `dWv [nHeads, dModel, dValue]` (columns `>= outCols` zero) from `dLogits`. */
  oneHotAttentionBackward(
    tokens: IntArray,
    wq: FloatArray,
    wv: FloatArray,
    probs: FloatArray,
    dLogits: FloatArray,
    dWq: FloatArray,
    dWv: FloatArray,
    shape: OneHotAttentionShape,
  ): void
  /**
   * AdamW in place with PyTorch's semantics: `m = b1 m + (1 - b1) g`, `v = b2 v + (1 - b2) g^2`,
   * `p = p (1 - lr wd) - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`.
   */
  adamw(p: FloatArray, g: FloatArray, m: FloatArray, v: FloatArray, n: number, hyper: AdamWHyper): void
  /**
   * Exact softmax attention restricted to key spans, tile by tile of query rows, with an online
   * softmax over chunks of keys (FlashAttention, Dao et al. 2022, arXiv 2205.14135, Algorithm 1):
   * never a `rows x keys` buffer. The sparse prefill and decode kernels of
   * `@attnlab/sparse-attention` (block index, Vertical-Slash blocks plus columns, Quest pages,
   * SnapKV's kept tokens) all reduce to this form. See {@link SparseAttentionShape} for the layout.
   * A row that reads no key gets zeros.
   */
  sparseAttention(
    q: FloatArray,
    k: FloatArray,
    v: FloatArray,
    out: FloatArray,
    tileStarts: IntArray,
    spans: IntArray,
    shape: SparseAttentionShape,
  ): void
  /**
   * Quest's page selection for one decode query per head (Tang et al. 2024, arXiv 2406.10774, §3):
   * every page's upper bound of `q . k`, `sum_d max(q_d min_d, q_d max_d)` over the page's key
   * minima and maxima (each term computed as `q_d * (q_d < 0 ? min_d : max_d)`, equal bit for bit
   * when `min_d <= max_d`), and the `min(budget, pages)` pages of largest bound per head, written in
   * ascending page order (ties to the lower page, `NaN` below every number). With `share` the
   * bounds of a GQA group's heads are summed and the group reads the same pages. Every engine sums
   * in float32, `d` by `d` for each page, then over the group's heads in order: the same scores and
   * pages on every engine. See {@link PageSelectShape} for the layout.
   */
  pageSelect(q: FloatArray, bounds: FloatArray, chosen: IntArray, shape: PageSelectShape): void
  /** Sets the number of threads the provider may use (native only; others ignore it). */
  setThreads(threads: number): void
  /** The number of threads in use. */
  threads(): number
}

/**
 * Sizes and index layout of {@link KernelProvider.sparseAttention}.
 *
 * - `q [heads, rows, dHead]`, `k [heads / group, keys, dHead]`, `v [heads / group, keys, dValue]`,
 *   `out [heads, rows, dValue]` (flat head `b * nHeads + h` reads KV head `floor(head / group)`).
 * - Query tile `t` of head `h` is rows `[t * tileRows, min(rows, (t + 1) * tileRows))`; its index
 *   is `u = h * ceil(rows / tileRows) + t`. `tileStarts [heads * tiles + 1]` (non-decreasing, from
 *   0) delimits its spans: `spans[2 s], spans[2 s + 1]` for `s` in `[tileStarts[u], tileStarts[u + 1])`,
 *   half-open key ranges, ascending and disjoint, within `[0, keys]`.
 * - Row `i` reads the keys of its tile's spans that are `<= i + causalOffset` (prefill: 0, the
 *   causal mask; decode over cache slots: `keys`, no mask).
 *
 * @category Kernels
 */
export interface SparseAttentionShape {
  /** Query heads, batch folded in (`batch * nHeads`). */
  readonly heads: number
  /** Query heads per KV head (grouped-query attention; 1 for multi-head). */
  readonly group: number
  /** Query rows per head. */
  readonly rows: number
  /** Key/value rows per KV head. */
  readonly keys: number
  /** Query/key width. */
  readonly dHead: number
  /** Value width. */
  readonly dValue: number
  /** Query rows per tile (>= 1). */
  readonly tileRows: number
  /** Multiplier of `q . k`. */
  readonly scale: number
  /** Row `i` reads keys `<= i + causalOffset` (>= 0). */
  readonly causalOffset: number
}

/**
 * Sizes and layout of {@link KernelProvider.pageSelect}.
 *
 * - `q [heads, dHead]` (one decode query per head, batch folded in), `bounds [heads / group, 2,
 *   dHead, capacity]`: per KV row the page minima then the page maxima, dimension-major (page `p`
 *   of dimension `d` at `d * capacity + p`); only pages `0 .. pages - 1` are read.
 * - `chosen [heads, budget]`: the selected pages of each head in ascending order (`budget <= pages`).
 *
 * @category Kernels
 */
export interface PageSelectShape {
  /** Query heads, batch folded in (`batch * nHeads`). */
  readonly heads: number
  /** Query heads per KV row (grouped-query attention; 1 for multi-head). */
  readonly group: number
  /** Pages to score (`<= capacity`). */
  readonly pages: number
  /** Page stride of `bounds` (`>= pages`). */
  readonly capacity: number
  /** Query/key width. */
  readonly dHead: number
  /** Pages chosen per head (`<= pages`). */
  readonly budget: number
  /** Sum the scores of a GQA group's heads and give the group the same pages. */
  readonly share: boolean
}

/**
 * The sizes of a {@link SparseAttentionShape} in the argument order of the compiled kernels (the native
 * addon's and the WebAssembly module's `sparseAttention`, after the six buffers).
 */
export const sparseAttentionSizes = (
  s: SparseAttentionShape,
): [number, number, number, number, number, number, number, number, number] => [
  s.heads,
  s.group,
  s.rows,
  s.keys,
  s.dHead,
  s.dValue,
  s.tileRows,
  s.scale,
  s.causalOffset,
]

/** Sizes of a one-hot attention call (see {@link KernelProvider.oneHotAttentionForward}). @category Kernels */
export interface OneHotAttentionShape {
  /** Sequences in the batch. */
  readonly batch: number
  /** Positions per sequence. */
  readonly pos: number
  /** Attention heads. */
  readonly nHeads: number
  /** Width of the one-hot input (rows and columns of each `W_Q^h`, rows of each `W_V^h`). */
  readonly dModel: number
  /** Columns of each `W_V^h`. */
  readonly dValue: number
  /** Token vocabulary; position `t`'s one-hot is at `dVocab + t`. */
  readonly dVocab: number
  /** Output columns (the first `outCols` columns of `W_V^h`). */
  readonly outCols: number
  /** Score multiplier (1 in the minimal model). */
  readonly scale: number
  /**
   * First position whose logits are produced: `logits` is `[batch, pos - from, outCols]` and the
   * pattern rows of earlier queries are left 0 (they affect nothing that is returned).
   */
  readonly from: number
}

/** AdamW hyperparameters for one update (step counted from 1). @category Kernels */
export interface AdamWHyper {
  /** Learning rate. */
  readonly lr: number
  /** First-moment decay. */
  readonly beta1: number
  /** Second-moment decay. */
  readonly beta2: number
  /** Denominator epsilon. */
  readonly eps: number
  /** Decoupled weight decay (applied as `p *= 1 - lr * weightDecay`). */
  readonly weightDecay: number
  /** The update's step number, from 1 (bias corrections). */
  readonly step: number
}

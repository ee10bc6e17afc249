/**
 * The plain-JavaScript sparse attention over key spans ({@link KernelProvider.sparseAttention}):
 * the `js` provider's kernel, the reference of the native and WebAssembly ones, and the fallback
 * of the `sparseAttention` op on backends without attnlab kernels. Online softmax per row, key by
 * key (FlashAttention, Dao et al. 2022, arXiv 2205.14135, Algorithm 1), in doubles.
 *
 * @module
 */
import type { FloatArray, IntArray, KernelProvider, SparseAttentionShape } from './provider.ts'

/**
 * {@link KernelProvider.sparseAttention} in plain JavaScript (inputs already validated).
 *
 * @param q - queries, `[heads, rows, dHead]`
 * @param k - keys, `[heads / group, keys, dHead]`
 * @param v - values, `[heads / group, keys, dValue]`
 * @param out - output, `[heads, rows, dValue]` (overwritten)
 * @param tileStarts - `[heads * tiles + 1]` span offsets per tile
 * @param spans - `[2 * spans]` half-open key ranges
 * @param shape - sizes (see {@link SparseAttentionShape})
 * @category Kernels
 */
export function sparseAttentionJs(
  q: FloatArray,
  k: FloatArray,
  v: FloatArray,
  out: FloatArray,
  tileStarts: IntArray,
  spans: IntArray,
  shape: SparseAttentionShape,
): void {
  const { heads, group, rows, dHead, dValue, tileRows, scale, causalOffset } = shape
  const keys = shape.keys
  const tiles = Math.ceil(rows / tileRows)
  const acc = new Float64Array(dValue)
  for (let head = 0; head < heads; head++) {
    const kv = Math.floor(head / group)
    const kBase = kv * keys * dHead
    const vBase = kv * keys * dValue
    for (let t = 0; t < tiles; t++) {
      const u = head * tiles + t
      const s0 = tileStarts[u]!
      const s1 = tileStarts[u + 1]!
      const r1 = Math.min(rows, (t + 1) * tileRows)
      for (let i = t * tileRows; i < r1; i++) {
        const qBase = (head * rows + i) * dHead
        const limit = i + causalOffset
        let m = -Infinity
        let l = 0
        acc.fill(0)
        for (let s = s0; s < s1; s++) {
          const stop = Math.min(spans[2 * s + 1]!, limit + 1)
          for (let j = spans[2 * s]!; j < stop; j++) {
            let dot = 0
            const kRow = kBase + j * dHead
            for (let d = 0; d < dHead; d++) dot += q[qBase + d]! * k[kRow + d]!
            const score = Math.fround(dot * scale)
            if (score > m) {
              const correction = m === -Infinity ? 0 : Math.exp(m - score)
              l *= correction
              for (let d = 0; d < dValue; d++) acc[d]! *= correction
              m = score
            }
            const p = Math.exp(score - m)
            l += p
            const vRow = vBase + j * dValue
            for (let d = 0; d < dValue; d++) acc[d]! += p * v[vRow + d]!
          }
        }
        const o = (head * rows + i) * dValue
        const inv = l > 0 ? 1 / l : 0
        for (let d = 0; d < dValue; d++) out[o + d] = acc[d]! * inv
      }
    }
  }
}

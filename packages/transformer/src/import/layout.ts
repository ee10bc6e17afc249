/**
 * Weight layouts: the TransformerLens-style per-head layout attnlab's `llama` architecture uses,
 * PyTorch's `nn.Linear` `[out, in]` layout that llama2.c and Hugging Face store, and the two RoPE
 * layouts (llama2.c's interleaved pairs, Hugging Face's rotate-half halves).
 *
 * Pure functions on row-major `Float32Array`s; every one returns a new array.
 *
 * @module
 */
import { ShapeError } from '@attnlab/core'

/**
 * A float32 tensor as plain data: row-major values and their shape. What importers produce and
 * exporters consume (no tfjs tensors, so nothing to dispose and nothing created before a whole
 * checkpoint has been validated).
 *
 * @category Import
 */
export interface Float32Tensor {
  /** Dimensions, outermost first. */
  readonly shape: readonly number[]
  /** Row-major values; `data.length` is the product of `shape`. */
  readonly data: Float32Array
}

/**
 * Named float32 tensors, in a meaningful order (file order or parameter order).
 *
 * @category Import
 */
export type TensorMap = Map<string, Float32Tensor>

/** Number of elements of a shape. */
export function numel(shape: readonly number[]): number {
  let n = 1
  for (const d of shape) n *= d
  return n
}

function check(data: Float32Array, expected: number, what: string): void {
  if (data.length !== expected) {
    throw new ShapeError(`${what}: ${data.length} values, expected ${expected}`, { length: data.length, expected })
  }
}

/**
 * Transposes a row-major matrix `[rows, cols]` to `[cols, rows]`.
 *
 * @param data - `[rows, cols]` values
 * @throws `ShapeError` when `data.length !== rows * cols`
 */
export function transpose2d(data: Float32Array, rows: number, cols: number): Float32Array {
  check(data, rows * cols, 'transpose2d')
  const out = new Float32Array(rows * cols)
  for (let r = 0; r < rows; r++) {
    const base = r * cols
    for (let c = 0; c < cols; c++) out[c * rows + r] = data[base + c] as number
  }
  return out
}

/**
 * An input projection stored as `nn.Linear` weight `[heads * dHead, dModel]` (rows = output
 * features, head-major) to attnlab's per-head layout `[heads, dModel, dHead]`:
 * `out[h, i, d] = w[h * dHead + d, i]`. Used for `W_Q`, `W_K`, `W_V`.
 *
 * @throws `ShapeError` on a length mismatch
 */
export function linearToHeads(w: Float32Array, heads: number, dModel: number, dHead: number): Float32Array {
  check(w, heads * dHead * dModel, 'linearToHeads')
  const out = new Float32Array(w.length)
  for (let h = 0; h < heads; h++) {
    for (let d = 0; d < dHead; d++) {
      const row = (h * dHead + d) * dModel
      const base = h * dModel * dHead + d
      for (let i = 0; i < dModel; i++) out[base + i * dHead] = w[row + i] as number
    }
  }
  return out
}

/**
 * Inverse of {@link linearToHeads}: `[heads, dModel, dHead]` to `[heads * dHead, dModel]`.
 *
 * @throws `ShapeError` on a length mismatch
 */
export function headsToLinear(w: Float32Array, heads: number, dModel: number, dHead: number): Float32Array {
  check(w, heads * dHead * dModel, 'headsToLinear')
  const out = new Float32Array(w.length)
  for (let h = 0; h < heads; h++) {
    for (let d = 0; d < dHead; d++) {
      const row = (h * dHead + d) * dModel
      const base = h * dModel * dHead + d
      for (let i = 0; i < dModel; i++) out[row + i] = w[base + i * dHead] as number
    }
  }
  return out
}

/**
 * The output projection stored as `nn.Linear` weight `[dModel, heads * dHead]` to attnlab's
 * `W_O` layout `[heads, dHead, dModel]`: `out[h, d, o] = w[o, h * dHead + d]`.
 *
 * @throws `ShapeError` on a length mismatch
 */
export function outLinearToHeads(w: Float32Array, heads: number, dHead: number, dModel: number): Float32Array {
  // [dModel, heads*dHead] transposed is [heads*dHead, dModel] = [heads, dHead, dModel].
  return transpose2d(w, dModel, heads * dHead)
}

/**
 * Inverse of {@link outLinearToHeads}: `[heads, dHead, dModel]` to `[dModel, heads * dHead]`.
 *
 * @throws `ShapeError` on a length mismatch
 */
export function headsToOutLinear(w: Float32Array, heads: number, dHead: number, dModel: number): Float32Array {
  return transpose2d(w, heads * dHead, dModel)
}

/**
 * Reorders the rows of a query or key projection `[heads * dHead, dModel]` from llama2.c's
 * interleaved RoPE layout to Hugging Face's rotate-half layout.
 *
 * Derivation. llama2.c (`run.c`, Meta's reference `apply_rotary_emb`) rotates the pairs
 * `(x[2i], x[2i+1])` of each head by the angle `pos * theta^(-2i / dHead)`, `i < dHead / 2`.
 * Rotate-half (Hugging Face `rotate_half`, GPT-NeoX) rotates `(y[j], y[j + dHead/2])` by
 * `pos * theta^(-2j / dHead)`. So with `y[j] = x[2j]` and `y[j + dHead/2] = x[2j + 1]` the two
 * compute the same rotated pairs, just stored in another order; the same reordering of `q` and
 * `k` leaves every dot product `q . k`, hence the attention, unchanged, and `v`/`o` are not
 * touched. In rows of the weight: new row `h*dHead + j` is old row `h*dHead + 2j`, new row
 * `h*dHead + dHead/2 + j` is old row `h*dHead + 2j + 1` (this is the permutation Hugging Face's
 * `convert_llama_weights_to_hf.py` applies: `view(heads, dHead/2, 2, dModel).transpose(1, 2)`).
 *
 * @param w - `[heads * dHead, dModel]`, interleaved layout
 * @returns `[heads * dHead, dModel]`, rotate-half layout
 * @throws `ShapeError` on a length mismatch or an odd `dHead`
 */
export function interleavedToRotateHalf(w: Float32Array, heads: number, dHead: number, dModel: number): Float32Array {
  return permuteRows(w, heads, dHead, dModel, true)
}

/**
 * Inverse of {@link interleavedToRotateHalf}: rotate-half rows back to llama2.c's interleaved
 * pairs.
 *
 * @param w - `[heads * dHead, dModel]`, rotate-half layout
 * @throws `ShapeError` on a length mismatch or an odd `dHead`
 */
export function rotateHalfToInterleaved(w: Float32Array, heads: number, dHead: number, dModel: number): Float32Array {
  return permuteRows(w, heads, dHead, dModel, false)
}

function permuteRows(w: Float32Array, heads: number, dHead: number, dModel: number, forward: boolean): Float32Array {
  check(w, heads * dHead * dModel, forward ? 'interleavedToRotateHalf' : 'rotateHalfToInterleaved')
  if (dHead % 2 !== 0) throw new ShapeError(`RoPE needs an even dHead, got ${dHead}`, { dHead })
  const half = dHead / 2
  const out = new Float32Array(w.length)
  for (let h = 0; h < heads; h++) {
    for (let j = 0; j < half; j++) {
      for (const [halfIndex, pairIndex] of [
        [j, 2 * j],
        [half + j, 2 * j + 1],
      ] as const) {
        const rotateHalfRow = (h * dHead + halfIndex) * dModel
        const interleavedRow = (h * dHead + pairIndex) * dModel
        if (forward) out.set(w.subarray(interleavedRow, interleavedRow + dModel), rotateHalfRow)
        else out.set(w.subarray(rotateHalfRow, rotateHalfRow + dModel), interleavedRow)
      }
    }
  }
  return out
}

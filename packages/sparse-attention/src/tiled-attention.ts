/**
 * Attention over query tiles: the path that computes every prefill's output in memory linear in
 * the sequence length. Queries are taken a tile of rows at a time (per query head); each tile
 * reads only the keys its plan names (a {@link QueryTile}: the union of the tile's keys and which
 * of them each row computes), so no `[nHeads, T, T]` score, probability or mask tensor is ever
 * built; each tile's queries, keys and values are copied from the inputs read back once. Within
 * a tile the softmax is exact over the row's computed keys, as in the block-sparse kernels of
 * MInference and in FlashAttention's tiling (Dao et al. 2022, arXiv 2205.14135, section 3.1),
 * which attnlab reproduces with whole-row tiles (every key of a row in one tile) instead of an
 * online softmax over key blocks.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError, readValuesSync, TooLargeError } from '@attnlab/core'

/**
 * The query-key pairs one tile of query rows computes, compactly.
 *
 * @category Attention
 */
export interface QueryTile {
  /** Key positions any row of the tile reads, strictly ascending, each `< T`. */
  readonly keys: Int32Array
  /** 1 where row `r` (of `stop - start`) computes key `keys[c]`, `[rows, keys.length]` row-major. */
  readonly allowed: Uint8Array
}

/**
 * A plan's computed pairs as tiles: the tile of rows `[start, stop)` of flat head
 * `b * nHeads + h`. Must be causal (a row `i` computes no key `> i`) and give every row a key.
 *
 * @category Attention
 */
export type TileSource = (head: number, start: number, stop: number) => QueryTile

/**
 * The tiles of every causal pair: rows `[start, stop)` read keys `0..stop-1`, row `i` those `<= i`.
 *
 * @param start - first query row
 * @param stop - one past the last query row
 * @returns the dense causal tile
 * @category Attention
 */
export function causalTile(start: number, stop: number): QueryTile {
  const keys = new Int32Array(stop)
  for (let j = 0; j < stop; j++) keys[j] = j
  const allowed = new Uint8Array((stop - start) * stop)
  for (let r = 0; r < stop - start; r++) allowed.fill(1, r * stop, r * stop + start + r + 1)
  return { keys, allowed }
}

/**
 * Tiles read from a full mask of computed pairs (for planners that build one).
 *
 * @param mask - 1 where the pair is computed, `[heads, T, T]` row-major
 * @param length - `T`
 * @returns a {@link TileSource} over `mask`
 * @category Attention
 */
export function tilesFromMask(mask: Uint8Array, length: number): TileSource {
  return (head, start, stop) => {
    const used = new Uint8Array(length)
    const base = head * length * length
    for (let i = start; i < stop; i++) {
      const row = base + i * length
      for (let j = 0; j < length; j++) if (mask[row + j]) used[j] = 1
    }
    let count = 0
    for (let j = 0; j < length; j++) count += used[j] as number
    const keys = new Int32Array(count)
    let c = 0
    for (let j = 0; j < length; j++) if (used[j]) keys[c++] = j
    const allowed = new Uint8Array((stop - start) * count)
    for (let i = start; i < stop; i++) {
      const row = base + i * length
      for (let c2 = 0; c2 < count; c2++) allowed[(i - start) * count + c2] = mask[row + (keys[c2] as number)] as number
    }
    return { keys, allowed }
  }
}

/**
 * The tile of a block-to-block selection (Block-Sparse, FlexPrefill's block level): rows
 * `[start, stop)` read every key of each key block some query block of theirs keeps; row `i`
 * (in query block `floor(i / blockSize)`) computes the keys `<= i` of its own kept blocks.
 *
 * @param kept - `kept(m, j)` is true when query block `m` keeps key block `j` (asked for `j <= m` only)
 * @param blockSize - block size in tokens (query and key blocks)
 * @param length - `T`
 * @param start - first query row
 * @param stop - one past the last query row
 * @returns the tile
 * @category Attention
 */
export function blockSelectionTile(
  kept: (queryBlock: number, keyBlock: number) => boolean,
  blockSize: number,
  length: number,
  start: number,
  stop: number,
): QueryTile {
  const first = Math.floor(start / blockSize)
  const last = Math.floor((stop - 1) / blockSize)
  const span = last + 1
  const member = new Uint8Array((last - first + 1) * span) // [query block - first, key block]
  const used = new Uint8Array(span)
  for (let m = first; m <= last; m++) {
    for (let j = 0; j <= m; j++) {
      if (!kept(m, j)) continue
      member[(m - first) * span + j] = 1
      used[j] = 1
    }
  }
  const keyList: number[] = []
  for (let j = 0; j < span; j++) {
    if (!used[j]) continue
    for (let key = j * blockSize; key < Math.min(length, stop, (j + 1) * blockSize); key++) keyList.push(key)
  }
  const keys = Int32Array.from(keyList)
  const allowed = new Uint8Array((stop - start) * keys.length)
  for (let i = start; i < stop; i++) {
    const row = (i - start) * keys.length
    const m = Math.floor(i / blockSize) - first
    for (let c = 0; c < keys.length; c++) {
      const key = keys[c] as number
      if (key <= i && member[m * span + Math.floor(key / blockSize)]) allowed[row + c] = 1
    }
  }
  return { keys, allowed }
}

/**
 * Writes the full `[heads, T, T]` mask of a tile source (what `prefillWithMask`'s `mask` holds).
 *
 * @param tiles - the plan's tiles
 * @param heads - `batch * nHeads`
 * @param length - `T`
 * @param tileRows - rows per tile
 * @returns `[heads, T, T]` row-major, 1 = computed
 * @throws `TooLargeError` (`@attnlab/core`) when `heads * T * T` exceeds the largest typed array (2^32 entries)
 * @category Attention
 */
export function maskFromTiles(tiles: TileSource, heads: number, length: number, tileRows: number): Uint8Array {
  const entries = heads * length * length
  if (entries > MAX_TYPED_ARRAY_LENGTH) {
    throw new TooLargeError(
      `the mask of computed pairs [batch * nHeads, T, T] = [${heads}, ${length}, ${length}] needs ${entries} bytes ` +
        `but one typed array holds at most ${MAX_TYPED_ARRAY_LENGTH}; leave the mask out (sparse apply --no-mask)`,
      { bytes: entries, limit: MAX_TYPED_ARRAY_LENGTH, dimension: 'T', T: length },
    )
  }
  const mask = new Uint8Array(entries)
  for (let head = 0; head < heads; head++) {
    for (let start = 0; start < length; start += tileRows) {
      const stop = Math.min(length, start + tileRows)
      const { keys, allowed } = tiles(head, start, stop)
      for (let i = start; i < stop; i++) {
        const row = (head * length + i) * length
        for (let c = 0; c < keys.length; c++)
          if (allowed[(i - start) * keys.length + c]) mask[row + (keys[c] as number)] = 1
      }
    }
  }
  return mask
}

/** The largest typed array length of the JavaScript engines attnlab runs on (Node 20, Chromium). */
export const MAX_TYPED_ARRAY_LENGTH = 2 ** 32

/**
 * What {@link attendByTiles} computed besides the output.
 *
 * @category Attention
 */
export interface TiledAttentionCounts {
  /** Computed pairs per flat head `b * nHeads + h`, `[batch * nHeads]`. */
  readonly computed: Float64Array
}

/**
 * Softmax attention computed a tile of query rows at a time from a {@link TileSource}: for each
 * query head and tile, the tile's queries, its keys (transposed) and values are copied from the
 * inputs (read back once) into small tensors, scores `scale * q . k` get `-Infinity` outside the
 * tile's `allowed`, softmax over the row, weighted sum of the values, read back into the output.
 * The work space of one tile is `[tileRows, keys]` floats: memory linear in `T`. The same numbers
 * as `attendWithMask` on the full mask, up to float32 rounding. Grouped-query attention: query
 * head `h` reads KV head `floor(h / (nHeads / nKvHeads))`.
 *
 * @param q - queries, `[batch, nHeads, T, dHead]`
 * @param k - keys, `[batch, nKvHeads, T, dHead]`
 * @param v - values, `[batch, nKvHeads, T, dValue]`
 * @param scale - multiplier of `q . k`
 * @param tiles - the computed pairs, tile by tile
 * @param tileRows - query rows per tile (`>= 1`)
 * @returns the output `z` `[batch, nHeads, T, dValue]` (owned by the caller) and the computed pairs per head
 * @throws `InvalidArgumentError` (`@attnlab/core`) if a tile names a key that is not causal for one of its
 *   rows, keys out of order, or a row with no key; `UnsupportedError` (`@attnlab/core`) on `webgpu`
 *   (q, k and v are read back synchronously)
 * @category Attention
 */
export function attendByTiles(
  q: tf.Tensor4D,
  k: tf.Tensor4D,
  v: tf.Tensor4D,
  scale: number,
  tiles: TileSource,
  tileRows: number,
): { z: tf.Tensor4D; counts: TiledAttentionCounts } {
  const [batch, nHeads, length, dHead] = q.shape
  const nKvHeads = k.shape[1]
  const dValue = v.shape[3]
  const group = nHeads / nKvHeads
  const computed = new Float64Array(batch * nHeads)
  // Read back once: per-tile slices of backend tensors copy the whole tensor on the wasm backend.
  const op = 'attention over tiles (attendByTiles)'
  const qData = readValuesSync(q, op) as Float32Array
  const kData = readValuesSync(k, op) as Float32Array
  const vData = readValuesSync(v, op) as Float32Array
  const out = new Float32Array(batch * nHeads * length * dValue)
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < nHeads; h++) {
      const head = b * nHeads + h
      const kvHead = b * nKvHeads + Math.floor(h / group)
      const kBase = kvHead * length * dHead
      const vBase = kvHead * length * dValue
      for (let start = 0; start < length; start += tileRows) {
        const stop = Math.min(length, start + tileRows)
        const tile = tiles(head, start, stop)
        computed[head] = (computed[head] as number) + checkTile(tile, head, start, stop, length)
        const { keys, allowed } = tile
        const rows = stop - start
        const width = keys.length
        const qTile = qData.subarray((head * length + start) * dHead, (head * length + stop) * dHead)
        const kTransposed = new Float32Array(dHead * width) // [dHead, width]
        const vRows = new Float32Array(width * dValue) // [width, dValue]
        for (let c = 0; c < width; c++) {
          const key = keys[c] as number
          const kRow = kBase + key * dHead
          for (let e = 0; e < dHead; e++) kTransposed[e * width + c] = kData[kRow + e] as number
          vRows.set(vData.subarray(vBase + key * dValue, vBase + (key + 1) * dValue), c * dValue)
        }
        let full = true
        const bias = new Float32Array(rows * width)
        for (let e = 0; e < bias.length; e++) {
          if (!allowed[e]) {
            bias[e] = -Infinity
            full = false
          }
        }
        const result = tf.tidy(() => {
          // scaled queries times transposed keys: a plain 2-D matmul, the fast one of the wasm backend
          let scores = tf.matMul(
            tf.mul(tf.tensor2d(qTile, [rows, dHead]), scale),
            tf.tensor2d(kTransposed, [dHead, width]),
          )
          if (!full) scores = tf.add(scores, tf.tensor2d(bias, [rows, width]))
          return tf.matMul(tf.softmax(scores, -1), tf.tensor2d(vRows, [width, dValue])) // [rows, dValue]
        })
        out.set(result.dataSync() as Float32Array, (head * length + start) * dValue)
        result.dispose()
      }
    }
  }
  return { z: tf.tensor4d(out, [batch, nHeads, length, dValue]), counts: { computed } }
}

/** Validates a tile and returns its computed pairs. */
function checkTile(tile: QueryTile, head: number, start: number, stop: number, length: number): number {
  const { keys, allowed } = tile
  const rows = stop - start
  if (allowed.length !== rows * keys.length) {
    throw new InvalidArgumentError(
      `internal: tile (head ${head}, rows ${start}..${stop - 1}) has ${allowed.length} entries, expected ` +
        `${rows} x ${keys.length}`,
    )
  }
  for (let c = 0; c < keys.length; c++) {
    const key = keys[c] as number
    if (key < 0 || key >= length || (c > 0 && key <= (keys[c - 1] as number)))
      throw new InvalidArgumentError(`internal: tile (head ${head}, rows ${start}..${stop - 1}) keys not ascending`)
  }
  let count = 0
  for (let r = 0; r < rows; r++) {
    let rowCount = 0
    for (let c = 0; c < keys.length; c++) {
      if (!allowed[r * keys.length + c]) continue
      if ((keys[c] as number) > start + r)
        throw new InvalidArgumentError(`internal: non-causal pair (${start + r}, ${keys[c]}) in the plan`)
      rowCount++
    }
    if (rowCount === 0) {
      throw new InvalidArgumentError(
        `mask row (head ${head}, query ${start + r}) computes no key: softmax over an empty set`,
        { head, query: start + r },
      )
    }
    count += rowCount
  }
  return count
}

/**
 * Bytes the backend needs for {@link attendByTiles} beyond its inputs: the output plus one
 * tile's tensors (queries, transposed keys, values, and scores, bias, probabilities and their
 * temporaries, about 6 floats per pair of `tileRows x width`, where `width` is at most `T`).
 * The JavaScript side holds the inputs read back, the output and one tile's copies besides.
 *
 * @param shape - `batch`, `nHeads`, `length` (`T`), `dHead`, `dValue`
 * @param tileRows - query rows per tile
 * @returns bytes (float32 elements x 4)
 * @category Attention
 */
export function tiledAttentionBytes(
  shape: {
    readonly batch: number
    readonly nHeads: number
    readonly length: number
    readonly dHead: number
    readonly dValue: number
  },
  tileRows: number,
): number {
  const { batch, nHeads, length, dHead, dValue } = shape
  const rows = Math.min(tileRows, length)
  const output = batch * nHeads * length * dValue
  const tile = 6 * rows * length + rows * (dHead + dValue) + length * (dHead + dValue)
  return 4 * (output + tile)
}

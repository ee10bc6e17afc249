/**
 * The `wasm` kernel provider: AssemblyScript kernels (`packages/core/assembly/kernels.ts`)
 * compiled to WebAssembly SIMD128 (`attnlab-kernels.wasm`, ~11 KB, committed), instantiated
 * against the tfjs wasm backend's own `WebAssembly.Memory` so they compute on tensors in place.
 * Runs wherever tfjs' wasm backend runs (Node and browsers, no build step).
 *
 * The module has no data segments and no start function and never allocates; scratch space comes
 * from tfjs' `_malloc`. Addresses are read from the views before any scratch allocation (growing
 * the memory detaches views, but addresses stay valid).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError, IoError, TooLargeError, UnsupportedError } from '../errors.ts'
import { wasmBackendMemory, type WasmBackendInternals } from './memory.ts'
import { webAssembly } from './webassembly.ts'
import type {
  AdamWHyper,
  FloatArray,
  IntArray,
  KernelProvider,
  OneHotAttentionShape,
  PageSelectShape,
  SparseAttentionShape,
} from './provider.ts'
import { sparseAttentionSizes } from './provider.ts'

/** The compiled module's exports (see assembly/kernels.ts). */
interface WasmKernelExports {
  gemm(
    tA: number,
    tB: number,
    batch: number,
    m: number,
    n: number,
    k: number,
    a: number,
    sA: number,
    b: number,
    sB: number,
    c: number,
    scratch: number,
  ): void
  gemmScratchFloats(n: number): number
  softmax(x: number, y: number, rows: number, cols: number): void
  gatherRows(table: number, indices: number, out: number, n: number, k: number, width: number): void
  scatterRows(updates: number, indices: number, out: number, n: number, k: number, width: number, rows: number): void
  attentionScratchFloats(pos: number, dHead: number): number
  attentionForward(
    qkv: number,
    out: number,
    probs: number,
    b: number,
    t: number,
    h: number,
    dh: number,
    scale: number,
    causal: number,
    scratch: number,
  ): void
  attentionBackward(
    qkv: number,
    probs: number,
    dOut: number,
    dQkv: number,
    b: number,
    t: number,
    h: number,
    dh: number,
    scale: number,
    causal: number,
    scratch: number,
  ): void
  softmaxCrossEntropy(logits: number, labels: number, weights: number, rows: number, cols: number): number
  softmaxCrossEntropyBackward(
    logits: number,
    labels: number,
    weights: number,
    rows: number,
    cols: number,
    dLoss: number,
    dLogits: number,
  ): void
  addBias(c: number, rows: number, cols: number, bias: number): void
  geluForward(x: number, y: number, n: number): void
  geluBackward(x: number, dy: number, dx: number, n: number): void
  columnSum(x: number, out: number, rows: number, cols: number): void
  layerNormForward(
    x: number,
    g: number,
    b: number,
    y: number,
    mean: number,
    rstd: number,
    rows: number,
    cols: number,
    eps: number,
  ): void
  layerNormBackward(
    x: number,
    g: number,
    mean: number,
    rstd: number,
    dy: number,
    dx: number,
    dg: number,
    db: number,
    rows: number,
    cols: number,
  ): void
  adamw(
    p: number,
    g: number,
    m: number,
    v: number,
    n: number,
    stepSize: number,
    rbc2: number,
    beta1: number,
    beta2: number,
    eps: number,
    decay: number,
  ): void
  sparseScratchFloats(dHead: number, dValue: number, tileRows: number): number
  pageScratchFloats(pages: number): number
  pageSelect(
    q: number,
    bounds: number,
    chosen: number,
    heads: number,
    group: number,
    pages: number,
    capacity: number,
    dHead: number,
    budget: number,
    share: number,
    scratch: number,
  ): void
  sparseAttention(
    q: number,
    k: number,
    v: number,
    out: number,
    tileStarts: number,
    spans: number,
    heads: number,
    group: number,
    rows: number,
    keys: number,
    dHead: number,
    dValue: number,
    tileRows: number,
    scale: number,
    causalOffset: number,
    scratch: number,
  ): void
  oneHotScratchFloats(t: number, d: number, c: number): number
  oneHotAttentionForward(
    tokens: number,
    wq: number,
    wv: number,
    logits: number,
    probs: number,
    b: number,
    t: number,
    h: number,
    dModel: number,
    dValue: number,
    dVocab: number,
    outCols: number,
    scale: number,
    from: number,
    scratch: number,
  ): void
  oneHotAttentionBackward(
    tokens: number,
    wq: number,
    wv: number,
    probs: number,
    dLogits: number,
    dWq: number,
    dWv: number,
    b: number,
    t: number,
    h: number,
    dModel: number,
    dValue: number,
    dVocab: number,
    outCols: number,
    scale: number,
    from: number,
    scratch: number,
  ): void
}

/** Options of {@link loadWasmKernelProvider}. @category Kernels */
export interface WasmKernelOptions {
  /**
   * The compiled module's bytes, or its URL (default: `attnlab-kernels.wasm` next to this module,
   * read from disk in Node and fetched in browsers).
   */
  readonly source?: ArrayBuffer | ArrayBufferView | URL | string
}

async function readModule(
  source: ArrayBuffer | ArrayBufferView | URL | string | undefined,
): Promise<ArrayBuffer | ArrayBufferView> {
  if (source !== undefined && typeof source !== 'string' && !(source instanceof URL)) return source
  const url =
    source === undefined ? new URL('./attnlab-kernels.wasm', import.meta.url) : new URL(String(source), import.meta.url)
  if (url.protocol === 'file:') {
    const { readFile } = await import('node:fs/promises')
    return new Uint8Array(await readFile(url))
  }
  const response = await fetch(url)
  if (!response.ok)
    throw new IoError(`could not fetch the attnlab wasm kernels from ${url.href}: HTTP ${response.status}`)
  return await response.arrayBuffer()
}

const address = (view: FloatArray | IntArray | null): number => (view === null ? 0 : view.byteOffset)

/**
 * Instantiates the AssemblyScript kernels on the initialised tfjs `wasm` backend's memory and
 * returns them as a {@link KernelProvider} (single-threaded).
 *
 * @param options - where the compiled module is (default: next to this file)
 * @returns the `wasm` provider, bound to the current wasm backend instance
 * @throws `UnsupportedError` (from `@attnlab/core`) when the wasm backend is not initialised or lacks the
 *   internals attnlab uses; `IO_ERROR` when the module cannot be read
 * @category Kernels
 */
export async function loadWasmKernelProvider(options: WasmKernelOptions = {}): Promise<KernelProvider> {
  const backend = tf.findBackend('wasm') as unknown as WasmBackendInternals | null
  const memory = wasmBackendMemory(backend)
  const bytes = await readModule(options.source)
  const wa = webAssembly()
  if (wa === undefined) throw new UnsupportedError('this runtime has no WebAssembly')
  const { instance } = await wa.instantiate(bytes, { env: { memory } })
  const k = instance.exports as unknown as WasmKernelExports
  const heap = backend!.wasm
  let scratch = 0
  let scratchBytes = 0
  /** A scratch buffer of at least `floats` floats (reallocated, never shrunk). Call after reading addresses. */
  const need = (floats: number): number => {
    const bytesNeeded = Math.max(16, floats * 4)
    if (bytesNeeded > scratchBytes) {
      if (scratch !== 0) heap._free(scratch)
      scratchBytes = Math.max(bytesNeeded, 2 * scratchBytes, 1 << 16)
      scratch = heap._malloc(scratchBytes) >>> 0
      if (scratch === 0)
        throw new TooLargeError(`could not allocate ${scratchBytes} bytes of kernel scratch on the wasm heap`)
    }
    return scratch
  }
  return Object.freeze({
    name: 'wasm',
    fastMatMul: true,
    gemm: (tA, tB, batch, m, n, kk, a, strideA, b, strideB, c) => {
      const [pa, pb, pc] = [address(a), address(b), address(c)]
      k.gemm(tA ? 1 : 0, tB ? 1 : 0, batch, m, n, kk, pa, strideA, pb, strideB, pc, need(k.gemmScratchFloats(n)))
    },
    softmax: (x, y, rows, cols) => k.softmax(address(x), address(y), rows, cols),
    gatherRows: (table, indices, out, n, kk, width) =>
      k.gatherRows(address(table), address(indices), address(out), n, kk, width),
    scatterRows: (updates, indices, out, n, kk, width, rows) =>
      k.scatterRows(address(updates), address(indices), address(out), n, kk, width, rows),
    addBias: (c, rows, cols, bias) => k.addBias(address(c), rows, cols, address(bias)),
    columnSum: (x, out, rows, cols) => k.columnSum(address(x), address(out), rows, cols),
    geluForward: (x, y, n) => k.geluForward(address(x), address(y), n),
    geluBackward: (x, dy, dx, n) => k.geluBackward(address(x), address(dy), address(dx), n),
    layerNormForward: (x, gain, bias, y, mean, rstd, rows, cols, eps) =>
      k.layerNormForward(
        address(x),
        address(gain),
        address(bias),
        address(y),
        address(mean),
        address(rstd),
        rows,
        cols,
        eps,
      ),
    layerNormBackward: (x, gain, mean, rstd, dy, dx, dGain, dBias, rows, cols) =>
      k.layerNormBackward(
        address(x),
        address(gain),
        address(mean),
        address(rstd),
        address(dy),
        address(dx),
        address(dGain),
        address(dBias),
        rows,
        cols,
      ),
    attentionForward: (qkv, out, probs, batch, pos, nHeads, dHead, scale, causal) => {
      const [q, o, p] = [address(qkv), address(out), address(probs)]
      k.attentionForward(
        q,
        o,
        p,
        batch,
        pos,
        nHeads,
        dHead,
        scale,
        causal ? 1 : 0,
        need(k.attentionScratchFloats(pos, dHead)),
      )
    },
    attentionBackward: (qkv, probs, dOut, dQkv, batch, pos, nHeads, dHead, scale, causal) => {
      const [q, p, d, dq] = [address(qkv), address(probs), address(dOut), address(dQkv)]
      k.attentionBackward(
        q,
        p,
        d,
        dq,
        batch,
        pos,
        nHeads,
        dHead,
        scale,
        causal ? 1 : 0,
        need(k.attentionScratchFloats(pos, dHead)),
      )
    },
    softmaxCrossEntropy: (logits, labels, weights, rows, cols) => {
      if (weights === null) throw new InvalidArgumentError('the wasm cross-entropy kernel needs explicit weights')
      return k.softmaxCrossEntropy(address(logits), address(labels), address(weights), rows, cols)
    },
    softmaxCrossEntropyBackward: (logits, labels, weights, rows, cols, dLoss, dLogits) => {
      if (weights === null) throw new InvalidArgumentError('the wasm cross-entropy kernel needs explicit weights')
      k.softmaxCrossEntropyBackward(
        address(logits),
        address(labels),
        address(weights),
        rows,
        cols,
        dLoss,
        address(dLogits),
      )
    },
    oneHotAttentionForward: (tokens, wq, wv, logits, probs, s: OneHotAttentionShape) => {
      const a = [address(tokens), address(wq), address(wv), address(logits), address(probs)] as const
      k.oneHotAttentionForward(
        ...a,
        s.batch,
        s.pos,
        s.nHeads,
        s.dModel,
        s.dValue,
        s.dVocab,
        s.outCols,
        s.scale,
        s.from,
        need(k.oneHotScratchFloats(s.pos, s.dModel, s.outCols)),
      )
    },
    oneHotAttentionBackward: (tokens, wq, wv, probs, dLogits, dWq, dWv, s: OneHotAttentionShape) => {
      const a = [
        address(tokens),
        address(wq),
        address(wv),
        address(probs),
        address(dLogits),
        address(dWq),
        address(dWv),
      ] as const
      k.oneHotAttentionBackward(
        ...a,
        s.batch,
        s.pos,
        s.nHeads,
        s.dModel,
        s.dValue,
        s.dVocab,
        s.outCols,
        s.scale,
        s.from,
        need(k.oneHotScratchFloats(s.pos, s.dModel, s.outCols)),
      )
    },
    adamw: (p, g, m, v, n, h: AdamWHyper) =>
      k.adamw(
        address(p),
        address(g),
        address(m),
        address(v),
        n,
        h.lr / (1 - h.beta1 ** h.step),
        1 / Math.sqrt(1 - h.beta2 ** h.step),
        h.beta1,
        h.beta2,
        h.eps,
        1 - h.lr * h.weightDecay,
      ),
    sparseAttention: (q, kk, v, out, tileStarts, spans, s: SparseAttentionShape) => {
      const a = [address(q), address(kk), address(v), address(out), address(tileStarts), address(spans)] as const
      k.sparseAttention(
        ...a,
        ...sparseAttentionSizes(s),
        need(k.sparseScratchFloats(s.dHead, s.dValue, Math.min(s.tileRows, s.rows))),
      )
    },
    pageSelect: (q, bounds, chosen, s: PageSelectShape) =>
      k.pageSelect(
        address(q),
        address(bounds),
        address(chosen),
        s.heads,
        s.group,
        s.pages,
        s.capacity,
        s.dHead,
        s.budget,
        s.share ? 1 : 0,
        need(k.pageScratchFloats(s.pages)),
      ),
    setThreads: () => {},
    threads: () => 1,
  } satisfies KernelProvider)
}

/**
 * The `native` kernel provider (Node only): the C++ addon in `packages/core/native/`, built on
 * this machine by `native/build.mjs` (the monorepo's postinstall, or `attnlab kernels build`).
 * Import through `@attnlab/core/node`.
 *
 * A binary is loaded only if its stamp records the same source hash as the sources next to it,
 * so a build from other sources (another ABI) is never loaded.
 *
 * @module
 */
import { ConfigError, InvalidArgumentError, KernelsUnavailableError } from '../errors.ts'
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

/** The build script's exports (`native/build.mjs`). */
interface BuildModule {
  nativeSourceHash(): string
  nativeCandidateDirectories(hash?: string): string[]
  readStamp(dir: string): NativeBuildStamp | undefined
  buildNativeKernels(options?: { force?: boolean; log?: (line: string) => void }): NativeBuildResult
  requireAddon(path: string): NativeAddon
  nodeIncludeDirectory(): string
  ADDON_FILE: string
}

/** What `native/build.mjs` records next to a build. @category Kernels */
export interface NativeBuildStamp {
  /** Hash of the C++ sources and build recipe the binary was built from. */
  readonly sourceHash: string
  /** Compiler name and version. */
  readonly compiler: string
  /** Compiler flags. */
  readonly flags: readonly string[]
  /** Whether the build has OpenMP (`omp simd` hints; threads come from the addon's own team). */
  readonly openmp: boolean
  /** The kernel clone this CPU runs (`x86-64-v4`, `x86-64-v3`, `baseline`). */
  readonly cpuLevel: string
  /** Node version that built it. */
  readonly node: string
  /** ISO time of the build. */
  readonly builtAt: string
}

/** Result of {@link buildNativeKernels}. @category Kernels */
export interface NativeBuildResult {
  /** Whether a usable binary exists now. */
  readonly ok: boolean
  /** The binary's path (when ok). */
  readonly path?: string
  /** Why it failed (when not ok). */
  readonly reason?: string
  /** The compiler's first error lines (when it failed). */
  readonly details?: string
  /** True when an up-to-date build existed and nothing was compiled. */
  readonly skipped?: boolean
  /** Compile time in seconds. */
  readonly seconds?: number
}

/** The addon's functions (see native/src/addon.cc). */
interface NativeAddon {
  gemm(
    tA: boolean,
    tB: boolean,
    batch: number,
    m: number,
    n: number,
    k: number,
    a: FloatArray,
    sA: number,
    b: FloatArray,
    sB: number,
    c: FloatArray,
  ): void
  softmax(x: FloatArray, y: FloatArray, rows: number, cols: number): void
  gatherRows(
    table: FloatArray,
    indices: IntArray,
    out: FloatArray,
    n: number,
    k: number,
    width: number,
    rows: number,
  ): void
  scatterRows(
    updates: FloatArray,
    indices: IntArray,
    out: FloatArray,
    n: number,
    k: number,
    width: number,
    rows: number,
  ): void
  addBias(c: FloatArray, rows: number, cols: number, bias: FloatArray): void
  columnSum(x: FloatArray, out: FloatArray, rows: number, cols: number): void
  add(a: FloatArray, b: FloatArray, out: FloatArray, n: number): void
  geluForward(x: FloatArray, y: FloatArray, n: number): void
  geluBackward(x: FloatArray, dy: FloatArray, dx: FloatArray, n: number): void
  layerNormForward(
    x: FloatArray,
    g: FloatArray,
    b: FloatArray | null,
    y: FloatArray,
    mean: FloatArray,
    rstd: FloatArray,
    rows: number,
    cols: number,
    eps: number,
  ): void
  layerNormBackward(
    x: FloatArray,
    g: FloatArray,
    mean: FloatArray,
    rstd: FloatArray,
    dy: FloatArray,
    dx: FloatArray,
    dg: FloatArray,
    db: FloatArray | null,
    rows: number,
    cols: number,
  ): void
  attentionForward(
    qkv: FloatArray,
    out: FloatArray,
    probs: FloatArray,
    b: number,
    t: number,
    h: number,
    dh: number,
    scale: number,
    causal: boolean,
  ): void
  attentionBackward(
    qkv: FloatArray,
    probs: FloatArray,
    dOut: FloatArray,
    dQkv: FloatArray,
    b: number,
    t: number,
    h: number,
    dh: number,
    scale: number,
    causal: boolean,
    out: FloatArray | null,
  ): void
  softmaxCrossEntropy(logits: FloatArray, labels: IntArray, weights: FloatArray, rows: number, cols: number): number
  softmaxCrossEntropyBackward(
    logits: FloatArray,
    labels: IntArray,
    weights: FloatArray,
    rows: number,
    cols: number,
    dLoss: number,
    dLogits: FloatArray,
  ): void
  oneHotAttentionForward(...args: (FloatArray | IntArray | number)[]): void
  oneHotAttentionBackward(...args: (FloatArray | IntArray | number)[]): void
  adamw(
    p: FloatArray,
    g: FloatArray,
    m: FloatArray,
    v: FloatArray,
    n: number,
    lr: number,
    beta1: number,
    beta2: number,
    eps: number,
    weightDecay: number,
    step: number,
  ): void
  sparseAttention(
    q: FloatArray,
    k: FloatArray,
    v: FloatArray,
    out: FloatArray,
    tileStarts: IntArray,
    spans: IntArray,
    ...sizes: number[]
  ): void
  pageSelect(q: FloatArray, bounds: FloatArray, chosen: IntArray, ...sizes: (number | boolean)[]): void
  setThreads(n: number): void
  info(): { threads: number; openmp: boolean; cpuLevel: string }
}

/** Where the native kernels stand on this machine. @category Kernels */
export interface NativeKernelsStatus {
  /** `loadable`: an up-to-date build exists; `stale`: only builds of other sources; `missing`: none. */
  readonly state: 'loadable' | 'stale' | 'missing'
  /** The binary that would be loaded (when loadable). */
  readonly path?: string
  /** Its build stamp (when loadable or stale). */
  readonly stamp?: NativeBuildStamp
  /** The hash of the current sources. */
  readonly sourceHash: string
  /** The folders searched, in order. */
  readonly searched: readonly string[]
}

let buildModule: Promise<BuildModule> | undefined
const BUILD_SCRIPT = '../../native/build.mjs'
async function build(): Promise<BuildModule> {
  // native/build.mjs is plain JavaScript so the monorepo's postinstall can run it before any
  // TypeScript tooling; it sits one level above both src/ and dist/.
  // (src/kernels/ and dist/kernels/ are both two levels below the package root).
  // The path is a variable so that bundlers do not copy this Node script into browser bundles
  // (they emit `new URL('literal', import.meta.url)` targets as assets).
  buildModule ??= import(/* @vite-ignore */ new URL(BUILD_SCRIPT, import.meta.url).href) as Promise<BuildModule>
  return buildModule
}

/**
 * Whether native kernels can be loaded here, and from where (nothing is compiled or loaded).
 *
 * @returns the state, the binary's path and stamp, and the folders searched
 * @category Kernels
 */
export async function nativeKernelsStatus(): Promise<NativeKernelsStatus> {
  const b = await build()
  const sourceHash = b.nativeSourceHash()
  const searched = b.nativeCandidateDirectories(sourceHash)
  let stale: NativeBuildStamp | undefined
  const { existsSync } = await import('node:fs')
  const { join } = await import('node:path')
  for (const dir of searched) {
    const stamp = b.readStamp(dir)
    const path = join(dir, b.ADDON_FILE)
    if (stamp === undefined || !existsSync(path)) continue
    if (stamp.sourceHash === sourceHash) return { state: 'loadable', path, stamp, sourceHash, searched }
    stale ??= stamp
  }
  return stale === undefined
    ? { state: 'missing', sourceHash, searched }
    : { state: 'stale', stamp: stale, sourceHash, searched }
}

/**
 * Compiles the native kernels with the system C++ compiler and Node's own headers (offline; no
 * node-gyp or Python). Skips the compile when an up-to-date build exists, unless `force`.
 *
 * @param options - `force` to rebuild; `log` receives the compiler command lines
 * @returns whether a usable binary now exists, its path, or why not (with the compiler's errors)
 * @category Kernels
 */
export async function buildNativeKernels(
  options: { force?: boolean; log?: (line: string) => void } = {},
): Promise<NativeBuildResult> {
  const b = await build()
  return b.buildNativeKernels(options)
}

let loaded: { path: string; addon: NativeAddon } | undefined

/**
 * Loads the native kernels as a {@link KernelProvider} (the binary is loaded once per process).
 *
 * @param options - `threads`: threads for the kernels, the caller included (default 1). Workers
 *   spin for ~200 us after each kernel, then sleep (`ATTNLAB_NATIVE_SPIN_US`, read at load, changes
 *   the spin); a worker that is not running is never waited for.
 * @returns the `native` provider
 * @throws `KernelsUnavailableError` (`@attnlab/core`) when no up-to-date build exists or it does not load; the
 *   message names the build command
 * @category Kernels
 */
export async function loadNativeKernelProvider(options: { threads?: number } = {}): Promise<KernelProvider> {
  if (loaded === undefined) {
    const status = await nativeKernelsStatus()
    if (status.state !== 'loadable' || status.path === undefined) {
      const why =
        status.state === 'stale'
          ? 'the native kernels were built from other sources'
          : 'the native kernels are not built'
      throw new KernelsUnavailableError(
        'native',
        `${why} (searched ${status.searched.join(', ')}); build them with: pnpm attnlab kernels build`,
      )
    }
    // Threads come from the addon's own team (native/src/pool.cc), not OpenMP regions: the caller
    // never waits for a worker that is not running, so a busy second core costs little.
    try {
      loaded = { path: status.path, addon: (await build()).requireAddon(status.path) }
    } catch (error) {
      throw new KernelsUnavailableError(
        'native',
        `the native kernels at ${status.path} do not load ` +
          `(${error instanceof Error ? error.message.split('\n')[0] : String(error)}); rebuild them with: pnpm ` +
          'attnlab kernels build --force',
        error,
      )
    }
  }
  const threads = options.threads ?? 1
  if (!(Number.isInteger(threads) && threads >= 1))
    throw new ConfigError('threads', `must be an integer >= 1, got ${threads}`, { value: threads })
  const k = loaded.addon
  k.setThreads(threads)
  const oneHot = (s: OneHotAttentionShape): number[] => [
    s.batch,
    s.pos,
    s.nHeads,
    s.dModel,
    s.dValue,
    s.dVocab,
    s.outCols,
    s.scale,
    s.from,
  ]
  return Object.freeze({
    name: 'native',
    fastMatMul: true,
    gemm: (tA, tB, batch, m, n, kk, a, sA, b, sB, c) => k.gemm(tA, tB, batch, m, n, kk, a, sA, b, sB, c),
    softmax: (x, y, rows, cols) => k.softmax(x, y, rows, cols),
    gatherRows: (table, indices, out, n, kk, width) =>
      k.gatherRows(table, indices, out, n, kk, width, table.length / Math.max(width, 1)),
    scatterRows: (updates, indices, out, n, kk, width, rows) =>
      k.scatterRows(updates, indices, out, n, kk, width, rows),
    addBias: (c, rows, cols, bias) => k.addBias(c, rows, cols, bias),
    columnSum: (x, out, rows, cols) => k.columnSum(x, out, rows, cols),
    add: (a, b, out, n) => k.add(a, b, out, n),
    geluForward: (x, y, n) => k.geluForward(x, y, n),
    geluBackward: (x, dy, dx, n) => k.geluBackward(x, dy, dx, n),
    layerNormForward: (x, g, b, y, mean, rstd, rows, cols, eps) =>
      k.layerNormForward(x, g, b, y, mean, rstd, rows, cols, eps),
    layerNormBackward: (x, g, mean, rstd, dy, dx, dg, db, rows, cols) =>
      k.layerNormBackward(x, g, mean, rstd, dy, dx, dg, db, rows, cols),
    attentionForward: (qkv, out, probs, b, t, h, dh, scale, causal) =>
      k.attentionForward(qkv, out, probs, b, t, h, dh, scale, causal),
    attentionBackward: (qkv, probs, dOut, dQkv, b, t, h, dh, scale, causal, out) =>
      k.attentionBackward(qkv, probs, dOut, dQkv, b, t, h, dh, scale, causal, out ?? null),
    softmaxCrossEntropy: (logits, labels, weights, rows, cols) => {
      if (weights === null) throw new InvalidArgumentError('the native cross-entropy kernel needs explicit weights')
      return k.softmaxCrossEntropy(logits, labels, weights, rows, cols)
    },
    softmaxCrossEntropyBackward: (logits, labels, weights, rows, cols, dLoss, dLogits) => {
      if (weights === null) throw new InvalidArgumentError('the native cross-entropy kernel needs explicit weights')
      k.softmaxCrossEntropyBackward(logits, labels, weights, rows, cols, dLoss, dLogits)
    },
    oneHotAttentionForward: (tokens, wq, wv, logits, probs, s) =>
      k.oneHotAttentionForward(tokens, wq, wv, logits, probs, ...oneHot(s)),
    oneHotAttentionBackward: (tokens, wq, wv, probs, dLogits, dWq, dWv, s) =>
      k.oneHotAttentionBackward(tokens, wq, wv, probs, dLogits, dWq, dWv, ...oneHot(s)),
    adamw: (p, g, m, v, n, h: AdamWHyper) =>
      k.adamw(p, g, m, v, n, h.lr, h.beta1, h.beta2, h.eps, h.weightDecay, h.step),
    attentionSaves: 'logSumExp',
    sparseAttention: (q, kk, v, out, tileStarts, spans, s: SparseAttentionShape) =>
      k.sparseAttention(q, kk, v, out, tileStarts, spans, ...sparseAttentionSizes(s)),
    pageSelect: (q, bounds, chosen, s: PageSelectShape) =>
      k.pageSelect(q, bounds, chosen, s.heads, s.group, s.pages, s.capacity, s.dHead, s.budget, s.share),
    setThreads: (n) => k.setThreads(n),
    threads: () => k.info().threads,
  } satisfies KernelProvider)
}

/**
 * Information from the loaded native kernels (`undefined` before the first load): OpenMP simd, the CPU
 * clone in use, threads.
 *
 * @category Kernels
 */
export function loadedNativeKernelsInfo(): ({ path: string } & ReturnType<NativeAddon['info']>) | undefined {
  return loaded === undefined ? undefined : { path: loaded.path, ...loaded.addon.info() }
}

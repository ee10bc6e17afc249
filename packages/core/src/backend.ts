/**
 * Backend choice: the only place in attnlab where a tfjs backend is picked.
 *
 * Libraries (`@attnlab/markov`, `@attnlab/transformer`, ...) never import a backend or call
 * `tf.setBackend`; they run on whatever backend is active. Apps (the CLI, a notebook, a web page)
 * call {@link useBackend} once at start-up. See `docs/architecture/tensor-interface.md`.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { BackendUnavailableError, ConfigError, KernelsUnavailableError } from './errors.ts'
import { activeKernels } from './kernels/active.ts'
import { checkRange } from './options.ts'
import type { KernelProvider, KernelProviderName } from './kernels/provider.ts'

/**
 * The tfjs backends attnlab knows how to start.
 *
 * - `cpu`: pure JavaScript (`@tensorflow/tfjs-backend-cpu`); slow, everywhere.
 * - `wasm`: WebAssembly + SIMD + XNNPACK (`@tensorflow/tfjs-backend-wasm`); the fastest backend
 *   in Node today.
 * - `webgl`, `webgpu`: browsers only (`@tensorflow/tfjs-backend-webgl`, `-webgpu`).
 * - `tensorflow`, `tensorflow-gpu`: native libtensorflow through `@tensorflow/tfjs-node` /
 *   `@tensorflow/tfjs-node-gpu` (optional; their installer downloads libtensorflow).
 *
 * @category Backends
 */
export type BackendName = 'cpu' | 'wasm' | 'webgl' | 'webgpu' | 'tensorflow' | 'tensorflow-gpu'

/** All backend names, in a stable order. @category Backends */
export const BACKEND_NAMES: readonly BackendName[] = Object.freeze([
  'cpu',
  'wasm',
  'webgl',
  'webgpu',
  'tensorflow',
  'tensorflow-gpu',
])

/** The npm package that provides each backend. @category Backends */
export const BACKEND_PACKAGES: Readonly<Record<BackendName, string>> = Object.freeze({
  cpu: '@tensorflow/tfjs-backend-cpu',
  wasm: '@tensorflow/tfjs-backend-wasm',
  webgl: '@tensorflow/tfjs-backend-webgl',
  webgpu: '@tensorflow/tfjs-backend-webgpu',
  tensorflow: '@tensorflow/tfjs-node',
  'tensorflow-gpu': '@tensorflow/tfjs-node-gpu',
})

/** The name tfjs registers each backend under. */
const REGISTERED_NAME: Readonly<Record<BackendName, string>> = {
  cpu: 'cpu',
  wasm: 'wasm',
  webgl: 'webgl',
  webgpu: 'webgpu',
  tensorflow: 'tensorflow',
  'tensorflow-gpu': 'tensorflow',
}

/** Options of {@link useBackend}. @category Backends */
export interface UseBackendOptions {
  /**
   * wasm only: where tfjs' `.wasm` files are, as `setWasmPaths` of `@tensorflow/tfjs-backend-wasm`
   * takes it: a directory path or URL prefix ending in `/`, or a map from each file name to its
   * URL (what a bundler gives: e.g. vite's `import simd from
   * '@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm?url'`).
   * Default in Node: the `dist/` folder of the installed `@tensorflow/tfjs-backend-wasm`;
   * in a browser: tfjs' own default, the page's directory, which in a bundled app usually holds no
   * `.wasm` files: pass the bundler's URLs (see `apps/browser-check`).
   */
  readonly wasmPaths?: string | WasmPathMap
  /**
   * Which attnlab kernels back the fused ops and replace the stock matmul/softmax kernels
   * (`wasm` and `cpu` only; see [docs/performance.md](../../../docs/performance.md)):
   * - `auto` (default): on `wasm`, `native` when the native kernels are built and load (Node),
   *   else `wasm`, else none; on `cpu`, `js`; elsewhere none.
   * - `native`: the C++ addon (Node; build with `attnlab kernels build`).
   * - `wasm`: AssemblyScript WebAssembly SIMD kernels on the tfjs wasm heap (Node and browsers).
   * - `js`: plain JavaScript (the reference; slow on `wasm`).
   * - `none`: stock tfjs kernels only; fused ops run as composites.
   */
  readonly kernels?: KernelsMode
  /** Threads for the native kernels (default 1; ignored by the other providers). */
  readonly threads?: number
}

/**
 * The file names of tfjs' WebAssembly binaries (plain, SIMD, threaded SIMD), for a per-file
 * {@link UseBackendOptions.wasmPaths}. The browser picks one by its features; a map that lacks the
 * one it picks makes `useBackend('wasm')` fail with a {@link BackendUnavailableError}.
 *
 * @category Backends
 */
export type WasmFileName =
  | 'tfjs-backend-wasm.wasm'
  | 'tfjs-backend-wasm-simd.wasm'
  | 'tfjs-backend-wasm-threaded-simd.wasm'

/** URLs of tfjs' WebAssembly binaries by file name (see {@link WasmFileName}). @category Backends */
export type WasmPathMap = Readonly<Partial<Record<WasmFileName, string>>>

/**
 * The kernel choice of {@link UseBackendOptions.kernels}.
 *
 * @category Backends
 */
export type KernelsMode = 'auto' | KernelProviderName | 'none'

/** All kernel modes, in a stable order. @category Backends */
export const KERNELS_MODES: readonly KernelsMode[] = Object.freeze(['auto', 'native', 'wasm', 'js', 'none'])

const isNode = (): boolean =>
  typeof process !== 'undefined' && typeof process.versions === 'object' && typeof process.versions.node === 'string'

/** Whether the code runs in Node.js (as opposed to a browser or worker). @category Backends */
export function isNodeRuntime(): boolean {
  return isNode()
}

let wasmPathsSet = false

async function importBackendPackage(name: BackendName, options: UseBackendOptions): Promise<void> {
  switch (name) {
    case 'cpu':
      await import('@tensorflow/tfjs-backend-cpu')
      return
    case 'wasm': {
      const wasm = await import('@tensorflow/tfjs-backend-wasm')
      if (!wasmPathsSet || options.wasmPaths !== undefined) {
        const prefix = options.wasmPaths ?? (await defaultWasmPaths())
        if (prefix !== undefined) wasm.setWasmPaths(prefix)
        wasmPathsSet = true
      }
      return
    }
    case 'webgl':
      await import('@tensorflow/tfjs-backend-webgl')
      return
    case 'webgpu':
      await import('@tensorflow/tfjs-backend-webgpu')
      return
    case 'tensorflow':
    case 'tensorflow-gpu': {
      // Not statically imported: the packages are optional and usually absent.
      const specifier = BACKEND_PACKAGES[name]
      await import(/* @vite-ignore */ specifier)
      return
    }
  }
}

async function defaultWasmPaths(): Promise<string | undefined> {
  if (!isNode()) return undefined
  const { createRequire } = await import('node:module')
  const { dirname } = await import('node:path')
  const require = createRequire(import.meta.url)
  const entry = require.resolve('@tensorflow/tfjs-backend-wasm')
  return `${dirname(entry)}/`
}

function unavailableReason(name: BackendName, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error)
  if (/tfjs_binding|libtensorflow/.test(message)) {
    return (
      `its package '${BACKEND_PACKAGES[name]}' is installed but its native binding is missing (its install ` +
      'script, which downloads libtensorflow, did not run or failed)'
    )
  }
  if (/Cannot find (module|package)|Could not resolve|ERR_MODULE_NOT_FOUND|MODULE_NOT_FOUND/.test(message)) {
    return `its package '${BACKEND_PACKAGES[name]}' is not installed`
  }
  if ((name === 'webgl' || name === 'webgpu') && isNode()) {
    return `${name} runs only in a browser (this is Node.js ${process.version})`
  }
  if (name === 'wasm' && !isNode()) {
    // tfjs only logs why (usually: the .wasm file was not found next to the page, or the server
    // sent a page instead of it); a bundled app must say where its bundler put the files.
    return (
      `its WebAssembly binary could not be loaded (${message.split('\n')[0]}); ` +
      `in a bundled app pass useBackend('wasm', { wasmPaths }) with the URLs the bundler serves tfjs' .wasm files at`
    )
  }
  return `it could not start (${message.split('\n')[0]})`
}

/** Whether (re)installing the backend's package can fix `reason` (not for webgl in Node, say). */
function needsInstall(reason: string): boolean {
  return /is not installed|native binding is missing/.test(reason)
}

function checkName(name: string): asserts name is BackendName {
  if (!(BACKEND_NAMES as readonly string[]).includes(name)) {
    throw new ConfigError('backend', `'${name}' is not a backend; expected one of ${BACKEND_NAMES.join(', ')}`, {
      value: name,
    })
  }
}

/**
 * Imports a backend's package, activates it (`tf.setBackend` + `tf.ready`) and returns the
 * backend that is actually active.
 *
 * For `wasm`, `setWasmPaths` is called first (see {@link UseBackendOptions.wasmPaths}). Then
 * attnlab's kernels and gradients are registered, the only place they are: the gradients of the
 * stock kernels tfjs-core's Node build lacks and the structured kernels of the minimal model
 * (`@attnlab/core/kernels`) on every backend, in every kernels mode; and the fused kernels of a
 * provider per {@link UseBackendOptions.kernels} (default `auto`: the native kernels when built,
 * else the WebAssembly ones; `none` restores the stock kernels). A backend started any other way
 * (`tf.setBackend`) lacks them: the ops that need them throw `KernelsUnavailableError`.
 *
 * @param name - the backend to use
 * @param options - backend-specific options
 * @returns the active backend's name, as confirmed by `tf.getBackend()`
 * @throws {@link BackendUnavailableError} when the package is missing or the backend cannot start
 *   here (e.g. `webgl` in Node); the message names the package and the backends available here.
 * @throws {@link ConfigError} for an unknown backend name, kernels mode or thread count, a
 *   `wasmPaths` map with an unknown file name or a non-string URL, or kernels the backend cannot host
 * @throws {@link KernelsUnavailableError} when explicitly requested kernels cannot be used (e.g.
 *   `native` not built: the message names the build command); `auto` never throws for this
 * @example
 * ```ts
 * import { useBackend } from '@attnlab/core'
 * await useBackend('wasm') // 'wasm', with the fastest attnlab kernels available
 * await useBackend('wasm', { kernels: 'none' }) // stock tfjs-wasm kernels only
 * ```
 * @category Backends
 */
export async function useBackend(name: BackendName, options: UseBackendOptions = {}): Promise<BackendName> {
  checkName(name)
  checkKernelOptions(name, options)
  try {
    await quietly(() => importBackendPackage(name, options))
  } catch (error) {
    const reason = unavailableReason(name, error)
    const available = await availableBackends()
    throw new BackendUnavailableError(name, BACKEND_PACKAGES[name], reason, available, error, needsInstall(reason))
  }
  const registered = REGISTERED_NAME[name]
  let ok = false
  let failure: unknown
  const warnings: string[] = []
  if (tf.findBackendFactory(registered) !== null || tf.findBackend(registered) !== null) {
    try {
      // setBackend logs a warning and returns false when initialisation fails. The wasm backend's
      // emscripten glue installs process handlers while it starts; see withoutRethrowingHandlers.
      ok = await withoutRethrowingHandlers(name, async () => {
        const started = await quietly(() => tf.setBackend(registered), warnings)
        if (started) await tf.ready()
        return started
      })
      if (ok && name === 'cpu') {
        // The cpu backend prints a banner recommending tfjs-node on first use in Node; the choice
        // of backend is ours to report, so silence it.
        ;(tf.backend() as unknown as { firstUse?: boolean }).firstUse = false
      }
    } catch (error) {
      failure = error
      ok = false
    }
  }
  if (!ok || tf.getBackend() !== registered) {
    if (failure === undefined && warnings.length > 0) failure = new Error(warnings.join('; '))
    const reason = unavailableReason(name, failure ?? new Error('not registered'))
    const available = await availableBackends()
    throw new BackendUnavailableError(name, BACKEND_PACKAGES[name], reason, available, failure, needsInstall(reason))
  }
  // attnlab's own kernels and gradients: registered here and nowhere else (libraries call ops).
  // (loaded here, not at import: core's main entry stays the contracts)
  const [{ registerGradients }, { registerStructuredKernels }] = await Promise.all([
    import('./kernels/gradients.ts'),
    import('./kernels/structured/register.ts'),
  ])
  registerGradients()
  registerStructuredKernels(registered)
  await enableKernels(name, options)
  return name
}

const WASM_FILE_NAMES: readonly string[] = [
  'tfjs-backend-wasm.wasm',
  'tfjs-backend-wasm-simd.wasm',
  'tfjs-backend-wasm-threaded-simd.wasm',
]

function checkWasmPaths(paths: unknown): void {
  if (paths === undefined || typeof paths === 'string') return
  if (paths === null || typeof paths !== 'object' || Array.isArray(paths)) {
    throw new ConfigError(
      'wasmPaths',
      `expected a path prefix ending in '/' or a map from ${WASM_FILE_NAMES.join(', ')} to URLs (got ` +
        `${paths === null ? 'null' : typeof paths})`,
      { value: paths },
    )
  }
  for (const [file, url] of Object.entries(paths)) {
    if (!WASM_FILE_NAMES.includes(file)) {
      throw new ConfigError('wasmPaths', `'${file}' is not a tfjs wasm file; expected ${WASM_FILE_NAMES.join(', ')}`, {
        value: file,
      })
    }
    if (typeof url !== 'string' || url === '') {
      throw new ConfigError(
        'wasmPaths',
        `the URL of '${file}' must be a non-empty string (got ${JSON.stringify(url)})`,
        { value: url },
      )
    }
  }
}

function checkKernelOptions(name: BackendName, options: UseBackendOptions): void {
  checkWasmPaths(options.wasmPaths)
  const mode = options.kernels
  if (mode !== undefined && !(KERNELS_MODES as readonly string[]).includes(mode)) {
    throw new ConfigError(
      'kernels',
      `'${String(mode)}' is not a kernels mode; expected one of ${KERNELS_MODES.join(', ')}`,
      { value: mode },
    )
  }
  const threads = options.threads
  if (threads !== undefined) checkRange('threads', threads, { min: 1, max: 256, integer: true })
  if (mode === 'wasm' && name !== 'wasm') {
    throw new ConfigError(
      'kernels',
      `'wasm' kernels compute on the tfjs wasm heap and need the 'wasm' backend, not '${name}'`,
      { value: mode },
    )
  }
  if ((mode === 'native' || mode === 'js') && name !== 'wasm' && name !== 'cpu') {
    throw new ConfigError(
      'kernels',
      `attnlab kernels register on the 'wasm' and 'cpu' backends, not '${name}'; use kernels 'auto' or 'none'`,
      { value: mode },
    )
  }
  if (mode === 'native' && !isNode()) {
    throw new ConfigError('kernels', `'native' kernels need Node.js; use 'wasm' in a browser`, { value: mode })
  }
}

async function loadProvider(mode: KernelProviderName, threads: number): Promise<KernelProvider> {
  switch (mode) {
    case 'js':
      return (await import('./kernels/js-provider.ts')).jsKernelProvider
    case 'wasm': {
      const { loadWasmKernelProvider } = await import('./kernels/wasm-provider.ts')
      try {
        return await loadWasmKernelProvider()
      } catch (error) {
        throw new KernelsUnavailableError(
          'wasm',
          'the WebAssembly kernels could not be instantiated ' +
            `(${error instanceof Error ? error.message : String(error)})`,
          error,
        )
      }
    }
    case 'native': {
      const { loadNativeKernelProvider } = await import('./kernels/native-provider.ts')
      return await loadNativeKernelProvider({ threads })
    }
  }
}

/** Registers a provider's kernels (the engine is loaded on first use). */
async function register(target: 'wasm' | 'cpu', provider: KernelProvider): Promise<void> {
  const { registerAttnlabKernels } = await import('./kernels/register.ts')
  registerAttnlabKernels(target, provider)
}

/** Registers (or removes) attnlab kernels on the backend just activated. */
async function enableKernels(name: BackendName, options: UseBackendOptions): Promise<void> {
  const mode = options.kernels ?? 'auto'
  const threads = options.threads ?? 1
  const target = name === 'wasm' || name === 'cpu' ? name : undefined
  if (target === undefined) return
  if (mode === 'none') {
    activeKernels(target)?.dispose()
    return
  }
  if (mode !== 'auto') {
    const current = activeKernels(target)
    if (current?.provider.name === mode) {
      current.provider.setThreads(threads)
      return
    }
    await register(target, await loadProvider(mode, threads))
    return
  }
  const order: KernelProviderName[] = target === 'cpu' ? ['js'] : isNode() ? ['native', 'wasm'] : ['wasm']
  for (const candidate of order) {
    const current = activeKernels(target)
    if (current?.provider.name === candidate) {
      current.provider.setThreads(threads)
      return
    }
    try {
      await register(target, await loadProvider(candidate, threads))
      return
    } catch {
      // 'auto' falls through to the next provider (native not built, wasm internals changed, ...).
    }
  }
  activeKernels(target)?.dispose()
}

/**
 * Which attnlab kernel provider is registered on a backend (default: the active one), or `none`.
 *
 * @example
 * ```ts
 * await useBackend('wasm')
 * kernelsInUse() // 'native' when built, else 'wasm'
 * ```
 * @category Backends
 */
export function kernelsInUse(backendName?: BackendName): KernelProviderName | 'none' {
  const name = backendName === undefined ? undefined : REGISTERED_NAME[backendName]
  return activeKernels(name)?.provider.name ?? 'none'
}

/** The process events whose handlers tfjs-wasm's emscripten glue installs. */
const RETHROWING_EVENTS = ['uncaughtException', 'unhandledRejection'] as const

/**
 * Runs `fn` (which starts a backend) and then removes the `uncaughtException` and
 * `unhandledRejection` handlers it added to `process` (Node, `wasm` only).
 *
 * tfjs-backend-wasm's emscripten glue adds a handler for each that rethrows what it gets
 * (`process.on('uncaughtException', (ex) => { throw ex })`), and its own clean-up never removes
 * them. A rethrow from inside the handler makes Node print the throwing source line (about 39 KB of
 * minified tfjs code) before the user's error and exit with code 7 instead of 1. Without the
 * handlers Node's default applies: the error and its stack, exit code 1. tfjs-wasm needs neither
 * handler (it never calls emscripten's `exit`).
 */
async function withoutRethrowingHandlers<T>(name: BackendName, fn: () => Promise<T>): Promise<T> {
  if (name !== 'wasm' || !isNode() || typeof process.listeners !== 'function') return fn()
  type Listener = (...args: unknown[]) => void
  const emitter = process as unknown as {
    listeners(event: string): Listener[]
    removeListener(event: string, listener: Listener): unknown
  }
  const before = new Map(RETHROWING_EVENTS.map((event) => [event, new Set(emitter.listeners(event))]))
  try {
    return await fn()
  } finally {
    for (const event of RETHROWING_EVENTS) {
      const known = before.get(event) as Set<Listener>
      for (const listener of emitter.listeners(event)) if (!known.has(listener)) emitter.removeListener(event, listener)
    }
  }
}

/** Runs `fn` with `console.warn` silenced; what it would have printed goes to `warnings`. */
async function quietly<T>(fn: () => Promise<T>, warnings?: string[]): Promise<T> {
  const warn = console.warn
  console.warn = (...args: unknown[]) => {
    warnings?.push(args.map((arg) => (arg instanceof Error ? arg.message : String(arg))).join(' '))
  }
  try {
    return await fn()
  } finally {
    console.warn = warn
  }
}

/**
 * Which backends can run here: their package imports and tfjs has them registered.
 * Probing `tensorflow` imports `@tensorflow/tfjs-node` when installed (which activates it), so
 * the previously active backend is restored afterwards.
 *
 * @returns the backend names that can be passed to {@link useBackend}, in {@link BACKEND_NAMES} order
 * @category Backends
 */
export async function availableBackends(): Promise<BackendName[]> {
  const before = currentBackendOrUndefined()
  const found: BackendName[] = []
  for (const name of BACKEND_NAMES) {
    try {
      await quietly(() => importBackendPackage(name, {}))
    } catch {
      continue
    }
    const registered = REGISTERED_NAME[name]
    if (tf.findBackendFactory(registered) === null && tf.findBackend(registered) === null) continue
    if ((name === 'webgl' || name === 'webgpu') && isNode()) continue
    found.push(name)
  }
  const after = currentBackendOrUndefined()
  if (before !== undefined && after !== before) await tf.setBackend(before)
  return found
}

function currentBackendOrUndefined(): string | undefined {
  // tf.getBackend() would initialise a backend as a side effect when none is set yet.
  const engine = tf.engine() as unknown as { backendName?: string | null }
  return engine.backendName ?? undefined
}

/**
 * The fastest backend that works here, in this preference order: Node: `tensorflow-gpu`,
 * `tensorflow`, `wasm`, `cpu`; browser: `webgpu`, `webgl`, `wasm`, `cpu`. In Node today this is
 * `wasm` (measured 5-10x faster than `cpu` for training; see [docs/performance.md](../../../docs/performance.md)).
 * It does not activate the backend: pass the result to {@link useBackend}.
 *
 * @returns the name of the preferred available backend
 * @category Backends
 */
export async function defaultBackend(): Promise<BackendName> {
  const order: BackendName[] = isNode()
    ? ['tensorflow-gpu', 'tensorflow', 'wasm', 'cpu']
    : ['webgpu', 'webgl', 'wasm', 'cpu']
  const available = new Set(await availableBackends())
  for (const name of order) if (available.has(name)) return name
  return 'cpu'
}

/**
 * The active backend as a {@link BackendName} (`tensorflow` for both native builds).
 *
 * @throws {@link ConfigError} if the active backend is not one attnlab knows
 * @category Backends
 */
export function activeBackend(): BackendName {
  const name = tf.getBackend()
  if ((BACKEND_NAMES as readonly string[]).includes(name)) return name as BackendName
  throw new ConfigError('backend', `the active tfjs backend '${name}' is not one attnlab knows`, { value: name })
}

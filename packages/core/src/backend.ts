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
import { BackendUnavailableError, ConfigError } from './errors.ts'

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
   * wasm only: where the `.wasm` files are (a directory path or URL prefix ending in `/`).
   * Default in Node: the `dist/` folder of the installed `@tensorflow/tfjs-backend-wasm`;
   * in a browser: tfjs' own default (next to the script).
   */
  readonly wasmPaths?: string
}

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
    return `its package '${BACKEND_PACKAGES[name]}' is installed but its native binding is missing (its install script, which downloads libtensorflow, did not run or failed)`
  }
  if (/Cannot find (module|package)|Could not resolve|ERR_MODULE_NOT_FOUND|MODULE_NOT_FOUND/.test(message)) {
    return `its package '${BACKEND_PACKAGES[name]}' is not installed`
  }
  if ((name === 'webgl' || name === 'webgpu') && isNode()) {
    return `${name} runs only in a browser (this is Node.js ${process.version})`
  }
  return `it could not start (${message.split('\n')[0]})`
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
 * For `wasm`, `setWasmPaths` is called first (see {@link UseBackendOptions.wasmPaths}).
 *
 * @param name - the backend to use
 * @param options - backend-specific options
 * @returns the active backend's name, as confirmed by `tf.getBackend()`
 * @throws {@link BackendUnavailableError} when the package is missing or the backend cannot start
 *   here (e.g. `webgl` in Node); the message names the package and the backends available here.
 * @throws {@link ConfigError} for an unknown backend name
 * @example
 * ```ts
 * import { useBackend } from '@attnlab/core'
 * await useBackend('wasm') // 'wasm'
 * ```
 * @category Backends
 */
export async function useBackend(name: BackendName, options: UseBackendOptions = {}): Promise<BackendName> {
  checkName(name)
  try {
    await quietly(() => importBackendPackage(name, options))
  } catch (error) {
    throw new BackendUnavailableError(
      name,
      BACKEND_PACKAGES[name],
      unavailableReason(name, error),
      await availableBackends(),
      error,
    )
  }
  const registered = REGISTERED_NAME[name]
  let ok = false
  let failure: unknown
  if (tf.findBackendFactory(registered) !== null || tf.findBackend(registered) !== null) {
    try {
      // setBackend logs a warning and returns false when initialisation fails.
      ok = await quietly(() => tf.setBackend(registered))
      if (ok) await tf.ready()
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
    throw new BackendUnavailableError(
      name,
      BACKEND_PACKAGES[name],
      failure !== undefined ? unavailableReason(name, failure) : unavailableReason(name, new Error('not registered')),
      await availableBackends(),
      failure,
    )
  }
  return name
}

async function quietly<T>(fn: () => Promise<T>): Promise<T> {
  const warn = console.warn
  console.warn = () => {}
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
 * `wasm` (measured 5-10x faster than `cpu` for training; see `docs/performance.md`).
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

/**
 * Typed errors shared by every attnlab package.
 *
 * Every error thrown on purpose by attnlab is an {@link AttnlabError}: it has a stable,
 * machine-readable {@link AttnlabError.code} (never changes between versions) and a message that
 * names the offending value and what was expected. Packages subclass it for their own failures.
 *
 * @module
 */

/**
 * Stable error codes. Add new codes at the end; never rename one.
 *
 * @category Errors
 */
export type AttnlabErrorCode =
  | 'BACKEND_UNAVAILABLE'
  | 'SHAPE_MISMATCH'
  | 'INVALID_CONFIG'
  | 'INVALID_ARGUMENT'
  | 'INVALID_SAFETENSORS'
  | 'INVALID_CHECKPOINT'
  | 'NON_FINITE'
  | 'UNSUPPORTED'
  | 'IO_ERROR'
  | 'TOO_LARGE'
  | 'INTERRUPTED'

/**
 * Base class of every error attnlab throws on purpose.
 *
 * @example
 * ```ts
 * try { await useBackend('tensorflow') } catch (e) {
 *   if (e instanceof AttnlabError && e.code === 'BACKEND_UNAVAILABLE') { ... }
 * }
 * ```
 * @category Errors
 */
export class AttnlabError extends Error {
  /** Stable, machine-readable code. */
  readonly code: AttnlabErrorCode
  /** Structured details (offending value, expected value, ...), for programs. */
  readonly details: Readonly<Record<string, unknown>>

  constructor(
    code: AttnlabErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    // Subclasses spell their name out as a field (set after this constructor): minifying
    // bundlers rename classes, so new.target.name would be e.g. 't' in a browser bundle.
    this.name = new.target === AttnlabError ? 'AttnlabError' : new.target.name
    this.code = code
    this.details = Object.freeze({ ...details })
  }
}

/**
 * A tensor backend cannot be used here: its package is not installed, or it cannot start in this
 * runtime (for example `webgl` in Node). The message names the package to install and the
 * backends that are available.
 *
 * @category Errors
 */
export class BackendUnavailableError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'BackendUnavailableError'
  /** The backend that was asked for. */
  readonly backend: string
  /** The npm package that provides it. */
  readonly packageName: string
  /**
   * @param missing - whether installing `packageName` would help (default true); false when the
   *   package is there but the backend cannot run here (webgl in Node), so no install is suggested
   */
  constructor(
    backend: string,
    packageName: string,
    reason: string,
    available: readonly string[],
    cause?: unknown,
    missing = true,
  ) {
    super(
      'BACKEND_UNAVAILABLE',
      `Backend '${backend}' is unavailable: ${reason}.` +
        (missing ? ` It needs the package '${packageName}' (install it with: pnpm add ${packageName}).` : '') +
        ` Backends available here: ${available.length > 0 ? available.join(', ') : 'none'}.`,
      { backend, packageName, available: [...available], missing },
      { cause },
    )
    this.backend = backend
    this.packageName = packageName
  }
}

/**
 * Requested kernels cannot be used here: the native kernels are not built (or were built from
 * other sources), they do not load, or the backend lacks what they need. Code
 * `BACKEND_UNAVAILABLE`; the message says how to fix it (for native kernels: the build command).
 *
 * @category Errors
 */
export class KernelsUnavailableError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'KernelsUnavailableError'
  /** The kernel provider that was asked for (`native`, `wasm`, `js`). */
  readonly provider: string
  constructor(provider: string, reason: string, cause?: unknown) {
    super('BACKEND_UNAVAILABLE', `Kernels '${provider}' are unavailable: ${reason}.`, { provider }, { cause })
    this.provider = provider
  }
}

/**
 * A tensor does not have the shape a function expects.
 *
 * @category Errors
 */
export class ShapeError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'ShapeError'
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('SHAPE_MISMATCH', message, details)
  }
}

/**
 * A configuration or parameter is invalid (out of range, inconsistent, impossible).
 *
 * @category Errors
 */
export class ConfigError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'ConfigError'
  /** The name of the offending parameter. */
  readonly parameter: string
  constructor(parameter: string, message: string, details: Record<string, unknown> = {}) {
    super('INVALID_CONFIG', `Invalid ${parameter}: ${message}`, { parameter, ...details })
    this.parameter = parameter
  }
}

/**
 * A numerical computation produced NaN or infinity (for example a diverging loss).
 *
 * @category Errors
 */
export class NonFiniteError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'NonFiniteError'
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('NON_FINITE', message, details)
  }
}

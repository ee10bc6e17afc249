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

/**
 * An argument of a call is invalid: a token outside the vocabulary, a head that does not exist, a
 * mask of the wrong length, a call on a disposed object. Code `INVALID_ARGUMENT`. (A bad
 * configuration field is a {@link ConfigError}; a tensor of the wrong shape a {@link ShapeError}.)
 *
 * @example
 * ```ts
 * try { task.nextTokenProbabilities([0, 99]) } catch (e) {
 *   if (e instanceof InvalidArgumentError) console.log(e.code, e.message) // INVALID_ARGUMENT ...
 * }
 * ```
 * @category Errors
 */
export class InvalidArgumentError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'InvalidArgumentError'
  constructor(message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super('INVALID_ARGUMENT', message, details, options)
  }
}

/**
 * What was asked is valid but not supported here (a feature of a model format attnlab does not
 * read, an operation the active backend or kernels cannot do). Code `UNSUPPORTED`.
 *
 * @category Errors
 */
export class UnsupportedError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'UnsupportedError'
  constructor(message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super('UNSUPPORTED', message, details, options)
  }
}

/**
 * A file or directory could not be read or written (missing, not writable, a directory where a
 * file was expected). Code `IO_ERROR`; the message names the path.
 *
 * @category Errors
 */
export class IoError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'IoError'
  constructor(message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super('IO_ERROR', message, details, options)
  }
}

/**
 * A computation would need more memory or time than attnlab allows (an exact oracle over too many
 * contexts, an ODE integration with too many steps). Code `TOO_LARGE`; the message names the size
 * and the limit.
 *
 * @category Errors
 */
export class TooLargeError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'TooLargeError'
  constructor(message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super('TOO_LARGE', message, details, options)
  }
}

/**
 * A run was stopped on request (an `AbortSignal`, a stop signal) before it finished; what was done
 * so far is kept (for example a resumable checkpoint). Code `INTERRUPTED`.
 *
 * @category Errors
 */
export class InterruptedError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'InterruptedError'
  constructor(message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super('INTERRUPTED', message, details, options)
  }
}

/**
 * Saved state cannot be restored: a trainer, optimizer or schedule state (or a run directory's
 * checkpoint) is malformed or belongs to another run. Code `INVALID_CHECKPOINT`; `details.field`
 * names the field at fault. (`@attnlab/transformer`'s `CheckpointError` is the one for a
 * checkpoint directory's files, naming the file.)
 *
 * @category Errors
 */
export class InvalidCheckpointError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'InvalidCheckpointError'
  constructor(message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super('INVALID_CHECKPOINT', message, details, options)
  }
}

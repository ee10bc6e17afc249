/**
 * Errors of the queue runner: a `--queue` that is not a Redis URL, a Redis that cannot be
 * reached, a job made by another attnlab version.
 *
 * @module
 */
import { InvalidArgumentError, IoError, UnsupportedError } from '@attnlab/core'

/**
 * A queue URL is not a Redis URL (`redis://HOST:PORT/DB`, `rediss://` for TLS). Code
 * `INVALID_ARGUMENT`; {@link QueueUrlError.url} is the URL as given.
 *
 * @example
 * ```ts
 * try { parseQueueUrl('localhost:6379') } catch (e) {
 *   if (e instanceof QueueUrlError) console.log(e.message) // 'localhost:6379' is not a Redis URL: ...
 * }
 * ```
 * @category Errors
 */
export class QueueUrlError extends InvalidArgumentError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'QueueUrlError'
  /** The URL as given. */
  readonly url: string
  constructor(url: string, message: string) {
    super(`queue URL '${url}' ${message}`, { url })
    this.url = url
  }
}

/**
 * Redis cannot be reached (connection refused, unknown host, timeout), refuses the connection
 * (wrong password, database index out of range) or is too old for BullMQ. Code `IO_ERROR`; the
 * message names the URL (its password hidden) and what failed.
 *
 * @category Errors
 */
export class QueueConnectionError extends IoError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'QueueConnectionError'
  /** The URL, its password hidden. */
  readonly url: string
  constructor(url: string, message: string, options?: { cause?: unknown }) {
    super(`cannot use the Redis queue at ${url}: ${message}`, { url }, options)
    this.url = url
  }
}

/**
 * A queued trial was submitted by another version of `@attnlab/sweeps` than the worker's: the
 * worker refuses it without running it (a version that cannot reproduce it must not run it).
 * Code `UNSUPPORTED`; the trial is recorded as failed with this error.
 *
 * @category Errors
 */
export class QueueVersionError extends UnsupportedError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'QueueVersionError'
  /** The version that submitted the trial. */
  readonly submitted: string
  /** The worker's version. */
  readonly worker: string
  constructor(submitted: string, worker: string, where: string) {
    super(
      `trial submitted by attnlab sweeps ${submitted} refused by a worker running ${worker} (${where}): ` +
        `run the workers with attnlab ${submitted}, or resubmit the sweep with ${worker}`,
      { submitted, worker },
    )
    this.submitted = submitted
    this.worker = worker
  }
}

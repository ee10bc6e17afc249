/**
 * Errors of the sweeps: a spec that does not validate, a sweep directory that does not fit.
 *
 * @module
 */
import { AttnlabError } from '@attnlab/core'

/**
 * A sweep spec is invalid: an unknown key (with a did-you-mean), a value of the wrong type, an
 * empty grid, zip lists of unequal length, bad seeds, or a grid value the experiment's own
 * validator refuses. Code `INVALID_CONFIG`. The message starts with the file and the key path
 * (`sweep.yaml: grid.task.genLen: ...`); {@link SweepSpecError.path} is the key path
 * (`grid.task.genLen`, `seeds`, `base.training.steps`; empty for the whole document).
 *
 * @example
 * ```ts
 * try { parseSweepSpec('name: x\nexperiment: emergnce\n', 'x.yaml') } catch (e) {
 *   if (e instanceof SweepSpecError) console.log(e.path) // 'experiment'
 * }
 * ```
 * @category Errors
 */
export class SweepSpecError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'SweepSpecError'
  /** The key path of the offending value (`grid.task.genLen`), empty for the whole document. */
  readonly path: string
  /** The spec's file name as given to the parser. */
  readonly file: string
  constructor(file: string, path: string, message: string, details: Record<string, unknown> = {}, cause?: unknown) {
    super(
      'INVALID_CONFIG',
      `${file}: ${path === '' ? '' : `${path}: `}${message}`,
      { file, path, ...details },
      { cause },
    )
    this.path = path
    this.file = file
  }
}

/**
 * A sweep directory cannot be used as asked: it holds another sweep (a different spec; pass
 * `force`), it is not a sweep directory (no `sweep.json`), or a trial index is out of range.
 * Code `INVALID_ARGUMENT`; {@link SweepDirectoryError.directory} names the directory and
 * `details.reason` says which case it is (`same-sweep`: it holds this spec, continue with
 * `resume`; `other-sweep`: another spec, pass `force`; `not-empty`: other files, pass `force`;
 * `no-sweep`: no `sweep.json`; `running`: another runner holds `sweep.lock`).
 *
 * @category Errors
 */
export class SweepDirectoryError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'SweepDirectoryError'
  /** The sweep directory. */
  readonly directory: string
  constructor(directory: string, message: string, details: Record<string, unknown> = {}) {
    super('INVALID_ARGUMENT', `${directory}: ${message}`, { directory, ...details })
    this.directory = directory
  }
}

/**
 * A sweep's worker processes could not start: the first worker to fail could not start the
 * backend it was given (the message carries that worker's error). Code `BACKEND_UNAVAILABLE`;
 * {@link SweepWorkersError.backend} names the backend.
 *
 * @category Errors
 */
export class SweepWorkersError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'SweepWorkersError'
  /** The backend the workers were to start. */
  readonly backend: string
  constructor(backend: string, message: string, details: Record<string, unknown> = {}) {
    super('BACKEND_UNAVAILABLE', message, { backend, ...details })
    this.backend = backend
  }
}

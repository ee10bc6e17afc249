/**
 * Typed errors of checkpoint import and export.
 *
 * - {@link ModelFileError} (`INVALID_CHECKPOINT`): a file is malformed or does not match what
 *   its header or config promises (truncated, oversized, inconsistent header, missing or
 *   unexpected tensor, wrong shape, non-finite values, missing file). `reason` says which.
 * - {@link UnsupportedModelError} (`UNSUPPORTED`): a well-formed model this library cannot run
 *   exactly (another architecture, biases the architecture has no place for, RoPE scaling...).
 *
 * Malformed safetensors files raise `SafetensorsError` (`INVALID_SAFETENSORS`) from
 * `@attnlab/core`, with the file path prefixed to the message.
 *
 * @module
 */
import { AttnlabError, ConfigError } from '@attnlab/core'

/**
 * Why a model file was rejected (stable strings, for programs):
 *
 * - `truncated`: the file ends before the data its header describes.
 * - `oversized`: bytes remain after all the data the header describes.
 * - `invalid-header`: a header or config field is out of range or self-contradictory.
 * - `missing-tensor`: a tensor the architecture needs is absent.
 * - `unexpected-tensor`: a tensor the architecture has no place for is present.
 * - `shape-mismatch`: a tensor's shape differs from what the config implies.
 * - `non-finite`: a weight is NaN or infinite.
 * - `missing-file`: a file the format needs is absent or unreadable.
 * - `invalid-json`: `config.json` or an index is not valid JSON of the expected form.
 * - `inconsistent`: two files disagree (a tokenizer whose vocabulary is not the model's).
 *
 * @category Import
 */
export type ModelFileErrorReason =
  | 'truncated'
  | 'oversized'
  | 'invalid-header'
  | 'missing-tensor'
  | 'unexpected-tensor'
  | 'shape-mismatch'
  | 'non-finite'
  | 'missing-file'
  | 'invalid-json'
  | 'inconsistent'

/**
 * A model or tokenizer file is malformed or inconsistent (code `INVALID_CHECKPOINT`). Thrown
 * before any model variable is created, so a failed load never leaves a half-loaded model.
 *
 * @example
 * ```ts
 * try { await loadModel('model.bin') } catch (e) {
 *   if (e instanceof ModelFileError && e.reason === 'truncated') console.error('download again')
 * }
 * ```
 * @category Import
 */
export class ModelFileError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'ModelFileError'
  /** What is wrong (see {@link ModelFileErrorReason}). */
  readonly reason: ModelFileErrorReason
  /** The file at fault, when known. */
  readonly file: string | undefined
  /** The tensor (or header/config field) at fault, when there is one. */
  readonly tensor: string | undefined

  constructor(
    reason: ModelFileErrorReason,
    message: string,
    details: { file?: string | undefined; tensor?: string | undefined; [key: string]: unknown } = {},
    options?: { cause?: unknown },
  ) {
    const prefix = details.file === undefined ? '' : `${details.file}: `
    super('INVALID_CHECKPOINT', `${prefix}${message}`, { reason, ...details }, options)
    this.reason = reason
    this.file = details.file
    this.tensor = details.tensor
  }
}

/**
 * A well-formed model that attnlab cannot run exactly (code `UNSUPPORTED`): another
 * architecture, weights the target architecture has no place for (e.g. biases), RoPE scaling,
 * a quantized llama2.c export... The message says what was found and what is supported.
 * Nothing is ever dropped silently instead.
 *
 * @category Import
 */
export class UnsupportedModelError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'UnsupportedModelError'
  /** The file or directory at fault, when known. */
  readonly file: string | undefined

  constructor(message: string, details: { file?: string | undefined; [key: string]: unknown } = {}) {
    const prefix = details.file === undefined ? '' : `${details.file}: `
    super('UNSUPPORTED', `${prefix}${message}`, details)
    this.file = details.file
  }
}

/**
 * Builds a model configuration read from a checkpoint's `config.json`: a `ConfigError` of the
 * build (an impossible combination of sizes) becomes a {@link ModelFileError} (`invalid-header`)
 * naming the file and the offending field.
 *
 * @param file - the `config.json` path, for the error (undefined when the configuration came without a file)
 * @param build - builds the configuration (`createConfig(...)`)
 * @returns what `build` returns
 * @throws {@link ModelFileError} for a `ConfigError`; any other error as it is
 */
export function configFromFile<T>(file: string | undefined, build: () => T): T {
  try {
    return build()
  } catch (error) {
    if (error instanceof ConfigError) {
      throw new ModelFileError(
        'invalid-header',
        `config.json describes an impossible model: ${error.message}`,
        { file, tensor: error.parameter },
        { cause: error },
      )
    }
    throw error
  }
}

/**
 * Errors specific to sparse attention. Parameter problems are `ConfigError`s from
 * `@attnlab/core`; an input that does not fit a valid configuration (a prompt too short for the
 * budget) is a {@link SequenceTooShortError}.
 *
 * @module
 */
import { AttnlabError } from '@attnlab/core'

/**
 * A method's budget needs a longer sequence than the one it was given (for example Quest needs
 * the prompt to span more than `tokenBudget / pageSize + 1` pages). Code `INVALID_ARGUMENT`.
 *
 * @category Errors
 */
export class SequenceTooShortError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'SequenceTooShortError'
  /** The method that refused the input, e.g. `'quest'`. */
  readonly method: string
  /** The sequence length it was given (tokens). */
  readonly length: number
  /** The smallest length it accepts with this configuration (tokens). */
  readonly required: number
  constructor(method: string, length: number, required: number, reason: string) {
    super(
      'INVALID_ARGUMENT',
      `${method}: sequence of ${length} tokens is too short: ${reason} (needs at least ${required} tokens)`,
      {
        method,
        length,
        required,
      },
    )
    this.method = method
    this.length = length
    this.required = required
  }
}

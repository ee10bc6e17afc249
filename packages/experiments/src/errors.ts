/**
 * Errors of the experiments: an input that the experiment cannot run on (a prompt too short or
 * too long for the model, an unknown method, a target sparsity outside [0, 1)).
 *
 * @module
 */
import { AttnlabError } from '@attnlab/core'

/**
 * An experiment's input does not fit: the message names the value and what was expected, and
 * {@link ExperimentInputError.parameter} names the input (`tokens`, `methods`, `sparsities`,
 * `decodeSteps`). Code `INVALID_ARGUMENT`.
 *
 * @example
 * ```ts
 * try { await compareWithDense(model, [1], ['quest']) } catch (e) {
 *   if (e instanceof ExperimentInputError) console.log(e.code, e.parameter) // INVALID_ARGUMENT tokens
 * }
 * ```
 * @category Errors
 */
export class ExperimentInputError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'ExperimentInputError'
  /** The input that does not fit, e.g. `'tokens'`. */
  readonly parameter: string
  constructor(parameter: string, message: string, details: Record<string, unknown> = {}) {
    super('INVALID_ARGUMENT', message, { parameter, ...details })
    this.parameter = parameter
  }
}

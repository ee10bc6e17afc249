/**
 * Errors specific to `@attnlab/markov`.
 *
 * @module
 */
import { AttnlabError } from '@attnlab/core'

/**
 * An exact oracle would need more states than allowed (code `TOO_LARGE`). The message gives the
 * number of states, the limit, and the Monte-Carlo alternative to use instead.
 *
 * @category Oracles
 */
export class OracleTooLargeError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'OracleTooLargeError'
  /** States the exact computation would enumerate (e.g. `d^C` windows). */
  readonly states: number
  /** The limit that was exceeded. */
  readonly maxStates: number
  constructor(what: string, states: number, maxStates: number, alternative: string) {
    super(
      'TOO_LARGE',
      `${what} needs ${formatCount(states)} states, more than the limit of ${formatCount(maxStates)}; ` +
        `use ${alternative} instead (it returns estimates with standard errors), or raise maxStates if you have ` +
        'the memory and time',
      { states, maxStates, alternative },
    )
    this.states = states
    this.maxStates = maxStates
  }
}

/** `1234567` -> `'1.23e+6'`, small counts verbatim. */
export function formatCount(n: number): string {
  return n < 1e5 ? String(n) : n.toExponential(2)
}

/**
 * Validation helpers for the arguments of the sparsity and cost formulas (a method's configuration
 * is checked by its schema, e.g. `verticalSlashConfigSchema`): every check throws a `ConfigError`
 * naming the parameter, the offending value and what was expected.
 *
 * @module
 */
import { ConfigError, checkRange, describeRange, type NumberRange } from '@attnlab/core'

/**
 * A value as it was given, for messages: `NaN`, `Infinity`, `-1.5` and `undefined` as such
 * (JSON would print `null` for the first two and nothing for the last), other values as JSON.
 */
export function show(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'bigint' || value === undefined) return String(value)
  if (typeof value === 'function') return 'a function'
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/**
 * Checks a value against `range` in core's one range wording (`must be an integer >= 3, got 2`):
 * a number through core's `checkRange`, anything else shown as given.
 */
function checkInRange(parameter: string, value: unknown, range: NumberRange): number {
  if (typeof value !== 'number') throw new ConfigError(parameter, `must be ${describeRange(range)}, got ${show(value)}`)
  return checkRange(parameter, value, range)
}

/** Checks an integer in `[min, max]` (`max` defaults to no bound). */
export function checkInt(parameter: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  return checkInRange(parameter, value, { min, max, integer: true })
}

/** Checks a finite number in `[min, max]`. */
export function checkNumber(parameter: string, value: unknown, min: number, max: number): number {
  return checkInRange(parameter, value, { min, max })
}

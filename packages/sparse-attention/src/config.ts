/**
 * Validation helpers for method configurations: every check throws a `ConfigError` naming the
 * parameter, the offending value and what was expected.
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

/** Resolves `overrides` over `defaults`, rejecting unknown keys and `undefined` values. */
export function resolveConfig<C extends object>(method: string, defaults: C, overrides: Partial<C> | undefined): C {
  const resolved = { ...defaults }
  if (overrides === undefined) return resolved
  if (typeof overrides !== 'object' || overrides === null || Array.isArray(overrides)) {
    throw new ConfigError(method, `the configuration must be an object, got ${show(overrides)}`)
  }
  for (const [key, value] of Object.entries(overrides)) {
    if (!(key in defaults)) {
      throw new ConfigError(key, `is not a parameter of ${method} (known: ${Object.keys(defaults).join(', ')})`)
    }
    if (value === undefined) throw new ConfigError(key, 'is undefined; omit it to use the default')
    ;(resolved as Record<string, unknown>)[key] = value
  }
  return resolved
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

/** Checks one of a set of strings. */
export function checkChoice<T extends string>(parameter: string, value: unknown, choices: readonly T[]): T {
  if (typeof value !== 'string' || !(choices as readonly string[]).includes(value)) {
    throw new ConfigError(parameter, `must be one of ${choices.map((c) => `'${c}'`).join(', ')}, got ${show(value)}`)
  }
  return value as T
}

/** Checks a boolean. */
export function checkBoolean(parameter: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new ConfigError(parameter, `must be true or false, got ${show(value)}`)
  return value
}

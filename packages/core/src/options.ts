/**
 * Checks of option objects: a misspelled option name (`evalEvey` for `evalEvery`) is an error
 * rather than silently ignored.
 *
 * @module
 */
import { distance } from 'fastest-levenshtein'
import { ConfigError } from './errors.ts'

/**
 * The allowed name closest to `key` (Levenshtein, case-insensitive), if it is close enough to be a
 * likely typo: the did-you-mean of option and kind messages.
 *
 * @param key - the name given
 * @param allowed - the names accepted
 * @returns the suggestion, or `undefined` when none is within `max(2, floor(key.length / 3))` edits
 * @example
 * ```ts
 * closest('evalEvey', ['evalEvery', 'steps']) // 'evalEvery'
 * closest('nosuch', ['width', 'architecture']) // undefined
 * ```
 * @category Errors
 */
export function closest(key: string, allowed: readonly string[]): string | undefined {
  let best: string | undefined
  let bestDistance = Infinity
  for (const name of allowed) {
    const d = distance(key.toLowerCase(), name.toLowerCase()) // Levenshtein, case-insensitive
    if (d < bestDistance) {
      best = name
      bestDistance = d
    }
  }
  return bestDistance <= Math.max(2, Math.floor(key.length / 3)) ? best : undefined
}

/**
 * Checks that `options` is an object (or `undefined`) whose keys are all in `allowed`, so a
 * misspelled option name is reported instead of silently ignored.
 *
 * @param where - what takes the options, for the message (e.g. `'train options'`)
 * @param options - the options object as passed by the caller; `undefined` passes
 * @param allowed - every option name the function accepts
 * @throws `ConfigError` (code `INVALID_CONFIG`) whose `parameter` is the unknown key and whose
 *   message lists the allowed keys (and the closest one, for a likely typo); also for `options`
 *   that is not a plain object (`null`, an array, a number)
 * @category Errors
 */
export function checkOptionKeys(where: string, options: unknown, allowed: readonly string[]): void {
  if (options === undefined) return
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new ConfigError(
      where,
      `expected an object of options, got ${Array.isArray(options) ? 'an array' : String(options)}`,
      { allowed: [...allowed] },
    )
  }
  for (const key of Object.keys(options)) {
    if (allowed.includes(key)) continue
    const suggestion = closest(key, allowed)
    throw new ConfigError(
      key,
      `not one of the ${where}${suggestion === undefined ? '' : ` (did you mean '${suggestion}'?)`}; allowed: ` +
        `${allowed.join(', ')}`,
      { allowed: [...allowed] },
    )
  }
}

/**
 * The allowed values of a numeric parameter, for {@link describeRange} and {@link checkRange}.
 * Bounds are inclusive unless marked exclusive; an infinite bound (or, for integers, one beyond
 * the safe integers) is no bound. `min: Number.MIN_VALUE` reads as "> 0".
 *
 * @category Errors
 */
export interface NumberRange {
  /** Smallest allowed value (default: none). */
  readonly min?: number
  /** Largest allowed value (default: none). */
  readonly max?: number
  /** `min` itself is not allowed (`> min`). */
  readonly minExclusive?: boolean
  /** `max` itself is not allowed (`< max`). */
  readonly maxExclusive?: boolean
  /** Only integers are allowed. */
  readonly integer?: boolean
}

/**
 * A number as a message shows it: integers as integers (`1000000000`, not `1e9`), an integer too
 * large to be exact as `about 7.38e+19`, other numbers as JavaScript prints them.
 *
 * @param value - any number
 * @returns its text
 * @category Errors
 */
export function formatNumber(value: number): string {
  if (Number.isInteger(value) && Math.abs(value) > Number.MAX_SAFE_INTEGER) return `about ${value.toPrecision(3)}`
  return String(value)
}

/**
 * The allowed values in words, the one format of every range message: `>= 1`, `> 0`, `<= 5`,
 * `in (0, 1]`, `an integer in [1, 256]`, `an integer >= 0`, `a number` (no bound).
 *
 * @param range - the bounds
 * @returns the phrase that follows "must be"
 * @example
 * ```ts
 * describeRange({ min: 0, max: 1, minExclusive: true }) // 'in (0, 1]'
 * describeRange({ min: 1, integer: true }) // 'an integer >= 1'
 * ```
 * @category Errors
 */
export function describeRange(range: NumberRange): string {
  let { min, max } = range
  let minExclusive = range.minExclusive === true
  if (min === Number.MIN_VALUE && !minExclusive) {
    min = 0
    minExclusive = true
  }
  const beyondIntegers = (bound: number): boolean =>
    range.integer === true && Math.abs(bound) >= Number.MAX_SAFE_INTEGER
  const unbounded = (bound: number | undefined): boolean =>
    bound === undefined || !Number.isFinite(bound) || beyondIntegers(bound)
  if (unbounded(min)) min = undefined
  if (unbounded(max)) max = undefined
  const kind = range.integer === true ? 'an integer ' : ''
  if (min !== undefined && max !== undefined) {
    const open = minExclusive ? '(' : '['
    const close = range.maxExclusive === true ? ')' : ']'
    return `${kind}in ${open}${formatNumber(min)}, ${formatNumber(max)}${close}`
  }
  if (min !== undefined) return `${kind}${minExclusive ? '>' : '>='} ${formatNumber(min)}`
  if (max !== undefined) return `${kind}${range.maxExclusive === true ? '<' : '<='} ${formatNumber(max)}`
  return range.integer === true ? 'an integer' : 'a number'
}

/**
 * Whether `value` is in `range` (a finite number, an integer when asked, within the bounds).
 *
 * @category Errors
 */
export function inRange(value: number, range: NumberRange): boolean {
  if (typeof value !== 'number' || !Number.isFinite(value)) return false
  if (range.integer === true && !Number.isSafeInteger(value)) return false
  const { min, max } = range
  if (min !== undefined && (range.minExclusive === true ? !(value > min) : !(value >= min))) return false
  if (max !== undefined && (range.maxExclusive === true ? !(value < max) : !(value <= max))) return false
  return true
}

/**
 * Checks a numeric parameter against its range.
 *
 * @param parameter - the parameter's name, for the message
 * @param value - the value given
 * @param range - the allowed values
 * @returns `value`
 * @throws `ConfigError` (code `INVALID_CONFIG`): `Invalid threads: must be an integer in [1, 256], got 0`
 * @category Errors
 */
export function checkRange(parameter: string, value: number, range: NumberRange): number {
  if (inRange(value, range)) return value
  const got = typeof value === 'number' ? formatNumber(value) : (JSON.stringify(value) ?? String(value))
  throw new ConfigError(parameter, `must be ${describeRange(range)}, got ${got}`, { value, ...range })
}

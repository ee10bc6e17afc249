/**
 * Checks of option objects: a misspelled option name (`evalEvey` for `evalEvery`) is an error
 * rather than silently ignored.
 *
 * @module
 */
import { distance } from 'fastest-levenshtein'
import { ConfigError } from './errors.ts'

/** The allowed name closest to `key`, if it is close enough to be a likely typo. */
function closest(key: string, allowed: readonly string[]): string | undefined {
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
    throw new ConfigError(where, `expected an object of options, got ${Array.isArray(options) ? 'an array' : String(options)}`, { allowed: [...allowed] })
  }
  for (const key of Object.keys(options)) {
    if (allowed.includes(key)) continue
    const suggestion = closest(key, allowed)
    throw new ConfigError(
      key,
      `not one of the ${where}${suggestion === undefined ? '' : ` (did you mean '${suggestion}'?)`}; allowed: ${allowed.join(', ')}`,
      { allowed: [...allowed] },
    )
  }
}

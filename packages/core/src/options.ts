/**
 * Checks of option objects: a misspelled option name (`evalEvey` for `evalEvery`) is an error
 * rather than silently ignored.
 *
 * @module
 */
import { ConfigError } from './errors.ts'

/** Edit distance between two short strings (for "did you mean"). */
function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0] as number
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const above = row[j] as number
      row[j] = Math.min(above + 1, (row[j - 1] as number) + 1, diagonal + (a[i - 1]?.toLowerCase() === b[j - 1]?.toLowerCase() ? 0 : 1))
      diagonal = above
    }
  }
  return row[b.length] as number
}

/** The allowed name closest to `key`, if it is close enough to be a likely typo. */
function closest(key: string, allowed: readonly string[]): string | undefined {
  let best: string | undefined
  let bestDistance = Infinity
  for (const name of allowed) {
    const distance = editDistance(key, name)
    if (distance < bestDistance) {
      best = name
      bestDistance = distance
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

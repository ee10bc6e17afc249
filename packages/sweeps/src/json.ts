/**
 * Plain JSON values, canonical JSON (sorted keys) and dotted key paths into JSON objects.
 *
 * @module
 */

/**
 * A JSON value.
 *
 * @category Sweeps
 */
export type JsonValue = string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue }

/**
 * A JSON object.
 *
 * @category Sweeps
 */
export type JsonObject = { readonly [key: string]: JsonValue }

/** Whether `value` is a plain JSON object (not an array, not null). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * Canonical JSON: object keys sorted (by UTF-16 code units), no whitespace, numbers as
 * `JSON.stringify` writes them. Two equal values give the same text on every machine.
 *
 * @param value - a JSON value
 * @returns its canonical text
 * @category Sweeps
 */
export function canonicalJson(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v as JsonValue)).join(',')}]`
  if (isJsonObject(value)) {
    const keys = Object.keys(value).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k] as JsonValue)}`).join(',')}}`
  }
  return JSON.stringify(value)
}

/** The value at a dotted path (`task.nCtx`), or undefined. */
export function getPath(object: JsonValue, path: string): JsonValue | undefined {
  let current: JsonValue | undefined = object
  for (const part of path.split('.')) {
    if (!isJsonObject(current)) return undefined
    current = current[part]
  }
  return current
}

/**
 * A copy of `object` with `value` at the dotted `path`: missing objects on the way are created,
 * an object value is merged into an object already there (see {@link mergeJson}), anything else
 * replaces what was there.
 */
export function setPath(object: JsonObject, path: string, value: JsonValue): JsonObject {
  const [head, ...rest] = path.split('.') as [string, ...string[]]
  const current = object[head]
  if (rest.length === 0) {
    const merged = isJsonObject(current) && isJsonObject(value) ? mergeJson(current, value) : value
    return { ...object, [head]: merged }
  }
  return { ...object, [head]: setPath(isJsonObject(current) ? current : {}, rest.join('.'), value) }
}

/**
 * `base` with `overrides` merged in: objects merge key by key (a dotted key is a path), arrays and
 * other values replace.
 */
export function mergeJson(base: JsonObject, overrides: JsonObject): JsonObject {
  let merged = base
  for (const [key, value] of Object.entries(overrides)) merged = setPath(merged, key, value)
  return merged
}

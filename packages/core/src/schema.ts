/**
 * One declaration per configuration: a configuration is a zod schema built from the field
 * helpers here ({@link integerField}, {@link numberField}, {@link booleanField}, {@link enumField},
 * {@link listField}), wrapped in {@link configSchema}. The same declaration gives
 *
 * - the TypeScript type (`z.output<typeof schema>`),
 * - the defaults (`.default(...)` on each field; {@link parseConfig} of `{}` returns them all),
 * - the validation with attnlab's one-line messages ({@link parseConfig} throws a `ConfigError`
 *   naming the key path, the value given and what was expected, with a did-you-mean for an
 *   unknown key: `Invalid spams: is not a sparse-markov parameter (did you mean 'spans'?); ...`),
 * - the help of a command-line flag ({@link fieldInfo}: help text, default, range, choices), from
 *   which an app derives its flag parser (the CLI's `schema-flags.ts`).
 *
 * Cross-field rules (a stride at most the shortest span, `onesPerRow <= stateSize`) stay in the
 * module that owns the configuration, after {@link parseConfig}, and throw the same `ConfigError`.
 *
 * @example
 * ```ts
 * const schema = configSchema({
 *   stateSize: integerField('cells per state', { min: 2, max: 512 }).default(16),
 *   bos: booleanField('prepend a BOS token').default(false),
 * })
 * parseConfig(schema, { stateSize: 8 }, 'linear-map') // { stateSize: 8, bos: false }
 * parseConfig(schema, { stateSize: 1 }, 'linear-map') // Invalid stateSize: must be an integer in [2, 512], got 1
 * ```
 * @module
 */
import { z } from 'zod'
import { ConfigError } from './errors.ts'
import { closest, describeRange, formatNumber, inRange, type NumberRange } from './options.ts'

export { z }

/**
 * What a schema field tells a reader (a CLI's help, a documentation table) besides its type.
 *
 * @category Schemas
 */
export interface FieldMeta {
  /** What the field means, without its default (the CLI appends the default). */
  readonly help: string
  /** The allowed values of a number field, or of each entry of a list field. */
  readonly range?: NumberRange
  /** The allowed values of an enum field. */
  readonly choices?: readonly string[]
}

/** The registry that holds every field's {@link FieldMeta} (keyed by the schema instance). */
const fields = z.registry<FieldMeta>()

/** A value as a message shows it: strings quoted, arrays and objects as JSON. */
export function showValue(value: unknown): string {
  // JSON escapes keep a message on one line (a value with a newline shows as \n).
  if (typeof value === 'string') return `'${JSON.stringify(value).slice(1, -1)}'`
  if (typeof value === 'number') return formatNumber(value)
  if (typeof value === 'boolean' || value === null || value === undefined || typeof value === 'bigint')
    return String(value)
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/** The phrase after "must be" for a range: `a finite number` when unbounded. */
function rangePhrase(range: NumberRange): string {
  const phrase = describeRange(range)
  return phrase === 'a number' ? 'a finite number' : phrase
}

/**
 * A number field in `range` (bounds inclusive unless marked exclusive). Anything else (a string,
 * NaN, Infinity, a value out of range) reads `must be in (0, 100], got 0`.
 *
 * @param help - what the field means (for the CLI help and the docs)
 * @param range - the allowed values
 * @category Schemas
 */
export function numberField(help: string, range: NumberRange = {}): z.ZodNumber {
  const message = (input: unknown): string => `must be ${rangePhrase(range)}, got ${showValue(input)}`
  const schema = z.number({ error: (issue) => message(issue.input) }).check(
    z.refine((value) => inRange(value, range), {
      error: (issue) => message(issue.input),
      abort: true,
    }),
  )
  return schema.register(fields, { help, range })
}

/**
 * An integer field in `range`: `must be an integer in [2, 512], got 1`.
 *
 * @param help - what the field means
 * @param range - the allowed values (`integer` is implied)
 * @category Schemas
 */
export function integerField(help: string, range: Omit<NumberRange, 'integer'> = {}): z.ZodNumber {
  return numberField(help, { ...range, integer: true })
}

/**
 * A boolean field: anything else reads `got 'yes'; expected true or false`.
 *
 * @category Schemas
 */
export function booleanField(help: string): z.ZodBoolean {
  return z
    .boolean({ error: (issue) => `got ${showValue(issue.input)}; expected true or false` })
    .register(fields, { help })
}

/**
 * A field that takes one of `choices`: `got 'adamx' (did you mean 'adamw'?); expected one of adamw, sgd`.
 *
 * @category Schemas
 */
export function enumField<const T extends readonly [string, ...string[]]>(
  help: string,
  choices: T,
): z.ZodEnum<{
  [K in T[number]]: K
}> {
  const error = (issue: { readonly input?: unknown }): string => {
    const suggestion = typeof issue.input === 'string' ? closest(issue.input, choices) : undefined
    return (
      `got ${showValue(issue.input)}${suggestion === undefined ? '' : ` (did you mean '${suggestion}'?)`}; ` +
      `expected one of ${choices.join(', ')}`
    )
  }
  return z.enum(choices, { error }).register(fields, { help, choices })
}

/**
 * A list field: a read-only (frozen) array of `entry` with `minLength` to `maxLength` entries (a
 * bad entry names its index: `Invalid spans[1]: must be an integer in [1, 64], got 0`; a bad length reads
 * `got []; expected an array with 1 to 16 entries`).
 *
 * @param help - what the field means
 * @param entry - the schema of one entry (its range, if any, is the list's in {@link fieldInfo})
 * @category Schemas
 */
export function listField<T extends z.ZodType>(
  help: string,
  entry: T,
  minLength = 1,
  maxLength = Infinity,
): z.ZodReadonly<z.ZodArray<T>> {
  const count = maxLength === Infinity ? `at least ${minLength}` : `${minLength} to ${maxLength}`
  const message = (input: unknown): string => `got ${showValue(input)}; expected an array with ${count} entries`
  const schema = z.array(entry, { error: (issue) => message(issue.input) }).check(
    z.refine((value) => value.length >= minLength && value.length <= maxLength, {
      error: (issue) => message(issue.input),
      abort: true,
    }),
  )
  const entryMeta = fields.get(entry)
  const meta = { help, ...(entryMeta?.range === undefined ? {} : { range: entryMeta.range }) }
  return schema.register(fields, meta).readonly()
}

/**
 * A field of any type that the owning module validates itself (after {@link parseConfig}), for
 * values no field helper describes (e.g. explicit teacher matrices, checked against the vocabulary).
 *
 * @param help - what the field means
 * @category Schemas
 */
export function customField<T>(help: string): z.ZodCustom<T, T> {
  return z.custom<T>(() => true).register(fields, { help })
}

/**
 * A configuration's schema: an object that refuses unknown keys (a misspelled key is reported
 * with a did-you-mean by {@link parseConfig} instead of silently ignored).
 *
 * @category Schemas
 */
export function configSchema<T extends z.ZodRawShape>(shape: T): z.ZodObject<T, z.core.$strict> {
  return z.strictObject(shape)
}

/** Unwraps `.default()`, `.optional()`, `.nullable()` and pipes down to the field's own schema. */
function unwrap(schema: z.ZodType): {
  readonly inner: z.ZodType
  readonly meta?: FieldMeta
  readonly hasDefault: boolean
  readonly defaultValue?: unknown
} {
  let current: z.ZodType = schema
  let meta = fields.get(current)
  let defaultValue: unknown
  let hasDefault = false
  for (;;) {
    const def = current._zod.def as { type: string; innerType?: z.ZodType; in?: z.ZodType; defaultValue?: unknown }
    if (def.type === 'default' || def.type === 'prefault') {
      if (!hasDefault) {
        hasDefault = true
        defaultValue = def.defaultValue
      }
      current = def.innerType as z.ZodType
    } else if (def.type === 'optional' || def.type === 'nullable' || def.type === 'readonly') {
      current = def.innerType as z.ZodType
    } else if (def.type === 'pipe') {
      current = def.in as z.ZodType
    } else break
    meta ??= fields.get(current)
  }
  return {
    inner: current,
    hasDefault,
    ...(meta === undefined ? {} : { meta }),
    ...(hasDefault ? { defaultValue } : {}),
  }
}

/**
 * What a schema field declares, for a command-line flag or a documentation table.
 *
 * @category Schemas
 */
export interface FieldInfo extends FieldMeta {
  /** The field's value kind. */
  readonly kind: 'integer' | 'number' | 'boolean' | 'enum' | 'list' | 'other'
  /** Whether the field has a default. */
  readonly hasDefault: boolean
  /** The default (when {@link FieldInfo.hasDefault}). */
  readonly defaultValue?: unknown
  /** For a list: whether its entries are integers. */
  readonly integerEntries?: boolean
}

/**
 * What a field of a {@link configSchema} declares: its kind, help, range or choices and default.
 *
 * @param schema - one field's schema (e.g. `schema.shape.stateSize`)
 * @throws `ConfigError` if the field was not built with this module's field helpers (no help)
 * @category Schemas
 */
export function fieldInfo(schema: z.ZodType): FieldInfo {
  const { inner, meta, hasDefault, defaultValue } = unwrap(schema)
  if (meta === undefined) throw new ConfigError('schema', 'this field has no help (build it with the field helpers)')
  const type = (inner._zod.def as { type: string }).type
  const base = { ...meta, hasDefault, ...(hasDefault ? { defaultValue } : {}) }
  if (type === 'number') return { ...base, kind: meta.range?.integer === true ? 'integer' : 'number' }
  if (type === 'boolean') return { ...base, kind: 'boolean' }
  if (type === 'enum') return { ...base, kind: 'enum' }
  if (type === 'array') return { ...base, kind: 'list', integerEntries: meta.range?.integer === true }
  return { ...base, kind: 'other' }
}

/** The object schema at `path` inside `schema` (for the allowed keys of a nested object). */
function objectAt(schema: z.ZodType, path: readonly PropertyKey[]): z.ZodObject | undefined {
  let current: z.ZodType | undefined = unwrap(schema).inner
  for (const key of path) {
    if (current === undefined) return undefined
    const def = current._zod.def as { type: string; shape?: Record<string, z.ZodType>; element?: z.ZodType }
    if (def.type === 'object') current = def.shape?.[String(key)]
    else if (def.type === 'array') current = def.element
    else return undefined
    current = current === undefined ? undefined : unwrap(current).inner
  }
  return current !== undefined && (current._zod.def as { type: string }).type === 'object'
    ? (current as z.ZodObject)
    : undefined
}

/** A key as a message names it: as it is, or JSON-escaped when it holds control characters. */
function showKey(key: string): string {
  return /^[\x20-\x7e]*$/.test(key) ? key : JSON.stringify(key).slice(1, -1)
}

/** `spans[1]`, `model.nHeads`: a key path as a message names it. */
export function formatPath(path: readonly PropertyKey[]): string {
  let text = ''
  for (const key of path) {
    if (typeof key === 'number') text += `[${key}]`
    else text += text === '' ? showKey(String(key)) : `.${showKey(String(key))}`
  }
  return text
}

/**
 * The `ConfigError` of the first problem zod found, worded as attnlab words it: an unknown key
 * first (with did-you-mean), then the first bad field in declaration order.
 *
 * @param schema - the schema that was parsed
 * @param error - zod's error
 * @param name - the configuration's name (`'sparse-markov'`), for the unknown-key and not-an-object messages
 * @category Schemas
 */
export function configErrorOf(schema: z.ZodType, error: z.ZodError, name: string): ConfigError {
  const issues = error.issues
  const unknown = issues.find((issue) => issue.code === 'unrecognized_keys')
  if (unknown !== undefined && unknown.code === 'unrecognized_keys') {
    const key = showKey(unknown.keys[0] as string)
    const allowed = Object.keys(objectAt(schema, unknown.path)?.shape ?? {})
    const suggestion = closest(key, allowed)
    const where = unknown.path.length === 0 ? name : `${name} ${formatPath(unknown.path)}`
    const article = /^[aeiou]/i.test(where) ? 'an' : 'a'
    const guess = suggestion === undefined ? '' : ` (did you mean '${suggestion}'?)`
    return new ConfigError(
      formatPath([...unknown.path, key]),
      `is not ${article} ${where} parameter${guess}; expected one of ${allowed.join(', ')}`,
      { allowed },
    )
  }
  const issue = issues[0] as z.core.$ZodIssue
  const value = (issue as { input?: unknown }).input
  if (issue.path.length === 0 && issue.code === 'invalid_type') {
    return new ConfigError('config', `got ${showValue(value)}; expected an object of ${name} parameters`, { value })
  }
  return new ConfigError(formatPath(issue.path), issue.message, { value })
}

/**
 * Validates `input` against a configuration schema, fills in the defaults and returns the result
 * (a new object; freeze it if it must not change).
 *
 * @param schema - the configuration's schema ({@link configSchema})
 * @param input - the (partial) configuration as given; `undefined` values count as absent
 * @param name - the configuration's name, for messages (`'sparse-markov'`)
 * @returns the parsed configuration with every default filled in
 * @throws `ConfigError` (code `INVALID_CONFIG`) naming the key path, the value and what was expected
 * @category Schemas
 */
export function parseConfig<S extends z.ZodType>(schema: S, input: unknown, name: string): z.output<S> {
  const result = schema.safeParse(input, { reportInput: true })
  if (!result.success) throw configErrorOf(schema, result.error, name)
  return result.data
}

/**
 * The defaults a configuration schema declares (every field must have one).
 *
 * @category Schemas
 */
export function schemaDefaults<S extends z.ZodType>(schema: S, name: string): z.output<S> {
  return parseConfig(schema, {}, name)
}

/**
 * The sweep spec: one YAML or JSON document naming an experiment, its base settings, a grid of
 * swept values, optional zipped lists and the seeds. Parsed with the `yaml` package, validated
 * with a zod schema, then every trial's settings through the experiment's own validator, so a bad
 * value fails before anything runs or is written.
 *
 * @module
 */
import { closest } from '@attnlab/core'
import { parse as parseYaml } from 'yaml'
import * as z from 'zod'
import { SweepSpecError } from './errors.ts'
import { SWEEP_EXPERIMENT_NAMES, SWEEP_EXPERIMENTS, type SweepExperiment } from './experiments.ts'
import { canonicalJson, isJsonObject, mergeJson, getPath, type JsonObject, type JsonValue } from './json.ts'

/**
 * A validated sweep spec (what {@link parseSweepSpec} returns and `sweep.json` keeps). Frozen.
 *
 * @category Sweeps
 */
export interface SweepSpec {
  /** The sweep's name (letters, digits, `.`, `_`, `-`). */
  readonly name: string
  /** Free text. */
  readonly description?: string
  /** An experiment of {@link SWEEP_EXPERIMENTS} (`emergence`). */
  readonly experiment: string
  /** Settings every trial shares, over the experiment's defaults (nested objects; a dotted key is a path). */
  readonly base: JsonObject
  /** Swept parameter (a dotted path into the settings, e.g. `task.genLen`) to its values; Cartesian product. */
  readonly grid: { readonly [path: string]: readonly JsonValue[] }
  /** Groups of lists that vary together (row r of every list of a group at once); each group is one dimension. */
  readonly zip: readonly { readonly [path: string]: readonly JsonValue[] }[]
  /** The trial seeds (a count `n` in the file means 0 .. n-1). */
  readonly seeds: readonly number[]
}

/** Most seeds a count may ask for, and most trials a sweep may have. */
const MAX_SEEDS = 10_000
const MAX_TRIALS = 100_000

const PATH_PATTERN = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/
const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

const valueList = z.array(z.json()).min(1)
const listMap = z.record(z.string(), valueList)
const schema = z.strictObject({
  name: z.string().min(1).max(100).regex(NAME_PATTERN),
  description: z.string().optional(),
  experiment: z.string(),
  base: z.record(z.string(), z.json()).optional(),
  grid: listMap.optional(),
  zip: z.union([listMap, z.array(listMap).min(1)]).optional(),
  seeds: z
    .union([
      z.int().min(1).max(MAX_SEEDS),
      z
        .array(
          z
            .int()
            .min(0)
            .max(2 ** 31 - 1),
        )
        .min(1),
    ])
    .optional(),
})

/** The keys of a spec, in the schema's order (declared once, by the schema). */
const SPEC_KEYS = Object.keys(schema.shape)

/** A short description of a value for messages. */
function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing'
  if (Array.isArray(value)) return value.length === 0 ? 'an empty list' : `a list (${JSON.stringify(value)})`
  if (typeof value === 'object' && value !== null) return `an object (${JSON.stringify(value)})`
  return `${typeof value === 'string' ? 'the string ' : ''}${JSON.stringify(value)}`
}

/** The first number JSON cannot hold (NaN, Infinity) in `value`, depth first, with its path. */
function nonFinite(value: unknown, path: readonly string[]): { path: string[]; value: number } | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : { path: [...path], value }
  if (typeof value !== 'object' || value === null) return undefined
  for (const [key, item] of Object.entries(value)) {
    const found = nonFinite(item, [...path, key])
    if (found !== undefined) return found
  }
  return undefined
}

/** The did-you-mean of a message: the allowed name closest to `key` when it is a likely typo. */
function suggest(key: string, allowed: readonly string[]): string {
  const best = closest(key, allowed)
  return best === undefined ? '' : ` (did you mean '${best}'?)`
}

/** What each key of the schema expects, for type errors (typed by the schema: a new key needs its entry). */
const EXPECTED: Readonly<Record<keyof typeof schema.shape, string>> = {
  name: 'a name of letters, digits, ".", "_" or "-" (at most 100 characters)',
  description: 'a string',
  experiment: `one of ${SWEEP_EXPERIMENT_NAMES.join(', ')}`,
  base: 'an object of settings',
  grid: 'an object mapping each swept parameter to a non-empty list of values',
  zip: 'an object of equally long lists (or a list of such objects)',
  seeds: `a count of seeds (an integer in [1, ${MAX_SEEDS}]) or a non-empty list of distinct integers >= 0`,
}

/** The first zod issue as a {@link SweepSpecError}. */
function issueError(file: string, input: unknown, issue: z.core.$ZodIssue): SweepSpecError {
  const path = issue.path.map(String)
  const top = path[0] ?? ''
  const at = (parts: readonly string[]): unknown => {
    let value: unknown = input
    for (const part of parts) value = (value as Record<string, unknown> | undefined)?.[part]
    return value
  }
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] as string
    const allowed = path.length === 0 ? SPEC_KEYS : []
    return new SweepSpecError(
      file,
      [...path, key].join('.'),
      `unknown key${suggest(key, allowed)}; allowed: ${allowed.join(', ')}`,
      { allowed: [...allowed] },
    )
  }
  if (path.length === 0) return new SweepSpecError(file, '', `expected an object of ${SPEC_KEYS.join(', ')}`)
  // A number JSON cannot hold (YAML's .nan, .inf) anywhere under a key: named at its own path, not as its parent.
  const deep = nonFinite(at(path), path)
  if (deep !== undefined) {
    return new SweepSpecError(
      file,
      deep.path.join('.'),
      `${deep.value} is not a finite number (settings are JSON values: no NaN or Infinity)`,
    )
  }
  // A list of values under grid / zip.
  if ((top === 'grid' || top === 'zip') && path.length >= 2) {
    const key = path.slice(0, typeof issue.path[1] === 'number' ? 3 : 2)
    const value = at(key)
    if (Array.isArray(value) && value.length === 0) {
      return new SweepSpecError(file, key.join('.'), 'an empty list; expected at least one value')
    }
    return new SweepSpecError(file, key.join('.'), `expected a non-empty list of values, got ${describeValue(value)}`)
  }
  if (top === 'zip' && Array.isArray(at(['zip'])) && (at(['zip']) as unknown[]).length === 0) {
    return new SweepSpecError(file, 'zip', 'an empty list; expected at least one group of lists')
  }
  const shown = path.length > 1 && top === 'seeds' ? path : [top]
  const expected = (EXPECTED as Readonly<Record<string, string>>)[top] ?? 'another value'
  return new SweepSpecError(file, shown.join('.'), `expected ${expected}, got ${describeValue(at(shown))}`)
}

/** Refuses a key that is not a dotted path, or one the sweep owns. */
function checkKey(file: string, where: string, key: string, experiment: SweepExperiment): void {
  if (!PATH_PATTERN.test(key)) {
    throw new SweepSpecError(file, `${where}.${key}`, 'expected a dotted path of names (e.g. task.genLen)')
  }
  const head = key.split('.')[0] as string
  if (experiment.reservedKeys.includes(head)) {
    throw new SweepSpecError(
      file,
      `${where}.${key}`,
      `'${head}' is set per trial from the sweep's seeds; give them as the top-level 'seeds' instead`,
    )
  }
}

/** Refuses a list that holds a value twice (its trials would be the same trial). */
function checkDistinct(file: string, path: string, values: readonly JsonValue[]): void {
  const seen = new Set<string>()
  for (const value of values) {
    const text = canonicalJson(value)
    if (seen.has(text)) throw new SweepSpecError(file, path, `lists ${text} twice; expected distinct values`)
    seen.add(text)
  }
}

/**
 * One combination of swept values and a seed, in expansion order, before its settings are
 * resolved.
 */
export interface TrialPoint {
  /** Position in the expansion order (0-based). */
  readonly index: number
  /** The swept values: each grid and zip path to its value here, in the spec's key order. */
  readonly params: JsonObject
  /** The trial's seed. */
  readonly seed: number
}

/**
 * Every combination of a spec, in the documented order: grid keys in the spec's order, the
 * first slowest (as nested loops written in that order), then each zip group (its rows in
 * order), then the seeds (fastest).
 */
export function trialPoints(spec: SweepSpec): TrialPoint[] {
  const dimensions: JsonObject[][] = []
  for (const [key, values] of Object.entries(spec.grid)) dimensions.push(values.map((v) => ({ [key]: v })))
  for (const group of spec.zip) {
    const keys = Object.keys(group)
    const length = (group[keys[0] as string] as readonly JsonValue[]).length
    dimensions.push(
      Array.from({ length }, (_, row) =>
        Object.fromEntries(keys.map((k) => [k, (group[k] as readonly JsonValue[])[row] as JsonValue])),
      ),
    )
  }
  let combinations: JsonObject[] = [{}]
  for (const dimension of dimensions) {
    combinations = combinations.flatMap((combination) => dimension.map((values) => ({ ...combination, ...values })))
  }
  const points: TrialPoint[] = []
  for (const params of combinations) {
    for (const seed of spec.seeds) points.push({ index: points.length, params, seed })
  }
  return points
}

/**
 * The resolved settings of one trial: the experiment's defaults (chosen from the base and the
 * trial's values), then `base`, then the trial's values at their paths, then the seed.
 */
export function trialSettings(spec: SweepSpec, point: Pick<TrialPoint, 'params' | 'seed'>): JsonObject {
  const experiment = SWEEP_EXPERIMENTS[spec.experiment] as SweepExperiment
  const edits = mergeJson(mergeJson({}, spec.base), point.params)
  const defaults = experiment.defaults((path) => getPath(edits, path))
  return experiment.withSeed(mergeJson(defaults, edits), point.seed)
}

/** Describes a trial's values for messages: `task.genLen = 0, seed 1`. */
function describePoint(point: TrialPoint): string {
  const values = Object.entries(point.params).map(([k, v]) => `${k} = ${canonicalJson(v)}`)
  return [...values, `seed ${point.seed}`].join(', ')
}

/** Runs the experiment's validator on every trial, naming the spec key and value it refuses. */
function checkTrials(file: string, spec: SweepSpec): void {
  const experiment = SWEEP_EXPERIMENTS[spec.experiment] as SweepExperiment
  const points = trialPoints(spec)
  if (points.length > MAX_TRIALS) {
    throw new SweepSpecError(file, 'grid', `expands to ${points.length} trials; at most ${MAX_TRIALS} are allowed`)
  }
  // One validation per combination of swept values (seeds are checked by the schema); an error that
  // no swept key explains, on the first combination, is the base's.
  const validate = (point: TrialPoint): Error | null => {
    try {
      experiment.validate(trialSettings(spec, point))
      return null
    } catch (error) {
      return error as Error
    }
  }
  const checked = new Set<string>()
  for (const point of points) {
    const key = canonicalJson(point.params)
    if (checked.has(key)) continue
    checked.add(key)
    const error = validate(point)
    if (error === null) continue
    const parameter = (error as { parameter?: unknown }).parameter
    const paths = Object.keys(point.params)
    const culprit =
      typeof parameter === 'string'
        ? paths.find(
            (p) =>
              p === parameter ||
              p.endsWith(`.${parameter}`) ||
              parameter.startsWith(`${p}.`) ||
              p.startsWith(`${parameter}.`),
          )
        : undefined
    if (paths.length === 0 || (culprit === undefined && point.index === 0)) {
      throw new SweepSpecError(file, 'base', `the experiment refuses these settings: ${error.message}`, {}, error)
    }
    const where =
      culprit === undefined ? 'grid' : spec.grid[culprit] !== undefined ? `grid.${culprit}` : `zip.${culprit}`
    const value = culprit === undefined ? '' : ` ${canonicalJson(point.params[culprit] as JsonValue)}`
    throw new SweepSpecError(
      file,
      where,
      `value${value} refused by the ${spec.experiment} experiment (trial ${point.index}: ${describePoint(point)}): ` +
        error.message,
      { trial: point.index },
      error,
    )
  }
}

/**
 * Validates a sweep spec given as a plain object (what a YAML or JSON file parses to): the keys
 * and types (zod schema), the experiment name, the grid and zip lists, the seeds, then every
 * combination's settings through the experiment's own validator.
 *
 * @param value - the parsed document
 * @param file - the file name, for messages
 * @returns the frozen spec (`seeds` as a list, `zip` as a list of groups, `base` and `grid` always present)
 * @throws {@link SweepSpecError} naming the file, the key path and what was expected: an unknown
 *   key (with did-you-mean), a wrong type, an empty grid or list, a value listed twice, zip lists
 *   of unequal length, a path in two places, bad seeds, a value the experiment refuses
 * @category Sweeps
 */
export function validateSweepSpec(value: unknown, file: string): SweepSpec {
  const parsed = schema.safeParse(value)
  if (!parsed.success) throw issueError(file, value, parsed.error.issues[0] as z.core.$ZodIssue)
  const raw = parsed.data
  const experiment = SWEEP_EXPERIMENTS[raw.experiment]
  if (experiment === undefined) {
    throw new SweepSpecError(
      file,
      'experiment',
      `'${raw.experiment}' is not an experiment${suggest(raw.experiment, SWEEP_EXPERIMENT_NAMES)}; ` +
        `expected one of ${SWEEP_EXPERIMENT_NAMES.join(', ')}`,
    )
  }
  const base = (raw.base ?? {}) as JsonObject
  for (const key of Object.keys(base)) checkKey(file, 'base', key, experiment)
  const grid = (raw.grid ?? {}) as Record<string, JsonValue[]>
  if (raw.grid !== undefined && Object.keys(grid).length === 0) {
    throw new SweepSpecError(file, 'grid', 'an empty grid; give at least one parameter (or omit grid to sweep seeds)')
  }
  const zip = (raw.zip === undefined ? [] : Array.isArray(raw.zip) ? raw.zip : [raw.zip]) as Record<
    string,
    JsonValue[]
  >[]
  const seen = new Map<string, string>()
  const claim = (key: string, where: string): void => {
    const prefix = [...seen.keys()].find((k) => k === key || k.startsWith(`${key}.`) || key.startsWith(`${k}.`))
    if (prefix !== undefined) {
      throw new SweepSpecError(file, `${where}.${key}`, `overlaps ${seen.get(prefix)}.${prefix}; sweep each path once`)
    }
    seen.set(key, where)
  }
  for (const [key, values] of Object.entries(grid)) {
    checkKey(file, 'grid', key, experiment)
    claim(key, 'grid')
    checkDistinct(file, `grid.${key}`, values)
  }
  for (const [g, group] of zip.entries()) {
    const where = Array.isArray(raw.zip) ? `zip.${g}` : 'zip'
    const entries = Object.entries(group)
    if (entries.length === 0) throw new SweepSpecError(file, where, 'an empty group; expected lists that vary together')
    const [firstKey, firstValues] = entries[0] as [string, JsonValue[]]
    for (const [key, values] of entries) {
      checkKey(file, where, key, experiment)
      claim(key, where)
      if (values.length !== firstValues.length) {
        throw new SweepSpecError(
          file,
          `${where}.${key}`,
          `has ${values.length} values but ${firstKey} has ${firstValues.length}; zipped lists vary together, ` +
            'so they must be equally long',
        )
      }
    }
    const rows = firstValues.map((_, r) => entries.map(([, values]) => values[r] as JsonValue))
    checkDistinct(file, where, rows)
  }
  let seeds: number[]
  if (typeof raw.seeds === 'number' || raw.seeds === undefined) {
    seeds = Array.from({ length: raw.seeds ?? 1 }, (_, i) => i)
  } else {
    seeds = raw.seeds
    checkDistinct(file, 'seeds', seeds)
  }
  const spec: SweepSpec = {
    name: raw.name,
    ...(raw.description === undefined ? {} : { description: raw.description }),
    experiment: raw.experiment,
    base,
    grid,
    zip,
    seeds,
  }
  checkTrials(file, spec)
  return deepFreeze(spec)
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner)
    Object.freeze(value)
  }
  return value
}

/**
 * Parses and validates a sweep spec file's text: YAML (the `yaml` package; JSON is YAML too), or
 * JSON for a file name ending in `.json` (for JSON's own error positions).
 *
 * @param text - the file's contents
 * @param file - its name, for messages (and the format: `.json` is read as JSON)
 * @returns the validated spec ({@link validateSweepSpec})
 * @throws {@link SweepSpecError} for a document that does not parse (with the line and column),
 *   and everything {@link validateSweepSpec} refuses
 * @example
 * ```ts
 * const spec = parseSweepSpec(
 *   'name: nctx\nexperiment: emergence\ngrid:\n  task.genLen: [4, 6]\nseeds: 3\n',
 *   'nctx.yaml',
 * )
 * // spec.seeds: [0, 1, 2]; expandTrials(spec) gives 6 trials
 * ```
 * @category Sweeps
 */
export function parseSweepSpec(text: string, file: string): SweepSpec {
  let value: unknown
  const json = file.toLowerCase().endsWith('.json')
  try {
    value = json ? JSON.parse(text) : parseYaml(text, { uniqueKeys: true })
  } catch (error) {
    // One line: JSON.parse quotes the text around the error (line breaks and all), yaml's first
    // line ends in a colon before its code frame.
    const message = (error as Error).message
    const line = json ? message.replace(/\r?\n/g, '\\n') : (message.split('\n')[0] ?? '').replace(/:\s*$/, '')
    throw new SweepSpecError(file, '', `does not parse: ${line}`, {}, error)
  }
  if (!isJsonObject(value)) {
    throw new SweepSpecError(file, '', `expected an object of ${SPEC_KEYS.join(', ')}, got ${describeValue(value)}`)
  }
  return validateSweepSpec(value, file)
}

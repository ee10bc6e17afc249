/**
 * Command-line flags derived from configuration schemas (`@attnlab/core/schema`): a flag's parser
 * (with the field's range: `--state-size must be an integer in [2, 512], got 600`) and its help
 * (the field's meaning and default) come from the schema field it sets, so neither is restated
 * here. A flag that sets fields of several configurations (`--vocab` for two task kinds) takes the
 * loosest of their ranges; the library then checks the exact one and {@link withFlagNames}
 * (`options.ts`) names the flag in its message.
 */
import { InvalidArgumentError, Option } from 'commander'
import { describeRange, formatNumber, inRange, type NumberRange } from '@attnlab/core'
import { fieldInfo, type FieldInfo, type z } from '@attnlab/core/schema'
import { intParser, numberParser } from './options.ts'

/** The loosest range that holds every one of `ranges` (bounds widen, an open bound wins). */
export function unionRange(ranges: readonly (NumberRange | undefined)[]): NumberRange {
  if (ranges.some((range) => range === undefined)) return {}
  const all = ranges as readonly NumberRange[]
  const min = Math.min(...all.map((range) => range.min ?? -Infinity))
  const max = Math.max(...all.map((range) => range.max ?? Infinity))
  return {
    min,
    max,
    ...(all.every((range) => range.minExclusive === true && range.min === min) ? { minExclusive: true } : {}),
    ...(all.every((range) => range.maxExclusive === true && range.max === max) ? { maxExclusive: true } : {}),
    ...(all.every((range) => range.integer === true) ? { integer: true } : {}),
  }
}

/** The parser of a number flag in `range` (integers when `range.integer`). */
export function rangeParser(flag: string, range: NumberRange): (value: string) => number {
  if (range.integer === true && range.minExclusive !== true && range.maxExclusive !== true)
    return intParser(flag, range.min, range.max)
  const number = numberParser(flag, range.min, range.max, {
    ...(range.minExclusive === true ? { minExclusive: true } : {}),
    ...(range.maxExclusive === true ? { maxExclusive: true } : {}),
  })
  if (range.integer !== true) return number
  return (value: string) => {
    const n = number(value)
    if (!Number.isSafeInteger(n)) throw new InvalidArgumentError(`${flag} must be an integer, got '${value}'`)
    return n
  }
}

/** The parser of a comma-separated list flag whose entries are in `range` (`--spans 2,2,2`). */
export function rangeListParser(flag: string, range: NumberRange): (value: string) => number[] {
  const what = range.integer === true ? 'integers' : 'numbers'
  return (value: string) => {
    const parts = value.split(',').map((s) => s.trim())
    const numbers = parts.map(Number)
    const malformed = parts.some((p, i) =>
      range.integer === true ? !/^-?\d+$/.test(p) : p === '' || !Number.isFinite(numbers[i]),
    )
    if (malformed) throw new InvalidArgumentError(`${flag} must be a comma-separated list of ${what}, got '${value}'`)
    const bad = numbers.find((n) => !inRange(n, range))
    if (bad !== undefined) {
      throw new InvalidArgumentError(`${flag} values must be ${describeRange(range)}, got ${formatNumber(bad)}`)
    }
    return numbers
  }
}

/**
 * The parser of a flag that sets the fields `infos` (one per configuration it applies to), or
 * `undefined` for a boolean flag (commander's own).
 *
 * @throws `Error` for a field kind no flag can set (an enum flag takes commander's `choices`)
 */
export function fieldParser(flag: string, infos: readonly FieldInfo[]): ((value: string) => unknown) | undefined {
  const kinds = new Set(infos.map((info) => info.kind))
  const range = unionRange(infos.map((info) => info.range))
  if (kinds.size === 1 && kinds.has('boolean')) return undefined
  if ([...kinds].every((kind) => kind === 'integer' || kind === 'number')) return rangeParser(flag, range)
  if (kinds.size === 1 && kinds.has('list')) return rangeListParser(flag, range)
  throw new Error(`${flag}: no flag parser for fields of kind ${[...kinds].join(', ')}`)
}

/** A default as the help states it (`2,2,2` for a list); `undefined` for none (or `null`). */
export function showDefault(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined
  return Array.isArray(value) ? value.join(',') : String(value)
}

/**
 * A flag that sets one schema field: its help (the field's, or `overrides.help`), its default (the
 * field's, when it has one other than null) and its parser (the field's range) or choices (an enum
 * field's). `overrides.max` bounds a range the field leaves open above, so that a value only a typo
 * gives (`1e300`) is a usage error before any work; `overrides.min` bounds one the field leaves open
 * below (a seed flag takes 0 and up, as every seed flag of the CLI).
 *
 * @param spec - commander's spelling, e.g. `--heads <n>` (`--fast-value` for a boolean field)
 * @param field - the field's schema (e.g. `dynamicsConfigSchema.shape.nHeads`)
 * @param overrides - help text and bounds set by the command
 * @throws `Error` for a field kind no flag can set
 */
export function schemaFieldOption(
  spec: string,
  field: z.ZodType,
  overrides: { readonly help?: string; readonly min?: number; readonly max?: number } = {},
): Option {
  const info = fieldInfo(field)
  const flag = spec.split(' ')[0] as string
  const option = new Option(spec, overrides.help ?? info.help)
  if (info.kind === 'enum') option.choices(info.choices ?? [])
  else if (info.kind !== 'boolean') {
    const range = {
      ...info.range,
      ...(overrides.min === undefined ? {} : { min: overrides.min }),
      ...(overrides.max === undefined ? {} : { max: overrides.max }),
    }
    const parser = fieldParser(flag, [{ ...info, range }])
    if (parser !== undefined) option.argParser(parser)
  }
  if (info.hasDefault && info.defaultValue !== null && info.defaultValue !== undefined && info.kind !== 'boolean')
    option.default(info.defaultValue)
  return option
}

import { describe, expect, it } from 'vitest'
import { ConfigError } from './errors.ts'
import {
  booleanField,
  configSchema,
  customField,
  enumField,
  fieldInfo,
  formatPath,
  integerField,
  listField,
  numberField,
  parseConfig,
  schemaDefaults,
  showValue,
  z,
} from './schema.ts'

const schema = configSchema({
  stateSize: integerField('cells per state', { min: 2, max: 512 }).default(16),
  m: numberField('importance base', { min: 0, max: 100, minExclusive: true }).default(1.5),
  bos: booleanField('prepend a BOS token').default(false),
  spans: listField('span lengths', integerField('a span length', { min: 1, max: 64 }), 1, 16).default(() => [2, 2]),
  optimizer: enumField('optimizer', ['adamw', 'sgd']).default('adamw'),
  stride: integerField('start-to-start distance', { min: 1 }).nullable().default(null),
  nested: configSchema({ depth: integerField('depth', { min: 0 }).default(0) }).default({ depth: 0 }),
})

function message(input: unknown): { parameter: string; message: string } {
  try {
    parseConfig(schema, input, 'toy')
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).code).toBe('INVALID_CONFIG')
    return { parameter: (error as ConfigError).parameter, message: (error as Error).message }
  }
  throw new Error(`no error for ${JSON.stringify(input)}`)
}

describe('parseConfig', () => {
  it('fills in every default, and undefined counts as absent', () => {
    const defaults = { stateSize: 16, m: 1.5, bos: false, spans: [2, 2], optimizer: 'adamw', stride: null }
    expect(schemaDefaults(schema, 'toy')).toEqual({ ...defaults, nested: { depth: 0 } })
    expect(parseConfig(schema, { stateSize: undefined, m: 2 }, 'toy')).toMatchObject({ stateSize: 16, m: 2 })
  })

  it('returns a fresh default list each time', () => {
    const a = schemaDefaults(schema, 'toy')
    expect(Object.isFrozen(parseConfig(schema, { spans: [1] }, 'toy').spans)).toBe(true)
    expect(schemaDefaults(schema, 'toy').spans).not.toBe(a.spans)
    expect(schemaDefaults(schema, 'toy').spans).toEqual([2, 2])
  })

  it('round-trips through JSON', () => {
    const config = parseConfig(schema, { spans: [1, 3], stride: 1, optimizer: 'sgd' }, 'toy')
    expect(parseConfig(schema, JSON.parse(JSON.stringify(config)), 'toy')).toEqual(config)
  })

  it('names the key, the value and the range', () => {
    expect(message({ stateSize: 1 })).toEqual({
      parameter: 'stateSize',
      message: 'Invalid stateSize: must be an integer in [2, 512], got 1',
    })
    expect(message({ stateSize: 2.5 }).message).toBe('Invalid stateSize: must be an integer in [2, 512], got 2.5')
    expect(message({ stateSize: '8' }).message).toBe("Invalid stateSize: must be an integer in [2, 512], got '8'")
    expect(message({ m: 0 }).message).toBe('Invalid m: must be in (0, 100], got 0')
    expect(message({ m: Number.NaN }).message).toBe('Invalid m: must be in (0, 100], got NaN')
    expect(message({ m: Number.POSITIVE_INFINITY }).message).toBe('Invalid m: must be in (0, 100], got Infinity')
    expect(message({ stride: 0 }).message).toBe('Invalid stride: must be an integer >= 1, got 0')
    expect(message({ bos: 1 }).message).toBe('Invalid bos: got 1; expected true or false')
  })

  it('names the index of a bad list entry and the allowed length', () => {
    expect(message({ spans: [2, 0] })).toEqual({
      parameter: 'spans[1]',
      message: 'Invalid spans[1]: must be an integer in [1, 64], got 0',
    })
    expect(message({ spans: [] }).message).toBe('Invalid spans: got []; expected an array with 1 to 16 entries')
    expect(message({ spans: 'abc' }).message).toBe("Invalid spans: got 'abc'; expected an array with 1 to 16 entries")
  })

  it('suggests the closest choice and the closest key', () => {
    expect(message({ optimizer: 'adamx' }).message).toBe(
      "Invalid optimizer: got 'adamx' (did you mean 'adamw'?); expected one of adamw, sgd",
    )
    expect(message({ spams: [1] })).toEqual({
      parameter: 'spams',
      message:
        "Invalid spams: is not a toy parameter (did you mean 'spans'?); expected one of stateSize, m, bos, spans, " +
        'optimizer, stride, nested',
    })
    expect(message({ nested: { dept: 1 } }).message).toBe(
      "Invalid nested.dept: is not a toy nested parameter (did you mean 'depth'?); expected one of depth",
    )
    expect(message({ qqqqqqq: 1 }).message).not.toMatch(/did you mean/)
  })

  it('reports an unknown key before a bad value, and refuses a non-object', () => {
    expect(message({ stateSize: 0, spams: 1 }).parameter).toBe('spams')
    expect(message(null).message).toBe('Invalid config: got null; expected an object of toy parameters')
    expect(message([1]).message).toBe('Invalid config: got [1]; expected an object of toy parameters')
  })
})

describe('fieldInfo', () => {
  it('gives each field its kind, help, range, choices and default', () => {
    expect(fieldInfo(schema.shape.stateSize)).toEqual({
      kind: 'integer',
      help: 'cells per state',
      range: { min: 2, max: 512, integer: true },
      hasDefault: true,
      defaultValue: 16,
    })
    expect(fieldInfo(schema.shape.m).kind).toBe('number')
    expect(fieldInfo(schema.shape.bos)).toMatchObject({ kind: 'boolean', defaultValue: false })
    expect(fieldInfo(schema.shape.optimizer)).toMatchObject({ kind: 'enum', choices: ['adamw', 'sgd'] })
    expect(fieldInfo(schema.shape.spans)).toMatchObject({ kind: 'list', integerEntries: true, help: 'span lengths' })
    expect(fieldInfo(schema.shape.stride)).toMatchObject({ kind: 'integer', defaultValue: null })
    expect(fieldInfo(integerField('no default', { min: 0 }))).toMatchObject({ hasDefault: false })
    expect(fieldInfo(customField<number[][]>('matrices').nullable().default(null))).toMatchObject({
      kind: 'other',
      help: 'matrices',
      defaultValue: null,
    })
  })

  it('refuses a field built without the helpers', () => {
    expect(() => fieldInfo(z.number())).toThrow(ConfigError)
  })
})

describe('formatting', () => {
  it('shows values and paths as messages do', () => {
    expect(formatPath(['model', 'spans', 2])).toBe('model.spans[2]')
    expect(showValue('x')).toBe("'x'")
    expect(showValue(1e21)).toBe('about 1.00e+21')
    expect(showValue({ a: 1 })).toBe('{"a":1}')
    expect(showValue('a\nb')).toBe("'a\\nb'")
    expect(message({ 'x\ny': 1 }).message).not.toContain('\n')
    expect(message({ bos: 'yes\n' }).message).toBe("Invalid bos: got 'yes\\n'; expected true or false")
  })
})

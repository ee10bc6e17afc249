import { describe, expect, it } from 'vitest'
import { ConfigError } from './errors.ts'
import { checkOptionKeys, checkRange, describeRange, formatNumber, inRange } from './options.ts'

describe('checkOptionKeys', () => {
  const allowed = ['steps', 'evalEvery', 'optimizer', 'lr']

  it('accepts undefined, an empty object and known keys', () => {
    expect(() => checkOptionKeys('train options', undefined, allowed)).not.toThrow()
    expect(() => checkOptionKeys('train options', {}, allowed)).not.toThrow()
    expect(() => checkOptionKeys('train options', { steps: 1, lr: undefined }, allowed)).not.toThrow()
  })

  it('names an unknown key, suggests the closest allowed one and lists them all', () => {
    const call = (): void => checkOptionKeys('train options', { steps: 1, evalEvey: 5 }, allowed)
    expect(call).toThrow(ConfigError)
    expect(call).toThrow(
      "Invalid evalEvey: not one of the train options (did you mean 'evalEvery'?); allowed: steps, evalEvery, " +
        'optimizer, lr',
    )
    expect(() => checkOptionKeys('train options', { optimiser: 'sgd' }, allowed)).toThrow(/did you mean 'optimizer'/)
    try {
      checkOptionKeys('train options', { learningRate: 1 }, allowed)
    } catch (error) {
      expect(error).toMatchObject({ code: 'INVALID_CONFIG', parameter: 'learningRate', details: { allowed } })
      expect((error as Error).message).not.toMatch(/did you mean/)
    }
    expect.assertions(5)
  })

  it('rejects options that are not an object', () => {
    expect(() => checkOptionKeys('train options', 5, allowed)).toThrow(
      /Invalid train options: expected an object of options, got 5/,
    )
    expect(() => checkOptionKeys('train options', null, allowed)).toThrow(/got null/)
    expect(() => checkOptionKeys('train options', [], allowed)).toThrow(/got an array/)
  })
})

describe('range messages (one formatter for every range check)', () => {
  it('words bounds plainly: >= 1, > 0, <= 5, in (0, 1], integers, no Infinity or 5e-324', () => {
    expect(describeRange({ min: 1, max: Infinity, integer: true })).toBe('an integer >= 1') // was [1, Infinity]
    expect(describeRange({ min: 0, minExclusive: true })).toBe('> 0')
    expect(describeRange({ min: Number.MIN_VALUE, max: 1e9 })).toBe('in (0, 1000000000]') // was [5e-324, 1000000000]
    expect(describeRange({ min: 0, max: 1, minExclusive: true })).toBe('in (0, 1]')
    expect(describeRange({ min: 0, max: 1 })).toBe('in [0, 1]')
    expect(describeRange({ min: 0, max: 1, maxExclusive: true })).toBe('in [0, 1)')
    expect(describeRange({ max: 5 })).toBe('<= 5')
    expect(describeRange({ min: 1, max: 256, integer: true })).toBe('an integer in [1, 256]')
    expect(describeRange({ min: 0, max: Number.MAX_SAFE_INTEGER, integer: true })).toBe('an integer >= 0')
    expect(describeRange({ min: -Infinity, max: Infinity })).toBe('a number')
    expect(describeRange({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER, integer: true })).toBe(
      'an integer',
    )
  })

  it('prints integers as integers and huge ones approximately', () => {
    expect(formatNumber(1e9)).toBe('1000000000')
    expect(formatNumber(0.25)).toBe('0.25')
    expect(formatNumber(73786976294838210000)).toBe('about 7.38e+19') // was 73786987534767620000
    expect(formatNumber(-3)).toBe('-3')
  })

  it('checkRange throws a ConfigError naming the parameter, the range and the value', () => {
    expect(checkRange('threads', 2, { min: 1, max: 256, integer: true })).toBe(2)
    expect(() => checkRange('threads', 0, { min: 1, max: 256, integer: true })).toThrow(
      'Invalid threads: must be an integer in [1, 256], got 0',
    )
    expect(() => checkRange('topP', 0, { min: 0, max: 1, minExclusive: true })).toThrow(
      'Invalid topP: must be in (0, 1], got 0',
    )
    expect(() => checkRange('m', Number.NaN, { min: 0, minExclusive: true })).toThrow(ConfigError)
    expect(() => checkRange('steps', 1.5, { min: 1, integer: true })).toThrow(
      'Invalid steps: must be an integer >= 1, got 1.5',
    )
    expect(inRange(1, { min: 0, max: 1, minExclusive: true })).toBe(true)
    expect(inRange(0, { min: 0, max: 1, minExclusive: true })).toBe(false)
    expect(inRange(1, { min: 0, max: 1, maxExclusive: true })).toBe(false)
  })
})

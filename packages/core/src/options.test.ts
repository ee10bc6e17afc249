import { describe, expect, it } from 'vitest'
import { ConfigError } from './errors.ts'
import { checkOptionKeys } from './options.ts'

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
    expect(call).toThrow("Invalid evalEvey: not one of the train options (did you mean 'evalEvery'?); allowed: steps, evalEvery, optimizer, lr")
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
    expect(() => checkOptionKeys('train options', 5, allowed)).toThrow(/Invalid train options: expected an object of options, got 5/)
    expect(() => checkOptionKeys('train options', null, allowed)).toThrow(/got null/)
    expect(() => checkOptionKeys('train options', [], allowed)).toThrow(/got an array/)
  })
})

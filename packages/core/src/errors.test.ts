import { describe, expect, it } from 'vitest'
import {
  AttnlabError,
  BackendUnavailableError,
  ConfigError,
  InterruptedError,
  InvalidArgumentError,
  InvalidCheckpointError,
  IoError,
  KernelsUnavailableError,
  NonFiniteError,
  ShapeError,
  TooLargeError,
  UnsupportedError,
} from './errors.ts'
import { SafetensorsError } from './safetensors.ts'

describe('error names', () => {
  it('are spelled out, so minified browser bundles keep them', () => {
    const errors: [AttnlabError, string][] = [
      [new AttnlabError('IO_ERROR', 'x'), 'AttnlabError'],
      [new BackendUnavailableError('wasm', '@tensorflow/tfjs-backend-wasm', 'x', []), 'BackendUnavailableError'],
      [new KernelsUnavailableError('native', 'x'), 'KernelsUnavailableError'],
      [new ShapeError('x'), 'ShapeError'],
      [new ConfigError('p', 'x'), 'ConfigError'],
      [new NonFiniteError('x'), 'NonFiniteError'],
      [new SafetensorsError('x'), 'SafetensorsError'],
      [new InvalidArgumentError('x'), 'InvalidArgumentError'],
      [new UnsupportedError('x'), 'UnsupportedError'],
      [new IoError('x'), 'IoError'],
      [new TooLargeError('x'), 'TooLargeError'],
      [new InterruptedError('x'), 'InterruptedError'],
      [new InvalidCheckpointError('x'), 'InvalidCheckpointError'],
    ]
    for (const [error, name] of errors) {
      expect(error.name).toBe(name)
      expect(String(error)).toMatch(new RegExp(`^${name}: `))
    }
  })

  it('keep their stable codes, details and cause', () => {
    const cause = new Error('root')
    const cases: [AttnlabError, string][] = [
      [new InvalidArgumentError('x', { head: 3 }, { cause }), 'INVALID_ARGUMENT'],
      [new UnsupportedError('x', { head: 3 }, { cause }), 'UNSUPPORTED'],
      [new IoError('x', { head: 3 }, { cause }), 'IO_ERROR'],
      [new TooLargeError('x', { head: 3 }, { cause }), 'TOO_LARGE'],
      [new InterruptedError('x', { head: 3 }, { cause }), 'INTERRUPTED'],
      [new InvalidCheckpointError('x', { head: 3 }, { cause }), 'INVALID_CHECKPOINT'],
    ]
    for (const [error, code] of cases) {
      expect(error).toBeInstanceOf(AttnlabError)
      expect(error.code).toBe(code)
      expect(error.details).toEqual({ head: 3 })
      expect(error.cause).toBe(cause)
    }
  })

  it('falls back to the class name for subclasses that do not spell theirs out', () => {
    class MyError extends AttnlabError {}
    expect(new MyError('IO_ERROR', 'x').name).toBe('MyError')
  })
})

import { describe, expect, it } from 'vitest'
import {
  AttnlabError,
  BackendUnavailableError,
  ConfigError,
  KernelsUnavailableError,
  NonFiniteError,
  ShapeError,
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
    ]
    for (const [error, name] of errors) {
      expect(error.name).toBe(name)
      expect(String(error)).toMatch(new RegExp(`^${name}: `))
    }
  })

  it('falls back to the class name for subclasses that do not spell theirs out', () => {
    class MyError extends AttnlabError {}
    expect(new MyError('IO_ERROR', 'x').name).toBe('MyError')
  })
})

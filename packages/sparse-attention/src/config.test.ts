import { describe, expect, it } from 'vitest'
import { ConfigError } from '@attnlab/core'
import {
  BLOCK_SPARSE_PRESETS,
  FLEXPREFILL_PRESETS,
  SPARSE_METHOD_SCHEMAS,
  SPARSE_METHODS,
  VERTICAL_SLASH_PRESETS,
  adaSnapKV,
  blockSparse,
  createKernel,
  defaultAdaSnapKVConfig,
  defaultFlexPrefillConfig,
  defaultQuestConfig,
  defaultSnapKVConfig,
  defaultVerticalSlashConfig,
  flexPrefill,
  quest,
  questMinimumPromptLength,
  snapKV,
  verticalSlash,
} from './index.ts'

function expectConfigError(fn: () => unknown, parameter: string, pattern?: RegExp): void {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).parameter).toBe(parameter)
    expect((error as ConfigError).code).toBe('INVALID_CONFIG')
    if (pattern) expect((error as Error).message).toMatch(pattern)
    return
  }
  expect.fail(`expected a ConfigError for ${parameter}`)
}

describe('configurations', () => {
  it('have the study defaults and are frozen', () => {
    expect(defaultVerticalSlashConfig()).toMatchObject({
      verticalSize: 512,
      slashSize: 512,
      window: 256,
      sinks: 4,
      local: 64,
    })
    expect(defaultFlexPrefillConfig()).toMatchObject({
      alpha: 0.65,
      window: 512,
      minBudget: 512,
      tau: 0,
      blockSize: 128,
      sinks: 4,
      local: 64,
    })
    expect(blockSparse().config).toEqual({ blockSize: 16, topK: 64 })
    expect(defaultSnapKVConfig()).toEqual({ capacity: 1024, window: 256, kernelSize: 21, local: 128, prefix: 4 })
    expect(defaultAdaSnapKVConfig()).toEqual({
      capacity: 1024,
      window: 256,
      kernelSize: 21,
      local: 128,
      prefix: 4,
      minHeadRatio: 0.2,
    })
    expect(defaultQuestConfig()).toEqual({ tokenBudget: 1024, pageSize: 16, sharePages: true })
    const kernel = verticalSlash({ verticalSize: 100 })
    expect(Object.isFrozen(kernel.config)).toBe(true)
    expect(Object.isFrozen(kernel)).toBe(true)
    expect(kernel.config.verticalSize).toBe(100)
    expect(VERTICAL_SLASH_PRESETS.minference).toMatchObject({ sinks: 30, local: 100, window: 64 })
    expect(FLEXPREFILL_PRESETS.original).toMatchObject({ alpha: 0.9, tau: 0.1, minBudget: 1024 })
    expect(BLOCK_SPARSE_PRESETS.minference).toEqual({ blockSize: 64, topK: 100 })
    expect(questMinimumPromptLength(quest().config)).toBe(1040)
  })

  it('reject unknown parameters (with a did-you-mean) and non-objects; undefined means the default', () => {
    expectConfigError(
      () => verticalSlash({ topK: 3 } as never),
      'topK',
      /^Invalid topK: is not a vertical-slash parameter; expected one of verticalSize, slashSize, window, sinks, /,
    )
    expectConfigError(
      () => snapKV({ capacty: 64 } as never),
      'capacty',
      /is not a snapkv parameter \(did you mean 'capacity'\?\)/,
    )
    expectConfigError(
      () => quest('x' as never),
      'config',
      /^Invalid config: got 'x'; expected an object of quest parameters$/,
    )
    expectConfigError(() => quest(null as never), 'config', /got null; expected an object of quest parameters/)
    // As every schema-checked configuration of attnlab: an undefined value is an absent one.
    expect(snapKV({ capacity: undefined } as never).config.capacity).toBe(1024)
  })

  it('every method has a schema whose defaults are its default configuration', () => {
    expect(Object.keys(SPARSE_METHOD_SCHEMAS)).toEqual(Object.keys(SPARSE_METHODS))
    for (const method of Object.keys(SPARSE_METHODS) as (keyof typeof SPARSE_METHODS)[]) {
      expect(SPARSE_METHOD_SCHEMAS[method].parse({}), method).toEqual(createKernel(method).config)
    }
  })

  it('Vertical-Slash', () => {
    expectConfigError(() => verticalSlash({ verticalSize: 0 }), 'verticalSize')
    expectConfigError(() => verticalSlash({ slashSize: 1.5 }), 'slashSize', /integer/)
    expectConfigError(() => verticalSlash({ window: 0 }), 'window')
    expectConfigError(() => verticalSlash({ sinks: -1 }), 'sinks')
    expectConfigError(() => verticalSlash({ local: 0 }), 'local')
    expectConfigError(() => verticalSlash({ kernelBlockSize: 0 }), 'kernelBlockSize')
    expectConfigError(
      () => verticalSlash({ maskMode: 'exakt' as never }),
      'maskMode',
      /^Invalid maskMode: got 'exakt' \(did you mean 'exact'\?\); expected one of kernel, exact$/,
    )
    expectConfigError(() => verticalSlash({ verticalSize: 3 }), 'verticalSize', /sinks/)
    expectConfigError(() => verticalSlash({ slashSize: 63 }), 'slashSize', /local/)
  })

  it('FlexPrefill', () => {
    expectConfigError(() => flexPrefill({ alpha: 1.1 }), 'alpha')
    expectConfigError(() => flexPrefill({ alpha: Number.NaN }), 'alpha', /must be in \[0, 1\], got NaN$/)
    expectConfigError(() => flexPrefill({ tau: -0.1 }), 'tau')
    expectConfigError(() => flexPrefill({ minBudget: 0 }), 'minBudget')
    expectConfigError(() => flexPrefill({ minBudget: 32 }), 'minBudget', /local/)
    expectConfigError(() => flexPrefill({ maxBudget: 100 }), 'maxBudget', /minBudget/)
    expectConfigError(() => flexPrefill({ maxBudget: 0 }), 'maxBudget')
    expectConfigError(() => flexPrefill({ blockSize: 0 }), 'blockSize')
    expectConfigError(() => flexPrefill({ window: -2 }), 'window')
    expectConfigError(() => flexPrefill({ sinks: -2 }), 'sinks')
    expectConfigError(() => flexPrefill({ local: 0 }), 'local')
    expectConfigError(() => flexPrefill({ kernelBlockSize: 0 }), 'kernelBlockSize')
    expectConfigError(() => flexPrefill({ maskMode: 'x' as never }), 'maskMode')
    // the block-level mode does not force sinks/local lines, so a small minBudget is fine there
    expect(flexPrefill({ tau: 0.1, minBudget: 32 }).config.minBudget).toBe(32)
  })

  it('Block-Sparse', () => {
    expectConfigError(() => blockSparse({ topK: 2 }), 'topK', /^Invalid topK: must be an integer >= 3, got 2$/)
    expectConfigError(() => blockSparse({ blockSize: 4 }), 'blockSize', /must be an integer >= 8, got 4$/)
  })

  it('messages show the value as given (NaN, Infinity, undefined), not as JSON null', () => {
    expectConfigError(() => blockSparse({ topK: Number.NaN }), 'topK', /must be an integer >= 3, got NaN$/)
    expectConfigError(() => blockSparse({ topK: Infinity }), 'topK', /got Infinity$/)
    expectConfigError(() => blockSparse({ topK: 3.5 }), 'topK', /got 3\.5$/)
    expectConfigError(() => blockSparse({ topK: '4' as never }), 'topK', /got '4'$/)
  })

  it('SnapKV and Ada-SnapKV', () => {
    for (const make of [snapKV, adaSnapKV]) {
      expectConfigError(
        () => make({ capacity: 132 }),
        'capacity',
        /132 must be greater than local \+ prefix \(128 \+ 4 = 132\)/,
      )
      expectConfigError(() => make({ capacity: 0 }), 'capacity')
      expectConfigError(() => make({ kernelSize: 4 }), 'kernelSize', /odd/)
      expectConfigError(() => make({ kernelSize: 0 }), 'kernelSize')
      expectConfigError(() => make({ window: 0 }), 'window')
      expectConfigError(() => make({ local: -1 }), 'local')
      expectConfigError(() => make({ prefix: -1 }), 'prefix')
    }
    expectConfigError(() => adaSnapKV({ minHeadRatio: 1.5 }), 'minHeadRatio')
  })

  it('Quest', () => {
    expectConfigError(() => quest({ tokenBudget: 100 }), 'tokenBudget', /multiple of pageSize \(16\)/)
    expectConfigError(() => quest({ tokenBudget: 0 }), 'tokenBudget')
    expectConfigError(() => quest({ pageSize: 0 }), 'pageSize')
    expectConfigError(() => quest({ sharePages: 'yes' as never }), 'sharePages', /got 'yes'; expected true or false/)
  })

  it('createKernel builds every method by name', () => {
    for (const method of Object.keys(SPARSE_METHODS) as (keyof typeof SPARSE_METHODS)[]) {
      const kernel = createKernel(method)
      expect(kernel.method).toBe(method)
      expect(kernel.phases).toEqual(SPARSE_METHODS[method].phase === null ? [] : [SPARSE_METHODS[method].phase])
    }
    expect(createKernel('quest', { tokenBudget: 64 }).config).toMatchObject({ tokenBudget: 64 })
    expectConfigError(() => createKernel('nope' as never), 'method', /vertical-slash/)
    expectConfigError(() => createKernel('dense', { alpha: 1 } as never), 'alpha')
  })
})

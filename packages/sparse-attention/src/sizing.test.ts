// Method sizing for a prompt (moved from apps/cli's sparse compare tests, assertions unchanged).
import { describe, expect, it } from 'vitest'
import { AttnlabError } from '@attnlab/core'
import { budgetFor, calibratedRun } from './index.ts'

describe('budgetFor', () => {
  it('sets budgets from the target sparsity (scaled auxiliary sizes, user flags win)', () => {
    expect(budgetFor('snapkv', 16384, 0.95).config).toMatchObject({
      capacity: 819,
      window: 256,
      local: 128,
      prefix: 4,
      kernelSize: 21,
    })
    expect(budgetFor('quest', 16384, 0.8).config).toMatchObject({ tokenBudget: 3280, pageSize: 16 })
    expect(budgetFor('block-sparse', 16384, 0.95).config).toMatchObject({ blockSize: 16, topK: 26 })
    expect(budgetFor('vertical-slash', 16384, 0.9).config).toMatchObject({ window: 256, local: 64, sinks: 4 })
    expect(budgetFor('snapkv', 128, 0.5).config).toMatchObject({ capacity: 64, local: 1, kernelSize: 1, window: 16 })
    expect(budgetFor('quest', 128, 0.95).config).toMatchObject({ pageSize: 8, tokenBudget: 8 })
    expect(budgetFor('snapkv', 128, 0.5, { capacity: 20, local: 3 }).config).toMatchObject({ capacity: 20, local: 3 })
    // below 16 tokens Quest's pages shrink so that a budget page and the current page still fit
    expect(budgetFor('quest', 12, 0.5).config).toMatchObject({ pageSize: 6, tokenBudget: 6 })
    expect(budgetFor('quest', 5, 0.5).config).toMatchObject({ pageSize: 2, tokenBudget: 2 })
  })

  it('names the methods that calibrate, and rejects an unknown method with a typed error', () => {
    expect(budgetFor('vertical-slash', 64, 0.5).calibrate).toBe('verticalSize')
    expect(budgetFor('flexprefill', 64, 0.5).calibrate).toBe('alpha')
    expect(budgetFor('quest', 64, 0.5).calibrate).toBeNull()
    expect(budgetFor('dense', 64, 0.5)).toEqual({ config: {}, calibrate: null })
    const error = (() => {
      try {
        budgetFor('h2o' as never, 64, 0.5)
      } catch (e) {
        return e
      }
      return undefined
    })()
    expect(error).toBeInstanceOf(AttnlabError)
    expect((error as AttnlabError).code).toBe('INVALID_CONFIG')
    expect((error as Error).message).toMatch(/unknown method 'h2o'/)
  })
})

describe('calibratedRun', () => {
  // a stand-in for a model: exact sparsity falls linearly as V = S grows, or as alpha grows
  const vs = (config: Record<string, unknown>) => ({ config, exact: 1 - (config.verticalSize as number) / 64 })
  const alpha = (config: Record<string, unknown>) => ({ config, exact: 1 - (config.alpha as number) })

  it('bisects V = S to the smallest size at or below the target, or its nearer neighbour', () => {
    const best = calibratedRun('vertical-slash', 64, 0.5, {}, vs)
    expect(best.config).toMatchObject({ verticalSize: 32, slashSize: 32 })
    expect(best.exact).toBe(0.5)
  })

  it('halves alpha until a run lands at or below the target, keeping the nearest run', () => {
    let runs = 0
    const best = calibratedRun('flexprefill', 64, 0.8, {}, (config) => {
      runs++
      return alpha(config)
    })
    // alpha 0 -> 1, 0.5 -> 0.5 (farther), 0.25 -> 0.75 (nearer, at or below 0.8: stop)
    expect(best.config).toMatchObject({ alpha: 0.25 })
    expect(runs).toBe(3)
  })

  it('runs once with the user value, and once for methods sized without calibration', () => {
    let runs = 0
    const best = calibratedRun('vertical-slash', 64, 0.5, { verticalSize: 9 }, (config) => {
      runs++
      return vs(config)
    })
    expect(runs).toBe(1)
    expect(best.config).toMatchObject({ verticalSize: 9, slashSize: 9 })
    runs = 0
    calibratedRun('quest', 64, 0.5, {}, (config) => {
      runs++
      return { config, exact: 0.5 }
    })
    expect(runs).toBe(1)
  })
})

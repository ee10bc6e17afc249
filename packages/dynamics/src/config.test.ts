import { describe, expect, it } from 'vitest'
import { ConfigError } from '@attnlab/core'
import { DYNAMICS_PRESETS, defaultDynamicsConfig, resolveDynamicsConfig } from './config.ts'

describe('resolveDynamicsConfig', () => {
  it('fills the Figure 10 defaults, resolves weights m^(K-1-j) and freezes', () => {
    const config = resolveDynamicsConfig()
    expect(config).toMatchObject({
      nHeads: 3,
      nCtx: 40,
      spans: [1, 1, 1],
      importanceRatio: 1.7,
      initNoise: 1e-6,
      variant: 'replicator',
    })
    expect(config.spanWeights[0]).toBeCloseTo(2.89, 12)
    expect(config.spanWeights[1]).toBeCloseTo(1.7, 12)
    expect(config.spanWeights[2]).toBe(1)
    expect(Object.isFrozen(config)).toBe(true)
    expect(Object.isFrozen(config.spans)).toBe(true)
    expect(defaultDynamicsConfig()).not.toBe(defaultDynamicsConfig())
  })

  it('uses explicit weights over m', () => {
    expect(resolveDynamicsConfig({ weights: [3, 2, 0.5] }).spanWeights).toEqual([3, 2, 0.5])
  })

  it('resolves every preset', () => {
    for (const preset of Object.values(DYNAMICS_PRESETS)) expect(() => resolveDynamicsConfig(preset)).not.toThrow()
  })

  const bad: [string, Record<string, unknown>][] = [
    ['nHeads', { nHeads: 0 }],
    ['nHeads', { nHeads: 1.5 }],
    ['spans', { spans: [] }],
    ['spans[1]', { spans: [1, 0] }],
    ['nCtx', { nCtx: 2 }],
    ['nCtx', { nCtx: 40.5 }],
    ['importanceRatio', { importanceRatio: 0 }],
    ['importanceRatio', { importanceRatio: Number.NaN }],
    ['weights', { weights: [1, 2] }],
    ['weights[1]', { weights: [1, -2, 3] }],
    ['initNoise', { initNoise: -1e-6 }],
    ['seed', { seed: 0.5 }],
    ['variant', { variant: 'squared' }],
    ['weightDecay', { weightDecay: -1 }],
    ['fastValue', { fastValue: 'yes' }],
    ['weightDecay', { fastValue: true, weightDecay: 0, initNoise: 1e-6 }],
  ]
  it.each(bad)('rejects a bad %s with a ConfigError naming it (%j)', (parameter, partial) => {
    let error: unknown
    try {
      resolveDynamicsConfig(partial as never)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).parameter).toBe(parameter)
    expect((error as ConfigError).code).toBe('INVALID_CONFIG')
  })

  it('allows the fast-value limit without weight decay when heads are identical', () => {
    expect(() => resolveDynamicsConfig({ fastValue: true, initNoise: 0 })).not.toThrow()
  })
})

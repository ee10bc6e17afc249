import { ConfigError } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import {
  DEFAULT_MINIMAL_QUERY_INIT,
  configFromJSON,
  configToJSON,
  createConfig,
  defaultTransformerConfig,
  presetConfig,
} from './config.ts'

describe('config', () => {
  it('resolves presets and freezes them', () => {
    const minimal = presetConfig('minimal')
    expect(minimal).toMatchObject({
      architecture: 'minimal',
      dVocab: 50,
      nCtx: 25,
      dModel: 75,
      dHead: 75,
      nHeads: 3,
      nLayers: 1,
      attnOnly: true,
      attnScale: 1,
      queryInit: DEFAULT_MINIMAL_QUERY_INIT,
    })
    expect(Object.isFrozen(minimal)).toBe(true)
    expect(presetConfig('gpt')).toMatchObject({
      nLayers: 2,
      nHeads: 4,
      dModel: 64,
      dHead: 16,
      dMlp: 256,
      normalization: 'layernorm',
      positional: 'learned',
      attnScale: 0.25,
    })
    expect(presetConfig('llama-260k')).toMatchObject({
      dModel: 64,
      dMlp: 172,
      nLayers: 4,
      nHeads: 4,
      nKvHeads: 4,
      dVocab: 512,
      nCtx: 128,
      normalization: 'rmsnorm',
      positional: 'rotary',
      gatedMlp: true,
      bias: false,
      tiedEmbeddings: true,
    })
    expect(presetConfig('gpt-nano').dModel).toBe(16)
    expect(defaultTransformerConfig().architecture).toBe('gpt')
    expect(defaultTransformerConfig('llama').dVocab).toBe(512)
  })

  it('derives dependent fields', () => {
    expect(createConfig({ architecture: 'minimal', dVocab: 10, nCtx: 7 })).toMatchObject({
      dModel: 17,
      dHead: 17,
      nKvHeads: 3,
    })
    expect(createConfig({ architecture: 'gpt', dModel: 96, nHeads: 3 })).toMatchObject({
      dHead: 32,
      dMlp: 384,
      nKvHeads: 3,
    })
    expect(createConfig({ architecture: 'gpt', attnOnly: true }).dMlp).toBe(0)
    expect(createConfig({ architecture: 'llama', nHeads: 8, nKvHeads: 2, dHead: 8 }).attnScale).toBeCloseTo(
      1 / Math.sqrt(8),
    )
    expect(presetConfig('minimal', { queryInit: 0 }).queryInit).toBe(0)
    expect(presetConfig('minimal', { queryInit: 'xavier' }).queryInit).toBe('xavier')
  })

  it('treats a preset as defaults: attnOnly gives dMlp 0 on every preset, dModel rederives dHead and dMlp', () => {
    for (const name of ['gpt', 'gpt-nano', 'llama'] as const) {
      const config = presetConfig(name, { attnOnly: true })
      expect(config, name).toMatchObject({ attnOnly: true, dMlp: 0, gatedMlp: false })
      expect(configFromJSON(JSON.parse(JSON.stringify(configToJSON(config))))).toEqual(config)
    }
    expect(createConfig({ architecture: 'llama', attnOnly: true })).toMatchObject({ dMlp: 0, gatedMlp: false })
    expect(presetConfig('gpt-nano', { dModel: 32 })).toMatchObject({ dModel: 32, dHead: 16, dMlp: 128, nHeads: 2 })
    expect(presetConfig('gpt-nano', { nHeads: 4 })).toMatchObject({ dHead: 4, nKvHeads: 4, dMlp: 32 })
    expect(presetConfig('gpt-nano', { nLayers: 2 })).toMatchObject({ dModel: 16, dHead: 8, dMlp: 32 })
    // A gated MLP derives 2/3 of 4 dModel, rounded up to a multiple of 4: the preset's own rule.
    expect(createConfig({ architecture: 'llama', dModel: 64 }).dMlp).toBe(presetConfig('llama').dMlp)
    expect(presetConfig('llama', { dModel: 96 })).toMatchObject({ dHead: 24, dMlp: 256 })
    expect(presetConfig('gpt', { attnOnly: true, nLayers: 3 })).toMatchObject({ nLayers: 3, dMlp: 0 })
    expect(() => presetConfig('gpt-nano', { attnOnly: true, dMlp: 8 })).toThrow(/attention-only model has no MLP/)
    expect(() => presetConfig('bert' as never)).toThrow(
      /'bert' is not a preset; expected one of minimal, gpt, gpt-nano, llama, llama-260k/,
    )
  })

  it('round-trips through JSON', () => {
    for (const c of [
      presetConfig('minimal'),
      presetConfig('gpt', { dropout: 0.1 }),
      presetConfig('llama', { nKvHeads: 2 }),
    ]) {
      const json = JSON.parse(JSON.stringify(configToJSON(c)))
      expect(configFromJSON(json)).toEqual(c)
    }
    expect(() => configFromJSON(null)).toThrow(ConfigError)
    expect(() => configFromJSON([1])).toThrow(/JSON object/)
  })

  const bad: [string, object, RegExp][] = [
    [
      'unknown field',
      { architecture: 'gpt', dModle: 3 },
      /Invalid dModle: is not a transformer parameter \(did you mean 'dModel'\?\)/,
    ],
    ['architecture', { architecture: 'bert' }, /Invalid architecture: got 'bert'; expected one of minimal, gpt, llama/],
    ['dModel', { architecture: 'gpt', dModel: 0 }, /Invalid dModel: must be an integer in \[1, 65536\], got 0/],
    ['nLayers', { architecture: 'gpt', nLayers: 1.5 }, /nLayers/],
    ['heads split', { architecture: 'gpt', dModel: 10, nHeads: 3 }, /dModel 10 is not divisible by nHeads 3/],
    ['gqa', { architecture: 'llama', nHeads: 4, nKvHeads: 3 }, /nKvHeads: 3 does not divide nHeads 4/],
    ['rotary odd', { architecture: 'llama', dModel: 15, nHeads: 3, dHead: 5 }, /dHead must be even/],
    ['dropout', { architecture: 'gpt', dropout: 1 }, /dropout/],
    ['normEps', { architecture: 'gpt', normEps: 0 }, /normEps/],
    ['activation', { architecture: 'gpt', actFn: 'swish' }, /actFn/],
    ['seed', { architecture: 'gpt', seed: 0.5 }, /seed/],
    ['queryInit', { architecture: 'minimal', queryInit: -1 }, /queryInit/],
    ['attnScale', { architecture: 'gpt', attnScale: 0 }, /attnScale/],
    ['minimal dModel', { architecture: 'minimal', dModel: 70 }, /dModel must be dVocab \+ nCtx = 75/],
    ['minimal layers', { architecture: 'minimal', nLayers: 2 }, /requires nLayers = 1/],
    ['minimal norm', { architecture: 'minimal', normalization: 'layernorm' }, /requires normalization = none/],
    ['minimal kv', { architecture: 'minimal', nKvHeads: 1 }, /nKvHeads must equal nHeads/],
    ['minimal dHead', { architecture: 'minimal', dHead: 5 }, /full width/],
    ['onehot on gpt', { architecture: 'gpt', positional: 'onehot' }, /belong to the minimal model/],
    ['llama no norm', { architecture: 'llama', normalization: 'none' }, /rmsnorm/],
    ['gated attn-only', { architecture: 'gpt', attnOnly: true, gatedMlp: true }, /no MLP to gate/],
    ['attn-only with dMlp', { architecture: 'gpt', attnOnly: true, dMlp: 12 }, /attention-only model has no MLP/],
    ['rotaryDims odd', { architecture: 'llama', rotaryDims: 3 }, /rotaryDims.*3 is not an even number/],
    ['rotaryDims > dHead', { architecture: 'llama', rotaryDims: 18 }, /18 is not an even number .* dHead 16/],
    ['rotaryDims learned', { architecture: 'gpt', rotaryDims: 4 }, /only rotary positions rotate/],
    ['rotaryDims minimal', { architecture: 'minimal', rotaryDims: 2 }, /requires rotaryDims = 0/],
    ['parallel minimal', { architecture: 'minimal', parallelResidual: true }, /requires parallelResidual = false/],
    ['parallel mixer', { architecture: 'mixer', parallelResidual: true }, /parallelResidual.*expected false/],
  ]
  for (const [name, input, pattern] of bad) {
    it(`rejects ${name}`, () => {
      expect(() => createConfig(input as never)).toThrow(ConfigError)
      expect(() => createConfig(input as never)).toThrow(pattern)
    })
  }

  it('defaults to a whole-head rotary and sequential blocks; a config JSON without the fields reads the same', () => {
    for (const name of ['minimal', 'gpt', 'gpt-nano', 'llama', 'mixer'] as const) {
      const config = presetConfig(name)
      expect(config).toMatchObject({ rotaryDims: 0, parallelResidual: false })
      const { rotaryDims: _r, parallelResidual: _p, ...older } = configToJSON(config)
      expect(configFromJSON(older)).toEqual(config)
    }
    const neox = createConfig({ architecture: 'gpt', positional: 'rotary', rotaryDims: 4, parallelResidual: true })
    expect(neox).toMatchObject({ dHead: 16, rotaryDims: 4, parallelResidual: true })
    expect(configFromJSON(JSON.parse(JSON.stringify(configToJSON(neox))))).toEqual(neox)
  })

  it('rejects unknown presets and non-objects', () => {
    expect(() => presetConfig('gpt-9' as never)).toThrow(/not a preset/)
    expect(() => createConfig(null as never)).toThrow(ConfigError)
  })

  it('refuses a model too large for a typed array or the wasm heap before allocating, naming the field', () => {
    const refused = (make: () => unknown): ConfigError => {
      try {
        make()
      } catch (error) {
        if (error instanceof ConfigError) return error
        throw error
      }
      throw new Error('expected a ConfigError')
    }
    // Over the field's maximum.
    expect(refused(() => presetConfig('gpt', { nHeads: 1_000_000, dHead: 16 })).parameter).toBe('nHeads')
    expect(refused(() => presetConfig('gpt', { dModel: 100_000 })).parameter).toBe('dModel')
    // Within every field's maximum, but one tensor is too large: the minimal model's W_Q.
    const minimal = refused(() => presetConfig('minimal', { nHeads: 60_000 }))
    expect(minimal.parameter).toBe('nHeads')
    expect(minimal.message).toMatch(/too large: attn.W_Q \[nHeads 60000 x dModel 75 x dHead 75\]/)
    // A long context is not refused for its attention scores (the kernels attend in memory linear in T).
    expect(presetConfig('gpt', { nCtx: 16_384, nHeads: 8 }).nCtx).toBe(16_384)
    // Each tensor fits, the parameters do not.
    const params = refused(() => presetConfig('gpt', { nLayers: 1024, dModel: 1024, nHeads: 16 }))
    expect(params.parameter).toBe('dMlp')
    expect(params.message).toMatch(/about 1\.29e\+10 parameters/)
    // The presets are far below the limits.
    for (const name of ['minimal', 'gpt', 'gpt-nano', 'llama', 'llama-260k', 'mixer'] as const) presetConfig(name)
  })
})

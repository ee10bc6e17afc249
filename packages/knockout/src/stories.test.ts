import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, testBackends } from '@attnlab/core/testing'
import { loadModel, type LoadModelOptions } from '@attnlab/transformer'
import { describe, expect, it } from 'vitest'
import { builtinCapability, builtinCapabilityNames } from './builtins.ts'
import { checkCapability } from './capability.ts'
import { knockoutEffects } from './report.ts'
import { scoreMasks } from './scoring.ts'
import { STORY_CAPABILITY_NAMES, storyCapabilities, storyCapability } from './stories.ts'

/** A character-level "tokenizer": BOS 1, then one id per character (32..126 -> 3..97). */
const encode = (text: string): number[] => [1, ...[...text].map((c) => Math.max(3, Math.min(97, c.charCodeAt(0) - 29)))]

describe('story probes with a known answer', () => {
  it('one scored answer token per sequence; the gain weighs +1/n the prompts and -1/n the counterfactuals', () => {
    for (const name of STORY_CAPABILITY_NAMES) {
      const gain = storyCapability(name, encode, { count: 6, seed: 3 })
      const { data } = gain
      expect(gain.name).toBe(name)
      expect(gain.chance).toBe(0)
      expect(gain.metric).toBe('logprob')
      expect(data.count).toBe(12)
      expect(data.scoredPositions.length).toBe(12)
      const weights = [...(data.scoreWeights as Float64Array)]
      expect(weights.filter((w) => w > 0)).toEqual(Array(6).fill(1 / 6))
      expect(weights.filter((w) => w < 0)).toEqual(Array(6).fill(-1 / 6))
      checkCapability(gain, { dVocab: 98, nCtx: 512 })
      // Each sequence runs up to its answer, which is the scored target (the first character of the answer word).
      for (let s = 0; s < data.count; s++) {
        const flat = data.scoredPositions[s] as number
        expect(Math.floor(flat / data.length)).toBe(s)
        const answer = { 'name-recall': null, 'quote-close': '"', pronoun: null }[name]
        if (answer !== null) expect(data.targets[s]).toBe(answer.charCodeAt(0) - 29)
      }
      const informative = storyCapability(name, encode, { count: 6, seed: 3, part: 'informative' })
      expect(informative.name).toBe(`${name}-informative`)
      expect(informative.data.count).toBe(6)
      expect([...(informative.data.scoreWeights as Float64Array)]).toEqual(Array(6).fill(1 / 6))
      expect(informative.chance).toBeUndefined()
      expect(storyCapability(name, encode, { count: 6, seed: 3, part: 'counterfactual' }).data.count).toBe(6)
    }
    // Same seed, same prompts; another seed, others.
    const a = storyCapability('name-recall', encode, { count: 8, seed: 1 }).data.inputs
    expect(storyCapability('name-recall', encode, { count: 8, seed: 1 }).data.inputs).toEqual(a)
    expect(storyCapability('name-recall', encode, { count: 8, seed: 2 }).data.inputs).not.toEqual(a)
    expect(storyCapabilities(encode, { count: 2 }).map((c) => c.name)).toEqual([...STORY_CAPABILITY_NAMES])
  })

  it('built in by name when a tokenizer is known; bad options are named', () => {
    const context = { dVocab: 98, nCtx: 512, encode }
    expect(builtinCapabilityNames(context)).toEqual(expect.arrayContaining([...STORY_CAPABILITY_NAMES]))
    expect(builtinCapabilityNames({ dVocab: 98, nCtx: 512 })).not.toContain('pronoun')
    const accuracy = builtinCapability('pronoun@accuracy', context, { count: 4 })
    expect(accuracy).toMatchObject({ name: 'pronoun@accuracy', metric: 'accuracy', chance: 0 })
    expect(() => builtinCapability('pronoun', { dVocab: 98, nCtx: 512 })).toThrow(/\(it needs a tokenizer\)/)
    // A context too short for the prompts: not listed, and named as the reason.
    expect(builtinCapabilityNames({ ...context, nCtx: 24 })).not.toContain('name-recall')
    expect(() => builtinCapability('name-recall', { ...context, nCtx: 24 })).toThrow(
      /'name-recall' is not available for this model \(its prompts do not fit the model's context of 24 tokens\)/,
    )
    expect(() => storyCapability('rhyme' as never, encode)).toThrow(/'rhyme' is not a story probe/)
    expect(() => storyCapability('pronoun', encode, { count: 0 })).toThrow(/Invalid count: 0 must be a positive/)
    expect(() => storyCapability('pronoun', encode, { part: 'both' as never })).toThrow(/'both' is not one of gain/)
    expect(() => storyCapability('pronoun', encode, { metric: 'loss2' as never })).toThrow(/'loss2' is not a metric/)
    expect(() => storyCapability('name-recall', encode, { nCtx: 20 })).toThrow(
      /the 'name-recall' prompts need \d+ positions; the model has 20/,
    )
  })
})

// The real models: which probes they pass (measured in full in docs/experiments/capabilities.md), and a knockout.
const SHARED = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../shared/models')
const MODELS: readonly { name: string; path: string; options: LoadModelOptions; present: boolean }[] = [
  {
    name: 'stories260K',
    path: join(SHARED, 'stories260K/stories260K.bin'),
    options: { tokenizer: join(SHARED, 'stories260K/tok512.bin') },
    present: true,
  },
  { name: 'tinystories656K', path: join(SHARED, 'tinystories656K'), options: { dummyPrefix: false }, present: true },
  { name: 'aidreams260K', path: join(SHARED, 'aidreams260K/model.bin'), options: {}, present: false },
]

// One wasm mode (the probes are backend-independent; the numeric paths run per mode in the other suites).
const MODES = testBackends().filter((mode) => mode === 'wasm')

describeWithBackends(
  'story probes on the shared real models',
  () => {
    for (const { name, path, options, present } of MODELS) {
      const have = existsSync(path)
      if (!have) console.warn(`[attnlab] ${path} is absent: its story-probe test is skipped`)
      const verdict = present ? 'every probe present (gain > 1 nat)' : 'no probe present (|gain| < 0.5 nat)'
      it.skipIf(!have)(
        `${name}: ${verdict}; knocking out one head changes the target and the controls`,
        async () => {
          const { model, tokenizer } = await loadModel(path, options)
          try {
            const probes = storyCapabilities((text) => (tokenizer as NonNullable<typeof tokenizer>).encode(text), {
              count: 8,
            })
            const heads = model.config.nLayers * model.config.nHeads
            const clean = { count: 1, heads, data: new Uint8Array(heads) }
            for (const probe of probes) {
              const [gain] = (await scoreMasks(model, probe, clean)).values
              if (present) expect(gain, probe.name).toBeGreaterThan(1)
              else expect(Math.abs(gain as number), probe.name).toBeLessThan(0.5)
            }
            const before = tf.memory().numTensors
            const effects = await knockoutEffects(model, [{ layer: model.config.nLayers - 1, head: 0 }], probes, {
              target: 'name-recall',
            })
            expect(tf.memory().numTensors).toBe(before)
            expect(effects.rows.map((row) => row.role)).toEqual(['target', 'control', 'control'])
            for (const row of effects.rows) expect(Number.isFinite(row.after)).toBe(true)
            expect(effects.rows.some((row) => Math.abs(row.change) > 1e-4)).toBe(true)
          } finally {
            model.dispose()
          }
        },
        120_000,
      )
    }
  },
  MODES.length > 0 ? MODES : testBackends().slice(0, 1),
)

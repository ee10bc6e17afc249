// Fuzz tests of model configurations as they arrive from files (configFromJSON on a checkpoint's or an
// emergence run's config.json): every field of each preset's JSON replaced by a hostile value, or
// removed, or an unknown field added. The result is a valid configuration (and a model of it runs a
// forward pass without leaking tensors) or one ConfigError on one line naming the field.
import { ConfigError, useBackend } from '@attnlab/core'
import { fuzzSettings, HOSTILE_JSON_VALUES, jsonPaths, withJsonValue } from '@attnlab/core/testing'
import * as tf from '@tensorflow/tfjs-core'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { configFromJSON, configToJSON, presetConfig, type PresetName } from './config.ts'
import { createTransformer, parameterShapes } from './model.ts'

let tried = 0
let built = 0
beforeAll(async () => {
  await useBackend('cpu')
})
afterAll(() => console.info(`model config fuzz: ${tried} inputs tried, ${built} models built and run`))

const PRESETS: PresetName[] = ['minimal', 'gpt-nano', 'llama', 'mixer']
const seeds = PRESETS.map((name) => configToJSON(presetConfig(name, { dVocab: 8, nCtx: 6 })))

describe('model configurations from JSON (fuzz)', () => {
  it('hostile field values: a valid configuration or one ConfigError naming the field', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: seeds.length - 1 }),
        fc.nat(),
        fc.constantFrom(...HOSTILE_JSON_VALUES, 'gpt', 'llama', 'rmsnorm', 'rope', 'gelu', 'silu', 1e-300, 3, 4),
        fc.boolean(),
        async (which, pathIndex, value, extraField) => {
          tried++
          const json = seeds[which] as Record<string, unknown>
          const paths = jsonPaths(json).filter((p) => p.length > 0)
          const path = paths[pathIndex % paths.length] as (string | number)[]
          const edited = withJsonValue(json, path, value) as Record<string, unknown>
          const input = extraField ? { ...edited, dModle: 8 } : edited
          let config: ReturnType<typeof configFromJSON>
          try {
            config = configFromJSON(input)
          } catch (error) {
            if (!(error instanceof ConfigError)) throw error
            expect(error.message).not.toContain('\n')
            // The field at fault is named (the edited one, one derived from it, or the unknown one).
            expect(error.parameter.length).toBeGreaterThan(0)
            expect(error.message).toContain(error.parameter)
            return
          }
          expect(extraField, 'an unknown field is refused').toBe(false)
          const parameters = parameterShapes(config).reduce((n, [, s]) => n + s.reduce((a, b) => a * b, 1), 0)
          if (parameters > 2e5) return // a valid but large model: not built here
          built++
          const before = tf.memory().numTensors
          const model = createTransformer(config)
          try {
            const logits = model.forward([[0, 1, 2].map((t) => t % config.dVocab)])
            const values = await logits.data()
            logits.dispose()
            expect(values.length).toBe(3 * config.dVocab)
          } finally {
            model.dispose()
          }
          expect(tf.memory().numTensors).toBe(before)
        },
      ),
      fuzzSettings(400),
    )
  })
})

// Fuzz tests of emergence configurations (what `attnlab emergence` flags and sweep specs become): every
// field of each task's default configuration replaced by a hostile value or removed. The result
// resolves (and its task samples in-vocabulary tokens) or gives one ConfigError on one line, quickly:
// never a crash, a hang, or a table sized from a hostile vocabulary.
import { AttnlabError, Rng } from '@attnlab/core'
import { fuzzSettings, HOSTILE_JSON_VALUES, jsonPaths, withJsonValue } from '@attnlab/core/testing'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { defaultEmergenceConfig, resolveEmergenceConfig, type EmergenceConfig } from '../index.ts'

let tried = 0
let resolved = 0
afterAll(() => console.info(`emergence config fuzz: ${tried} inputs tried, ${resolved} resolved and sampled`))

const small = defaultEmergenceConfig()
const seeds: EmergenceConfig[] = [
  { ...small, task: { kind: 'sparse-markov', vocabSize: 6, spans: [1, 1], genLen: 4, tau: 0.3 } },
  { ...small, task: { kind: 'linear-map' } },
  { ...small, task: { kind: 'cellular-automaton' } },
  { ...small, task: { kind: 'icl-markov' }, preset: 'gpt-nano' },
]

describe('emergence configurations (fuzz)', () => {
  it('hostile values in any field: resolves and samples, or one typed error on one line', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: seeds.length - 1 }),
        fc.nat(),
        fc.constantFrom(...HOSTILE_JSON_VALUES, 65536, 2 ** 20, [2, 2, 2], [1e9], 'minimal', 'adamw', 'cosine'),
        (which, pathIndex, value) => {
          tried++
          const config = seeds[which] as EmergenceConfig
          const paths = jsonPaths(config).filter((p) => p.length > 0)
          const edited = withJsonValue(config, paths[pathIndex % paths.length] as (string | number)[], value)
          const started = performance.now()
          try {
            const { task, model } = resolveEmergenceConfig(edited as EmergenceConfig)
            resolved++
            const batch = task.sample(2, Rng.fromSeed(1))
            expect(batch.tokens.every((t) => t >= 0 && t < model.dVocab)).toBe(true)
          } catch (error) {
            if (!(error instanceof AttnlabError)) throw error
            expect(error.message).not.toContain('\n')
          }
          expect(performance.now() - started, 'resolved or refused quickly').toBeLessThan(5000)
        },
      ),
      fuzzSettings(1000),
    )
  })
})

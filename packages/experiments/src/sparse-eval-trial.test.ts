import { ConfigError } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { evaluationTask } from './sparse-eval-node.ts'
import { DEFAULT_EVAL_SPARSITIES, resolveSparseEvalTrialConfig } from './sparse-eval.ts'

describe('resolveSparseEvalTrialConfig', () => {
  it('fills the defaults around the model path', () => {
    const config = resolveSparseEvalTrialConfig({ model: 'runs/niah' })
    expect(config.task).toEqual({ kind: 'niah-tokens', needles: 4 })
    expect(config.sparsities).toEqual(DEFAULT_EVAL_SPARSITIES)
    expect(config.samples).toBe(20)
  })

  it.each([
    [{}, /Invalid model/],
    [{ model: 'm', methods: ['questt'] }, /did you mean 'quest'/],
    [{ model: 'm', sparsities: [1] }, /sparsities/],
    [{ model: 'm', lengths: [0] }, /lengths/],
    [{ model: 'm', task: { kind: 'sparse-markov' } }, /Invalid task.kind/],
    [{ model: 'm', extra: 1 }, /extra/],
    // The task's own settings, against their fields (the rest comes from the checkpoint when the trial runs).
    [{ model: 'm', task: { kind: 'niah-tokens', needles: -1 } }, /Invalid task\.needles: .*-1/],
    [{ model: 'm', task: { kind: 'niah-tokens', needels: 4 } }, /Invalid task\.needels: is not a niah-tokens setting/],
  ])('refuses %j', (input, message) => {
    expect(() => resolveSparseEvalTrialConfig(input)).toThrow(ConfigError)
    expect(() => resolveSparseEvalTrialConfig(input)).toThrow(message)
  })
})

describe('evaluationTask', () => {
  it("keeps the trained task's token ranges for the same kind, never its nCtx", () => {
    const trained = { kind: 'niah-tokens', nCtx: 128, needles: 32, keyTokens: 64, valueTokens: 16 }
    expect(evaluationTask({ kind: 'niah-tokens', needles: 4 }, trained)).toEqual({
      kind: 'niah-tokens',
      needles: 4,
      keyTokens: 64,
      valueTokens: 16,
    })
    expect(evaluationTask({ kind: 'vt-tokens' }, trained)).toEqual({ kind: 'vt-tokens' })
    expect(evaluationTask({ kind: 'niah-tokens', nCtx: 9 }, null)).toEqual({ kind: 'niah-tokens' })
  })
})

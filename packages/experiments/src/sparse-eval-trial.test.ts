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
    // Text tasks: their settings and fields; the text fields on a retrieval task.
    [{ model: 'm', task: { kind: 'ruler-niah', needls: 1 } }, /Invalid task\.needls: is not a text task setting/],
    [
      { model: 'm', task: { kind: 'ruler-niah', needles: 0 } },
      /Invalid task\.needles: must be a positive integer; got 0/,
    ],
    [{ model: 'm', task: { kind: 'ruler-vt', hops: 'two' } }, /Invalid task\.hops: must be a positive integer/],
    [{ model: 'm', task: { kind: 'ruler-vt', needles: 1 } }, /Invalid task\.needles: is not a ruler-vt setting/],
    [
      { model: 'm', task: { kind: 'ruler-cwe', minFill: 1.5 } },
      /Invalid task\.minFill: must be a fraction in \(0, 1\]/,
    ],
    [{ model: 'm', task: { kind: 'story-multihop', questionPosition: 'middle' } }, /must be both, after or before/],
    [{ model: 'm', task: { kind: 'ruler-niah' }, tokenizer: '' }, /Invalid tokenizer: must be a tokenizer file path/],
    [{ model: 'm', task: { kind: 'ruler-niah' }, dummyPrefix: 'no' }, /Invalid dummyPrefix: must be true or false/],
    [{ model: 'm', task: { kind: 'ruler-niah' }, maxNewTokens: 0 }, /maxNewTokens/],
    [{ model: 'm', tokenizer: 't.bin' }, /Invalid tokenizer: applies to the text tasks .*not to niah-tokens/],
    [{ model: 'm', maxNewTokens: 8 }, /Invalid maxNewTokens: applies to the text tasks/],
    // A list naming an entry twice, refused when a sweep spec is read rather than when the trial runs.
    [{ model: 'm', methods: ['quest', 'quest'] }, /Invalid methods: lists quest twice; give each once/],
    [{ model: 'm', sparsities: [0, 0.5, 0.5] }, /Invalid sparsities: lists 0.5 twice/],
    [{ model: 'm', lengths: [64, 128, 64] }, /Invalid lengths: lists 64 twice/],
  ])('refuses %j', (input, message) => {
    expect(() => resolveSparseEvalTrialConfig(input)).toThrow(ConfigError)
    expect(() => resolveSparseEvalTrialConfig(input)).toThrow(message)
  })
})

describe('resolveSparseEvalTrialConfig on text tasks', () => {
  it('accepts a text task with its settings and the text fields', () => {
    const config = resolveSparseEvalTrialConfig({
      model: 'stories260K.bin',
      tokenizer: 'tok512.bin',
      maxNewTokens: 48,
      dummyPrefix: false,
      task: { kind: 'ruler-niah', needles: 1, groups: 1, questionPosition: 'after', minFill: 0.8 },
    })
    expect(config.task).toEqual({ kind: 'ruler-niah', needles: 1, groups: 1, questionPosition: 'after', minFill: 0.8 })
    expect([config.tokenizer, config.maxNewTokens, config.dummyPrefix]).toEqual(['tok512.bin', 48, false])
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

// runEmergence as a library call: a tiny run on every backend (events, summary, report, no
// leaked tensors), abort through the signal, and the config's typed errors.
import { describe, expect, it } from 'vitest'
import { AttnlabError, ConfigError } from '@attnlab/core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import {
  EMERGENCE_TASK_DEFAULTS,
  EMERGENCE_DEFAULTS,
  buildEmergenceReport,
  defaultEmergenceConfig,
  emergenceSummaryLines,
  resolveEmergenceConfig,
  runEmergence,
  type EmergenceConfig,
  type EmergenceProgress,
} from '../index.ts'

// A tiny chain with an exact oracle (8^2 windows) and a fast minimal model.
const TINY: EmergenceConfig = {
  task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 },
  preset: 'minimal',
  model: {},
  training: {
    ...defaultEmergenceConfig().training,
    steps: 6,
    batchSize: 32,
    validationSize: 64,
    analysisSize: 32,
    evalEvery: 3,
  },
  seeds: [0],
}

describeWithBackends('runEmergence', () => {
  it('runs a small config: events, summary, report, no leaked tensors', async () => {
    const events: EmergenceProgress[] = []
    const result = await expectNoLeaks(() => runEmergence(TINY, { onProgress: (e) => events.push(e) }))
    const { summary } = result
    expect(summary.interrupted).toBe(false)
    expect(summary.oracles.lines.map((o) => o.label)).toEqual([
      'H_0 (no context)',
      'H_1 (newest 1 span)',
      'H_2 (teacher entropy)',
      'truncated teacher, top 1 span',
    ])
    expect(summary.seeds.map((s) => s.completedSteps)).toEqual([6])
    expect(summary.stageSteps).toHaveLength(1)
    expect(result.seeds[0]?.lines.map((l) => l.step)).toEqual([0, 3, 6])
    expect(events[0]?.kind).toBe('oracles')
    expect(events.filter((e) => e.kind === 'evaluation').map((e) => (e.kind === 'evaluation' ? e.stage : ''))).toEqual(
      expect.arrayContaining([expect.stringMatching(/^stage \d\/2$/)]),
    )
    expect(events.filter((e) => e.kind === 'step')).toHaveLength(6)
    expect(events.at(-1)).toEqual({ kind: 'seed-end', seed: 0, stopped: false })
    expect(result.record.task).toMatchObject({ kind: 'sparse-markov', vocabSize: 8, spans: [1, 1] })
    const text = emergenceSummaryLines(result)
    expect(text.some((l) => l.startsWith('stage  step  plateau (nats)') || l === 'no stage detected')).toBe(true)
    expect(text).toContainEqual(
      expect.stringMatching(/^final validation loss \d\.\d{4} nats at step 6; teacher entropy/),
    )
    const html = await buildEmergenceReport(result)
    expect(html).toContain('<!doctype html>')
    expect(html.match(/<svg/g)?.length).toBeGreaterThanOrEqual(3)
  })

  it('stops after the current step when the signal aborts, and reports it', async () => {
    const controller = new AbortController()
    const result = await expectNoLeaks(() =>
      runEmergence(
        { ...TINY, training: { ...TINY.training, steps: 60 } },
        {
          signal: controller.signal,
          onProgress: (e) => {
            if (e.kind === 'step' && e.record.step === 2) controller.abort()
          },
        },
      ),
    )
    expect(result.summary.interrupted).toBe(true)
    expect(result.summary.seeds[0]?.stopped).toBe(true)
    expect(result.summary.seeds[0]?.completedSteps).toBe(2)
  })

  it('an interrupted run says which step its checkpoint holds, past its last evaluation', async () => {
    const controller = new AbortController()
    // Evaluations every 3 steps; stopped after step 4: evaluated at 3, checkpoint at 4.
    const result = await runEmergence(
      { ...TINY, training: { ...TINY.training, steps: 60 } },
      {
        signal: controller.signal,
        onProgress: (e) => {
          if (e.kind === 'step' && e.record.step === 4) controller.abort()
        },
      },
    )
    expect(result.summary.seeds[0]?.completedSteps).toBe(4)
    const text = emergenceSummaryLines(result)
    expect(text).toContainEqual(expect.stringMatching(/^final validation loss \d\.\d{4} nats at step 3;/))
    expect(text).toContain(
      'interrupted: the checkpoint holds step 4 of 60; a resume continues from there ' +
        '(the last evaluation was at step 3)',
    )
  })

  it('throws INTERRUPTED (beforeStart) when aborted before the training started', async () => {
    const controller = new AbortController()
    const run = runEmergence(TINY, {
      signal: controller.signal,
      onProgress: (e) => {
        if (e.kind === 'oracles') controller.abort()
      },
    })
    await expect(run).rejects.toMatchObject({ code: 'INTERRUPTED', details: { beforeStart: true } })
    await expect(run).rejects.toBeInstanceOf(AttnlabError)
  })
})

describe('emergence config', () => {
  it('defaultEmergenceConfig is the documented default experiment and each task its own', () => {
    const config = defaultEmergenceConfig()
    expect(config.task).toEqual({ kind: 'sparse-markov', m: EMERGENCE_DEFAULTS.m })
    expect(config.preset).toBe('minimal')
    expect(config.training).toMatchObject({ steps: 1500, batchSize: 1024, lr: 0.08, evalEvery: 25, analysisSize: 256 })
    expect(config.seeds).toEqual([0])
    const resolved = resolveEmergenceConfig(config)
    expect(resolved.model).toMatchObject({ architecture: 'minimal', nHeads: 3, dVocab: 50 })
    expect(Object.isFrozen(resolved)).toBe(true)
    const linear = defaultEmergenceConfig('linear-map')
    expect(linear.task).toEqual({ kind: 'linear-map', stateSize: 8, onesPerRow: 2 })
    expect(linear.preset).toBe('gpt')
    expect(linear.model).toEqual({ nLayers: 1, dModel: 64, nHeads: 8 })
    expect(linear.training).toMatchObject({ steps: 600, batchSize: 256, lr: 0.001, evalEvery: 10 })
    // The preset's derived fields are derived again from the overrides (dHead = dModel / nHeads).
    expect(resolveEmergenceConfig(linear).model).toMatchObject({ dModel: 64, nHeads: 8, dHead: 8, dMlp: 256 })
    expect(defaultEmergenceConfig('icl-markov').model).toEqual({ nLayers: 2, dModel: 64, nHeads: 4, attnOnly: true })
    // Every documented default lands where its schema puts it (task, model or training), none is dropped.
    const trainingNames: Record<string, string> = { batch: 'batchSize' }
    for (const [kind, own] of Object.entries(EMERGENCE_TASK_DEFAULTS)) {
      const made = defaultEmergenceConfig(kind as never)
      for (const [key, value] of Object.entries(own)) {
        const placed = [
          key === 'preset' ? made.preset : undefined,
          (made.task as Record<string, unknown>)[key],
          (made.model as Record<string, unknown>)[key],
          (made.training as Record<string, unknown>)[trainingNames[key] ?? key],
        ].filter((v) => v !== undefined)
        expect(placed, `${kind}.${key}`).toEqual([value])
      }
    }
  })

  it('rejects a bad config with typed errors naming the value and what was expected', () => {
    const bad =
      (config: unknown): (() => unknown) =>
      () =>
        resolveEmergenceConfig(config as EmergenceConfig)
    expect(bad({ ...TINY, trainig: TINY.training })).toThrow(/did you mean 'training'/)
    expect(bad({ ...TINY, training: { ...TINY.training, step: 5 } })).toThrow(/did you mean 'steps'/)
    expect(bad({ ...TINY, training: { ...TINY.training, steps: 0 } })).toThrow(
      'Invalid training.steps: must be an integer >= 1, got 0',
    )
    expect(bad({ ...TINY, training: { ...TINY.training, analysisSize: 128 } })).toThrow(
      'Invalid training.analysisSize: must be an integer in [1, 64], got 128',
    )
    expect(bad({ ...TINY, training: { ...TINY.training, trainSize: 8 } })).toThrow(/smaller than training.batchSize 32/)
    // Absurd learning rates and clips are refused, the largest allowed ones are not (both bounds inclusive).
    expect(bad({ ...TINY, training: { ...TINY.training, lr: 1e300 } })).toThrow(
      'Invalid training.lr: must be in (0, 10], got about 1.00e+300',
    )
    expect(bad({ ...TINY, training: { ...TINY.training, gradClip: 1e7 } })).toThrow(
      'Invalid training.gradClip: must be in (0, 1000000], got 10000000',
    )
    expect(bad({ ...TINY, training: { ...TINY.training, lr: 10, gradClip: 1e6 } })).not.toThrow()
    // The optimizer and the schedule are checked with the rest, before any work (not by the trainer in a run).
    const adamw = (extra: object) => ({
      ...TINY,
      training: { ...TINY.training, optimizer: { kind: 'adamw', ...extra } },
    })
    expect(bad(adamw({ beta1: -1 }))).toThrow(/^Invalid training\.optimizer\.beta1: .*-1/)
    expect(bad(adamw({ weightDecay: 'many' }))).toThrow(/^Invalid training\.optimizer\.weightDecay: /)
    expect(bad(adamw({ kind: 'adam' }))).toThrow(/^Invalid training\.optimizer: .*adamw/)
    const warmup = (warmupSteps: unknown) => ({
      ...TINY,
      training: { ...TINY.training, schedule: { kind: 'warmup-cosine', warmupSteps } },
    })
    expect(bad(warmup(-1))).toThrow(/^Invalid training\.schedule\.warmupSteps: /)
    expect(bad(warmup(6))).toThrow(/^Invalid training\.schedule/)
    expect(bad(warmup(2))).not.toThrow()
    expect(bad({ ...TINY, preset: 'bogus' })).toThrow(/Invalid preset: got 'bogus'; expected one of minimal, gpt/)
    expect(bad({ ...TINY, seeds: [] })).toThrow(/Invalid seeds: got \[\]; expected an array with at least 1 entries/)
    expect(bad({ ...TINY, seeds: [-1] })).toThrow(/Invalid seeds\[0\]: must be an integer >= 0, got -1/)
    expect(bad({ ...TINY, seeds: [1, 1] })).toThrow(/lists a seed twice/)
    expect(bad({ ...TINY, task: { kind: 'sparse-markov', spans: [0] } })).toThrow(ConfigError)
    expect(bad({ ...TINY, model: { nLayers: 2 } })).toThrow(ConfigError)
    try {
      bad({ ...TINY, training: { ...TINY.training, lr: -1 } })()
      expect.fail('no error')
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError)
      expect(error).toMatchObject({ code: 'INVALID_CONFIG', parameter: 'training.lr' })
    }
    expect(() => defaultEmergenceConfig('bogus' as never)).toThrow(ConfigError)
  })
})

import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { useBackend } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { SWEEP_EXPERIMENTS, sparseEvalMetricKey } from './experiments.ts'
import { expandTrials, parseSweepSpec, type Trial } from './index.ts'
import { runTrial, trialDirectory } from './node.ts'

const experiment = SWEEP_EXPERIMENTS['sparse-eval']

describe('the sparse-eval sweep experiment', () => {
  it('validates settings with the experiment validator', () => {
    expect(() => experiment?.validate({ ...experiment.defaults(() => undefined), model: 'runs/m' })).not.toThrow()
    expect(() => experiment?.validate(experiment.defaults(() => undefined))).toThrow(/Invalid model/)
  })

  it('gives one metric per row, keyed by method, length and target sparsity', () => {
    const row = (targetSparsity: number, score: number, cost: { relative: number } | null) => ({
      method: targetSparsity === 0 ? 'dense' : 'quest',
      task: 'niah-tokens',
      length: 128,
      samples: 10,
      targetSparsity,
      score,
      scoreStd: 0.1,
      strict: 0.5,
      iou: 0.6,
      exactSparsity: targetSparsity,
      reportedSparsity: targetSparsity,
      cost,
    })
    const head = { task: 'niah-tokens', length: 128, samples: 10, layer: 1, head: 0, self: 0.1 }
    const heads = [{ ...head, retrieval: 0.87, uniform: 0.01, previousToken: 0.02 }]
    const metrics = experiment?.metrics({
      rows: [row(0, 0.9, { relative: 1 }), row(0.9, 0.4, null)],
      heads,
      seconds: 3,
    })
    expect(metrics?.retrievalL128B1H0).toBe(0.87)
    expect(metrics?.previousTokenL128B1H0).toBe(0.02)
    expect(metrics?.uniformL128).toBe(0.01)
    expect(metrics?.[sparseEvalMetricKey('score', 128, 0.9, 'quest')]).toBe(0.4)
    expect(metrics?.['quest:scoreL128S0.9']).toBe(0.4)
    expect(metrics?.scoreL128S0).toBe(0.9)
    expect(metrics?.relativeCostL128S0).toBe(1)
    expect(metrics?.['quest:relativeCostL128S0.9']).toBeNull()
    expect(metrics?.['scoreL128S0.9']).toBeUndefined()
    expect(metrics?.samples).toBe(10)
    expect(metrics?.evalSeconds).toBe(3)
  })

  it('keys every sparse row by its method, with one method or several, so none overwrites another', () => {
    const row = (method: string, score: number) => ({
      method,
      task: 'niah-tokens',
      length: 128,
      samples: 10,
      targetSparsity: 0.9,
      score,
      scoreStd: 0.1,
      strict: 0.5,
      iou: 0.6,
      exactSparsity: 0.9,
      reportedSparsity: 0.9,
      cost: { relative: 0.2 },
    })
    const reference = { ...row('dense', 0.9), targetSparsity: 0 }
    const rows = [reference, row('quest', 0.8), row('snapkv', 0.3)]
    const metrics = experiment?.metrics({ rows, heads: [], seconds: 3 })
    expect(metrics?.scoreL128S0).toBe(0.9)
    expect(metrics?.['quest:scoreL128S0.9']).toBe(0.8)
    expect(metrics?.[sparseEvalMetricKey('score', 128, 0.9, 'snapkv')]).toBe(0.3)
    expect(metrics?.['scoreL128S0.9']).toBeUndefined()
    // a trial of one method gives its rows the same keys as a trial of several (a sweep may mix them)
    const one = experiment?.metrics({ rows: [reference, row('quest', 0.8)], heads: [], seconds: 3 })
    expect(one?.['quest:scoreL128S0.9']).toBe(0.8)
    expect(one?.scoreL128S0).toBe(0.9)
    expect(Object.keys(one ?? {}).filter((k) => k.startsWith('snapkv:'))).toEqual([])
  })
})

describe('the sparse-eval sweep experiment on a text task', () => {
  it('gives agreement, tagged and skipped per row; NaN is null', () => {
    const row = {
      method: 'quest',
      task: 'story-multihop',
      length: 464,
      samples: 4,
      targetSparsity: 0.8,
      score: Number.NaN,
      scoreStd: Number.NaN,
      strict: 0,
      iou: Number.NaN,
      exactSparsity: 0.79,
      reportedSparsity: 0.8,
      cost: { relative: 0.3 },
      agreement: 0.25,
      tagged: 0,
      skipped: 4,
    }
    const metrics = experiment?.metrics({ rows: [row], heads: [], seconds: 1 })
    expect(metrics?.['quest:agreementL464S0.8']).toBe(0.25)
    expect(metrics?.['quest:skippedL464S0.8']).toBe(4)
    expect(metrics?.['quest:taggedL464S0.8']).toBe(0)
    expect(metrics?.['quest:scoreL464S0.8']).toBeNull()
    expect(metrics?.['quest:iouL464S0.8']).toBeNull()
  })

  const SHARED = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../shared/models/stories260K')
  const present = existsSync(join(SHARED, 'stories260K.bin'))
  it.skipIf(!present)(
    'runs as a trial on stories260K with its tokenizer',
    async () => {
      await useBackend('cpu')
      const dir = await mkdtemp(join(tmpdir(), 'attnlab-text-trial-'))
      try {
        const input = {
          name: 'text',
          experiment: 'sparse-eval',
          base: {
            model: join(SHARED, 'stories260K.bin'),
            tokenizer: join(SHARED, 'tok512.bin'),
            task: { kind: 'ruler-niah', needles: 1, groups: 1 },
            methods: ['quest'],
            sparsities: [0, 0.8],
            lengths: [440],
            samples: 1,
            maxNewTokens: 4,
          },
          seeds: 1,
        }
        const spec = parseSweepSpec(JSON.stringify(input), 'spec.json')
        const trial = (await expandTrials(spec))[0] as Trial
        const record = await runTrial(dir, trial, { sweep: 'text' })
        expect(record.error).toBeNull()
        expect(record.status).toBe('done')
        expect(record.metrics.agreementL440S0).toBe(1)
        expect(record.metrics['quest:exactSparsityL440S0.8']).toBeGreaterThan(0.5)
        expect(record.metrics.iouL440S0).toBeNull()
        const results = JSON.parse(await readFile(join(trialDirectory(dir, trial.id), 'results.json'), 'utf8'))
        expect(results.task).toEqual({ kind: 'ruler-niah', needles: 1, groups: 1 })
        expect(typeof results.rows[0].example).toBe('string')
        // A text trial on a model without a tokenizer fails with the reason, not a crash.
        const { tokenizer: _, ...bareBase } = input.base
        const bareSpec = parseSweepSpec(JSON.stringify({ ...input, base: bareBase }), 'spec.json')
        const bare = (await expandTrials(bareSpec))[0] as Trial
        const failed = await runTrial(join(dir, 'bare'), bare, { sweep: 'text' })
        expect(failed.status).toBe('failed')
        expect(failed.error?.message).toMatch(
          /text task ruler-niah needs the model's tokenizer .*\(looked for tokenizer\.bin .*set the trial's tokenizer/,
        )
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    },
    120_000,
  )
})

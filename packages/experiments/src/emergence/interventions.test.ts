// The interventions of Baherwani et al. (arXiv 2606.25010) in the emergence experiment: the
// attention bias toward the task's ground-truth map, and pre-pretraining (initFrom).
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ConfigError } from '@attnlab/core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { LinearMapTask } from '@attnlab/markov'
import {
  batchFromTokens,
  defaultEmergenceConfig,
  emergenceSummaryLines,
  resolveEmergenceConfig,
  resolveEmergenceRecord,
  resolveTrainingConfig,
  runEmergence,
  type EmergenceConfig,
} from '../index.ts'
import { emergenceDirectoryStore, emergenceRunCheckpoint, loadInitialWeights, writeEmergenceResult } from '../node.ts'
import { ExperimentInputError } from '../errors.ts'

const linear = defaultEmergenceConfig('linear-map')
// Linear map S = 4, s = 2 (8 tokens), one small gpt layer, a few steps.
const SMALL: EmergenceConfig = {
  ...linear,
  task: { kind: 'linear-map', stateSize: 4, onesPerRow: 2 },
  model: { nLayers: 1, dModel: 16, nHeads: 2 },
  training: { ...linear.training, steps: 2, batchSize: 16, validationSize: 32, analysisSize: 16, evalEvery: 2 },
}

/** Mean attention mass of the snapshot's heads on the ground-truth keys of the queries that have some. */
function trueMass(patterns: number[][][]): number {
  const task = new LinearMapTask({ stateSize: 4, onesPerRow: 2 })
  const { size, maps } = task.trueAttention()
  const weights = (maps[0] as { weights: Float32Array }).weights
  let sum = 0
  let rows = 0
  for (const head of patterns) {
    head.forEach((row, q) => {
      let mass = 0
      let any = false
      row.forEach((p, k) => {
        if (weights[q * size + k] === 1) {
          mass += p
          any = true
        }
      })
      if (any) {
        sum += mass
        rows++
      }
    })
  }
  return sum / rows
}

describeWithBackends('emergence with an attention bias', () => {
  it('biases every pass of the run (the snapshots see it), and the record keeps it for a resume', async () => {
    const biased: EmergenceConfig = {
      ...SMALL,
      training: { ...SMALL.training, attentionBias: { beta: 30, layers: null, heads: null } },
    }
    const plain = await runEmergence(SMALL)
    const result = await expectNoLeaks(() => runEmergence(biased))
    const at0 = (run: typeof result) => trueMass(run.seeds[0]?.snapshots[0]?.patterns as number[][][])
    // Two true keys per determined cell: e^30 puts all the attention there; unbiased it is spread out.
    expect(at0(result)).toBeGreaterThan(0.999)
    expect(at0(plain)).toBeLessThan(0.9)
    expect(result.record.training.attentionBias).toEqual({ beta: 30, layers: null, heads: null })
    expect(plain.record.training.attentionBias).toBeNull()
    const again = resolveEmergenceRecord(JSON.parse(JSON.stringify(result.record)))
    expect(again.record.training.attentionBias).toEqual({ beta: 30, layers: null, heads: null })
    expect(result.seeds[0]?.lines.at(-1)?.validationLoss).not.toBe(plain.seeds[0]?.lines.at(-1)?.validationLoss)
    expect(emergenceSummaryLines(result)).toContain(
      'attention bias: 30 nats toward the ground-truth map (every block, every head), in every pass',
    )
    expect(emergenceSummaryLines(plain).some((line) => line.startsWith('attention bias'))).toBe(false)
  })
})

describe('emergence attention-bias settings', () => {
  it('is refused before any work for a task without a ground-truth map, and for heads the model lacks', () => {
    const refuse = (config: EmergenceConfig, parameter: string, pattern: RegExp): void => {
      let error: unknown
      try {
        resolveEmergenceConfig(config)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).parameter).toBe(parameter)
      expect((error as Error).message).toMatch(pattern)
    }
    const icl = defaultEmergenceConfig('icl-markov')
    refuse(
      { ...icl, training: { ...icl.training, attentionBias: { beta: 1, layers: null, heads: null } } },
      'training.attentionBias',
      /'icl-markov' has no ground-truth attention map/,
    )
    refuse(
      { ...SMALL, training: { ...SMALL.training, attentionBias: { beta: 1, layers: null, heads: [2] } } },
      'attentionBias.heads',
      /2 is not a head of this model/,
    )
    refuse(
      { ...SMALL, training: { ...SMALL.training, attentionBias: { beta: -2, layers: null, heads: null } } },
      'training.attentionBias.beta',
      /-2/,
    )
  })
})

describe('emergence with initFrom (pre-pretraining)', () => {
  let root = ''
  afterAll(async () => {
    if (root !== '') await rm(root, { recursive: true, force: true })
  })
  const runInto = async (dir: string, config: EmergenceConfig) => {
    const result = await runEmergence(config, { store: emergenceDirectoryStore(dir, { prepare: async () => {} }) })
    await writeEmergenceResult(dir, result)
    return result
  }

  it('starts from the source run (the same loss at step 0); another vocabulary keeps a fresh embedding', async () => {
    root = await mkdtemp(join(tmpdir(), 'attnlab-init-from-'))
    for (const name of ['source', 'same', 'bos']) await mkdir(join(root, name))
    const source = await runInto(join(root, 'source'), SMALL)
    const same = await runInto(join(root, 'same'), {
      ...SMALL,
      training: { ...SMALL.training, initFrom: join(root, 'source') },
    })
    const checkpoint = join(root, 'source', 'seeds', '0', 'checkpoint')
    expect(same.record.transfer?.source).toBe(checkpoint)
    // The run directory's model, for a model loader: its first seed's checkpoint (a checkpoint itself is not a run).
    expect(await emergenceRunCheckpoint(join(root, 'source'))).toBe(checkpoint)
    expect(await emergenceRunCheckpoint(checkpoint)).toBeNull()
    expect(await emergenceRunCheckpoint(join(checkpoint, 'model.safetensors'))).toBeNull()
    expect(same.record.transfer?.reinitialized).toEqual([])
    // Step 0 of the new run is the source's last model, on the same validation set (same seed).
    expect(same.seeds[0]?.lines[0]?.validationLoss).toBe(source.seeds[0]?.lines.at(-1)?.validationLoss)
    const record = JSON.parse(await readFile(join(root, 'same', 'config.json'), 'utf8'))
    expect(record.training.initFrom).toBe(join(root, 'source'))
    expect(record.transfer.copied).toEqual(same.record.transfer?.copied)
    const summary = JSON.parse(await readFile(join(root, 'same', 'summary.json'), 'utf8'))
    expect(summary.transfer.source).toBe(checkpoint)
    // With a BOS token: vocabulary 3 and one more position.
    const bos = await runInto(join(root, 'bos'), {
      ...SMALL,
      task: { kind: 'linear-map', stateSize: 4, onesPerRow: 2, bos: true },
      training: { ...SMALL.training, initFrom: join(checkpoint, 'model.safetensors') },
    })
    const reinitialized = bos.record.transfer?.reinitialized.map((r) => r.name)
    expect(reinitialized).toEqual(['embed.W_E', 'pos_embed.W_pos'])
    expect(emergenceSummaryLines(bos)).toContainEqual(
      expect.stringMatching(
        /^started from .*checkpoint: \d+ parameters copied, 2 initialised fresh \(embed.W_E, pos_embed.W_pos\)$/,
      ),
    )
    expect(bos.record.transfer?.copied.every((name) => name.startsWith('blocks.') || name.startsWith('ln_final'))).toBe(
      true,
    )
  })

  it('refuses a missing or invalid source before writing anything, and a store that reads no files', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'attnlab-init-from-bad-'))
    try {
      await expect(loadInitialWeights(join(dir, 'nothing'))).rejects.toThrow(/does not exist/)
      await expect(loadInitialWeights(dir)).rejects.toThrow(ExperimentInputError)
      await expect(loadInitialWeights(dir)).rejects.toThrow(/neither a checkpoint .* nor an emergence run directory/)
      expect(await emergenceRunCheckpoint(dir)).toBeNull()
      const run = join(dir, 'run')
      await mkdir(run)
      await writeFile(join(run, 'config.json'), JSON.stringify({ format: 'attnlab-emergence/1', seeds: [0, 1] }))
      await expect(emergenceRunCheckpoint(run)).rejects.toMatchObject({
        name: 'ExperimentInputError',
        parameter: 'model',
        message: expect.stringMatching(/^the emergence run .*run has no checkpoint yet \(seeds 0, 1: /),
      })
      await expect(loadInitialWeights(run)).rejects.toMatchObject({ parameter: 'initFrom' })
      const out = join(dir, 'out')
      const config = { ...SMALL, training: { ...SMALL.training, initFrom: join(dir, 'nothing') } }
      const store = emergenceDirectoryStore(out, {
        prepare: async () => {
          throw new Error('the store must not be prepared')
        },
      })
      await expect(runEmergence(config, { store })).rejects.toThrow(/does not exist/)
      expect(existsSync(out)).toBe(false)
      await expect(runEmergence(config)).rejects.toThrow(/this run's store reads no files/)
      expect(() =>
        resolveEmergenceConfig({ ...SMALL, training: { ...SMALL.training, initFrom: '' as string } }),
      ).toThrow(/training.initFrom/)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('batchTokens: tokens per step fixed across context sizes', () => {
  it('derives the batch from the sequence length, in emergence and training runs', () => {
    // Linear map S = 4 (8 tokens) and S = 8 (16 tokens): 128 tokens are 16 and 8 sequences.
    for (const [stateSize, batch] of [
      [4, 16],
      [8, 8],
    ] as const) {
      const config = { ...SMALL, task: { kind: 'linear-map', stateSize, onesPerRow: 2 } as const }
      const resolved = resolveEmergenceConfig({ ...config, training: { ...config.training, batchTokens: 128 } })
      expect(resolved.record.training.batchSize).toBe(batch)
      expect(resolved.record.training.batchTokens).toBe(128)
      expect(resolveEmergenceRecord(JSON.parse(JSON.stringify(resolved.record))).record.training.batchSize).toBe(batch)
      const run = resolveTrainingConfig({ task: config.task, preset: 'gpt', batchTokens: 128 })
      expect(run.settings.batch).toBe(batch)
    }
    expect(batchFromTokens(96, 32)).toBe(3)
  })

  it('refuses a budget the sequence length does not divide, or below one sequence', () => {
    const refuse = (batchTokens: number, pattern: RegExp): void => {
      let error: unknown
      try {
        resolveEmergenceConfig({ ...SMALL, training: { ...SMALL.training, batchTokens } })
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).parameter).toBe('training.batchTokens')
      expect((error as Error).message).toMatch(pattern)
    }
    refuse(100, /100 is not a multiple of the sequence length 8 \(12 sequences would be 96 tokens\)/)
    refuse(4, /4 tokens give less than one sequence of 8 tokens/)
    expect(() => resolveTrainingConfig({ task: SMALL.task, preset: 'gpt', batchTokens: 12 })).toThrow(/batchTokens/)
  })
})

// The run directory of @attnlab/experiments/node: a run into a directory, resumed exactly, and
// the typed errors of reading one that is not a run.
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { useBackend } from '@attnlab/core'
import { defaultEmergenceConfig, resolveEmergenceRecord, runEmergence, type EmergenceConfig } from '../index.ts'
import { ExperimentInputError } from '../errors.ts'
import {
  checkResumable,
  emergenceDirectoryStore,
  readEmergenceRecord,
  readMetricLines,
  writeEmergenceResult,
} from '../node.ts'

const TINY: EmergenceConfig = {
  task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 },
  preset: 'minimal',
  model: {},
  training: {
    ...defaultEmergenceConfig().training,
    steps: 6,
    batchSize: 16,
    validationSize: 32,
    analysisSize: 16,
    evalEvery: 3,
  },
  seeds: [0],
}

let root = ''
beforeAll(async () => {
  await useBackend('cpu')
  root = await mkdtemp(join(tmpdir(), 'attnlab-experiments-'))
})
afterAll(async () => {
  await rm(root, { recursive: true, force: true })
})

describe('emergence run directory', () => {
  it('writes the run directory; a resumed run continues exactly (cpu)', async () => {
    const full = join(root, 'full')
    const fullStore = emergenceDirectoryStore(full, { prepare: async () => void (await mkdir(full)) })
    const summary = await writeEmergenceResult(full, await runEmergence(TINY, { store: fullStore }))
    expect((await readdir(full)).sort()).toEqual([
      'config.json',
      'metrics.jsonl',
      'report.html',
      'seeds',
      'summary.json',
    ])
    expect(JSON.parse(await readFile(join(full, 'summary.json'), 'utf8'))).toEqual(summary)
    expect(summary.reportPath).toBe(join(full, 'report.html'))

    const part = join(root, 'part')
    const partStore = emergenceDirectoryStore(part, { prepare: async () => void (await mkdir(part)) })
    await runEmergence({ ...TINY, training: { ...TINY.training, steps: 3 } }, { store: partStore })
    const record = resolveEmergenceRecord(await readEmergenceRecord(part), { steps: 6 })
    await checkResumable(part, record.record)
    await runEmergence(record, { store: emergenceDirectoryStore(part), resume: true })
    const a = await readMetricLines(full)
    const b = await readMetricLines(part)
    expect(b.map((l) => l.step)).toEqual([0, 3, 6])
    expect(b.map((l) => l.validationLoss)).toEqual(a.map((l) => l.validationLoss))
    await expect(
      checkResumable(part, { ...record.record, training: { ...record.record.training, steps: 2 } }),
    ).rejects.toThrow("steps 2 is below the step 6 of seed 0's checkpoint")
  })

  it('stopped between two evaluations and resumed: every metrics line of the uninterrupted run (cpu)', async () => {
    // Evaluations at 3 and 6; a stop after step 1, 4 or 5 checkpoints there, with the training losses since step
    // 0 or 3 in the trainer state: the next evaluation's trainLoss covers both sessions' steps.
    const full = join(root, 'between-full')
    await runEmergence(TINY, { store: emergenceDirectoryStore(full, { prepare: () => mkdir(full).then(() => {}) }) })
    const lines = async (dir: string) =>
      (await readMetricLines(dir)).map((l) => [l.seed, l.step, l.trainLoss, l.validationLoss, l.tokens])
    const expected = await lines(full)
    expect(expected.map((l) => l[1])).toEqual([0, 3, 6])
    for (const stopAt of [1, 4, 5]) {
      const part = join(root, `between-${stopAt}`)
      const controller = new AbortController()
      const stopped = await runEmergence(TINY, {
        store: emergenceDirectoryStore(part, { prepare: () => mkdir(part).then(() => {}) }),
        signal: controller.signal,
        onProgress: (e) => {
          if (e.kind === 'step' && e.record.step === stopAt) controller.abort()
        },
      })
      expect(stopped.summary.seeds[0]?.completedSteps).toBe(stopAt)
      const record = resolveEmergenceRecord(await readEmergenceRecord(part), {})
      await runEmergence(record, { store: emergenceDirectoryStore(part), resume: true })
      expect(await lines(part), `stopped after step ${stopAt}`).toEqual(expected)
    }
  })

  it('refuses a directory that holds no emergence run', async () => {
    await expect(readEmergenceRecord(join(root, 'nothing'))).rejects.toThrow(ExperimentInputError)
    await expect(readEmergenceRecord(join(root, 'nothing'))).rejects.toThrow(/no config.json there/)
    expect(() => resolveEmergenceRecord({ format: 'other/1' } as never)).toThrow(/expected an attnlab emergence run/)
    // A file, a train checkpoint, a config.json of another kind: each named for what it is.
    const file = join(root, 'a-file')
    await writeFile(file, 'x')
    await expect(readEmergenceRecord(file)).rejects.toThrow(/a-file is a file, not an emergence run directory/)
    const train = join(root, 'train-checkpoint')
    await mkdir(train, { recursive: true })
    await writeFile(join(train, 'config.json'), '{"architecture":"minimal"}')
    await writeFile(join(train, 'manifest.json'), '{"format":"attnlab-checkpoint/1"}')
    await expect(readEmergenceRecord(train)).rejects.toThrow(
      /is an attnlab train checkpoint \(attnlab-checkpoint\/1\), not an emergence run; resume it with attnlab train/,
    )
    const other = join(root, 'other-config')
    await mkdir(other, { recursive: true })
    await writeFile(join(other, 'config.json'), '{"format":"other/2"}')
    await expect(readEmergenceRecord(other)).rejects.toThrow(
      /config.json is not an emergence run's \(format "other\/2"; expected attnlab-emergence\/1\)/,
    )
    await writeFile(join(other, 'config.json'), '[]')
    await expect(readEmergenceRecord(other)).rejects.toThrow(/it has no format field/)
  })
})

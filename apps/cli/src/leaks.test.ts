// Tensor leaks of every public flow as a user runs it: each command runs in-process twice on cpu and
// tf.memory().numTensors is the same before and after each run (a command that keeps tensors alive
// between runs, or loses track of one on any path, fails here). Tiny settings: a few seconds in all.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Rng, serializeSafetensors, useBackend } from '@attnlab/core'
import { expandTrials, parseSweepSpec, type Trial } from '@attnlab/sweeps'
import { initSweep, runTrial, trialDirectory } from '@attnlab/sweeps/node'
import * as tf from '@tensorflow/tfjs-core'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { runCli, TINY_RUN_FLAGS, useTempDir } from './cli.test-utils.ts'

const AIDREAMS = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../shared/models/aidreams260K/model.bin')
const HAVE_MODEL = existsSync(AIDREAMS)
if (!HAVE_MODEL) console.warn(`[attnlab] ${AIDREAMS} is absent: the leak checks of model commands are skipped`)

const dir = useTempDir('attnlab-leaks-')
const audited: string[] = []
beforeAll(async () => {
  await useBackend('cpu')
  const rng = Rng.fromSeed(3)
  const f32 = (name: string, shape: number[]) => ({
    dtype: 'F32' as const,
    shape,
    data: rng.split(name).fillNormal(new Float32Array(shape.reduce((a, b) => a * b, 1))),
  })
  const prefill = { q: f32('q', [4, 24, 8]), k: f32('k', [2, 24, 8]), v: f32('v', [2, 24, 8]) }
  writeFileSync(join(dir(), 'prefill.safetensors'), serializeSafetensors(prefill))
  const decode = { ...prefill, q_new: f32('qn', [4, 8]), k_new: f32('kn', [2, 8]), v_new: f32('vn', [2, 8]) }
  writeFileSync(join(dir(), 'decode.safetensors'), serializeSafetensors(decode))
  writeFileSync(join(dir(), 'prompt.txt'), 'Once upon a time there was a little cat who liked to play in the sun.')
})
afterEach(() => {
  vi.restoreAllMocks()
})
afterAll(() => console.info(`leak audit: ${audited.length} flows flat (${audited.join('; ')})`))

/** Runs `argv` (`runs` times, fresh --out each time) and checks the live tensor count is flat around each run. */
async function expectFlat(name: string, argv: (run: number) => string[], runs = 2): Promise<void> {
  for (let run = 0; run < runs; run++) {
    const before = tf.memory().numTensors
    const { code, stderr } = await runCli(argv(run))
    expect(code, `${name}: ${stderr}`).toBe(0)
    expect(tf.memory().numTensors - before, `${name}: tensors left by run ${run}`).toBe(0)
  }
  audited.push(name)
}

const out = (name: string, run: number): string => join(dir(), `${name}-${run}`)

describe('every public flow keeps tf.memory().numTensors flat (cpu)', () => {
  it('train, then train --resume', async () => {
    const flags = [...TINY_RUN_FLAGS, '--eval-every', '2', '--checkpoint-every', '2']
    await expectFlat('train', (run) => ['train', ...flags, '--steps', '3', '--out', out('train', run)])
    await expectFlat('train --resume', (run) => ['train', '--resume', out('train', run), '--steps', '5'])
  })

  it('emergence (with the ODE fit and report), then emergence --resume', async () => {
    const flags = [...TINY_RUN_FLAGS, '--analysis-size', '8', '--eval-every', '1']
    await expectFlat('emergence', (run) => ['emergence', ...flags, '--steps', '3', '--out', out('emergence', run)])
    await expectFlat('emergence --resume', (run) => ['emergence', '--resume', out('emergence', run), '--steps', '5'])
  })

  it('sparse apply: prefill and decode with every method', async () => {
    for (const method of ['dense', 'vertical-slash', 'flexprefill', 'block-sparse']) {
      await expectFlat(`sparse apply ${method}`, (run) => [
        'sparse',
        'apply',
        '--method',
        method,
        '--qkv',
        join(dir(), 'prefill.safetensors'),
        '--out',
        join(dir(), `apply-${method}-${run}.safetensors`),
        '--backend',
        'cpu',
      ])
    }
    for (const method of ['dense', 'quest', 'snapkv', 'ada-snapkv']) {
      await expectFlat(`sparse apply ${method} decode`, (run) => [
        'sparse',
        'apply',
        '--method',
        method,
        '--phase',
        'decode',
        '--qkv',
        join(dir(), 'decode.safetensors'),
        '--out',
        join(dir(), `decode-${method}-${run}.safetensors`),
        ...(method === 'quest' ? ['--page-size', '4', '--token-budget', '8'] : []),
        '--backend',
        'cpu',
      ])
    }
  })

  it('in-process sweep trials: runTrial (train, emergence; done, stopped, resumed, failed), run-trial', async () => {
    const task = '  task: { kind: sparse-markov, vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 }'
    const specs = {
      train: ['name: leaks-train', 'experiment: train', 'base:', task, '  steps: 4', '  batchSize: 8']
        .concat(['  validationSize: 16', '  evalEvery: 2', '  checkpointEvery: 1', 'grid:', '  lr: [0.05, 0.1]'])
        .join('\n'),
      emergence: ['name: leaks-emergence', 'experiment: emergence', 'base:', task]
        .concat('  training: { steps: 4, batchSize: 8, validationSize: 16, analysisSize: 8, evalEvery: 1 }')
        .concat(['grid:', '  training.lr: [0.05, 0.1]'])
        .join('\n'),
    }
    /** Runs one trial in this process and checks the live tensor count is flat around it. */
    const flat = async (name: string, sweepDir: string, trial: Trial, options: Parameters<typeof runTrial>[2] = {}) => {
      const before = tf.memory().numTensors
      const record = await runTrial(sweepDir, trial, options)
      expect(tf.memory().numTensors - before, `${name}: tensors left by trial ${trial.index}`).toBe(0)
      return record
    }
    for (const [experiment, text] of Object.entries(specs)) {
      const trials = await expandTrials(parseSweepSpec(text, `${experiment}.yaml`))
      const sweepDir = join(dir(), `sweep-${experiment}`)
      for (const trial of trials) {
        expect((await flat(`runTrial ${experiment}`, sweepDir, trial)).status).toBe('done')
      }
      audited.push(`runTrial ${experiment} x${trials.length}`)
      // Stopped after its second step, then continued from its state.
      const stoppedDir = join(dir(), `sweep-${experiment}-stopped`)
      const controller = new AbortController()
      const trial = trials[0] as Trial
      const stopped = await flat(`runTrial ${experiment} stopped`, stoppedDir, trial, {
        signal: controller.signal,
        onProgress: (event) => {
          if (event.kind === 'step' && event.step === 2) controller.abort()
        },
      })
      expect(stopped.status).toBe('interrupted')
      expect((await flat(`runTrial ${experiment} resumed`, stoppedDir, trial)).status).toBe('done')
      audited.push(`runTrial ${experiment} stopped and resumed`)
      // A run directory taken by a file: the trial fails.
      const failedDir = join(dir(), `sweep-${experiment}-failed`)
      mkdirSync(join(failedDir, 'trials'), { recursive: true })
      writeFileSync(trialDirectory(failedDir, trial.id), 'in the way')
      expect((await flat(`runTrial ${experiment} failed`, failedDir, trial)).status).toBe('failed')
      audited.push(`runTrial ${experiment} failed`)
    }
    // `attnlab sweep run-trial DIR --index I`, what each SLURM array task runs, on every trial of a sweep.
    const spec = parseSweepSpec(specs.emergence, 'emergence.yaml')
    const sweepDir = join(dir(), 'sweep-run-trial')
    await initSweep(spec, { out: sweepDir, backend: 'cpu' })
    await expectFlat('sweep run-trial', (run) => ['sweep', 'run-trial', sweepDir, '--index', String(run)])
  })

  it('knockout patch between two checkpoints', async () => {
    const planted = resolve(dirname(fileURLToPath(import.meta.url)), '../../../packages/knockout/src/__fixtures__')
    await expectFlat('knockout patch', () => [
      'knockout',
      'patch',
      '--from',
      join(planted, 'planted-minimal'),
      '--into',
      join(planted, 'planted-minimal'),
      '--count',
      '8',
      '--backend',
      'cpu',
    ])
  })

  it.skipIf(!HAVE_MODEL)('generate with the KV cache (dense and sparse attention)', async () => {
    const base = [
      'generate',
      '--model',
      AIDREAMS,
      '--prompt-ids',
      '1,403,407,261',
      '--max-tokens',
      '4',
      '--backend',
      'cpu',
    ]
    await expectFlat('generate (KV cache)', () => [...base, '--seed', '1'])
    await expectFlat('generate --attention snapkv (KV cache)', () => [...base, '--attention', 'snapkv'])
  })

  it.skipIf(!HAVE_MODEL)('sparse compare on a real model', async () => {
    await expectFlat('sparse compare', () => [
      'sparse',
      'compare',
      '--model',
      AIDREAMS,
      '--prompt-file',
      join(dir(), 'prompt.txt'),
      '--methods',
      'block-sparse,snapkv',
      '--sparsity',
      '0.5',
      '--decode-steps',
      '2',
      '--backend',
      'cpu',
    ])
  })

  it.skipIf(!HAVE_MODEL)('knockout capabilities, locate and ablate', async () => {
    const base = ['--model', AIDREAMS, '--count', '2', '--backend', 'cpu']
    // Once each: these evaluate the real model many times (tens of seconds on a loaded machine).
    await expectFlat('knockout capabilities', () => ['knockout', 'capabilities', ...base], 1)
    await expectFlat(
      'knockout locate',
      () => [
        'knockout',
        'locate',
        ...base,
        '--capability',
        'pronoun',
        '--method',
        'cs',
        '--masks',
        '6',
        '--controls',
        'none',
      ],
      1,
    )
    await expectFlat(
      'knockout ablate',
      () => ['knockout', 'ablate', ...base, '--heads', 'L0H0,L1H2', '--target', 'pronoun', '--capabilities', 'pronoun'],
      1,
    )
  })
})

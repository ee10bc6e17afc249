// Crash consistency: `attnlab train` and `attnlab emergence` (a checkpoint written at every step or
// evaluation) are SIGKILLed at seeded random moments, at least 20 times each; every time, what is on
// disk is either a complete checkpoint or something a load refuses by name (never a half-written file
// read as valid), and `--resume` continues to exactly the numbers of an uninterrupted run of the same
// seed on cpu (the same weights, optimizer state, validation and training losses, bit for bit: a train run is
// mostly killed between two evaluations, whose training loss covers steps of both sessions).
//
// The children run the repository's launcher (`./attnlab`, which execs node on the sources); the
// resumes and the reference runs run in-process. ATTNLAB_KILL_TRIALS changes the number of kills per
// writer (default 20).
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Rng } from '@attnlab/core'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { runCli, TINY_RUN_FLAGS, useTempDir } from './cli.test-utils.ts'

const TRIALS = Number(process.env.ATTNLAB_KILL_TRIALS ?? '20')
const here = dirname(fileURLToPath(import.meta.url))
/** The repository's launcher: `exec node ... bin.ts`, so the pid signalled is the CLI's own. */
const launcher = resolve(here, '../../../attnlab')
const dir = useTempDir('attnlab-kill-')
const rng = Rng.fromSeed(20261201)
const report: string[] = []

afterEach(() => {
  vi.restoreAllMocks()
})
afterAll(() => {
  console.info(`kill suite: ${report.join('; ')}`)
})

interface Kill {
  /** The child exited before the kill (the run finished). */
  readonly finished: boolean
  /** Temporaries of an interrupted atomic write were left beside the output. */
  readonly midWrite: boolean
  /** Milliseconds from `ready` appearing to the kill, or to the exit when the run finished first. */
}

/**
 * Starts the CLI, waits for `ready` (a file to exist, or a predicate to hold), then SIGKILLs it after `delay` ms
 * (unless it exits before).
 */
async function killDuring(argv: string[], ready: string | (() => boolean), delay: number, out: string): Promise<Kill> {
  const isReady = typeof ready === 'string' ? () => existsSync(ready) : ready
  const child = spawn(launcher, argv, { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)))
  let finished = false
  void exited.then(() => {
    finished = true
  })
  const started = Date.now()
  while (!isReady() && !finished) {
    if (Date.now() - started > 300_000) throw new Error(`${String(ready)} never held: ${stderr}`)
    await new Promise((wait) => setTimeout(wait, 2))
  }
  if (finished) throw new Error(`the child exited before ${String(ready)} held: ${stderr}`)
  await Promise.race([new Promise((wait) => setTimeout(wait, delay)), exited])
  const finishedFirst = finished
  if (!finishedFirst) child.kill('SIGKILL')
  await exited
  const siblings = readdirSync(dirname(out)).filter((name) => name.startsWith(`.${basename(out)}.tmp-`))
  const inside = existsSync(out) ? readdirSync(out, { recursive: true }).map(String) : []
  const midWrite = siblings.length > 0 || inside.some((name) => /\.tmp-|\.\d+$/.test(basename(name)))
  return { finished: finishedFirst, midWrite }
}

const read = (path: string): Buffer => readFileSync(path)

/** The step a train checkpoint's trainer.json records, or -1 when there is none yet. */
function lastStep(path: string): number {
  try {
    return JSON.parse(read(path).toString('utf8')).step
  } catch {
    return -1
  }
}

describe('SIGKILL at random moments, then --resume: the same numbers as an uninterrupted run (cpu)', () => {
  it(`attnlab train: ${TRIALS} kills (checkpoint every step)`, async () => {
    const flags = ['--kernels', 'js', 'train', ...TINY_RUN_FLAGS, '--steps', '12', '--eval-every', '4']
    const run = [...flags, '--checkpoint-every', '1']
    const reference = join(dir(), 'train-reference')
    const uninterrupted = await runCli([...run, '--out', reference, '--json'])
    expect(uninterrupted.code).toBe(0)
    // The training losses: every evaluation's (mean since the previous evaluation, most resumes start between
    // two) and the final one (the last 10 steps), as `--json` prints them.
    const trainLosses = (stdout: string) => {
      const { evaluations, finalTrainLoss } = JSON.parse(stdout)
      return { evaluations, finalTrainLoss }
    }
    // The kill moments: wait for the checkpoint of a seeded random step k in 1..10 (trainer.json's step), then
    // kill within the next two steps' time, measured here from a run's step-1 to step-12 checkpoints. A moment
    // drawn over the whole run (fixed, or calibrated from the first checkpoint to the exit) fell after the last
    // checkpoint or the exit in most trials whenever a run was faster or slower than the calibration (CI failed
    // with 60 trials for fewer than 20 kills); a step-anchored moment lands inside the steps at any speed.
    const calibration = join(dir(), 'train-calibration')
    let firstAt = 0
    let lastAt = 0
    await killDuring(
      [...run, '--out', calibration],
      () => {
        const step = lastStep(join(calibration, 'trainer.json'))
        if (step >= 1 && firstAt === 0) firstAt = Date.now()
        if (step === 12) lastAt = Date.now()
        return step === 12
      },
      0,
      calibration,
    )
    expect(lastAt, 'the calibration run reached its step-12 checkpoint').toBeGreaterThan(0)
    const stepMs = Math.max(5, (lastAt - firstAt) / 11)
    rmSync(calibration, { recursive: true, force: true })
    let kills = 0
    let midWrite = 0
    for (let trial = 0; kills < TRIALS; trial++) {
      expect(trial, 'too many runs finished before their kill').toBeLessThan(3 * TRIALS)
      const out = join(dir(), `train-${trial}`)
      const step = 1 + rng.int(10)
      const delay = rng.int(Math.ceil(2 * stepMs))
      const reached = () => lastStep(join(out, 'trainer.json')) >= step
      const kill = await killDuring([...run, '--out', out], reached, delay, out)
      // Killed after its last checkpoint but before it exited: nothing is left to resume.
      if (kill.finished || lastStep(join(out, 'trainer.json')) === 12) continue
      kills++
      if (kill.midWrite) midWrite++
      const resumed = await runCli(['--kernels', 'js', 'train', '--resume', out, '--json'])
      expect(resumed.code, `trial ${trial}: ${resumed.stderr}`).toBe(0)
      expect(trainLosses(resumed.stdout), `trial ${trial}: training losses`).toEqual(trainLosses(uninterrupted.stdout))
      for (const file of ['model.safetensors', 'optimizer.safetensors']) {
        expect(read(join(out, file)).equals(read(join(reference, file))), `trial ${trial}: ${file}`).toBe(true)
      }
      const trainer = (path: string) => JSON.parse(read(join(path, 'trainer.json')).toString('utf8'))
      const [a, b] = [trainer(out), trainer(reference)]
      expect([a.step, a.lastValidationLoss, a.tokens]).toEqual([b.step, b.lastValidationLoss, b.tokens])
      expect([a.extra.evaluations, a.sinceEval, a.recentLosses], `trial ${trial}: trainer.json losses`).toEqual([
        b.extra.evaluations,
        b.sinceEval,
        b.recentLosses,
      ])
      rmSync(out, { recursive: true, force: true })
    }
    report.push(
      `train ${kills} kills survived (${midWrite} inside a checkpoint write; ` +
        `kills within 2 steps of ${Math.round(stepMs)} ms after a random step's checkpoint)`,
    )
  }, 900_000)

  it(`attnlab emergence: ${TRIALS} kills (checkpoint at every evaluation)`, async () => {
    const flags = [...TINY_RUN_FLAGS, '--analysis-size', '8', '--steps', '10', '--eval-every', '1']
    const reference = join(dir(), 'emergence-reference')
    expect((await runCli(['--kernels', 'js', 'emergence', ...flags, '--out', reference])).code).toBe(0)
    const metrics = (path: string) =>
      read(join(path, 'metrics.jsonl'))
        .toString('utf8')
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => {
          const { step, validationLoss, trainLoss, seed } = JSON.parse(line)
          return [seed, step, validationLoss, trainLoss]
        })
    const summary = (path: string) => {
      const { emergenceSteps, stageSteps } = JSON.parse(read(join(path, 'summary.json')).toString('utf8'))
      return { emergenceSteps, stageSteps }
    }
    let kills = 0
    let midWrite = 0
    for (let trial = 0; kills < TRIALS; trial++) {
      expect(trial, 'too many runs finished before their kill').toBeLessThan(3 * TRIALS)
      const out = join(dir(), `emergence-${trial}`)
      const ready = join(out, 'seeds', '0', 'checkpoint', 'manifest.json')
      const argv = ['--kernels', 'js', 'emergence', ...flags, '--out', out]
      const kill = await killDuring(argv, ready, rng.int(1000), out)
      if (kill.finished) continue
      kills++
      if (kill.midWrite) midWrite++
      const resumed = await runCli(['--kernels', 'js', 'emergence', '--resume', out])
      expect(resumed.code, `trial ${trial}: ${resumed.stderr}`).toBe(0)
      expect(metrics(out), `trial ${trial}: metrics.jsonl`).toEqual(metrics(reference))
      expect(summary(out), `trial ${trial}: summary.json`).toEqual(summary(reference))
      const checkpoint = join('seeds', '0', 'checkpoint', 'model.safetensors')
      expect(read(join(out, checkpoint)).equals(read(join(reference, checkpoint))), `trial ${trial}`).toBe(true)
      rmSync(out, { recursive: true, force: true })
    }
    report.push(`emergence ${kills} kills survived (${midWrite} inside a write)`)
  }, 900_000)
})

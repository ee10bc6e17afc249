// Crash consistency of sweeps: `attnlab sweep run --resume` on a train sweep and an emergence sweep (4 tiny
// trials each, a checkpoint at every step or evaluation) is SIGKILLed at seeded random moments, and started
// again on the same directory, over and over; half the kills hit the runner alone (its workers are orphaned
// and must stop on their own), half the whole process group; a kill's random delay counts from the runner's
// start (one in four), from when it holds the directory's lock (one in four: the workers' start) or from a
// trial's first write in this run (two in four). After every kill, nothing on disk is read as a
// finished trial unless it is one: every record in trials.jsonl and every trials/<id>/record.json equals the
// uninterrupted run's record (timings aside), with a complete summary beside it. When a chain of kills has
// finished its sweep, every trial's record, summary and final checkpoint equal the uninterrupted run's on cpu
// (bit for bit), and trials.jsonl holds each trial exactly once.
//
// The killed runners are the repository's launcher (`./attnlab`, which execs node on the sources); the
// reference runs run in-process. The two sweeps' kill chains run at the same time. ATTNLAB_KILL_TRIALS sets
// the total number of kills (default 20, half per sweep).
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Rng } from '@attnlab/core'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { runCli, useTempDir } from './cli.test-utils.ts'

const TRIALS = Number(process.env.ATTNLAB_KILL_TRIALS ?? '20')
const here = dirname(fileURLToPath(import.meta.url))
const launcher = resolve(here, '../../../attnlab')
const dir = useTempDir('attnlab-sweep-kill-')
const report: string[] = []
/** Process groups of the killed runners, killed again at the end (orphaned workers that outlived the test). */
const groups = new Set<number>()

afterEach(() => {
  vi.restoreAllMocks()
})
afterAll(() => {
  for (const group of groups) {
    try {
      process.kill(-group, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  console.info(`sweep kill suite: ${report.join('; ')}`)
})

const TASK = '{ kind: sparse-markov, vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 }'
const SPECS = {
  train: [
    'name: kill-train',
    'experiment: train',
    'base:',
    `  task: ${TASK}`,
    '  steps: 3',
    '  batchSize: 8',
    '  validationSize: 16',
    // Evaluations at steps 2 and 3: a kill after the step-1 checkpoint resumes between two evaluations.
    '  evalEvery: 2',
    '  checkpointEvery: 1',
    'grid:',
    '  lr: [0.05, 0.1]',
    'seeds: 2',
  ],
  emergence: [
    'name: kill-emergence',
    'experiment: emergence',
    'base:',
    `  task: ${TASK}`,
    '  training: { steps: 3, batchSize: 8, validationSize: 16, analysisSize: 8, evalEvery: 1 }',
    'grid:',
    '  training.lr: [0.05, 0.1]',
    'seeds: 2',
  ],
} as const
type Experiment = keyof typeof SPECS

/** A record without what depends on timing or on when it ran. */
function timeless(record: Record<string, unknown>): Record<string, unknown> {
  const { startedAt: _s, finishedAt: _f, durationSeconds: _d, metrics, ...rest } = record
  const { tokensPerSecond: _t, trainingSeconds: _ts, ...numbers } = (metrics ?? {}) as Record<string, unknown>
  return { ...rest, metrics: numbers }
}

/** A summary.json without timings and paths (train: top level; emergence: per seed, with its run's paths). */
function timelessSummary(text: string): unknown {
  return JSON.parse(text, (key, value) =>
    [
      'tokensPerSecond',
      'trainingSeconds',
      'seconds',
      'wallSeconds',
      'finishedAt',
      'startedAt',
      'created',
      'out',
      'reportPath',
    ].includes(key)
      ? undefined
      : value,
  )
}

const readText = (path: string): string => readFileSync(path, 'utf8')

/** The files of a finished trial that must equal the uninterrupted run's, byte for byte. */
function finalFiles(experiment: Experiment, seed: number): string[] {
  const checkpoint = experiment === 'train' ? 'checkpoint' : `seeds/${seed}/checkpoint`
  return [`${checkpoint}/model.safetensors`, `${checkpoint}/optimizer.safetensors`]
}

/** The losses of an emergence trial's metrics.jsonl. */
function losses(path: string): unknown[] {
  return readText(path)
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const { seed, step, validationLoss, trainLoss } = JSON.parse(line)
      return [seed, step, validationLoss, trainLoss]
    })
}

interface Reference {
  readonly out: string
  /** Timeless records by trial id. */
  readonly records: Map<string, Record<string, unknown>>
}

/**
 * What a killed directory holds that a reader would take as finished, checked against the reference: every
 * complete line of trials.jsonl (only the last may be torn) and every trials/<id>/record.json is a done record
 * equal to the reference's, with its summary.json complete and equal. Returns whether a trial was mid-run.
 */
function checkOnDisk(out: string, reference: Reference, what: string): { midTrial: boolean } {
  const log = join(out, 'trials.jsonl')
  if (existsSync(log)) {
    const lines = readText(log).split('\n')
    const torn = lines.pop() as string // '' when the file ends with a newline
    for (const line of lines) {
      const record = JSON.parse(line) as Record<string, unknown>
      expect(timeless(record), `${what}: a line of trials.jsonl`).toEqual(reference.records.get(String(record.id)))
    }
    if (torn !== '') expect(() => JSON.parse(torn), `${what}: the torn last line`).toThrow()
  }
  let midTrial = false
  const trials = join(out, 'trials')
  for (const id of existsSync(trials) ? readdirSync(trials) : []) {
    if (id.startsWith('.')) continue
    const recordPath = join(trials, id, 'record.json')
    if (!existsSync(recordPath)) {
      midTrial = true
      continue
    }
    const record = JSON.parse(readText(recordPath)) as Record<string, unknown>
    expect(timeless(record), `${what}: trials/${id}/record.json`).toEqual(reference.records.get(id))
    expect(
      timelessSummary(readText(join(trials, id, 'summary.json'))),
      `${what}: trials/${id}/summary.json of a recorded trial`,
    ).toEqual(timelessSummary(readText(join(reference.out, 'trials', id, 'summary.json'))))
  }
  return { midTrial }
}

/** A finished sweep directory against the reference: records once each, summaries and final files equal. */
function checkFinished(out: string, reference: Reference, experiment: Experiment, what: string): void {
  const lines = readText(join(out, 'trials.jsonl'))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
  expect(lines.map((r) => r.id).sort(), `${what}: trials.jsonl holds each trial once`).toEqual(
    [...reference.records.keys()].sort(),
  )
  for (const record of lines) {
    const id = String(record.id)
    expect(timeless(record), `${what}: record of ${id}`).toEqual(reference.records.get(id))
    const [mine, theirs] = [join(out, 'trials', id), join(reference.out, 'trials', id)]
    expect(timelessSummary(readText(join(mine, 'summary.json'))), `${what}: ${id} summary.json`).toEqual(
      timelessSummary(readText(join(theirs, 'summary.json'))),
    )
    const files = readdirSync(mine, { recursive: true }).map(String).sort()
    for (const file of finalFiles(experiment, Number(record.seed))) {
      expect(
        existsSync(join(mine, file)),
        `${what}: ${id}/${file} is missing; the trial holds ${files.join(', ')}`,
      ).toBe(true)
      expect(readFileSync(join(mine, file)).equals(readFileSync(join(theirs, file))), `${what}: ${id}/${file}`).toBe(
        true,
      )
    }
    if (experiment === 'train') {
      const trainer = (path: string) => timelessSummary(readText(join(path, 'checkpoint', 'trainer.json')))
      expect(trainer(mine), `${what}: ${id} trainer.json`).toEqual(trainer(theirs))
    } else {
      expect(losses(join(mine, 'metrics.jsonl')), `${what}: ${id} metrics.jsonl`).toEqual(
        losses(join(theirs, 'metrics.jsonl')),
      )
    }
  }
}

/** Whether `out/sweep.lock` names process `pid`. */
function locksBy(out: string, pid: number): boolean {
  try {
    return JSON.parse(readText(join(out, 'sweep.lock'))).pid === pid
  } catch {
    return false
  }
}

/** Whether a file under `out/trials` was written after `since` (ms since the epoch): a trial of this run is at work. */
function trialWrittenSince(out: string, since: number): boolean {
  const trials = join(out, 'trials')
  if (!existsSync(trials)) return false
  try {
    return readdirSync(trials, { recursive: true }).some((name) => statSync(join(trials, String(name))).mtimeMs > since)
  } catch {
    return false // a file renamed away while we looked
  }
}

/** How long {@link killDuring} waits for the moment a kill is timed from (ms). */
const READY_TIMEOUT_MS = 300_000

/**
 * What a runner that never reached its moment left behind, for the failure message: the processes of its group
 * (state, age, command), its lock and the files of its directory with their ages.
 */
function diagnose(out: string, pid: number): string {
  const lines: string[] = []
  try {
    const table = execFileSync('ps', ['-eo', 'pid,ppid,pgid,stat,etimes,args'], { encoding: 'utf8' })
    lines.push(
      'processes of the group:',
      ...table.split('\n').filter((line) => line.trim().split(/\s+/)[2] === String(pid) || line.includes(out)),
    )
  } catch (error) {
    lines.push(`ps failed: ${(error as Error).message}`)
  }
  try {
    lines.push(`sweep.lock: ${readText(join(out, 'sweep.lock')).trim()}`)
  } catch {
    lines.push('sweep.lock: none')
  }
  if (existsSync(out)) {
    const now = Date.now()
    for (const name of readdirSync(out, { recursive: true }).map(String)) {
      try {
        lines.push(`${name} (${((now - statSync(join(out, name)).mtimeMs) / 1000).toFixed(1)} s old)`)
      } catch {
        lines.push(`${name} (gone)`)
      }
    }
  }
  return lines.join('\n')
}

/** When a kill's delay starts: at the runner's start, once it holds the lock, or once a trial writes. */
type KillFrom = 'start' | 'lock' | 'trial'

/**
 * Starts `attnlab sweep run SPEC --out OUT --resume` in its own process group, waits for the moment `from`
 * (its start: a kill during the CLI's own start or its first sweep.json write; the directory's lock: during the
 * workers' start; a trial's first write), then SIGKILLs it (alone or with its workers) after `delay` ms.
 * Returns the exit code when it finished first.
 */
async function killDuring(
  argv: string[],
  out: string,
  delay: number,
  options: { readonly group: boolean; readonly from: KillFrom },
): Promise<{ finished: boolean; code: number | null; stderr: string }> {
  const { group, from } = options
  const child = spawn(launcher, argv, { stdio: ['ignore', 'ignore', 'pipe'], detached: true })
  const pid = child.pid as number
  groups.add(pid)
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  let exitCode: number | null = null
  let finished = false
  const exited = new Promise<void>((done) =>
    child.on('exit', (code) => {
      exitCode = code
      finished = true
      done()
    }),
  )
  const started = Date.now()
  const ready = (): boolean =>
    from === 'start' || (from === 'lock' ? locksBy(out, pid) : trialWrittenSince(out, started))
  while (!ready() && !finished) {
    // Generous: a cold start of the runner and its workers under a loaded CI machine takes tens of seconds.
    if (Date.now() - started > READY_TIMEOUT_MS) {
      throw new Error(`the runner never reached '${from}' in ${out}: ${stderr}\n${diagnose(out, pid)}`)
    }
    await new Promise((wait) => setTimeout(wait, 5))
  }
  if (!finished) await new Promise((wait) => setTimeout(wait, delay))
  const finishedFirst = finished
  if (!finishedFirst) {
    if (group) process.kill(-pid, 'SIGKILL')
    else child.kill('SIGKILL')
  }
  await exited
  return { finished: finishedFirst, code: exitCode, stderr }
}

/** Runs `attnlab sweep run ...` as a process to its end. */
async function runToEnd(argv: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(launcher, argv, { stdio: ['ignore', 'ignore', 'pipe'], detached: true })
  groups.add(child.pid as number)
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const code = await new Promise<number | null>((done) => child.on('exit', (exitCode) => done(exitCode)))
  return { code, stderr }
}

/** The spec file of `experiment` and the sweep flags of every run. */
function sweepFlags(experiment: Experiment): string[] {
  const spec = join(dir(), `${experiment}.yaml`)
  if (!existsSync(spec)) writeFileSync(spec, `${SPECS[experiment].join('\n')}\n`)
  // Two workers for the train sweep (concurrent trials, two orphans), one for the emergence sweep (cheaper).
  const workers = experiment === 'train' ? '2' : '1'
  return ['--kernels', 'js', 'sweep', 'run', spec, '--backend', 'cpu', '--workers', workers]
}

/** The uninterrupted run of `experiment`'s sweep, in-process. */
async function referenceRun(experiment: Experiment): Promise<Reference> {
  const reference: Reference = { out: join(dir(), `${experiment}-reference`), records: new Map() }
  const ran = await runCli([...sweepFlags(experiment), '--out', reference.out])
  expect(ran.code, ran.stderr).toBe(0)
  for (const line of readText(join(reference.out, 'trials.jsonl')).split('\n')) {
    if (line !== '') reference.records.set(JSON.parse(line).id, timeless(JSON.parse(line)))
  }
  expect(reference.records.size).toBe(4)
  return reference
}

/** Kills `experiment`'s sweep `kills` times (a new directory each time one finishes), then finishes and checks it. */
async function killChain(experiment: Experiment, reference: Reference, kills: number, seed: number): Promise<string> {
  const rng = Rng.fromSeed(seed)
  const started = performance.now()
  const flags = sweepFlags(experiment)
  const counts = { kills: 0, group: 0, start: 0, lock: 0, trial: 0, midTrial: 0, midWrite: 0, chains: 0 }
  let chain = 0
  let out = join(dir(), `${experiment}-${chain}`)
  for (let attempt = 0; counts.kills < kills; attempt++) {
    expect(attempt, 'too many runs finished before their kill').toBeLessThan(4 * kills)
    const group = rng.int(2) === 1
    // A kill in four times its delay from the runner's start, one from its lock, two from a trial's first write.
    const from = (['start', 'lock', 'trial', 'trial'] as const)[rng.int(4)] as KillFrom
    const delay = rng.int(from === 'start' ? 6000 : from === 'lock' ? 3000 : 1500)
    const kill = await killDuring([...flags, '--out', out, '--resume'], out, delay, { group, from })
    const what = `${experiment} chain ${chain}, attempt ${attempt}`
    if (kill.finished) {
      expect(kill.code, `${what}: ${kill.stderr}`).toBe(0)
      checkFinished(out, reference, experiment, what)
      counts.chains++
      out = join(dir(), `${experiment}-${++chain}`)
      continue
    }
    counts.kills++
    if (group) counts.group++
    counts[from]++
    // After a kill of the runner alone its orphaned workers may still be writing: a temporary can vanish while the
    // tree is read (ENOENT), which is a write in progress too.
    let temporaries: string[] = []
    let vanished = false
    try {
      temporaries = existsSync(out) ? readdirSync(out, { recursive: true }).map(String) : []
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      vanished = true
    }
    if (vanished || temporaries.some((name) => /\.tmp-|\.\d+$/.test(basename(name)))) counts.midWrite++
    if (checkOnDisk(out, reference, what).midTrial) counts.midTrial++
  }
  // The last chain, resumed until it finishes.
  const resumed = await runToEnd([...flags, '--out', out, '--resume'])
  expect(resumed.code, resumed.stderr).toBe(0)
  checkFinished(out, reference, experiment, `${experiment} chain ${chain}, final resume`)
  counts.chains++
  return (
    `${experiment} ${counts.kills} kills survived (${counts.group} of the whole process group, ` +
    `${counts.kills - counts.group} of the runner alone; timed from its start / lock / a trial's first write: ` +
    `${counts.start} / ${counts.lock} / ${counts.trial}; ` +
    `${counts.midTrial} with a trial mid-run, ` +
    `${counts.midWrite} inside a write), ${counts.chains} sweeps finished, ` +
    `${((performance.now() - started) / 1000).toFixed(0)} s`
  )
}

describe('SIGKILL of attnlab sweep run at random moments, then --resume: the uninterrupted records (cpu)', () => {
  it(`train and emergence sweeps: ${TRIALS} kills in all`, async () => {
    const half = Math.ceil(TRIALS / 2)
    // The references one after the other (in-process runs share the console), the kill chains at once.
    const started = performance.now()
    const train = await referenceRun('train')
    const emergence = await referenceRun('emergence')
    report.push(
      ...(await Promise.all([
        killChain('train', train, half, 20261202),
        killChain('emergence', emergence, half, 20261203),
      ])),
      `${((performance.now() - started) / 1000).toFixed(0)} s in all`,
    )
  }, 1_500_000)
})

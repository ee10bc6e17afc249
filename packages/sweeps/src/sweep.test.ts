// runSweep in worker processes: 2 workers give a 1-worker run's numbers (cpu), a failing trial is
// recorded with its attempts while the sweep goes on, a SIGKILLed sweep resumes with every trial
// recorded once, a stopped sweep keeps its state and resumes.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SweepDirectoryError, expandTrials, type TrialRecord } from './index.ts'
import { readSweepFile, readTrials, runSweep, trialDirectory, type SweepProgress } from './node.ts'
import { TINY_TEXT, tinySpec } from './__fixtures__/tiny.ts'

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'attnlab-sweep-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** The metrics that do not depend on timing. */
function numbers(records: readonly TrialRecord[]): unknown[] {
  return records.map(({ id, status, metrics }) => {
    const { tokensPerSecond: _t, trainingSeconds: _s, ...rest } = metrics
    return { id, status, ...rest }
  })
}

/** The lines of trials.jsonl, parsed. */
function lines(out: string): TrialRecord[] {
  return readFileSync(join(out, 'trials.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as TrialRecord)
}

/** Runs the run-sweep fixture as its own process. */
function runSweepProcess(specPath: string, out: string, workers: number) {
  const tsx = createRequire(import.meta.url).resolve('tsx')
  const script = fileURLToPath(new URL('./__fixtures__/run-sweep.ts', import.meta.url))
  const child = spawn(
    process.execPath,
    ['--conditions=@attnlab/source', '--import', tsx, script, specPath, out, String(workers)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  )
  return { child, exited, output: () => ({ stdout, stderr }) }
}

// Generous: under `pnpm test` the workers start alongside the CLI's kill suites on 2 cores (a 20-step trial's
// worker took over 120 s to record its first trial in one CI run).
async function waitFor(condition: () => boolean, timeoutMs = 280_000): Promise<void> {
  const start = Date.now()
  while (!condition()) {
    if (Date.now() - start > timeoutMs) throw new Error('timed out waiting')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe('runSweep', () => {
  it('2 workers give the numbers of 1 worker (cpu), and a rerun refuses without resume', async () => {
    const spec = tinySpec()
    const events: SweepProgress[] = []
    const one = await runSweep(spec, { out: join(dir, 'one'), workers: 1, backend: 'cpu' })
    const two = await runSweep(spec, {
      out: join(dir, 'two'),
      workers: 2,
      backend: 'cpu',
      onProgress: (e) => events.push(e),
    })
    expect(one).toMatchObject({ done: 4, failed: 0, skipped: 0, stopped: false })
    expect(two).toMatchObject({ done: 4, failed: 0, skipped: 0, stopped: false })
    expect(numbers(two.records)).toEqual(numbers(one.records))
    expect(two.records.map((r) => r.index)).toEqual([0, 1, 2, 3])
    expect(
      new Set(events.filter((e) => e.kind === 'trial-start').map((e) => e.kind === 'trial-start' && e.worker)),
    ).toEqual(new Set([0, 1]))
    expect(events.some((e) => e.kind === 'trial-progress')).toBe(true)
    expect(lines(join(dir, 'two'))).toHaveLength(4)
    const file = await readSweepFile(join(dir, 'two'))
    expect(file.trials.map((t) => t.id)).toEqual((await expandTrials(spec)).map((t) => t.id))
    await expect(runSweep(spec, { out: join(dir, 'two'), backend: 'cpu' })).rejects.toThrow(
      /holds this sweep already \('tiny'\); continue it with resume/,
    )
    const other = tinySpec((t) => t.replace('seeds: 2', 'seeds: 3'))
    await expect(runSweep(other, { out: join(dir, 'two'), backend: 'cpu' })).rejects.toBeInstanceOf(SweepDirectoryError)
    // Forced onto the bigger sweep: only the new seed's trials run.
    const forced = await runSweep(other, { out: join(dir, 'two'), backend: 'cpu', force: true, workers: 1 })
    expect(forced).toMatchObject({ done: 2, skipped: 4 })
  })

  it('records a failing trial with its error and attempts, and goes on', async () => {
    const spec = tinySpec()
    const out = join(dir, 'fail')
    const [, second] = await expandTrials(spec)
    // Trial 1's run directory is taken by a file: every attempt fails with an I/O error.
    await mkdir(join(out, 'trials'), { recursive: true })
    await writeFile(trialDirectory(out, second?.id ?? ''), 'in the way')
    const result = await runSweep(spec, { out, workers: 2, backend: 'cpu', retries: 1, force: true })
    expect(result).toMatchObject({ done: 3, failed: 1 })
    const failed = result.records.find((r) => r.status === 'failed')
    expect(failed).toMatchObject({ index: 1, attempts: 2, metrics: {}, error: { code: expect.any(String) } })
    expect(failed?.error?.message).toContain(second?.id)
    // Resume reruns it (still failing), counting the earlier attempts.
    const again = await runSweep(spec, { out, workers: 1, backend: 'cpu', resume: true })
    expect(again).toMatchObject({ done: 0, failed: 1, skipped: 3 })
    expect((await readTrials(out)).find((r) => r.index === 1)?.attempts).toBe(3)
  })

  it('resumes after a SIGKILL of the sweep: every trial recorded exactly once', async () => {
    const out = join(dir, 'killed')
    const specPath = join(dir, 'killed.yaml')
    await writeFile(specPath, TINY_TEXT.replace('steps: 6', 'steps: 20'))
    const run = runSweepProcess(specPath, out, 1)
    await waitFor(
      () => existsSync(join(out, 'trials.jsonl')) && lines(out).length >= 1 && run.output().stdout.includes('start 1'),
    )
    const spec = tinySpec((t) => t.replace('steps: 6', 'steps: 20'))
    // A second runner on the same directory is refused while the first one lives.
    await expect(runSweep(spec, { out, workers: 1, backend: 'cpu', resume: true })).rejects.toThrow(
      /another sweep runner \(process \d+ on .*\) is running this sweep/,
    )
    run.child.kill('SIGKILL')
    expect((await run.exited).signal).toBe('SIGKILL')
    // Simulate a kill in the middle of an append: a torn last line.
    await writeFile(join(out, 'trials.jsonl'), `${await readFile(join(out, 'trials.jsonl'), 'utf8')}{"format":"attn`)
    // The orphaned worker stops at its next step; give it a moment.
    await new Promise((resolve) => setTimeout(resolve, 500))
    const resumed = await runSweep(spec, { out, workers: 1, backend: 'cpu', resume: true })
    expect(resumed.done + resumed.skipped).toBe(4)
    expect(resumed.skipped).toBeGreaterThanOrEqual(1)
    const ids = lines(out).map((r) => r.id)
    expect(ids).toHaveLength(4)
    expect(new Set(ids).size).toBe(4)
  }, 600_000)

  it('fails with SweepWorkersError when the workers die before they are ready (no silent 0 of 4)', async () => {
    const out = join(dir, 'dead-workers')
    const saved = process.env.NODE_OPTIONS
    // Every forked worker inherits this and exits at once (node cannot preload a missing module).
    process.env.NODE_OPTIONS = `--require ${join(dir, 'no-such-module.cjs')}`
    try {
      await expect(runSweep(tinySpec(), { out, workers: 2, backend: 'cpu' })).rejects.toThrow(
        /the sweep's workers could not start: a worker process exited \(code \d+\) before it was ready/,
      )
    } finally {
      if (saved === undefined) delete process.env.NODE_OPTIONS
      else process.env.NODE_OPTIONS = saved
    }
    expect(existsSync(join(out, 'trials.jsonl'))).toBe(false)
  })

  it('stops at the next step on abort, keeps the state, and resumes', async () => {
    const spec = tinySpec((t) => t.replace('steps: 6', 'steps: 20'))
    const out = join(dir, 'stopped')
    const controller = new AbortController()
    const stopped = await runSweep(spec, {
      out,
      workers: 2,
      backend: 'cpu',
      signal: controller.signal,
      onProgress: (e) => {
        if (e.kind === 'trial-progress' && e.event.step >= 10) controller.abort()
      },
    })
    expect(stopped.stopped).toBe(true)
    expect(stopped.interrupted).toBeGreaterThanOrEqual(1)
    expect(existsSync(join(out, 'trials.jsonl')) ? lines(out).length : 0).toBe(stopped.done)
    const resumed = await runSweep(spec, { out, workers: 1, backend: 'cpu', resume: true })
    expect(resumed.done + resumed.skipped).toBe(4)
    expect(lines(out)).toHaveLength(4)
  })
})

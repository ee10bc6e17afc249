// The sweeps queue on a redis-server of the test's own (a free localhost port, `--save ''`): a
// 6-trial sweep on 2 worker processes, one SIGKILLed mid-trial, gives every trial once with a
// local run's numbers (cpu); a failing trial is recorded with its error and attempts (and one whose
// backend cannot start here); a trial of another version is refused without running; a worker
// closed mid-trial puts it back in the queue; workers go on after a Redis restart; a wrong URL or
// an unreachable Redis is one clear error before anything is written.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { tinySpec } from '../__fixtures__/tiny.ts'
import { expandTrials, type TrialRecord } from '../index.ts'
import {
  QUEUE_PREFIX,
  QueueConnectionError,
  QueueUrlError,
  SWEEPS_VERSION,
  TRIAL_JOB_FORMAT,
  checkQueueConnection,
  collectSweep,
  parseQueueUrl,
  queueStatus,
  runSweep,
  startQueueWorker,
  submitSweep,
  sweepId,
  trialDirectory,
  type QueuedTrialRecord,
} from '../node.ts'
import { freePort, redisServerBinary, startRedis, type TestRedis } from './__fixtures__/redis.ts'

const HAVE_REDIS = redisServerBinary() !== null
if (!HAVE_REDIS)
  console.log('queue tests skipped: redis-server is not installed (Debian: apt-get install redis-server)')

/** The tiny spec with 3 seeds (6 trials) and `steps` steps per trial. */
const spec6 = (steps: number, name = 'queue6') =>
  tinySpec((t) =>
    t.replace('seeds: 2', 'seeds: 3').replace('steps: 6', `steps: ${steps}`).replace('name: tiny', `name: ${name}`),
  )

/** The metrics that do not depend on timing, with what ran. */
function numbers(records: readonly TrialRecord[]): unknown[] {
  return [...records]
    .sort((a, b) => a.index - b.index)
    .map(({ id, index, status, seed, params, metrics }) => {
      const { tokensPerSecond: _t, trainingSeconds: _s, ...rest } = metrics
      return { id, index, status, seed, params, ...rest }
    })
}

/** Every line of trials.jsonl (not only the last per id). */
function lines(out: string): QueuedTrialRecord[] {
  return readFileSync(join(out, 'trials.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as QueuedTrialRecord)
}

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'attnlab-queue-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('queue URLs and connections', () => {
  it('parses redis:// URLs and refuses anything else in one line naming the URL', () => {
    expect(parseQueueUrl('redis://10.0.0.5:6380/2')).toMatchObject({ host: '10.0.0.5', port: 6380, db: 2, tls: false })
    expect(parseQueueUrl('redis://localhost')).toMatchObject({ host: 'localhost', port: 6379, db: 0 })
    const secret = parseQueueUrl('rediss://user:s3cret@cache.example:6390/0')
    expect(secret).toMatchObject({ username: 'user', password: 's3cret', tls: true })
    expect(secret.display).toBe('rediss://user:***@cache.example:6390/0')
    for (const [url, what] of [
      ['localhost:6379', 'is not a Redis URL'],
      ['127.0.0.1:6379', 'is not a Redis URL'],
      ['http://127.0.0.1:6379/0', "has the scheme 'http'"],
      ['redis://127.0.0.1:6379/queue', "has the path '/queue', not a database index"],
      ['redis://127.0.0.1:6379/0?x=1', 'has a query'],
    ] as const) {
      expect(() => parseQueueUrl(url)).toThrow(QueueUrlError)
      expect(() => parseQueueUrl(url)).toThrow(`queue URL '${url}' ${what}`)
    }
  })

  it('an unreachable Redis is a QueueConnectionError naming the URL; submit writes nothing', async () => {
    const port = await freePort()
    const url = `redis://127.0.0.1:${port}/0`
    const refused = checkQueueConnection(parseQueueUrl(url))
    await expect(refused).rejects.toThrow(QueueConnectionError)
    await expect(refused).rejects.toThrow(`cannot use the Redis queue at ${url}: connection refused`)
    const out = join(dir, 'never')
    await expect(submitSweep(spec6(6), { queue: url, out, backend: 'cpu' })).rejects.toThrow(QueueConnectionError)
    await expect(startQueueWorker({ queue: url, artifacts: out })).rejects.toThrow(`${url}: connection refused`)
    await expect(submitSweep(spec6(6), { queue: 'localhost:6379', out })).rejects.toThrow(QueueUrlError)
    expect(existsSync(out)).toBe(false)
  })
})

describe.skipIf(!HAVE_REDIS)('the sweeps queue', () => {
  let redis: TestRedis
  beforeAll(async () => {
    redis = (await startRedis()) as TestRedis
  })
  afterAll(async () => {
    await redis?.dispose()
  })

  it('6 trials on 2 worker processes, one SIGKILLed mid-trial: each recorded once, a local run’s numbers', async () => {
    const spec = spec6(30)
    const local = await runSweep(spec, { out: join(dir, 'local'), workers: 1, backend: 'cpu' })
    expect(local.done).toBe(6)
    // Both workers are up before the trials are queued, so that each takes some.
    const artifacts = join(dir, 'shared-artifacts')
    const a = workerProcess(redis.url, artifacts, 'worker-a')
    const b = workerProcess(redis.url, artifacts, 'worker-b')
    onTestFinished(() => {
      for (const worker of [a, b]) if (worker.child.exitCode === null) worker.child.kill('SIGKILL')
    })
    await Promise.all([a.waitFor((e) => e.kind === 'ready'), b.waitFor((e) => e.kind === 'ready')])
    const out = join(dir, 'queued')
    const submitted = await submitSweep(spec, { queue: redis.url, out, backend: 'cpu' })
    expect(submitted).toMatchObject({ added: 6, queued: 0, skipped: 0 })
    // Submitting again queues nothing twice (job id = trial id).
    expect(await submitSweep(spec, { queue: redis.url, out, backend: 'cpu' })).toMatchObject({ added: 0, queued: 6 })
    // Kill worker a as soon as it has started its first trial (30 steps: it cannot have finished it).
    const started = await a.waitFor((e) => e.kind === 'trial-start')
    a.child.kill('SIGKILL')
    await a.exited
    expect(a.events().some((e) => e.kind === 'trial-end' && e.id === started.id)).toBe(false)
    const collected = await collectSweep(out, { queue: redis.url, pollSeconds: 0.2 })
    expect(collected).toMatchObject({ done: 6, failed: 0, pending: 0, stopped: false })
    const status = await queueStatus({ queue: redis.url, dir: out })
    expect(status.sweeps).toEqual([
      expect.objectContaining({ sweep: 'queue6', completed: 6, waiting: 0, active: 0, failed: 0, notQueued: 0 }),
    ])
    expect(status.workers.find((w) => w.name === 'worker-b')).toMatchObject({ connected: true })
    expect(status.workers.reduce((n, w) => n + w.completed, 0)).toBe(6)
    b.child.kill('SIGTERM')
    expect((await b.exited).code).toBe(143)

    const records = lines(out)
    expect(records.map((r) => r.id).sort()).toEqual(local.records.map((r) => r.id).sort())
    expect(numbers(records)).toEqual(numbers(local.records))
    const killed = records.find((r) => r.id === started.id)
    expect(killed?.attempts).toBe(2)
    for (const record of records) {
      expect(record.attnlabVersion).toBe(SWEEPS_VERSION)
      expect(record.artifacts?.path).toBe(trialDirectory(join(artifacts, sweepId(spec)), record.id))
      expect(existsSync(join(record.artifacts?.path ?? '', 'summary.json'))).toBe(true)
    }
    // Collecting again appends nothing.
    expect(await collectSweep(out, { queue: redis.url, wait: false })).toMatchObject({ appended: 0, done: 6 })
    expect(lines(out)).toHaveLength(6)
  }, 900_000) // 30 s idle; over 300 s in a CI run at load 27-32 on 2 cores (12 trials, 2 worker starts)

  it('records a failing trial with its error and attempts, goes on, refuses another version', async () => {
    const spec = spec6(6, 'queuefail')
    const out = join(dir, 'fail')
    const artifacts = join(dir, 'fail-artifacts')
    const trials = await expandTrials(spec)
    const blocked = trials[1]?.id as string
    // Trial 1's run directory is taken by a file: each attempt fails with an I/O error.
    await mkdir(join(artifacts, sweepId(spec), 'trials'), { recursive: true })
    await writeFile(trialDirectory(join(artifacts, sweepId(spec)), blocked), 'in the way')
    // Trial 2 is queued first by another attnlab version: refused, never run.
    const other = trials[2]
    if (other === undefined) throw new Error('no trial 2')
    const connection = new Redis({ host: '127.0.0.1', port: redis.port, maxRetriesPerRequest: null })
    const queue = new Queue('sweeps', { connection, prefix: QUEUE_PREFIX })
    await queue.add(
      'queuefail',
      {
        format: TRIAL_JOB_FORMAT,
        sweep: 'queuefail',
        sweepId: sweepId(spec),
        trial: other,
        backend: 'cpu',
        attnlabVersion: '0.0.1-old',
      },
      { jobId: other.id },
    )
    // Trial 3 asks for a backend that cannot start in Node: a failed attempt, BACKEND_UNAVAILABLE.
    const browser = trials[3]
    if (browser === undefined) throw new Error('no trial 3')
    await queue.add(
      'queuefail',
      {
        format: TRIAL_JOB_FORMAT,
        sweep: 'queuefail',
        sweepId: sweepId(spec),
        trial: browser,
        backend: 'webgl',
        attnlabVersion: SWEEPS_VERSION,
      },
      { jobId: browser.id },
    )
    await queue.close()
    connection.disconnect()
    const submitted = await submitSweep(spec, { queue: redis.url, out, backend: 'cpu', retries: 1 })
    expect(submitted).toMatchObject({ added: 4, queued: 2 })
    const worker = await startQueueWorker({ queue: redis.url, artifacts, name: 'in-process' })
    try {
      const result = await collectSweep(out, { queue: redis.url, pollSeconds: 0.2 })
      expect(result).toMatchObject({ done: 3, failed: 3, pending: 0 })
    } finally {
      await worker.close()
    }
    const records = lines(out)
    expect(records).toHaveLength(6)
    const failed = records.find((r) => r.id === blocked)
    expect(failed).toMatchObject({ status: 'failed', attempts: 2, metrics: {}, error: { code: expect.any(String) } })
    expect(failed?.error?.code).not.toBe('WORKER_EXIT')
    expect(failed?.error?.message).toContain(blocked)
    const refused = records.find((r) => r.id === other.id)
    expect(refused).toMatchObject({
      status: 'failed',
      attempts: 1,
      error: { code: 'UNSUPPORTED', name: 'QueueVersionError' },
    })
    expect(refused?.error?.message).toContain(
      `submitted by attnlab sweeps 0.0.1-old refused by a worker running ${SWEEPS_VERSION}`,
    )
    expect(existsSync(trialDirectory(join(artifacts, sweepId(spec)), other.id))).toBe(false)
    const unavailable = records.find((r) => r.id === browser.id)
    expect(unavailable).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'BACKEND_UNAVAILABLE' } })
    expect(unavailable?.error?.message).toContain("Backend 'webgl' is unavailable")
  }, 200_000)

  it('a worker closed mid-trial (SIGTERM) puts its trial back in the queue; another one finishes it', async () => {
    const spec = tinySpec((t) => t.replace('steps: 6', 'steps: 60').replace('name: tiny', 'name: closed'))
    const out = join(dir, 'closed')
    const artifacts = join(dir, 'closed-artifacts')
    await submitSweep(spec, { queue: redis.url, out, backend: 'cpu' })
    const events: { kind: string; id?: string }[] = []
    const first = await startQueueWorker({
      queue: redis.url,
      artifacts,
      name: 'first',
      onEvent: (event) => events.push({ kind: event.kind, ...('trial' in event ? { id: event.trial.id } : {}) }),
    })
    while (!events.some((e) => e.kind === 'trial-start')) await new Promise((r) => setTimeout(r, 10))
    const stopped = events.find((e) => e.kind === 'trial-start')?.id as string
    await first.close()
    expect(events.map((e) => e.kind)).toEqual(['trial-start', 'requeued'])
    expect(await collectSweep(out, { queue: redis.url, wait: false })).toMatchObject({ done: 0, pending: 4 })
    const second = await startQueueWorker({ queue: redis.url, artifacts, name: 'second' })
    try {
      expect(await collectSweep(out, { queue: redis.url, pollSeconds: 0.2 })).toMatchObject({ done: 4, failed: 0 })
    } finally {
      await second.close()
    }
    const records = lines(out)
    expect(records).toHaveLength(4)
    expect(records.find((r) => r.id === stopped)).toMatchObject({
      status: 'done',
      attempts: 2,
      host: expect.any(String),
    })
  }, 200_000)

  it('workers reconnect after a Redis restart and finish the sweep', async () => {
    const persistent = (await startRedis({ appendOnly: true })) as TestRedis
    const artifacts = join(dir, 'restart-artifacts')
    const events: string[] = []
    try {
      const spec = tinySpec((t) => t.replace('steps: 6', 'steps: 40').replace('name: tiny', 'name: restart'))
      const out = join(dir, 'restart')
      await submitSweep(spec, { queue: persistent.url, out, backend: 'cpu' })
      const worker = await startQueueWorker({
        queue: persistent.url,
        artifacts,
        timings: { lockDuration: 5000, stalledInterval: 1000 },
        onEvent: (event) => events.push(event.kind),
      })
      try {
        while (!events.includes('trial-start')) await new Promise((r) => setTimeout(r, 20))
        await persistent.stop()
        await new Promise((r) => setTimeout(r, 500))
        await persistent.start()
        const result = await collectSweep(out, { queue: persistent.url, pollSeconds: 0.2 })
        expect(result).toMatchObject({ done: 4, failed: 0 })
      } finally {
        await worker.close()
      }
      expect(events).toContain('connection-lost')
      expect(events).toContain('connection-restored')
      expect(lines(out)).toHaveLength(4)
    } finally {
      await persistent.dispose()
    }
  }, 200_000)
})

/** A queue worker process (the fixture) with its JSON event lines. */
function workerProcess(url: string, artifacts: string, name: string) {
  const tsx = createRequire(import.meta.url).resolve('tsx')
  const script = fileURLToPath(new URL('./__fixtures__/queue-worker.ts', import.meta.url))
  const child = spawn(
    process.execPath,
    ['--conditions=@attnlab/source', '--import', tsx, script, url, artifacts, name],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  )
  const seen: { kind: string; id?: string }[] = []
  const waiters: (() => void)[] = []
  let buffer = ''
  child.stdout.on('data', (chunk: Buffer) => {
    buffer += chunk.toString()
    const parts = buffer.split('\n')
    buffer = parts.pop() ?? ''
    for (const part of parts) if (part.startsWith('{')) seen.push(JSON.parse(part))
    for (const waiter of waiters.splice(0)) waiter()
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  )
  const waitFor = async (match: (e: { kind: string; id?: string }) => boolean) => {
    for (;;) {
      const found = seen.find(match)
      if (found !== undefined) return found
      if (child.exitCode !== null) throw new Error(`worker ${name} exited (${child.exitCode})`)
      await new Promise<void>((resolve) => waiters.push(resolve))
    }
  }
  return { child, exited, events: () => seen, waitFor }
}

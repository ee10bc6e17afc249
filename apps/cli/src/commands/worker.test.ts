// `attnlab sweep submit` + two `attnlab worker` processes give `attnlab sweep run`'s trials.jsonl
// numbers for the same spec (cpu); `sweep status` counts per sweep and per worker; a worker stops
// on SIGTERM with exit 143; a wrong URL is a usage error (exit 2) and an unreachable Redis an I/O
// error (exit 1), both one line naming the URL, nothing written. On a redis-server of the test's own.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  freePort,
  redisServerBinary,
  startRedis,
  type TestRedis,
} from '../../../../packages/sweeps/src/queue/__fixtures__/redis.ts'
import { runCli, useTempDir } from '../cli.test-utils.ts'

const repo = fileURLToPath(new URL('../../../../', import.meta.url))
const launcher = join(repo, 'attnlab')
const root = useTempDir('attnlab-worker-cli-')
const HAVE_REDIS = redisServerBinary() !== null
if (!HAVE_REDIS)
  console.log('queue CLI tests skipped: redis-server is not installed (Debian: apt-get install redis-server)')

afterEach(() => {
  vi.restoreAllMocks()
})

const SPEC = [
  'name: cli-queue',
  'experiment: emergence',
  'base:',
  '  task: { kind: sparse-markov, vocabSize: 8, spans: [1, 1], tau: 0.3 }',
  '  training: { steps: 20, batchSize: 8, validationSize: 16, analysisSize: 16, evalEvery: 5 }',
  'grid:',
  '  task.genLen: [4, 6]',
  'seeds: 2',
  '',
].join('\n')

interface Line {
  id: string
  index: number
  status: string
  host: string
  metrics: Record<string, number | null>
}

function lines(dir: string): Line[] {
  return readFileSync(join(dir, 'trials.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Line)
}

/** What does not depend on timing, by trial index. */
function numbers(records: Line[]): unknown[] {
  return [...records]
    .sort((a, b) => a.index - b.index)
    .map(({ id, index, status, metrics }) => {
      const { tokensPerSecond: _t, trainingSeconds: _s, ...rest } = metrics
      return { id, index, status, ...rest }
    })
}

describe('attnlab worker / sweep submit: usage and connection errors', () => {
  it('a wrong URL exits 2 and an unreachable Redis exits 1, one line naming the URL, nothing written', async () => {
    const spec = join(root(), 'errors.yaml')
    await writeFile(spec, SPEC)
    const out = join(root(), 'never')
    const wrong = await runCli(['sweep', 'submit', spec, '--queue', 'localhost:6379', '--out', out])
    expect(wrong.code).toBe(2)
    expect(wrong.stderr).toContain("attnlab: error [INVALID_ARGUMENT]: queue URL 'localhost:6379' is not a Redis URL")
    const url = `redis://127.0.0.1:${await freePort()}/0`
    const unreachable = await runCli(['sweep', 'submit', spec, '--queue', url, '--out', out, '--backend', 'cpu'])
    expect(unreachable.code).toBe(1)
    expect(unreachable.stderr.trim()).toBe(
      `attnlab: error [IO_ERROR]: cannot use the Redis queue at ${url}: connection refused ` +
        `(connect ECONNREFUSED ${url.slice('redis://'.length, -2)}); is redis-server running there?`,
    )
    const worker = await runCli(['worker', '--queue', 'http://127.0.0.1:6379'])
    expect(worker.code).toBe(2)
    expect(worker.stderr).toContain("has the scheme 'http'")
    expect(existsSync(out)).toBe(false)
  })
  it('--artifacts naming a file, or an empty --name, exits 2 before connecting', async () => {
    const file = join(root(), 'artifacts-file')
    await writeFile(file, 'x')
    const url = `redis://127.0.0.1:${await freePort()}/0`
    const onFile = await runCli(['worker', '--queue', url, '--artifacts', file])
    expect(onFile.code).toBe(2)
    expect(onFile.stderr.trim()).toBe(`attnlab: error: --artifacts ${file} is not writable (ENOTDIR)`)
    const under = await runCli(['worker', '--queue', url, '--artifacts', join(file, 'sub')])
    expect(under.code).toBe(2)
    expect(under.stderr).toContain('is not writable (ENOTDIR')
    const unnamed = await runCli(['worker', '--queue', url, '--name', ' '])
    expect(unnamed.code).toBe(2)
    expect(unnamed.stderr.trim()).toBe("attnlab: error: --name must not be empty, got ' '")
  })
})

describe.skipIf(!HAVE_REDIS)('attnlab sweep submit + 2 workers', () => {
  let redis: TestRedis
  beforeAll(async () => {
    redis = (await startRedis()) as TestRedis
  })
  afterAll(async () => {
    await redis?.dispose()
  })

  it('gives sweep run’s numbers; status per sweep and worker; SIGTERM exits 143', async () => {
    const spec = join(root(), 'queue.yaml')
    await writeFile(spec, SPEC)
    const local = join(root(), 'local')
    expect((await runCli(['sweep', 'run', spec, '--out', local, '--workers', '2', '--backend', 'cpu'])).code).toBe(0)

    const out = join(root(), 'queued')
    const submitted = await runCli([
      'sweep',
      'submit',
      spec,
      '--queue',
      redis.url,
      '--out',
      out,
      '--backend',
      'cpu',
      '--no-wait',
    ])
    expect(submitted.code).toBe(0)
    expect(submitted.stderr).toContain('4 queued now, 0 already queued')
    const waiting = await runCli(['sweep', 'status', out, '--queue', redis.url, '--json'])
    expect(JSON.parse(waiting.stdout).sweeps).toEqual([expect.objectContaining({ sweep: 'cli-queue', waiting: 4 })])

    const artifacts = join(root(), 'artifacts')
    const workers = ['w1', 'w2'].map((name) => {
      const child = spawn(launcher, ['worker', '--queue', redis.url, '--artifacts', artifacts, '--name', name], {
        stdio: ['ignore', 'ignore', 'pipe'],
      })
      let stderr = ''
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
      return { child, exited, stderr: () => stderr }
    })
    try {
      const collected = await runCli(['sweep', 'collect', out, '--queue', redis.url])
      expect(collected.code).toBe(0)
      expect(collected.stdout).toContain('4 done, 0 failed, 0 waiting or running')
      const status = await runCli(['sweep', 'status', '--queue', redis.url])
      expect(status.code).toBe(0)
      expect(status.stdout).toMatch(/cli-queue-[0-9a-f]{8}\s+0\s+0\s+4\s+0/)
      expect(status.stdout).toMatch(/w1\s+connected/)
      expect(status.stdout).toMatch(/w2\s+connected/)
    } finally {
      for (const worker of workers) worker.child.kill('SIGTERM')
    }
    for (const worker of workers) {
      expect(await worker.exited).toBe(143)
      expect(worker.stderr()).toContain('SIGTERM: stopping the running trials')
    }
    expect(numbers(lines(out))).toEqual(numbers(lines(local)))
    expect(lines(out)).toHaveLength(4)
  }, 300_000)
})

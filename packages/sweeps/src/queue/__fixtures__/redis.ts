// A redis-server of the tests' own: a free localhost port, a temporary directory, no snapshots
// (`--save ''`); never the system service on 6379. `startRedis()` is null where redis-server is
// not installed (the queue tests are then skipped, saying so).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** The redis-server binary: ATTNLAB_REDIS_SERVER, Debian's, or the one on PATH; null when none. */
export function redisServerBinary(): string | null {
  const candidates = [process.env.ATTNLAB_REDIS_SERVER, '/usr/bin/redis-server'].filter((c) => c !== undefined)
  for (const candidate of candidates) if (existsSync(candidate)) return candidate
  const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' })
  const found = which.stdout.trim()
  return which.status === 0 && found !== '' ? found : null
}

/** A port nobody listens on now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

/** A running test redis-server. */
export interface TestRedis {
  readonly url: string
  readonly port: number
  /** Stops it (SIGTERM, then waits for the exit). */
  stop(): Promise<void>
  /** Starts it again on the same port and directory (after `stop`; the append-only file keeps the data). */
  start(): Promise<void>
  /** Stops it and removes its directory. */
  dispose(): Promise<void>
}

async function waitReady(child: ChildProcess, port: number): Promise<void> {
  let log = ''
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server on ${port} not ready in 10 s: ${log}`)), 10_000)
    child.stdout?.on('data', (chunk: Buffer) => {
      log += chunk.toString()
      if (log.includes('Ready to accept connections')) {
        clearTimeout(timer)
        resolve()
      }
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`redis-server on ${port} exited (${code}): ${log}`))
    })
  })
}

/** Starts a redis-server on a free localhost port; null when there is no redis-server. */
export async function startRedis(options: { appendOnly?: boolean } = {}): Promise<TestRedis | null> {
  const binary = redisServerBinary()
  if (binary === null) return null
  const dir = await mkdtemp(join(tmpdir(), 'attnlab-redis-'))
  const port = await freePort()
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--daemonize', 'no']
  args.push('--appendonly', options.appendOnly === true ? 'yes' : 'no', '--protected-mode', 'yes')
  let child: ChildProcess | null = null
  const start = async (): Promise<void> => {
    child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    await waitReady(child, port)
  }
  const stop = async (): Promise<void> => {
    const running = child
    child = null
    if (running === null || running.exitCode !== null) return
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()))
    running.kill('SIGTERM')
    await exited
  }
  await start()
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    stop,
    start,
    dispose: async () => {
      await stop()
      await rm(dir, { recursive: true, force: true })
    },
  }
}

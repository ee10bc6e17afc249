// The sweep directory after a SIGKILL: a dead runner's lock is taken over only once the workers it names have
// exited, and a directory killed inside its first sweep.json write is still an empty one.
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SweepDirectoryError } from './errors.ts'
import { lockSweepDirectory } from './directory.ts'
import { initSweep } from './sweep.ts'
import { tinySpec } from './__fixtures__/tiny.ts'

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'attnlab-sweep-directory-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** A process that sleeps until killed, and a promise of its exit. */
function sleeper(): { pid: number; kill: () => Promise<void> } {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120000)'], { stdio: 'ignore' })
  const exited = new Promise<void>((done) => child.on('exit', () => done()))
  return {
    pid: child.pid as number,
    kill: async () => {
      child.kill('SIGKILL')
      await exited
    },
  }
}

/** The id of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
  await new Promise<void>((done) => child.on('exit', () => done()))
  return child.pid as number
}

const lockOf = (out: string): { pid: number; host: string; workers: number[] } =>
  JSON.parse(readFileSync(join(out, 'sweep.lock'), 'utf8'))

describe('lockSweepDirectory', () => {
  it('names its workers, and a dead runner is taken over once its workers have exited', async () => {
    const out = join(dir, 'orphans')
    await mkdir(out)
    const worker = sleeper()
    try {
      await writeFile(
        join(out, 'sweep.lock'),
        `${JSON.stringify({ pid: await deadPid(), host: hostname(), workers: [worker.pid] })}\n`,
      )
      let taken = false
      const taking = lockSweepDirectory(out).then((lock) => {
        taken = true
        return lock
      })
      await new Promise((wait) => setTimeout(wait, 400))
      expect(taken, 'taken over while the dead runner’s worker still runs').toBe(false)
      await worker.kill()
      const lock = await taking
      expect(lockOf(out)).toEqual({ pid: process.pid, host: hostname(), workers: [] })
      await lock.addWorker(12345)
      await lock.addWorker(23456)
      await lock.removeWorker(12345)
      expect(lockOf(out).workers).toEqual([23456])
      // A second runner while this one lives is refused.
      await expect(lockSweepDirectory(out)).rejects.toThrow(/another sweep runner \(process \d+ on .*\) is running/)
      await lock.release()
      expect(existsSync(join(out, 'sweep.lock'))).toBe(false)
    } finally {
      await worker.kill()
    }
  })

  it('takes over a dead runner whose workers are gone at once', async () => {
    const out = join(dir, 'dead')
    await mkdir(out)
    await writeFile(join(out, 'sweep.lock'), JSON.stringify({ pid: await deadPid(), host: hostname(), workers: [] }))
    const started = performance.now()
    const lock = await lockSweepDirectory(out)
    expect(performance.now() - started).toBeLessThan(1000)
    expect(lockOf(out).pid).toBe(process.pid)
    await lock.release()
  })
})

describe('initSweep after a kill inside the first sweep.json write', () => {
  it('treats a directory holding only the write temporary as empty, and removes it', async () => {
    const out = join(dir, 'first-write')
    await mkdir(out)
    await writeFile(join(out, 'sweep.json.1234567'), '{"format":"attn')
    const file = await initSweep(tinySpec(), { out, backend: 'cpu' })
    expect(file.trials).toHaveLength(4)
    expect(readdirSync(out)).toEqual(['sweep.json'])
  })

  it('still refuses a directory with other files', async () => {
    const out = join(dir, 'other')
    await mkdir(out)
    await writeFile(join(out, 'notes.txt'), 'mine')
    await expect(initSweep(tinySpec(), { out, backend: 'cpu' })).rejects.toBeInstanceOf(SweepDirectoryError)
  })
})

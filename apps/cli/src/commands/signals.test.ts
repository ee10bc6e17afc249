// Real signals sent to a real `attnlab` process (the in-process tests emit them directly): the
// training loop must return to the event loop so that SIGTERM / SIGHUP stop it after the current
// step, even between evaluations and checkpoint writes.
import { spawn } from 'node:child_process'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { describe, expect, it } from 'vitest'
import { useTempDir } from '../cli.test-utils.ts'

const repo = fileURLToPath(new URL('../../../../', import.meta.url))
const root = useTempDir('attnlab-signals-')

const TINY = ['--vocab', '8', '--spans', '1,1', '--gen-len', '6', '--tau', '0.3', '--batch', '8', '--validation-size', '16', '--backend', 'cpu']

/** Runs the CLI, sends `signal` once `ready` matches its stderr, and resolves with its exit code and stderr. */
function runAndSignal(args: string[], ready: RegExp, signal: NodeJS.Signals): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--conditions=@attnlab/source', '--import', 'tsx', 'apps/cli/src/bin.ts', ...args], { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    let output = ''
    let sent = false
    const watch = (chunk: Buffer): void => {
      output += chunk.toString()
      if (!sent && ready.test(output)) {
        sent = true
        child.kill(signal)
      }
    }
    child.stdout.on('data', watch)
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
      watch(chunk)
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), 50_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stderr })
    })
  })
}

describe('stop signals on a real process', () => {
  it('train stops on SIGTERM between evaluations and checkpoints, with a resumable checkpoint', async () => {
    const out = join(root(), 'trt')
    const { code, stderr } = await runAndSignal(['train', ...TINY, '--steps', '1000000', '--eval-every', '20', '--out', out], /step 20\//, 'SIGTERM')
    expect(stderr).toMatch(/INTERRUPTED.*the checkpoint in .*trt holds it: continue with --resume/)
    expect(code).toBe(130)
    const step = (await loadCheckpoint(out)).trainerState!.step
    expect(step).toBeGreaterThanOrEqual(20)
    expect(step).toBeLessThan(10_000)
    expect((await readdir(root())).filter((name) => name.includes('.tmp-'))).toEqual([])
  })

  it('emergence stops on SIGHUP within a few steps, not at the next evaluation', async () => {
    const out = join(root(), 'emt')
    const { code, stderr } = await runAndSignal(['emergence', ...TINY, '--analysis-size', '8', '--steps', '1000000', '--eval-every', '100000', '--out', out], /step 0\//, 'SIGHUP')
    expect(stderr).toMatch(/interrupted: finishing the current step and saving/)
    expect(stderr).toMatch(/INTERRUPTED.*--resume .*emt/)
    expect(code).toBe(130)
    expect((await loadCheckpoint(join(out, 'seeds', '0', 'checkpoint'))).trainerState!.step).toBeLessThan(100_000)
    expect((await readdir(join(out, 'seeds', '0'))).filter((name) => name.includes('.tmp-'))).toEqual([])
  })
})

// Real signals sent to a real `attnlab` process (the in-process tests emit them directly): the
// training loop must return to the event loop so that SIGTERM / SIGHUP stop it after the current
// step, even between evaluations and checkpoint writes.
import { execFileSync, spawn } from 'node:child_process'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { describe, expect, it } from 'vitest'
import { TINY_RUN_FLAGS, useTempDir } from '../cli.test-utils.ts'

const repo = fileURLToPath(new URL('../../../../', import.meta.url))
const root = useTempDir('attnlab-signals-')

const TINY = TINY_RUN_FLAGS

// Each run starts a real process tree (node + tsx + tfjs; npx and pnpm for the last test): ~8 s alone
// (~25 s for npx), several times that while turbo runs other packages' tests beside it on 2 cores.
// A run is killed after RUN_TIMEOUT, inside the test's own timeout, so a hang fails with the output.
const RUN_TIMEOUT = 240_000
const TEST_TIMEOUT = 300_000

/** Whom to signal: the spawned process, a process found below it, or its whole process group. */
type Target = 'child' | 'group' | ((childPid: number) => number | undefined)

/**
 * Runs `command args`, sends `signal` once `ready` matches its output, and resolves with its exit
 * code and stderr.
 */
function runAndSignal(
  args: string[],
  ready: RegExp,
  signal: NodeJS.Signals,
  options: { command?: string[]; target?: Target } = {},
): Promise<{ code: number | null; stderr: string }> {
  const command = options.command ?? [
    process.execPath,
    '--conditions=@attnlab/source',
    '--import',
    'tsx',
    'apps/cli/src/bin.ts',
  ]
  const target = options.target ?? 'child'
  return new Promise((resolve, reject) => {
    const child = spawn(command[0] as string, [...command.slice(1), ...args], {
      cwd: repo,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: target !== 'child',
    })
    let stderr = ''
    let output = ''
    let sent = false
    const watch = (chunk: Buffer): void => {
      output += chunk.toString()
      if (!sent && ready.test(output)) {
        sent = true
        if (target === 'child') child.kill(signal)
        else if (target === 'group') process.kill(-(child.pid as number), signal)
        else process.kill(target(child.pid as number) ?? (child.pid as number), signal)
      }
    }
    child.stdout.on('data', watch)
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
      watch(chunk)
    })
    const timer = setTimeout(() => {
      if (target === 'child') child.kill('SIGKILL')
      else process.kill(-(child.pid as number), 'SIGKILL')
    }, RUN_TIMEOUT)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stderr })
    })
  })
}

/** The processes of a process group, with their parent and command line (Linux `ps`). */
function processGroup(pgid: number): { pid: number; ppid: number; args: string }[] {
  return execFileSync('ps', ['-o', 'pid=,ppid=,args=', '-g', String(pgid)], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [pid, ppid, ...rest] = line.trim().split(/\s+/)
      return { pid: Number(pid), ppid: Number(ppid), args: rest.join(' ') }
    })
}

/** The `pnpm attnlab` process below `npx -y pnpm@...` (the pid `pnpm` would show a user). */
function pnpmProcess(npxPid: number): number | undefined {
  return processGroup(npxPid).find(
    (p) => /^(node \S*)?pnpm attnlab\b/.test(p.args) || /\/pnpm(\.c?js)? attnlab\b/.test(p.args),
  )?.pid
}

const NPX = ['npx', '-y', 'pnpm@12.4.2', 'attnlab']

describe('stop signals on a real process', () => {
  it(
    'train stops on SIGTERM between evaluations and checkpoints, with a resumable checkpoint',
    async () => {
      const out = join(root(), 'trt')
      const { code, stderr } = await runAndSignal(
        ['train', ...TINY, '--steps', '1000000', '--eval-every', '20', '--out', out],
        /step 20\//,
        'SIGTERM',
      )
      expect(stderr).toMatch(/INTERRUPTED.*the checkpoint in .*trt holds it: continue with --resume/)
      expect(code).toBe(143)
      const step = (await loadCheckpoint(out)).trainerState!.step
      expect(step).toBeGreaterThanOrEqual(20)
      expect(step).toBeLessThan(10_000)
      expect((await readdir(root())).filter((name) => name.includes('.tmp-'))).toEqual([])
    },
    TEST_TIMEOUT,
  )

  it(
    'emergence stops on SIGHUP within a few steps, not at the next evaluation',
    async () => {
      const out = join(root(), 'emt')
      const { code, stderr } = await runAndSignal(
        ['emergence', ...TINY, '--analysis-size', '8', '--steps', '1000000', '--eval-every', '100000', '--out', out],
        /step 0\//,
        'SIGHUP',
      )
      expect(stderr).toMatch(/interrupted: finishing the current step and saving/)
      expect(stderr).toMatch(/INTERRUPTED.*--resume .*emt/)
      expect(code).toBe(129)
      expect((await loadCheckpoint(join(out, 'seeds', '0', 'checkpoint'))).trainerState!.step).toBeLessThan(100_000)
      expect((await readdir(join(out, 'seeds', '0'))).filter((name) => name.includes('.tmp-'))).toEqual([])
    },
    TEST_TIMEOUT,
  )

  // The documented ways of running: the launcher and `pnpm attnlab` (what `npx -y pnpm@... attnlab`
  // runs) exec node, so the pid a user sees is the trainer's, and pnpm relays SIGTERM to it.
  it(
    './attnlab is the trainer itself: kill <its pid> stops it cleanly with 143',
    async () => {
      const out = join(root(), 'launcher')
      const { code, stderr } = await runAndSignal(
        ['train', ...TINY, '--steps', '1000000', '--eval-every', '20', '--out', out],
        /step 20\//,
        'SIGTERM',
        {
          command: ['./attnlab'],
        },
      )
      expect(stderr).toMatch(/INTERRUPTED.*continue with --resume .*launcher/)
      expect(code).toBe(143)
      expect((await loadCheckpoint(out)).trainerState!.step).toBeGreaterThanOrEqual(20)
    },
    TEST_TIMEOUT,
  )

  it.runIf(process.platform === 'linux')(
    'npx pnpm attnlab: SIGTERM to pnpm, or to the whole job, stops the trainer cleanly',
    async () => {
      for (const target of ['pnpm', 'group'] as const) {
        const out = join(root(), `npx-${target}`)
        const { stderr } = await runAndSignal(
          ['train', ...TINY, '--steps', '1000000', '--eval-every', '20', '--out', out],
          /step 20\//,
          'SIGTERM',
          {
            command: NPX,
            target: target === 'group' ? 'group' : pnpmProcess,
          },
        )
        expect(stderr, target).toMatch(/INTERRUPTED.*continue with --resume .*npx-/)
        // pnpm reports the trainer's exit; when the signal reaches pnpm too (the whole group), it may report its
        // own failure first ("Command failed.") without the child's code: both are a reported, clean stop.
        expect(stderr, target).toMatch(
          target === 'group' ? /ELIFECYCLE.*(exit code 143|Command failed)/ : /exit code 143/,
        )
        expect((await loadCheckpoint(out)).trainerState!.step, target).toBeGreaterThanOrEqual(20)
      }
    },
    2 * TEST_TIMEOUT,
  ) // two runs
})

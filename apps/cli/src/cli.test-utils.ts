/**
 * Helpers shared by the CLI's tests (not part of the build: tsconfig.json excludes *.test-utils.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, vi } from 'vitest'
import { main } from './program.ts'

/**
 * A temporary directory for the calling test file: created in `beforeAll`, removed with its
 * contents in `afterAll`. Call at the top level of the file; the returned function gives the
 * path once the hook has run (register further `beforeAll` setup after this call to use it).
 */
export function useTempDir(prefix: string): () => string {
  let dir: string | undefined
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), prefix))
  })
  afterAll(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })
  return () => {
    if (dir === undefined)
      throw new Error(`useTempDir('${prefix}'): the directory exists only inside the file's hooks and tests`)
    return dir
  }
}

/**
 * What the CLI printed while captured. The arrays are live: they grow as output arrives, and tests may clear or
 * pop them.
 */
export interface CapturedOutput {
  /** One entry per console.log call (its arguments joined by spaces), plus process.stdout chunks when captured. */
  readonly logs: string[]
  /**
   * One entry per console.error call and per process.stderr chunk (commander writes its usage errors there), in
   * order.
   */
  readonly errors: string[]
  /** The logs joined by newlines. */
  out(): string
  /** The errors joined by newlines. */
  err(): string
}

const text = (chunk: string | Uint8Array): string =>
  typeof chunk === 'string' ? chunk : new TextDecoder().decode(chunk)

/**
 * Silences and records console.log, console.error and process.stderr (and process.stdout with
 * `{ stdout: true }`) until the mocks are restored: the test files restore them with
 * `vi.restoreAllMocks()` in `afterEach`.
 */
export function captureOutput(options: { stdout?: boolean } = {}): CapturedOutput {
  return spyOnOutput(options).output
}

/**
 * Runs `attnlab <argv>` in-process and returns its exit code with what it printed: stdout is the
 * console.log lines joined by newlines, stderr the console.error lines and stderr chunks joined as
 * written. process.stderr is restored afterwards; the console stays silenced until `afterEach`.
 */
export async function runCli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { output, stderrWrite } = spyOnOutput({})
  const code = await main(argv)
  stderrWrite.mockRestore()
  return { code, stdout: output.logs.join('\n'), stderr: output.errors.join('') }
}

function spyOnOutput(options: { stdout?: boolean }): { output: CapturedOutput; stderrWrite: { mockRestore(): void } } {
  const logs: string[] = []
  const errors: string[] = []
  vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void logs.push(args.join(' ')))
  vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void errors.push(args.join(' ')))
  const stderrWrite = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    errors.push(text(chunk))
    return true
  })
  if (options.stdout === true) {
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      logs.push(text(chunk))
      return true
    })
  }
  return { output: { logs, errors, out: () => logs.join('\n'), err: () => errors.join('\n') }, stderrWrite }
}

/** The tiny sparse Markov chain the CLI tests train on: d = 8, two singleton spans, short sequences. */
export const TINY_TASK_FLAGS: readonly string[] = ['--vocab', '8', '--spans', '1,1', '--gen-len', '6', '--tau', '0.3']

/** {@link TINY_TASK_FLAGS} with a small batch and validation set on the cpu backend (a few seconds per run). */
export const TINY_RUN_FLAGS: readonly string[] = [
  ...TINY_TASK_FLAGS,
  '--batch',
  '8',
  '--validation-size',
  '16',
  '--backend',
  'cpu',
]

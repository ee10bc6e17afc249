/**
 * The sweep directory (Node): `sweep.json` (the spec as resolved and its trials, written at
 * start), `trials.jsonl` (one {@link TrialRecord} per line, appended as trials end) and
 * `trials/<id>/` (each trial's run directory).
 *
 * @module
 */
import { appendFile, open, readFile, readdir, rm, stat } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import type { BackendName } from '@attnlab/core'
import { writeFileAtomic } from '@attnlab/core/node'
import { SweepDirectoryError } from './errors.ts'
import { canonicalJson, type JsonValue } from './json.ts'
import { TRIAL_RECORD_FORMAT, type TrialRecord } from './record.ts'
import type { SweepSpec } from './spec.ts'
import type { Trial } from './trial.ts'

/**
 * The format tag of `sweep.json`.
 *
 * @category Sweeps
 */
export const SWEEP_FILE_FORMAT = 'attnlab-sweep/1'

/**
 * `sweep.json`: what a sweep directory runs. Written (atomically) when a sweep starts; `attnlab
 * sweep run-trial DIR --index I` runs `trials[I]` of it.
 *
 * @category Sweeps
 */
export interface SweepFile {
  /** {@link SWEEP_FILE_FORMAT}. */
  readonly format: typeof SWEEP_FILE_FORMAT
  /** The validated spec. */
  readonly spec: SweepSpec
  /** The tensor backend the trials run on. */
  readonly backend: BackendName
  /** ISO 8601 time the directory was first written. */
  readonly created: string
  /** Every trial, in expansion order (`trials[i].index === i`). */
  readonly trials: readonly Trial[]
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

/**
 * Reads a sweep directory's `sweep.json`.
 *
 * @param directory - the sweep directory
 * @returns its contents
 * @throws {@link SweepDirectoryError} when there is none, or it is not a sweep's
 * @category Sweeps
 */
export async function readSweepFile(directory: string): Promise<SweepFile> {
  let text: string
  try {
    text = await readFile(join(directory, 'sweep.json'), 'utf8')
  } catch {
    throw new SweepDirectoryError(directory, 'no sweep.json there (not a sweep directory)', { reason: 'no-sweep' })
  }
  let file: SweepFile
  try {
    file = JSON.parse(text) as SweepFile
  } catch (error) {
    throw new SweepDirectoryError(directory, `sweep.json is not valid JSON (${(error as Error).message})`, {
      reason: 'no-sweep',
    })
  }
  if (file?.format !== SWEEP_FILE_FORMAT) {
    throw new SweepDirectoryError(directory, `sweep.json is not an attnlab sweep (format ${String(file?.format)})`, {
      reason: 'no-sweep',
    })
  }
  return file
}

/**
 * Checks a directory before a sweep starts in it and writes `sweep.json`: a missing or empty
 * directory starts fresh; one holding the same spec continues only with `resume`; one holding
 * another spec (or other files) is refused unless `force` (the new spec replaces `sweep.json`;
 * trials with the same ids are still found, by id). Also removes a torn last line of
 * `trials.jsonl`.
 */
export async function prepareSweepDirectory(
  directory: string,
  file: SweepFile,
  options: { readonly resume: boolean; readonly force: boolean },
): Promise<void> {
  await removeWriteTemporaries(directory)
  const previous = (await exists(join(directory, 'sweep.json'))) ? await readSweepFile(directory) : null
  if (previous === null) {
    const entries = (await exists(directory)) ? await readdir(directory) : []
    if (entries.length > 0 && !options.force) {
      throw new SweepDirectoryError(
        directory,
        'is not empty and holds no sweep; pick another directory or pass force',
        {
          reason: 'not-empty',
        },
      )
    }
  } else if (
    canonicalJson(previous.spec as unknown as JsonValue) !== canonicalJson(file.spec as unknown as JsonValue)
  ) {
    if (!options.force) {
      throw new SweepDirectoryError(
        directory,
        `holds another sweep ('${previous.spec.name}', a different spec); pick another directory or pass force ` +
          '(finished trials with the same settings are kept)',
        { reason: 'other-sweep', name: previous.spec.name },
      )
    }
  } else if (!options.resume && !options.force) {
    throw new SweepDirectoryError(
      directory,
      `holds this sweep already ('${previous.spec.name}'); continue it with resume`,
      { reason: 'same-sweep', name: previous.spec.name },
    )
  }
  const created = previous?.created ?? file.created
  await writeFileAtomic(join(directory, 'sweep.json'), `${JSON.stringify({ ...file, created }, null, 2)}\n`)
  await repairTrialsLog(directory)
}

/** The temporaries of an atomic write of the sweep's own files (`sweep.json.<n>`) that a kill left behind. */
const WRITE_TEMPORARY = /^(sweep\.json|trials\.jsonl|sweep\.lock)\.\d+$/

/**
 * Removes what a runner killed inside an atomic write of `sweep.json`, `trials.jsonl` or `sweep.lock`
 * left beside it, so that a directory killed during its first `sweep.json` write is still an empty one.
 */
async function removeWriteTemporaries(directory: string): Promise<void> {
  const entries = (await exists(directory)) ? await readdir(directory) : []
  for (const name of entries) if (WRITE_TEMPORARY.test(name)) await rm(join(directory, name), { force: true })
}

/**
 * Removes a torn last line of `trials.jsonl` (a kill mid-append), rewriting the file atomically.
 */
async function repairTrialsLog(directory: string): Promise<void> {
  const path = join(directory, 'trials.jsonl')
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch {
    return
  }
  if (text === '' || text.endsWith('\n')) return
  await writeFileAtomic(path, text.slice(0, text.lastIndexOf('\n') + 1))
}

/**
 * Appends one record to `trials.jsonl` as a single write of one complete line.
 *
 * @param directory - the sweep directory
 * @param record - the record
 * @category Sweeps
 */
export async function appendTrialRecord(directory: string, record: TrialRecord): Promise<void> {
  await appendFile(join(directory, 'trials.jsonl'), `${JSON.stringify(record)}\n`)
}

/**
 * The records of a sweep directory's `trials.jsonl`, the last one of each trial id, in trial
 * index order. A torn line (a kill mid-append) and lines that are not trial records are skipped.
 *
 * @param directory - the sweep directory
 * @returns the records (none when there is no `trials.jsonl`)
 * @category Sweeps
 */
export async function readTrials(directory: string): Promise<TrialRecord[]> {
  let text: string
  try {
    text = await readFile(join(directory, 'trials.jsonl'), 'utf8')
  } catch {
    return []
  }
  const latest = new Map<string, TrialRecord>()
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    try {
      const record = JSON.parse(line) as TrialRecord
      if (record?.format === TRIAL_RECORD_FORMAT && typeof record.id === 'string') latest.set(record.id, record)
    } catch {
      // A line torn by a kill mid-append: skipped (a resumed run rewrites the file without it).
    }
  }
  return [...latest.values()].sort((a, b) => a.index - b.index)
}

/** Whether a process with this id runs on this machine. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** How long a runner that takes over a dead runner's lock waits for that runner's workers to exit (ms). */
const ORPHAN_WAIT_MS = 30_000

/**
 * The lock of a sweep directory held by this process ({@link lockSweepDirectory}): `DIR/sweep.lock` names
 * this process and its live worker processes.
 */
export interface SweepLock {
  /** Records a worker process in the lock (resolves once the lock file says so). */
  addWorker(pid: number): Promise<void>
  /** Drops an exited worker process from the lock. */
  removeWorker(pid: number): Promise<void>
  /** Removes the lock. */
  release(): Promise<void>
}

/** What `DIR/sweep.lock` holds. */
interface LockContents {
  readonly pid?: number
  readonly host?: string
  readonly workers?: readonly number[]
}

/**
 * Takes `DIR/sweep.lock` for this process (one local runner per sweep directory at a time), and
 * returns it. A lock left by a runner that died (SIGKILL) on this machine is taken over once the
 * workers it names have exited (a worker whose runner died stops its trial at its next step and
 * exits; until then it may still write its trial's directory); one held by a live process, or by
 * another machine, is refused.
 *
 * @throws {@link SweepDirectoryError} (reason `running`) naming the process that holds it, or the
 *   dead runner's workers that are still running after 30 s
 */
export async function lockSweepDirectory(directory: string): Promise<SweepLock> {
  const path = join(directory, 'sweep.lock')
  const host = hostname()
  const workers = new Set<number>()
  // Rewrites of the lock, one at a time (atomic: the file is never missing or torn while held).
  let writes: Promise<void> = Promise.resolve()
  const rewrite = (): Promise<void> => {
    const contents = `${JSON.stringify({ pid: process.pid, host, workers: [...workers] })}\n`
    writes = writes.then(() => writeFileAtomic(path, contents))
    return writes
  }
  const lock: SweepLock = {
    addWorker: (pid) => {
      workers.add(pid)
      return rewrite()
    },
    removeWorker: (pid) => {
      workers.delete(pid)
      return rewrite()
    },
    release: async () => {
      await writes.catch(() => {})
      await rm(path, { force: true })
    },
  }
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(path, 'wx')
      await handle.writeFile(`${JSON.stringify({ pid: process.pid, host, workers: [] })}\n`)
      await handle.close()
      return lock
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
    let holder: LockContents = {}
    try {
      holder = JSON.parse(await readFile(path, 'utf8')) as LockContents
    } catch {
      // A lock file cut by a kill while it was written: nobody holds it.
    }
    const live = typeof holder.pid === 'number' && (holder.host !== host || alive(holder.pid))
    if (live) {
      throw new SweepDirectoryError(
        directory,
        `another sweep runner (process ${holder.pid} on ${holder.host}) is running this sweep; ` +
          `wait for it or stop it (its lock: ${path})`,
        { reason: 'running', pid: holder.pid, host: holder.host },
      )
    }
    await waitForOrphans(directory, holder)
    await rm(path, { force: true })
  }
  throw new SweepDirectoryError(directory, `cannot take the lock ${path}`, { reason: 'running' })
}

/** Waits until the workers a dead runner's lock names have exited (at most {@link ORPHAN_WAIT_MS}). */
async function waitForOrphans(directory: string, holder: LockContents): Promise<void> {
  const listed = Array.isArray(holder.workers) ? holder.workers.filter((pid) => Number.isSafeInteger(pid)) : []
  const started = Date.now()
  let running = listed.filter((pid) => pid > 0 && alive(pid))
  while (running.length > 0) {
    if (Date.now() - started > ORPHAN_WAIT_MS) {
      throw new SweepDirectoryError(
        directory,
        `the worker processes ${running.join(', ')} of a sweep runner that died (process ${holder.pid}) are still ` +
          'running; wait for them to exit or stop them',
        { reason: 'running', pid: holder.pid, host: holder.host, workers: running },
      )
    }
    await new Promise((wait) => setTimeout(wait, 50))
    running = running.filter(alive)
  }
}

/**
 * Output directories of the training commands: check them before any work (never overwrite user
 * files without `--force`, fail early when they cannot be written), create them only once
 * everything is validated, and remove what a fresh run created when it fails before producing
 * anything worth keeping.
 */
import { randomBytes } from 'node:crypto'
import { accessSync, constants, mkdirSync, rmdirSync, statSync, type Stats } from 'node:fs'
import { access, readdir, rm, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { makeDirectories } from '@attnlab/core/node'
import { UsageError } from './errors.ts'

/** What is at a path. */
export type PathState =
  | { readonly kind: 'missing' }
  | { readonly kind: 'file' }
  | { readonly kind: 'directory'; readonly entries: readonly string[] }

/** What is at `path`: nothing, a file (anything not a directory), or a directory and its entries. */
export async function pathState(path: string): Promise<PathState> {
  let info: Stats
  try {
    info = await stat(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' }
    const code = (error as NodeJS.ErrnoException).code
    // ENOTDIR: a parent is a file (e.g. /dev/full/x); nothing can be written there either.
    if (code === 'ENOTDIR')
      throw new UsageError(`${path} cannot be created: a part of the path is a file, not a directory (ENOTDIR)`)
    throw new UsageError(`${path} cannot be read (${code ?? (error as Error).message})`)
  }
  if (!info.isDirectory()) return { kind: 'file' }
  try {
    return { kind: 'directory', entries: await readdir(path) }
  } catch (error) {
    throw new UsageError(
      `${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    )
  }
}

/**
 * Refuses an empty output path (`--out ""`), which would otherwise name the current directory's
 * parent entry and fail only when the result is written.
 *
 * @throws {@link UsageError} `<flag> must name a path, got ''`
 */
export function checkPathGiven(flag: string, path: string): void {
  if (path.trim() === '') throw new UsageError(`${flag} must name a path, got '${path}'`)
}

/**
 * Checks that `directory` (which exists) is a directory in which an entry can really be created:
 * probed with an empty directory that is removed at once, so that file systems that refuse new
 * entries, such as `/proc`, fail here and not after the work. Synchronous, for the file-output
 * checks of `options.ts`.
 *
 * @param directory - the existing directory to probe
 * @param flag - the flag named in the error (`--plot`)
 * @param named - the path the error names (the one the user gave)
 * @throws {@link UsageError} `<flag> <named> is not writable (<code>[ in <directory>])`
 */
export function checkDirectoryWritable(directory: string, flag: string, named: string): void {
  try {
    if (!statSync(directory).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' })
    accessSync(directory, constants.W_OK)
    const entry = join(directory, `.attnlab-probe-${randomBytes(6).toString('hex')}`)
    mkdirSync(entry)
    rmdirSync(entry)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message
    throw new UsageError(
      `${flag} ${named} is not writable (${code}${directory === resolve(named) ? '' : ` in ${directory}`})`,
    )
  }
}

/**
 * Checks, before any work, that `path` can be created or written: its nearest existing ancestor
 * (`path` itself when it exists) must be a writable directory in which a directory can really be
 * created (probed with an empty directory that is removed at once, so that file systems that
 * refuse new entries, such as `/proc`, fail here and not after the training).
 *
 * @param flag - the flag named in the error (`--out`)
 * @param named - the path the error names (default `path`; e.g. `--out` when checking its parent)
 * @throws {@link UsageError} `<flag> must name a path` for an empty path, `<flag> <named> is not writable (...)`
 */
export async function checkWritable(path: string, flag = '--out', named = path): Promise<void> {
  checkPathGiven(flag, named)
  checkPathGiven(flag, path)
  // The nearest existing ancestor (or path itself).
  let probe = resolve(path)
  for (;;) {
    const found = await stat(probe).then(
      () => true,
      (error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return false
        throw new UsageError(`${flag} ${named} is not writable (${error.code ?? error.message})`)
      },
    )
    if (found || dirname(probe) === probe) break
    probe = dirname(probe)
  }
  checkDirectoryWritable(probe, flag, named)
}

/**
 * Creates `path` (and missing parents) with `@attnlab/core`'s directory helper (never Node's
 * recursive `mkdir`, which loops forever under `/proc`). Returns the topmost directory this call
 * created, or undefined when `path` already existed (for {@link discardCreated}).
 *
 * @throws {@link UsageError} `<flag> <path> is not writable (...)`
 */
export async function createDirectory(path: string, flag = '--out'): Promise<string | undefined> {
  try {
    const first = await makeDirectories(path)
    await access(path, constants.W_OK)
    return first
  } catch (error) {
    throw new UsageError(
      `${flag} ${path} is not writable (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    )
  }
}

/**
 * Undoes what a failed fresh run wrote: removes the directories {@link createDirectory} created,
 * or, for a directory that existed and was empty before, the entries written into it. A directory
 * that held anything before is left alone. Never throws (the original failure matters more).
 *
 * @param path - the run directory
 * @param created - what `createDirectory` returned
 * @param wasEmpty - whether `path` existed empty before the run
 */
export async function discardCreated(path: string, created: string | undefined, wasEmpty: boolean): Promise<void> {
  try {
    if (created !== undefined) await rm(created, { recursive: true, force: true })
    else if (wasEmpty)
      for (const entry of await readdir(path)) await rm(join(path, entry), { recursive: true, force: true })
  } catch {
    // Best effort.
  }
}

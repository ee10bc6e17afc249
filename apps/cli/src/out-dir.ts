/**
 * Output directories of the training commands: check them before any work (never overwrite user
 * files without `--force`, fail early when they cannot be written), create them only once
 * everything is validated, and remove what a fresh run created when it fails before producing
 * anything worth keeping.
 */
import { access, constants, mkdir, readdir, rm, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { UsageError } from './errors.ts'

/** What is at a path. */
export type PathState =
  | { readonly kind: 'missing' }
  | { readonly kind: 'file' }
  | { readonly kind: 'directory'; readonly entries: readonly string[] }

/** What is at `path`: nothing, a file (anything not a directory), or a directory and its entries. */
export async function pathState(path: string): Promise<PathState> {
  let info
  try {
    info = await stat(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' }
    throw new UsageError(`${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
  }
  if (!info.isDirectory()) return { kind: 'file' }
  try {
    return { kind: 'directory', entries: await readdir(path) }
  } catch (error) {
    throw new UsageError(`${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
  }
}

/**
 * Checks, without creating anything, that `path` can be created or written: `path` itself when it
 * is a directory, else its nearest existing ancestor must be a writable directory.
 *
 * @param flag - the flag named in the error (`--out`)
 * @throws {@link UsageError} `<flag> <path> is not writable (...)`
 */
export async function checkWritable(path: string, flag = '--out'): Promise<void> {
  let probe = resolve(path)
  for (;;) {
    try {
      const info = await stat(probe)
      if (!info.isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' })
      await access(probe, constants.W_OK)
      return
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT' && dirname(probe) !== probe) {
        probe = dirname(probe)
        continue
      }
      throw new UsageError(`${flag} ${path} is not writable (${code ?? (error as Error).message})`)
    }
  }
}

/**
 * Creates `path` (and missing parents). Returns the topmost directory this call created, or
 * undefined when `path` already existed (for {@link discardCreated}).
 */
export async function createDirectory(path: string, flag = '--out'): Promise<string | undefined> {
  try {
    const first = await mkdir(path, { recursive: true })
    await access(path, constants.W_OK)
    return first
  } catch (error) {
    throw new UsageError(`${flag} ${path} is not writable (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
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
    else if (wasEmpty) for (const entry of await readdir(path)) await rm(join(path, entry), { recursive: true, force: true })
  } catch {
    // Best effort.
  }
}

/**
 * Node-only helpers: atomic file writes, safetensors files on disk, and the native kernels'
 * build and load helpers. Import from `@attnlab/core/node`; the main entry stays browser-safe.
 *
 * Every write goes to a temporary file in the same directory and is renamed into place, so a
 * crash or Ctrl-C never leaves a half-written file under the final name.
 *
 * @packageDocumentation
 */
import { randomBytes } from 'node:crypto'
import { mkdir, readFile, readdir, rename, rm, stat } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import writeFileAtomicLib from 'write-file-atomic'
import { AttnlabError, InvalidArgumentError, IoError } from './errors.ts'
import {
  parseSafetensors,
  serializeSafetensors,
  type SafetensorsFile,
  type SafetensorsTensorInput,
} from './safetensors.ts'

export {
  buildNativeKernels,
  loadNativeKernelProvider,
  loadedNativeKernelsInfo,
  nativeKernelsStatus,
  type NativeBuildResult,
  type NativeBuildStamp,
  type NativeKernelsStatus,
} from './kernels/native-provider.ts'

/**
 * Creates `dir` and its missing ancestors, like `mkdir(dir, { recursive: true })`, one level at
 * a time: Node's recursive `mkdir` never returns for a path under `/proc` (it retries the
 * `ENOENT` forever), while a plain `mkdir` fails at once. Use this instead of a recursive `mkdir`.
 *
 * @param dir - the directory to create
 * @returns the topmost directory this call created (what a failed run should remove), or
 *   undefined when `dir` already existed
 * @throws the file system's error (`ENOENT` on a file system that refuses the name, `EACCES`,
 *   `ENOTDIR`), or an `Error` when `dir` or an ancestor is a file
 * @category Files
 */
export async function makeDirectories(dir: string): Promise<string | undefined> {
  try {
    await mkdir(dir)
    return dir
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EEXIST') {
      if ((await stat(dir)).isDirectory()) return undefined
      throw new Error(`'${dir}' is a file, not a directory`, { cause: error })
    }
    if (code !== 'ENOENT') throw error
  }
  const parent = dirname(dir)
  if (parent === dir) throw new Error(`the root '${dir}' does not exist`)
  // The parent is missing (or this file system refuses the name): create the parent first.
  let parentExisted = false
  try {
    parentExisted = (await stat(parent)).isDirectory()
  } catch {
    parentExisted = false
  }
  // The parent exists: another process may have created it since the first mkdir (two workers
  // creating one sweep directory), so try once more; a parent that exists yet still refuses the
  // name is a file system that does not create it (/proc).
  if (parentExisted) {
    try {
      await mkdir(dir)
      return dir
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'EEXIST' && (await stat(dir)).isDirectory()) return undefined
      if (code !== 'ENOENT') throw error
    }
    throw Object.assign(new Error(`cannot create '${dir}' (ENOENT: the file system refuses it)`), { code: 'ENOENT' })
  }
  const first = await makeDirectories(parent)
  try {
    await mkdir(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST' && (await stat(dir)).isDirectory()) return first
    throw error
  }
  return first
}

/**
 * A file system error's text without the temporary path Node appends to it
 * (`ENOENT: no such file or directory, open '/x.svg.3961959609'` becomes
 * `ENOENT: no such file or directory`): a message names the path the caller gave, never a
 * temporary. Errors about other paths (a parent that is a file) keep them.
 */
function describeWriteError(error: unknown, isTemporary: (path: string) => boolean): string {
  const failure = error as NodeJS.ErrnoException & { dest?: unknown }
  const paths = [failure.path, failure.dest].filter((path): path is string => typeof path === 'string')
  if (typeof failure.syscall === 'string' && paths.some(isTemporary)) {
    const cut = failure.message.indexOf(`, ${failure.syscall}`)
    if (cut > 0) return failure.message.slice(0, cut)
  }
  return failure.message
}

/** Refuses an empty destination, which would name the current directory's parent entry. */
function checkDestination(path: string): void {
  if (path.trim() === '') throw new InvalidArgumentError(`the path to write must not be empty, got '${path}'`, { path })
}

/**
 * Writes a file atomically (temp file + fsync + rename, via the `write-file-atomic` library),
 * creating parent directories.
 *
 * @param path - destination path
 * @param data - file contents
 * @throws `IoError` (code `IO_ERROR`) naming the path (never the temporary file) when it
 *   cannot be written; `INVALID_ARGUMENT` for an empty path
 * @category Files
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  checkDestination(path)
  // write-file-atomic's temporary is `<path>.<number>`.
  const isTemporary = (candidate: string): boolean =>
    candidate.startsWith(`${path}.`) || candidate.startsWith(`${resolve(path)}.`)
  try {
    await makeDirectories(dirname(path))
    await writeFileAtomicLib(
      path,
      typeof data === 'string' ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength),
    )
  } catch (error) {
    throw new IoError(`cannot write '${path}': ${describeWriteError(error, isTemporary)}`, { path }, { cause: error })
  }
}

/**
 * Reads and validates a safetensors file (see `parseSafetensors`).
 *
 * @throws `SafetensorsError` on a malformed file, `IoError` (code `IO_ERROR`) if unreadable
 * @category Files
 */
export async function readSafetensorsFile(path: string): Promise<SafetensorsFile> {
  let bytes: Uint8Array
  try {
    const buffer = await readFile(path)
    bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
  } catch (error) {
    throw new IoError(`cannot read '${path}': ${(error as Error).message}`, { path }, { cause: error })
  }
  try {
    return parseSafetensors(bytes)
  } catch (error) {
    if (error instanceof AttnlabError) {
      ;(error as { message: string }).message = `${path}: ${error.message}`
    }
    throw error
  }
}

/**
 * Writes tensors to a safetensors file atomically.
 *
 * @category Files
 */
export async function writeSafetensorsFile(
  path: string,
  tensors: Readonly<Record<string, SafetensorsTensorInput>>,
  metadata: Readonly<Record<string, string>> = {},
): Promise<void> {
  await writeFileAtomic(path, serializeSafetensors(tensors, metadata))
}

/**
 * Builds a directory atomically: `fill` writes into a fresh temporary sibling directory, which
 * then replaces `path` (an existing directory at `path` is removed only after `fill` succeeded).
 * If `fill` throws, the temporary directory is removed and `path` is untouched. The directory gets
 * the ordinary permissions of a new directory (`0777` minus the umask, like `mkdir`), not the
 * owner-only `0700` of `mkdtemp`.
 *
 * The steps, each a rename on one file system: `fill` writes `.<name>.tmp-<random>`, which is then
 * renamed `.<name>.tmp-<random>.done` (complete); an existing `path` is renamed
 * `.<name>.tmp-<random>.old`; the complete copy is renamed to `path`; the old one is removed. A
 * process killed between two of these steps leaves only temporaries; {@link recoverDirectoryWrite}
 * (called by {@link removeStaleTemporaries}) renames a complete copy into place when `path` is
 * missing, and removes the rest.
 *
 * @param path - the final directory
 * @param fill - writes the directory's contents into the given temporary directory
 * @throws `IoError` (code `IO_ERROR`) naming `path` when the parent, the temporary
 *   directory or the final directory cannot be created (e.g. a file where a parent directory
 *   should be, a read-only or virtual file system); an `AttnlabError` thrown by `fill` is passed on
 * @category Files
 */
export async function writeDirectoryAtomic(path: string, fill: (tempDir: string) => Promise<void>): Promise<void> {
  checkDestination(path)
  const isTemporary = (candidate: string): boolean => basename(candidate).startsWith(`.${basename(path)}.tmp-`)
  const parent = dirname(path)
  let temp: string
  try {
    await makeDirectories(parent)
    temp = await makeTempDirectory(join(parent, `.${basename(path)}.tmp-`))
  } catch (error) {
    throw new IoError(
      `cannot write directory '${path}': ${describeWriteError(error, isTemporary)}`,
      { path },
      { cause: error },
    )
  }
  let current = temp
  try {
    await fill(temp)
    const done = `${temp}${COMPLETE_SUFFIX}`
    await rename(temp, done)
    current = done
    const old = `${temp}${OLD_SUFFIX}`
    let hadOld = false
    try {
      await stat(path)
      await rename(path, old)
      hadOld = true
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    }
    await rename(done, path)
    if (hadOld) await rm(old, { recursive: true, force: true })
  } catch (error) {
    await rm(current, { recursive: true, force: true })
    if (error instanceof AttnlabError) throw error
    throw new IoError(
      `cannot write directory '${path}': ${describeWriteError(error, isTemporary)}`,
      { path },
      { cause: error },
    )
  }
}

/** Suffix of a temporary directory whose `fill` finished (see {@link writeDirectoryAtomic}). */
const COMPLETE_SUFFIX = '.done'
/** Suffix of the previous directory moved aside while it is replaced. */
const OLD_SUFFIX = '.old'

/** What {@link recoverDirectoryWrite} found and did. @category Files */
export interface DirectoryWriteRecovery {
  /** True when a complete copy was renamed to the final path. */
  readonly recovered: boolean
  /** The temporaries still there that may hold the directory but are not verifiably complete. */
  readonly leftovers: readonly string[]
}

/**
 * Finishes a {@link writeDirectoryAtomic} that was killed between its renames. When `path` is
 * missing and a verifiably complete temporary copy of it exists (`.<name>.tmp-<random>.done`, or
 * a `.<name>.tmp-<random>` whose `.old` sibling shows the write had reached its renames), that
 * copy is renamed to `path` and the previous directory moved aside (`.old`) is removed. Nothing
 * else is touched: temporaries that might be half-written are only listed in `leftovers`.
 *
 * @param path - the directory that was being written
 * @returns whether it was recovered, and the other temporaries of `path`
 * @throws `IoError` (code `IO_ERROR`) naming the copy when the rename fails
 * @category Files
 */
export async function recoverDirectoryWrite(path: string): Promise<DirectoryWriteRecovery> {
  const parent = dirname(path)
  const prefix = `.${basename(path)}.tmp-`
  let entries: string[]
  try {
    entries = (await readdir(parent)).filter((entry) => entry.startsWith(prefix))
  } catch {
    return { recovered: false, leftovers: [] }
  }
  const exists = await stat(path).then(
    () => true,
    () => false,
  )
  const proven = (entry: string): boolean => !entry.endsWith(OLD_SUFFIX) && entries.includes(`${entry}${OLD_SUFFIX}`)
  const complete = entries.filter((entry) => entry.endsWith(COMPLETE_SUFFIX) || proven(entry))
  let recovered = false
  if (!exists && complete.length > 0) {
    // The newest complete copy (the last write that got that far).
    const times = await Promise.all(
      complete.map(async (entry) => ({ entry, time: (await stat(join(parent, entry))).mtimeMs })),
    )
    const newest = times.reduce((a, b) => (b.time > a.time ? b : a)).entry
    const source = join(parent, newest)
    try {
      await rename(source, path)
    } catch (error) {
      const message = `cannot recover '${path}' from its complete copy '${source}': ${(error as Error).message}`
      throw new IoError(message, { path: source }, { cause: error })
    }
    recovered = true
    const base = newest.endsWith(COMPLETE_SUFFIX) ? newest.slice(0, -COMPLETE_SUFFIX.length) : newest
    await rm(join(parent, `${base}${OLD_SUFFIX}`), { recursive: true, force: true })
  }
  const left = await readdir(parent).then(
    (all) => all.filter((entry) => entry.startsWith(prefix)).map((entry) => join(parent, entry)),
    () => [] as string[],
  )
  return { recovered, leftovers: left }
}

/**
 * Creates a fresh directory `prefix<random>` with the default mode (`0777` minus the umask, as
 * `mkdir` does; `mkdtemp` would make it `0700`, and it keeps that mode after the rename).
 */
async function makeTempDirectory(prefix: string): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const path = `${prefix}${randomBytes(6).toString('hex')}`
    try {
      await mkdir(path)
      return path
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 10) throw error
    }
  }
}

/**
 * Removes the temporary siblings that {@link writeDirectoryAtomic} leaves in `dir` when its
 * process is killed mid-write (`.<name>.tmp-<random>`, with `.done` or `.old`), for every name or
 * only for `name`. A missing `dir` is not an error. When the final directory `<dir>/<name>` is
 * missing and one of them is a verifiably complete copy, that copy is first renamed into place
 * ({@link recoverDirectoryWrite}) instead of removed.
 *
 * @param dir - the directory that holds (or will hold) atomically written directories
 * @param name - only the temporaries of this entry (e.g. `checkpoint`)
 * @returns the paths removed
 * @category Files
 */
export async function removeStaleTemporaries(dir: string, name?: string): Promise<string[]> {
  let entries: string[]
  try {
    entries = await readdir(dir)
  } catch {
    return []
  }
  const prefix = name === undefined ? null : `.${name}.tmp-`
  const names = new Set<string>()
  for (const entry of entries) {
    const match = /^\.(.+?)\.tmp-[^/]+$/.exec(entry)
    if (match !== null && (name === undefined || match[1] === name)) names.add(match[1] as string)
  }
  let recoveredAny = false
  for (const target of names) recoveredAny = (await recoverDirectoryWrite(join(dir, target))).recovered || recoveredAny
  if (recoveredAny) entries = await readdir(dir)
  const removed: string[] = []
  for (const entry of entries) {
    if (prefix !== null ? !entry.startsWith(prefix) : !/^\..+\.tmp-[^/]+$/.test(entry)) continue
    const path = join(dir, entry)
    try {
      await rm(path, { recursive: true, force: true })
      removed.push(path)
    } catch (error) {
      throw new IoError(
        `cannot remove the stale temporary '${path}': ${(error as Error).message}`,
        { path },
        { cause: error },
      )
    }
  }
  return removed
}

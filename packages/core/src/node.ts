/**
 * Node-only helpers: atomic file writes, safetensors files on disk, and the native kernels'
 * build and load helpers. Import from `@attnlab/core/node`; the main entry stays browser-safe.
 *
 * Every write goes to a temporary file in the same directory and is renamed into place, so a
 * crash or Ctrl-C never leaves a half-written file under the final name.
 *
 * @packageDocumentation
 */
import { mkdir, readFile, rename, rm, stat, mkdtemp } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import writeFileAtomicLib from 'write-file-atomic'
import { AttnlabError } from './errors.ts'
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
 * Writes a file atomically (temp file + fsync + rename, via the `write-file-atomic` library),
 * creating parent directories.
 *
 * @param path - destination path
 * @param data - file contents
 * @throws `AttnlabError` with code `IO_ERROR` naming the path when it cannot be written
 * @category Files
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  try {
    await mkdir(dirname(path), { recursive: true })
    await writeFileAtomicLib(path, typeof data === 'string' ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength))
  } catch (error) {
    throw new AttnlabError('IO_ERROR', `cannot write '${path}': ${(error as Error).message}`, { path }, { cause: error })
  }
}

/**
 * Reads and validates a safetensors file (see `parseSafetensors`).
 *
 * @throws `SafetensorsError` on a malformed file, `AttnlabError` `IO_ERROR` if unreadable
 * @category Files
 */
export async function readSafetensorsFile(path: string): Promise<SafetensorsFile> {
  let bytes: Uint8Array
  try {
    const buffer = await readFile(path)
    bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
  } catch (error) {
    throw new AttnlabError('IO_ERROR', `cannot read '${path}': ${(error as Error).message}`, { path }, { cause: error })
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
 * If `fill` throws, the temporary directory is removed and `path` is untouched.
 *
 * @param path - the final directory
 * @param fill - writes the directory's contents into the given temporary directory
 * @category Files
 */
export async function writeDirectoryAtomic(path: string, fill: (tempDir: string) => Promise<void>): Promise<void> {
  const parent = dirname(path)
  await mkdir(parent, { recursive: true })
  const temp = await mkdtemp(join(parent, `.${basename(path)}.tmp-`))
  try {
    await fill(temp)
    const old = `${temp}.old`
    let hadOld = false
    try {
      await stat(path)
      await rename(path, old)
      hadOld = true
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    }
    await rename(temp, path)
    if (hadOld) await rm(old, { recursive: true, force: true })
  } catch (error) {
    await rm(temp, { recursive: true, force: true })
    if (error instanceof AttnlabError) throw error
    throw new AttnlabError('IO_ERROR', `cannot write directory '${path}': ${(error as Error).message}`, { path }, { cause: error })
  }
}

import { mkdir, mkdtemp as makeTemp, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { AttnlabError } from './errors.ts'
import {
  makeDirectories,
  readSafetensorsFile,
  recoverDirectoryWrite,
  removeStaleTemporaries,
  writeDirectoryAtomic,
  writeFileAtomic,
  writeSafetensorsFile,
} from './node.ts'
import { SafetensorsError } from './safetensors.ts'

const made: string[] = []
async function mkdtemp(prefix: string): Promise<string> {
  const dir = await makeTemp(prefix)
  made.push(dir)
  return dir
}
afterAll(async () => {
  await Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true })))
})

describe('node file helpers', () => {
  it(
    'makeDirectories creates missing ancestors, returns ' + 'the topmost created, and fails at once under /proc',
    async () => {
      const base = await mkdtemp(join(tmpdir(), 'attnlab-mkdirs-'))
      expect(await makeDirectories(join(base, 'a', 'b'))).toBe(join(base, 'a'))
      expect(await makeDirectories(join(base, 'a', 'b'))).toBeUndefined()
      await writeFile(join(base, 'file'), 'x')
      await expect(makeDirectories(join(base, 'file'))).rejects.toThrow(/is a file, not a directory/)
      if (process.platform === 'linux')
        await expect(makeDirectories('/proc/attnlab-missing/x')).rejects.toMatchObject({ code: 'ENOENT' })
    },
  )

  it('makeDirectories called concurrently on one new path all succeed (two workers, one sweep directory)', async () => {
    for (let round = 0; round < 20; round++) {
      const base = await mkdtemp(join(tmpdir(), 'attnlab-mkdirs-race-'))
      const dir = join(base, 'sweep', 'trials', 'id')
      const created = await Promise.all(Array.from({ length: 8 }, () => makeDirectories(dir)))
      expect((await stat(dir)).isDirectory()).toBe(true)
      expect(created.filter((first) => first !== undefined).length).toBeGreaterThanOrEqual(1)
    }
  })

  it('writes files atomically, creating parents, leaving no temp files', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'attnlab-core-'))
    const path = join(dir, 'a', 'b', 'x.txt')
    await writeFileAtomic(path, 'hello')
    await writeFileAtomic(path, new Uint8Array([104, 105]))
    expect(await readFile(path, 'utf8')).toBe('hi')
    expect(await readdir(join(dir, 'a', 'b'))).toEqual(['x.txt'])
  })

  it('round-trips a safetensors file and names the path on corrupt input', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'attnlab-core-'))
    const path = join(dir, 'w.safetensors')
    await writeSafetensorsFile(path, { w: { dtype: 'F32', shape: [2], data: new Float32Array([1, 2]) } }, { k: 'v' })
    const file = await readSafetensorsFile(path)
    expect(file.metadata).toEqual({ k: 'v' })
    const bytes = await readFile(path)
    await writeFile(path, bytes.subarray(0, bytes.byteLength - 3))
    await expect(readSafetensorsFile(path)).rejects.toThrow(SafetensorsError)
    await expect(readSafetensorsFile(path)).rejects.toThrow(path)
    await expect(readSafetensorsFile(join(dir, 'missing.safetensors'))).rejects.toMatchObject({ code: 'IO_ERROR' })
  })

  it('replaces a directory only when filling it succeeds', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'attnlab-core-'))
    const dir = join(parent, 'ckpt')
    await writeDirectoryAtomic(dir, async (tmp) => {
      await writeFile(join(tmp, 'one.txt'), '1')
    })
    await expect(
      writeDirectoryAtomic(dir, async (tmp) => {
        await writeFile(join(tmp, 'two.txt'), '2')
        throw new Error('boom')
      }),
    ).rejects.toThrow(AttnlabError)
    expect(await readdir(dir)).toEqual(['one.txt'])
    expect(await readdir(parent)).toEqual(['ckpt'])
    await writeDirectoryAtomic(dir, async (tmp) => {
      await writeFile(join(tmp, 'three.txt'), '3')
    })
    expect(await readdir(dir)).toEqual(['three.txt'])
    expect(await readdir(parent)).toEqual(['ckpt'])
  })

  it('gives an atomically written directory the permissions of mkdir (0777 minus the umask), not 0700', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'attnlab-core-'))
    const dir = join(parent, 'ckpt')
    await writeDirectoryAtomic(dir, async (tmp) => {
      await writeFile(join(tmp, 'one.txt'), '1')
    })
    const plain = join(parent, 'plain')
    await mkdir(plain)
    expect((await stat(dir)).mode & 0o777).toBe((await stat(plain)).mode & 0o777)
    if (process.platform !== 'win32' && (process.umask() & 0o077) === 0o022)
      expect((await stat(dir)).mode & 0o777).toBe(0o755)
  })

  it('removes the temporaries a killed writeDirectoryAtomic left, and nothing else', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'attnlab-core-'))
    for (const name of ['.ckpt.tmp-abc123', '.ckpt.tmp-abc123.old', '.other.tmp-x9', 'ckpt', '.hidden', 'notes.tmp-1'])
      await mkdir(join(parent, name))
    await writeFile(join(parent, '.ckpt.tmp-abc123', 'model.safetensors'), 'half')
    expect((await removeStaleTemporaries(parent, 'ckpt')).length).toBe(2)
    expect((await readdir(parent)).sort()).toEqual(['.hidden', '.other.tmp-x9', 'ckpt', 'notes.tmp-1'])
    expect(await removeStaleTemporaries(parent)).toEqual([join(parent, '.other.tmp-x9')])
    expect((await readdir(parent)).sort()).toEqual(['.hidden', 'ckpt', 'notes.tmp-1'])
    expect(await removeStaleTemporaries(join(parent, 'missing'))).toEqual([])
  })

  it('recovers a directory write killed between its renames from the complete copy, and only from it', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'attnlab-recover-'))
    const path = join(parent, 'ckpt')
    const fill = (text: string) => async (dir: string) => writeFile(join(dir, 'f.txt'), text)
    await writeDirectoryAtomic(path, fill('v1'))
    expect(await readdir(parent)).toEqual(['ckpt'])
    // Killed after the old copy was moved aside, before the new one was renamed into place.
    await mkdir(join(parent, '.ckpt.tmp-r1.done'))
    await writeFile(join(parent, '.ckpt.tmp-r1.done', 'f.txt'), 'v2')
    await rename(path, join(parent, '.ckpt.tmp-r1.old'))
    expect(await recoverDirectoryWrite(path)).toEqual({ recovered: true, leftovers: [] })
    expect(await readFile(join(path, 'f.txt'), 'utf8')).toBe('v2')
    expect(await readdir(parent)).toEqual(['ckpt'])
    // The same state from a writer without the .done step: the .old sibling proves the copy complete.
    await rename(path, join(parent, '.ckpt.tmp-r2.old'))
    await writeDirectoryAtomic(join(parent, 'staging'), fill('v3'))
    await rename(join(parent, 'staging'), join(parent, '.ckpt.tmp-r2'))
    expect((await removeStaleTemporaries(parent, 'ckpt')).length).toBe(0)
    expect(await readFile(join(path, 'f.txt'), 'utf8')).toBe('v3')
    expect(await readdir(parent)).toEqual(['ckpt'])
    // A copy killed while being filled is not verifiably complete: left alone, and named.
    await rm(path, { recursive: true })
    await mkdir(join(parent, '.ckpt.tmp-r3'))
    expect(await recoverDirectoryWrite(path)).toEqual({ recovered: false, leftovers: [join(parent, '.ckpt.tmp-r3')] })
    await expect(stat(path)).rejects.toMatchObject({ code: 'ENOENT' })
    // Nothing to do when the directory exists.
    await writeDirectoryAtomic(path, fill('v4'))
    expect((await recoverDirectoryWrite(path)).recovered).toBe(false)
    expect(await readFile(join(path, 'f.txt'), 'utf8')).toBe('v4')
  })

  it('reports an unwritable destination as IO_ERROR', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'attnlab-core-'))
    await writeFile(join(parent, 'file'), 'x')
    await expect(writeFileAtomic(join(parent, 'file', 'sub', 'x.txt'), 'y')).rejects.toMatchObject({ code: 'IO_ERROR' })
  })

  it('reports a directory that cannot be created (parent or temporary) as IO_ERROR naming the path', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'attnlab-core-'))
    await writeFile(join(parent, 'file'), 'x')
    const fill = async (tmp: string): Promise<void> => writeFileAtomic(join(tmp, 'a.txt'), 'a')
    // The parent is a file: mkdir(parent) fails with EEXIST/ENOTDIR.
    const underFile = join(parent, 'file', 'sub')
    await expect(writeDirectoryAtomic(underFile, fill)).rejects.toMatchObject({
      name: 'IoError',
      code: 'IO_ERROR',
      details: { path: underFile },
    })
    await expect(writeDirectoryAtomic(underFile, fill)).rejects.toThrow(
      /cannot write directory '.*sub': '.*file' is a file, not a directory/,
    )
    await expect(writeDirectoryAtomic(join(parent, 'file', 'a', 'b'), fill)).rejects.toThrow(
      /cannot write directory '.*file\/a\/b': ENOTDIR: not a directory, mkdir '.*file\/a'/,
    )
    // The parent exists but cannot hold a new directory (the temporary sibling fails).
    if (process.platform === 'linux') {
      await expect(writeDirectoryAtomic('/proc/attnlab-x', fill)).rejects.toMatchObject({
        code: 'IO_ERROR',
        details: { path: '/proc/attnlab-x' },
      })
      await expect(writeFileAtomic('/proc/attnlab-x.txt', 'y')).rejects.toMatchObject({ code: 'IO_ERROR' })
      // Node's recursive mkdir never returns for a missing directory under /proc.
      await expect(writeDirectoryAtomic('/proc/attnlab-missing/x', fill)).rejects.toMatchObject({ code: 'IO_ERROR' })
      await expect(writeFileAtomic('/proc/attnlab-missing/x.txt', 'y')).rejects.toMatchObject({ code: 'IO_ERROR' })
    }
    expect(await readFile(join(parent, 'file'), 'utf8')).toBe('x')
  })

  it('names the path given, never a temporary, and refuses an empty path', async () => {
    const fill = async (tmp: string): Promise<void> => writeFileAtomic(join(tmp, 'a.txt'), 'a')
    if (process.platform === 'linux') {
      const failure = writeFileAtomic('/proc/attnlab-p.svg', 'y')
      await expect(failure).rejects.toThrow("cannot write '/proc/attnlab-p.svg': ENOENT: no such file or directory")
      await expect(failure).rejects.not.toThrow(/attnlab-p\.svg\.\d/)
      const directory = writeDirectoryAtomic('/proc/attnlab-x', fill)
      await expect(directory).rejects.toThrow(/^cannot write directory '\/proc\/attnlab-x': [A-Z]+: [^,]+$/)
    }
    await expect(writeFileAtomic('', 'y')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' })
    await expect(writeDirectoryAtomic('', fill)).rejects.toThrow("the path to write must not be empty, got ''")
  })
})

// Builds attnlab's native kernels (src/*.cc) into a Node addon with the system C++ compiler and
// Node's own headers: no node-gyp, no Python, no network, no OpenBLAS. One portable binary: on
// x86-64 with GCC the hot kernels are multiversioned (AVX-512 / AVX2 / baseline, picked at load).
//
// Used three ways:
//   node packages/core/native/build.mjs --postinstall   the monorepo's postinstall: never fails,
//                                                        prints one line
//   pnpm attnlab kernels build [--force]                 through @attnlab/core/node
//   import { buildNativeKernels } from './build.mjs'     (the same, programmatically)
//
// Output: <package>/native/build/attnlab_kernels.node plus attnlab_kernels.json (a stamp with the
// sources' hash: a binary built from other sources is never loaded), or, when the package folder
// is read-only, $XDG_CACHE_HOME/attnlab/native/<hash>-<platform>-<arch>/.
// Environment: CXX (compiler), ATTNLAB_SKIP_NATIVE_BUILD=1 (postinstall skips), ATTNLAB_NATIVE_OPENMP=0
// (no -fopenmp: OpenMP only supplies `omp simd` hints; threads come from src/pool.cc's own team),
// ATTNLAB_NATIVE_DIR (build and load there instead).
// @ts-check
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { homedir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const SOURCES = join(here, 'src')
/** Bumped when the build recipe changes in a way that matters for the binary. */
const RECIPE = 2
const NAME = 'attnlab_kernels'

/** Hash of the C++ sources and the recipe: identifies a compatible binary. */
export function nativeSourceHash() {
  const hash = createHash('sha256').update(`recipe ${RECIPE}\n`)
  for (const file of readdirSync(SOURCES)
    .filter((f) => /\.(cc|h)$/.test(f))
    .sort()) {
    hash.update(`${file}\n`).update(readFileSync(join(SOURCES, file), 'utf8').replace(/\r\n/g, '\n'))
  }
  return hash.digest('hex')
}

/**
 * Where a build may live, in lookup order: the package's own folder, then the user cache
 * (ATTNLAB_NATIVE_DIR, when set, replaces both).
 */
export function nativeCandidateDirectories(hash = nativeSourceHash()) {
  if (process.env.ATTNLAB_NATIVE_DIR) return [resolve(process.env.ATTNLAB_NATIVE_DIR)]
  const cacheRoot = process.env.XDG_CACHE_HOME || join(homedir(), '.cache')
  return [
    join(here, 'build'),
    join(cacheRoot, 'attnlab', 'native', `${hash.slice(0, 16)}-${process.platform}-${process.arch}`),
  ]
}

function writable(dir) {
  try {
    mkdirSync(dir, { recursive: true })
    accessSync(dir, constants.W_OK)
    return true
  } catch {
    return false
  }
}

function findCompiler() {
  const candidates = process.env.CXX ? [process.env.CXX] : ['c++', 'g++', 'clang++']
  for (const cxx of candidates) {
    const probe = spawnSync(cxx, ['--version'], { encoding: 'utf8' })
    if (probe.status === 0) return { cxx, version: (probe.stdout.split('\n')[0] ?? '').trim() }
  }
  return undefined
}

/** Node's headers (node_api.h) under Node's own installation prefix. */
export function nodeIncludeDirectory() {
  return resolve(process.execPath, '..', '..', 'include', 'node')
}

/**
 * Compiles the addon. Returns a result object; throws only on programming errors.
 * @param {{ force?: boolean, log?: (line: string) => void }} [options]
 * @returns {{ ok: boolean, path?: string, reason?: string, details?: string, skipped?: boolean, seconds?: number,
 *   flags?: string[] }}
 */
export function buildNativeKernels(options = {}) {
  const log = options.log ?? (() => {})
  const hash = nativeSourceHash()
  if (process.platform === 'win32')
    return { ok: false, reason: 'native kernels are not built on Windows (no MSVC recipe); the wasm kernels are used' }
  const dirs = nativeCandidateDirectories(hash)
  if (!options.force) {
    for (const dir of dirs) {
      const stamp = readStamp(dir)
      if (stamp?.sourceHash === hash && existsSync(join(dir, `${NAME}.node`)))
        return { ok: true, skipped: true, path: join(dir, `${NAME}.node`) }
    }
  }
  const include = nodeIncludeDirectory()
  if (!existsSync(join(include, 'node_api.h'))) {
    return {
      ok: false,
      reason: `Node's headers are not installed (no node_api.h in ${include}); install the Node.js development headers`,
    }
  }
  const compiler = findCompiler()
  if (compiler === undefined)
    return {
      ok: false,
      reason: 'no C++ compiler found (tried $CXX, c++, g++, clang++); install g++ (Debian: apt-get install g++)',
    }
  const outDir = dirs.find(writable)
  if (outDir === undefined) return { ok: false, reason: `no writable folder for the build (tried ${dirs.join(', ')})` }
  const sources = readdirSync(SOURCES)
    .filter((f) => f.endsWith('.cc'))
    .sort()
    .map((f) => join(SOURCES, f))
  const base = [
    '-O3',
    '-std=c++17',
    '-shared',
    '-fPIC',
    '-pthread',
    '-fvisibility=hidden',
    '-fno-math-errno',
    '-fno-trapping-math',
    `-DNODE_GYP_MODULE_NAME=${NAME}`,
    '-I',
    include,
  ]
  if (process.platform === 'darwin') base.push('-undefined', 'dynamic_lookup')
  const wantOpenMP = process.env.ATTNLAB_NATIVE_OPENMP !== '0'
  // Most capable first; fall back when a compiler lacks OpenMP or function multiversioning.
  const attempts = [...(wantOpenMP ? [['-fopenmp']] : []), [], ['-DATTN_NO_CLONES']]
  const temporary = join(outDir, `${NAME}.${process.pid}.tmp.node`)
  const started = Date.now()
  let lastError = ''
  for (const extra of attempts) {
    const flags = [...base, ...extra]
    log(`${compiler.cxx} ${flags.join(' ')} ...`)
    const run = spawnSync(compiler.cxx, [...flags, ...sources, '-o', temporary], { encoding: 'utf8' })
    if (run.status !== 0) {
      lastError = `${run.stderr || run.error?.message || ''}`.trim().split('\n').slice(0, 12).join('\n')
      continue
    }
    const check = spawnSync(
      process.execPath,
      ['-e', `const k = require(${JSON.stringify(temporary)}); process.stdout.write(JSON.stringify(k.info()))`],
      { encoding: 'utf8' },
    )
    if (check.status !== 0) {
      lastError = `the compiled addon does not load: ${check.stderr.trim().split('\n')[0]}`
      rmSync(temporary, { force: true })
      continue
    }
    const info = JSON.parse(check.stdout)
    const target = join(outDir, `${NAME}.node`)
    renameSync(temporary, target)
    const stamp = {
      sourceHash: hash,
      compiler: compiler.version,
      flags,
      openmp: info.openmp,
      cpuLevel: info.cpuLevel,
      node: process.version,
      platform: process.platform,
      arch: process.arch,
      builtAt: new Date().toISOString(),
    }
    writeFileSync(join(outDir, `${NAME}.json.tmp`), `${JSON.stringify(stamp, null, 2)}\n`)
    renameSync(join(outDir, `${NAME}.json.tmp`), join(outDir, `${NAME}.json`))
    return { ok: true, path: target, seconds: (Date.now() - started) / 1000, flags }
  }
  rmSync(temporary, { force: true })
  return { ok: false, reason: `the C++ compiler failed (${compiler.version})`, details: lastError }
}

/** The stamp of a build folder, or undefined. */
export function readStamp(dir) {
  try {
    return JSON.parse(readFileSync(join(dir, `${NAME}.json`), 'utf8'))
  } catch {
    return undefined
  }
}

/** The addon's file name. */
export const ADDON_FILE = `${NAME}.node`

/** Loads the addon module from `path` (Node's require). */
export function requireAddon(path) {
  return createRequire(import.meta.url)(path)
}

// ---- command line -------------------------------------------------------------------------------
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const postinstall = process.argv.includes('--postinstall')
  const force = process.argv.includes('--force')
  if (postinstall && process.env.ATTNLAB_SKIP_NATIVE_BUILD === '1') {
    console.log('attnlab: native kernels not built (ATTNLAB_SKIP_NATIVE_BUILD=1); the wasm kernels will be used')
    process.exit(0)
  }
  let result
  try {
    result = buildNativeKernels({ force, log: postinstall ? undefined : (line) => console.log(line) })
  } catch (error) {
    result = { ok: false, reason: error instanceof Error ? error.message : String(error) }
  }
  if (result.ok) {
    console.log(
      result.skipped
        ? `attnlab: native kernels up to date (${result.path})`
        : `attnlab: native kernels built in ${result.seconds?.toFixed(1)} s (${result.path})`,
    )
  } else {
    const detail = result.details ? `\n${result.details}` : ''
    if (postinstall)
      console.log(
        `attnlab: native kernels skipped: ${result.reason}; the wasm kernels will be used (retry: pnpm attnlab ` +
          'kernels build)',
      )
    else console.error(`attnlab: native kernels not built: ${result.reason}${detail}`)
  }
  process.exit(postinstall || result.ok ? 0 : 1)
}

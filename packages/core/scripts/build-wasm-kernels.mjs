// Compiles assembly/kernels.ts (AssemblyScript) to src/kernels/attnlab-kernels.wasm and records
// the sources' hash beside it (src/kernels/attnlab-kernels.json), which a test compares with the
// sources so a stale binary cannot be committed. Fails when the module has a data or start
// section (it shares the tfjs wasm backend's memory and must not write into it when instantiated).
//
//   pnpm --filter @attnlab/core build:kernels
// @ts-check
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const source = join(root, 'assembly', 'kernels.ts')
const out = join(root, 'src', 'kernels', 'attnlab-kernels.wasm')
const meta = join(root, 'src', 'kernels', 'attnlab-kernels.json')
// Keep in sync with src/kernels/wasm-binary.test.ts (the flags are part of the recorded hash).
const FLAGS = [
  '-O3',
  '--enable',
  'simd',
  '--runtime',
  'stub',
  '--importMemory',
  '--noExportMemory',
  '--noAssert',
  '--use',
  'abort=',
]

const require = createRequire(import.meta.url)
const ascPackage = require.resolve('assemblyscript/package.json')
const ascVersion = JSON.parse(readFileSync(ascPackage, 'utf8')).version
const asc = join(dirname(ascPackage), 'bin', 'asc.js')
const work = mkdtempSync(join(tmpdir(), 'attnlab-asc-'))
try {
  execFileSync(process.execPath, [asc, source, ...FLAGS, '-o', join(work, 'kernels.wasm')], { stdio: 'inherit' })
  const bytes = readFileSync(join(work, 'kernels.wasm'))
  // Section ids: 8 = start, 11 = data, 12 = data count.
  let p = 8
  const bad = []
  const leb = () => {
    let result = 0
    let shift = 0
    let byte
    do {
      byte = bytes[p++] ?? 0
      result |= (byte & 0x7f) << shift
      shift += 7
    } while (byte & 0x80)
    return result >>> 0
  }
  while (p < bytes.length) {
    const id = bytes[p++]
    const size = leb()
    if (id === 8 || id === 11 || id === 12) bad.push(id === 8 ? 'start section' : 'data section')
    p += size
  }
  if (bad.length > 0)
    throw new Error(`the compiled module has a ${bad.join(' and a ')}: it would write into the tfjs heap`)
  writeFileSync(out, bytes)
  const sha256 = (data) => createHash('sha256').update(data).digest('hex')
  const record = {
    source: 'assembly/kernels.ts',
    sourceSha256: sha256(`${readFileSync(source, 'utf8').replace(/\r\n/g, '\n')}\n${FLAGS.join(' ')}`),
    assemblyscript: ascVersion,
    flags: FLAGS,
    wasmSha256: sha256(bytes),
    bytes: bytes.length,
  }
  writeFileSync(meta, `${JSON.stringify(record, null, 2)}\n`)
  console.log(`attnlab-kernels.wasm: ${bytes.length} bytes, no data or start section (assemblyscript ${ascVersion})`)
} finally {
  rmSync(work, { recursive: true, force: true })
}

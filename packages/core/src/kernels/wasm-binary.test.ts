// The committed WebAssembly kernels must match their AssemblyScript sources and be safe to
// instantiate on the tfjs heap (no data or start section, only the memory import).
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const wasmUrl = new URL('./attnlab-kernels.wasm', import.meta.url)
const record = JSON.parse(readFileSync(new URL('./attnlab-kernels.json', import.meta.url), 'utf8')) as {
  sourceSha256: string
  wasmSha256: string
  flags: string[]
  bytes: number
}
const sha256 = (data: string | Uint8Array): string => createHash('sha256').update(data).digest('hex')

/** Section ids of a WebAssembly binary, in order. */
function sections(bytes: Uint8Array): number[] {
  expect(Array.from(bytes.subarray(0, 4))).toEqual([0, 0x61, 0x73, 0x6d])
  const ids: number[] = []
  let p = 8
  while (p < bytes.length) {
    const id = bytes[p++]!
    let size = 0
    let shift = 0
    let byte: number
    do {
      byte = bytes[p++]!
      size |= (byte & 0x7f) << shift
      shift += 7
    } while (byte & 0x80)
    ids.push(id)
    p += size >>> 0
  }
  return ids
}

describe('attnlab-kernels.wasm', () => {
  const bytes = new Uint8Array(readFileSync(wasmUrl))

  it(
    'was built from the current assembly/kernels.ts (run pnpm --filter @attnlab/core build:kernels after editing ' +
      'it)',
    () => {
      const source = readFileSync(new URL('../../assembly/kernels.ts', import.meta.url), 'utf8').replace(/\r\n/g, '\n')
      expect(sha256(`${source}\n${record.flags.join(' ')}`), 'the committed .wasm is stale').toBe(record.sourceSha256)
      expect(sha256(bytes)).toBe(record.wasmSha256)
      expect(bytes.length).toBe(record.bytes)
    },
  )

  it('has no data, data-count or start section and imports only env.memory', async () => {
    const ids = sections(bytes)
    expect(ids).not.toContain(8) // start
    expect(ids).not.toContain(11) // data
    expect(ids).not.toContain(12) // data count
    // The repo's lib (ES2023 + Node types) does not declare WebAssembly; type the bits used here.
    interface Descriptor {
      module?: string
      name: string
      kind: string
    }
    const wa = (
      globalThis as unknown as {
        WebAssembly: {
          compile(b: Uint8Array): Promise<object>
          Module: { imports(m: object): Descriptor[]; exports(m: object): Descriptor[] }
        }
      }
    ).WebAssembly
    const module = await wa.compile(bytes)
    expect(wa.Module.imports(module)).toEqual([{ module: 'env', name: 'memory', kind: 'memory' }])
    const exported = wa.Module.exports(module).map((e) => e.name)
    for (const name of [
      'gemm',
      'softmax',
      'attentionForward',
      'attentionBackward',
      'oneHotAttentionForward',
      'oneHotAttentionBackward',
      'adamw',
    ]) {
      expect(exported).toContain(name)
    }
    expect(exported).not.toContain('memory')
  })
})

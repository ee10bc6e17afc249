// Fuzz tests of the safetensors reader on disk (readSafetensorsFile): every corruption of a valid
// file either still parses or gives one SafetensorsError naming the file; never a crash, a hang, or an
// allocation sized from the header's claims. ATTNLAB_FUZZ_SCALE multiplies the budgets (pnpm bench).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { readSafetensorsFile } from './node.ts'
import { SafetensorsError, serializeSafetensors } from './safetensors.ts'
import {
  expectAcceptedOrRejected,
  fuzzSettings,
  HOSTILE_INTEGERS,
  HOSTILE_JSON_VALUES,
  jsonPaths,
  mutateBytes,
  withJsonValue,
  type ByteMutation,
} from './testing.ts'

const dir = mkdtempSync(join(tmpdir(), 'attnlab-safetensors-fuzz-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const path = join(dir, 'model.safetensors')

const valid = serializeSafetensors(
  {
    'a.weight': { dtype: 'F32', shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
    'b.bias': { dtype: 'F16', shape: [4], data: new Uint16Array([0x3c00, 0, 0xbc00, 1]) },
    ids: { dtype: 'I64', shape: [2], data: new BigInt64Array([1n, -1n]) },
  },
  { format: 'pt' },
)
const headerLength = Number(new DataView(valid.buffer).getBigUint64(0, true))
const header = JSON.parse(new TextDecoder().decode(valid.subarray(8, 8 + headerLength))) as Record<string, unknown>
const data = valid.subarray(8 + headerLength)
/** Region boundaries: length word, header JSON, each tensor's bytes. */
const boundaries = [0, 8, 8 + headerLength, 8 + headerLength + 24, 8 + headerLength + 32, valid.byteLength]

/** Counts of inputs tried, printed at the end (the reliability report quotes them). */
let tried = 0

async function check(bytes: Uint8Array, mustReject: boolean): Promise<void> {
  tried++
  writeFileSync(path, bytes)
  const outcome = await expectAcceptedOrRejected(() => readSafetensorsFile(path), {
    file: path,
    inputBytes: bytes.byteLength,
    mustReject,
  })
  if (outcome.error !== undefined) expect(outcome.error).toBeInstanceOf(SafetensorsError)
}

function withHeader(json: unknown, rawHeader?: Uint8Array): Uint8Array {
  const text = rawHeader ?? new TextEncoder().encode(JSON.stringify(json))
  const out = new Uint8Array(8 + text.byteLength + data.byteLength)
  new DataView(out.buffer).setBigUint64(0, BigInt(text.byteLength), true)
  out.set(text, 8)
  out.set(data, 8 + text.byteLength)
  return out
}

const mutation: fc.Arbitrary<ByteMutation> = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), length: fc.nat({ max: valid.byteLength - 1 }) }),
  fc.record({ kind: fc.constant('append' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
  fc.record({ kind: fc.constant('flip' as const), bit: fc.nat({ max: 8 * valid.byteLength - 1 }) }),
  fc.record({
    kind: fc.constant('write' as const),
    offset: fc.nat({ max: valid.byteLength - 1 }),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
  }),
  fc.record({
    kind: fc.constant('integer' as const),
    offset: fc.constant(0),
    width: fc.constant(8 as const),
    value: fc.constantFrom(...HOSTILE_INTEGERS),
  }),
)

describe('safetensors files under corruption (fuzz)', () => {
  afterAll(() => console.info(`safetensors fuzz: ${tried} inputs tried`))

  it('a valid file parses (the baseline every corruption starts from)', async () => {
    writeFileSync(path, valid)
    const file = await readSafetensorsFile(path)
    expect([...file.tensors.keys()]).toEqual(['a.weight', 'b.bias', 'ids'])
  })

  it('truncation at every region boundary and one byte either side is rejected', async () => {
    for (const boundary of boundaries) {
      for (const length of [boundary - 1, boundary, boundary + 1]) {
        if (length < 0 || length >= valid.byteLength) continue
        await check(valid.slice(0, length), true)
      }
    }
  })

  it('random byte corruptions: parsed or one SafetensorsError naming the file', async () => {
    await fc.assert(
      fc.asyncProperty(mutation, async (m) => {
        const mustReject = m.kind === 'truncate' || m.kind === 'append'
        await check(mutateBytes(valid, m), mustReject)
      }),
      fuzzSettings(300),
    )
  })

  it('sizes claimed far beyond the file are refused before anything of that size is allocated', async () => {
    // The length word (up to the 100 MB header limit), then a tensor whose shape and offsets both claim gigabytes.
    for (const claim of [valid.byteLength, 2 ** 20, 2 ** 24, 2 ** 26, 99_999_999, 100_000_000]) {
      const bytes = valid.slice()
      new DataView(bytes.buffer).setBigUint64(0, BigInt(claim), true)
      await check(bytes, true)
    }
    for (const elements of [2 ** 20, 2 ** 28, 2 ** 30, 2 ** 40]) {
      const tensor = { dtype: 'F32', shape: [elements], data_offsets: [0, 4 * elements] }
      await check(withHeader({ ...header, 'a.weight': tensor }), true)
      await check(withHeader({ ...header, huge: { ...tensor, data_offsets: [32, 32 + 4 * elements] } }), true)
    }
  })

  it('hostile header values (sizes, offsets, dtypes, shapes, types): parsed or one SafetensorsError', async () => {
    const paths = jsonPaths(header)
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: paths.length - 1 }),
        fc.constantFrom(
          ...HOSTILE_JSON_VALUES,
          [0, 2 ** 60],
          [-4, 20],
          [0, 8],
          [2 ** 53, 2 ** 53 + 24],
          'F33',
          'f32',
          'BOOL',
          [1e300],
          [-1, -24],
        ),
        async (index, value) => {
          await check(withHeader(withJsonValue(header, paths[index] as (string | number)[], value)), false)
        },
      ),
      fuzzSettings(300),
    )
  })

  it('non-UTF-8 and non-JSON headers are rejected', async () => {
    const text = new TextEncoder().encode(JSON.stringify(header))
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: text.byteLength - 1 }),
        fc.constantFrom([0xff], [0xc3], [0xed, 0xa0, 0x80], [0x7b], [0x00], [0x22]),
        async (at, bad) => {
          const raw = text.slice()
          raw.set(bad.slice(0, raw.byteLength - at), at)
          await check(withHeader(undefined, raw), false)
        },
      ),
      fuzzSettings(200),
    )
    for (const raw of ['', 'null', '[]', '"x"', '1', '{', '{"a":}', '\ufeff{}']) {
      await check(withHeader(undefined, new TextEncoder().encode(raw)), true)
    }
  })
})

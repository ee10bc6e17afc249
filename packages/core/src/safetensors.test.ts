import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  SafetensorsError,
  parseSafetensors,
  safetensorsToFloat32,
  safetensorsToInt32,
  serializeSafetensors,
} from './safetensors.ts'

/** Builds a file from a raw header object and a data section (to craft invalid files). */
function rawFile(header: unknown, data: Uint8Array, headerLength?: number): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header))
  const out = new Uint8Array(8 + json.byteLength + data.byteLength)
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLength ?? json.byteLength), true)
  out.set(json, 8)
  out.set(data, 8 + json.byteLength)
  return out
}

describe('safetensors', () => {
  it('round-trips tensors of several dtypes with metadata', () => {
    const bytes = serializeSafetensors(
      {
        a: { dtype: 'F32', shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6.5]) },
        tokens: { dtype: 'I32', shape: [3], data: new Int32Array([-1, 0, 7]) },
        mask: { dtype: 'U8', shape: [2, 2], data: new Uint8Array([1, 0, 0, 1]) },
        empty: { dtype: 'F32', shape: [0, 4], data: new Float32Array(0) },
      },
      { config: '{"d":50}' },
    )
    expect((new DataView(bytes.buffer).getUint32(0, true) + 8) % 8).toBe(0) // header padded to 8
    const file = parseSafetensors(bytes)
    expect(file.metadata).toEqual({ config: '{"d":50}' })
    expect([...file.tensors.keys()]).toEqual(['a', 'tokens', 'mask', 'empty'])
    expect(Array.from(safetensorsToFloat32(file.tensors.get('a')!, [2, 3]))).toEqual([1, 2, 3, 4, 5, 6.5])
    expect(Array.from(safetensorsToInt32(file.tensors.get('tokens')!))).toEqual([-1, 0, 7])
    expect(Array.from(safetensorsToInt32(file.tensors.get('mask')!))).toEqual([1, 0, 0, 1])
    expect(file.tensors.get('empty')!.shape).toEqual([0, 4])
  })

  it('widens F16 and BF16 exactly and narrows F64', () => {
    // 1.0, -2.0, 0.5, 65504 (max half), a subnormal, +inf in F16
    const f16 = new Uint16Array([0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x7c00])
    // BF16: the top 16 bits of float32 1.5, -0.25
    const bf16 = new Uint16Array([0x3fc0, 0xbe80])
    const bytes = serializeSafetensors({
      h: { dtype: 'F16', shape: [6], data: f16 },
      b: { dtype: 'BF16', shape: [2], data: bf16 },
      d: { dtype: 'F64', shape: [1], data: new Float64Array([0.1]) },
    })
    const file = parseSafetensors(bytes)
    expect(Array.from(safetensorsToFloat32(file.tensors.get('h')!))).toEqual([1, -2, 0.5, 65504, 2 ** -24, Infinity])
    expect(Array.from(safetensorsToFloat32(file.tensors.get('b')!))).toEqual([1.5, -0.25])
    expect(safetensorsToFloat32(file.tensors.get('d')!)[0]).toBeCloseTo(0.1, 7)
  })

  it('rejects truncated files', () => {
    const good = serializeSafetensors({ w: { dtype: 'F32', shape: [4], data: new Float32Array(4) } })
    expect(() => parseSafetensors(good.subarray(0, 4))).toThrow(/truncated/)
    expect(() => parseSafetensors(good.subarray(0, 20))).toThrow(/truncated/)
    const error = (() => {
      try {
        parseSafetensors(good.subarray(0, good.byteLength - 4))
      } catch (e) {
        return e as SafetensorsError
      }
      return undefined
    })()
    expect(error).toBeInstanceOf(SafetensorsError)
    expect(error!.code).toBe('INVALID_SAFETENSORS')
    expect(error!.tensor).toBe('w')
    expect(error!.message).toMatch(/run past the end/)
  })

  it('rejects an oversized header', () => {
    const bytes = rawFile({}, new Uint8Array(0), 200_000_000)
    expect(() => parseSafetensors(bytes)).toThrow(/exceeds the limit/)
  })

  it('rejects overlapping offsets, gaps and trailing bytes', () => {
    const data = new Uint8Array(16)
    expect(() =>
      parseSafetensors(
        rawFile(
          {
            a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
            b: { dtype: 'F32', shape: [2], data_offsets: [4, 12] },
          },
          data.subarray(0, 12),
        ),
      ),
    ).toThrow(/'b'.*overlap/)
    expect(() => parseSafetensors(rawFile({ a: { dtype: 'F32', shape: [2], data_offsets: [8, 16] } }, data))).toThrow(
      /gap/,
    )
    expect(() => parseSafetensors(rawFile({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }, data))).toThrow(
      /trailing bytes/,
    )
  })

  it('a huge data offset runs past the end of the data (not "must be two non-negative integers")', () => {
    const file = rawFile({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 1e20] } }, new Uint8Array(8))
    expect(() => parseSafetensors(file)).toThrow(
      "tensor 'a': data_offsets [0, about 1.00e+20] run past the end of the data (8 bytes; file truncated?)",
    )
    const negative = rawFile({ a: { dtype: 'F32', shape: [2], data_offsets: [-1, 8] } }, new Uint8Array(8))
    expect(() => parseSafetensors(negative)).toThrow(/data_offsets \[-1,8\] must be two non-negative integers/)
  })

  it('rejects wrong shapes, dtypes and malformed headers', () => {
    const data = new Uint8Array(8)
    const cases: [unknown, RegExp][] = [
      [{ w: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, /'w'.*need 12/],
      [{ w: { dtype: 'F8_E4M3', shape: [8], data_offsets: [0, 8] } }, /'w'.*unsupported dtype/],
      [{ w: { dtype: 'F32', shape: [-2], data_offsets: [0, 8] } }, /'w'.*shape/],
      [{ w: { dtype: 'F32', shape: [2], data_offsets: [8, 0] } }, /'w'.*end before/],
      [{ w: { dtype: 'F32', shape: [2], data_offsets: [0] } }, /'w'.*two non-negative/],
      [{ w: 3 }, /'w'.*not an object/],
      [[1, 2], /not an object/],
      [{ __metadata__: { a: 1 } }, /metadata/],
    ]
    for (const [header, pattern] of cases) {
      expect(() => parseSafetensors(rawFile(header, data))).toThrow(pattern)
    }
    const notJson = rawFile({}, new Uint8Array(0))
    notJson[8] = 0x7a // 'z'
    expect(() => parseSafetensors(notJson)).toThrow(/not valid UTF-8 JSON/)
    const file = parseSafetensors(rawFile({ w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }, data))
    expect(() => safetensorsToFloat32(file.tensors.get('w')!, [1, 2])).toThrow(/'w'.*shape \[2\] but \[1, 2\]/)
    expect(() => safetensorsToInt32(file.tensors.get('w')!)).toThrow(/not an integer type/)
  })

  it('rejects inconsistent input when writing', () => {
    expect(() => serializeSafetensors({ w: { dtype: 'F32', shape: [3], data: new Float32Array(2) } })).toThrow(
      /'w'.*need 12/,
    )
    expect(() =>
      serializeSafetensors({ __metadata__: { dtype: 'F32', shape: [0], data: new Float32Array(0) } }),
    ).toThrow(/reserved/)
  })

  it('never throws anything but SafetensorsError on arbitrary bytes (fuzz)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 256 }), (bytes) => {
        try {
          parseSafetensors(bytes)
        } catch (error) {
          if (!(error instanceof SafetensorsError)) throw error
        }
      }),
      { numRuns: 2000 },
    )
  })

  it('accepts what it writes and rejects every corruption of it (fuzz)', () => {
    const tensorArb = fc.record({
      shape: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }),
      dtype: fc.constantFrom('F32' as const, 'I32' as const, 'U8' as const),
    })
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string({ minLength: 1, maxLength: 6 }).filter((s) => s !== '__metadata__'),
          tensorArb,
          { maxKeys: 4 },
        ),
        fc.nat(),
        (spec, cut) => {
          const tensors: Record<
            string,
            { dtype: 'F32' | 'I32' | 'U8'; shape: number[]; data: Float32Array | Int32Array | Uint8Array }
          > = {}
          for (const [name, { shape, dtype }] of Object.entries(spec)) {
            const n = shape.reduce((a, b) => a * b, 1)
            const data =
              dtype === 'F32'
                ? new Float32Array(n).map((_, i) => i / 3)
                : dtype === 'I32'
                  ? new Int32Array(n).map((_, i) => i - 2)
                  : new Uint8Array(n).map((_, i) => i)
            tensors[name] = { dtype, shape, data }
          }
          const bytes = serializeSafetensors(tensors)
          const file = parseSafetensors(bytes)
          expect([...file.tensors.keys()].sort()).toEqual(Object.keys(tensors).sort())
          // Any strict prefix that removes data bytes must be rejected.
          const totalData = Object.values(tensors).reduce((s, t) => s + t.data.byteLength, 0)
          if (totalData > 0) {
            const length = bytes.byteLength - 1 - (cut % totalData)
            expect(() => parseSafetensors(bytes.subarray(0, length))).toThrow(SafetensorsError)
          }
        },
      ),
      { numRuns: 300 },
    )
  })
})

/**
 * The safetensors format (Hugging Face): an 8-byte little-endian header length N, N bytes of
 * UTF-8 JSON `{ name: { dtype, shape, data_offsets: [begin, end] }, "__metadata__": {..} }`,
 * then the raw little-endian tensor bytes. No safetensors library for JavaScript is well kept
 * on npm, so the reader is ours; it validates everything before handing out any tensor
 * and is fuzz-tested (`safetensors.test.ts`).
 *
 * Pure functions on bytes: works in Node and browsers. File helpers are in `@attnlab/core/node`.
 *
 * @module
 */
import { AttnlabError } from './errors.ts'
import { formatNumber } from './options.ts'

/**
 * Element types of the safetensors format.
 *
 * @category Safetensors
 */
export type SafetensorsDtype =
  | 'F64'
  | 'F32'
  | 'F16'
  | 'BF16'
  | 'I64'
  | 'I32'
  | 'I16'
  | 'I8'
  | 'U64'
  | 'U32'
  | 'U16'
  | 'U8'
  | 'BOOL'

/** Bytes per element of each dtype. @category Safetensors */
export const SAFETENSORS_DTYPE_SIZE: Readonly<Record<SafetensorsDtype, number>> = Object.freeze({
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U64: 8,
  U32: 4,
  U16: 2,
  U8: 1,
  BOOL: 1,
})

/**
 * Headers above this size are rejected (the reference implementation uses the same bound).
 *
 * @category Safetensors
 */
export const SAFETENSORS_MAX_HEADER_BYTES = 100_000_000

/**
 * A safetensors file is malformed or does not match what was asked of it. `tensor` names the
 * tensor at fault when there is one.
 *
 * @category Errors
 */
export class SafetensorsError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'SafetensorsError'
  /** The tensor at fault, if the problem is with one tensor. */
  readonly tensor: string | undefined
  constructor(message: string, tensor?: string, details: Record<string, unknown> = {}) {
    super('INVALID_SAFETENSORS', message, { tensor, ...details })
    this.tensor = tensor
  }
}

/** One tensor's entry in a safetensors file (bytes are a view into the file). @category Safetensors */
export interface SafetensorsEntry {
  readonly name: string
  readonly dtype: SafetensorsDtype
  readonly shape: readonly number[]
  /** The raw little-endian bytes (a view, not a copy). */
  readonly bytes: Uint8Array
}

/** A parsed safetensors file. @category Safetensors */
export interface SafetensorsFile {
  /** The `__metadata__` string map (empty if absent). */
  readonly metadata: Readonly<Record<string, string>>
  /** Tensors by name, in file order. */
  readonly tensors: ReadonlyMap<string, SafetensorsEntry>
}

/** A tensor to write. @category Safetensors */
export interface SafetensorsTensorInput {
  readonly dtype: SafetensorsDtype
  readonly shape: readonly number[]
  readonly data:
    | Float32Array
    | Float64Array
    | Int32Array
    | Int16Array
    | Int8Array
    | Uint8Array
    | Uint16Array
    | Uint32Array
    | BigInt64Array
    | BigUint64Array
}

const DTYPES = new Set(Object.keys(SAFETENSORS_DTYPE_SIZE))

function numel(shape: readonly number[]): number {
  let n = 1
  for (const d of shape) n *= d
  return n
}

/**
 * Parses and validates a safetensors file. Checks, before anything is returned: the header size
 * bound and that it fits in the file; valid UTF-8 JSON object; every entry has a known dtype, a
 * shape of non-negative integers, in-bounds `data_offsets` whose length equals
 * `numel * sizeof(dtype)`; offsets do not overlap and cover the data section exactly;
 * `__metadata__` is a string-to-string map.
 *
 * @param bytes - the whole file
 * @returns the metadata and tensor entries (views into `bytes`)
 * @throws {@link SafetensorsError} naming the tensor at fault on any violation
 * @category Safetensors
 */
export function parseSafetensors(bytes: Uint8Array): SafetensorsFile {
  if (bytes.byteLength < 8) {
    throw new SafetensorsError(
      `file is truncated: ${bytes.byteLength} bytes, but the 8-byte header length alone needs 8`,
    )
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const headerLength = view.getBigUint64(0, true)
  if (headerLength > BigInt(SAFETENSORS_MAX_HEADER_BYTES)) {
    throw new SafetensorsError(
      `header length ${headerLength} exceeds the limit of ${SAFETENSORS_MAX_HEADER_BYTES} bytes (corrupt or not a ` +
        'safetensors file)',
    )
  }
  const n = Number(headerLength)
  if (8 + n > bytes.byteLength) {
    throw new SafetensorsError(
      `file is truncated: the header says ${n} bytes of JSON but only ${bytes.byteLength - 8} follow`,
    )
  }
  let header: unknown
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n))
    header = JSON.parse(text)
  } catch (error) {
    // JSON.parse quotes the text around the fault, newlines included: keep the message on one line.
    throw new SafetensorsError(`header is not valid UTF-8 JSON (${(error as Error).message.replace(/\s+/g, ' ')})`)
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    throw new SafetensorsError('header JSON is not an object')
  }
  const dataStart = 8 + n
  const dataLength = bytes.byteLength - dataStart
  let metadata: Record<string, string> = {}
  const entries: { name: string; dtype: SafetensorsDtype; shape: number[]; begin: number; end: number }[] = []
  for (const [name, raw] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
        throw new SafetensorsError('__metadata__ must be an object of strings')
      }
      for (const [k, v] of Object.entries(raw)) {
        if (typeof v !== 'string') throw new SafetensorsError(`__metadata__ value '${k}' is not a string`)
      }
      metadata = raw as Record<string, string>
      continue
    }
    if (typeof raw !== 'object' || raw === null)
      throw new SafetensorsError(`tensor '${name}': entry is not an object`, name)
    const { dtype, shape, data_offsets: offsets } = raw as Record<string, unknown>
    if (typeof dtype !== 'string' || !DTYPES.has(dtype)) {
      throw new SafetensorsError(
        `tensor '${name}': unsupported dtype ${JSON.stringify(dtype)} (supported: ${[...DTYPES].join(', ')})`,
        name,
      )
    }
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && (d as number) >= 0)) {
      throw new SafetensorsError(
        `tensor '${name}': shape ${JSON.stringify(shape)} is not a list of non-negative integers`,
        name,
      )
    }
    if (
      !Array.isArray(offsets) ||
      offsets.length !== 2 ||
      !offsets.every((o) => Number.isInteger(o) && (o as number) >= 0)
    ) {
      throw new SafetensorsError(
        `tensor '${name}': data_offsets ${JSON.stringify(offsets)} must be two non-negative integers`,
        name,
      )
    }
    const [begin, end] = offsets as [number, number]
    // Offsets beyond 2^53 are integers JSON cannot hold exactly: they run past any file's end.
    const shown = `[${formatNumber(begin)}, ${formatNumber(end)}]`
    if (end < begin) throw new SafetensorsError(`tensor '${name}': data_offsets ${shown} end before they begin`, name)
    if (end > dataLength) {
      throw new SafetensorsError(
        `tensor '${name}': data_offsets ${shown} run past the end of the data (${dataLength} bytes; file truncated?)`,
        name,
      )
    }
    const expected = numel(shape as number[]) * SAFETENSORS_DTYPE_SIZE[dtype as SafetensorsDtype]
    if (end - begin !== expected) {
      throw new SafetensorsError(
        `tensor '${name}': ${end - begin} bytes stored but dtype ${dtype} and shape ` +
          `[${(shape as number[]).join(', ')}] need ${expected}`,
        name,
      )
    }
    entries.push({ name, dtype: dtype as SafetensorsDtype, shape: shape as number[], begin, end })
  }
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end)
  let cursor = 0
  for (const entry of sorted) {
    if (entry.begin < cursor) {
      throw new SafetensorsError(
        `tensor '${entry.name}': data_offsets [${entry.begin}, ${entry.end}] overlap another tensor`,
        entry.name,
      )
    }
    if (entry.begin > cursor) {
      throw new SafetensorsError(
        `tensor '${entry.name}': a gap of ${entry.begin - cursor} bytes precedes it (offsets must be contiguous)`,
        entry.name,
      )
    }
    cursor = entry.end
  }
  if (cursor !== dataLength) {
    throw new SafetensorsError(
      `${dataLength - cursor} trailing bytes after the last tensor are not described by the header`,
    )
  }
  const tensors = new Map<string, SafetensorsEntry>()
  for (const e of entries) {
    tensors.set(e.name, {
      name: e.name,
      dtype: e.dtype,
      shape: Object.freeze([...e.shape]),
      bytes: bytes.subarray(dataStart + e.begin, dataStart + e.end),
    })
  }
  return { metadata: Object.freeze({ ...metadata }), tensors }
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1
  const exponent = (h >> 10) & 0x1f
  const fraction = h & 0x3ff
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024)
  if (exponent === 31) return fraction === 0 ? sign * Infinity : NaN
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024)
}

/**
 * A tensor's values widened to float32 (F64 is narrowed; F16 and BF16 are widened exactly).
 *
 * @param entry - an entry from {@link parseSafetensors}
 * @param expectedShape - if given, the entry's shape must equal it
 * @returns a new Float32Array (a copy; never aliases the file)
 * @throws {@link SafetensorsError} for a non-float dtype or a shape mismatch
 * @category Safetensors
 */
export function safetensorsToFloat32(entry: SafetensorsEntry, expectedShape?: readonly number[]): Float32Array {
  checkShape(entry, expectedShape)
  const count = numel(entry.shape)
  const src = entry.bytes
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength)
  const out = new Float32Array(count)
  switch (entry.dtype) {
    case 'F32':
      for (let i = 0; i < count; i++) out[i] = view.getFloat32(4 * i, true)
      return out
    case 'F64':
      for (let i = 0; i < count; i++) out[i] = view.getFloat64(8 * i, true)
      return out
    case 'F16':
      for (let i = 0; i < count; i++) out[i] = halfToFloat(view.getUint16(2 * i, true))
      return out
    case 'BF16': {
      const bits = new Uint32Array(out.buffer)
      for (let i = 0; i < count; i++) bits[i] = view.getUint16(2 * i, true) << 16
      return out
    }
    default:
      throw new SafetensorsError(
        `tensor '${entry.name}': dtype ${entry.dtype} is not a floating-point type`,
        entry.name,
      )
  }
}

/**
 * A tensor's values as int32 (from I32, I16, I8, U16, U8, BOOL; I64/U64/U32 only when every value
 * fits).
 *
 * @throws {@link SafetensorsError} for a float dtype, values out of int32 range or a shape mismatch
 * @category Safetensors
 */
export function safetensorsToInt32(entry: SafetensorsEntry, expectedShape?: readonly number[]): Int32Array {
  checkShape(entry, expectedShape)
  const count = numel(entry.shape)
  const src = entry.bytes
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength)
  const out = new Int32Array(count)
  const read: ((i: number) => number | bigint) | undefined = {
    I32: (i: number) => view.getInt32(4 * i, true),
    I16: (i: number) => view.getInt16(2 * i, true),
    I8: (i: number) => view.getInt8(i),
    U32: (i: number) => view.getUint32(4 * i, true),
    U16: (i: number) => view.getUint16(2 * i, true),
    U8: (i: number) => view.getUint8(i),
    BOOL: (i: number) => view.getUint8(i),
    I64: (i: number) => view.getBigInt64(8 * i, true),
    U64: (i: number) => view.getBigUint64(8 * i, true),
  }[entry.dtype as string]
  if (read === undefined) {
    throw new SafetensorsError(`tensor '${entry.name}': dtype ${entry.dtype} is not an integer type`, entry.name)
  }
  for (let i = 0; i < count; i++) {
    const value = Number(read(i))
    if (value > 2147483647 || value < -2147483648) {
      throw new SafetensorsError(
        `tensor '${entry.name}': value ${value} at index ${i} does not fit in int32`,
        entry.name,
      )
    }
    out[i] = value
  }
  return out
}

function checkShape(entry: SafetensorsEntry, expectedShape?: readonly number[]): void {
  if (expectedShape === undefined) return
  if (entry.shape.length !== expectedShape.length || entry.shape.some((d, i) => d !== expectedShape[i])) {
    throw new SafetensorsError(
      `tensor '${entry.name}': shape [${entry.shape.join(', ')}] but [${expectedShape.join(', ')}] was expected`,
      entry.name,
      { shape: [...entry.shape], expected: [...expectedShape] },
    )
  }
}

/**
 * Serialises tensors to the safetensors format (header padded with spaces to 8 bytes, tensors in
 * the given order, contiguous).
 *
 * @param tensors - tensors by name (`__metadata__` is reserved)
 * @param metadata - string-to-string metadata stored as `__metadata__`
 * @returns the file bytes
 * @throws {@link SafetensorsError} if a tensor's data length does not match its shape and dtype
 * @category Safetensors
 */
export function serializeSafetensors(
  tensors: Readonly<Record<string, SafetensorsTensorInput>>,
  metadata: Readonly<Record<string, string>> = {},
): Uint8Array {
  const header: Record<string, unknown> = {}
  if (Object.keys(metadata).length > 0) {
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== 'string') throw new SafetensorsError(`metadata value '${k}' must be a string`)
    }
    header.__metadata__ = metadata
  }
  let offset = 0
  const parts: Uint8Array[] = []
  for (const [name, tensor] of Object.entries(tensors)) {
    if (name === '__metadata__') throw new SafetensorsError(`'__metadata__' is reserved and cannot name a tensor`, name)
    if (!DTYPES.has(tensor.dtype))
      throw new SafetensorsError(`tensor '${name}': unsupported dtype ${tensor.dtype}`, name)
    if (!tensor.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw new SafetensorsError(
        `tensor '${name}': shape [${tensor.shape.join(', ')}] is not a list of non-negative integers`,
        name,
      )
    }
    const size = numel(tensor.shape) * SAFETENSORS_DTYPE_SIZE[tensor.dtype]
    const bytes = new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength)
    if (bytes.byteLength !== size) {
      throw new SafetensorsError(
        `tensor '${name}': ${bytes.byteLength} bytes of data but dtype ${tensor.dtype} and shape ` +
          `[${tensor.shape.join(', ')}] need ${size}`,
        name,
      )
    }
    header[name] = { dtype: tensor.dtype, shape: [...tensor.shape], data_offsets: [offset, offset + size] }
    offset += size
    parts.push(bytes)
  }
  let json = new TextEncoder().encode(JSON.stringify(header))
  const padded = Math.ceil(json.byteLength / 8) * 8
  if (padded !== json.byteLength) {
    const withPad = new Uint8Array(padded).fill(0x20)
    withPad.set(json)
    json = withPad
  }
  const out = new Uint8Array(8 + json.byteLength + offset)
  new DataView(out.buffer).setBigUint64(0, BigInt(json.byteLength), true)
  out.set(json, 8)
  let cursor = 8 + json.byteLength
  for (const part of parts) {
    out.set(part, cursor)
    cursor += part.byteLength
  }
  return out
}

#!/usr/bin/env node
// Writes a safetensors file of seeded standard-normal float32 q, k, v, each [H, T, dHead], the
// input of `attnlab sparse apply` for long-context measurements (docs/performance.md). Plain Node,
// no dependencies: xorshift32 uniforms, Box-Muller normals; the same arguments give the same bytes.
// Usage: node tools/sparse/random-qkv.mjs T H dHead OUT.safetensors [seed]
import { writeFileSync } from 'node:fs'

const [T, H, dHead] = process.argv.slice(2, 5).map(Number)
const out = process.argv[5]
const seed = process.argv[6] === undefined ? 0x9e3779b9 : Number(process.argv[6])
for (const [name, value] of [
  ['T', T],
  ['H', H],
  ['dHead', dHead],
]) {
  if (!Number.isInteger(value) || value < 1) {
    console.error(`${name} must be a positive integer, got ${value}; usage: random-qkv.mjs T H dHead OUT [seed]`)
    process.exit(2)
  }
}
if (out === undefined || !Number.isInteger(seed) || seed <= 0 || seed >= 2 ** 32) {
  console.error('usage: random-qkv.mjs T H dHead OUT.safetensors [seed in 1..2^32-1]')
  process.exit(2)
}
let state = seed >>> 0
const uniform = () => {
  state ^= state << 13
  state >>>= 0
  state ^= state >>> 17
  state ^= state << 5
  state >>>= 0
  return (state + 0.5) / 4294967296
}
const normal = (n) => {
  const a = new Float32Array(n)
  for (let i = 0; i < n; i++) a[i] = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform())
  return a
}
const n = H * T * dHead
const tensors = { q: normal(n), k: normal(n), v: normal(n) }
const header = {}
let offset = 0
for (const [name, data] of Object.entries(tensors)) {
  header[name] = { dtype: 'F32', shape: [H, T, dHead], data_offsets: [offset, offset + data.byteLength] }
  offset += data.byteLength
}
let json = JSON.stringify(header)
while (json.length % 8 !== 0) json += ' '
const bytes = Buffer.alloc(8 + json.length + offset)
bytes.writeBigUInt64LE(BigInt(json.length), 0)
bytes.write(json, 8)
let at = 8 + json.length
for (const data of Object.values(tensors)) {
  Buffer.from(data.buffer).copy(bytes, at)
  at += data.byteLength
}
writeFileSync(out, bytes)

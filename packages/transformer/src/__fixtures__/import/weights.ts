/** Test support: random parameters for a configuration (seeded), as plain float32 data. */
import { Rng } from '@attnlab/core'
import type { TransformerConfig } from '../../config.ts'
import type { TensorMap } from '../../import/layout.ts'
import { parameterShapes } from '../../model.ts'

/** Every parameter of `config` filled with N(0, scale^2) values (norm weights around 1). */
export function randomWeights(config: TransformerConfig, seed: number, scale = 0.2): TensorMap {
  const rng = Rng.fromSeed(seed)
  const out: TensorMap = new Map()
  for (const [name, shape] of parameterShapes(config)) {
    const size = shape.reduce((a, b) => a * b, 1)
    const data = rng.split(name).fillNormal(new Float32Array(size), 0, scale)
    if (/ln\d?\.w$|ln_final\.w$/.test(name)) for (let i = 0; i < size; i++) data[i] = (data[i] as number) + 1
    out.set(name, { shape, data })
  }
  return out
}

/** Whether two tensor maps hold the same names, shapes and bit-identical values. */
export function sameWeights(
  a: ReadonlyMap<string, { shape: readonly number[]; data: Float32Array }>,
  b: ReadonlyMap<string, { shape: readonly number[]; data: Float32Array }>,
): string | undefined {
  if (a.size !== b.size)
    return (
      `sizes ${a.size} vs ${b.size}: ${[...a.keys()].filter((k) => !b.has(k)).join(',')} / ` +
      `${[...b.keys()].filter((k) => !a.has(k)).join(',')}`
    )
  for (const [name, x] of a) {
    const y = b.get(name)
    if (y === undefined) return `missing ${name}`
    if (x.shape.join() !== y.shape.join()) return `${name}: shape [${x.shape.join()}] vs [${y.shape.join()}]`
    for (let i = 0; i < x.data.length; i++)
      if (!Object.is(x.data[i], y.data[i])) return `${name}[${i}]: ${x.data[i]} vs ${y.data[i]}`
  }
  return undefined
}

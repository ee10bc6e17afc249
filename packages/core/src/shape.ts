/**
 * Shape checks for tensors at API boundaries.
 *
 * @module
 */
import type { Tensor } from '@tensorflow/tfjs-core'
import { ShapeError } from './errors.ts'

/**
 * One expected dimension: a number (exact), `null` (any size), or a string (a named size that
 * must be equal wherever the same name appears, e.g. `'batch'`).
 *
 * @category Shapes
 */
export type ExpectedDim = number | string | null

/**
 * Checks that a tensor (or a plain shape) has the expected rank and dimensions.
 *
 * Named dimensions bind on first use and must agree afterwards; pass `bindings` to share names
 * across several calls (for example `q` and `k` sharing `dHead`).
 *
 * @param tensor - the tensor or its shape
 * @param expected - the expected shape, e.g. `['batch', 'pos', 64]`
 * @param name - what the tensor is, for the error message (e.g. `'q'`)
 * @param bindings - named dimension sizes seen so far; updated in place
 * @returns the bindings (named sizes)
 * @throws {@link ShapeError} when the rank or a dimension differs
 * @example
 * ```ts
 * const dims = assertShape(q, ['batch', 'nHeads', 'pos', 'dHead'], 'q')
 * assertShape(k, ['batch', 'nKvHeads', 'pos', dims.dHead!], 'k', dims)
 * ```
 * @category Shapes
 */
export function assertShape(
  tensor: Tensor | readonly number[],
  expected: readonly ExpectedDim[],
  name = 'tensor',
  bindings: Record<string, number> = {},
): Record<string, number> {
  const shape: readonly number[] = Array.isArray(tensor) ? tensor : (tensor as Tensor).shape
  const show = (s: readonly unknown[]): string => `[${s.map((d) => (d === null ? '*' : String(d))).join(', ')}]`
  if (shape.length !== expected.length) {
    throw new ShapeError(
      `${name} has shape ${show(shape)} (rank ${shape.length}) but rank ${expected.length} ${show(expected)} was ` +
        'expected',
      { name, shape: [...shape], expected: [...expected] },
    )
  }
  for (let i = 0; i < expected.length; i++) {
    const want = expected[i]
    const got = shape[i] as number
    if (want === null || want === undefined) continue
    if (typeof want === 'number') {
      if (got !== want) {
        throw new ShapeError(
          `${name} has shape ${show(shape)} but dimension ${i} must be ${want} (expected ${show(expected)})`,
          { name, shape: [...shape], expected: [...expected], axis: i },
        )
      }
    } else {
      const bound = bindings[want]
      if (bound === undefined) bindings[want] = got
      else if (bound !== got) {
        throw new ShapeError(
          `${name} has shape ${show(shape)} but dimension ${i} ('${want}') must be ${bound} to match earlier inputs ` +
            `(expected ${show(expected)})`,
          { name, shape: [...shape], expected: [...expected], axis: i, dimension: want, bound },
        )
      }
    }
  }
  return bindings
}

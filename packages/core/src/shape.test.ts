import * as tf from '@tensorflow/tfjs-core'
import { beforeAll, describe, expect, it } from 'vitest'
import { useBackend } from './backend.ts'
import { ShapeError } from './errors.ts'
import { assertShape } from './shape.ts'

describe('assertShape', () => {
  beforeAll(async () => {
    await useBackend('cpu')
  })

  it('accepts matching shapes and binds named dimensions', () => {
    const q = tf.zeros([2, 4, 5, 8])
    const dims = assertShape(q, ['batch', 'nHeads', 'pos', 8], 'q')
    expect(dims).toEqual({ batch: 2, nHeads: 4, pos: 5 })
    assertShape([2, 1, 5, 8], ['batch', null, 'pos', 8], 'k', dims)
    q.dispose()
  })

  it('names the tensor, the axis and the expectation on mismatch', () => {
    expect(() => assertShape([2, 3], ['batch', 'pos', 'dModel'], 'x')).toThrow(
      /x has shape \[2, 3\] \(rank 2\) but rank 3/,
    )
    expect(() => assertShape([2, 3], [2, 4], 'x')).toThrow(/dimension 1 must be 4/)
    const bindings = { dHead: 8 }
    const error = (() => {
      try {
        assertShape([2, 16], ['batch', 'dHead'], 'k', bindings)
      } catch (e) {
        return e
      }
      return undefined
    })()
    expect(error).toBeInstanceOf(ShapeError)
    expect((error as ShapeError).code).toBe('SHAPE_MISMATCH')
    expect((error as Error).message).toMatch(/'dHead'\) must be 8/)
  })
})

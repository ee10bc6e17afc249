/**
 * Random orthogonal matrices (the teacher matrices of the sparse Markov chain).
 *
 * @module
 */
import { Matrix, QrDecomposition } from 'ml-matrix'
import type { Rng } from '@attnlab/core'
import { checkInteger } from './validate.ts'

/**
 * A Haar-distributed random orthogonal `size x size` matrix: the QR decomposition (Householder,
 * from `ml-matrix`) of a matrix of i.i.d. standard normal entries, with the sign correction
 * `Q <- Q diag(sign(diag(R)))` that makes the distribution exactly Haar (Mezzadri 2007,
 * "How to generate random matrices from the classical compact groups", section 5). Entries are
 * about `+-1/sqrt(size)`.
 *
 * Source: Yüksel et al., "Incremental Learning of Sparse Attention Patterns in Transformers"
 * (arXiv 2602.19143), teacher construction (the official code uses an SVD with unit singular
 * values, which is the same distribution).
 *
 * @param size - the dimension, >= 1
 * @param rng - the random stream (draws exactly `size * size` normals)
 * @returns the matrix, row-major (`out[row * size + column]`), with `Q^T Q = I` to about 1e-14
 * @throws `ConfigError` (`@attnlab/core`) if `size` is not a positive integer
 * @example
 * ```ts
 * const q = randomOrthogonalMatrix(50, Rng.fromSeed(0)) // Float64Array(2500)
 * ```
 * @category Sparse Markov chain
 */
export function randomOrthogonalMatrix(size: number, rng: Rng): Float64Array {
  checkInteger('size', size, 1, 4096)
  const gaussian = new Matrix(size, size)
  for (let row = 0; row < size; row++) {
    for (let column = 0; column < size; column++) gaussian.set(row, column, rng.normal())
  }
  const qr = new QrDecomposition(gaussian)
  const q = qr.orthogonalMatrix
  const r = qr.upperTriangularMatrix
  const out = new Float64Array(size * size)
  for (let column = 0; column < size; column++) {
    const sign = r.get(column, column) < 0 ? -1 : 1
    for (let row = 0; row < size; row++) out[row * size + column] = sign * q.get(row, column)
  }
  return out
}

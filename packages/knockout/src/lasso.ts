/**
 * The Lasso by cyclic coordinate descent, matching scikit-learn's `Lasso` (objective, intercept
 * handling, update order and duality-gap stopping rule), plus K-fold cross-validation of `alpha`
 * matching `LassoCV` with `precompute=False`. Pure JavaScript on float64; no tensors.
 *
 * Source: the sparse-recovery step of Bair, Xu, Sun & Kolter, "Compressed Sensing for Capability
 * Localization in Large Language Models" (arXiv 2603.03335; the authors' released code fits
 * `Lasso(alpha=0.01, max_iter=5000)` on standardized scores). Coordinate descent for the Lasso:
 * Friedman, Hastie & Tibshirani (2010), "Regularization paths for generalized linear models via
 * coordinate descent"; duality gap: the standard Lasso dual with the rescaled residual as the dual
 * point.
 *
 * @module
 */
import { checkRange, ConfigError, NonFiniteError, ShapeError } from '@attnlab/core'
import {
  booleanField,
  configSchema,
  customField,
  integerField,
  listField,
  numberField,
  parseConfig,
  type z,
} from '@attnlab/core/schema'

/**
 * A dense matrix in row-major order (`data[row * columns + column]`).
 *
 * @category Lasso
 */
export interface Matrix {
  /** Number of rows (samples, for a design matrix). */
  readonly rows: number
  /** Number of columns (features). */
  readonly columns: number
  /** `rows * columns` values, row-major. */
  readonly data: ArrayLike<number>
}

/**
 * The schema of {@link LassoOptions}: each option's meaning, range and default (scikit-learn's
 * `Lasso` defaults but `alpha`), declared once.
 *
 * @category Lasso
 */
export const lassoOptionsSchema = configSchema({
  /** L1 weight `alpha` of `1/(2n) ||y - Xw - b||^2 + alpha ||w||_1`. */
  alpha: numberField('L1 weight alpha', { min: 0 }).default(0.01),
  /** Fit an unpenalised intercept `b` (center X and y first). */
  fitIntercept: booleanField('fit an unpenalised intercept').default(true),
  /** Maximum number of full passes over the coordinates (`max_iter`). */
  maxIter: integerField('maximum passes over the coordinates', { min: 1 }).default(5000),
  /**
   * Tolerance `tol`: after a pass whose largest coefficient change is below `tol * max|w|`, stop
   * if the duality gap is below `tol * ||y_centered||^2`.
   */
  tol: numberField('convergence tolerance', { min: 0 }).default(1e-4),
  /** Constrain the coefficients to be >= 0. */
  positive: booleanField('constrain the coefficients to be >= 0').default(false),
  /** Initial coefficients (warm start), length `columns`; default zeros. */
  initial: customField<ArrayLike<number>>('initial coefficients (warm start)').optional(),
})

/**
 * Options of {@link lasso}. Defaults follow the paper (alpha 0.01, 5000 iterations) and
 * scikit-learn otherwise (tolerance 1e-4, intercept fitted).
 *
 * @category Lasso
 */
export type LassoOptions = Readonly<z.input<typeof lassoOptionsSchema>>

/**
 * A fitted Lasso.
 *
 * @category Lasso
 */
export interface LassoFit {
  /** Coefficients `w`, one per column (signed). */
  readonly coefficients: Float64Array
  /** Intercept `b` (0 without `fitIntercept`). */
  readonly intercept: number
  /** The `alpha` used. */
  readonly alpha: number
  /** In-sample coefficient of determination `1 - SS_res / SS_tot` (scikit-learn's `score`). */
  readonly r2: number
  /** Passes over the coordinates (scikit-learn's `n_iter_`). */
  readonly iterations: number
  /** Final duality gap divided by the number of samples (scikit-learn's `dual_gap_`). */
  readonly dualGap: number
  /** Whether the gap fell below the tolerance before `maxIter` passes. */
  readonly converged: boolean
  /** The objective `1/(2n) ||y - Xw - b||^2 + alpha ||w||_1` at the solution. */
  readonly objective: number
}

/**
 * Builds a {@link Matrix} from an array of equal-length rows.
 *
 * @param rows - `rows[i][j]` is entry `(i, j)`
 * @throws `ShapeError` (`@attnlab/core`) for ragged rows or an empty matrix
 * @category Lasso
 */
export function matrixFromRows(rows: readonly (readonly number[])[]): Matrix {
  if (rows.length === 0 || (rows[0] as readonly number[]).length === 0)
    throw new ShapeError('matrix has no rows or no columns')
  const columns = (rows[0] as readonly number[]).length
  const data = new Float64Array(rows.length * columns)
  rows.forEach((row, i) => {
    if (row.length !== columns) throw new ShapeError(`row ${i} has ${row.length} entries but row 0 has ${columns}`)
    data.set(row, i * columns)
  })
  return { rows: rows.length, columns, data }
}

function checkProblem(X: Matrix, y: ArrayLike<number>): void {
  const { rows, columns, data } = X
  if (!Number.isSafeInteger(rows) || rows < 1 || !Number.isSafeInteger(columns) || columns < 1) {
    throw new ShapeError(`design matrix is ${rows} x ${columns}; expected at least 1 x 1`, { rows, columns })
  }
  if (data.length !== rows * columns) {
    throw new ShapeError(`design matrix data has ${data.length} values; expected rows * columns = ${rows * columns}`, {
      rows,
      columns,
    })
  }
  if (y.length !== rows)
    throw new ShapeError(`y has ${y.length} values but X has ${rows} rows`, { rows, length: y.length })
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i] as number)) {
      throw new NonFiniteError(`X[${Math.floor(i / columns)}, ${i % columns}] is ${data[i]}; expected finite values`)
    }
  }
  for (let i = 0; i < rows; i++) {
    if (!Number.isFinite(y[i] as number)) throw new NonFiniteError(`y[${i}] is ${y[i]}; expected finite values`)
  }
}

type ResolvedLasso = Omit<z.output<typeof lassoOptionsSchema>, 'initial'>

/** The lasso options with their defaults, checked against {@link lassoOptionsSchema}. */
function resolveOptions(options: LassoOptions, where = 'lasso'): ResolvedLasso {
  const { initial: _, ...settings } = parseConfig(lassoOptionsSchema, options, where)
  return settings
}

/** Column-major copy of X with the column means removed (when centering); returns the means. */
function centered(
  X: Matrix,
  rowsUsed: ArrayLike<number> | null,
  center: boolean,
): { columnMajor: Float64Array; offsets: Float64Array; n: number } {
  const { columns, data } = X
  const n = rowsUsed === null ? X.rows : rowsUsed.length
  const columnMajor = new Float64Array(n * columns)
  for (let i = 0; i < n; i++) {
    const row = rowsUsed === null ? i : (rowsUsed[i] as number)
    for (let j = 0; j < columns; j++) columnMajor[j * n + i] = data[row * columns + j] as number
  }
  const offsets = new Float64Array(columns)
  if (center) {
    for (let j = 0; j < columns; j++) {
      const column = columnMajor.subarray(j * n, (j + 1) * n)
      const mean = pairwiseSum(column, 0, n) / n
      offsets[j] = mean
      for (let i = 0; i < n; i++) column[i] = (column[i] as number) - mean
    }
  }
  return { columnMajor, offsets, n }
}

/** Pairwise summation (numpy's `sum` for float64 arrays): blocks of 8 accumulators below 128 values. */
function pairwiseSum(values: ArrayLike<number>, start: number, length: number): number {
  if (length < 8) {
    let sum = 0
    for (let i = 0; i < length; i++) sum += values[start + i] as number
    return sum
  }
  if (length <= 128) {
    const r = [0, 0, 0, 0, 0, 0, 0, 0]
    for (let k = 0; k < 8; k++) r[k] = values[start + k] as number
    let i = 8
    for (; i < length - (length % 8); i += 8) {
      for (let k = 0; k < 8; k++) r[k] = (r[k] as number) + (values[start + i + k] as number)
    }
    let sum =
      (r[0] as number) +
      (r[1] as number) +
      ((r[2] as number) + (r[3] as number)) +
      ((r[4] as number) + (r[5] as number) + ((r[6] as number) + (r[7] as number)))
    for (; i < length; i++) sum += values[start + i] as number
    return sum
  }
  let half = Math.floor(length / 2)
  half -= half % 8
  return pairwiseSum(values, start, half) + pairwiseSum(values, start + half, length - half)
}

function dot(a: Float64Array, aStart: number, b: Float64Array, bStart: number, n: number): number {
  let sum = 0
  for (let i = 0; i < n; i++) sum += (a[aStart + i] as number) * (b[bStart + i] as number)
  return sum
}

/**
 * Coordinate descent on centered data for `1/2 ||y - Xw||^2 + l1 ||w||_1` (the objective scaled
 * by n; `l1 = alpha * n`), in place on `w`. Stopping rule as scikit-learn's
 * `enet_coordinate_descent`: after a pass whose largest change is below `tol * max|w|` (or with all
 * coefficients 0, or on the last pass), compute the duality gap and stop when it is below
 * `tol * ||y||^2`.
 */
function coordinateDescent(
  w: Float64Array,
  l1: number,
  X: Float64Array,
  y: Float64Array,
  n: number,
  p: number,
  maxIter: number,
  tol: number,
  positive: boolean,
): { gap: number; iterations: number; converged: boolean } {
  const squaredNorms = new Float64Array(p)
  for (let j = 0; j < p; j++) {
    const squares = new Float64Array(n)
    for (let i = 0; i < n; i++) squares[i] = (X[j * n + i] as number) ** 2
    squaredNorms[j] = pairwiseSum(squares, 0, n)
  }
  // Residual R = y - X w.
  const residual = Float64Array.from(y)
  for (let j = 0; j < p; j++) {
    const wj = w[j] as number
    if (wj === 0) continue
    for (let i = 0; i < n; i++) residual[i] = (residual[i] as number) - wj * (X[j * n + i] as number)
  }
  const gapTolerance = tol * dot(y, 0, y, 0, n)
  const changeTolerance = tol
  let gap = gapTolerance + 1
  let iteration = 0
  let converged = false
  for (; iteration < maxIter; iteration++) {
    let largestCoefficient = 0
    let largestChange = 0
    for (let j = 0; j < p; j++) {
      const norm = squaredNorms[j] as number
      if (norm === 0) continue
      const previous = w[j] as number
      const offset = j * n
      if (previous !== 0)
        for (let i = 0; i < n; i++) residual[i] = (residual[i] as number) + previous * (X[offset + i] as number)
      const correlation = dot(X, offset, residual, 0, n)
      let next: number
      if (positive && correlation < 0) next = 0
      else {
        const magnitude = Math.max(Math.abs(correlation) - l1, 0)
        next = magnitude === 0 ? 0 : (Math.sign(correlation) * magnitude) / norm // +0, never -0, below the threshold
      }
      w[j] = next
      if (next !== 0)
        for (let i = 0; i < n; i++) residual[i] = (residual[i] as number) - next * (X[offset + i] as number)
      largestChange = Math.max(largestChange, Math.abs(next - previous))
      largestCoefficient = Math.max(largestCoefficient, Math.abs(next))
    }
    if (largestCoefficient === 0 || largestChange / largestCoefficient < changeTolerance || iteration === maxIter - 1) {
      gap = dualityGap(w, l1, X, y, residual, n, p, positive)
      if (gap < gapTolerance) {
        converged = true
        break
      }
    }
  }
  return { gap, iterations: Math.min(iteration + 1, maxIter), converged }
}

/**
 * Duality gap of `1/2 ||R||^2 + l1 ||w||_1` at `w` with residual `R` (dual point: R scaled into the dual feasible set).
 */
function dualityGap(
  w: Float64Array,
  l1: number,
  X: Float64Array,
  y: Float64Array,
  residual: Float64Array,
  n: number,
  p: number,
  positive: boolean,
): number {
  let dualNorm = positive ? -Infinity : 0
  for (let j = 0; j < p; j++) {
    const correlation = dot(X, j * n, residual, 0, n)
    dualNorm = positive ? Math.max(dualNorm, correlation) : Math.max(dualNorm, Math.abs(correlation))
  }
  const residualNorm2 = dot(residual, 0, residual, 0, n)
  let scale: number
  let gap: number
  if (dualNorm > l1) {
    scale = l1 / dualNorm
    gap = 0.5 * (residualNorm2 + residualNorm2 * scale * scale)
  } else {
    scale = 1
    gap = residualNorm2
  }
  let l1Norm = 0
  for (let j = 0; j < p; j++) l1Norm += Math.abs(w[j] as number)
  return gap + l1 * l1Norm - scale * dot(residual, 0, y, 0, n)
}

function rSquared(X: Matrix, y: ArrayLike<number>, w: Float64Array, intercept: number): number {
  const { rows, columns, data } = X
  let mean = 0
  for (let i = 0; i < rows; i++) mean += y[i] as number
  mean /= rows
  let residual = 0
  let total = 0
  for (let i = 0; i < rows; i++) {
    let prediction = intercept
    for (let j = 0; j < columns; j++) prediction += (data[i * columns + j] as number) * (w[j] as number)
    residual += ((y[i] as number) - prediction) ** 2
    total += ((y[i] as number) - mean) ** 2
  }
  if (total === 0) return residual === 0 ? 1 : 0
  return 1 - residual / total
}

function fitCentered(
  X: Matrix,
  y: ArrayLike<number>,
  rowsUsed: ArrayLike<number> | null,
  settings: ResolvedLasso,
  alphas: readonly number[],
  initial: ArrayLike<number> | undefined,
): { coefficients: Float64Array[]; intercepts: number[]; gaps: number[]; iterations: number[]; converged: boolean[] } {
  const { columnMajor, offsets, n } = centered(X, rowsUsed, settings.fitIntercept)
  const p = X.columns
  const target = new Float64Array(n)
  for (let i = 0; i < n; i++) target[i] = y[rowsUsed === null ? i : (rowsUsed[i] as number)] as number
  let yOffset = 0
  if (settings.fitIntercept) {
    yOffset = pairwiseSum(target, 0, n) / n
    for (let i = 0; i < n; i++) target[i] = (target[i] as number) - yOffset
  }
  const w = new Float64Array(p)
  if (initial !== undefined) {
    if (initial.length !== p) throw new ShapeError(`initial has ${initial.length} coefficients; expected ${p}`)
    for (let j = 0; j < p; j++) w[j] = initial[j] as number
  }
  const out = {
    coefficients: [] as Float64Array[],
    intercepts: [] as number[],
    gaps: [] as number[],
    iterations: [] as number[],
    converged: [] as boolean[],
  }
  for (const alpha of alphas) {
    const result = coordinateDescent(
      w,
      alpha * n,
      columnMajor,
      target,
      n,
      p,
      settings.maxIter,
      settings.tol,
      settings.positive,
    )
    let intercept = 0
    if (settings.fitIntercept) {
      intercept = yOffset
      for (let j = 0; j < p; j++) intercept -= (offsets[j] as number) * (w[j] as number)
    }
    out.coefficients.push(Float64Array.from(w))
    out.intercepts.push(intercept)
    out.gaps.push(result.gap / n)
    out.iterations.push(result.iterations)
    out.converged.push(result.converged)
  }
  return out
}

/**
 * Fits the Lasso `min_{w,b} 1/(2n) ||y - Xw - b||^2 + alpha ||w||_1` by cyclic coordinate
 * descent, as scikit-learn's `Lasso(alpha, fit_intercept, max_iter, tol, positive,
 * precompute=False, selection='cyclic')`: same centering, same update order, same stopping rule,
 * so the coefficients agree to floating-point rounding (checked against scikit-learn 1.2.1 in
 * `lasso.test.ts`).
 *
 * @param X - design matrix `[n, p]` (for compressed sensing: the 0/1 knockout masks `[M, N]`)
 * @param y - targets `[n]` (for compressed sensing: standardized scores)
 * @param options - alpha (default 0.01), intercept, iterations, tolerance, sign constraint
 * @returns coefficients, intercept, in-sample R^2, iterations and duality gap
 * @throws `ShapeError` (`@attnlab/core`) when `y` or `initial` do not fit `X`; `ConfigError` (`@attnlab/core`) for a
 *   negative or non-finite `alpha`/`tol` or a non-positive `maxIter`; `NonFiniteError` (`@attnlab/core`)
 *   (`NON_FINITE`) for NaN/infinite data
 * @example
 * ```ts
 * const fit = lasso(matrixFromRows([[1, 0], [0, 1], [1, 1]]), [1, 2, 3], { alpha: 0.01 })
 * fit.coefficients // Float64Array [~0.97, ~1.97]
 * ```
 * @category Lasso
 */
export function lasso(X: Matrix, y: ArrayLike<number>, options: LassoOptions = {}): LassoFit {
  const settings = resolveOptions(options)
  checkProblem(X, y)
  const fit = fitCentered(X, y, null, settings, [settings.alpha], options.initial)
  const coefficients = fit.coefficients[0] as Float64Array
  const intercept = fit.intercepts[0] as number
  return {
    coefficients,
    intercept,
    alpha: settings.alpha,
    r2: rSquared(X, y, coefficients, intercept),
    iterations: fit.iterations[0] as number,
    dualGap: fit.gaps[0] as number,
    converged: fit.converged[0] as boolean,
    objective: lassoObjective(X, y, coefficients, intercept, settings.alpha),
  }
}

/**
 * The Lasso objective `1/(2n) ||y - Xw - b||^2 + alpha ||w||_1`.
 *
 * @param X - `[n, p]`
 * @param y - `[n]`
 * @param w - `[p]`
 * @param intercept - `b`
 * @param alpha - L1 weight
 * @throws `ShapeError` (`@attnlab/core`) when the sizes disagree
 * @category Lasso
 */
export function lassoObjective(
  X: Matrix,
  y: ArrayLike<number>,
  w: ArrayLike<number>,
  intercept: number,
  alpha: number,
): number {
  checkProblem(X, y)
  if (w.length !== X.columns) throw new ShapeError(`w has ${w.length} entries; expected ${X.columns}`)
  let loss = 0
  for (let i = 0; i < X.rows; i++) {
    let prediction = intercept
    for (let j = 0; j < X.columns; j++) prediction += (X.data[i * X.columns + j] as number) * (w[j] as number)
    loss += ((y[i] as number) - prediction) ** 2
  }
  let l1 = 0
  for (let j = 0; j < w.length; j++) l1 += Math.abs(w[j] as number)
  return loss / (2 * X.rows) + alpha * l1
}

/**
 * The default `alpha` grid of scikit-learn (`_alpha_grid`): `nAlphas` values log-spaced from
 * `alphaMax` down to `eps * alphaMax`, where `alphaMax = max_j |x_j . y| / n` on centered data
 * (the smallest alpha at which every coefficient is 0).
 *
 * @param X - `[n, p]`
 * @param y - `[n]`
 * @param options - `nAlphas` (default 100), `eps` (default 1e-3), `fitIntercept` (default true)
 * @returns the alphas, largest first
 * @throws `ShapeError` (`@attnlab/core`) / `ConfigError` (`@attnlab/core`) for bad inputs
 * @category Lasso
 */
export function lassoAlphaGrid(
  X: Matrix,
  y: ArrayLike<number>,
  options: { nAlphas?: number; eps?: number; fitIntercept?: boolean } = {},
): number[] {
  checkProblem(X, y)
  const nAlphas = options.nAlphas ?? 100
  const eps = options.eps ?? 1e-3
  checkRange('nAlphas', nAlphas, { min: 1, integer: true })
  checkRange('eps', eps, { min: 0, max: 1, minExclusive: true, maxExclusive: true })
  const fitIntercept = options.fitIntercept ?? true
  const { columnMajor, n } = centered(X, null, fitIntercept)
  const target = Float64Array.from({ length: n }, (_, i) => y[i] as number)
  if (fitIntercept) {
    const mean = pairwiseSum(target, 0, n) / n
    for (let i = 0; i < n; i++) target[i] = (target[i] as number) - mean
  }
  let alphaMax = 0
  for (let j = 0; j < X.columns; j++) alphaMax = Math.max(alphaMax, Math.abs(dot(columnMajor, j * n, target, 0, n)))
  alphaMax /= n
  const resolution = 1e-15 // numpy's finfo(float64).resolution
  if (alphaMax <= resolution) return new Array<number>(nAlphas).fill(resolution)
  if (nAlphas === 1) return [alphaMax]
  const high = Math.log10(alphaMax)
  const low = Math.log10(alphaMax * eps)
  const grid: number[] = []
  for (let k = 0; k < nAlphas; k++) grid.push(10 ** (low + ((high - low) * k) / (nAlphas - 1)))
  return grid.reverse()
}

/**
 * The schema of {@link LassoCVOptions}: the {@link lassoOptionsSchema} options of every fit (but
 * `alpha` and `initial`) and the cross-validation's own.
 *
 * @category Lasso
 */
export const lassoCVOptionsSchema = lassoOptionsSchema.omit({ alpha: true, initial: true }).extend({
  /** Number of contiguous folds (scikit-learn `KFold` without shuffling), at most the rows. */
  folds: integerField('number of contiguous folds', { min: 2 }).default(5),
  /** Explicit alpha grid (sorted largest first internally); default {@link lassoAlphaGrid}. */
  alphas: listField('explicit alpha grid', numberField('a grid alpha', { min: 0 })).optional(),
  /** Grid size when `alphas` is not given. */
  nAlphas: integerField('grid size', { min: 1 }).default(100),
  /** Ratio of the smallest to the largest grid alpha. */
  eps: numberField('smallest / largest grid alpha', { min: 0, max: 1, minExclusive: true, maxExclusive: true }).default(
    1e-3,
  ),
})

/**
 * Options of {@link lassoCV}.
 *
 * @category Lasso
 */
export type LassoCVOptions = Readonly<z.input<typeof lassoCVOptionsSchema>>

/**
 * The result of {@link lassoCV}.
 *
 * @category Lasso
 */
export interface LassoCVResult {
  /** The alpha with the lowest mean held-out squared error (first one on ties). */
  readonly alpha: number
  /** The grid, largest first. */
  readonly alphas: readonly number[]
  /** Held-out mean squared error per `[alpha][fold]`. */
  readonly msePath: readonly (readonly number[])[]
  /** Mean over folds per alpha. */
  readonly meanMse: readonly number[]
  /** The Lasso refit on all data at the chosen alpha. */
  readonly fit: LassoFit
}

/**
 * Chooses `alpha` by K-fold cross-validation and refits, as scikit-learn's
 * `LassoCV(cv=folds, precompute=False)`: the grid comes from all data, each fold fits the whole
 * path (largest alpha first, warm-started) on its training rows (centered with their own
 * means), the held-out error is the mean squared residual of the test rows, and the alpha with
 * the lowest mean over folds is refit on all data.
 *
 * @param X - `[n, p]`, `n >= folds`
 * @param y - `[n]`
 * @param options - folds (default 5), grid, and the {@link LassoOptions} of every fit
 * @throws `ConfigError` (`@attnlab/core`) for fewer than 2 folds or more folds than rows, or a bad grid;
 *   `ShapeError` (`@attnlab/core`) for mismatched sizes
 * @category Lasso
 */
export function lassoCV(X: Matrix, y: ArrayLike<number>, options: LassoCVOptions = {}): LassoCVResult {
  const cv = parseConfig(lassoCVOptionsSchema, options, 'lassoCV')
  checkProblem(X, y)
  const folds = cv.folds
  if (folds > X.rows) {
    throw new ConfigError(
      'folds',
      `${String(folds)} folds for ${X.rows} samples; expected an integer in [2, ${X.rows}]`,
    )
  }
  const { fitIntercept, maxIter, tol, positive } = cv
  const settings: ResolvedLasso = { alpha: 0, fitIntercept, maxIter, tol, positive }
  const alphas =
    cv.alphas !== undefined
      ? [...cv.alphas].sort((a, b) => b - a)
      : lassoAlphaGrid(X, y, { nAlphas: cv.nAlphas, eps: cv.eps, fitIntercept })
  const n = X.rows
  const msePath = alphas.map(() => new Array<number>(folds).fill(0))
  let start = 0
  for (let fold = 0; fold < folds; fold++) {
    const size = Math.floor(n / folds) + (fold < n % folds ? 1 : 0)
    const test = Array.from({ length: size }, (_, i) => start + i)
    const train = Array.from({ length: n - size }, (_, i) => (i < start ? i : i + size))
    start += size
    const path = fitCentered(X, y, train, settings, alphas, undefined)
    alphas.forEach((_, a) => {
      const w = path.coefficients[a] as Float64Array
      const intercept = path.intercepts[a] as number
      let sum = 0
      for (const row of test) {
        let prediction = intercept
        for (let j = 0; j < X.columns; j++) prediction += (X.data[row * X.columns + j] as number) * (w[j] as number)
        sum += (prediction - (y[row] as number)) ** 2
      }
      ;(msePath[a] as number[])[fold] = sum / test.length
    })
  }
  const meanMse = msePath.map((row) => row.reduce((s, v) => s + v, 0) / folds)
  let best = 0
  for (let a = 1; a < alphas.length; a++) if ((meanMse[a] as number) < (meanMse[best] as number)) best = a
  const alpha = alphas[best] as number
  const fit = lasso(X, y, { fitIntercept, maxIter, tol, positive, alpha })
  return { alpha, alphas, msePath, meanMse, fit }
}

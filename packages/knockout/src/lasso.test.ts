import { readFileSync } from 'node:fs'
import { AttnlabError, ConfigError, ShapeError } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { lasso, lassoAlphaGrid, lassoCV, lassoObjective, matrixFromRows, type Matrix } from './lasso.ts'

interface Case {
  name: string
  rows: number
  columns: number
  X: number[]
  y: number[]
  params: { alpha: number; fitIntercept: boolean; maxIter: number; tol: number; positive: boolean }
  expected: {
    coefficients: number[]
    intercept: number
    iterations: number
    dualGap: number
    r2: number
    converged: boolean
  }
}
interface CvCase {
  rows: number
  columns: number
  X: number[]
  y: number[]
  params: { folds: number; nAlphas: number; eps: number; maxIter: number; tol: number }
  expected: { alphas: number[]; msePath: number[][]; alpha: number; coefficients: number[]; intercept: number }
}
const fixture = JSON.parse(readFileSync(new URL('./__fixtures__/lasso-sklearn.json', import.meta.url), 'utf8')) as {
  sklearn: string
  cases: Case[]
  cv: CvCase
}

/** |a - e| <= atol + rtol |e| elementwise. */
function expectClose(
  actual: ArrayLike<number>,
  expected: readonly number[],
  rtol: number,
  atol: number,
  what: string,
): void {
  expect(actual.length, what).toBe(expected.length)
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i] as number
    const e = expected[i] as number
    if (!(Math.abs(a - e) <= atol + rtol * Math.abs(e))) expect.fail(`${what}[${i}]: got ${a}, scikit-learn ${e}`)
  }
}

describe(`lasso matches scikit-learn ${fixture.sklearn} Lasso`, () => {
  for (const c of fixture.cases) {
    it(c.name, () => {
      const X: Matrix = { rows: c.rows, columns: c.columns, data: c.X }
      const fit = lasso(X, c.y, c.params)
      const scale = Math.max(...c.expected.coefficients.map(Math.abs), 1)
      expectClose(fit.coefficients, c.expected.coefficients, 1e-6, 1e-9 * scale, 'coefficients')
      // Exact zeros stay exact zeros (the soft threshold).
      c.expected.coefficients.forEach((e, j) => {
        if (e === 0) expect(fit.coefficients[j], `coefficient ${j}`).toBe(0)
      })
      expectClose([fit.intercept], [c.expected.intercept], 1e-6, 1e-9 * scale, 'intercept')
      expect(fit.iterations).toBe(c.expected.iterations)
      expect(fit.converged).toBe(c.expected.converged)
      expectClose([fit.r2], [c.expected.r2], 1e-8, 1e-10, 'r2')
      expectClose([fit.dualGap], [c.expected.dualGap], 1e-3, 1e-12, 'dualGap')
    })
  }

  it('the solution satisfies the Lasso optimality conditions (subgradient), independently of scikit-learn', () => {
    const c = fixture.cases.find((k) => k.name === 'gaussian') as Case
    const X: Matrix = { rows: c.rows, columns: c.columns, data: c.X }
    const fit = lasso(X, c.y, { alpha: c.params.alpha, tol: 1e-12, maxIter: 100000 })
    const n = c.rows
    for (let j = 0; j < c.columns; j++) {
      let gradient = 0
      for (let i = 0; i < n; i++) {
        let prediction = fit.intercept
        for (let k = 0; k < c.columns; k++)
          prediction += (c.X[i * c.columns + k] as number) * (fit.coefficients[k] as number)
        gradient += (c.X[i * c.columns + j] as number) * ((c.y[i] as number) - prediction)
      }
      gradient /= n
      const w = fit.coefficients[j] as number
      if (w !== 0) expect(gradient).toBeCloseTo(c.params.alpha * Math.sign(w), 6)
      else expect(Math.abs(gradient)).toBeLessThanOrEqual(c.params.alpha + 1e-9)
    }
    // The objective does not decrease along any coordinate perturbation.
    const base = lassoObjective(X, c.y, fit.coefficients, fit.intercept, c.params.alpha)
    expect(base).toBeCloseTo(fit.objective, 12)
    for (let j = 0; j < c.columns; j++) {
      for (const step of [1e-4, -1e-4]) {
        const w = Float64Array.from(fit.coefficients)
        w[j] = (w[j] as number) + step
        expect(lassoObjective(X, c.y, w, fit.intercept, c.params.alpha)).toBeGreaterThanOrEqual(base - 1e-12)
      }
    }
  })
})

describe(`lassoCV matches scikit-learn ${fixture.sklearn} LassoCV(precompute=False)`, () => {
  const c = fixture.cv
  const X: Matrix = { rows: c.rows, columns: c.columns, data: c.X }
  it('grid, held-out errors, chosen alpha and refit', () => {
    const grid = lassoAlphaGrid(X, c.y, { nAlphas: c.params.nAlphas, eps: c.params.eps })
    expectClose(grid, c.expected.alphas, 1e-12, 0, 'alphas')
    const result = lassoCV(X, c.y, {
      folds: c.params.folds,
      nAlphas: c.params.nAlphas,
      eps: c.params.eps,
      maxIter: c.params.maxIter,
      tol: c.params.tol,
    })
    expectClose(result.alphas, c.expected.alphas, 1e-12, 0, 'alphas')
    result.msePath.forEach((row, a) => {
      expectClose(row, c.expected.msePath[a] as number[], 1e-6, 1e-12, `msePath[${a}]`)
    })
    expect(result.alpha).toBeCloseTo(c.expected.alpha, 14)
    expectClose(result.fit.coefficients, c.expected.coefficients, 1e-6, 1e-9, 'coefficients')
    expectClose([result.fit.intercept], [c.expected.intercept], 1e-6, 1e-9, 'intercept')
  })
  it('rejects bad fold counts and grids', () => {
    expect(() => lassoCV(X, c.y, { folds: 1 })).toThrow(ConfigError)
    expect(() => lassoCV(X, c.y, { folds: c.rows + 1 })).toThrow(/folds/)
    expect(() => lassoCV(X, c.y, { alphas: [] })).toThrow(/alphas/)
    expect(() => lassoCV(X, c.y, { alphas: [-1] })).toThrow(ConfigError)
    expect(() => lassoCV(X, c.y, { alphas: [-1] })).toThrow('Invalid alphas[0]: must be >= 0, got -1')
    expect(() => lassoCV(X, c.y, { alpha: 1 } as never)).toThrow(/is not a lassoCV parameter/)
  })
})

describe('lasso input checks', () => {
  const X = matrixFromRows([
    [1, 0],
    [0, 1],
    [1, 1],
  ])
  it('fits a tiny problem and returns zeros when y is constant', () => {
    const fit = lasso(X, [1, 2, 3], { alpha: 0.01 })
    expect(fit.coefficients[0]).toBeGreaterThan(0.9)
    expect(fit.coefficients[1]).toBeGreaterThan(1.9)
    const flat = lasso(X, [2, 2, 2])
    expect([...flat.coefficients]).toEqual([0, 0])
    expect(flat.intercept).toBe(2)
    expect(flat.r2).toBe(1)
  })
  it('rejects mismatched, non-finite and out-of-range inputs', () => {
    expect(() => lasso(X, [1, 2])).toThrow(ShapeError)
    expect(() => lasso({ rows: 2, columns: 2, data: [1, 2, 3] }, [1, 2])).toThrow(/rows \* columns = 4/)
    expect(() => lasso({ rows: 0, columns: 2, data: [] }, [])).toThrow(ShapeError)
    expect(() => lasso(X, [1, Number.NaN, 3])).toThrow(AttnlabError)
    expect(() => lasso({ rows: 1, columns: 1, data: [Infinity] }, [1])).toThrow(/X\[0, 0\] is Infinity/)
    expect(() => lasso(X, [1, 2, 3], { alpha: -1 })).toThrow(ConfigError)
    expect(() => lasso(X, [1, 2, 3], { maxIter: 0 })).toThrow(/maxIter/)
    expect(() => lasso(X, [1, 2, 3], { tol: Number.NaN })).toThrow(/tol/)
    expect(() => lasso(X, [1, 2, 3], { alhpa: 1 } as never)).toThrow(
      /^Invalid alhpa: is not a lasso parameter \(did you mean 'alpha'\?\); expected one of alpha, fitIntercept/,
    )
    expect(() => lasso(X, [1, 2, 3], { maxIter: 0 })).toThrow('Invalid maxIter: must be an integer >= 1, got 0')
    expect(() => lasso(X, [1, 2, 3], { initial: [1] })).toThrow(/initial has 1/)
    expect(() => matrixFromRows([[1, 2], [3]])).toThrow(/row 1 has 1/)
    expect(() => matrixFromRows([])).toThrow(ShapeError)
    expect(() => lassoAlphaGrid(X, [1, 2, 3], { nAlphas: 0 })).toThrow(/nAlphas/)
    expect(() => lassoAlphaGrid(X, [1, 2, 3], { eps: 2 })).toThrow(/eps/)
    expect(() => lassoObjective(X, [1, 2, 3], [1], 0, 0.1)).toThrow(/w has 1/)
  })
  it('a warm start from the solution converges in one pass', () => {
    const first = lasso(X, [1, 2, 3.5], { alpha: 0.05, tol: 1e-12 })
    const again = lasso(X, [1, 2, 3.5], { alpha: 0.05, tol: 1e-12, initial: first.coefficients })
    expect(again.iterations).toBe(1)
    expectClose(again.coefficients, [...first.coefficients], 1e-6, 1e-9, 'warm')
  })
})

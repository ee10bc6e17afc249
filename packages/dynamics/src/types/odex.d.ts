// Type declarations for the parts of `odex` 2.0.4 (Hairer & Wanner's ODEX, ported by Colin
// Smith; CommonJS) that @attnlab/dynamics uses. The package ships its TypeScript source instead
// of declarations, and that source does not compile under our strict settings, so the code
// imports the subpath '#odex', which package.json "imports" maps to this file for TypeScript
// (the "types" condition) and to the real package everywhere else. Keep in sync with
// node_modules/odex/src/odex.ts when upgrading.

/** y' = f(x, y); must return a new array of length n. */
export type Derivative = (x: number, y: number[]) => number[]

/** Called after every accepted step; return false to stop the integration. */
export type OutputFunction = (
  stepNumber: number,
  xOld: number,
  x: number,
  y: number[],
  dense?: (component: number, x: number) => number,
  // biome-ignore lint/suspicious/noConfusingVoidType: odex goes on unless it gets false; a no-return callback is valid
) => boolean | void

/** How a `solve` call ended. */
export declare enum Outcome {
  Converged = 0,
  MaxStepsExceeded = 1,
  EarlyReturn = 2,
}

/** The result of `Solver.solve`. */
export interface SolveResult {
  y: number[]
  outcome: Outcome
  nStep: number
  xEnd: number
  nAccept: number
  nReject: number
  nEval: number
}

/** The ODEX extrapolation solver (Gragg-Bulirsch-Stoer with step-size and order control). */
export declare class Solver {
  constructor(n: number)
  n: number
  maxSteps: number
  initialStepSize: number
  maxStepSize: number
  denseOutput: boolean
  relativeTolerance: number | number[]
  absoluteTolerance: number | number[]
  solve(f: Derivative, x: number, y0: number[], xEnd: number, solOut?: OutputFunction): SolveResult
}

/**
 * The vector field of the reduced gradient flow (Yüksel et al., arXiv 2602.19143, Eq. (4), and
 * the ODE simulator of the authors' released code).
 *
 * State: `V_k` (value vector of head `k` in the teacher-feature basis, length `F = K`) and the
 * attention logits `u_k` (length `T`), `s_k = softmax(u_k)`. Both variants are integrated in
 * logit coordinates, so `s_k` stays exactly on the simplex and tiny attention masses (which set
 * the escape times from the saddles) keep full relative precision:
 *
 * - replicator: `ds_k/dt = J(s_k) w_k` with `w_k = R^T V_k - lambda s_k` is integrated as
 *   `du_k/dt = w_k - (s_k . w_k) 1` (softmax is shift invariant and `d softmax = J du`, so this
 *   is the same flow for `s`);
 * - logit: `du_k/dt = J(s_k) R^T V_k - lambda u_k`;
 * - values: `dV_k/dt = R s_k - lambda V_k`, or, in the fast-value limit, `V` solves the
 *   (ridge) least-squares problem at every instant.
 *
 * @module
 */
import { Matrix, pseudoInverse, solve } from 'ml-matrix'
import { NonFiniteError, Rng } from '@attnlab/core'
import type { ResolvedDynamicsConfig } from './config.ts'
import { buildTarget, type DynamicsTarget } from './target.ts'

/**
 * The state of the model at one instant, decoded from the integrator's state vector.
 *
 * @category Model
 */
export interface DynamicsSnapshot {
  /** Value vectors, `[nHeads, nFeatures]` row-major (`V_k` is row `k`). */
  readonly values: Float64Array
  /** Attention distributions, `[nHeads, nCtx]` row-major (`s_k` is row `k`; rows sum to 1). */
  readonly attention: Float64Array
  /** `1/2 ||G - sum_k V_k s_k^T||_F^2` (dimensionless). */
  readonly loss: number
}

/**
 * The reduced gradient-flow ODE `dy/dt = f(y)` for one config, with its state layout:
 * `y = [V (nHeads * nFeatures, omitted in the fast-value limit), u (nHeads * nCtx)]`, each
 * block row-major by head.
 *
 * Use it to plug in your own integrator; {@link simulate} integrates it with ODEX.
 *
 * @example
 * ```ts
 * const system = new GradientFlowSystem(resolveDynamicsConfig())
 * const y0 = system.initialState()
 * const dy = system.derivative(y0)
 * system.evaluate(y0).loss // = L_0
 * ```
 * @category Model
 */
export class GradientFlowSystem {
  /** The resolved config. */
  readonly config: ResolvedDynamicsConfig
  /** The target `G`. */
  readonly target: DynamicsTarget
  /** Number of heads `h`. */
  readonly nHeads: number
  /** Number of features `F` (= spans `K`). */
  readonly nFeatures: number
  /** Number of positions `T`. */
  readonly nCtx: number
  /** Length of the state vector. */
  readonly dimension: number
  /** Offset of the logits `u` in the state vector (0 in the fast-value limit, else `h * F`). */
  readonly logitOffset: number
  /** Number of right-hand-side evaluations so far. */
  evaluations = 0

  private readonly attention: Float64Array
  private readonly values: Float64Array
  private readonly residual: Float64Array
  private readonly drive: Float64Array

  /** @param config - a config from {@link resolveDynamicsConfig} */
  constructor(config: ResolvedDynamicsConfig) {
    this.config = config
    this.target = buildTarget(config)
    this.nHeads = config.nHeads
    this.nFeatures = this.target.nFeatures
    this.nCtx = config.nCtx
    this.logitOffset = config.fastValue ? 0 : this.nHeads * this.nFeatures
    this.dimension = this.logitOffset + this.nHeads * this.nCtx
    this.attention = new Float64Array(this.nHeads * this.nCtx)
    this.values = new Float64Array(this.nHeads * this.nFeatures)
    this.residual = new Float64Array(this.nFeatures * this.nCtx)
    this.drive = new Float64Array(this.nCtx)
  }

  /**
   * The initial state: `V = 0` and logits `u_k = eps * T * z_k` with `z_k ~ N(0, I)` drawn from
   * `Rng.fromSeed(seed).split('dynamics:init')`, head by head (so head `k`'s noise does not
   * depend on `h`). `eps = 0` gives exactly uniform, identical heads.
   *
   * @returns a new state vector of length {@link GradientFlowSystem.dimension}
   */
  initialState(): number[] {
    const y = new Array<number>(this.dimension).fill(0)
    const { initNoise, seed } = this.config
    if (initNoise === 0) return y
    const rng = Rng.fromSeed(seed).split('dynamics:init')
    const scale = initNoise * this.nCtx
    for (let k = 0; k < this.nHeads; k++) {
      const head = rng.split(`head:${k}`)
      for (let p = 0; p < this.nCtx; p++) y[this.logitOffset + k * this.nCtx + p] = scale * head.normal()
    }
    return y
  }

  /** Fills `this.attention` (softmax of each head's logits), `this.values` and `this.residual`. */
  private decode(y: ArrayLike<number>): void {
    const { nHeads: h, nFeatures: F, nCtx: T, attention, values, residual } = this
    for (let k = 0; k < h; k++) {
      const base = this.logitOffset + k * T
      let max = -Infinity
      for (let p = 0; p < T; p++) max = Math.max(max, y[base + p] as number)
      if (!Number.isFinite(max)) {
        throw new NonFiniteError(`attention logits of head ${k} are not finite (max ${max}); the flow diverged`, {
          head: k,
        })
      }
      let total = 0
      for (let p = 0; p < T; p++) {
        const e = Math.exp((y[base + p] as number) - max)
        attention[k * T + p] = e
        total += e
      }
      for (let p = 0; p < T; p++) attention[k * T + p] = (attention[k * T + p] as number) / total
    }
    if (this.config.fastValue) {
      optimalValues(this.target, attention, y, h, this.config.weightDecay, values)
    } else {
      for (let i = 0; i < h * F; i++) values[i] = y[i] as number
    }
    residual.set(this.target.matrix)
    for (let k = 0; k < h; k++) {
      for (let f = 0; f < F; f++) {
        const v = values[k * F + f] as number
        if (v === 0) continue
        const row = f * T
        for (let p = 0; p < T; p++)
          residual[row + p] = (residual[row + p] as number) - v * (attention[k * T + p] as number)
      }
    }
  }

  /**
   * The right-hand side `f(y)` (the flow is autonomous).
   *
   * @param y - a state vector of length {@link GradientFlowSystem.dimension}
   * @returns `dy/dt`, a new array of the same length
   * @throws `NonFiniteError` (`@attnlab/core`) if the state is not finite (the flow diverged)
   */
  derivative(y: ArrayLike<number>): number[] {
    this.evaluations++
    this.decode(y)
    const { nHeads: h, nFeatures: F, nCtx: T, attention, values, residual, drive } = this
    const lambda = this.config.weightDecay
    const logit = this.config.variant === 'logit'
    const dy = new Array<number>(this.dimension)
    for (let k = 0; k < h; k++) {
      if (!this.config.fastValue) {
        // dV_k/dt = R s_k - lambda V_k
        for (let f = 0; f < F; f++) {
          let sum = 0
          const row = f * T
          for (let p = 0; p < T; p++) sum += (residual[row + p] as number) * (attention[k * T + p] as number)
          dy[k * F + f] = sum - lambda * (values[k * F + f] as number)
        }
      }
      // drive = R^T V_k (minus lambda s_k for the replicator's weight decay); mean = s_k . drive
      let mean = 0
      for (let p = 0; p < T; p++) {
        let sum = 0
        for (let f = 0; f < F; f++) sum += (residual[f * T + p] as number) * (values[k * F + f] as number)
        const s = attention[k * T + p] as number
        if (!logit && lambda !== 0) sum -= lambda * s
        drive[p] = sum
        mean += s * sum
      }
      const base = this.logitOffset + k * T
      for (let p = 0; p < T; p++) {
        const d = (drive[p] as number) - mean
        dy[base + p] = logit ? (attention[k * T + p] as number) * d - lambda * (y[base + p] as number) : d
      }
    }
    return dy
  }

  /**
   * Decodes a state: values, attention and loss (copies).
   *
   * @param y - a state vector of length {@link GradientFlowSystem.dimension}
   * @throws `NonFiniteError` (`@attnlab/core`) if the state is not finite
   */
  evaluate(y: ArrayLike<number>): DynamicsSnapshot {
    this.decode(y)
    let sum = 0
    for (const r of this.residual) sum += r * r
    if (!Number.isFinite(sum)) throw new NonFiniteError(`the loss is not finite (${sum}); the flow diverged`)
    return { values: this.values.slice(), attention: this.attention.slice(), loss: 0.5 * sum }
  }
}

/**
 * The fast-value limit: `V` minimising `1/2 ||G - V S^T||_F^2 + lambda/2 ||V||_F^2` for the
 * current attention `S` (`[T, h]`), with ml-matrix's SVD pseudo-inverse (`lambda = 0`, cutoff
 * `eps_machine * max(T, h) * sigma_max` as in LAPACK/numpy) or linear solve (`lambda > 0`).
 * Heads whose logits are bit-identical are merged first and share their group's optimum equally
 * (the minimum-norm split), so identical heads stay exactly identical.
 */
function optimalValues(
  target: DynamicsTarget,
  attention: Float64Array,
  y: ArrayLike<number>,
  h: number,
  lambda: number,
  out: Float64Array,
): void {
  const T = target.nCtx
  const F = target.nFeatures
  // Group bit-identical heads (compare logits; the logits are the state).
  const groupOf = new Int32Array(h).fill(-1)
  const representatives: number[] = []
  for (let k = 0; k < h; k++) {
    for (const [g, r] of representatives.entries()) {
      let same = true
      for (let p = 0; p < T && same; p++) same = y[k * T + p] === y[r * T + p]
      if (same) {
        groupOf[k] = g
        break
      }
    }
    if (groupOf[k] === -1) {
      groupOf[k] = representatives.length
      representatives.push(k)
    }
  }
  const d = representatives.length
  const counts = new Array<number>(d).fill(0)
  for (let k = 0; k < h; k++) {
    const g = groupOf[k] as number
    counts[g] = (counts[g] as number) + 1
  }
  const S = new Matrix(T, d) // distinct attention columns
  for (const [g, r] of representatives.entries())
    for (let p = 0; p < T; p++) S.set(p, g, attention[r * T + p] as number)
  const G = new Matrix(F, T)
  for (let f = 0; f < F; f++) for (let p = 0; p < T; p++) G.set(f, p, target.matrix[f * T + p] as number)
  let W: Matrix // [F, d]: each group's total value
  if (lambda === 0) {
    W = G.mmul(pseudoInverse(S.transpose()))
  } else {
    // W = G S (S^T S + diag(lambda / n_g))^-1, i.e. solve (S^T S + D) W^T = S^T G^T.
    const gram = S.transpose().mmul(S)
    for (let g = 0; g < d; g++) gram.set(g, g, gram.get(g, g) + lambda / (counts[g] as number))
    W = solve(gram, S.transpose().mmul(G.transpose())).transpose()
  }
  for (let k = 0; k < h; k++) {
    const g = groupOf[k] as number
    for (let f = 0; f < F; f++) out[k * F + f] = W.get(f, g) / (counts[g] as number)
  }
}

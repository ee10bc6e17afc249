/**
 * A Markov chain over the hidden history of a sparse-Markov context, used by the Monte-Carlo
 * oracle: given the last `n` tokens `c` of a window, it samples the tokens before `c` (and, in
 * the pooled variant, the generated position) from their exact posterior under the process.
 *
 * @module
 * @internal
 */
import type { Rng } from '@attnlab/core'
import { windowWeights, type SparseMarkovTask, type TeacherTables } from './sparse-markov.ts'

const TINY = 1e-200

/**
 * Gibbs / Metropolis-Hastings sampler of `pi(t, history | c)` for a sparse Markov chain.
 *
 * State: a sequence prefix `seq[0 .. T + n)` whose last `n` tokens are the fixed context `c`
 * (`T = t + C - n` hidden tokens before it; the first `C` tokens of the sequence are the uniform
 * burn-in), and the generated position `t` whose window ends with `c`. Its target is the
 * process's joint probability `p(seq) = d^-min(C, T+n) prod_{j >= C} P(seq_j | seq_{j-C..j-1})`
 * restricted to sequences ending in `c` (times the uniform prior `1/genLen` on `t`).
 *
 * Moves (each leaves the target invariant):
 * - Forward resimulation of the last `m` hidden tokens from the process, accepted with the
 *   likelihood ratio of the context (see `resimulate`).
 * - Gibbs updates of the hidden tokens from the `C - n` window tokens before `c` back to `C`
 *   tokens before those (the ones that shape their distribution); each conditional is computed
 *   exactly over the `d` values.
 * - If `moveT`, a Metropolis-Hastings move that adds a uniform token at the front of the
 *   sequence (`t + 1`) or drops the first one (`t - 1`), each proposed with probability 1/2.
 *
 * Started from a draw of the process itself, every state of the chain is an exact posterior
 * draw (the chain starts in stationarity), so averages of the Rao-Blackwellised next-token
 * mixture {@link ContextPosteriorChain.mixture} are unbiased for `q(. | c)`.
 */
export class ContextPosteriorChain {
  private readonly d: number
  private readonly C: number
  private readonly G: number
  private readonly tables: TeacherTables
  private readonly seq: Int32Array
  private readonly weights: Float64Array
  private readonly base: Float64Array
  private readonly vector: Float64Array
  private readonly savedTokens: Int32Array
  /** Generated position of the window that ends with the context. */
  t = 0
  /** Hidden tokens before the context. */
  hidden = 0

  constructor(
    task: SparseMarkovTask,
    private readonly n: number,
    private readonly moveT: boolean,
  ) {
    this.d = task.vocabSize
    this.C = task.contextLength
    this.G = task.config.genLen
    this.tables = task.tables()
    this.seq = new Int32Array(task.seqLength + 2)
    this.weights = new Float64Array(this.d)
    this.base = new Float64Array(this.d)
    this.vector = new Float64Array(this.d)
    this.savedTokens = new Int32Array(task.seqLength + 2)
  }

  /** Starts from a sequence of the process: its window at generated position `t` ends with the context. */
  start(sequence: Int32Array, offset: number, t: number): void {
    this.t = t
    this.hidden = t + this.C - this.n
    this.seq.set(sequence.subarray(offset, offset + t + this.C), 0)
  }

  /**
   * One sweep: `resimulations` forward-resimulation moves, Gibbs updates of the relevant hidden
   * tokens (oldest first), then a position move.
   *
   * @returns the number of accepted resimulations
   */
  sweep(rng: Rng, resimulations: number): number {
    const { C, n } = this
    let accepted = 0
    let likelihood = resimulations > 0 ? this.contextLogLikelihood() : 0
    for (let r = 0; r < resimulations; r++) {
      const after = this.resimulate(rng, likelihood)
      if (after !== null) {
        likelihood = after
        accepted++
      }
    }
    const first = Math.max(0, this.hidden - (C - n) - C)
    for (let j = first; j < this.hidden; j++) {
      this.conditional(j)
      this.seq[j] = rng.categorical(this.weights, 0, this.d, 1)
    }
    if (this.moveT) this.movePosition(rng)
    return accepted
  }

  /**
   * Metropolis-Hastings with the process itself as proposal: the last `m` hidden tokens (`m`
   * uniform in `1 .. hidden`) are redrawn from the process given the older ones, and the move is
   * accepted with probability `min(1, L(c | new) / L(c | old))`, `L` the probability of the
   * context tokens given the history (the prior terms cancel). Global moves that Gibbs updates
   * cannot make when the teacher is nearly deterministic.
   */
  private resimulate(rng: Rng, before: number): number | null {
    const { d, C, seq } = this
    const m = 1 + rng.int(this.hidden)
    const from = this.hidden - m
    const saved = this.savedTokens
    saved.set(seq.subarray(from, this.hidden))
    for (let j = from; j < this.hidden; j++) {
      if (j < C) {
        seq[j] = rng.int(d)
      } else {
        const total = windowWeights(this.tables, seq, j - C, C, d, this.vector)
        seq[j] = rng.categorical(this.vector, 0, d, total)
      }
    }
    const after = this.contextLogLikelihood()
    if (Math.log(rng.float()) < after - before) return after
    seq.set(saved.subarray(0, m), from)
    return null
  }

  /** `log L(c | history)`: the log probability of the generated context tokens given their windows. */
  private contextLogLikelihood(): number {
    const { d, C, seq } = this
    let logLikelihood = 0
    for (let k = Math.max(this.hidden, C); k < this.hidden + this.n; k++) {
      const total = windowWeights(this.tables, seq, k - C, C, d, this.vector)
      logLikelihood += Math.log(this.vector[seq[k] as number] as number) - Math.log(total)
    }
    return logLikelihood
  }

  /**
   * The Rao-Blackwellised next-token distribution: the token just before the context is summed
   * out over its exact conditional, `sum_v pi(v | rest) P(. | window(v))`, written to `out`.
   */
  mixture(out: Float64Array): void {
    const { d, C, n, seq, base, vector } = this
    const { exp } = this.tables
    const j = this.hidden - 1
    this.conditional(j)
    const end = this.hidden + n // next token position; its window is seq[end - C, end)
    const pos = j - (end - C)
    for (let y = 0; y < d; y++) base[y] = 1
    for (let p = 0; p < C; p++) {
      if (p === pos) continue
      const o = (p * d + (seq[end - C + p] as number)) * d
      for (let y = 0; y < d; y++) base[y] = (base[y] as number) * (exp[o + y] as number)
    }
    out.fill(0)
    const saved = seq[j] as number
    for (let v = 0; v < d; v++) {
      const weight = this.weights[v] as number
      if (weight === 0) continue
      const o = (pos * d + v) * d
      let total = 0
      for (let y = 0; y < d; y++) {
        const value = (base[y] as number) * (exp[o + y] as number)
        vector[y] = value
        total += value
      }
      if (!(total > TINY) || total === Infinity) {
        seq[j] = v
        total = windowWeights(this.tables, seq, end - C, C, d, vector)
      }
      const scale = weight / total
      for (let y = 0; y < d; y++) out[y] = (out[y] as number) + scale * (vector[y] as number)
    }
    seq[j] = saved
  }

  /** Writes the normalised conditional `pi(seq_j = v | everything else)` into `this.weights`. */
  private conditional(j: number): void {
    const { d, C, n, seq, base, weights } = this
    const { exp } = this.tables
    const end = this.hidden + n
    const saved = seq[j] as number
    // Own factor: P(seq_j = v | previous C tokens) for generated positions (burn-in: uniform).
    if (j >= C) {
      windowWeights(this.tables, seq, j - C, C, d, weights)
    } else {
      weights.fill(1)
    }
    // Factors of the later tokens whose window contains position j: P(seq_k | window(v)) =
    // base[seq_k] E[pos, v, seq_k] / sum_y base[y] E[pos, v, y]. Weights are rescaled to a
    // maximum of 1 after each factor, so no logarithms are needed.
    for (let k = j + 1; k < Math.min(j + C + 1, end); k++) {
      if (k < C) continue
      const pos = j - (k - C)
      const target = seq[k] as number
      for (let y = 0; y < d; y++) base[y] = 1
      for (let p = 0; p < C; p++) {
        if (p === pos) continue
        const o = (p * d + (seq[k - C + p] as number)) * d
        for (let y = 0; y < d; y++) base[y] = (base[y] as number) * (exp[o + y] as number)
      }
      const baseTarget = base[target] as number
      let max = 0
      for (let v = 0; v < d; v++) {
        const o = (pos * d + v) * d
        let total = 0
        for (let y = 0; y < d; y++) total += (base[y] as number) * (exp[o + y] as number)
        let ratio: number
        if (total > TINY && total < Infinity) {
          ratio = (baseTarget * (exp[o + target] as number)) / total
        } else {
          seq[j] = v
          const slowTotal = windowWeights(this.tables, seq, k - C, C, d, this.vector)
          ratio = (this.vector[target] as number) / slowTotal
          seq[j] = saved
        }
        const w = (weights[v] as number) * ratio
        weights[v] = w
        if (w > max) max = w
      }
      if (max > 0 && max < 1e-100) for (let v = 0; v < d; v++) weights[v] = (weights[v] as number) / max
    }
    let sum = 0
    for (let v = 0; v < d; v++) sum += weights[v] as number
    if (!(sum > 0) || sum === Infinity) {
      // Everything underflowed: keep the current value (a valid, if lazy, Gibbs step).
      weights.fill(0)
      weights[saved] = 1
      return
    }
    for (let v = 0; v < d; v++) weights[v] = (weights[v] as number) / sum
  }

  /** Log probability of `seq[0 .. length)` under the process (burn-in uniform). */
  private logJoint(length: number): number {
    const { d, C, seq } = this
    let logProbability = -Math.min(C, length) * Math.log(d)
    for (let j = C; j < length; j++) {
      const total = windowWeights(this.tables, seq, j - C, C, d, this.vector)
      logProbability += Math.log(this.vector[seq[j] as number] as number) - Math.log(total)
    }
    return logProbability
  }

  /** Metropolis-Hastings: add a uniform token at the front (t + 1) or drop the first (t - 1). */
  private movePosition(rng: Rng): void {
    const { d, seq } = this
    const length = this.hidden + this.n
    const add = rng.float() < 0.5
    if (add) {
      const token = rng.int(d)
      if (this.t + 1 >= this.G) return
      const before = this.logJoint(length)
      seq.copyWithin(1, 0, length)
      seq[0] = token
      const after = this.logJoint(length + 1)
      if (Math.log(rng.float()) < after - before + Math.log(d)) {
        this.t++
        this.hidden++
      } else {
        seq.copyWithin(0, 1, length + 1)
      }
    } else {
      if (this.t === 0) return
      const before = this.logJoint(length)
      const first = seq[0] as number
      seq.copyWithin(0, 1, length)
      const after = this.logJoint(length - 1)
      if (Math.log(rng.float()) < after - before - Math.log(d)) {
        this.t--
        this.hidden--
      } else {
        seq.copyWithin(1, 0, length - 1)
        seq[0] = first
      }
    }
  }
}

/**
 * Seeded, splittable randomness shared by every attnlab package.
 *
 * The generator is xoroshiro128+ from `pure-rand` (a well-kept library; the generator is
 * Blackman & Vigna's, 2^128 - 1 period). One integer seed fixes everything: each purpose
 * (`'data'`, `'init'`, `'sampling'`, ...) gets its own independent stream through
 * {@link Rng.split}, derived from the seed and the purpose name only, so adding draws in one
 * purpose never shifts the numbers of another.
 *
 * The same seed gives the same numbers on every platform: all draws are integer arithmetic
 * plus IEEE-754 double operations (`Math.log`, `Math.sqrt`, `Math.cos` in {@link Rng.normal}).
 *
 * @module
 */
import { xoroshiro128plus, xoroshiro128plusFromState } from 'pure-rand/generator/xoroshiro128plus'
import type { JumpableRandomGenerator } from 'pure-rand/types/JumpableRandomGenerator'
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64'
import { uniformInt } from 'pure-rand/distribution/uniformInt'
import { ConfigError } from './errors.ts'

/**
 * A serialisable snapshot of an {@link Rng}: restore it with {@link Rng.fromState} to continue
 * the exact same sequence (used by checkpoints to resume bit-for-bit).
 *
 * @category Randomness
 */
export interface RngState {
  /** The 32-bit stream key (seed and split path hashed). */
  readonly key: number
  /** The generator's internal state words. */
  readonly state: readonly number[]
  /** A cached second normal deviate from the Box-Muller pair, or null. */
  readonly spareNormal: number | null
}

/** 32-bit FNV-1a over a string, continuing from `hash`. */
function fnv1a(text: string, hash = 0x811c9dc5): number {
  let h = hash >>> 0
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h >>> 0
}

/** SplitMix32-style finaliser (Murmur3 fmix32): a bijective mixing of 32 bits. */
function mix32(x: number): number {
  let h = x >>> 0
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b) >>> 0
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35) >>> 0
  h ^= h >>> 16
  return h >>> 0
}

/**
 * A seeded random stream. Not cryptographic.
 *
 * @example
 * ```ts
 * const root = Rng.fromSeed(0)
 * const data = root.split('data')   // same numbers whatever 'init' draws
 * const init = root.split('init')
 * data.float(); init.normal()
 * ```
 * @category Randomness
 */
export class Rng {
  private readonly generator: JumpableRandomGenerator
  /** The 32-bit key of this stream (seed and split path hashed). */
  readonly key: number
  private spare: number | null = null

  private constructor(key: number, generator: JumpableRandomGenerator) {
    this.key = key >>> 0
    this.generator = generator
  }

  /**
   * A stream from an integer seed.
   *
   * @param seed - a safe integer (negative values and values above 2^32 are hashed in)
   * @throws {@link ConfigError} if `seed` is not a finite integer
   */
  static fromSeed(seed: number): Rng {
    if (!Number.isSafeInteger(seed)) {
      throw new ConfigError('seed', `${seed} is not an integer; expected a safe integer such as 0 or 1234`, {
        value: seed,
      })
    }
    const low = seed >>> 0
    const high = Math.floor(seed / 2 ** 32) >>> 0
    const key = mix32(low ^ mix32(high ^ 0x9e3779b9))
    return new Rng(key, xoroshiro128plus(key | 0))
  }

  /**
   * Restores a stream saved with {@link Rng.getState}.
   *
   * @throws {@link ConfigError} if the state is malformed
   */
  static fromState(state: RngState): Rng {
    if (
      typeof state !== 'object' ||
      state === null ||
      !Number.isInteger(state.key) ||
      !Array.isArray(state.state) ||
      state.state.length !== 4 ||
      !state.state.every((w) => Number.isInteger(w))
    ) {
      throw new ConfigError('rngState', 'expected { key: integer, state: four integers, spareNormal: number | null }', {
        value: state,
      })
    }
    const rng = new Rng(state.key, xoroshiro128plusFromState(state.state))
    rng.spare = typeof state.spareNormal === 'number' ? state.spareNormal : null
    return rng
  }

  /** A snapshot of this stream's position (JSON-serialisable). */
  getState(): RngState {
    return { key: this.key, state: [...this.generator.getState()], spareNormal: this.spare }
  }

  /**
   * An independent child stream for one purpose. It depends only on this stream's key and the
   * purpose (not on how many numbers were drawn), so `Rng.fromSeed(s).split('init')` is the same
   * stream wherever it is created.
   *
   * @param purpose - a name such as `'data'`, `'init'`, `'sampling'`, `'seed:3'`
   */
  split(purpose: string): Rng {
    const key = mix32(fnv1a(purpose, fnv1a(String(this.key))) ^ 0x632be5ab)
    return new Rng(key, xoroshiro128plus(key | 0))
  }

  /** A uniform 32-bit unsigned integer. */
  uint32(): number {
    return this.generator.next() >>> 0
  }

  /** A uniform double in [0, 1) with 53 random bits. */
  float(): number {
    return uniformFloat64(this.generator)
  }

  /**
   * A uniform integer in [0, n) without modulo bias.
   *
   * @throws {@link ConfigError} if `n` is not a positive safe integer
   */
  int(n: number): number {
    if (!Number.isSafeInteger(n) || n <= 0) {
      throw new ConfigError('n', `${n} is not a positive integer`, { value: n })
    }
    return uniformInt(this.generator, 0, n - 1)
  }

  /** A uniform double in [low, high). */
  uniform(low: number, high: number): number {
    return low + (high - low) * this.float()
  }

  /** A standard normal deviate (Box-Muller; the pair's second value is cached). */
  normal(): number {
    if (this.spare !== null) {
      const value = this.spare
      this.spare = null
      return value
    }
    let u = 0
    while (u === 0) u = this.float()
    const v = this.float()
    const radius = Math.sqrt(-2 * Math.log(u))
    this.spare = radius * Math.sin(2 * Math.PI * v)
    return radius * Math.cos(2 * Math.PI * v)
  }

  /** A Gamma(shape, 1) deviate (Marsaglia & Tsang 2000; shape < 1 by boosting). */
  gamma(shape: number): number {
    if (!(shape > 0)) throw new ConfigError('shape', `${shape} must be > 0`, { value: shape })
    if (shape < 1) {
      const u = this.float()
      return this.gamma(shape + 1) * (u === 0 ? Number.MIN_VALUE : u) ** (1 / shape)
    }
    const d = shape - 1 / 3
    const c = 1 / Math.sqrt(9 * d)
    for (;;) {
      let x: number
      let v: number
      do {
        x = this.normal()
        v = 1 + c * x
      } while (v <= 0)
      v = v * v * v
      const u = this.float()
      if (u < 1 - 0.0331 * x * x * x * x) return d * v
      if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v
    }
  }

  /**
   * A Dirichlet(alpha, ..., alpha) sample of length `k`, written into `out` if given.
   */
  dirichlet(k: number, alpha: number, out: Float64Array = new Float64Array(k)): Float64Array {
    let sum = 0
    for (let i = 0; i < k; i++) {
      const g = this.gamma(alpha)
      out[i] = g
      sum += g
    }
    if (sum === 0) {
      // All gammas underflowed (tiny alpha): put the mass on one uniform category.
      out.fill(0)
      out[this.int(k)] = 1
      return out
    }
    for (let i = 0; i < k; i++) out[i] = (out[i] as number) / sum
    return out
  }

  /**
   * An index drawn from unnormalised non-negative weights `weights[offset .. offset+length)`.
   *
   * @param weights - non-negative weights (need not sum to 1)
   * @param total - their sum, if already known
   */
  categorical(weights: ArrayLike<number>, offset = 0, length = weights.length - offset, total?: number): number {
    let sum = total
    if (sum === undefined) {
      sum = 0
      for (let i = 0; i < length; i++) sum += weights[offset + i] as number
    }
    let target = this.float() * sum
    for (let i = 0; i < length; i++) {
      target -= weights[offset + i] as number
      if (target < 0) return i
    }
    // Rounding: return the last category with positive weight.
    for (let i = length - 1; i >= 0; i--) if ((weights[offset + i] as number) > 0) return i
    return length - 1
  }

  /** Shuffles an array in place (Fisher-Yates) and returns it. */
  shuffle<T extends { length: number; [index: number]: unknown }>(array: T): T {
    for (let i = array.length - 1; i > 0; i--) {
      const j = this.int(i + 1)
      const tmp = array[i]
      array[i] = array[j]
      array[j] = tmp
    }
    return array
  }

  /** Fills `out` with uniform values in [low, high) and returns it. */
  fillUniform<T extends Float32Array | Float64Array>(out: T, low = 0, high = 1): T {
    const scale = high - low
    for (let i = 0; i < out.length; i++) out[i] = low + scale * this.float()
    return out
  }

  /** Fills `out` with normal values N(mean, std^2) and returns it. */
  fillNormal<T extends Float32Array | Float64Array>(out: T, mean = 0, std = 1): T {
    for (let i = 0; i < out.length; i++) out[i] = mean + std * this.normal()
    return out
  }
}

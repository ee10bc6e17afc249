/**
 * Head ablations at `hook_z` (each query head's attention output, before the output projection):
 *
 * - `zero`: the head's output is 0, so it adds nothing to the residual stream (Bair et al., arXiv
 *   2603.03335, the paper's choice, as in the authors' released code). Applied through the model's
 *   batched `headMask`, so every sequence of a batch can have its own mask.
 * - `mean`: the head's output is replaced by its mean over a reference set (over sequences and
 *   positions, or per position), the mean-ablation variant of the authors' released code.
 * - `resample`: the head's output is replaced by its output on another input (resample ablation;
 *   the pairing is a seeded derangement of the evaluation set, or draws from a reference set).
 *
 * Mean and resample are computed in the same batched pass as zero: the `headMask` zeroes the
 * knocked-out heads (`keep * z`), and one hook per layer at `hook_z` adds
 * `(1 - keep) * replacement`, where the replacement was recorded once from the clean model
 * (`runWithCache`). Many masks therefore still cost one forward pass.
 *
 * Under grouped-query attention `hook_z` is per query head, so a knockout removes one query
 * head's output and leaves the other query heads that share its key/value head untouched.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, InvalidArgumentError, Rng } from '@attnlab/core'
import { booleanField, configSchema, customField, integerField, parseConfig, type z } from '@attnlab/core/schema'
import { hookName, type ActivationCache, type ForwardHook, type HookName, type Transformer } from '@attnlab/transformer'

/**
 * The ablation kinds (see the module comment).
 *
 * @category Ablation
 */
export type AblationMode = 'zero' | 'mean' | 'resample'

/** The ablation modes, for validation and help texts. @category Ablation */
export const ABLATION_MODES: readonly AblationMode[] = Object.freeze(['zero', 'mean', 'resample'])

/**
 * Token sequences to record replacement activations from.
 *
 * @category Ablation
 */
export interface ReferenceInputs {
  /** `[count, length]` row-major token ids. */
  readonly inputs: Int32Array
  /** Number of sequences. */
  readonly count: number
  /** Tokens per sequence. */
  readonly length: number
  /** 1 for real tokens, 0 for padding (`[count, length]`); default all real. */
  readonly inputMask?: Uint8Array
}

/**
 * The schema of {@link AblationOptions}: each option's meaning, declared once (the reference is
 * checked by {@link HeadAblation.create} itself, against the mode and the model).
 *
 * @category Ablation
 */
export const ablationOptionsSchema = configSchema({
  /**
   * The reference sequences: their clean `hook_z` activations give the mean (mean mode) or the
   * substitute activations (resample mode). Required for `mean` and `resample`.
   */
  reference: customField<ReferenceInputs>('reference sequences (required for mean and resample)').optional(),
  /** Mean mode: average per position (over sequences only) instead of over sequences and positions; default false. */
  perPosition: booleanField('mean mode: average per position (over sequences only)').optional(),
  /** Resample mode: seed of the pairing of evaluation sequences with reference sequences (default 0). */
  seed: integerField('resample mode: seed of the pairing with reference sequences').optional(),
  /**
   * Resample mode: the reference set is the evaluation set itself, so sequence i is paired with a
   * different sequence (a seeded derangement). Default: true when the reference has the same
   * count as the evaluated set, which the scorer checks.
   */
  derange: booleanField('resample mode: pair each sequence with a different one (a seeded derangement)').optional(),
})

/**
 * Options of {@link HeadAblation.create} (see {@link ablationOptionsSchema}).
 *
 * @category Ablation
 */
export type AblationOptions = Readonly<z.input<typeof ablationOptionsSchema>>

/**
 * A prepared ablation: owns the recorded replacement activations (call {@link HeadAblation.dispose}).
 * Zero ablation owns nothing.
 *
 * @example
 * ```ts
 * const ablation = await HeadAblation.create(model, 'mean', { reference: capability.data })
 * const scores = await scoreMasks(model, capability, masks, { ablation })
 * ablation.dispose()
 * ```
 * @category Ablation
 */
export class HeadAblation {
  /** The ablation kind. */
  readonly mode: AblationMode
  /** Layers x heads of the model it was prepared for. */
  readonly nLayers: number
  /** Query heads per layer. */
  readonly nHeads: number
  /** Reference sequences (mean/resample), else 0. */
  readonly referenceCount: number
  /** Tokens per reference sequence (mean/resample), else 0. */
  readonly referenceLength: number
  private readonly replacements: tf.Tensor[]
  private readonly perPosition: boolean
  private readonly seed: number
  private readonly derange: boolean | undefined
  private disposed = false

  private constructor(
    mode: AblationMode,
    model: Transformer,
    replacements: tf.Tensor[],
    reference: ReferenceInputs | undefined,
    options: AblationOptions,
  ) {
    this.mode = mode
    this.nLayers = model.config.nLayers
    this.nHeads = model.config.nHeads
    this.replacements = replacements
    this.referenceCount = reference?.count ?? 0
    this.referenceLength = reference?.length ?? 0
    this.perPosition = options.perPosition ?? false
    this.seed = options.seed ?? 0
    this.derange = options.derange
  }

  /**
   * Prepares an ablation for a model: for `mean` and `resample`, runs the clean model once on the
   * reference sequences and keeps every layer's `hook_z` statistics.
   *
   * Replacement shapes per layer: mean `[1, 1, nHeads, dHead]` (or `[1, length, nHeads, dHead]`
   * per position), resample `[referenceCount, length, nHeads, dHead]`.
   *
   * @param model - the model the ablation will be used with
   * @param mode - `zero`, `mean` or `resample`
   * @param options - the reference sequences (required for `mean` and `resample`), per-position
   *   mean, resample seed
   * @throws `ConfigError` (`@attnlab/core`) for an unknown mode or a missing/empty reference;
   *   `InvalidArgumentError` (`@attnlab/core`) for reference tokens the model cannot read
   */
  static async create(model: Transformer, mode: AblationMode, options: AblationOptions = {}): Promise<HeadAblation> {
    parseConfig(ablationOptionsSchema, options, 'HeadAblation')
    if (!(ABLATION_MODES as readonly string[]).includes(mode)) {
      throw new ConfigError(
        'mode',
        `'${String(mode)}' is not an ablation mode; expected one of ${ABLATION_MODES.join(', ')}`,
      )
    }
    if (mode === 'zero') return new HeadAblation(mode, model, [], undefined, options)
    const reference = options.reference
    if (reference === undefined)
      throw new ConfigError('reference', `${mode} ablation needs reference sequences to record activations from`)
    if (
      !Number.isSafeInteger(reference.count) ||
      reference.count < 1 ||
      !Number.isSafeInteger(reference.length) ||
      reference.length < 1 ||
      reference.inputs.length !== reference.count * reference.length
    ) {
      throw new ConfigError(
        'reference',
        `reference is ${reference.count} x ${reference.length} with ${reference.inputs.length} tokens; expected a ` +
          'non-empty [count, length] array',
      )
    }
    if (mode === 'resample' && reference.count < 2 && options.derange !== false) {
      throw new ConfigError(
        'reference',
        'resample ablation pairs each sequence with another one; the reference needs at least 2 sequences',
      )
    }
    const { nLayers } = model.config
    const names: HookName[] = Array.from({ length: nLayers }, (_, l) => hookName.z(l))
    const perPosition = options.perPosition ?? false
    const replacements: tf.Tensor[] = []
    // Record in chunks so a large reference set never materialises one huge activation batch.
    const chunk = Math.max(1, Math.floor(16384 / reference.length))
    const parts: tf.Tensor[][] = names.map(() => [])
    try {
      for (let start = 0; start < reference.count; start += chunk) {
        const size = Math.min(chunk, reference.count - start)
        const tokens = tf.tensor2d(
          reference.inputs.subarray(start * reference.length, (start + size) * reference.length),
          [size, reference.length],
          'int32',
        )
        let cache: ActivationCache
        try {
          const run = model.runWithCache(tokens, { namesFilter: names })
          run.logits.dispose()
          cache = run.cache
        } finally {
          tokens.dispose()
        }
        try {
          names.forEach((name, l) => {
            const z = cache.get(name) // [size, length, nHeads, dHead]
            if (mode === 'resample') {
              ;(parts[l] as tf.Tensor[]).push(tf.keep(tf.clone(z)))
            } else {
              // Masked sums over sequences (and positions): the mean is taken after all chunks.
              const weights =
                reference.inputMask === undefined
                  ? null
                  : reference.inputMask.subarray(start * reference.length, (start + size) * reference.length)
              ;(parts[l] as tf.Tensor[]).push(
                tf.tidy(() => {
                  const w =
                    weights === null
                      ? tf.ones([size, reference.length, 1, 1])
                      : tf.reshape(tf.tensor(Float32Array.from(weights), [size, reference.length]), [
                          size,
                          reference.length,
                          1,
                          1,
                        ])
                  const weighted = tf.mul(z, w) // [size, length, nHeads, dHead]
                  // [1, length or 1, nHeads, dHead]
                  return perPosition ? tf.sum(weighted, 0, true) : tf.sum(weighted, [0, 1], true)
                }),
              )
            }
          })
        } finally {
          cache.dispose()
        }
      }
      for (let l = 0; l < nLayers; l++) {
        const pieces = parts[l] as tf.Tensor[]
        if (mode === 'resample') {
          replacements.push(pieces.length === 1 ? (pieces[0] as tf.Tensor) : tf.keep(tf.concat(pieces, 0)))
          if (pieces.length > 1) tf.dispose(pieces)
        } else {
          const counts = new Float32Array(perPosition ? reference.length : 1)
          for (let b = 0; b < reference.count; b++) {
            for (let p = 0; p < reference.length; p++) {
              const real =
                reference.inputMask === undefined ? 1 : (reference.inputMask[b * reference.length + p] as number)
              counts[perPosition ? p : 0] = (counts[perPosition ? p : 0] as number) + real
            }
          }
          if (counts.some((c) => c === 0)) {
            tf.dispose(pieces)
            throw new ConfigError(
              'reference',
              perPosition
                ? 'some position has no real token in the reference set; per-position means are undefined there'
                : 'the reference set has no real token',
            )
          }
          replacements.push(
            tf.keep(
              tf.tidy(() => {
                // Chunk sums added one at a time, in order: a single tf.addN over 8 or more tensors returns
                // stale values on tfjs-webgpu 4.22 with an 8-storage-buffer adapter (Chromium's SwiftShader).
                const total = pieces.slice(1).reduce((sum, piece) => tf.add(sum, piece), pieces[0] as tf.Tensor)
                return tf.div(total, tf.reshape(tf.tensor1d(counts), [1, counts.length, 1, 1]))
              }),
            ),
          )
          tf.dispose(pieces)
        }
      }
    } catch (error) {
      tf.dispose(replacements)
      for (const pieces of parts) tf.dispose(pieces.filter((t) => !t.isDisposed))
      throw error
    }
    return new HeadAblation(mode, model, replacements, reference, options)
  }

  /**
   * The reference sequence each evaluated sequence takes its activations from (resample mode).
   *
   * @param count - number of evaluated sequences
   * @param length - their length (must equal the reference length)
   * @returns `[count]` reference indices
   * @throws `InvalidArgumentError` (`@attnlab/core`) if the lengths differ, or if a derangement is
   *   requested and the counts differ
   */
  pairing(count: number, length: number): Int32Array {
    if (this.mode !== 'resample') return new Int32Array(count)
    if (length !== this.referenceLength) {
      throw new InvalidArgumentError(
        `resample ablation: the evaluated sequences have ${length} tokens but the reference has ` +
          `${this.referenceLength}; positions must align`,
      )
    }
    const derange = this.derange ?? count === this.referenceCount
    const rng = Rng.fromSeed(this.seed).split('knockout/resample')
    const out = new Int32Array(count)
    if (derange) {
      if (count !== this.referenceCount) {
        throw new InvalidArgumentError(
          `resample ablation: a derangement pairs the evaluation set with itself, but it has ${count} sequences and ` +
            `the reference ${this.referenceCount}`,
        )
      }
      // Sattolo's algorithm: a uniformly random cyclic permutation has no fixed point.
      const perm = Array.from({ length: count }, (_, i) => i)
      for (let i = count - 1; i > 0; i--) {
        const j = rng.int(i)
        const tmp = perm[i] as number
        perm[i] = perm[j] as number
        perm[j] = tmp
      }
      perm.forEach((v, i) => {
        out[i] = v
      })
    } else {
      for (let i = 0; i < count; i++) out[i] = rng.int(this.referenceCount)
    }
    return out
  }

  /**
   * One forward pass with per-row knockouts.
   *
   * Call inside `tf.tidy` (the result and temporaries belong to the caller's scope).
   *
   * @param model - the model this ablation was created for
   * @param tokens - `[rows, length]` int32
   * @param knocked - `[rows, nLayers * nHeads]` 0/1, 1 = knocked out (layer-major)
   * @param sources - resample mode: `[rows]` reference sequence per row (see {@link HeadAblation.pairing})
   * @returns logits `[rows, length, dVocab]`
   * @throws `InvalidArgumentError` (`@attnlab/core`) when used after {@link HeadAblation.dispose}
   *   or with another model shape
   */
  forward(model: Transformer, tokens: tf.Tensor2D, knocked: Uint8Array, sources?: Int32Array): tf.Tensor3D {
    if (this.disposed) throw new InvalidArgumentError('this HeadAblation was disposed')
    const { nLayers, nHeads } = model.config
    if (nLayers !== this.nLayers || nHeads !== this.nHeads) {
      throw new InvalidArgumentError(
        `ablation prepared for ${this.nLayers} x ${this.nHeads} heads, model has ${nLayers} x ${nHeads}`,
      )
    }
    const [rows, length] = tokens.shape
    const n = nLayers * nHeads
    if (knocked.length !== rows * n)
      throw new InvalidArgumentError(`knockout rows hold ${knocked.length} entries; expected ${rows} x ${n}`)
    const keep = new Float32Array(rows * n)
    const touched = new Array<boolean>(nLayers).fill(false)
    for (let i = 0; i < keep.length; i++) {
      const out = knocked[i] === 1
      keep[i] = out ? 0 : 1
      if (out) touched[Math.floor((i % n) / nHeads)] = true
    }
    const headMask = tf.tensor3d(keep, [rows, nLayers, nHeads]) // 1 = keep
    if (this.mode === 'zero' || !touched.some((t) => t)) return model.forward(tokens, { headMask })
    if (this.mode === 'resample') {
      if (sources === undefined || sources.length !== rows)
        throw new InvalidArgumentError(`resample ablation needs one reference index per row (${rows})`)
      if (length !== this.referenceLength)
        throw new InvalidArgumentError(
          `resample ablation: rows have ${length} tokens but the reference has ${this.referenceLength}`,
        )
    }
    if (this.mode === 'mean' && this.perPosition && length !== this.referenceLength) {
      throw new InvalidArgumentError(
        `per-position mean ablation: rows have ${length} tokens but the reference has ${this.referenceLength}`,
      )
    }
    const sourceIndex = this.mode === 'resample' ? tf.tensor1d(sources as Int32Array, 'int32') : null
    const hooks: ForwardHook[] = []
    for (let l = 0; l < nLayers; l++) {
      if (!touched[l]) continue
      const replacement = this.replacements[l] as tf.Tensor
      // [rows, 1, nHeads, 1]
      const layerKnocked = tf.reshape(tf.sub(1, tf.slice(headMask, [0, l, 0], [rows, 1, nHeads])), [rows, 1, nHeads, 1])
      hooks.push([
        hookName.z(l),
        (z) => {
          // [rows or 1, length or 1, nHeads, dHead]
          const source = sourceIndex === null ? replacement : tf.gather(replacement, sourceIndex)
          return tf.add(z, tf.mul(layerKnocked, source)) // z is already keep * z (headMask)
        },
      ])
    }
    return model.forward(tokens, { headMask, fwdHooks: hooks })
  }

  /** Frees the recorded activations. Safe to call twice. */
  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    tf.dispose(this.replacements)
    this.replacements.length = 0
  }
}

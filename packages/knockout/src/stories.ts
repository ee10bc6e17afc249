/**
 * Capabilities of small TinyStories-style language models, built from prompts with a known answer
 * (capability localisation on real language models, after Bair, Xu, Sun & Kolter, arXiv
 * 2603.03335, section 4, whose capabilities are benchmarks with known answers; these are the
 * probes a 260K-parameter story model can be asked about):
 *
 * - `name-recall`: a character is introduced by name, a sentence passes, then `One day,`; the
 *   known answer is the name; the counterfactual introduces another name instead.
 * - `quote-close`: `Lily said, "I want to play with the ball.`; the answer is the closing `"`;
 *   the counterfactual says the same words as reported speech (`said that she wanted ...`), no
 *   quote open.
 * - `pronoun`: `There was a little girl named Lily. Lily went to the park with a ball. Every
 *   day,`; the answer is ` she` (` he` for a boy); the counterfactual is the same story about a
 *   character of the other gender.
 *
 * Random-sequence repetition (the fourth probe of the suite) is the built-in `induction` /
 * `induction-gain` ({@link inductionCapability}).
 *
 * Each probe is scored as an in-context gain: the answer token's log-probability (nats)
 * after the informative prompt minus the same answer's after the counterfactual prompt. A model
 * that uses the context scores above 0; one that does not scores about 0, whatever its fluency (a
 * fluent model gives the name, the quote or the pronoun some probability from word frequencies
 * alone, which the counterfactual cancels). `part: 'informative'` scores the answer alone (its
 * chance level is a uniform guess, `-ln dVocab`), `part: 'counterfactual'` the control alone.
 *
 * The prompts are English templates filled with names, objects and places drawn with a seed;
 * tokenization is the model's own (`encode`), and the answer is scored on one token: the one that
 * spells its first character (for tokenizers that merge across the boundary, such as
 * TinyStories-656K's pieces that end in `▁`, the merged token), so `accuracy` is the fraction of
 * prompts whose answer token the model ranks first.
 *
 * @module
 */
import { ConfigError, Rng } from '@attnlab/core'
import { METRIC_NAMES, type Capability, type MetricName } from './capability.ts'

/**
 * Names of the story probes, in the order {@link storyCapabilities} returns them.
 *
 * @category Capabilities
 */
export const STORY_CAPABILITY_NAMES = Object.freeze(['name-recall', 'quote-close', 'pronoun'] as const)

/**
 * A story probe's name.
 *
 * @category Capabilities
 */
export type StoryCapabilityName = (typeof STORY_CAPABILITY_NAMES)[number]

/**
 * Options of {@link storyCapability}.
 *
 * @category Capabilities
 */
export interface StoryCapabilityOptions {
  /** Prompts (default 32). Each gives one informative and one counterfactual sequence. */
  readonly count?: number
  /** Seed of the template fillers (default 0). */
  readonly seed?: number
  /** Metric (default `logprob`: nats per answer token; `accuracy`: answer tokens ranked first). */
  readonly metric?: MetricName
  /** `gain` (default): informative minus counterfactual; or one of the two alone. */
  readonly part?: 'gain' | 'informative' | 'counterfactual'
  /** The model's context: longer sequences are refused (default: no limit). */
  readonly nCtx?: number
}

/** One filled template: the prompt and its answer, and the counterfactual prompt with the same answer. */
interface StoryItem {
  readonly prompt: string
  readonly counterfactual: string
  readonly answer: string
}

const GIRLS = ['Lily', 'Sue', 'Mia', 'Amy', 'Anna', 'Lucy', 'Emma', 'Sara'] as const
const BOYS = ['Tom', 'Ben', 'Max', 'Sam', 'Tim', 'Jack', 'Leo', 'Bob'] as const
const TOYS = ['ball', 'doll', 'car', 'kite', 'teddy bear', 'book', 'truck', 'box'] as const
const PLACES = ['park', 'garden', 'forest', 'beach', 'house', 'school', 'river', 'farm'] as const
const FEELINGS = ['happy', 'sad', 'tired', 'excited', 'scared', 'hungry'] as const

function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[rng.int(items.length)] as T
}

function character(rng: Rng): { name: string; noun: 'girl' | 'boy'; pronoun: 'she' | 'he'; possessive: string } {
  const girl = rng.int(2) === 0
  return girl
    ? { name: pick(rng, GIRLS), noun: 'girl', pronoun: 'she', possessive: 'her' }
    : { name: pick(rng, BOYS), noun: 'boy', pronoun: 'he', possessive: 'his' }
}

function capitalized(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1)
}

/** The filled templates of one probe (`count` of them, seeded). */
function storyItems(name: StoryCapabilityName, count: number, seed: number): StoryItem[] {
  const rng = Rng.fromSeed(seed).split(`story-${name}`)
  const items: StoryItem[] = []
  for (let i = 0; i < count; i++) {
    const who = character(rng)
    const toy = pick(rng, TOYS)
    const place = pick(rng, PLACES)
    if (name === 'name-recall') {
      // The counterfactual introduces another character of the same kind, so only the name differs.
      const pool = who.noun === 'girl' ? GIRLS : BOYS
      let other = pick(rng, pool)
      while (other === who.name) other = pick(rng, pool)
      const story = (n: string) =>
        `Once upon a time, there was a little ${who.noun} named ${n}. ${capitalized(who.pronoun)} liked to play ` +
        `with ${who.possessive} ${toy} in the ${place}. One day,`
      items.push({ prompt: story(who.name), counterfactual: story(other), answer: ` ${who.name}` })
    } else if (name === 'quote-close') {
      const feeling = pick(rng, FEELINGS)
      items.push({
        prompt: `${who.name} was ${feeling}. ${who.name} said, "I want to play with the ${toy}.`,
        counterfactual:
          `${who.name} was ${feeling}. ${who.name} said that ${who.pronoun} ` + `wanted to play with the ${toy}.`,
        answer: '"',
      })
    } else {
      // The counterfactual is the same story about a character of the other gender.
      const other = who.noun === 'girl' ? pick(rng, BOYS) : pick(rng, GIRLS)
      const otherNoun = who.noun === 'girl' ? 'boy' : 'girl'
      const story = (noun: string, n: string) =>
        `There was a little ${noun} named ${n}. ${n} went to the ${place} with a ${toy}. Every day,`
      items.push({
        prompt: story(who.noun, who.name),
        counterfactual: story(otherNoun, other),
        answer: ` ${who.pronoun}`,
      })
    }
  }
  return items
}

/**
 * The tokens of `prompt + answer + ' '` and the index of the token that spells the answer's first
 * character: the first token after the longest common prefix with the tokens of the text before
 * that character (`prompt` plus the answer's leading spaces). The trailing space lets tokenizers
 * whose pieces end in a space (`Lily▁`) spell the answer as they do inside a sentence.
 */
function answerTokens(encode: (text: string) => number[], prompt: string, answer: string): [number[], number] {
  const whole = encode(`${prompt}${answer} `)
  const head = encode(prompt + answer.slice(0, answer.length - answer.trimStart().length))
  let common = 0
  while (common < head.length && common < whole.length - 1 && head[common] === whole[common]) common++
  return [whole, Math.max(1, common)]
}

/**
 * A story probe (see the module table) for a model with tokenizer `encode`.
 *
 * @param name - `name-recall`, `quote-close` or `pronoun`
 * @param encode - the model's tokenizer (text to ids, BOS first when the model uses one)
 * @param options - prompts, seed, metric, part, context
 * @returns the capability: scored on the answer tokens; `chance` 0 for the gain, a uniform guess
 *   is the caller's to add for the parts alone (it needs `dVocab`)
 * @throws `ConfigError` (`@attnlab/core`) for an unknown name, a count that is not a positive
 *   integer, an unknown part or metric, or a sequence longer than `nCtx`
 * @example
 * ```ts
 * const recall = storyCapability('name-recall', (text) => tokenizer.encode(text))
 * const { scores } = await scoreMasks(model, recall, new Uint8Array(nLayers * nHeads)) // clean gain, nats/token
 * ```
 * @category Capabilities
 */
export function storyCapability(
  name: StoryCapabilityName,
  encode: (text: string) => number[],
  options: StoryCapabilityOptions = {},
): Capability {
  if (!(STORY_CAPABILITY_NAMES as readonly string[]).includes(name)) {
    throw new ConfigError('capability', `'${name}' is not a story probe; expected one of ${STORY_CAPABILITY_NAMES}`)
  }
  const count = options.count ?? 32
  if (!Number.isSafeInteger(count) || count < 1)
    throw new ConfigError('count', `${String(count)} must be a positive integer`)
  const part = options.part ?? 'gain'
  if (!['gain', 'informative', 'counterfactual'].includes(part))
    throw new ConfigError('part', `'${String(part)}' is not one of gain, informative, counterfactual`)
  const metric = options.metric ?? 'logprob'
  if (!(METRIC_NAMES as readonly string[]).includes(metric))
    throw new ConfigError('metric', `'${String(metric)}' is not a metric; expected one of ${METRIC_NAMES.join(', ')}`)
  const rows: { tokens: number[]; start: number; sign: 1 | -1 }[] = []
  for (const item of storyItems(name, count, options.seed ?? 0)) {
    if (part !== 'counterfactual') {
      const [tokens, start] = answerTokens(encode, item.prompt, item.answer)
      rows.push({ tokens, start, sign: 1 })
    }
    if (part !== 'informative') {
      const [tokens, start] = answerTokens(encode, item.counterfactual, item.answer)
      rows.push({ tokens, start, sign: -1 })
    }
  }
  // Each sequence runs up to its answer token, which is the one scored.
  const length = Math.max(...rows.map((r) => r.start))
  if (options.nCtx !== undefined && length > options.nCtx) {
    throw new ConfigError('nCtx', `the '${name}' prompts need ${length} positions; the model has ${options.nCtx}`)
  }
  const inputs = new Int32Array(rows.length * length)
  const inputMask = new Uint8Array(rows.length * length)
  const scored: number[] = []
  const targets: number[] = []
  const signs: number[] = []
  rows.forEach((row, b) => {
    for (let p = 0; p < row.start; p++) {
      inputs[b * length + p] = row.tokens[p] as number
      inputMask[b * length + p] = 1
    }
    scored.push(b * length + row.start - 1)
    targets.push(row.tokens[row.start] as number)
    signs.push(row.sign)
  })
  const positive = signs.filter((s) => s > 0).length
  const negative = signs.length - positive
  // The gain: +1/n on the informative answers, -1/n on the counterfactual ones; a part alone: the mean.
  const weights = Float64Array.from(signs, (s) =>
    part !== 'gain' ? 1 / signs.length : s > 0 ? 1 / positive : -1 / negative,
  )
  const what = part === 'gain' ? 'answer after the prompt minus after the counterfactual' : `the ${part} prompts`
  return {
    name: part === 'gain' ? name : `${name}-${part}`,
    description: `${name}: ${metric} of the known answer's token, ${what} (${count} prompts)`,
    metric,
    data: {
      inputs,
      count: rows.length,
      length,
      scoredPositions: Int32Array.from(scored),
      targets: Int32Array.from(targets),
      inputMask,
      scoreWeights: weights,
    },
    ...(part === 'gain' ? { chance: 0 } : {}),
  }
}

/**
 * Whether a story probe fits a model's context: its prompts (seed 0, with 4 positions to spare for
 * other seeds' longer fillers) are at most `nCtx` tokens. `builtinCapabilityNames` lists only the
 * probes that fit.
 *
 * @param name - the probe
 * @param encode - the model's tokenizer
 * @param nCtx - the model's context
 */
export function storyCapabilityFits(
  name: StoryCapabilityName,
  encode: (text: string) => number[],
  nCtx: number,
): boolean {
  return storyCapability(name, encode, { part: 'informative' }).data.length + 4 <= nCtx
}

/**
 * All story probes (gains), in {@link STORY_CAPABILITY_NAMES} order.
 *
 * @param encode - the model's tokenizer
 * @param options - as {@link storyCapability} (without `part`)
 * @throws as {@link storyCapability}
 * @category Capabilities
 */
export function storyCapabilities(
  encode: (text: string) => number[],
  options: Omit<StoryCapabilityOptions, 'part'> = {},
): Capability[] {
  return STORY_CAPABILITY_NAMES.map((name) => storyCapability(name, encode, options))
}

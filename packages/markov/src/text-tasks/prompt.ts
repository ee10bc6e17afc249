/**
 * What every text task of The Sparse Frontier shares (Nawrot et al., arXiv 2504.17768 [v2],
 * section 4 and appendix A.2): the prompt template, with the question stated before and after
 * the context; lengths measured in the evaluated model's own tokens (no special tokens), filled
 * to between `minFill` (the study's code: 0.9) and 1 of the target; and the answer format
 * `<explanation>...</explanation><answer>...</answer>`.
 *
 * @module
 */
import { ConfigError, type Rng } from '@attnlab/core'
import { distinct } from '../retrieval.ts'

/**
 * What a text task needs of a tokenizer: text to ids. `@attnlab/transformer`'s `Tokenizer`
 * (llama2.c `tokenizer.bin`, Hugging Face `tokenizer.json`) satisfies it; lengths are counted
 * with `bos: false` (the study counts the prompt without special tokens).
 *
 * @category Text tasks
 */
export interface TextTaskTokenizer {
  /** Text to token ids; `bos: false` must add no beginning-of-sequence token. */
  encode(text: string, options?: { readonly bos?: boolean; readonly eos?: boolean }): number[]
}

/**
 * Where the question goes: before and after the context (`'both'`, the study's template: the
 * trailing copy is what the last-window estimators of Vertical-Slash, FlexPrefill and SnapKV
 * see), only after, or only before.
 *
 * @category Text tasks
 */
export type QuestionPosition = 'both' | 'after' | 'before'

/**
 * Options common to every text task.
 *
 * @category Text tasks
 */
export interface TextTaskOptions {
  /** The evaluated model's tokenizer: every length is counted in its tokens. */
  readonly tokenizer: TextTaskTokenizer
  /** The target prompt length in tokens (the whole prompt, template included). */
  readonly maxTokens: number
  /** The prompt must fill at least this fraction of `maxTokens` (default 0.9, the study's code). */
  readonly minFill?: number
  /** Seed of the sample (the same seed, tokenizer and options give the same prompt). */
  readonly seed: number
  /** Where the question goes (default `'both'`). */
  readonly questionPosition?: QuestionPosition
}

/**
 * The parts of a prompt, before the template joins them.
 *
 * @category Text tasks
 */
export interface PromptParts {
  /** What the task is, one paragraph. */
  readonly intro: string
  /** The question (stated before and/or after the context). */
  readonly question: string
  /** The context (haystack, narrative, word list...). */
  readonly context: string
  /** How to answer (the content of `<answer>`). */
  readonly format: string
}

/** The answer format all tasks ask for (the study's chain-of-thought-then-answer template). */
export const ANSWER_INSTRUCTION =
  'Think briefly inside <explanation></explanation>, then give the final answer inside <answer></answer>.'

/**
 * The prompt: intro, the question (unless `after`), the context inside `<context>` tags, the
 * question again (unless `before`), the format and the answer instruction. The Sparse Frontier
 * [v2] A.2: "I will state it both before and after the context".
 *
 * @category Text tasks
 */
export function buildPrompt(parts: PromptParts, position: QuestionPosition = 'both'): string {
  const lines: string[] = [parts.intro]
  if (position === 'both') lines.push('I will state the question both before and after the context.')
  if (position !== 'after') lines.push(`Question: ${parts.question}`)
  lines.push(`<context>\n${parts.context}\n</context>`)
  if (position !== 'before') lines.push(`Question: ${parts.question}`)
  lines.push(parts.format, ANSWER_INSTRUCTION)
  return lines.join('\n\n')
}

/** The resolved common options. */
export interface ResolvedTextOptions {
  readonly tokenizer: TextTaskTokenizer
  readonly maxTokens: number
  readonly minFill: number
  readonly seed: number
  readonly questionPosition: QuestionPosition
}

/**
 * Checks the common options.
 * @throws `ConfigError` (`@attnlab/core`) naming the option: `maxTokens` not an integer in [16, 2^20], `minFill`
 *   outside (0, 1],
 *   `seed` not a safe integer, `questionPosition` not one of the three, a tokenizer without `encode`
 */
export function resolveTextOptions(options: TextTaskOptions): ResolvedTextOptions {
  const { tokenizer, maxTokens, seed } = options
  if (tokenizer === null || typeof tokenizer !== 'object' || typeof tokenizer.encode !== 'function')
    throw new ConfigError(
      'tokenizer',
      'expected an object with encode(text, { bos: false }), such as loadTokenizer(...)',
    )
  if (!Number.isInteger(maxTokens) || maxTokens < 16 || maxTokens > 1 << 20)
    throw new ConfigError('maxTokens', `${maxTokens} is not an integer in [16, 1048576]`, { value: maxTokens })
  const minFill = options.minFill ?? 0.9
  if (!(typeof minFill === 'number' && minFill > 0 && minFill <= 1))
    throw new ConfigError('minFill', `${minFill} is not a fraction in (0, 1]`, { value: minFill })
  if (!Number.isSafeInteger(seed)) throw new ConfigError('seed', `${seed} is not an integer`, { value: seed })
  const questionPosition = options.questionPosition ?? 'both'
  if (!['both', 'after', 'before'].includes(questionPosition))
    throw new ConfigError('questionPosition', `'${questionPosition}' is not one of both, after, before`, {
      value: questionPosition,
    })
  return { tokenizer, maxTokens, minFill, seed, questionPosition }
}

/** The number of tokens of a text (no special tokens). */
export function countTokens(tokenizer: TextTaskTokenizer, text: string): number {
  return tokenizer.encode(text, { bos: false, eos: false }).length
}

/** `1 needle`, `4 needles`: a count with its noun, for messages. */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`
}

/**
 * The largest `n` in `[min, max]` whose prompt fits `maxTokens`, by exponential then binary
 * search over `build(n)` (lengths are measured on the whole prompt, since merges across the
 * boundaries of parts change the count); then a downward walk in case the count is not monotone.
 * Returns the prompt and its length.
 * @throws `ConfigError` (`@attnlab/core`) (`maxTokens`) if even `build(min)` does not fit, naming its length, or if the
 *   largest fitting prompt fills less than `minFill` of `maxTokens` (the content runs out)
 */
export function fitPrompt(
  options: ResolvedTextOptions,
  what: string,
  min: number,
  max: number,
  build: (n: number) => string,
): { readonly n: number; readonly prompt: string; readonly tokens: number } {
  const { tokenizer, maxTokens } = options
  const cache = new Map<number, { prompt: string; tokens: number }>()
  const at = (n: number) => {
    let hit = cache.get(n)
    if (hit === undefined) {
      const prompt = build(n)
      hit = { prompt, tokens: countTokens(tokenizer, prompt) }
      cache.set(n, hit)
    }
    return hit
  }
  const smallest = at(min)
  if (smallest.tokens > maxTokens)
    throw new ConfigError(
      'maxTokens',
      `${maxTokens} tokens cannot hold ${what}: the smallest such prompt has ${smallest.tokens} tokens in this ` +
        'tokenizer; raise maxTokens or shrink the task',
      { value: maxTokens, needed: smallest.tokens },
    )
  let lo = min
  let step = 1
  let hi = min
  while (hi < max) {
    const next = Math.min(max, lo + step)
    if (at(next).tokens > maxTokens) {
      hi = next
      break
    }
    lo = next
    hi = next
    step *= 2
  }
  if (at(hi).tokens <= maxTokens) lo = hi
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1
    if (at(mid).tokens <= maxTokens) lo = mid
    else hi = mid
  }
  while (at(lo).tokens > maxTokens && lo > min) lo--
  const best = at(lo)
  if (best.tokens < options.minFill * maxTokens)
    throw new ConfigError(
      'maxTokens',
      `${what} fills only ${best.tokens} of ${maxTokens} tokens, below the minimum fill ${options.minFill} ` +
        `(${Math.ceil(options.minFill * maxTokens)} tokens)` +
        (lo === max
          ? `: every one of the generator's ${max} filler pieces is in it`
          : `: ${lo === 0 ? 'no filler piece fits' : plural(lo, 'filler piece') + ' fit'}, one more runs past ` +
            `${maxTokens} tokens`) +
        '; lower maxTokens or minFill',
      { value: maxTokens, tokens: best.tokens, minimumFill: Math.ceil(options.minFill * maxTokens) },
    )
  return { n: lo, prompt: best.prompt, tokens: best.tokens }
}

/** `count` distinct items of `pool` in random order (the retrieval tasks' `distinct` over its indices). */
export function sample<T>(rng: Rng, pool: readonly T[], count: number): T[] {
  return Array.from(distinct(rng, pool.length, count), (i) => pool[i] as T)
}

/**
 * Inserts `needles` among `haystack[0..n)` at positions fixed by `slots` (uniform fractions in
 * [0, 1), one per needle, drawn once), so the prompt for `n + 1` items differs from that for `n`
 * by one item and the token count grows with `n`.
 */
export function insertAt<T>(haystack: readonly T[], n: number, needles: readonly T[], slots: readonly number[]): T[] {
  const out = haystack.slice(0, n)
  const order = needles.map((needle, i) => ({ needle, at: Math.floor((slots[i] as number) * (n + 1)), i }))
  order.sort((a, b) => a.at - b.at || a.i - b.i)
  for (const [k, { needle, at }] of order.entries()) out.splice(at + k, 0, needle)
  return out
}

/**
 * The text tasks of The Sparse Frontier built here (the three QA tasks are not: they need
 * question-answer datasets this project does not ship).
 *
 * @category Text tasks
 */
export const TEXT_TASK_NAMES = [
  'ruler-niah',
  'ruler-vt',
  'ruler-cwe',
  'story-retrieval',
  'story-multihop',
  'story-filtering',
] as const

/**
 * A text task's name (see {@link TEXT_TASK_NAMES}).
 *
 * @category Text tasks
 */
export type TextTaskName = (typeof TEXT_TASK_NAMES)[number]

/**
 * One generated sample of a text task.
 *
 * @category Text tasks
 */
export interface TextSample {
  /** Which task. */
  readonly task: TextTaskName
  /** The whole prompt (template, question, context), to be tokenized with `bos` as the model expects. */
  readonly prompt: string
  /** Its length in the tokenizer's tokens, no special tokens: in `[minFill * maxTokens, maxTokens]`. */
  readonly tokens: number
  /** The target length. */
  readonly maxTokens: number
  /** The question as stated (before and/or after the context). */
  readonly question: string
  /**
   * What is asked, one entry per gold item: the queried keys (NIAH), the questions (Story
   * Retrieval); empty for the tasks that ask one question for a set.
   */
  readonly queries: readonly string[]
  /** The gold answer items: values in query order (NIAH, Story Retrieval), or the gold set. */
  readonly gold: readonly string[]
  /** A perfect answer, as the prompt asks for it (`<answer>...</answer>`): scores 1. */
  readonly goldAnswer: string
  /** The study's metric for this task: per-item exact match (`accuracy`) or set IoU (`iou`). */
  readonly metric: 'accuracy' | 'iou'
  /** How many filler items the length fit chose (distractor sentences, noise repeats, rare words, chapters). */
  readonly fillers: number
}

/**
 * The Sparse Frontier's metrics for its text tasks (Nawrot et al., arXiv 2504.17768 [v2],
 * appendix A.2), with their quirks, and a strict variant without them.
 *
 * The answer is read from the last `<answer>...</answer>` of the output (an unclosed `<answer>`
 * runs to the end); without a tag the whole output is read, except by Ruler CWE, which scores
 * 0 without a tag, as the study does. Per task (`score`, the study's):
 *
 * - `ruler-niah`: numbered lines `i. The answer for <key> is <value>` (the value runs to the first
 *   `.`); line `i` is right when its key is the `i`-th asked key exactly and its value equals the
 *   gold value after lower-casing, dropping `is:` and whitespace; the score is the fraction right.
 * - `ruler-vt`: IoU of the variable sets (comma- or line-separated, upper-cased, `VAR` stripped).
 * - `ruler-cwe`: IoU of the word sets from the numbered lines; 0 without an `<answer>` tag.
 * - `story-retrieval`: numbered lines, lower-cased, a leading article and trailing punctuation
 *   dropped, each compared with its question's gold answer; the fraction right.
 * - `story-multihop`: exact match after the same normalisation; an empty answer is **skipped**
 *   (`score` is `null`), not scored 0.
 * - `story-filtering`: IoU of the chapter-number sets (`Chapter 3` or `3`); an empty answer is
 *   **skipped**.
 *
 * `strict` removes the quirks: nothing is skipped (an empty answer scores 0), the tag is never
 * required, and a sample scores 1 only when the whole answer is right (every key or question, the
 * exact set), otherwise 0.
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import type { TextSample } from './prompt.ts'

/**
 * The score of one model output on one {@link TextSample}.
 *
 * @category Text tasks
 */
export interface TextScore {
  /**
   * The study's score in [0, 1], or `null` for a sample the study skips (an empty answer in
   * Multi-hop and Filtering).
   */
  readonly score: number | null
  /** The strict score: 1 when the whole answer is right, else 0; never skipped. */
  readonly strict: 0 | 1
  /** What was read from the output: the answer items, normalised as compared. */
  readonly predicted: readonly string[]
  /** Whether the output had an `<answer>` tag. */
  readonly tagged: boolean
}

/** The content of the last `<answer>` tag (an unclosed tag runs to the end), or `null`. */
export function answerContent(output: string): string | null {
  const open = output.lastIndexOf('<answer>')
  if (open < 0) return null
  const rest = output.slice(open + '<answer>'.length)
  const close = rest.indexOf('</answer>')
  return close < 0 ? rest : rest.slice(0, close)
}

/** Numbered lines `i. text` (or `i) text`): index to text. The first line with an index wins. */
function numberedLines(text: string): Map<number, string> {
  const out = new Map<number, string>()
  for (const line of text.split('\n')) {
    const m = /^\s*(\d+)\s*[.)]\s*(.*?)\s*$/.exec(line)
    if (m !== null && !out.has(Number(m[1]))) out.set(Number(m[1]), m[2] as string)
  }
  return out
}

/** Lower-case, trailing punctuation and a leading article dropped, whitespace collapsed. */
export function normalizeAnswer(text: string): string {
  return text
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/[.,;:!?"']+$/, '')
    .replace(/^(a|an|the) /, '')
    .trim()
}

function iou(predicted: ReadonlySet<string>, gold: ReadonlySet<string>): number {
  let inter = 0
  for (const p of predicted) if (gold.has(p)) inter++
  const union = predicted.size + gold.size - inter
  return union === 0 ? 1 : inter / union
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x))
}

function niahValue(text: string): string {
  return text.toLowerCase().replace(/is:/g, '').replace(/\s+/g, '')
}

/**
 * Scores a model's output on a sample with the study's metric for its task, and strictly (see
 * the module documentation for each task's rule and quirk).
 * @param sample - from {@link generateTextTask} (or one of the task functions)
 * @param output - the model's generated text (the continuation of the prompt)
 * @throws `ConfigError` (`@attnlab/core`) (`task`) for a sample of an unknown task, (`output`) if `output` is not a
 *   string
 * @category Text tasks
 */
export function scoreTextSample(sample: TextSample, output: string): TextScore {
  if (typeof output !== 'string') throw new ConfigError('output', `expected the generated text, got ${typeof output}`)
  const tag = answerContent(output)
  const tagged = tag !== null
  const text = tag ?? output
  const bit = (ok: boolean): 0 | 1 => (ok ? 1 : 0)
  switch (sample.task) {
    case 'ruler-niah': {
      const lines = numberedLines(text)
      let right = 0
      const predicted: string[] = []
      sample.queries.forEach((key, i) => {
        const line = lines.get(i + 1) ?? ''
        const m = /^The answer for\s+(\S+?)\s+is:?\s*([^.]*)/i.exec(line)
        predicted.push(m === null ? '' : `${m[1]} ${niahValue(m[2] as string)}`)
        if (m !== null && m[1] === key && niahValue(m[2] as string) === niahValue(sample.gold[i] as string)) right++
      })
      const n = sample.queries.length
      return { score: right / n, strict: bit(right === n), predicted, tagged }
    }
    case 'ruler-vt': {
      const items = text
        .split(/[,\n]/)
        .map((s) =>
          s
            .trim()
            .toUpperCase()
            .replace(/^VAR\s*/, '')
            .replace(/[.;:]+$/, '')
            .trim(),
        )
        .filter((s) => s !== '')
      const p = new Set(items)
      const g = new Set(sample.gold)
      return { score: iou(p, g), strict: bit(sameSet(p, g)), predicted: [...p], tagged }
    }
    case 'ruler-cwe': {
      const words = [...numberedLines(text).values()].map((w) => normalizeAnswer(w)).filter((w) => w !== '')
      const p = new Set(words)
      const g = new Set(sample.gold)
      return { score: tagged ? iou(p, g) : 0, strict: bit(sameSet(p, g)), predicted: [...p], tagged }
    }
    case 'story-retrieval': {
      const lines = numberedLines(text)
      const predicted = sample.gold.map((_, i) => normalizeAnswer(lines.get(i + 1) ?? ''))
      const right = predicted.filter((p, i) => p !== '' && p === normalizeAnswer(sample.gold[i] as string)).length
      const n = sample.gold.length
      return { score: right / n, strict: bit(right === n), predicted, tagged }
    }
    case 'story-multihop': {
      const p = normalizeAnswer(text)
      const ok = p !== '' && p === normalizeAnswer(sample.gold[0] as string)
      return { score: p === '' ? null : bit(ok), strict: bit(ok), predicted: p === '' ? [] : [p], tagged }
    }
    case 'story-filtering': {
      const p = new Set((text.match(/\d+/g) ?? []).map((d) => String(Number(d))))
      const g = new Set(sample.gold)
      return { score: p.size === 0 ? null : iou(p, g), strict: bit(sameSet(p, g)), predicted: [...p], tagged }
    }
    default:
      throw new ConfigError('task', `'${(sample as { task: unknown }).task}' is not a text task`)
  }
}

/**
 * Scores over samples, as the study reports them.
 *
 * @category Text tasks
 */
export interface TextScoreSummary {
  /** Mean of the study's scores over the samples not skipped (`NaN` if all were). */
  readonly mean: number
  /** Their sample standard deviation (ddof 1; `NaN` below 2 samples). */
  readonly sd: number
  /** Samples scored. */
  readonly scored: number
  /** Samples skipped (the study's quirk). */
  readonly skipped: number
  /** Mean strict score over all samples. */
  readonly strict: number
}

/**
 * Mean, sample standard deviation and skips of a list of {@link TextScore}s.
 * @throws `ConfigError` (`@attnlab/core`) (`scores`) for an empty list
 * @category Text tasks
 */
export function summarizeTextScores(scores: readonly TextScore[]): TextScoreSummary {
  if (scores.length === 0) throw new ConfigError('scores', 'no scores to summarize')
  const kept = scores.flatMap((s) => (s.score === null ? [] : [s.score]))
  const mean = kept.length === 0 ? Number.NaN : kept.reduce((a, b) => a + b, 0) / kept.length
  const sd = kept.length < 2 ? Number.NaN : Math.sqrt(kept.reduce((a, b) => a + (b - mean) ** 2, 0) / (kept.length - 1))
  const strict = scores.reduce((a, s) => a + s.strict, 0) / scores.length
  return { mean, sd, scored: kept.length, skipped: scores.length - kept.length, strict }
}

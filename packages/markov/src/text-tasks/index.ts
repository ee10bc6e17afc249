/**
 * The Sparse Frontier's text tasks for any tokenizer (Nawrot et al., arXiv 2504.17768 [v2],
 * section 4 and appendix A.2): Ruler NIAH, VT and CWE, and Story Retrieval, Multi-hop and
 * Filtering, with the study's prompt template and metrics. The QA tasks (SQuAD, QuALITY, TOEFL)
 * are not here: they need question-answer datasets this project does not ship.
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import { TEXT_TASK_NAMES, type TextSample, type TextTaskName, type TextTaskOptions } from './prompt.ts'
import {
  rulerCwe,
  rulerNiah,
  rulerVt,
  type RulerCweOptions,
  type RulerNiahOptions,
  type RulerVtOptions,
} from './ruler.ts'
import {
  storyFiltering,
  storyMultihop,
  storyRetrieval,
  type StoryFilteringOptions,
  type StoryRetrievalOptions,
} from './story.ts'

export {
  ANSWER_INSTRUCTION,
  TEXT_TASK_NAMES,
  buildPrompt,
  countTokens,
  type PromptParts,
  type QuestionPosition,
  type TextSample,
  type TextTaskName,
  type TextTaskOptions,
  type TextTaskTokenizer,
} from './prompt.ts'
export {
  CWE_WORDS,
  VT_NOISE,
  rulerCwe,
  rulerNiah,
  rulerVt,
  type RulerCweOptions,
  type RulerNiahOptions,
  type RulerVtOptions,
} from './ruler.ts'
export {
  MAX_CHAPTERS,
  PROTAGONIST,
  generateNarrative,
  storyFiltering,
  storyMultihop,
  storyRetrieval,
  type Chapter,
  type Narrative,
  type StoryFilteringOptions,
  type StoryRetrievalOptions,
} from './story.ts'
export {
  answerContent,
  normalizeAnswer,
  scoreTextSample,
  summarizeTextScores,
  type TextScore,
  type TextScoreSummary,
} from './metrics.ts'

/**
 * The options of every text task (each task reads its own and ignores the others').
 *
 * @category Text tasks
 */
export type AnyTextTaskOptions = TextTaskOptions &
  Omit<RulerNiahOptions, keyof TextTaskOptions> &
  Omit<RulerVtOptions, keyof TextTaskOptions> &
  Omit<RulerCweOptions, keyof TextTaskOptions> &
  Omit<StoryRetrievalOptions, keyof TextTaskOptions> &
  Omit<StoryFilteringOptions, keyof TextTaskOptions>

/**
 * One sample of a text task by name (see {@link TEXT_TASK_NAMES}).
 * @example
 * ```ts
 * const tokenizer = await loadTokenizer('tinystories656K/tokenizer.json') // @attnlab/transformer
 * const sample = generateTextTask('ruler-niah', { tokenizer, maxTokens: 512, seed: 0, groups: 1 })
 * scoreTextSample(sample, sample.goldAnswer).score // 1
 * ```
 * @throws `ConfigError` (`@attnlab/core`) (`task`) for an unknown name (listing the names), or naming the option the
 *   task rejects
 * @category Text tasks
 */
export function generateTextTask(task: TextTaskName, options: AnyTextTaskOptions): TextSample {
  switch (task) {
    case 'ruler-niah':
      return rulerNiah(options)
    case 'ruler-vt':
      return rulerVt(options)
    case 'ruler-cwe':
      return rulerCwe(options)
    case 'story-retrieval':
      return storyRetrieval(options)
    case 'story-multihop':
      return storyMultihop(options)
    case 'story-filtering':
      return storyFiltering(options)
    default:
      throw new ConfigError(
        'task',
        `'${String(task)}' is not a text task; expected one of ${TEXT_TASK_NAMES.join(', ')}`,
        {
          value: task,
        },
      )
  }
}

/**
 * The Sparse Frontier's evaluation on a real model with its tokenizer: the study's text tasks
 * (Ruler NIAH, VT, CWE; Story Retrieval, Multi-hop, Filtering, from `@attnlab/markov`'s
 * `generateTextTask`), greedy generation through each method's kernel, and the study's scores
 * with their quirks (Nawrot et al., arXiv 2504.17768 [v2]: tasks and metrics section 4 / A.2,
 * methods section 2, sparsity and budgets A.1 / Table 3, costs appendix B).
 *
 * @module
 */
import { ConfigError, Rng } from '@attnlab/core'
import {
  generateTextTask,
  scoreTextSample,
  summarizeTextScores,
  TEXT_TASK_NAMES,
  type TextSample,
  type TextScore,
  type TextTaskName,
} from '@attnlab/markov'
import {
  SPARSE_METHODS,
  createKernel,
  dense,
  type SparseAttentionKernel,
  type SparseMethodName,
} from '@attnlab/sparse-attention'
import { generate, type Transformer } from '@attnlab/transformer'
import type { Tokenizer } from '@attnlab/transformer/io'
import { meanExtra, sizedConfig } from './compare-with-dense.ts'
import { ExperimentInputError } from './errors.ts'
import {
  checkEvalBasics,
  costOf,
  DEFAULT_EVAL_SPARSITIES,
  meanStd,
  modelShapeOf,
  TEXT_TASK_KIND_SETTINGS,
  TEXT_TASK_SETTINGS,
  type SparseEvalResult,
  type SparseEvalRow,
} from './sparse-eval.ts'
import { clampReportedSparsity, targetReached } from './targets.ts'

/**
 * The task kinds {@link runTextSparseEval} scores: `@attnlab/markov`'s text tasks.
 *
 * @category Sparse evaluation
 */
export const TEXT_EVAL_TASK_KINDS: readonly TextTaskName[] = TEXT_TASK_NAMES

/** The number of new tokens {@link runTextSparseEval} generates per prompt when none is given. */
export const DEFAULT_TEXT_EVAL_NEW_TOKENS = 64

/** Options of {@link runTextSparseEval}. */
export interface TextSparseEvalOptions {
  /**
   * The tasks, as descriptions `{ kind: 'ruler-niah', needles: 1, groups: 1 }` ({@link TEXT_EVAL_TASK_KINDS};
   * settings in {@link TEXT_TASK_SETTINGS}); each is generated at every length.
   */
  readonly tasks: readonly Readonly<Record<string, unknown>>[]
  /** The model's tokenizer: the prompts' lengths are counted in its tokens, the outputs decoded with it. */
  readonly tokenizer: Tokenizer
  /** The methods (`dense` is always run as the reference and need not be listed). */
  readonly methods: readonly SparseMethodName[]
  /** Target sparsities in [0, 1) (default {@link DEFAULT_EVAL_SPARSITIES}); 0 is dense for every method. */
  readonly sparsities?: readonly number[]
  /**
   * Prompt lengths in tokens, BOS included: each prompt fills 90-100% of it (the task's `minFill`);
   * `length + maxNewTokens` must fit the model's `nCtx`.
   */
  readonly lengths: readonly number[]
  /** Prompts per (task, length), an integer >= 1 (the same ones for every method and sparsity). */
  readonly samples: number
  /** Seed of the prompts (default 0). */
  readonly seed?: number
  /** New tokens generated per prompt at most (default {@link DEFAULT_TEXT_EVAL_NEW_TOKENS}). */
  readonly maxNewTokens?: number
  /**
   * Text appended to every prompt to start the answer (default `''`: the study's template as it is). A base
   * model that does not follow instructions can be started on the format, e.g. `'\n<answer>'`; the prefix is
   * part of the scored output (`prefix + generated text`) and of the prompt's length.
   */
  readonly answerPrefix?: string
  /** Token ids that end an output (default: the tokenizer's EOS, if it has one). */
  readonly eosTokens?: readonly number[]
  /** User method sizes by config key (they win over the budget rules and are not calibrated). */
  readonly flags?: Readonly<Record<string, unknown>>
  /** Called after each (task, length, method, sparsity) row. */
  readonly onRow?: (row: SparseEvalRow, done: number, total: number) => void
}

function checkTextOptions(model: Transformer, options: TextSparseEvalOptions): readonly number[] {
  const sparsities = checkEvalBasics(options)
  const tokenizer = options.tokenizer as Partial<Tokenizer> | null | undefined
  if (
    tokenizer === null ||
    typeof tokenizer !== 'object' ||
    typeof tokenizer.encode !== 'function' ||
    typeof tokenizer.decode !== 'function'
  )
    throw new ExperimentInputError(
      'tokenizer',
      'text tasks need the model tokenizer (encode and decode), such as loadTokenizer(...) of @attnlab/transformer',
      {},
    )
  if (typeof tokenizer.vocabSize === 'number' && tokenizer.vocabSize > model.config.dVocab)
    throw new ExperimentInputError(
      'tokenizer',
      `the tokenizer has ${tokenizer.vocabSize} tokens but the model's vocabulary (dVocab) is ` +
        `${model.config.dVocab}: ` +
        'not this model tokenizer',
      { vocabSize: tokenizer.vocabSize, dVocab: model.config.dVocab },
    )
  if (options.answerPrefix !== undefined && typeof options.answerPrefix !== 'string')
    throw new ExperimentInputError(
      'answerPrefix',
      `answerPrefix must be a string; got ${typeof options.answerPrefix}`,
      {},
    )
  const newTokens = options.maxNewTokens ?? DEFAULT_TEXT_EVAL_NEW_TOKENS
  if (!Number.isInteger(newTokens) || newTokens < 1)
    throw new ExperimentInputError('maxNewTokens', `maxNewTokens must be an integer >= 1; got ${newTokens}`, {
      value: newTokens,
    })
  const { nCtx } = model.config
  if (newTokens > nCtx - 17)
    throw new ExperimentInputError(
      'maxNewTokens',
      `maxNewTokens ${newTokens} leaves no room for a prompt in the model's context (nCtx ${nCtx}): at most ` +
        `${nCtx - 17}, so that a prompt of at least 17 tokens fits`,
      { value: newTokens, nCtx },
    )
  if (options.lengths.length === 0)
    throw new ExperimentInputError('lengths', 'lengths must be a non-empty list of prompt lengths', {})
  for (const length of options.lengths) {
    if (!Number.isInteger(length) || length < 17 || length + newTokens > nCtx)
      throw new ExperimentInputError(
        'lengths',
        `length ${length} is not an integer in [17, ${nCtx - newTokens}]: the prompt and its ${newTokens} new ` +
          `tokens must fit the model's context (nCtx ${nCtx})`,
        { value: length, nCtx, maxNewTokens: newTokens },
      )
  }
  if (options.tasks.length === 0)
    throw new ExperimentInputError('tasks', 'tasks must be a non-empty list of task descriptions', {})
  for (const task of options.tasks) {
    const kind = task.kind
    if (typeof kind !== 'string' || !(TEXT_EVAL_TASK_KINDS as readonly string[]).includes(kind))
      throw new ExperimentInputError(
        'tasks',
        `task '${String(kind)}' is not a text task; expected one of ${TEXT_EVAL_TASK_KINDS.join(', ')}`,
        { kind: kind === undefined ? null : String(kind) },
      )
    const extra = Object.keys(task).find((key) => key !== 'kind' && !TEXT_TASK_SETTINGS.includes(key))
    if (extra !== undefined)
      throw new ExperimentInputError(
        'tasks',
        `'${extra}' is not a text task setting; expected one of ${TEXT_TASK_SETTINGS.join(', ')}`,
        { key: extra },
      )
    const own = TEXT_TASK_KIND_SETTINGS[kind] ?? []
    const other = Object.keys(task).find((key) => key !== 'kind' && !own.includes(key))
    if (other !== undefined)
      throw new ExperimentInputError('tasks', `'${other}' is not a ${kind} setting (it has ${own.join(', ')})`, {
        key: other,
      })
  }
  return sparsities
}

/** The common prefix of two token lists over the length of the first (1 when `reference` is empty). */
function prefixAgreement(reference: readonly number[], other: readonly number[]): number {
  if (reference.length === 0) return other.length === 0 ? 1 : 0
  let n = 0
  while (n < reference.length && reference[n] === other[n]) n++
  return n / reference.length
}

/** One prompt of a (task, length): the sample, its token ids (BOS as the tokenizer adds it). */
interface Prompt {
  readonly sample: TextSample
  readonly ids: readonly number[]
}

/**
 * Runs the Sparse Frontier evaluation on a real model with its tokenizer: for each text task (the
 * study's template, `samples` prompts per length from `Rng.fromSeed(seed).split('sparse-eval/<kind>/<length>')`,
 * each filling 90-100% of the length in the tokenizer's tokens), dense first, then each method at
 * each target sparsity, alone, on the same prompts. Each prompt is generated greedily (temperature 0)
 * for up to `maxNewTokens` tokens or until EOS through the method's kernel (`generate` of
 * `@attnlab/transformer`: prefill methods sparsify the prompt and decode densely; decode methods
 * prefill densely, evict or index, and sparsify every decode step; the first new token comes from
 * the prefill's last position, as in the study, where it begins the answer's preamble). The decoded
 * output is scored with the study's metric (`scoreTextSample`: per-item exact match for NIAH and
 * Story Retrieval, IoU for VT, CWE and Filtering, exact match for Multi-hop; CWE 0 without an
 * `<answer>` tag; Multi-hop and Filtering skip an empty answer) and strictly. Each row also reports
 * how much of the dense output the method reproduced (`agreement`), since a small model may fail the
 * task densely, the fraction of tagged outputs, and the first prompt's output text (with `answerPrefix`, the
 * prefix is appended to every prompt and scored as the start of the output). A method is
 * sized once per (method, target, length) on the first prompt (`sizedConfig`). Costs: appendix B's
 * prefill FLOPs or decode memory at the reported sparsity, for the mean prompt length. Leaves no
 * tensors behind; deterministic for a seed on one backend.
 *
 * @param model - any model of `@attnlab/transformer` (a loaded llama2.c or Hugging Face checkpoint)
 * @param options - tasks, tokenizer, methods, sparsities, lengths, samples, seed, new tokens
 * @returns the rows (`iou` is the score for the IoU-scored tasks, `NaN` for the others) and no
 *   head measurement (`heads` empty: text prompts have no answer positions to probe)
 * @throws ExperimentInputError (`INVALID_ARGUMENT`) for an unknown method, a sparsity outside [0, 1),
 *   samples below 1, no tokenizer or one larger than the model's vocabulary, `maxNewTokens` below 1, an
 *   `answerPrefix` that is not a string or whose prompt no longer fits `nCtx` with the new tokens,
 *   a length that leaves no room for the new tokens in `nCtx`, no task, a task that is not a text task
 *   or a setting no text task has or that the task does not read
 * @throws ExperimentInputError (`lengths`) when a length cannot hold a task in this tokenizer's tokens (the
 *   message names the smallest prompt or the fill reached); (`maxNewTokens`) when it leaves under 17 tokens of `nCtx`
 * @throws ConfigError (`@attnlab/core`) naming the setting the task rejects (out of its range)
 * @example
 * ```ts
 * const { model, tokenizer } = await loadModel('stories260K.bin', { tokenizer: 'tok512.bin' })
 * const { rows } = await runTextSparseEval(model, {
 *   tasks: [{ kind: 'ruler-niah', needles: 1, groups: 1 }], tokenizer: tokenizer!, methods: ['quest'],
 *   lengths: [448], samples: 10,
 * })
 * ```
 * @category Sparse evaluation
 */
export async function runTextSparseEval(model: Transformer, options: TextSparseEvalOptions): Promise<SparseEvalResult> {
  const sparsities = checkTextOptions(model, options)
  const { tokenizer } = options
  const seed = options.seed ?? 0
  const flags = options.flags ?? {}
  const maxNewTokens = options.maxNewTokens ?? DEFAULT_TEXT_EVAL_NEW_TOKENS
  const eosTokens = options.eosTokens ?? (tokenizer.eosId === undefined ? [] : [tokenizer.eosId])
  const shape = modelShapeOf(model)
  const { nLayers } = model.config
  const methods = options.methods.filter((m) => m !== 'dense')
  const bos = tokenizer.bosId === undefined ? 0 : 1
  const prefix = options.answerPrefix ?? ''
  const prefixTokens = prefix === '' ? 0 : tokenizer.encode(prefix, { bos: false, eos: false }).length
  // Every prompt first, so a task a length cannot hold fails before any generation.
  const groups = options.lengths.flatMap((length) =>
    options.tasks.map((description) => {
      const { kind, ...settings } = description as { kind: TextTaskName } & Record<string, unknown>
      const rng = Rng.fromSeed(seed).split(`sparse-eval/${kind}/${length}`)
      const prompts: Prompt[] = Array.from({ length: options.samples }, () => {
        const budget = length - bos - prefixTokens
        let sample: TextSample
        try {
          sample = generateTextTask(kind, {
            ...(settings as object),
            tokenizer,
            maxTokens: budget,
            seed: rng.int(2 ** 31),
          })
        } catch (error) {
          if (!(error instanceof ConfigError) || error.parameter !== 'maxTokens') throw error
          const own = (TEXT_TASK_KIND_SETTINGS[kind] ?? []).filter((k) => k !== 'questionPosition')
          const less =
            (bos === 1 ? ' less BOS' : '') + (prefixTokens > 0 ? ` less ${prefixTokens} of the answer prefix` : '')
          const longest = model.config.nCtx - maxNewTokens
          // the generator's own advice names its options (maxTokens): replaced by this harness's terms
          const reason = error.message.replace(/^Invalid maxTokens: /, '').replace(/; (raise|lower) maxTokens.*$/, '')
          // `needed` (the smallest prompt's tokens) is set when the length is too short for the task at all
          const needed = typeof error.details.needed === 'number' ? error.details.needed + length - budget : null
          const advice =
            needed !== null && needed > longest
              ? `No length fits: the smallest prompt needs a length of ${needed}, and with ${maxNewTokens} new ` +
                `tokens the model's context (nCtx ${model.config.nCtx}) allows at most ${longest}; shrink the ` +
                `task (${own.join(', ')}) or lower maxNewTokens`
              : needed !== null
                ? `Use a length of ${needed} to ${longest} (at most ${longest} with ${maxNewTokens} new tokens) or ` +
                  `shrink the task (${own.join(', ')})`
                : `Use a shorter length or a lower minFill (the task's settings: ${own.join(', ')})`
          throw new ExperimentInputError(
            'lengths',
            `length ${length} does not fit ${kind}: the task gets ${budget} tokens (${length}${less}); ${reason}. ` +
              advice,
            { length, kind, budget },
          )
        }
        const ids = tokenizer.encode(sample.prompt + prefix)
        // The prefix may merge with the prompt's last piece: the joint encoding is what runs, and it must fit.
        if (ids.length + maxNewTokens > model.config.nCtx)
          throw new ExperimentInputError(
            'answerPrefix',
            `the prompt with its answer prefix has ${ids.length} tokens, and ${maxNewTokens} new tokens do not fit ` +
              `the model's context (nCtx ${model.config.nCtx}); shorten the length or the prefix`,
            { tokens: ids.length },
          )
        return { sample, ids }
      })
      return { kind, length, prompts }
    }),
  )
  const total = groups.length * (1 + methods.length * sparsities.length)
  const rows: SparseEvalRow[] = []
  const push = (row: SparseEvalRow): void => {
    rows.push(row)
    options.onRow?.(row, rows.length, total)
  }
  for (const { kind, length, prompts } of groups) {
    const promptTokens = Math.round(prompts.reduce((a, p) => a + p.ids.length, 0) / prompts.length)
    let denseOutputs: readonly (readonly number[])[] = []
    const evaluate = async (
      method: SparseMethodName,
      target: number,
      kernel: SparseAttentionKernel,
    ): Promise<{ row: SparseEvalRow; outputs: number[][] }> => {
      const phase = method === 'dense' ? null : (SPARSE_METHODS[method].phase as 'prefill' | 'decode')
      const scores: TextScore[] = []
      const outputs: number[][] = []
      const texts: string[] = []
      const exact: number[] = []
      const reported: number[] = []
      for (const prompt of prompts) {
        const run = await generate(model, prompt.ids, {
          maxTokens: maxNewTokens,
          temperature: 0,
          attention: kernel,
          ...(eosTokens.length === 0 ? {} : { eosToken: eosTokens }),
        })
        const tokens = (run.tokens[0] ?? []).filter((t) => !eosTokens.includes(t))
        const text = prefix + tokenizer.decode(tokens)
        outputs.push(tokens)
        texts.push(text)
        scores.push(scoreTextSample(prompt.sample, text))
        // One report per layer for the prefill call, then one per layer per decode step.
        const reports =
          phase === 'decode' ? run.attentionReports.slice(nLayers) : run.attentionReports.slice(0, nLayers)
        exact.push(meanExtra(reports, 'exactSparsity'))
        reported.push(meanExtra(reports, 'reportedSparsity'))
      }
      const summary = summarizeTextScores(scores)
      const strict = meanStd(scores.map((s) => s.strict))
      const exactSparsity = meanStd(exact).mean
      const reportedSparsity = meanStd(reported).mean
      const config = (kernel.config ?? {}) as Record<string, unknown>
      const budget: Record<string, number> = {}
      for (const key of ['verticalSize', 'slashSize', 'alpha', 'topK', 'capacity', 'tokenBudget'])
        if (typeof config[key] === 'number') budget[key] = config[key] as number
      const { clamped } = clampReportedSparsity(reportedSparsity)
      const metric = prompts[0]?.sample.metric
      const row: SparseEvalRow = {
        task: kind,
        length,
        promptTokens,
        method,
        phase,
        targetSparsity: target,
        samples: prompts.length,
        score: summary.mean,
        scoreStd: summary.scored === 1 ? 0 : summary.sd,
        strict: strict.mean,
        strictStd: strict.std,
        iou: metric === 'iou' ? summary.mean : Number.NaN,
        exactSparsity,
        reportedSparsity,
        targetReached: targetReached(target, exactSparsity, clamped),
        budget,
        config: kernel.config,
        cost: costOf(shape, method, config, promptTokens, clamped),
        skipped: summary.skipped,
        tagged: scores.filter((s) => s.tagged).length / scores.length,
        agreement:
          method === 'dense' ? 1 : meanStd(outputs.map((o, i) => prefixAgreement(denseOutputs[i] ?? [], o))).mean,
        newTokens: meanStd(outputs.map((o) => o.length)).mean,
        example: texts[0] ?? '',
      }
      return { row, outputs }
    }
    const reference = await evaluate('dense', 0, dense())
    denseOutputs = reference.outputs
    push(reference.row)
    const firstPrompt = prompts[0]?.ids ?? []
    for (const method of methods) {
      for (const target of sparsities) {
        if (target === 0) {
          const cost = costOf(shape, method, {}, promptTokens, 0, false)
          push({ ...reference.row, method, config: {}, budget: {}, cost })
          continue
        }
        const config = sizedConfig(model, firstPrompt, method, target, flags)
        push((await evaluate(method, target, createKernel(method, config as never))).row)
      }
    }
  }
  return { context: model.config.nCtx, decoding: 'greedy', seed, rows, heads: [] }
}

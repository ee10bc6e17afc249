/**
 * The sparse evaluation ({@link runSparseEval}) on a saved model, with its results written to a
 * directory: what a sweep's `sparse-eval` trial runs (The Sparse Frontier, Nawrot et al., arXiv
 * 2504.17768 [v2], section 4). Node only (it reads the model and writes files).
 *
 * @module
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ConfigError, InterruptedError } from '@attnlab/core'
import { makeDirectories, writeFileAtomic } from '@attnlab/core/node'
import { loadModel } from '@attnlab/transformer'
import { sparseEvalReportHtml } from './sparse-eval-report.ts'
import {
  resolveSparseEvalTrialConfig,
  runSparseEval,
  type SparseEvalResult,
  type SparseEvalRow,
} from './sparse-eval.ts'
import { runTextSparseEval, TEXT_EVAL_TASK_KINDS } from './text-eval.ts'

/**
 * The message of a text task run on a model without a tokenizer, one wording for the CLI and the sweep trial: what
 * was looked for, where, and `fix` (e.g. `pass --tokenizer <path>`).
 *
 * @param tasks - the text tasks asked for, e.g. `['ruler-niah']`
 * @param model - the model path given
 * @param fix - how to give a tokenizer, in the caller's terms
 * @category Sparse evaluation
 */
export function missingTokenizerMessage(tasks: readonly string[], model: string, fix: string): string {
  const what = tasks.length === 1 ? `task ${tasks[0]} needs` : `tasks ${tasks.join(', ')} need`
  return (
    `the text ${what} the model's tokenizer and none was found beside ${model} (looked for ` +
    'tokenizer.bin or tokenizer.json beside a .bin checkpoint, tokenizer.json or tokenizer.bin in a model ' +
    `directory); ${fix}`
  )
}

/**
 * The task description an `attnlab train` checkpoint stores (`trainer.json`'s `extra.task`), or
 * null when `model` is not such a checkpoint (another model file, or no task recorded).
 *
 * @param model - the model path
 * @category Sparse evaluation
 */
export async function readTrainedTask(model: string): Promise<Record<string, unknown> | null> {
  try {
    const trainer = JSON.parse(await readFile(join(model, 'trainer.json'), 'utf8')) as { extra?: { task?: unknown } }
    const task = trainer.extra?.task
    return typeof task === 'object' && task !== null && !Array.isArray(task) ? (task as Record<string, unknown>) : null
  } catch {
    return null
  }
}

/**
 * The task a sparse evaluation scores: `task`'s keys over the trained task's (when the checkpoint
 * was trained on the same kind: its token ranges), without `nCtx` (set per length).
 *
 * @param task - the evaluation's task description (`{ kind, ...overrides }`)
 * @param trained - the checkpoint's task ({@link readTrainedTask}), or null
 * @category Sparse evaluation
 */
export function evaluationTask(
  task: Readonly<Record<string, unknown>>,
  trained: Readonly<Record<string, unknown>> | null,
): Record<string, unknown> {
  const base = trained !== null && trained.kind === task.kind ? { ...trained } : {}
  const merged: Record<string, unknown> = { ...base, ...task }
  delete merged.nCtx
  return merged
}

/** What {@link runSparseEvalDirectory} returns and writes to `results.json`. */
export interface SparseEvalDirectoryResult extends SparseEvalResult {
  /** The model path. */
  readonly model: string
  /** The task scored (see {@link evaluationTask}). */
  readonly task: Readonly<Record<string, unknown>>
  /** Wall-clock seconds of the evaluation (model loading excluded). */
  readonly seconds: number
}

/**
 * Runs {@link runSparseEval} (or, for a text task, `runTextSparseEval` with the model's tokenizer) on the
 * model a {@link SparseEvalTrialConfig} names and writes
 * `directory/results.json` (every row, the model and task) and `directory/report.html` (score
 * against sparsity), each atomically; nothing is written when it fails or is stopped.
 *
 * @param directory - the output directory (created if missing)
 * @param settings - a `SparseEvalTrialConfig` (validated here)
 * @param options - `signal` stops it after the current row (throws `InterruptedError`); `onRow` sees each row
 * @returns the result, with the model, the task and the seconds
 * @throws `ConfigError` (`@attnlab/core`) for invalid settings or a text task on a model without a tokenizer;
 *   `ModelFileError` (`@attnlab/core`) for a model
 *   path that cannot be read; `ExperimentInputError` for a length above the model's `nCtx` or a task the model's
 *   vocabulary cannot hold; `InterruptedError` when `signal` is aborted
 * @example
 * ```ts
 * await runSparseEvalDirectory('runs/eval', { model: 'runs/niah', methods: ['quest'], lengths: [256] })
 * ```
 * @category Sparse evaluation
 */
export async function runSparseEvalDirectory(
  directory: string,
  settings: unknown,
  options: {
    readonly signal?: AbortSignal
    readonly onRow?: (row: SparseEvalRow, done: number, total: number) => void
  } = {},
): Promise<SparseEvalDirectoryResult> {
  const config = resolveSparseEvalTrialConfig(settings)
  const text = (TEXT_EVAL_TASK_KINDS as readonly unknown[]).includes(config.task.kind)
  const task = text ? { ...config.task } : evaluationTask(config.task, await readTrainedTask(config.model))
  const loaded = await loadModel(config.model, {
    ...(config.tokenizer === undefined ? {} : { tokenizer: config.tokenizer }),
    ...(config.dummyPrefix === undefined ? {} : { dummyPrefix: config.dummyPrefix }),
  })
  let result: SparseEvalResult
  const started = performance.now()
  try {
    const common = {
      tasks: [task],
      methods: [...config.methods],
      sparsities: [...config.sparsities],
      lengths: [...config.lengths],
      samples: config.samples,
      seed: config.seed,
      onRow: (row: SparseEvalRow, done: number, total: number) => {
        if (options.signal?.aborted === true)
          throw new InterruptedError(`sparse evaluation stopped after row ${done} of ${total}`)
        options.onRow?.(row, done, total)
      },
    }
    if (text) {
      const tokenizer = loaded.tokenizer
      if (tokenizer === undefined)
        throw new ConfigError(
          'tokenizer',
          missingTokenizerMessage([String(task.kind)], config.model, "set the trial's tokenizer: <path>"),
        )
      result = await runTextSparseEval(loaded.model, {
        ...common,
        tokenizer,
        eosTokens: loaded.specialTokens.eos ?? (tokenizer.eosId === undefined ? [] : [tokenizer.eosId]),
        ...(config.maxNewTokens === undefined ? {} : { maxNewTokens: config.maxNewTokens }),
        ...(config.answerPrefix === undefined ? {} : { answerPrefix: config.answerPrefix }),
      })
    } else result = await runSparseEval(loaded.model, common)
  } finally {
    loaded.model.dispose()
  }
  const seconds = (performance.now() - started) / 1000
  const out: SparseEvalDirectoryResult = { model: config.model, task, seconds, ...result }
  await makeDirectories(directory)
  await writeFileAtomic(join(directory, 'results.json'), `${JSON.stringify(out, null, 2)}\n`)
  const title = `${config.model}: ${config.methods.join(', ')} on ${String(task.kind)}`
  await writeFileAtomic(join(directory, 'report.html'), await sparseEvalReportHtml(result, title))
  return out
}

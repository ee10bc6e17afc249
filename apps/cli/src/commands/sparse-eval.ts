/**
 * `attnlab sparse eval`: the Sparse Frontier evaluation, score against sparsity per task, method
 * and length, on a model trained here with `attnlab train --task niah-tokens|vt-tokens|cwe-tokens|
 * multihop-tokens` (`@attnlab/experiments`' `runSparseEval`) or on any model with its tokenizer on
 * the study's text tasks (`ruler-niah`, ..., `runTextSparseEval`); this file parses flags, calls
 * them, prints and writes the report.
 */
import { join } from 'node:path'
import { InvalidArgumentError, type Command } from 'commander'
import { writeFileAtomic } from '@attnlab/core/node'
import {
  DEFAULT_EVAL_SPARSITIES,
  DEFAULT_TEXT_EVAL_NEW_TOKENS,
  runSparseEval,
  runTextSparseEval,
  SPARSE_EVAL_TASK_KINDS,
  TEXT_EVAL_TASK_KINDS,
  TEXT_TASK_KIND_SETTINGS,
  TEXT_TASK_SETTINGS,
  sparseEvalReportHtml,
  sparseEvalTable,
  retrievalHeadsTable,
  type SparseEvalResult,
} from '@attnlab/experiments'
import { evaluationTask, missingTokenizerMessage, readTrainedTask } from '@attnlab/experiments/node'
import { SPARSE_METHODS, type SparseMethodName } from '@attnlab/sparse-attention'
import { UsageError } from '../errors.ts'
import { activateBackend, backendOption, forceOption, intParser, MODEL_PATH_HELP, modelFlagPath } from '../options.ts'
import { createDirectory, pathState } from '../out-dir.ts'
import { NO_DUMMY_PREFIX_HELP, TOKENIZER_HELP, loadModelWithTokenizerFlags } from '../tokenizer-flags.ts'

const ALL_TASKS: readonly string[] = [...SPARSE_EVAL_TASK_KINDS, ...TEXT_EVAL_TASK_KINDS]

interface EvalFlags {
  model: string
  tasks: string[]
  methods: SparseMethodName[]
  sparsity: number[]
  lengths: number[]
  samples: number
  seed: number
  out?: string
  force?: boolean
  backend?: string
  json?: boolean
  taskOptions?: Record<string, number | string>
  maxNewTokens?: number
  answerPrefix?: string
  tokenizer?: string
  dummyPrefix?: boolean
}

/** `--task-options needles=1,groups=1`: text task settings, numbers where they parse as numbers. */
function taskOptionsParser(value: string): Record<string, number | string> {
  const out: Record<string, number | string> = {}
  for (const item of value.split(',').map((s) => s.trim())) {
    const m = /^([A-Za-z]+)=(.+)$/.exec(item)
    if (m === null)
      throw new InvalidArgumentError(`--task-options takes comma-separated key=value settings, got '${item}'`)
    const key = m[1] as string
    if (!TEXT_TASK_SETTINGS.includes(key))
      throw new InvalidArgumentError(
        `--task-options: '${key}' is not a text task setting (${TEXT_TASK_SETTINGS.join(', ')})`,
      )
    const raw = (m[2] as string).trim()
    if (key in out) throw new InvalidArgumentError(`--task-options: ${key} is given twice; give each setting once`)
    out[key] = key === 'questionPosition' ? raw : Number(raw)
    if (key !== 'questionPosition' && !Number.isFinite(out[key] as number))
      throw new InvalidArgumentError(`--task-options: ${key} must be a number, got '${raw}'`)
  }
  return out
}

function listParser<T extends string>(flag: string, choices: readonly string[]): (value: string) => T[] {
  return (value) => {
    const items = value.split(',').map((s) => s.trim())
    const bad = items.find((s) => !choices.includes(s))
    if (items.length === 0 || bad !== undefined)
      throw new InvalidArgumentError(`${flag} takes comma-separated values of ${choices.join(', ')}, got '${bad}'`)
    return items as T[]
  }
}

function numberListParser(flag: string, check: (x: number) => boolean, what: string): (value: string) => number[] {
  return (value) => {
    const items = value.split(',').map((s) => s.trim())
    const bad = items.find((s) => s === '' || !check(Number(s)))
    if (bad !== undefined) throw new InvalidArgumentError(`${flag} must be comma-separated ${what}, got '${bad}'`)
    return items.map(Number)
  }
}

/**
 * Each text task with the `--task-options` it reads (one flag serves several tasks); a key none of them reads is a
 * usage error naming the tasks that do.
 */
function textTasksWithOptions(
  tasks: readonly string[],
  options: Readonly<Record<string, number | string>>,
): Record<string, unknown>[] {
  for (const key of Object.keys(options)) {
    if (!tasks.some((kind) => (TEXT_TASK_KIND_SETTINGS[kind] ?? []).includes(key))) {
      const readers = Object.keys(TEXT_TASK_KIND_SETTINGS).filter((k) => TEXT_TASK_KIND_SETTINGS[k]?.includes(key))
      throw new UsageError(`--task-options ${key} is read by ${readers.join(', ')}, not by ${tasks.join(', ')}`)
    }
  }
  return tasks.map((kind) => ({
    kind,
    ...Object.fromEntries(Object.entries(options).filter(([key]) => TEXT_TASK_KIND_SETTINGS[kind]?.includes(key))),
  }))
}

/** Runs `sparse eval`; returns the result with the model path and the report written (or null). */
async function runEvalCommand(
  flags: EvalFlags,
): Promise<SparseEvalResult & { model: string; report: string | null; tasks: unknown[] }> {
  let created: string | undefined
  if (flags.out !== undefined) {
    const state = await pathState(flags.out)
    if (state.kind === 'file') throw new UsageError(`--out ${flags.out} is a file; expected a directory`)
    if (state.kind === 'directory' && state.entries.length > 0 && flags.force !== true)
      throw new UsageError(`--out ${flags.out} is not empty; pass --force to overwrite its report`)
  }
  const textTasks = flags.tasks.filter((t) => (TEXT_EVAL_TASK_KINDS as readonly string[]).includes(t))
  const isText = textTasks.length > 0
  if (isText && textTasks.length < flags.tasks.length)
    throw new UsageError(
      `--tasks mixes text tasks (${textTasks.join(', ')}) with token tasks of a model trained here ` +
        `(${flags.tasks.filter((t) => !textTasks.includes(t)).join(', ')}); run them separately`,
    )
  if (
    !isText &&
    (flags.taskOptions !== undefined ||
      flags.maxNewTokens !== undefined ||
      flags.tokenizer !== undefined ||
      flags.dummyPrefix === false ||
      flags.answerPrefix !== undefined)
  )
    throw new UsageError(
      '--task-options, --max-new-tokens, --answer-prefix, --tokenizer and --no-dummy-prefix apply to the text tasks ' +
        `(${TEXT_EVAL_TASK_KINDS.join(', ')}); a token task keeps the configuration the model was trained on`,
    )
  await activateBackend(flags.backend)
  const modelPath = await modelFlagPath(flags.model)
  const trained = isText ? null : await readTrainedTask(modelPath)
  // A task the model was trained on keeps its stored configuration (its token ranges); others use defaults.
  const tasks = isText
    ? textTasksWithOptions(flags.tasks, flags.taskOptions ?? {})
    : flags.tasks.map((kind) => evaluationTask({ kind }, trained))
  const loaded = await loadModelWithTokenizerFlags(modelPath, flags, isText)
  try {
    const onRow = (
      row: { task: string; length: number; method: string; targetSparsity: number },
      done: number,
      total: number,
    ) => {
      if (flags.json !== true)
        process.stderr.write(`\r${done}/${total} ${row.task} ${row.length} ${row.method} ${row.targetSparsity}      `)
    }
    const common = {
      tasks,
      methods: flags.methods,
      sparsities: flags.sparsity,
      lengths: flags.lengths,
      samples: flags.samples,
      seed: flags.seed,
      onRow,
    }
    let result: SparseEvalResult
    if (isText) {
      const tokenizer = loaded.tokenizer
      if (tokenizer === undefined)
        throw new UsageError(missingTokenizerMessage(textTasks, flags.model, 'pass --tokenizer <path>'))
      const eos = loaded.specialTokens.eos ?? (tokenizer.eosId === undefined ? [] : [tokenizer.eosId])
      result = await runTextSparseEval(loaded.model, {
        ...common,
        tokenizer,
        eosTokens: eos,
        ...(flags.maxNewTokens === undefined ? {} : { maxNewTokens: flags.maxNewTokens }),
        ...(flags.answerPrefix === undefined ? {} : { answerPrefix: flags.answerPrefix.replace(/\\n/g, '\n') }),
      })
    } else result = await runSparseEval(loaded.model, common)
    if (flags.json !== true) process.stderr.write('\n')
    let report: string | null = null
    if (flags.out !== undefined) {
      created = await createDirectory(flags.out)
      void created
      const title = `${flags.model}: sparse attention on ${flags.tasks.join(', ')}`
      report = join(flags.out, 'report.html')
      await writeFileAtomic(report, await sparseEvalReportHtml(result, title))
      await writeFileAtomic(
        join(flags.out, 'results.json'),
        `${JSON.stringify({ model: flags.model, tasks, ...result }, null, 2)}\n`,
      )
    }
    return { model: flags.model, tasks, report, ...result }
  } finally {
    loaded.model.dispose()
  }
}

/** Registers `sparse eval` under the `sparse` command. */
export function registerSparseEval(sparse: Command): void {
  sparse
    .command('eval')
    .description(
      'score a model against sparsity per task, method and length: a model trained on retrieval tasks ' +
        "(niah-tokens, ...) or any model with its tokenizer on the study's text tasks (ruler-niah, ...); greedy " +
        'answers, score +- sample std, both sparsities, budget, cost model',
    )
    .requiredOption('--model <path>', MODEL_PATH_HELP)
    .requiredOption(
      '--tasks <list>',
      `comma-separated tasks: of a model trained here (${SPARSE_EVAL_TASK_KINDS.join(', ')}; the one the model ` +
        `was trained on keeps its configuration), or text tasks for any model with a tokenizer ` +
        `(${TEXT_EVAL_TASK_KINDS.join(', ')}; --lengths are prompt lengths in its tokens)`,
      listParser('--tasks', ALL_TASKS),
    )
    .requiredOption(
      '--methods <list>',
      `comma-separated methods (${Object.keys(SPARSE_METHODS).join(', ')}), each run alone; dense is always run`,
      listParser<SparseMethodName>('--methods', Object.keys(SPARSE_METHODS)),
    )
    .option(
      '--sparsity <list>',
      'target sparsities in [0, 1) (0 is dense for every method)',
      numberListParser('--sparsity', (x) => Number.isFinite(x) && x >= 0 && x < 1, 'numbers in [0, 1)'),
      [...DEFAULT_EVAL_SPARSITIES],
    )
    .requiredOption(
      '--lengths <list>',
      "context lengths (tokens), each at most the model's nCtx",
      numberListParser('--lengths', (x) => Number.isInteger(x) && x >= 1 && x <= 1 << 20, 'integers in [1, 1048576]'),
    )
    .option('--samples <n>', 'sequences per task and length (the same for every method)', intParser('--samples', 1), 20)
    .option(
      '--task-options <list>',
      `text tasks: comma-separated settings key=value (${TEXT_TASK_SETTINGS.join(', ')}), e.g. needles=1,groups=1`,
      taskOptionsParser,
    )
    .option(
      '--max-new-tokens <n>',
      `text tasks: new tokens generated per prompt at most (default ${DEFAULT_TEXT_EVAL_NEW_TOKENS}; ` +
        "length + this must fit the model's nCtx)",
      intParser('--max-new-tokens', 1),
    )
    .option(
      '--answer-prefix <text>',
      'text tasks: text appended to every prompt to start the answer (\\n is a newline), scored as the start of ' +
        "the output, e.g. '\\n<answer>' for a base model that does not follow the instruction",
    )
    .option('--tokenizer <path>', `text tasks: ${TOKENIZER_HELP}`)
    .option('--no-dummy-prefix', NO_DUMMY_PREFIX_HELP)
    .option('--seed <n>', 'seed of the evaluation sequences', intParser('--seed', 0), 0)
    .option(
      '--out <dir>',
      'write report.html (score against sparsity, relative error against length, score against cost) and ' +
        'results.json here',
    )
    .addOption(forceOption('a non-empty --out directory'))
    .addOption(backendOption())
    .option('--json', 'print the result as JSON')
    .action(async (flags: EvalFlags) => {
      const result = await runEvalCommand(flags)
      if (flags.json === true) {
        console.log(JSON.stringify(result, null, 2))
        return
      }
      console.log(`${flags.model}: nCtx ${result.context}, greedy answers, seed ${result.seed}`)
      for (const line of sparseEvalTable(result.rows)) console.log(line)
      if (result.heads !== undefined && result.heads.length > 0) {
        console.log('\nwhich heads retrieve (dense, teacher-forced; * the strongest):')
        for (const line of retrievalHeadsTable(result.heads)) console.log(line)
      }
      if (result.report !== null) console.log(`report: ${result.report}`)
    })
}

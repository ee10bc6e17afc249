/**
 * `attnlab markov sample | oracle`: data for the learning-dynamics experiments and the loss
 * floors / plateau lines a loss curve is compared against (`@attnlab/markov`).
 */
import cliProgress from 'cli-progress'
import { type Command, Help, Option } from 'commander'
import { Rng, formatNumber } from '@attnlab/core'
import { writeSafetensorsFile } from '@attnlab/core/node'
import {
  DEFAULT_MAX_EXACT_STATES,
  OracleTooLargeError,
  TASK_KINDS,
  createTask,
  isRetrievalTask,
  taskOracle,
  type AnyTask,
  type EntropyEstimate,
  type MonteCarloProgress,
  type TaskKind,
  type TaskOracle,
} from '@attnlab/markov'
import { UsageError } from '../errors.ts'
import { checkOutputFile, forceOption, intParser, withFlagNames } from '../options.ts'
import {
  TASK_FLAG_FIELDS,
  TASK_SEED_FIELDS,
  addTaskFlags,
  kebab,
  type TaskFlagKey,
  type TaskFlags,
} from '../run-flags.ts'
import { boundsInformative } from '@attnlab/experiments'

/** The task flags of `markov sample|oracle`: the run flags' task flags, with `--seed` for the task. */
type TaskOptions = Omit<TaskFlags, 'taskSeed'> & { seed: number }

function addTaskOptions(command: Command): Command {
  addTaskFlags(command, 'sparse-markov', { taskSeed: false })
  return command.option(
    '--seed <n>',
    'seed of the fixed task parameters (teacher, matrix M) and of the sampling',
    intParser('--seed', 0),
    0,
  )
}

/**
 * Builds the task from the parsed flags (each sets the configuration field `TASK_FLAG_FIELDS`
 * names); a flag of another task kind is a usage error, and a library message about a field a
 * flag set names the flag.
 *
 * @throws UsageError for a flag that does not apply to `--task` or a value the task refuses;
 *   ConfigError for other invalid values
 */
export function taskFromFlags(options: TaskOptions, command: Command): AnyTask {
  const kind = options.task as TaskKind
  if (!TASK_KINDS.includes(kind))
    throw new UsageError(`unknown task '${String(kind)}' (expected one of ${TASK_KINDS.join(', ')})`)
  const config: Record<string, unknown> = {}
  const flagNames: Record<string, string> = {}
  for (const [key, entry] of Object.entries(TASK_FLAG_FIELDS) as [
    TaskFlagKey,
    (typeof TASK_FLAG_FIELDS)[TaskFlagKey],
  ][]) {
    const fields: Partial<Record<TaskKind, string>> = entry.fields
    const negate = 'negate' in entry
    const flag = negate ? `--no-${kebab(key).slice(2)}` : kebab(key)
    const given = command.getOptionValueSource(key) === 'cli'
    const field = fields[kind]
    if (field === undefined) {
      if (given) {
        const kinds = Object.keys(fields).join(' / ')
        throw new UsageError(`${flag} does not apply to --task ${kind} (it is a ${kinds} flag)`)
      }
      continue
    }
    // A negated flag (--no-score-initial) counts only when given; its default is the field's.
    const value = negate ? (given ? false : undefined) : options[key]
    if (value === undefined) continue
    config[field] = value
    flagNames[field] = flag
  }
  const seedField = TASK_SEED_FIELDS[kind]
  if (seedField !== undefined) config[seedField] = options.seed
  return withFlagNames(flagNames, () => createTask({ kind, ...config }))
}

/** The random stream `markov sample` draws sequences from (documented in the file metadata). */
export function samplingRng(seed: number): Rng {
  return Rng.fromSeed(seed).split('markov/sample')
}

interface SampleOptions extends TaskOptions {
  sequences: number
  out?: string
  force?: boolean
  json?: boolean
}

interface OracleOptions extends TaskOptions {
  json?: boolean
  method: 'auto' | 'exact' | 'monte-carlo'
  maxStates: number
  mcSequences?: number
  contexts?: number
  sweeps?: number
  positionSpecific?: boolean
  oracleSequences: number
}

/** `attnlab markov`: `sample` and `oracle`. */
export function registerMarkov(program: Command): void {
  const markov = program
    .command('markov')
    .description(
      'sparse high-order Markov chains and the emergence tasks: sample datasets, compute loss floors and plateau lines',
    )

  addTaskOptions(
    markov
      .command('sample')
      .description('sample sequences and write tokens (int32) and loss_mask (uint8) [N, length] to a safetensors file')
      .option('--sequences <n>', 'number of sequences', intParser('--sequences', 1, 1 << 24), 1000)
      .option('--out <file>', 'output .safetensors file (written atomically; an existing one only with --force)')
      .addOption(forceOption('an existing --out file'))
      .option('--json', 'print a JSON summary'),
  ).action(async (options: SampleOptions, command: Command) => {
    if (options.out === undefined || options.out.trim() === '')
      throw new UsageError('--out <file> is required (the .safetensors file to write)')
    checkOutputFile('--out', options.out, undefined, options.force)
    const task = taskFromFlags(options, command)
    const batch = task.sample(options.sequences, samplingRng(options.seed))
    const description = task.describe()
    const metadata = {
      format: 'attnlab-markov-dataset/1',
      task: JSON.stringify(description),
      seed: String(options.seed),
      sampling: `Rng.fromSeed(${options.seed}).split('markov/sample'), task.sample(${options.sequences})`,
      sequences: String(batch.batchSize),
      seq_length: String(batch.seqLength),
      vocab_size: String(task.vocabSize),
    }
    await writeSafetensorsFile(
      options.out,
      {
        tokens: { dtype: 'I32', shape: [batch.batchSize, batch.seqLength], data: batch.tokens },
        loss_mask: { dtype: 'U8', shape: [batch.batchSize, batch.seqLength], data: batch.lossMask },
      },
      metadata,
    )
    const summary = {
      out: options.out,
      sequences: batch.batchSize,
      seqLength: batch.seqLength,
      vocabSize: task.vocabSize,
      task: description,
    }
    if (options.json) console.log(JSON.stringify(summary, null, 2))
    else
      console.log(
        `wrote ${batch.batchSize} sequences x ${batch.seqLength} tokens (${task.kind}, vocab ${task.vocabSize}) ` +
          `to ${options.out}`,
      )
  })

  addTaskOptions(
    markov
      .command('oracle')
      .description(
        'loss floors in nats: restricted-context entropies (sparse-markov), closed-form floor (linear-map), ' +
          'in-context Bayes loss (cellular-automaton, icl-markov)',
      )
      .addOption(
        new Option('--method <method>', 'sparse-markov: exact enumeration, Monte-Carlo, or exact when it fits')
          .choices(['auto', 'exact', 'monte-carlo'])
          .default('auto'),
      )
      .option(
        '--max-states <n>',
        'sparse-markov: largest d^C the exact oracle enumerates',
        intParser('--max-states', 1, 2 ** 28),
        DEFAULT_MAX_EXACT_STATES,
      )
      .option(
        '--mc-sequences <n>',
        'sparse-markov Monte-Carlo: sequences for counting estimates (default 40000)',
        intParser('--mc-sequences', 20),
      )
      .option(
        '--contexts <n>',
        'sparse-markov Monte-Carlo: contexts per posterior estimate (default 1000)',
        intParser('--contexts', 10),
      )
      .option(
        '--sweeps <n>',
        'sparse-markov Monte-Carlo: chain sweeps per context, a multiple of 4 (default 32)',
        intParser('--sweeps', 4),
      )
      .option('--position-specific', 'sparse-markov Monte-Carlo: also estimate the position-specific variant')
      .option(
        '--oracle-sequences <n>',
        'cellular-automaton / icl-markov: sequences for the Bayes-loss estimate',
        intParser('--oracle-sequences', 2, 1e8),
        20_000,
      )
      .option('--json', 'print JSON (nats)')
      .addHelpText(
        'after',
        `\n${new Help().boxWrap(
          "The task flags default to @attnlab/markov's defaults (the papers' settings), as in attnlab train; " +
            'attnlab emergence runs its own (see attnlab emergence --help, which says why): pass the same flags ' +
            '(e.g. --m 1.5) for the oracles of an emergence run. The emergence report computes its Monte-Carlo ' +
            'lines with this estimator on the span boundaries only, without posterior sampling, so its bounds ' +
            'can be wider.',
          100,
        )}`,
      ),
  ).action(async (options: OracleOptions, command: Command) => {
    const task = taskFromFlags(options, command)
    if (task.kind === 'text-chars') {
      throw new UsageError(
        'markov oracle has no loss oracle for --task text-chars (character-level language modelling of a text: ' +
          'no Bayes loss is known for it); its validation loss in attnlab train is the measure',
      )
    }
    if (isRetrievalTask(task)) {
      throw new UsageError(
        `markov oracle has no loss oracle for --task ${task.kind} (a retrieval task: its answers are determined ` +
          'by the context); score a model on it with attnlab sparse eval',
      )
    }
    if (task.kind !== 'sparse-markov') {
      for (const key of ['method', 'maxStates', 'mcSequences', 'contexts', 'sweeps', 'positionSpecific'] as const) {
        if (command.getOptionValueSource(key) === 'cli') {
          throw new UsageError(
            `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} applies only to --task sparse-markov`,
          )
        }
      }
    } else if (command.getOptionValueSource('oracleSequences') === 'cli') {
      throw new UsageError('--oracle-sequences applies only to --task cellular-automaton or icl-markov')
    }
    // The posterior-sampling estimates take minutes at the default size: a bar on a terminal, a line per
    // estimated length otherwise (nothing with --json).
    let bar: cliProgress.SingleBar | null = null
    let current = ''
    const onProgress = (p: MonteCarloProgress): void => {
      if (options.json) return
      const what = `H_${p.contextLength}${p.positionSpecific ? ' (position-specific)' : ''}`
      if (process.stderr.isTTY !== true) {
        if (what !== current)
          console.error(`attnlab: estimating ${what} by posterior sampling (${p.done}/${p.total} contexts)`)
        current = what
        return
      }
      if (bar === null) {
        bar = new cliProgress.SingleBar(
          {
            format: 'posterior sampling {bar} {value}/{total} contexts | {what} | ETA {eta_formatted}',
            barsize: 24,
            hideCursor: true,
            stream: process.stderr,
          },
          cliProgress.Presets.shades_classic,
        )
        bar.start(p.total, p.done, { what })
      }
      bar.update(p.done, { what })
      if (p.done >= p.total) bar.stop()
    }
    let result: TaskOracle
    try {
      result = taskOracle(task, {
        onProgress,
        method: options.method,
        maxStates: options.maxStates,
        seed: options.seed,
        ...(options.mcSequences !== undefined ? { mcSequences: options.mcSequences } : {}),
        ...(options.contexts !== undefined ? { contexts: options.contexts } : {}),
        ...(options.sweeps !== undefined ? { sweeps: options.sweeps } : {}),
        positionSpecific: options.positionSpecific === true,
        sequences: options.oracleSequences,
        onMonteCarlo: (states) => {
          if (options.json) return
          console.error(
            `attnlab: d^C = ${states.toExponential(2)} windows is beyond the exact oracle ` +
              `(--max-states ${options.maxStates}); estimating by Monte Carlo`,
          )
        },
      })
    } catch (error) {
      ;(bar as cliProgress.SingleBar | null)?.stop()
      if (!(error instanceof OracleTooLargeError) || task.kind !== 'sparse-markov') throw error
      // Said in flags: the library's error names its own functions.
      const states = error.states
      const raise = states <= 2 ** 28 ? ` or raise --max-states to ${formatNumber(states)}` : ''
      throw new UsageError(
        `--method exact enumerates d^C = ${task.vocabSize}^${task.contextLength} = ${states.toExponential(2)} ` +
          `windows, more than ` +
          `--max-states ${formatNumber(options.maxStates)}; use --method monte-carlo (estimates with standard ` +
          `errors)${raise}`,
      )
    }
    if (options.json) {
      console.log(JSON.stringify(result, null, 2))
      return
    }
    printOracle(result)
  })
}

function printOracle(oracle: TaskOracle): void {
  const result: Readonly<Record<string, unknown>> = oracle
  const fmt = (x: unknown, se?: unknown): string =>
    typeof x === 'number' ? `${x.toFixed(4)}${typeof se === 'number' ? ` +- ${se.toFixed(4)}` : ''}` : 'not estimated'
  const task = result.task as { kind: string }
  if (Array.isArray(result.restrictedContextEntropy)) {
    const values = result.restrictedContextEntropy as (number | null)[]
    const errors = (result.restrictedContextEntropyStandardError as (number | null)[] | undefined) ?? []
    console.log(`${task.kind}: restricted-context entropy H_n (nats, ${String(result.method)}), pooled over positions`)
    values.forEach((h, n) => {
      console.log(`  H_${n} = ${fmt(h, errors[n])}`)
    })
    console.log(`  teacher entropy = ${fmt(result.teacherEntropy, result.teacherEntropyStandardError)}`)
    const trunc = result.truncatedTeacherCrossEntropy as (number | null)[]
    console.log(`  truncated-teacher cross-entropy (k = 0..K): ${trunc.map((x) => fmt(x)).join(', ')}`)
    if (Array.isArray(result.estimates)) {
      for (const e of result.estimates as EntropyEstimate[]) {
        if (e.reliable) continue
        let bounds = ''
        if (e.bounds) {
          // Same test as the emergence report: a bound over half the gap between its estimated neighbours says nothing.
          const n = e.contextLength
          const below = values.slice(n + 1).find((x): x is number => typeof x === 'number') ?? null
          const above =
            values
              .slice(0, n)
              .reverse()
              .find((x): x is number => typeof x === 'number') ?? null
          const wide = boundsInformative(e.bounds, below, above) ? '' : '; too wide to test a plateau against'
          bounds = ` (it lies in [${e.bounds[0].toFixed(3)}, ${e.bounds[1].toFixed(3)}]${wide})`
        }
        console.log(`  note H_${e.contextLength}: ${e.note}${bounds}`)
      }
    }
    return
  }
  if (typeof result.lossFloor === 'number') {
    console.log(`${task.kind}: Bayes loss floor ${fmt(result.lossFloor)} nats (chance ${fmt(result.chanceLoss)})`)
    return
  }
  console.log(
    `${task.kind}: Bayes loss ${fmt(result.bayesLoss, result.bayesLossStandardError)} nats per scored token ` +
      `(chance ${fmt(result.chanceLoss)})`,
  )
}

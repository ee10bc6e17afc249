/**
 * `attnlab sweep`: a grid of experiment trials from one YAML or JSON spec (`@attnlab/sweeps`).
 *
 * - `sweep run SPEC --out DIR [--workers N] [--resume] [--retries N]`: every trial in worker
 *   processes, one progress bar over the trials; `DIR/sweep.json`, `DIR/trials.jsonl`,
 *   `DIR/trials/<id>/`;
 * - `sweep run-trial DIR --index I`: one trial of `DIR/sweep.json` in this process (what each
 *   SLURM array task runs);
 * - `sweep slurm SPEC --out DIR [--partition P --time T --cpus-per-task C] [--dry-run]`: the job
 *   array script `DIR/sweep.sbatch`, submitted with `sbatch` when it is installed;
 * - `sweep report DIR [--metric M --x PARAM --facet PARAM]`: `DIR/report.html` and `DIR/trials.csv`.
 */
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { availableParallelism } from 'node:os'
import { join, resolve } from 'node:path'
import cliProgress from 'cli-progress'
import { Option, type Command } from 'commander'
import { BACKEND_NAMES, InterruptedError, availableBackends, defaultBackend, type BackendName } from '@attnlab/core'
import { writeFileAtomic, makeDirectories } from '@attnlab/core/node'
import {
  SWEEP_EXPERIMENT_NAMES,
  SweepDirectoryError,
  buildSweepReport,
  expandTrials,
  parseSweepSpec,
  slurmScript,
  type SweepSpec,
} from '@attnlab/sweeps'
import {
  appendTrialRecord,
  initSweep,
  readSweepFile,
  readTrials,
  runSweep,
  runTrial,
  type SweepProgress,
} from '@attnlab/sweeps/node'
import { loadTokenizer } from '@attnlab/transformer'
import { UsageError } from '../errors.ts'
import { checkWritable } from '../out-dir.ts'
import { activateBackend, backendOption, intParser, kernelFlagsGiven } from '../options.ts'
import { onStopSignal } from '../signals.ts'

/** Reads and validates a spec file (a usage error when it cannot be read). */
export async function readSpec(path: string): Promise<SweepSpec> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    throw new UsageError(`cannot read the sweep spec ${path} (${(error as NodeJS.ErrnoException).code ?? error})`)
  }
  return parseSweepSpec(text, path)
}

/** A sweep directory error in the CLI's words (its flags). */
function directoryUsage(error: unknown, command: string): never {
  if (!(error instanceof SweepDirectoryError)) throw error
  const reason = error.details.reason
  const fix =
    reason === 'same-sweep'
      ? `continue it with: attnlab sweep ${command} ... --resume`
      : reason === 'other-sweep' || reason === 'not-empty'
        ? 'pick another --out, or pass --force (finished trials with the same settings are kept)'
        : ''
  throw new UsageError(fix === '' ? error.message : `${error.message.replace(/; (continue|pick).*$/, '')}; ${fix}`)
}

function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?'
  const m = Math.floor(seconds / 60)
  const s = Math.round(seconds % 60)
  return m > 0 ? `${m}m${String(s).padStart(2, '0')}s` : `${s}s`
}

/**
 * The backend the trials use: `--backend`, else the fastest available here; one that cannot run
 * here is a usage error before anything is written (the workers would each fail to start it).
 */
async function backendName(flag: string | undefined): Promise<BackendName> {
  if (flag === undefined) return defaultBackend()
  const available = await availableBackends()
  if (!available.includes(flag as BackendName)) {
    throw new UsageError(`--backend ${flag} cannot run here; backends available here: ${available.join(', ')}`)
  }
  return flag as BackendName
}

/** The flags of `sweep run` (and of `study run`, which runs each part of a study through it). */
export interface RunFlags {
  out: string
  workers?: number
  resume?: boolean
  force?: boolean
  retries: number
  backend?: string
  json?: boolean
  /** Print the `sweep report` line at the end (default true). */
  reportHint?: boolean
  /** Print the final counts on stderr instead of stdout (`study run --json` keeps stdout for its JSON). */
  countsToStderr?: boolean
}

/**
 * Refuses a sparse-eval sweep whose model is not on this machine, or whose tokenizer is missing or unreadable
 * (`loadTokenizer` with the trial's `dummyPrefix`), before any directory is made (a local run reads them in every
 * trial; queued and SLURM trials read them where they run, so only `sweep run` checks).
 */
async function checkLocalModels(spec: SweepSpec): Promise<void> {
  if (spec.experiment !== 'sparse-eval') return
  // per (tokenizer, dummyPrefix): null when it loads, else why not (each file read once for all trials)
  const problems = new Map<string, string | null>()
  for (const trial of await expandTrials(spec)) {
    const { model, tokenizer, dummyPrefix } = trial.settings as {
      model?: unknown
      tokenizer?: unknown
      dummyPrefix?: unknown
    }
    if (typeof model === 'string' && !existsSync(model)) {
      throw new UsageError(`trial ${trial.index + 1}: model ${model}: no such file or directory (the spec's model)`)
    }
    if (typeof tokenizer !== 'string') continue
    if (!existsSync(tokenizer))
      throw new UsageError(`trial ${trial.index + 1}: tokenizer ${tokenizer}: no such file (the spec's tokenizer)`)
    const key = `${tokenizer}\u0000${String(dummyPrefix)}`
    let problem = problems.get(key)
    if (problem === undefined) {
      problem = await loadTokenizer(tokenizer, dummyPrefix === false ? { dummyPrefix: false } : {}).then(
        () => null,
        (error: unknown) => (error instanceof Error ? error.message : String(error)),
      )
      problems.set(key, problem)
    }
    if (problem !== null)
      throw new UsageError(`trial ${trial.index + 1}: the spec's tokenizer ${tokenizer}: ${problem}`)
  }
}

/** `attnlab sweep run`. */
async function runCommand(specPath: string, flags: RunFlags): Promise<void> {
  const spec = await readSpec(specPath)
  await checkLocalModels(spec)
  await checkWritable(flags.out)
  await runSpec(spec, flags, `attnlab sweep run ${specPath} --out ${flags.out} --resume`)
}

/**
 * Runs a validated spec into `flags.out` with a progress bar, prints the counts, and fails like
 * `sweep run` does (an interruption names `resumeCommand`).
 */
export async function runSpec(spec: SweepSpec, flags: RunFlags, resumeCommand: string): Promise<void> {
  const backend = await backendName(flags.backend)
  const controller = new AbortController()
  const log = (text: string): void => {
    if (!flags.json) console.error(text)
  }
  const removeSignalListeners = onStopSignal(() => {
    log('\ninterrupted: stopping the running trials at their next step (their state is kept)...')
    controller.abort()
  })
  const interactive = process.stderr.isTTY === true && !flags.json
  let bar: cliProgress.SingleBar | null = null
  const state = { done: 0, failed: 0, running: 0, skipped: 0 }
  const onProgress = (event: SweepProgress): void => {
    switch (event.kind) {
      case 'start':
        state.skipped = event.skipped
        log(
          `attnlab sweep '${spec.name}': ${event.total} trials of ${spec.experiment}` +
            `${event.skipped > 0 ? ` (${event.skipped} already done)` : ''}; ${event.toRun} to run in ` +
            `${Math.min(flags.workers ?? availableParallelism(), event.toRun)} worker(s) on backend ${backend}; ` +
            `writing ${flags.out}`,
        )
        if (interactive && event.toRun > 0) {
          bar = new cliProgress.SingleBar(
            {
              format:
                '{bar} {value}/{total} trials | {done} done, {running} running, {failed} failed | ETA {eta_formatted}',
              barsize: 24,
              hideCursor: true,
              etaBuffer: 20,
              fps: 5,
              stream: process.stderr,
            },
            cliProgress.Presets.shades_classic,
          )
          bar.start(event.toRun, 0, { done: 0, running: 0, failed: 0 })
        }
        break
      case 'trial-start':
        state.running++
        bar?.update({ running: state.running })
        break
      case 'trial-progress':
        break
      case 'retry':
        state.running--
        log(`trial ${event.trial.index} failed (${event.error.code}: ${event.error.message}); attempt ${event.attempt}`)
        break
      case 'trial-end': {
        const { record } = event
        state.running--
        if (record.status === 'done') state.done++
        if (record.status === 'failed') state.failed++
        bar?.update(state.done + state.failed, { ...state })
        if (!interactive && record.status !== 'interrupted') {
          const loss = record.metrics.finalValidationLoss
          const lossText = typeof loss === 'number' ? `, final loss ${loss.toFixed(4)} nats` : ''
          log(
            `trial ${record.index} ${record.id} ${record.status}` +
              (record.status === 'done'
                ? ` in ${formatDuration(record.durationSeconds)}${lossText}`
                : `: [${record.error?.code}] ${record.error?.message}`),
          )
        }
        break
      }
    }
  }
  let result: Awaited<ReturnType<typeof runSweep>>
  try {
    result = await runSweep(spec, {
      out: flags.out,
      ...(flags.workers === undefined ? {} : { workers: flags.workers }),
      resume: flags.resume === true,
      force: flags.force === true,
      retries: flags.retries,
      backend,
      backendOptions: kernelFlagsGiven(),
      signal: controller.signal,
      onProgress,
    })
  } catch (error) {
    directoryUsage(error, 'run SPEC --out DIR')
  } finally {
    ;(bar as cliProgress.SingleBar | null)?.stop()
    removeSignalListeners()
  }
  const summary = {
    out: flags.out,
    trials: result.records.length,
    done: result.done,
    failed: result.failed,
    interrupted: result.interrupted,
    skipped: result.skipped,
    wallSeconds: result.wallSeconds,
  }
  if (flags.json) console.log(JSON.stringify(summary, null, 2))
  else {
    ;(flags.countsToStderr === true ? console.error : console.log)(
      `${result.done} done, ${result.failed} failed, ${result.interrupted} interrupted, ${result.skipped} skipped ` +
        `in ${formatDuration(result.wallSeconds)}; records: ${join(flags.out, 'trials.jsonl')}`,
    )
    if (flags.reportHint !== false) console.log(`report: attnlab sweep report ${flags.out}`)
  }
  if (result.stopped) {
    throw new InterruptedError(
      `interrupted; the stopped trials keep their state in ${join(flags.out, 'trials')} (continue with: ` +
        `${resumeCommand})`,
    )
  }
  if (result.failed > 0) {
    throw new Error(`${result.failed} trial(s) failed; their errors are in ${join(flags.out, 'trials.jsonl')}`)
  }
}

interface RunTrialFlags {
  index: number
  backend?: string
}

/** `attnlab sweep run-trial`: one trial of `DIR/sweep.json`, its record appended to `trials.jsonl`. */
async function runTrialCommand(dir: string, flags: RunTrialFlags): Promise<void> {
  let file: Awaited<ReturnType<typeof readSweepFile>>
  try {
    file = await readSweepFile(dir)
  } catch (error) {
    directoryUsage(error, 'run-trial')
  }
  const trial = file.trials[flags.index]
  if (trial === undefined) {
    throw new UsageError(`--index ${flags.index} is out of range: ${dir} has trials 0 to ${file.trials.length - 1}`)
  }
  const previous = (await readTrials(dir)).find((r) => r.id === trial.id)
  if (previous?.status === 'done') {
    console.log(`trial ${trial.index} ${trial.id} already done (${join(dir, 'trials.jsonl')})`)
    return
  }
  const backend = await activateBackend(flags.backend ?? file.backend)
  console.error(
    `attnlab sweep run-trial: trial ${trial.index} ${trial.id} of '${file.spec.name}' ` +
      `(${JSON.stringify(trial.params)}, seed ${trial.seed}) on ${backend}`,
  )
  const controller = new AbortController()
  const removeSignalListeners = onStopSignal(() => {
    console.error('\ninterrupted: stopping the trial at its next step (its state is kept)...')
    controller.abort()
  })
  let record: Awaited<ReturnType<typeof runTrial>>
  try {
    record = await runTrial(dir, trial, {
      signal: controller.signal,
      sweep: file.spec.name,
      attempt: (previous?.attempts ?? 0) + 1,
    })
  } finally {
    removeSignalListeners()
  }
  if (record.status === 'interrupted') {
    throw new InterruptedError(
      `interrupted; trial ${trial.index} keeps its state in ${join(dir, record.runDirectory)} ` +
        '(run it again to continue)',
    )
  }
  await appendTrialRecord(dir, record)
  if (record.status === 'failed') {
    throw new Error(`trial ${trial.index} ${trial.id} failed: [${record.error?.code}] ${record.error?.message}`)
  }
  console.log(`trial ${trial.index} ${trial.id} done in ${formatDuration(record.durationSeconds)}`)
}

interface SlurmFlags {
  out: string
  partition?: string
  time?: string
  cpusPerTask?: number
  maxRunning?: number
  dryRun?: boolean
  force?: boolean
  backend?: string
  command?: string
}

/** How this CLI was started, as the command each array task runs (node, its flags, the entry file). */
function thisCommand(): string[] {
  return [process.execPath, ...process.execArgv, process.argv[1] ?? 'attnlab']
}

/** SLURM's time limits: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]]. */
const SLURM_TIME = /^(\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2}|unlimited|infinite)$/i

/** A flag value for a message: quoted, or as JSON when it holds a line break (one line). */
function quoted(value: string): string {
  return /[\n\r]/.test(value) ? JSON.stringify(value) : `'${value}'`
}

/** The `#SBATCH` values and the command, checked before anything is written (sbatch would refuse the script). */
function checkSlurmFlags(flags: SlurmFlags): void {
  if (flags.time !== undefined && !SLURM_TIME.test(flags.time)) {
    throw new UsageError(
      `--time ${quoted(flags.time)} is not a SLURM time limit; expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, ` +
        'D-HH:MM:SS or UNLIMITED (e.g. 00:30:00)',
    )
  }
  if (flags.partition !== undefined && !/^[^\s,]+(,[^\s,]+)*$/.test(flags.partition)) {
    throw new UsageError(
      `--partition ${quoted(flags.partition)} is not a SLURM partition list; expected a name or names joined by commas`,
    )
  }
  if (flags.command !== undefined && flags.command.trim() === '') {
    throw new UsageError(`--command must name a program, got ${quoted(flags.command)}`)
  }
}

/** `attnlab sweep slurm`. */
async function slurmCommand(specPath: string, flags: SlurmFlags): Promise<void> {
  checkSlurmFlags(flags)
  const spec = await readSpec(specPath)
  await checkWritable(flags.out)
  // The array tasks activate it on the cluster's nodes (which may have backends this machine lacks).
  const backend = (flags.backend as BackendName | undefined) ?? (await defaultBackend())
  const out = resolve(flags.out)
  let file: Awaited<ReturnType<typeof initSweep>>
  try {
    // A resubmission of the same spec continues it (finished trials get no array task).
    file = await initSweep(spec, { out, backend, resume: true, force: flags.force === true })
  } catch (error) {
    directoryUsage(error, 'slurm SPEC --out DIR')
  }
  const finished = new Set((await readTrials(out)).filter((r) => r.status === 'done').map((r) => r.id))
  const indices = file.trials.filter((t) => !finished.has(t.id)).map((t) => t.index)
  if (indices.length === 0) {
    console.log(`every trial of ${out} is done; nothing to submit (report: attnlab sweep report ${flags.out})`)
    return
  }
  const script = slurmScript({
    sweepDir: out,
    name: spec.name,
    indices,
    command: flags.command === undefined ? thisCommand() : flags.command.split(/\s+/).filter((w) => w !== ''),
    ...(flags.partition === undefined ? {} : { partition: flags.partition }),
    ...(flags.time === undefined ? {} : { time: flags.time }),
    ...(flags.cpusPerTask === undefined ? {} : { cpusPerTask: flags.cpusPerTask }),
    ...(flags.maxRunning === undefined ? {} : { maxRunning: flags.maxRunning }),
  })
  const scriptPath = join(out, 'sweep.sbatch')
  await makeDirectories(join(out, 'slurm'))
  await writeFileAtomic(scriptPath, script)
  console.log(`${indices.length} array task(s) of ${file.trials.length} trials: ${scriptPath}`)
  if (flags.dryRun === true) {
    console.log(`not submitted (--dry-run); submit with: sbatch ${scriptPath}`)
    return
  }
  const probe = spawnSync('sbatch', ['--version'], { encoding: 'utf8' })
  if (probe.error !== undefined) {
    console.log(`sbatch is not installed here; submit on the cluster with: sbatch ${scriptPath}`)
    return
  }
  const submitted = spawnSync('sbatch', [scriptPath], { encoding: 'utf8' })
  if (submitted.status !== 0) {
    throw new Error(`sbatch ${scriptPath} failed (exit ${submitted.status}): ${submitted.stderr.trim()}`)
  }
  console.log(submitted.stdout.trim())
}

interface ReportFlags {
  metric?: string[]
  x?: string
  facet?: string
  json?: boolean
}

/** `attnlab sweep report`. */
async function reportCommand(dir: string, flags: ReportFlags): Promise<void> {
  if (!existsSync(dir)) throw new UsageError(`${dir}: no such directory (give a sweep's --out)`)
  const records = await readTrials(dir)
  if (records.length === 0) throw new UsageError(`${dir} holds no trial records (${join(dir, 'trials.jsonl')})`)
  const report = await buildSweepReport(records, {
    ...(flags.metric === undefined ? {} : { metrics: flags.metric }),
    ...(flags.x === undefined ? {} : { x: flags.x }),
    ...(flags.facet === undefined ? {} : { facet: flags.facet }),
  })
  await writeFileAtomic(join(dir, 'report.html'), report.html)
  await writeFileAtomic(join(dir, 'trials.csv'), report.csv)
  // A metric asked for by name that some done trials lack (a key spelled differently there, a null) is named.
  for (const metric of flags.metric ?? []) {
    const lacking = report.absent[metric]
    if (lacking !== undefined)
      console.error(
        `attnlab: warning: ${lacking.length === 1 ? '1 done trial' : `${lacking.length} done trials`} of ${dir} ` +
          `(${lacking.join(', ')}) ${lacking.length === 1 ? 'has' : 'have'} no number for ${metric}; ` +
          `${lacking.length === 1 ? 'it is' : 'they are'} left out of its chart and means`,
      )
  }
  if (flags.json) {
    console.log(
      JSON.stringify({ x: report.x, facet: report.facet, groups: report.groups, absent: report.absent }, null, 2),
    )
  } else {
    for (const metric of report.metrics) {
      console.log(`\n${metric} against ${report.x}${report.facet === null ? '' : ` (by ${report.facet})`}:`)
      for (const g of report.groups.filter((group) => group.metric === metric)) {
        const where = g.facet === null ? '' : `${report.facet} = ${g.facet}, `
        console.log(
          `  ${where}${report.x} = ${g.x}: mean ${g.mean.toPrecision(4)} ± ${g.sd.toPrecision(3)} (n = ${g.n}, ` +
            `${g.min.toPrecision(4)} to ${g.max.toPrecision(4)})`,
        )
      }
    }
  }
  console.error(`report: ${join(dir, 'report.html')}; all trials: ${join(dir, 'trials.csv')}`)
}

const EXAMPLES = `
Examples:
  attnlab sweep run examples/sweeps/emergence-genlen.yaml --out runs/sweeps/genlen --workers 2
  attnlab sweep run examples/sweeps/emergence-genlen.yaml --out runs/sweeps/genlen --resume
  attnlab sweep report runs/sweeps/genlen --metric emergenceStep --x task.genLen
  attnlab sweep slurm examples/sweeps/emergence-genlen.yaml --out /scratch/genlen --time 00:30:00 --dry-run

The spec (YAML or JSON): name, experiment (${SWEEP_EXPERIMENT_NAMES.join(' or ')}), base (settings over the
experiment's defaults), grid (dotted path -> list of values; Cartesian product), zip (equally long lists that
vary together), seeds (a count or a list). See packages/sweeps/README.md.`

/** `attnlab sweep`. */
export function registerSweep(program: Command): void {
  const sweep = program
    .command('sweep')
    .description('run a grid of experiment trials from one YAML/JSON spec: locally, or as a SLURM job array')
    .addHelpText('after', EXAMPLES)
  const run = sweep
    .command('run <spec>')
    .description('run every trial in worker processes; records in DIR/trials.jsonl, runs in DIR/trials/<id>/')
    .requiredOption('--out <dir>', 'the sweep directory')
    .option('--workers <n>', 'worker processes (default: the machine cores)', intParser('--workers', 1, 256))
    .option('--resume', 'continue the sweep in --out: skip finished trials, continue interrupted ones')
    .option('--force', 'start in an --out that holds another sweep or other files (finished trials are kept by id)')
    .option('--retries <n>', 'extra attempts of a failed trial', intParser('--retries', 0, 100), 0)
    .addOption(backendOption())
    .option('--json', 'print the counts as JSON instead of text')
    .addHelpText('after', EXAMPLES)
  run.action(async (spec: string, flags: RunFlags) => {
    await runCommand(spec, flags)
  })
  sweep
    .command('run-trial <dir>')
    .description("run one trial of DIR/sweep.json here and append its record (each SLURM array task's command)")
    .requiredOption('--index <i>', 'the trial index (0-based, as in sweep.json)', intParser('--index', 0))
    .addOption(new Option('--backend <name>', "tensor backend (default: the sweep's)").choices([...BACKEND_NAMES]))
    .action(async (dir: string, flags: RunTrialFlags) => {
      await runTrialCommand(dir, flags)
    })
  sweep
    .command('slurm <spec>')
    .description('write DIR/sweep.sbatch, a job array with one task per trial, and submit it with sbatch if present')
    .requiredOption('--out <dir>', 'the sweep directory (on a file system every node sees)')
    .option('--partition <p>', 'SLURM partition')
    .option('--time <t>', 'time limit per trial (SLURM format, e.g. 00:30:00)')
    .option('--cpus-per-task <c>', 'CPUs per array task', intParser('--cpus-per-task', 1, 1024))
    .option('--max-running <n>', 'most array tasks running at once', intParser('--max-running', 1))
    .option('--command <cmd>', 'how the array tasks start attnlab (default: the way this command was started)')
    .option('--dry-run', 'write the script, do not submit it')
    .option('--force', 'start in an --out that holds another sweep or other files')
    .addOption(backendOption())
    .action(async (spec: string, flags: SlurmFlags) => {
      await slurmCommand(spec, flags)
    })
  sweep
    .command('report <dir>')
    .description(
      'write DIR/report.html (a metric against a swept parameter, seeds as points, mean and spread) and DIR/trials.csv',
    )
    .option('--metric <name...>', 'metrics to plot (default: every metric the trials have)')
    .option('--x <param>', 'swept parameter on the x axis (default: the first that varies)')
    .option('--facet <param>', 'a second swept parameter, one panel per value (default: the next that varies)')
    .option('--json', 'print the plotted means as JSON')
    .action(async (dir: string, flags: ReportFlags) => {
      await reportCommand(dir, flags)
    })
}

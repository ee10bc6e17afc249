/**
 * `attnlab study`: the papers' figures as shipped sweeps (`@attnlab/sweeps`' `STUDIES`), each
 * finding tested on the trials' own numbers.
 *
 * - `study list`: the studies, their sources and trial counts;
 * - `study spec NAME [--full] [--part P]`: a study's sweep specs as YAML (to edit, or to run with
 *   `attnlab sweep` commands);
 * - `study run NAME --out DIR [--full] [--workers N | --queue URL] [--resume]`: every part's sweep
 *   into `DIR/<part>/`, then `DIR/report.html` and `DIR/findings.json`;
 * - `study report DIR`: the report again from the records there (after `--queue` or a partial run).
 */
import { existsSync, statSync } from 'node:fs'
import { readdir, readFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import type { Command } from 'commander'
import { stringify } from 'yaml'
import { InterruptedError, defaultBackend, type BackendName } from '@attnlab/core'
import { makeDirectories, writeFileAtomic } from '@attnlab/core/node'
import {
  STUDIES,
  SweepDirectoryError,
  buildStudyReport,
  describeOverrides,
  expandTrials,
  getStudy,
  resolveStudySweeps,
  verdictWord,
  type Study,
  type StudyOverrides,
  type StudySize,
} from '@attnlab/sweeps'
import { checkQueueConnection, collectSweep, parseQueueUrl, readTrials, submitSweep } from '@attnlab/sweeps/node'
import { UsageError } from '../errors.ts'
import { backendOption, intParser } from '../options.ts'
import { checkWritable } from '../out-dir.ts'
import { onStopSignal } from '../signals.ts'
import { runSpec } from './sweep.ts'

/** The format tag of `DIR/study.json`. */
const STUDY_FILE_FORMAT = 'attnlab-study/1'

interface StudyFile {
  readonly format: typeof STUDY_FILE_FORMAT
  readonly study: string
  readonly size: StudySize
  readonly parts: readonly string[]
  /** Seeds or steps the run changed (`--seeds`, `--steps`). */
  readonly overrides: StudyOverrides
}

/** The study of a name, as a usage error when unknown. */
function studyOf(name: string): Study {
  try {
    return getStudy(name)
  } catch (error) {
    throw new UsageError((error as Error).message.replace(/^Invalid study: /, ''))
  }
}

/** Reads `DIR/study.json` (null when absent); a usage error when it is not one. */
async function readStudyFile(dir: string): Promise<StudyFile | null> {
  const path = join(dir, 'study.json')
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw new UsageError(`cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? error})`)
  }
  let file: StudyFile
  try {
    file = JSON.parse(text) as StudyFile
  } catch {
    throw new UsageError(`${path} is not JSON; it is not a study directory's study.json`)
  }
  if (
    file?.format !== STUDY_FILE_FORMAT ||
    typeof file.study !== 'string' ||
    !['default', 'full'].includes(file.size)
  ) {
    throw new UsageError(`${path} is not an attnlab study file (expected format ${STUDY_FILE_FORMAT})`)
  }
  studyOf(file.study)
  return file
}

/** What {@link partRecords} reads: each part's records, and how many trials each part has. */
interface PartRecords {
  readonly records: Record<string, Awaited<ReturnType<typeof readTrials>>>
  readonly expected: Record<string, number>
}

/**
 * Each part's trial records by part name: only the trials of this study's specs (a directory that
 * held another size or budget before `--force` keeps those records; they are not this study's).
 */
async function partRecords(dir: string, file: StudyFile): Promise<PartRecords> {
  const sweeps = await resolveStudySweeps(getStudy(file.study), file.size, file.overrides, resolve(dir))
  const records: Record<string, Awaited<ReturnType<typeof readTrials>>> = {}
  const expected: Record<string, number> = {}
  for (const { part, spec } of sweeps) {
    const ids = new Set((await expandTrials(spec)).map((t) => t.id))
    records[part] = (await readTrials(join(dir, part))).filter((r) => ids.has(r.id))
    expected[part] = ids.size
  }
  return { records, expected }
}

/** The parts with fewer records than trials, in words (`width: 3 of 12 trials`; empty when complete). */
function missingTrials({ records, expected }: PartRecords): string {
  return Object.entries(expected)
    .filter(([part, count]) => (records[part]?.length ?? 0) < count)
    .map(([part, count]) => `${part}: ${records[part]?.length ?? 0} of ${count} trials`)
    .join(', ')
}

/** Writes the report and findings of `dir` and prints the findings. */
async function report(dir: string, file: StudyFile, json: boolean): Promise<void> {
  const study = getStudy(file.study)
  const size = file.size
  const read = await partRecords(dir, file)
  const built = await buildStudyReport(study, size, read.records, file.overrides)
  const findings = built.findings.map((f) => ({ ...f, verdict: verdictWord(f.holds) }))
  const trials = Object.fromEntries(
    Object.entries(read.expected).map(([part, count]) => [part, { done: read.records[part]?.length ?? 0, of: count }]),
  )
  await writeFileAtomic(join(dir, 'report.html'), built.html)
  await writeFileAtomic(
    join(dir, 'findings.json'),
    `${JSON.stringify(
      {
        study: study.name,
        size,
        overrides: file.overrides,
        source: study.source,
        trials,
        findings,
        tables: built.tables,
      },
      null,
      2,
    )}\n`,
  )
  if (json) {
    console.log(JSON.stringify({ study: study.name, size, trials, findings }, null, 2))
  } else {
    const changed = describeOverrides(file.overrides)
    console.log(
      `\n${study.title} (${study.source}); size ${size}${changed === '' ? '' : ` (${changed.replace(/\.$/, '')})`}:`,
    )
    for (const f of findings) console.log(`  [${f.verdict}] ${f.claim}\n      ${f.evidence}`)
  }
  const missing = missingTrials(read)
  if (missing !== '') {
    // A report of part of a study: its verdicts rest on fewer trials than the study's (say so, every time).
    console.error(
      `note: the report covers only the finished trials (${missing}); the others have not run or their records ` +
        `were lost: continue with attnlab study run ${file.study}${file.size === 'full' ? ' --full' : ''}` +
        `${budgetFlags(file.overrides)} --out ${dir} --resume`,
    )
  }
  console.error(`report: ${join(dir, 'report.html')}; findings: ${join(dir, 'findings.json')}`)
}

interface RunFlags {
  out: string
  full?: boolean
  seeds?: number
  steps?: number
  workers?: number
  resume?: boolean
  force?: boolean
  retries: number
  backend?: string
  queue?: string
  wait: boolean
  json?: boolean
}

/** `attnlab study run`. */
async function runCommand(name: string, flags: RunFlags): Promise<void> {
  const study = studyOf(name)
  const size: StudySize = flags.full === true ? 'full' : 'default'
  if (flags.queue !== undefined && flags.workers !== undefined) {
    throw new UsageError('--workers is for a local run; with --queue the attnlab workers on the queue run the trials')
  }
  if (flags.queue === undefined && !flags.wait) {
    throw new UsageError('--no-wait is for --queue (a local run always waits for its trials)')
  }
  if (flags.queue !== undefined) {
    // The URL and the server, before anything is written.
    let url: ReturnType<typeof parseQueueUrl>
    try {
      url = parseQueueUrl(flags.queue)
    } catch (error) {
      throw new UsageError(`--queue: ${(error as Error).message}`)
    }
    await checkQueueConnection(url)
  }
  const overrides: StudyOverrides = {
    ...(flags.seeds === undefined ? {} : { seeds: flags.seeds }),
    ...(flags.steps === undefined ? {} : { steps: flags.steps }),
  }
  let sweeps: Awaited<ReturnType<typeof resolveStudySweeps>>
  try {
    // Absolute: a part that starts from an earlier part's weights names their directory.
    sweeps = await resolveStudySweeps(study, size, overrides, resolve(flags.out))
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
  await checkWritable(flags.out)
  const existing = existsSync(flags.out) ? await readStudyFile(flags.out) : null
  const same = (a: StudyOverrides, b: StudyOverrides): boolean => a.seeds === b.seeds && a.steps === b.steps
  if (
    existing !== null &&
    (existing.study !== study.name || existing.size !== size || !same(existing.overrides ?? {}, overrides)) &&
    flags.force !== true
  ) {
    const recordedSize = existing.size === 'full' ? '--full' : 'the default size'
    const recorded = `${recordedSize}${budgetFlags(existing.overrides ?? {})}`
    const fix =
      existing.study === study.name
        ? 'give those flags with --resume to continue it, pick another --out, or pass --force'
        : `not '${study.name}'; pick another --out, or pass --force`
    throw new UsageError(`${flags.out} holds the study '${existing.study}' run with ${recorded}; ${fix}`)
  }
  if (existing === null && existsSync(flags.out) && (await readdir(flags.out)).length > 0 && flags.force !== true) {
    throw new UsageError(`${flags.out} is not empty and holds no study; pick another --out, or pass --force`)
  }
  if (existing !== null && existing.study === study.name && existing.size === size && flags.resume !== true) {
    if (flags.force !== true) {
      throw new UsageError(
        `${flags.out} already holds this study; continue it with: attnlab study run ${name}` +
          `${size === 'full' ? ' --full' : ''}${budgetFlags(overrides)} --out ${flags.out} --resume, or pass --force`,
      )
    }
  }
  await makeDirectories(flags.out)
  const file: StudyFile = {
    format: STUDY_FILE_FORMAT,
    study: study.name,
    size,
    parts: sweeps.map((s) => s.part),
    overrides,
  }
  await writeFileAtomic(join(flags.out, 'study.json'), `${JSON.stringify(file, null, 2)}\n`)
  const again = `${size === 'full' ? ' --full' : ''}${budgetFlags(overrides)}`
  const resume = `attnlab study run ${name}${again} --out ${flags.out} --resume`
  const log = (text: string): void => {
    if (!flags.json) console.error(text)
  }
  let failed = 0
  if (flags.queue === undefined) {
    for (const { part, spec } of sweeps) {
      log(`\nstudy '${study.name}' (${size}), part ${part}:`)
      try {
        await runSpec(
          spec,
          {
            out: join(flags.out, part),
            ...(flags.workers === undefined ? {} : { workers: flags.workers }),
            resume: true,
            force: flags.force === true,
            retries: flags.retries,
            ...(flags.backend === undefined ? {} : { backend: flags.backend }),
            reportHint: false,
            countsToStderr: true,
          },
          resume,
        )
      } catch (error) {
        if (error instanceof InterruptedError) throw error
        if (!/trial\(s\) failed/.test((error as Error).message)) throw error
        failed++
        log((error as Error).message)
      }
    }
  } else {
    failed = await runOnQueue(sweeps, flags, log)
  }
  await report(flags.out, file, flags.json === true)
  if (failed > 0) throw new Error(`trials failed in ${failed} part(s); their errors are in ${flags.out}/*/trials.jsonl`)
}

/** Submits every part to the queue, then (unless `--no-wait`) collects them in turn; returns the failed parts. */
async function runOnQueue(
  sweeps: Awaited<ReturnType<typeof resolveStudySweeps>>,
  flags: RunFlags,
  log: (text: string) => void,
): Promise<number> {
  const queue = flags.queue as string
  const backend = (flags.backend as BackendName | undefined) ?? (await defaultBackend())
  for (const { part, spec } of sweeps) {
    try {
      const submitted = await submitSweep(spec, {
        queue,
        out: join(flags.out, part),
        backend,
        retries: flags.retries,
        force: flags.force === true,
      })
      log(`part ${part}: ${submitted.added} trial(s) queued, ${submitted.skipped} already done`)
    } catch (error) {
      if (error instanceof SweepDirectoryError) throw new UsageError(error.message)
      throw error
    }
  }
  const again = sweeps.map(({ part }) => `attnlab sweep collect ${join(flags.out, part)} --queue ${queue}`)
  if (!flags.wait) {
    log(`not waiting (--no-wait); later: ${again.join('; ')}; then attnlab study report ${flags.out}`)
    return 0
  }
  log(`waiting for the workers (attnlab worker --queue ${queue}); Ctrl-C stops waiting, not the trials`)
  const controller = new AbortController()
  const removeSignalListeners = onStopSignal(() => controller.abort())
  let failed = 0
  try {
    for (const { part } of sweeps) {
      const result = await collectSweep(join(flags.out, part), {
        queue,
        wait: true,
        requeueMissing: { retries: flags.retries },
        signal: controller.signal,
      })
      if (result.stopped) {
        throw new InterruptedError(`stopped waiting; collect later with: ${again.join('; ')}`)
      }
      if (result.failed > 0) failed++
      log(`part ${part}: ${result.done} done, ${result.failed} failed`)
    }
  } finally {
    removeSignalListeners()
  }
  return failed
}

interface SpecFlags {
  full?: boolean
  part?: string
}

/** `attnlab study spec`. */
function specCommand(name: string, flags: SpecFlags): void {
  const study = studyOf(name)
  const size: StudySize = flags.full === true ? 'full' : 'default'
  const parts = study.parts(size)
  const chosen = flags.part === undefined ? parts : parts.filter((p) => p.name === flags.part)
  if (chosen.length === 0) {
    throw new UsageError(`--part ${flags.part}: ${name} has the parts ${parts.map((p) => p.name).join(', ')}`)
  }
  const documents = chosen.map(
    (part) => `# ${study.name}, part ${part.name}: ${part.description}\n${stringify(part.spec)}`,
  )
  console.log(documents.join('---\n').trimEnd())
}

/** `attnlab study list`. */
async function listCommand(flags: { json?: boolean }): Promise<void> {
  const rows = Object.values(STUDIES).map((study) => ({
    name: study.name,
    title: study.title,
    source: study.source,
    parts: study.parts('default').map((p) => p.name),
  }))
  if (flags.json) {
    console.log(JSON.stringify(rows, null, 2))
    return
  }
  for (const row of rows) console.log(`${row.name.padEnd(22)} ${row.title}\n${''.padEnd(22)} ${row.source}`)
}

/** A study's budget overrides as the flags that give them (` --seeds 2 --steps 300`; empty for none). */
function budgetFlags(overrides: StudyOverrides): string {
  return `${overrides.seeds === undefined ? '' : ` --seeds ${overrides.seeds}`}${
    overrides.steps === undefined ? '' : ` --steps ${overrides.steps}`
  }`
}

/** `attnlab study report`. */
async function reportCommand(dir: string, flags: { json?: boolean }): Promise<void> {
  if (!existsSync(dir)) throw new UsageError(`${dir}: no such directory (give a study's --out)`)
  if (!statSync(dir).isDirectory()) {
    throw new UsageError(`${dir} is a file, not a study directory (give the --out of attnlab study run)`)
  }
  const file = await readStudyFile(dir)
  if (file === null) throw new UsageError(`${dir} holds no study.json (give the --out of attnlab study run)`)
  const complete = { ...file, overrides: file.overrides ?? {} }
  const { records } = await partRecords(dir, complete)
  if (Object.values(records).every((list) => list.length === 0)) {
    throw new UsageError(
      `${dir} holds no trial records of this study (${file.parts.map((p) => join(dir, p, 'trials.jsonl')).join(', ')})`,
    )
  }
  await report(dir, complete, flags.json === true)
}

const EXAMPLES = `
Examples:
  attnlab study list
  attnlab study run linear-map-sparsity --out runs/studies/sparsity --workers 2
  attnlab study run linear-map-sparsity --out runs/studies/sparsity --resume
  attnlab study run emergence-time --full --out /shared/emergence-time --queue redis://10.0.0.5:6379/0
  attnlab study spec width --part fixed-width > width.yaml     # edit, then: attnlab sweep run width.yaml ...
  attnlab study report runs/studies/sparsity

Each study runs its sweeps into DIR/<part>/ (the sweep directory format of attnlab sweep), then writes
DIR/report.html and DIR/findings.json: each of the paper's findings, reproduced or not, with its numbers.
The default size is smaller than the paper's (its budget is in the study's description); --full is the paper's.`

/** `attnlab study`. */
export function registerStudy(program: Command): void {
  const study = program
    .command('study')
    .description(
      "run a paper's figure as shipped sweeps and test its findings on the trials (Baherwani et al.; Nawrot et al.)",
    )
    .addHelpText('after', EXAMPLES)
  study
    .command('list')
    .description('the shipped studies')
    .option('--json', 'print them as JSON')
    .action(async (flags: { json?: boolean }) => {
      await listCommand(flags)
    })
  study
    .command('spec <name>')
    .description("print a study's sweep specs as YAML (one document per part)")
    .option('--full', "the paper's grid and budget instead of the default size")
    .option('--part <name>', 'only this part')
    .action((name: string, flags: SpecFlags) => {
      specCommand(name, flags)
    })
  study
    .command('run <name>')
    .description("run a study's sweeps into DIR/<part>/, then write DIR/report.html and DIR/findings.json")
    .requiredOption('--out <dir>', 'the study directory')
    .option('--full', "the paper's grid and 10,000-step budget (default: a size of about 20 minutes on 2 cores)")
    .option(
      '--seeds <n>',
      "seeds per setting instead of the study's (a quick look: weaker evidence)",
      intParser('--seeds', 1, 10_000),
    )
    .option('--steps <n>', "training steps per trial instead of the study's", intParser('--steps', 1, 10_000_000))
    .option(
      '--workers <n>',
      'worker processes of a local run (default: the machine cores)',
      intParser('--workers', 1, 256),
    )
    .option('--queue <url>', 'submit the trials to this Redis queue for attnlab workers instead of running them here')
    .option('--no-wait', 'with --queue: submit and exit; then attnlab sweep collect each part and attnlab study report')
    .option('--resume', 'continue the study in --out (finished trials are kept)')
    .option('--force', 'start in an --out that holds something else')
    .option('--retries <n>', 'extra attempts of a failed trial', intParser('--retries', 0, 100), 0)
    .addOption(backendOption())
    .option('--json', 'print the findings as JSON')
    .addHelpText('after', EXAMPLES)
    .action(async (name: string, flags: RunFlags) => {
      await runCommand(name, flags)
    })
  study
    .command('report <dir>')
    .description('write DIR/report.html and DIR/findings.json from the trials recorded there')
    .option('--json', 'print the findings as JSON')
    .action(async (dir: string, flags: { json?: boolean }) => {
      await reportCommand(dir, flags)
    })
}

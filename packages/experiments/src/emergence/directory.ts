/**
 * The emergence run directory (Node only): `config.json`, `metrics.jsonl` (one line per
 * evaluation), `seeds/<seed>/checkpoint` (exact resume) and `seeds/<seed>/patterns.json`,
 * `summary.json` and `report.html`. Every file is written atomically.
 *
 * @module
 */
import { appendFile, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { AttnlabError, InvalidCheckpointError } from '@attnlab/core'
import { removeStaleTemporaries, writeFileAtomic } from '@attnlab/core/node'
import { CHECKPOINT_FORMAT, loadCheckpoint, saveCheckpoint } from '@attnlab/transformer/node'
import { z } from 'zod'
import { ExperimentInputError } from '../errors.ts'
import { loadInitialWeights } from '../init-from.ts'
import { resolveEmergenceRecord } from './config.ts'
import type { EmergenceResult, EmergenceSummary } from './experiment.ts'
import { buildEmergenceReport, type PatternSnapshot } from './report.ts'
import type { EmergenceRecord, EmergenceStore, SeedCheckpoint } from './run.ts'
import type { MetricLine } from './stages.ts'

/**
 * Where a seed's files live: `DIR/seeds/<seed>`.
 *
 * @category Emergence
 */
export function seedDirectory(out: string, seed: number): string {
  return join(out, 'seeds', String(seed))
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

/**
 * Options of {@link emergenceDirectoryStore}.
 *
 * @category Emergence
 */
export interface EmergenceDirectoryOptions {
  /** Replace whatever is at a seed's checkpoint path; otherwise only an earlier checkpoint. */
  readonly overwrite?: boolean
  /**
   * Called before the first write (after validation and the oracles): create the directory here
   * (the default creates nothing: the directory must exist).
   */
  readonly prepare?: () => Promise<void>
}

/**
 * The store that keeps a run in a directory (pass it to {@link runEmergence} as `store`):
 * `begin` removes temporaries of checkpoint writes killed in an earlier run, writes
 * `config.json` and (fresh) an empty `metrics.jsonl`; then one `metrics.jsonl` line per
 * evaluation, `seeds/<seed>/checkpoint` and `seeds/<seed>/patterns.json`.
 *
 * @param out - the run directory
 * @param options - overwrite, prepare
 * @returns the store
 * @category Emergence
 */
export function emergenceDirectoryStore(out: string, options: EmergenceDirectoryOptions = {}): EmergenceStore {
  const metricsPath = join(out, 'metrics.jsonl')
  const checkpointDir = (seed: number): string => join(seedDirectory(out, seed), 'checkpoint')
  const overwrite = options.overwrite === true
  return {
    async begin(record, { resume }) {
      await options.prepare?.()
      for (const seed of record.seeds) await removeStaleTemporaries(seedDirectory(out, seed), 'checkpoint')
      await writeFileAtomic(join(out, 'config.json'), `${JSON.stringify(record, null, 2)}\n`)
      if (!resume) await writeFileAtomic(metricsPath, '')
    },
    readMetrics: () => readMetricLines(out),
    async writeMetrics(lines) {
      await writeFileAtomic(metricsPath, lines.map((l) => `${JSON.stringify(l)}\n`).join(''))
    },
    async appendMetric(line) {
      await appendFile(metricsPath, `${JSON.stringify(line)}\n`)
    },
    async loadCheckpoint(seed): Promise<SeedCheckpoint | null> {
      if (!(await exists(checkpointDir(seed)))) return null
      const checkpoint = await loadCheckpoint(checkpointDir(seed))
      return { weights: checkpoint.weights, trainerState: checkpoint.trainerState ?? null }
    },
    async readSnapshots(seed) {
      try {
        const text = await readFile(join(seedDirectory(out, seed), 'patterns.json'), 'utf8')
        return JSON.parse(text) as PatternSnapshot[]
      } catch {
        return []
      }
    },
    async saveCheckpoint(seed, model, state, extra) {
      await saveCheckpoint(checkpointDir(seed), model, state, { ...extra }, { overwrite })
    },
    async writeSnapshots(seed, snapshots) {
      await writeFileAtomic(join(seedDirectory(out, seed), 'patterns.json'), JSON.stringify(snapshots))
    },
    loadInitialWeights,
  }
}

/**
 * The evaluations of a run directory (`metrics.jsonl`); a line cut by a crash mid-write is
 * skipped, a missing file gives none.
 *
 * @param out - the run directory
 * @returns the lines in the order written
 * @category Emergence
 */
export async function readMetricLines(out: string): Promise<MetricLine[]> {
  let text: string
  try {
    text = await readFile(join(out, 'metrics.jsonl'), 'utf8')
  } catch {
    return []
  }
  const lines: MetricLine[] = []
  for (const [index, raw] of text.split('\n').entries()) {
    if (raw.trim() === '') continue
    let parsed: unknown
    try {
      parsed = JSON.parse(raw)
    } catch {
      // A line cut by a crash mid-write: ignore it (a resume rewrites the log).
      continue
    }
    // A line that parses but is not an evaluation (a corrupted key or value) is refused, never analysed.
    const line = metricLineSchema.safeParse(parsed)
    if (!line.success) {
      const issue = line.error.issues[0]
      const where = issue === undefined || issue.path.length === 0 ? '' : ` (${issue.path.join('.')})`
      throw new ExperimentInputError(
        'out',
        `${join(out, 'metrics.jsonl')}: line ${index + 1} is not an evaluation${where}: ${issue?.message ?? 'invalid'}`,
        { out, line: index + 1 },
      )
    }
    lines.push(line.data as MetricLine)
  }
  return lines
}

// Measurements may be null: JSON writes a NaN (a diverged run) as null.
const measure = z.number().nullable()
/** One `metrics.jsonl` line ({@link MetricLine}): its fields and their shapes; unknown keys are kept. */
const metricLineSchema = z.looseObject({
  seed: z.number().int(),
  step: z.number().int().min(0),
  tokens: z.number().min(0),
  seconds: z.number().min(0),
  trainLoss: measure,
  validationLoss: measure,
  lr: measure,
  spanMass: z.array(z.array(measure)).nullable(),
  attentionEntropy: z.array(measure),
  teacherKL: z.array(measure).nullable(),
  valueAlignment: z.array(z.array(measure)).nullable(),
  perPositionLoss: z.array(measure),
})

/**
 * Reads a run directory's `config.json` (to resume it: `resolveEmergenceRecord`).
 *
 * @param out - the run directory
 * @returns the record
 * @throws {@link ExperimentInputError} (`INVALID_ARGUMENT`, parameter `out`) when there is no
 *   `config.json`, it is not JSON, not an emergence run's (format `attnlab-emergence/1`), or its
 *   task or model does not rebuild
 * @category Emergence
 */
export async function readEmergenceRecord(out: string): Promise<EmergenceRecord> {
  let text: string
  try {
    text = await readFile(join(out, 'config.json'), 'utf8')
  } catch {
    const file = await stat(out).then(
      (s) => s.isFile(),
      () => false,
    )
    const message = file
      ? `${out} is a file, not an emergence run directory (give the directory an emergence run wrote)`
      : `${out}: no config.json there (not an emergence run directory)`
    throw new ExperimentInputError('out', message, { out })
  }
  let record: EmergenceRecord
  try {
    record = JSON.parse(text) as EmergenceRecord
  } catch (error) {
    // JSON.parse quotes the text around the fault, newlines included: keep the message on one line.
    const reason = (error as Error).message.replace(/\s+/g, ' ')
    throw new ExperimentInputError('out', `${out}: config.json is not valid JSON (${reason})`, {
      out,
    })
  }
  if (record?.format !== 'attnlab-emergence/1') {
    const manifest = await readFile(join(out, 'manifest.json'), 'utf8').then(
      (t) => (JSON.parse(t) as { format?: unknown } | null)?.format,
      () => undefined,
    )
    const message =
      manifest === CHECKPOINT_FORMAT
        ? `${out} is an attnlab train checkpoint (${CHECKPOINT_FORMAT}), not an emergence run; ` +
          'resume it with attnlab train --resume'
        : `${out}: config.json is not an emergence run's (${
            record?.format === undefined ? 'it has no format field' : `format ${JSON.stringify(record.format)}`
          }; expected attnlab-emergence/1)`
    throw new ExperimentInputError('out', message, { out })
  }
  try {
    // The task and model it records must rebuild: say so here, naming the file, not later without it.
    resolveEmergenceRecord(record)
  } catch (error) {
    if (!(error instanceof AttnlabError)) throw error
    throw new ExperimentInputError('out', `${out}: config.json does not describe a run to resume: ${error.message}`, {
      out,
    })
  }
  return record
}

/**
 * Checks, before any work, that every seed's checkpoint of a run being resumed loads (manifest,
 * checksums, shapes) and is not past `steps`.
 *
 * @param out - the run directory
 * @param record - its record, with the steps to continue up to
 * @throws `InvalidCheckpointError` (code `INVALID_CHECKPOINT`) naming the seed and the checkpoint's problem
 * @throws {@link ExperimentInputError} (parameter `steps`) when a checkpoint is past `steps`
 * @category Emergence
 */
export async function checkResumable(out: string, record: EmergenceRecord): Promise<void> {
  for (const seed of record.seeds) {
    const dir = join(seedDirectory(out, seed), 'checkpoint')
    if (!(await exists(dir))) continue
    let step: number
    try {
      const checkpoint = await loadCheckpoint(dir)
      step = checkpoint.trainerState?.step ?? 0
      checkpoint.weights.clear()
    } catch (error) {
      if (!(error instanceof AttnlabError)) throw error
      throw new InvalidCheckpointError(
        `${out}: the checkpoint of seed ${seed} (${dir}) cannot be used: ${error.message}`,
        { path: dir },
        { cause: error },
      )
    }
    if (step > record.training.steps) {
      throw new ExperimentInputError(
        'steps',
        `steps ${record.training.steps} is below the step ${step} of seed ${seed}'s checkpoint`,
        { steps: record.training.steps, checkpointStep: step, seed },
      )
    }
  }
}

/**
 * `summary.json`: the run's summary with where its files are.
 *
 * @category Emergence
 */
export type EmergenceFileSummary = { readonly out: string; readonly reportPath: string } & EmergenceSummary

/**
 * Writes a run's `report.html` ({@link buildEmergenceReport}) and `summary.json`.
 *
 * @param out - the run directory
 * @param result - what {@link runEmergence} returned
 * @returns the summary as written (with `out` and `reportPath`)
 * @category Emergence
 */
export async function writeEmergenceResult(out: string, result: EmergenceResult): Promise<EmergenceFileSummary> {
  const reportPath = join(out, 'report.html')
  await writeFileAtomic(reportPath, await buildEmergenceReport(result))
  const summary: EmergenceFileSummary = { out, reportPath, ...result.summary }
  await writeFileAtomic(join(out, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`)
  return summary
}

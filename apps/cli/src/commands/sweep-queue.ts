/**
 * The distributed part of `attnlab sweep` (a BullMQ queue on Redis; `attnlab worker` runs the
 * trials):
 *
 * - `sweep submit SPEC --queue URL --out DIR [--retries N] [--no-wait]`: queues every trial (job id
 *   = trial id: a resubmission queues nothing twice), then collects the records into
 *   `DIR/trials.jsonl` as the trials finish;
 * - `sweep collect DIR --queue URL [--no-wait]`: the same collection, later or again;
 * - `sweep status [DIR] --queue URL`: waiting / active / completed / failed per sweep and per worker.
 */
import { join } from 'node:path'
import { InterruptedError, type BackendName, defaultBackend } from '@attnlab/core'
import { SweepDirectoryError } from '@attnlab/sweeps'
import {
  collectSweep,
  queueStatus,
  submitSweep,
  type CollectResult,
  type QueuedTrialRecord,
} from '@attnlab/sweeps/node'
import type { Command } from 'commander'
import { UsageError } from '../errors.ts'
import { backendOption, intParser } from '../options.ts'
import { checkWritable } from '../out-dir.ts'
import { onStopSignal } from '../signals.ts'
import { readSpec } from './sweep.ts'

/** A sweep directory error in the CLI's words. */
function directoryUsage(error: unknown): never {
  if (error instanceof SweepDirectoryError) throw new UsageError(error.message.replace(/pass force/, 'pass --force'))
  throw error
}

/** One line per collected record. */
function describeRecord(record: QueuedTrialRecord): string {
  const loss = record.metrics.finalValidationLoss
  const where = record.artifacts === undefined ? '' : ` on ${record.artifacts.host}`
  return record.status === 'done'
    ? `trial ${record.index} ${record.id} done in ${record.durationSeconds.toFixed(1)} s${where}` +
        `${typeof loss === 'number' ? `, final loss ${loss.toFixed(4)} nats` : ''}`
    : `trial ${record.index} ${record.id} failed after ${record.attempts} attempt(s)${where}: ` +
        `[${record.error?.code}] ${record.error?.message}`
}

interface CollectFlags {
  queue: string
  wait: boolean
  retries: number
  json?: boolean
}

/** Collects (waiting or not), prints the counts, and fails like `sweep run` does. */
async function collect(dir: string, flags: CollectFlags, command: string): Promise<void> {
  const controller = new AbortController()
  const log = (text: string): void => {
    if (!flags.json) console.error(text)
  }
  const removeSignalListeners = onStopSignal(() => {
    log('\ninterrupted: no longer waiting (the trials stay queued and the workers go on)')
    controller.abort()
  })
  let result: CollectResult
  try {
    result = await collectSweep(dir, {
      queue: flags.queue,
      wait: flags.wait,
      // Trials whose jobs Redis lost (restarted without persistence) are queued again.
      requeueMissing: { retries: flags.retries },
      signal: controller.signal,
      onProgress: (event) => log(describeRecord(event.record)),
    })
  } catch (error) {
    directoryUsage(error)
  } finally {
    removeSignalListeners()
  }
  if (flags.json) console.log(JSON.stringify({ out: dir, ...result }, null, 2))
  else {
    console.log(
      `${result.done} done, ${result.failed} failed, ${result.pending} waiting or running` +
        `${result.missing > 0 ? `, ${result.missing} not in the queue` : ''}; records: ${join(dir, 'trials.jsonl')}`,
    )
  }
  const again = `attnlab sweep collect ${dir} --queue ${flags.queue}`
  if (result.stopped) throw new InterruptedError(`stopped waiting; collect the records later with: ${again}`)
  if (result.failed > 0) {
    throw new Error(`${result.failed} trial(s) failed; their errors are in ${join(dir, 'trials.jsonl')}`)
  }
  if (result.pending + result.missing > 0 && command === 'collect' && !flags.wait) {
    log(`${result.pending + result.missing} trial(s) not finished yet; collect again later: ${again}`)
  }
}

interface SubmitFlags extends CollectFlags {
  out: string
  force?: boolean
  backend?: string
}

/** `attnlab sweep submit`. */
async function submitCommand(specPath: string, flags: SubmitFlags): Promise<void> {
  const spec = await readSpec(specPath)
  await checkWritable(flags.out)
  const backend = (flags.backend as BackendName | undefined) ?? (await defaultBackend())
  let submitted: Awaited<ReturnType<typeof submitSweep>>
  try {
    submitted = await submitSweep(spec, {
      queue: flags.queue,
      out: flags.out,
      backend,
      retries: flags.retries,
      force: flags.force === true,
    })
  } catch (error) {
    directoryUsage(error)
  }
  const log = (text: string): void => {
    if (!flags.json) console.error(text)
  }
  log(
    `attnlab sweep '${spec.name}' (${submitted.sweepId}): ${submitted.file.trials.length} trials of ` +
      `${spec.experiment} ` +
      `on backend ${backend}: ${submitted.added} queued now, ${submitted.queued} already queued, ` +
      `${submitted.retried} failed before and queued again, ${submitted.skipped} already done; writing ${flags.out}`,
  )
  if (!flags.wait) {
    log(`not waiting (--no-wait); collect the records with: attnlab sweep collect ${flags.out} --queue ${flags.queue}`)
    return
  }
  log(`waiting for the workers (attnlab worker --queue ${flags.queue}); Ctrl-C stops waiting, not the trials`)
  await collect(flags.out, flags, 'submit')
}

interface StatusFlags {
  queue: string
  json?: boolean
}

/** `attnlab sweep status`. */
async function statusCommand(dir: string | undefined, flags: StatusFlags): Promise<void> {
  let status: Awaited<ReturnType<typeof queueStatus>>
  try {
    status = await queueStatus({ queue: flags.queue, ...(dir === undefined ? {} : { dir }) })
  } catch (error) {
    directoryUsage(error)
  }
  if (flags.json) {
    console.log(JSON.stringify(status, null, 2))
    return
  }
  const c = status.counts
  console.log(
    `queue ${status.queue}: ${c.waiting} waiting, ${c.active} active, ${c.completed} completed, ${c.failed} failed` +
      `${c.delayed > 0 ? `, ${c.delayed} delayed` : ''}`,
  )
  console.log('\nsweep                               waiting  active  completed  failed')
  for (const s of status.sweeps) {
    const extra = s.notQueued !== undefined && s.notQueued > 0 ? `  (${s.notQueued} not queued)` : ''
    console.log(
      `${s.sweepId.padEnd(34)} ${String(s.waiting).padStart(8)} ${String(s.active).padStart(7)} ` +
        `${String(s.completed).padStart(10)} ${String(s.failed).padStart(7)}${extra}`,
    )
  }
  if (status.sweeps.length === 0) console.log('(none)')
  console.log('\nworker                              state        active  completed  failed')
  for (const w of status.workers) {
    console.log(
      `${w.name.padEnd(35)} ${(w.connected ? 'connected' : 'gone').padEnd(12)} ${String(w.active).padStart(6)} ` +
        `${String(w.completed).padStart(10)} ${String(w.failed).padStart(7)}`,
    )
  }
  if (status.workers.length === 0) console.log('(none)')
}

const QUEUE_HELP = 'the Redis queue: redis://HOST:PORT/DB (rediss:// for TLS)'

/**
 * Adds `submit`, `collect` and `status` to `attnlab sweep` (created if it is not registered yet).
 */
export function registerSweepQueue(program: Command): void {
  const sweep = program.commands.find((c) => c.name() === 'sweep') ?? program.command('sweep')
  sweep
    .command('submit <spec>')
    .description('queue every trial on Redis for `attnlab worker`s, then collect their records into DIR/trials.jsonl')
    .requiredOption('--queue <url>', QUEUE_HELP)
    .requiredOption('--out <dir>', 'the sweep directory on this machine (sweep.json, trials.jsonl)')
    .option('--retries <n>', 'extra attempts of a failed trial', intParser('--retries', 0, 100), 0)
    .option('--force', 'start in an --out that holds another sweep or other files (finished trials are kept by id)')
    .option('--no-wait', 'queue the trials and exit; collect later with attnlab sweep collect')
    .addOption(backendOption())
    .option('--json', 'print the counts as JSON')
    .addHelpText(
      'after',
      `
Examples:
  attnlab sweep submit examples/sweeps/emergence-genlen.yaml --queue redis://10.0.0.5:6379/0 --out runs/genlen
  attnlab worker --queue redis://10.0.0.5:6379/0 --artifacts /shared/attnlab     # on each machine
  attnlab sweep status runs/genlen --queue redis://10.0.0.5:6379/0

Submitting again is safe: the job id is the trial id, so no trial is queued twice; failed ones run again.`,
    )
    .action(async (spec: string, flags: SubmitFlags) => {
      await submitCommand(spec, flags)
    })
  sweep
    .command('collect <dir>')
    .description("append the submitted sweep's finished trials to DIR/trials.jsonl (each once), waiting for the rest")
    .requiredOption('--queue <url>', QUEUE_HELP)
    .option('--no-wait', 'collect what is finished now and exit')
    .option(
      '--retries <n>',
      'extra attempts of the trials queued again because Redis lost their jobs',
      intParser('--retries', 0, 100),
      0,
    )
    .option('--json', 'print the counts as JSON')
    .action(async (dir: string, flags: CollectFlags) => {
      await collect(dir, flags, 'collect')
    })
  sweep
    .command('status [dir]')
    .description("waiting / active / completed / failed trials per sweep (only DIR's with a DIR) and per worker")
    .requiredOption('--queue <url>', QUEUE_HELP)
    .option('--json', 'print the status as JSON')
    .action(async (dir: string | undefined, flags: StatusFlags) => {
      await statusCommand(dir, flags)
    })
}

/**
 * `attnlab worker --queue URL [--concurrency N] [--artifacts DIR] [--name NAME]`: runs the trials
 * of submitted sweeps (`attnlab sweep submit`) from a Redis queue, on any number of machines,
 * until stopped (Ctrl-C, SIGTERM: the running trials stop at their next step and go back to the
 * queue; exit 130 / 143).
 */
import { InterruptedError } from '@attnlab/core'
import { SWEEPS_VERSION, startQueueWorker, type QueueWorkerEvent } from '@attnlab/sweeps/node'
import type { Command } from 'commander'
import { UsageError } from '../errors.ts'
import { intParser, kernelFlagsGiven } from '../options.ts'
import { checkWritable } from '../out-dir.ts'
import { onStopSignal } from '../signals.ts'

interface WorkerFlags {
  queue: string
  concurrency: number
  artifacts: string
  name?: string
}

/** One log line per worker event. */
function describe(event: QueueWorkerEvent): string {
  switch (event.kind) {
    case 'trial-start':
      return (
        `trial ${event.trial.id} of '${event.sweep}' (${JSON.stringify(event.trial.params)}, ` +
        `seed ${event.trial.seed}) started, attempt ${event.attempt}`
      )
    case 'trial-end': {
      const { record } = event
      const loss = record.metrics.finalValidationLoss
      return record.status === 'done'
        ? `trial ${record.id} done in ${record.durationSeconds.toFixed(1)} s` +
            `${typeof loss === 'number' ? `, final loss ${loss.toFixed(4)} nats` : ''}; ` +
            `run directory ${record.artifacts?.path}`
        : `trial ${record.id} failed: [${record.error?.code}] ${record.error?.message}`
    }
    case 'refused':
      return `trial ${event.trialId} of '${event.sweep}' refused: [${event.error.code}] ${event.error.message}`
    case 'requeued':
      return `trial ${event.trialId} stopped at a step and put back in the queue (its state is kept)`
    case 'connection-lost':
      return `lost the connection to Redis (${event.message}); reconnecting...`
    case 'connection-restored':
      return 'reconnected to Redis'
  }
}

/** `attnlab worker`. */
async function workerCommand(flags: WorkerFlags): Promise<void> {
  const log = (text: string): void => console.error(`[${new Date().toISOString()}] ${text}`)
  // Before connecting: a worker whose run directories cannot be created would take every trial
  // of the queue and fail it (ENOTDIR), and an empty name would be blank in 'sweep status'.
  if (flags.name?.trim() === '') throw new UsageError(`--name must not be empty, got '${flags.name}'`)
  await checkWritable(flags.artifacts, '--artifacts')
  const worker = await startQueueWorker({
    queue: flags.queue,
    artifacts: flags.artifacts,
    concurrency: flags.concurrency,
    ...(flags.name === undefined ? {} : { name: flags.name }),
    backendOptions: kernelFlagsGiven(),
    onEvent: (event) => log(describe(event)),
  })
  log(
    `attnlab worker ${worker.name} (attnlab sweeps ${SWEEPS_VERSION}): ${flags.concurrency} trial(s) at a time ` +
      `from ${flags.queue.replace(/:[^:@/]*@/, ':***@')}; run directories in ${worker.artifacts}`,
  )
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    const remove = onStopSignal((received) => {
      remove()
      resolve(received)
    })
  })
  log(`${signal}: stopping the running trials at their next step and putting them back in the queue...`)
  await worker.close()
  throw new InterruptedError(`worker ${worker.name} stopped by ${signal}`)
}

/** `attnlab worker`. */
export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description("run submitted sweeps' trials from a Redis queue (attnlab sweep submit), until stopped")
    .requiredOption('--queue <url>', 'the Redis queue: redis://HOST:PORT/DB (rediss:// for TLS)')
    .option('--concurrency <n>', 'trials at once in this process', intParser('--concurrency', 1, 64), 1)
    .option(
      '--artifacts <dir>',
      'where trials write their run directories (<dir>/<sweep id>/trials/<id>/); ' +
        "on a shared file system a dead worker's trial continues from its state",
      'attnlab-artifacts',
    )
    .option('--name <name>', "this worker's name in 'sweep status' (default HOST:PID)")
    .addHelpText(
      'after',
      `
Examples:
  attnlab worker --queue redis://10.0.0.5:6379/0 --artifacts /shared/attnlab
  attnlab worker --queue redis://127.0.0.1:6379/0 --concurrency 2

The tensor backend is the sweep's (attnlab sweep submit --backend); --kernels and --threads apply.
A worker refuses trials submitted by another attnlab version (they are recorded as failed).`,
    )
    .action(async (flags: WorkerFlags) => {
      await workerCommand(flags)
    })
}

/**
 * The worker process of `runSweep` (forked with an IPC channel; not an import). It activates the
 * tensor backend it is told, then runs one trial at a time with `runTrial` and sends back its
 * progress and record. A `stop` message (or the parent's death: the channel closes) stops the
 * running trial at its next step; its state stays in its run directory.
 *
 * Messages in: `{ type: 'init', backend, backendOptions }`, `{ type: 'run', sweepDir, trial,
 * sweep, attempt }`, `{ type: 'stop' }`. Out: `{ type: 'ready' }`, `{ type: 'progress', id,
 * event }`, `{ type: 'record', record }`, `{ type: 'init-failed', error }`.
 *
 * @module
 */
import { useBackend, type BackendName, type UseBackendOptions } from '@attnlab/core'
import { trialError } from './record.ts'
import { runTrial, type TrialProgress } from './run-trial.ts'
import type { Trial } from './trial.ts'

/** A message from the parent. */
type Incoming =
  | { readonly type: 'init'; readonly backend: BackendName; readonly backendOptions: UseBackendOptions }
  | {
      readonly type: 'run'
      readonly sweepDir: string
      readonly trial: Trial
      readonly sweep: string
      readonly attempt: number
    }
  | { readonly type: 'stop' }

/** How long a worker whose parent died waits for its trial to stop before it exits anyway (ms). */
const ORPHAN_GRACE_MS = 10_000
/** Least time between two progress messages of one trial (ms); evaluations are always sent. */
const PROGRESS_INTERVAL_MS = 100

const controller = new AbortController()
let busy = false

function send(message: unknown): void {
  if (process.connected) process.send?.(message)
}

async function run(message: Extract<Incoming, { type: 'run' }>): Promise<void> {
  busy = true
  let last = 0
  const onProgress = (event: TrialProgress): void => {
    const now = performance.now()
    if (event.kind === 'step' && now - last < PROGRESS_INTERVAL_MS && event.step < event.totalSteps) return
    last = now
    send({ type: 'progress', id: message.trial.id, event })
  }
  const record = await runTrial(message.sweepDir, message.trial, {
    signal: controller.signal,
    onProgress,
    sweep: message.sweep,
    attempt: message.attempt,
  })
  busy = false
  send({ type: 'record', record })
  if (controller.signal.aborted) process.exit(0)
}

process.on('message', (message: Incoming) => {
  switch (message.type) {
    case 'init':
      useBackend(message.backend, message.backendOptions).then(
        () => send({ type: 'ready' }),
        (error: unknown) => {
          send({ type: 'init-failed', error: trialError(error) })
          process.exit(1)
        },
      )
      break
    case 'run':
      run(message).catch((error: unknown) => {
        send({ type: 'crashed', error: trialError(error) })
        process.exit(1)
      })
      break
    case 'stop':
      controller.abort()
      if (!busy) process.exit(0)
      break
  }
})

// The parent died (SIGKILL): stop the trial at its next step, then exit.
process.on('disconnect', () => {
  controller.abort()
  if (!busy) process.exit(0)
  setTimeout(() => process.exit(1), ORPHAN_GRACE_MS).unref()
})
// A Ctrl-C reaches the whole process group: the worker stops its trial at the next step, as the
// parent's `stop` would (and never dies of the signal halfway through a write).
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => controller.abort())

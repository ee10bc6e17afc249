/**
 * Stopping a long command cleanly. Ctrl-C (SIGINT), `kill`/`timeout` (SIGTERM) and a closed
 * terminal (SIGHUP) all ask the command to stop after the current step and save what it has; a
 * second signal while it saves ends the process at once with the signal's default action (the
 * files already written stay whole: every write is atomic, and a later run removes the
 * temporaries the killed one left). The process then exits with the shell's code for the signal,
 * 128 + its number: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP.
 *
 * Which process to signal: `./attnlab` (the repository's launcher) and `pnpm attnlab` exec the
 * node process itself, so `kill <its pid>` reaches the trainer; `pnpm` relays SIGTERM to it. The
 * `npx -y pnpm@...` wrapper does not: npm runs pnpm under a shell that dies on SIGTERM without
 * relaying it, so `kill <npx pid>` leaves the trainer running. Signal the trainer, pnpm, or the
 * whole job (`kill %1`, `kill -- -<process group>`, Ctrl-C).
 */
import { constants } from 'node:os'

/** The signals that stop a training command cleanly. */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const

/**
 * How long after the first stop signal a second one of the same kind counts as the same request:
 * signalling a job's process group (`kill %1`, `timeout`, Ctrl-C) reaches the trainer directly and
 * again through `pnpm`, which relays SIGTERM to its child a moment later.
 */
export const RELAYED_SIGNAL_WINDOW_MS = 500

let received: NodeJS.Signals | undefined

/** The stop signal the last {@link onStopSignal} listener received, if any (for the exit code). */
export function stopSignalReceived(): NodeJS.Signals | undefined {
  return received
}

/**
 * The exit code of a process stopped by `signal`, as a shell reports it: 128 + the signal number
 * (SIGHUP 129, SIGINT 130, SIGTERM 143).
 */
export function exitCodeForSignal(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? constants.signals.SIGINT)
}

/**
 * Calls `onStop` on the first of {@link STOP_SIGNALS}; on a second one, removes the listeners and
 * re-raises it so the process ends as it would without them. A repeat of the first signal within
 * {@link RELAYED_SIGNAL_WINDOW_MS} is taken for a relayed copy of it and ignored.
 *
 * @returns a function that removes the listeners (call it in a `finally`)
 */
export function onStopSignal(onStop: (signal: NodeJS.Signals) => void): () => void {
  let stopping: { signal: NodeJS.Signals; at: number } | undefined
  received = undefined
  const remove = (): void => {
    for (const [name, bound] of listeners) process.removeListener(name, bound)
  }
  const listener = (signal: NodeJS.Signals): void => {
    if (stopping === undefined) {
      stopping = { signal, at: performance.now() }
      received = signal
      onStop(signal)
      return
    }
    if (signal === stopping.signal && performance.now() - stopping.at < RELAYED_SIGNAL_WINDOW_MS) return
    remove()
    process.kill(process.pid, signal)
  }
  // One listener per name: the name is known even when the event is emitted without it.
  const listeners = STOP_SIGNALS.map((name) => [name, (): void => listener(name)] as const)
  for (const [name, bound] of listeners) process.on(name, bound)
  return remove
}

/**
 * Lets pending events run. A training loop whose steps await only promises that are already
 * settled (tensor reads on the cpu and wasm backends) never returns to the event loop, so signal
 * listeners would run only when it ends; the training commands await this after every step.
 */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

/**
 * Stopping a long command cleanly. Ctrl-C (SIGINT), `kill`/`timeout` (SIGTERM) and a closed
 * terminal (SIGHUP) all ask the command to stop after the current step and save what it has; a
 * second signal while it saves ends the process at once with the signal's default action (the
 * files already written stay whole: every write is atomic, and a later run removes the
 * temporaries the killed one left).
 */

/** The signals that stop a training command cleanly. */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const

/**
 * Calls `onStop` on the first of {@link STOP_SIGNALS}; on a second one, removes the listeners and
 * re-raises it so the process ends as it would without them.
 *
 * @returns a function that removes the listeners (call it in a `finally`)
 */
export function onStopSignal(onStop: (signal: NodeJS.Signals) => void): () => void {
  let stopping = false
  const remove = (): void => {
    for (const name of STOP_SIGNALS) process.removeListener(name, listener)
  }
  const listener = (signal: NodeJS.Signals): void => {
    if (!stopping) {
      stopping = true
      onStop(signal)
      return
    }
    remove()
    process.kill(process.pid, signal)
  }
  for (const name of STOP_SIGNALS) process.on(name, listener)
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

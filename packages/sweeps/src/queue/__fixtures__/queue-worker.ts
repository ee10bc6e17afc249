// `node --import tsx queue-worker.ts URL ARTIFACTS NAME`: a queue worker (cpu, short locks: 2 s,
// stall check every 1 s) as its own process, for the tests that SIGKILL or SIGTERM it. Prints one
// JSON line per worker event; exits 143 after a SIGTERM, once its trial is back in the queue.
import { startQueueWorker } from '../../node.ts'

const [queue, artifacts, name] = process.argv.slice(2) as [string, string, string]
const worker = await startQueueWorker({
  queue,
  artifacts,
  name,
  // Locks long enough that a loaded CI machine (training steps blocking the event loop) does not stall
  // live jobs; the SIGKILLed worker's trial still comes back within about 20 s.
  timings: { lockDuration: 15000, stalledInterval: 5000 },
  onEvent: (event) => {
    if (event.kind === 'trial-start') console.log(JSON.stringify({ kind: event.kind, id: event.trial.id }))
    else if (event.kind === 'trial-end') console.log(JSON.stringify({ kind: event.kind, id: event.record.id }))
    else console.log(JSON.stringify(event))
  },
})
console.log(JSON.stringify({ kind: 'ready', name: worker.name }))
process.on('SIGTERM', () => {
  void worker.close().then(() => process.exit(143))
})

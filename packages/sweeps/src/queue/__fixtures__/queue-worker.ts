// `node --import tsx queue-worker.ts URL ARTIFACTS NAME`: a queue worker (cpu, short locks: 2 s,
// stall check every 1 s) as its own process, for the tests that SIGKILL or SIGTERM it. Prints one
// JSON line per worker event; exits 143 after a SIGTERM, once its trial is back in the queue.
import { startQueueWorker } from '../../node.ts'

const [queue, artifacts, name] = process.argv.slice(2) as [string, string, string]
const worker = await startQueueWorker({
  queue,
  artifacts,
  name,
  timings: { lockDuration: 2000, stalledInterval: 1000 },
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

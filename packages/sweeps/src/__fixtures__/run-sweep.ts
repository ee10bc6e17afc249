// `node --import tsx run-sweep.ts SPEC OUT WORKERS [--resume]`: runSweep on the cpu backend as a
// separate process, for the tests that kill it (SIGKILL) or stop it (SIGTERM). Exits 143 when a
// SIGTERM stopped it, as the CLI does.
import { readFileSync } from 'node:fs'
import { parseSweepSpec } from '../index.ts'
import { runSweep } from '../node.ts'

const [specPath, out, workers, ...rest] = process.argv.slice(2) as [string, string, string, ...string[]]
const controller = new AbortController()
process.on('SIGTERM', () => controller.abort())
const result = await runSweep(parseSweepSpec(readFileSync(specPath, 'utf8'), specPath), {
  out,
  workers: Number(workers),
  backend: 'cpu',
  resume: rest.includes('--resume'),
  signal: controller.signal,
  onProgress: (event) => {
    if (event.kind === 'trial-start') console.log(`start ${event.trial.index}`)
  },
})
console.log(JSON.stringify({ done: result.done, interrupted: result.interrupted, stopped: result.stopped }))
process.exitCode = result.stopped ? 143 : 0

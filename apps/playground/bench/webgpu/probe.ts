/**
 * The playground bench's webgpu probe (the page does not offer webgpu): trains the config of the
 * URL hash (the page's settings, `settingsFromHash` + `configFromSettings`) with `runEmergence` on
 * tfjs `webgpu` on the page's main thread, and leaves the evaluations or the error in
 * `window.__bench` for `bench/browser-vs-node.ts` to read.
 */
import { useBackend } from '@attnlab/core'
import { resolveEmergenceConfig, runEmergence } from '@attnlab/experiments'
import { configFromSettings, settingsFromHash } from '../../src/settings.ts'

interface BenchState {
  done: boolean
  error: string | null
  evaluations: { step: number; seconds: number; loss: number }[]
}
const state: BenchState = { done: false, error: null, evaluations: [] }
;(window as unknown as { __bench: BenchState }).__bench = state

async function probe(): Promise<void> {
  await useBackend('webgpu')
  const resolved = resolveEmergenceConfig(configFromSettings(settingsFromHash(location.hash).settings))
  await runEmergence(resolved, {
    onProgress: (event) => {
      if (event.kind === 'evaluation')
        state.evaluations.push({ step: event.line.step, seconds: event.line.seconds, loss: event.line.validationLoss })
    },
  })
}

probe()
  .catch((error: unknown) => {
    state.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  })
  .finally(() => {
    state.done = true
  })

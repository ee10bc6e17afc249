/**
 * The playground's training worker: runs `@attnlab/experiments`' `runEmergence` off the page's
 * thread on the chosen tfjs backend (wasm by default, with attnlab's WebAssembly kernels), and
 * posts every step and evaluation to the page. The page pauses, resumes, stops it and picks the
 * heads to knock out (`EmergenceControl`); at each evaluation the worker also finds the stages so
 * far (`analyzeRun`) and, for the sparse Markov chain on the minimal model, fits the reduced ODE
 * to the run (`odeOverlay` through `runPlateaus`; Yüksel et al., arXiv 2602.19143, sec. 4).
 */
import { kernelsInUse, useBackend, type BackendName, type Task } from '@attnlab/core'
import {
  analyzeRun,
  headNames,
  odeOverlay,
  resolveEmergenceConfig,
  runEmergence,
  runPlateaus,
  type MetricLine,
  type OdeOverlay,
  type Oracles,
  type RunAnalysis,
} from '@attnlab/experiments'
import type { HeadRef } from '@attnlab/knockout'
import { SparseMarkovTask } from '@attnlab/markov'
// The tfjs wasm binaries, emitted by vite as assets; useBackend hands their URLs to setWasmPaths.
import wasmPlain from '@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm?url'
import wasmSimd from '@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm?url'
import wasmThreadedSimd from '@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-threaded-simd.wasm?url'
import { configFromSettings, type FromWorker, type Settings, type ToWorker } from './settings.ts'

const WASM_PATHS = {
  'tfjs-backend-wasm.wasm': wasmPlain,
  'tfjs-backend-wasm-simd.wasm': wasmSimd,
  'tfjs-backend-wasm-threaded-simd.wasm': wasmThreadedSimd,
}

const post = (message: FromWorker): void => postMessage(message)

let abort: AbortController | null = null
let knocked: readonly HeadRef[] = []
let paused = false
let release: (() => void) | null = null

function resume(): void {
  paused = false
  release?.()
  release = null
}

/**
 * The plateaus to fit the ODE through while the run goes on: `runPlateaus` (the run's initial
 * loss, then each stage's plateau once all were found, else the oracle plateaus), and while it
 * gives none, the stages found so far followed by the oracle plateaus of the stages still to come,
 * the middle of an oracle's bounds where only bounds are known; null when a plateau is unknown.
 */
function livePlateaus(
  lines: readonly MetricLine[],
  analysis: RunAnalysis,
  oracles: Oracles,
  K: number,
): number[] | null {
  const known = runPlateaus(lines, analysis, oracles, K)
  if (known !== null) return known
  const first = lines[0]?.validationLoss
  if (first === undefined) return null
  const plateaus = [first, ...analysis.stages.map((s) => s.plateauLoss)]
  for (let j = plateaus.length; j <= K; j++) {
    const value = oracles.plateaus[j]
    const bounds = oracles.lines.find((l) => l.kind === 'restricted-context' && l.spans === j)?.bounds
    if (value !== null && value !== undefined) plateaus.push(value)
    else if (bounds != null) plateaus.push((bounds[0] + bounds[1]) / 2)
    else return null
  }
  return plateaus
}

async function train(settings: Settings): Promise<void> {
  const started = performance.now()
  await useBackend(settings.backend as BackendName, settings.backend === 'wasm' ? { wasmPaths: WASM_PATHS } : {})
  const config = configFromSettings(settings)
  const resolved = resolveEmergenceConfig(config)
  const { task, model } = resolved
  const groupNames = ((task as Task).offsetGroups ?? []).map((g) => g.name)
  // The tasks the page offers train models with attention (the minimal model, a gpt).
  const heads = headNames(model.nLayers, model.nHeads)
  post({
    kind: 'ready',
    backend: settings.backend,
    kernels: kernelsInUse(settings.backend as BackendName),
    heads,
    groupNames,
    totalSteps: resolved.record.training.steps,
  })
  const controller = new AbortController()
  abort = controller
  const lines: MetricLine[] = []
  let oracles: Oracles | null = null
  // Steps per second over the last few seconds of training (pauses excluded).
  const recent: { step: number; time: number }[] = []
  let lastStep = 0
  const withOde = task instanceof SparseMarkovTask && model.architecture === 'minimal'
  const result = await runEmergence(resolved, {
    signal: controller.signal,
    control: {
      afterStep: (step) => {
        lastStep = step
        if (!paused) return
        post({ kind: 'paused', step })
        return new Promise<void>((resolve) => {
          release = resolve
        }).then(() => {
          recent.length = 0
        })
      },
      knockout: () => knocked,
    },
    onProgress: (event) => {
      if (event.kind === 'oracles') {
        oracles = event.oracles
        post({ kind: 'oracles', oracles: event.oracles })
      } else if (event.kind === 'step') {
        const now = performance.now()
        recent.push({ step: event.record.step, time: now })
        while (recent.length > 2 && now - (recent[0] as { time: number }).time > 3000) recent.shift()
        const first = recent[0] as { step: number; time: number }
        const stepsPerSecond = recent.length > 1 ? ((event.record.step - first.step) * 1000) / (now - first.time) : 0
        post({ kind: 'step', step: event.record.step, loss: event.record.loss, stepsPerSecond })
      } else if (event.kind === 'evaluation') {
        lines.push(event.line)
        const analysis = analyzeRun(lines, groupNames, heads, oracles?.lines ?? [])
        let ode: OdeOverlay | null = null
        if (withOde && oracles !== null && lines.length >= 3) {
          const plateaus = livePlateaus(lines, analysis, oracles, task.config.spans.length)
          try {
            ode =
              plateaus === null
                ? null
                : odeOverlay(
                    task,
                    model.nHeads,
                    model.nCtx,
                    lines.map((l) => l.step),
                    lines.map((l) => l.validationLoss),
                    plateaus,
                    settings.seed,
                  )
          } catch {
            ode = null // too few points past the start to fit a time scale yet
          }
        }
        post({
          kind: 'evaluation',
          line: event.line,
          stage: event.stage,
          patterns: event.patterns,
          knockout: event.knockout,
          stages: analysis.stages,
          ode,
        })
      }
    },
  })
  abort = null
  post({
    kind: 'done',
    stopped: result.summary.interrupted,
    seconds: (performance.now() - started) / 1000,
    steps: result.summary.seeds[0]?.completedSteps ?? lastStep,
  })
}

addEventListener('message', (event: MessageEvent<ToWorker>) => {
  const message = event.data
  switch (message.kind) {
    case 'start':
      paused = false
      knocked = []
      train(message.settings).catch((error: unknown) => {
        abort = null
        if ((error as { code?: string }).code === 'INTERRUPTED') {
          post({ kind: 'done', stopped: true, seconds: 0, steps: 0 })
          return
        }
        const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
        post({ kind: 'error', message: text })
      })
      return
    case 'pause':
      paused = true
      return
    case 'resume':
      resume()
      return
    case 'stop':
      abort?.abort()
      resume()
      return
    case 'knockout':
      knocked = message.heads
      return
  }
})

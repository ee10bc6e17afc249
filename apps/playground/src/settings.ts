/**
 * The playground's settings: the knobs of the page, their defaults (the documented default
 * emergence experiment of `@attnlab/experiments`, what `attnlab emergence` runs), the URL hash
 * that holds them, and the emergence config they give.
 */
import type { HeadRef } from '@attnlab/knockout'
import {
  defaultEmergenceConfig,
  resolveEmergenceConfig,
  type EmergenceConfig,
  type EmergenceProgress,
  type OdeOverlay,
  type Oracles,
  type RunStage,
} from '@attnlab/experiments'

/** The tasks the page trains on. */
export const TASKS = ['sparse-markov', 'linear-map'] as const
export type PlaygroundTask = (typeof TASKS)[number]

/**
 * The tfjs backends the page offers (webgl only where the worker gets a WebGL2 context). Not
 * webgpu: the run failed on it in headless Chromium with a WebGPU adapter (SwiftShader), at its first
 * read-back ('mapAsync' aborted).
 */
export const BACKENDS = ['wasm', 'cpu', 'webgl'] as const
export type PlaygroundBackend = (typeof BACKENDS)[number]

/** Every knob of the page (what the URL hash holds). */
export interface Settings {
  readonly task: PlaygroundTask
  /** sparse-markov: vocabulary d, span lengths (oldest first), importance base m, temperature tau. */
  readonly vocab: number
  readonly spans: readonly number[]
  readonly m: number
  readonly tau: number
  /** linear-map: cells per state S, ones per row s. */
  readonly cells: number
  readonly ones: number
  readonly heads: number
  readonly lr: number
  readonly seed: number
  readonly steps: number
  readonly batch: number
  readonly evalEvery: number
  /** Validation sequences (the analysis uses at most 256 of them). */
  readonly validation: number
  readonly backend: PlaygroundBackend
}

/** The documented default experiment of a task, as settings. */
export function defaultSettings(task: PlaygroundTask = 'sparse-markov', backend: PlaygroundBackend = 'wasm'): Settings {
  const config = defaultEmergenceConfig(task)
  const { model } = resolveEmergenceConfig(config)
  const markov = taskDefaults('sparse-markov') as { vocabSize: number; spans: number[]; m: number; tau: number }
  const linear = taskDefaults('linear-map') as { stateSize: number; onesPerRow: number }
  return {
    task,
    vocab: markov.vocabSize,
    spans: markov.spans,
    m: markov.m,
    tau: markov.tau,
    cells: linear.stateSize,
    ones: linear.onesPerRow,
    heads: model.nHeads,
    lr: config.training.lr,
    seed: config.seeds[0] ?? 0,
    steps: config.training.steps,
    batch: config.training.batchSize,
    evalEvery: config.training.evalEvery,
    validation: config.training.validationSize,
    backend,
  }
}

const described = new Map<PlaygroundTask, Readonly<Record<string, unknown>>>()

/** The task of a task kind's default experiment, as its `describe()` gives it (every field resolved). */
function taskDefaults(task: PlaygroundTask): Readonly<Record<string, unknown>> {
  let description = described.get(task)
  if (description === undefined) {
    description = resolveEmergenceConfig(defaultEmergenceConfig(task)).task.describe() as unknown as Record<
      string,
      unknown
    >
    described.set(task, description)
  }
  return description
}

const NUMBER_KEYS = [
  'vocab',
  'm',
  'tau',
  'cells',
  'ones',
  'heads',
  'lr',
  'seed',
  'steps',
  'batch',
  'evalEvery',
  'validation',
] as const

/**
 * Reads settings from a URL hash (`#task=linear-map&lr=0.002`): keys not given take the task's
 * defaults; a value that is not a number (or a known name) is reported, not used.
 *
 * @returns the settings and one message per ignored value
 */
export function settingsFromHash(hash: string): { settings: Settings; ignored: string[] } {
  const params = new URLSearchParams(hash.replace(/^#/, ''))
  const ignored: string[] = []
  const taskParam = params.get('task')
  const task = (TASKS as readonly string[]).includes(taskParam ?? '') ? (taskParam as PlaygroundTask) : 'sparse-markov'
  if (taskParam !== null && taskParam !== task) ignored.push(`task=${taskParam} (expected ${TASKS.join(' or ')})`)
  const backendParam = params.get('backend')
  const backend = (BACKENDS as readonly string[]).includes(backendParam ?? '')
    ? (backendParam as PlaygroundBackend)
    : 'wasm'
  if (backendParam !== null && backendParam !== backend)
    ignored.push(`backend=${backendParam} (expected ${BACKENDS.join(', ')})`)
  const settings: Record<string, unknown> = { ...defaultSettings(task, backend) }
  for (const key of NUMBER_KEYS) {
    const raw = params.get(key)
    if (raw === null) continue
    const value = Number(raw)
    if (raw.trim() === '' || !Number.isFinite(value)) ignored.push(`${key}=${raw} (not a number)`)
    else settings[key] = value
  }
  const spans = params.get('spans')
  if (spans !== null) {
    const list = spans.split(',').map(Number)
    if (list.length === 0 || list.some((x) => !Number.isInteger(x) || x < 1))
      ignored.push(`spans=${spans} (expected positive integers, e.g. 2,2,2)`)
    else settings.spans = list
  }
  return { settings: settings as unknown as Settings, ignored }
}

/** The URL hash of settings: only what differs from the task's defaults (empty for the default run). */
export function hashFromSettings(settings: Settings): string {
  const defaults = defaultSettings(settings.task, settings.backend)
  const params = new URLSearchParams()
  if (settings.task !== 'sparse-markov') params.set('task', settings.task)
  if (settings.backend !== 'wasm') params.set('backend', settings.backend)
  for (const key of NUMBER_KEYS) if (settings[key] !== defaults[key]) params.set(key, String(settings[key]))
  if (settings.spans.join(',') !== defaults.spans.join(',')) params.set('spans', settings.spans.join(','))
  const text = params.toString()
  return text === '' ? '' : `#${text}`
}

/**
 * The emergence experiment of the settings: the task's documented default
 * (`defaultEmergenceConfig`) with the page's knobs over it.
 */
export function configFromSettings(settings: Settings): EmergenceConfig {
  const base = defaultEmergenceConfig(settings.task)
  const task =
    settings.task === 'sparse-markov'
      ? { ...base.task, vocabSize: settings.vocab, spans: [...settings.spans], m: settings.m, tau: settings.tau }
      : { ...base.task, stateSize: settings.cells, onesPerRow: settings.ones }
  return {
    ...base,
    task,
    model: { ...base.model, nHeads: settings.heads },
    training: {
      ...base.training,
      lr: settings.lr,
      steps: settings.steps,
      batchSize: settings.batch,
      evalEvery: settings.evalEvery,
      validationSize: settings.validation,
      analysisSize: Math.min(base.training.analysisSize, settings.validation),
    },
    seeds: [settings.seed],
  }
}

/** Messages from the page to the training worker. */
export type ToWorker =
  | { readonly kind: 'start'; readonly settings: Settings }
  | { readonly kind: 'pause' }
  | { readonly kind: 'resume' }
  | { readonly kind: 'stop' }
  | { readonly kind: 'knockout'; readonly heads: readonly HeadRef[] }

type Evaluation = Extract<EmergenceProgress, { kind: 'evaluation' }>

/** Messages from the training worker to the page. */
export type FromWorker =
  | {
      readonly kind: 'ready'
      readonly backend: string
      readonly kernels: string
      readonly heads: readonly string[]
      readonly groupNames: readonly string[]
      readonly totalSteps: number
    }
  | { readonly kind: 'oracles'; readonly oracles: Oracles }
  | { readonly kind: 'step'; readonly step: number; readonly loss: number; readonly stepsPerSecond: number }
  | {
      readonly kind: 'evaluation'
      readonly line: Evaluation['line']
      readonly stage: string
      readonly patterns: Evaluation['patterns']
      readonly knockout: Evaluation['knockout']
      /** Stages detected so far (`analyzeRun`), and the ODE overlay when it could be fitted. */
      readonly stages: readonly RunStage[]
      readonly ode: OdeOverlay | null
    }
  | { readonly kind: 'paused'; readonly step: number }
  | { readonly kind: 'done'; readonly stopped: boolean; readonly seconds: number; readonly steps: number }
  | { readonly kind: 'error'; readonly message: string }

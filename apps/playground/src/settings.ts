/**
 * The playground's settings: the knobs of the page, their defaults (the documented default
 * emergence experiment of `@attnlab/experiments`, what `attnlab emergence` runs), the URL hash
 * that holds them, and the emergence config they give.
 */
import { ConfigError } from '@attnlab/core'
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
 * The tfjs backends the page offers (webgl only where the worker gets a WebGL2 context, webgpu only
 * where the browser gives a WebGPU adapter).
 */
export const BACKENDS = ['wasm', 'cpu', 'webgl', 'webgpu'] as const
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
 * Page-level caps, above the library's own ranges, so that a link cannot make the tab build an
 * absurd model or run for days (documented in docs/playground.md).
 */
export const PAGE_CAPS = { steps: 100_000, heads: 32, batch: 4096, validation: 8192 } as const

/** The config field a ConfigError names (`parameter`), by the hash key it comes from. */
const PARAMETER_KEYS: Readonly<Record<string, string>> = {
  m: 'm',
  tau: 'tau',
  vocabSize: 'vocab',
  spans: 'spans',
  stateSize: 'cells',
  onesPerRow: 'ones',
  nHeads: 'heads',
  'training.lr': 'lr',
  seeds: 'seed',
  'training.steps': 'steps',
  'training.batchSize': 'batch',
  'training.batchTokens': 'batch',
  'training.evalEvery': 'evalEvery',
  'training.validationSize': 'validation',
  'training.analysisSize': 'validation',
}

/** The hash key behind a config parameter (`seeds[0]` -> seed, `spans[1]` -> spans), if any. */
function keyOfParameter(parameter: string): string | undefined {
  const field = parameter.replace(/\[\d+\]$/, '').replace(/^(task|model)\./, '')
  return PARAMETER_KEYS[field]
}

/**
 * A decimal number (`12`, `-1.5`, `0.002`, `1e-4`: what `String(x)` writes for a share link); no hex, no `NaN`,
 * no `Infinity` (a finite value is then checked against the caps and the experiment's ranges).
 */
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/

/**
 * Reads settings from a URL hash (`#task=linear-map&lr=0.002`): keys not given take the task's
 * defaults. A value is used only when it is a plain decimal number (or a known name), within the
 * page's caps ({@link PAGE_CAPS}), and the experiment it gives resolves (`resolveEmergenceConfig`,
 * the rules the run itself checks); otherwise it is reported with the expected range and the
 * default kept. Unknown keys are reported too.
 *
 * @param hash - the URL hash, with or without its leading `#`
 * @returns the settings (always a valid experiment) and one message per ignored key
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
  const known = new Set<string>(['task', 'backend', 'spans', ...NUMBER_KEYS])
  for (const key of new Set(params.keys()))
    if (!known.has(key)) ignored.push(`${key}=${params.get(key) ?? ''} (unknown key)`)
  const defaults = defaultSettings(task, backend)
  const settings: Record<string, unknown> = { ...defaults }
  const raws = new Map<string, string>()
  for (const key of NUMBER_KEYS) {
    const raw = params.get(key)
    if (raw === null) continue
    const value = Number(raw)
    const cap = (PAGE_CAPS as Readonly<Record<string, number>>)[key]
    if (!DECIMAL.test(raw) || !Number.isFinite(value)) ignored.push(`${key}=${raw} (not a decimal number)`)
    else if (cap !== undefined && value > cap) ignored.push(`${key}=${raw} (the page allows at most ${cap})`)
    else {
      settings[key] = value
      raws.set(key, raw)
    }
  }
  const spans = params.get('spans')
  if (spans !== null) {
    const list = spans.split(',').map((x) => (DECIMAL.test(x) ? Number(x) : Number.NaN))
    if (list.length === 0 || list.some((x) => !Number.isInteger(x) || x < 1))
      ignored.push(`spans=${spans} (expected positive integers, e.g. 2,2,2)`)
    else {
      settings.spans = list
      raws.set('spans', spans)
    }
  }
  // The run's own rules: resolve the would-be experiment; a ConfigError names the field, whose
  // value is then reported and reset to the default, until the experiment resolves.
  for (let attempt = 0; attempt <= NUMBER_KEYS.length + 1; attempt++) {
    const error = configErrorOf(settings as unknown as Settings)
    if (error === undefined) break
    const key = keyOfParameter(error.parameter)
    const given = key !== undefined && raws.has(key) ? key : [...raws.keys()].at(-1)
    if (given === undefined) break
    ignored.push(`${given}=${raws.get(given) ?? ''} (${error.message.replace(/^Invalid /, '')})`)
    settings[given] = defaults[given as keyof Settings]
    raws.delete(given)
  }
  return { settings: settings as unknown as Settings, ignored }
}

/** The ConfigError resolving the settings' experiment throws, if any (other errors propagate). */
function configErrorOf(settings: Settings): ConfigError | undefined {
  try {
    resolveEmergenceConfig(configFromSettings(settings))
    return undefined
  } catch (error) {
    if (error instanceof ConfigError) return error
    throw error
  }
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

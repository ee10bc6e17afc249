/**
 * The playground page: settings (held in the URL hash), start / pause / reset, and the live view
 * of a run that trains in `worker.ts`: the loss against the oracle plateau lines with the stage
 * boundaries and the reduced ODE's prediction (uPlot), every head's attention pattern (canvas
 * heatmaps) and attention mass per span, the stage table, head knockouts, and for the linear map
 * the loss of each output position. The emergence experiment is Yüksel et al.'s (arXiv
 * 2602.19143); the linear map is Baherwani et al.'s (arXiv 2606.25010).
 */
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import { simd } from 'wasm-feature-detect'
import { interpolateLinear } from '@attnlab/dynamics'
import type { HeadRef } from '@attnlab/knockout'
import type { OdeOverlay, Oracles, RunStage } from '@attnlab/experiments'
import {
  BACKENDS,
  TASKS,
  defaultSettings,
  hashFromSettings,
  settingsFromHash,
  type FromWorker,
  type PlaygroundBackend,
  type Settings,
  type ToWorker,
} from './settings.ts'
import './style.css'

const $ = <T extends HTMLElement>(id: string): T => {
  const element = document.getElementById(id)
  if (element === null) throw new Error(`the page has no #${id}`)
  return element as T
}

type Evaluation = Extract<FromWorker, { kind: 'evaluation' }>

/** What the page shows, and what the browser test reads (`window.__playground`). */
interface PageState {
  status: 'idle' | 'starting' | 'running' | 'paused' | 'done' | 'error'
  step: number
  totalSteps: number
  stepsPerSecond: number
  backend: string
  kernels: string
  heads: string[]
  groupNames: string[]
  /** Evaluations so far (steps, losses, span masses, knockout losses). */
  evaluations: {
    step: number
    /** Seconds spent in training steps so far (the worker's clock; pauses and evaluations excluded). */
    trainingSeconds: number
    validationLoss: number
    stage: string
    spanMass: (readonly number[])[] | null
    knockout: { heads: string[]; validationLoss: number } | null
  }[]
  stages: RunStage[]
  /** The reduced ODE's latest fit: steps per unit of ODE time, its RMSE, predicted stage steps. */
  ode: { scale: number; rmse: number; predicted: (number | null)[] } | null
  knocked: string[]
  error: string | null
  /** The step the worker reported it paused at (null while not paused). */
  pausedAt: number | null
  /** Seconds from start to each `stage j/K` label first seen (page clock). */
  stageSeconds: number[]
  startedAt: number
  support: { simd: boolean; workers: boolean }
}

declare global {
  interface Window {
    __playground?: PageState
  }
}

/** What a new run starts from: the page with no run (the engine, heads and support of the last run stay). */
type RunState = Omit<PageState, 'backend' | 'kernels' | 'heads' | 'groupNames' | 'startedAt' | 'support'>

/** The state of the page before any run, and what `clearRun` returns to. */
function initialState(): RunState {
  return {
    status: 'idle',
    step: 0,
    totalSteps: 0,
    stepsPerSecond: 0,
    evaluations: [],
    stages: [],
    ode: null,
    knocked: [],
    error: null,
    pausedAt: null,
    stageSeconds: [],
  }
}

const state: PageState = {
  ...initialState(),
  backend: '',
  kernels: '',
  heads: [],
  groupNames: [],
  startedAt: 0,
  support: { simd: true, workers: true },
}
window.__playground = state

// ---------------------------------------------------------------------------------------------
// Settings form <-> URL hash.

const FIELDS: { key: keyof Settings; label: string; tasks: readonly string[]; step?: string }[] = [
  { key: 'vocab', label: 'vocabulary d', tasks: ['sparse-markov'] },
  { key: 'spans', label: 'spans (oldest first)', tasks: ['sparse-markov'] },
  { key: 'm', label: 'importance m', tasks: ['sparse-markov'], step: 'any' },
  { key: 'tau', label: 'temperature τ', tasks: ['sparse-markov'], step: 'any' },
  { key: 'cells', label: 'cells S', tasks: ['linear-map'] },
  { key: 'ones', label: 'ones per row s', tasks: ['linear-map'] },
  { key: 'heads', label: 'heads', tasks: TASKS },
  { key: 'lr', label: 'learning rate', tasks: TASKS, step: 'any' },
  { key: 'seed', label: 'seed', tasks: TASKS },
  { key: 'steps', label: 'steps', tasks: TASKS },
  { key: 'batch', label: 'batch', tasks: TASKS },
  { key: 'evalEvery', label: 'evaluate every', tasks: TASKS },
  { key: 'validation', label: 'validation sequences', tasks: TASKS },
]

let settings: Settings = settingsFromHash(location.hash).settings

function renderForm(): void {
  const form = $<HTMLFormElement>('settings')
  const taskSelect = $<HTMLSelectElement>('task')
  taskSelect.value = settings.task
  const backendSelect = $<HTMLSelectElement>('backend')
  backendSelect.value = settings.backend
  const fields = $('fields')
  fields.replaceChildren()
  for (const field of FIELDS) {
    if (!field.tasks.includes(settings.task)) continue
    const label = document.createElement('label')
    label.textContent = field.label
    const input = document.createElement('input')
    input.name = field.key
    input.id = `field-${field.key}`
    const value = settings[field.key]
    if (Array.isArray(value)) {
      input.type = 'text'
      input.value = value.join(',')
    } else {
      input.type = 'number'
      input.step = field.step ?? '1'
      input.value = String(value)
    }
    label.append(input)
    fields.append(label)
  }
  form.oninput = () => readForm()
}

function readForm(): void {
  const hash = new URLSearchParams()
  hash.set('task', $<HTMLSelectElement>('task').value)
  hash.set('backend', $<HTMLSelectElement>('backend').value)
  for (const input of $('fields').querySelectorAll('input')) hash.set(input.name, input.value.replace(/\s+/g, ''))
  const parsed = settingsFromHash(hash.toString())
  settings = parsed.settings
  $('notice').textContent = parsed.ignored.length > 0 ? `Ignored: ${parsed.ignored.join('; ')}` : ''
  history.replaceState(null, '', hashFromSettings(settings) || location.pathname + location.search)
}

$<HTMLSelectElement>('task').addEventListener('change', () => {
  settings = {
    ...defaultSettings($<HTMLSelectElement>('task').value as Settings['task'], settings.backend),
  }
  history.replaceState(null, '', hashFromSettings(settings) || location.pathname + location.search)
  renderForm()
})
addEventListener('hashchange', () => {
  const parsed = settingsFromHash(location.hash)
  settings = parsed.settings
  $('notice').textContent = parsed.ignored.length > 0 ? `Ignored: ${parsed.ignored.join('; ')}` : ''
  renderForm()
})
$('defaults').addEventListener('click', () => {
  settings = defaultSettings(settings.task, settings.backend)
  history.replaceState(null, '', location.pathname + location.search)
  renderForm()
})

// ---------------------------------------------------------------------------------------------
// Plots.

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf']
let lossPlot: uPlot | null = null
let positionPlot: uPlot | null = null
let oracleLines: { label: string; value: number }[] = []
const trainLoss: number[] = []
let ode: OdeOverlay | null = null

function plotWidth(element: HTMLElement): number {
  return Math.max(320, Math.min(900, element.clientWidth || 800))
}

/** Vertical lines at the detected stages, labelled. */
function drawStages(u: uPlot): void {
  const { ctx } = u
  ctx.save()
  ctx.strokeStyle = '#555'
  ctx.fillStyle = '#333'
  ctx.setLineDash([4, 4])
  ctx.font = `${12 * devicePixelRatio}px sans-serif`
  for (const stage of state.stages) {
    const x = u.valToPos(stage.step, 'x', true)
    ctx.beginPath()
    ctx.moveTo(x, u.bbox.top)
    ctx.lineTo(x, u.bbox.top + u.bbox.height)
    ctx.stroke()
    ctx.fillText(`stage ${stage.stage}`, x + 4, u.bbox.top + 14 * devicePixelRatio)
  }
  ctx.restore()
}

function createLossPlot(): void {
  const element = $('loss-plot')
  element.replaceChildren()
  const series: uPlot.Series[] = [
    { label: 'step' },
    { label: 'train loss', stroke: '#bbb', width: 1, spanGaps: true, points: { show: false } },
    { label: 'validation loss', stroke: '#1f77b4', width: 2, spanGaps: true, points: { show: true, size: 4 } },
    { label: 'knocked out', stroke: '#d62728', width: 2, spanGaps: false, points: { show: true, size: 5 } },
    { label: 'ODE prediction', stroke: '#2ca02c', width: 2, dash: [8, 4], spanGaps: true, points: { show: false } },
    ...oracleLines.map(
      (line, i): uPlot.Series => ({
        label: line.label,
        stroke: COLORS[(i + 3) % COLORS.length] as string,
        width: 1,
        dash: [2, 3],
        points: { show: false },
      }),
    ),
  ]
  lossPlot = new uPlot(
    {
      width: plotWidth(element),
      height: 320,
      series,
      scales: { x: { time: false } },
      axes: [{ label: 'step' }, { label: 'loss (nats)' }],
      hooks: { draw: [drawStages] },
      legend: { live: false },
    },
    [[], [], [], [], []],
    element,
  )
}

function createPositionPlot(positions: number): void {
  const element = $('position-plot')
  element.replaceChildren()
  const series: uPlot.Series[] = [{ label: 'step' }]
  for (let p = 0; p < positions; p++)
    series.push({ label: `pos ${p + 1}`, stroke: COLORS[p % COLORS.length] as string, width: 1.5, spanGaps: true })
  positionPlot = new uPlot(
    {
      width: plotWidth(element),
      height: 260,
      series,
      scales: { x: { time: false } },
      axes: [{ label: 'step' }, { label: 'loss per position (nats)' }],
      legend: { live: false },
    },
    [[], ...series.slice(1).map(() => [])],
    element,
  )
}

/** The ODE curve at `step`, interpolated linearly (null outside it or before the first fit). */
function odeAt(step: number): number | null {
  if (ode === null || ode.curve.step.length === 0) return null
  return interpolateLinear(ode.curve.step, ode.curve.loss, step, { outside: 'null' })
}

function updatePlots(): void {
  if (lossPlot !== null) {
    const n = Math.max(state.step, state.evaluations.at(-1)?.step ?? 0)
    const x: number[] = []
    for (let s = 0; s <= n; s++) x.push(s)
    const train: (number | null)[] = x.map((s) => trainLoss[s] ?? null)
    const validation: (number | null)[] = x.map(() => null)
    const knocked: (number | null)[] = x.map(() => null)
    for (const e of state.evaluations) {
      validation[e.step] = e.validationLoss
      if (e.knockout !== null) knocked[e.step] = e.knockout.validationLoss
    }
    const odeLine = x.map(odeAt)
    const plateaus = oracleLines.map((line) => x.map(() => line.value))
    lossPlot.setData([x, train, validation, knocked, odeLine, ...plateaus] as uPlot.AlignedData)
  }
  if (positionPlot !== null) {
    const steps = state.evaluations.map((e) => e.step)
    const columns = positionLosses.map((column) => [...column])
    positionPlot.setData([steps, ...columns] as uPlot.AlignedData)
  }
}

let positionLosses: (number | null)[][] = []

// ---------------------------------------------------------------------------------------------
// Heads: heatmaps, span masses, knockouts.

function heatColor(value: number): string {
  // White (0) to deep blue (1), on a square-root scale so that weak attention shows.
  const v = Math.sqrt(Math.max(0, Math.min(1, value)))
  const r = Math.round(255 * (1 - v) + 8 * v)
  const g = Math.round(255 * (1 - v) + 48 * v)
  const b = Math.round(255 * (1 - v) + 107 * v)
  return `rgb(${r},${g},${b})`
}

function renderHeads(): void {
  const container = $('heads')
  container.replaceChildren()
  for (const name of state.heads) {
    const card = document.createElement('button')
    card.type = 'button'
    card.className = 'head'
    card.id = `head-${name}`
    card.dataset.head = name
    card.title = `click to knock ${name} out (zero-ablate its output) at the next evaluations`
    const title = document.createElement('div')
    title.className = 'head-title'
    title.textContent = name
    const canvas = document.createElement('canvas')
    canvas.width = 150
    canvas.height = 150
    canvas.id = `heatmap-${name}`
    const bars = document.createElement('div')
    bars.className = 'bars'
    bars.id = `bars-${name}`
    card.append(title, canvas, bars)
    card.addEventListener('click', () => toggleKnockout(name))
    container.append(card)
  }
}

function toggleKnockout(name: string): void {
  state.knocked = state.knocked.includes(name) ? state.knocked.filter((h) => h !== name) : [...state.knocked, name]
  for (const head of state.heads)
    document.getElementById(`head-${head}`)?.classList.toggle('knocked', state.knocked.includes(head))
  const refs: HeadRef[] = state.knocked.map((h) => {
    const match = /^L(\d+)H(\d+)$/.exec(h) as RegExpExecArray
    return { layer: Number(match[1]), head: Number(match[2]) }
  })
  send({ kind: 'knockout', heads: refs })
  renderKnockout()
}

function renderKnockout(): void {
  const last = state.evaluations.at(-1)
  const out = $('knockout')
  if (state.knocked.length === 0) {
    out.textContent = 'Click a head to knock it out: its output is zeroed at every evaluation until clicked again.'
    return
  }
  const measured = [...state.evaluations].reverse().find((e) => e.knockout !== null)
  const same = measured?.knockout?.heads.join() === [...state.knocked].sort().join()
  out.textContent =
    `Knocked out: ${state.knocked.join(', ')}. ` +
    (measured?.knockout != null && same
      ? `At step ${measured.step}: validation loss ${measured.knockout.validationLoss.toFixed(3)} nats ` +
        `with them out, ${measured.validationLoss.toFixed(3)} intact.`
      : `Measured at the next evaluation${last === undefined ? '' : ` (after step ${last.step})`}.`)
}

function drawHeatmap(canvas: HTMLCanvasElement, pattern: readonly (readonly number[])[]): void {
  const ctx = canvas.getContext('2d')
  if (ctx === null) return
  const T = pattern.length
  const cell = canvas.width / Math.max(1, T)
  ctx.fillStyle = '#fff'
  ctx.fillRect(0, 0, canvas.width, canvas.height)
  for (let q = 0; q < T; q++) {
    const row = pattern[q] as readonly number[]
    for (let k = 0; k <= q && k < row.length; k++) {
      ctx.fillStyle = heatColor(row[k] as number)
      ctx.fillRect(k * cell, q * cell, Math.ceil(cell), Math.ceil(cell))
    }
  }
}

function renderEvaluationHeads(evaluation: Evaluation): void {
  state.heads.forEach((name, h) => {
    const canvas = document.getElementById(`heatmap-${name}`) as HTMLCanvasElement | null
    const pattern = evaluation.patterns[h]
    if (canvas !== null && pattern !== undefined) drawHeatmap(canvas, pattern)
    const bars = document.getElementById(`bars-${name}`)
    if (bars === null) return
    bars.replaceChildren()
    const mass = evaluation.line.spanMass?.[h]
    if (mass === undefined) {
      const entropy = evaluation.line.attentionEntropy[h]
      const text = document.createElement('div')
      text.className = 'entropy'
      text.textContent = entropy === undefined ? '' : `attention entropy ${entropy.toFixed(2)} nats`
      bars.append(text)
      return
    }
    state.groupNames.forEach((group, g) => {
      const value = mass[g] ?? 0
      const row = document.createElement('div')
      row.className = 'bar-row'
      const label = document.createElement('span')
      label.className = 'bar-label'
      label.textContent = group.replace(/ \(.*$/, '')
      row.title = `${group}: attention mass ${value.toFixed(3)}`
      const track = document.createElement('span')
      track.className = 'bar-track'
      const bar = document.createElement('span')
      bar.className = value > 0.5 ? 'bar held' : 'bar'
      bar.style.width = `${(100 * value).toFixed(1)}%`
      bar.style.background = COLORS[g % COLORS.length] as string
      track.append(bar)
      const number = document.createElement('span')
      number.className = 'bar-value'
      number.textContent = value.toFixed(2)
      row.append(label, track, number)
      bars.append(row)
    })
  })
}

// ---------------------------------------------------------------------------------------------
// Stage table and status.

/** A stage's nearest oracle line, as the table shows it. */
function oracleText(stage: RunStage | undefined): string {
  const oracle = stage?.nearestOracle
  if (oracle == null) return ''
  return oracle.value === null ? oracle.label : `${oracle.label} ${oracle.value.toFixed(3)}`
}

function renderStages(): void {
  const body = $('stage-rows')
  body.replaceChildren()
  const predicted = new Map<number, number | null>()
  for (const t of ode?.fit.transitions ?? []) predicted.set(t.stage, t.predictedStep)
  const K = state.groupNames.length
  const rows = Math.max(K, state.stages.length)
  for (let j = 1; j <= rows; j++) {
    const stage = state.stages.find((s) => s.stage === j)
    const tr = document.createElement('tr')
    const cells = [
      String(j),
      stage === undefined ? '…' : stage.step.toFixed(0),
      stage?.spanNames.join(', ') ?? '',
      stage?.heads.join(', ') ?? '',
      stage === undefined ? '' : stage.plateauLoss.toFixed(3),
      oracleText(stage),
      predicted.get(j) == null ? '' : (predicted.get(j) as number).toFixed(0),
      state.stageSeconds[j - 1] === undefined ? '' : `${(state.stageSeconds[j - 1] as number).toFixed(1)} s`,
    ]
    for (const text of cells) {
      const td = document.createElement('td')
      td.textContent = text
      tr.append(td)
    }
    if (stage !== undefined) tr.className = 'found'
    body.append(tr)
  }
}

function renderStatus(): void {
  const last = state.evaluations.at(-1)
  $('step').textContent = String(state.step)
  $('total').textContent = String(state.totalSteps)
  const rate = state.stepsPerSecond
  $('rate').textContent = rate > 0 ? rate.toFixed(rate < 10 ? 2 : 1) : '–'
  $('engine').textContent = state.backend === '' ? '–' : `${state.backend} (attnlab kernels: ${state.kernels})`
  $('stage').textContent = last?.stage ?? '–'
  $('run-status').textContent = state.error ?? state.status
  $('pause').textContent = state.status === 'paused' ? 'Resume' : 'Pause'
  $<HTMLButtonElement>('pause').disabled = state.status !== 'running' && state.status !== 'paused'
  $<HTMLButtonElement>('start').disabled =
    state.status === 'running' || state.status === 'starting' || state.status === 'paused' || !state.support.workers
}

let frame = 0
function scheduleRender(): void {
  if (frame !== 0) return
  frame = requestAnimationFrame(() => {
    frame = 0
    renderStatus()
    updatePlots()
  })
}

// ---------------------------------------------------------------------------------------------
// The worker.

let worker: Worker | null = null

function send(message: ToWorker): void {
  worker?.postMessage(message)
}

function onMessage(message: FromWorker): void {
  switch (message.kind) {
    case 'ready':
      state.status = 'running'
      state.backend = message.backend
      state.kernels = message.kernels
      state.heads = [...message.heads]
      state.groupNames = [...message.groupNames]
      state.totalSteps = message.totalSteps
      renderHeads()
      renderStages()
      $('position-section').hidden = settings.task !== 'linear-map'
      break
    case 'oracles':
      oracleLines = oraclesToLines(message.oracles)
      createLossPlot()
      break
    case 'step':
      state.step = message.step
      trainLoss[message.step] = message.loss
      state.stepsPerSecond = message.stepsPerSecond
      if (state.status === 'paused') break
      state.status = 'running'
      break
    case 'evaluation': {
      const { line } = message
      state.evaluations.push({
        step: line.step,
        trainingSeconds: line.seconds,
        validationLoss: line.validationLoss,
        stage: message.stage,
        spanMass: line.spanMass === null ? null : [...line.spanMass],
        knockout:
          message.knockout === null
            ? null
            : {
                heads: message.knockout.heads.map((h) => `L${h.layer}H${h.head}`).sort(),
                validationLoss: message.knockout.validationLoss,
              },
      })
      state.stages = [...message.stages]
      if (message.ode !== null) {
        ode = message.ode
        state.ode = {
          scale: ode.fit.scale,
          rmse: ode.fit.rmse,
          predicted: ode.fit.transitions.map((t) => t.predictedStep),
        }
        $('ode-note').textContent =
          `ODE fit: ${ode.fit.scale.toFixed(1)} steps per unit of ODE time, RMSE ${ode.fit.rmse.toFixed(3)} ` +
          `(stage units); predicted stage steps ${state.ode.predicted.map(stepText).join(', ')}.`
      }
      const held = /^stage (\d+)\//.exec(message.stage)
      if (held !== null) {
        const count = Number(held[1])
        for (let j = state.stageSeconds.length; j < count; j++)
          state.stageSeconds.push((performance.now() - state.startedAt) / 1000)
      }
      if (settings.task === 'linear-map') {
        const losses = line.perPositionLoss
        if (positionPlot === null) {
          positionLosses = losses.map(() => [])
          createPositionPlot(losses.length)
        }
        for (const [p, value] of losses.entries()) positionLosses[p]?.push(value)
      }
      renderEvaluationHeads(message)
      renderStages()
      renderKnockout()
      break
    }
    case 'paused':
      state.status = 'paused'
      state.pausedAt = message.step
      state.step = message.step
      break
    case 'done':
      state.status = 'done'
      $('done').textContent =
        `${message.stopped ? 'Stopped' : 'Finished'} after ${message.steps} steps in ${message.seconds.toFixed(1)} s.`
      break
    case 'error':
      state.status = 'error'
      state.error = message.message
      break
  }
  scheduleRender()
}

/** A step for the page: rounded, or a dash for none. */
function stepText(step: number | null): string {
  return step === null ? '–' : step.toFixed(0)
}

/** The oracle lines with a value, for the plot (lines known only by bounds are left out). */
function oraclesToLines(oracles: Oracles): { label: string; value: number }[] {
  return oracles.lines.flatMap((line) => (line.value === null ? [] : [{ label: line.label, value: line.value }]))
}

function clearRun(): void {
  worker?.terminate()
  worker = null
  Object.assign(state, initialState())
  trainLoss.length = 0
  positionLosses = []
  ode = null
  oracleLines = []
  lossPlot?.destroy()
  lossPlot = null
  positionPlot?.destroy()
  positionPlot = null
  $('loss-plot').replaceChildren()
  $('position-plot').replaceChildren()
  $('done').textContent = ''
  $('ode-note').textContent = ''
  renderHeads()
  renderStages()
  renderKnockout()
  renderStatus()
}

function start(): void {
  clearRun()
  state.status = 'starting'
  state.startedAt = performance.now()
  worker = new Worker(new URL('./worker.ts', import.meta.url), { type: 'module' })
  worker.onmessage = (event: MessageEvent<FromWorker>) => onMessage(event.data)
  worker.onerror = (event) => {
    state.status = 'error'
    state.error = `the training worker failed: ${event.message}`
    scheduleRender()
  }
  send({ kind: 'start', settings })
  renderStatus()
}

$('start').addEventListener('click', start)
$('pause').addEventListener('click', () => {
  if (state.status === 'paused') {
    state.status = 'running'
    state.pausedAt = null
    send({ kind: 'resume' })
  } else if (state.status === 'running') {
    send({ kind: 'pause' })
    state.status = 'paused'
  }
  renderStatus()
})
$('reset').addEventListener('click', clearRun)
$('share').addEventListener('click', () => {
  const url = location.href
  $('notice').textContent = `This link holds the settings: ${url}`
  void navigator.clipboard?.writeText(url).catch(() => {})
})

// ---------------------------------------------------------------------------------------------
// Start-up: what the browser supports, which backends to offer.

async function offeredBackends(): Promise<PlaygroundBackend[]> {
  const offered: PlaygroundBackend[] = ['wasm', 'cpu']
  try {
    if (typeof OffscreenCanvas !== 'undefined' && new OffscreenCanvas(1, 1).getContext('webgl2') !== null)
      offered.push('webgl')
  } catch {
    // no WebGL2 in workers: not offered
  }
  // WebGPU: offered where the browser gives an adapter (workers share the page's navigator.gpu).
  const gpu = (navigator as { gpu?: { requestAdapter(): Promise<unknown> } }).gpu
  if (gpu !== undefined && (await gpu.requestAdapter().catch(() => null)) !== null) offered.push('webgpu')
  return BACKENDS.filter((b) => offered.includes(b))
}

async function init(): Promise<void> {
  const problems: string[] = []
  state.support.workers = typeof Worker !== 'undefined'
  if (!state.support.workers)
    problems.push('This browser has no Web Workers: the playground trains in a worker, so it cannot run here.')
  const hasWasm = typeof WebAssembly === 'object'
  state.support.simd = hasWasm && (await simd())
  if (!hasWasm) problems.push('This browser has no WebAssembly: pick the cpu backend (much slower).')
  else if (!state.support.simd)
    problems.push(
      'This browser lacks WebAssembly SIMD: the wasm backend runs without SIMD and without attnlab\u2019s ' +
        'WebAssembly kernels (slower); a current Chrome, Firefox or Safari has it.',
    )
  $('support').textContent = problems.join(' ')
  $('support').hidden = problems.length === 0
  const select = $<HTMLSelectElement>('backend')
  select.replaceChildren()
  const offered = await offeredBackends()
  for (const name of offered) {
    const option = document.createElement('option')
    option.value = name
    option.textContent = name === 'wasm' ? 'wasm (attnlab kernels)' : name
    select.append(option)
  }
  const taskSelect = $<HTMLSelectElement>('task')
  for (const name of TASKS) {
    const option = document.createElement('option')
    option.value = name
    option.textContent = name
    taskSelect.append(option)
  }
  const parsed = settingsFromHash(location.hash)
  const ignored = [...parsed.ignored]
  if (!offered.includes(settings.backend)) {
    // A link asks for a backend this browser lacks (no WebGL2 in workers, no WebGPU adapter): the run uses wasm.
    ignored.push(`backend=${settings.backend} (this browser offers ${offered.join(', ')})`)
    settings = { ...settings, backend: 'wasm' }
  }
  if (ignored.length > 0) $('notice').textContent = `Ignored: ${ignored.join('; ')}`
  renderForm()
  clearRun()
  document.body.dataset.ready = 'true'
}

void init()

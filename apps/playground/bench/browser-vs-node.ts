/**
 * Training steps per second of the playground in headless Chromium against Node, on the same
 * emergence config, in one run (Yüksel et al., arXiv 2602.19143, sec. 3: the minimal model on the
 * sparse Markov chain).
 *
 * Node: `runEmergence` of `@attnlab/experiments` on tfjs `wasm` with attnlab's wasm kernels, with
 * the config the page builds from the same URL hash (`settingsFromHash` + `configFromSettings`).
 * Chromium (/usr/bin/chromium via playwright-core, SwiftShader for WebGL2 / WebGPU): the page is
 * built with vite, served by vite preview (apps/browser-check/harness.mjs) and trains in its Web
 * Worker on `wasm`, `cpu`, `webgl` and `webgpu` (a backend the browser lacks is reported). Steady-state
 * steps per second: steps after the warm-up over the training seconds the run reports between the
 * warm-up evaluation and the last one (evaluations, warm-up and shader compiles excluded). The
 * goal: browser wasm >= 0.5x Node wasm. Both wasm runs print their last validation loss (same seed,
 * same config: the same number).
 *
 *   node --conditions=@attnlab/source --import tsx bench/browser-vs-node.ts
 *
 * Environment: ATTNLAB_BENCH_STEPS (measured steps on wasm, default 60; the others run fewer),
 * ATTNLAB_CHROMIUM (default /usr/bin/chromium), ATTNLAB_BROWSER_TIMEOUT_MS (each browser run,
 * default 300000). The packages' dist/ must be built (the page is built from them).
 */
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { kernelsInUse, useBackend } from '@attnlab/core'
import { resolveEmergenceConfig, runEmergence } from '@attnlab/experiments'
import type { BrowserContext } from 'playwright-core'
// The build, server and browser harness shared with the browser tests.
import { buildAndServe, collectPageErrors, launchChromium } from '../../browser-check/harness.mjs'
import { configFromSettings, settingsFromHash } from '../src/settings.ts'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const timeout = Number(process.env.ATTNLAB_BROWSER_TIMEOUT_MS ?? 300_000)
const steps = Number(process.env.ATTNLAB_BENCH_STEPS ?? 60)
if (!Number.isInteger(steps) || steps < 5) throw new Error(`ATTNLAB_BENCH_STEPS must be an integer >= 5, got ${steps}`)
const GOAL = 0.5

/** A backend's run: warm-up steps, measured steps (evaluations every `every` steps, so at both ends). */
interface Plan {
  readonly backend: string
  readonly warmup: number
  readonly steps: number
  readonly every: number
}
const wasmPlan: Plan = { backend: 'wasm', warmup: 5, steps: Math.ceil(steps / 5) * 5, every: 5 }
const plans: Plan[] = [
  wasmPlan,
  { backend: 'cpu', warmup: 3, steps: Math.max(6, Math.ceil(steps / 18) * 3), every: 3 },
  { backend: 'webgl', warmup: 2, steps: 2, every: 2 },
  { backend: 'webgpu', warmup: 2, steps: 2, every: 2 },
]
const hashOf = (plan: Plan): string =>
  `#steps=${plan.warmup + plan.steps}&batch=256&evalEvery=${plan.every}&validation=256&backend=${plan.backend}`

interface Evaluation {
  readonly step: number
  readonly seconds: number
  readonly loss: number
}
interface Row {
  readonly where: string
  readonly steps: number
  readonly stepsPerSecond: number | null
  readonly loss: number | null
  readonly note: string
}

/** Steady-state steps per second: from the warm-up evaluation to the last one, in training seconds. */
function steady(evaluations: readonly Evaluation[], warmup: number): { stepsPerSecond: number; loss: number } {
  const from = evaluations.find((e) => e.step === warmup)
  const last = evaluations.at(-1)
  if (from === undefined || last === undefined || last.step <= from.step)
    throw new Error(`no evaluations at the warm-up step ${warmup} and after it (${evaluations.length} evaluations)`)
  return { stepsPerSecond: (last.step - from.step) / (last.seconds - from.seconds), loss: last.loss }
}

async function node(plan: Plan): Promise<Row> {
  await useBackend('wasm', { kernels: 'wasm' })
  const resolved = resolveEmergenceConfig(configFromSettings(settingsFromHash(hashOf(plan)).settings))
  const evaluations: Evaluation[] = []
  await runEmergence(resolved, {
    onProgress: (event) => {
      if (event.kind === 'evaluation')
        evaluations.push({ step: event.line.step, seconds: event.line.seconds, loss: event.line.validationLoss })
    },
  })
  const { stepsPerSecond, loss } = steady(evaluations, plan.warmup)
  return { where: 'Node, wasm', steps: plan.steps, stepsPerSecond, loss, note: `kernels ${kernelsInUse('wasm')}` }
}

interface PageRun {
  status: string
  error: string | null
  backend: string
  kernels: string
  notice: string
  evaluations: { step: number; trainingSeconds: number; validationLoss: number }[]
}

async function browser(context: BrowserContext, url: string, plan: Plan): Promise<Row> {
  const where = `Chromium, ${plan.backend}`
  const page = await context.newPage()
  const errors = collectPageErrors(page)
  try {
    await page.goto(`${url}${hashOf(plan)}`)
    await page.waitForFunction(() => document.body.dataset.ready === 'true', undefined, { timeout })
    await page.click('#start')
    await page.waitForFunction(() => ['done', 'error'].includes(window.__playground?.status ?? ''), undefined, {
      timeout,
      polling: 250,
    })
    const run = (await page.evaluate(() => ({
      ...window.__playground,
      notice: document.getElementById('notice')?.textContent ?? '',
    }))) as PageRun
    if (run.status === 'error' || run.backend !== plan.backend)
      return { where, steps: 0, stepsPerSecond: null, loss: null, note: `failed: ${run.error ?? run.notice}` }
    const evaluations = run.evaluations.map((e) => ({
      step: e.step,
      seconds: e.trainingSeconds,
      loss: e.validationLoss,
    }))
    const { stepsPerSecond, loss } = steady(evaluations, plan.warmup)
    return { where, steps: plan.steps, stepsPerSecond, loss, note: `kernels ${run.kernels}` }
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error)
    return { where, steps: 0, stepsPerSecond: null, loss: null, note: `failed: ${[message, ...errors].join('; ')}` }
  } finally {
    await page.close().catch(() => {})
  }
}

const rows: Row[] = [await node(wasmPlan)]
console.log(`node wasm done: ${rows[0]?.stepsPerSecond?.toFixed(2)} steps/s`)

const server = await buildAndServe({ root })
const chromium = await launchChromium()
try {
  for (const plan of plans) {
    const row = await browser(chromium.context, server.url, plan)
    console.log(`${row.where}: ${row.stepsPerSecond?.toFixed(2) ?? row.note}`)
    rows.push(row)
  }
} finally {
  await chromium.close()
  await server.close().catch(() => {})
}

const config = hashOf(wasmPlan).replace(/&backend=wasm$/, '')
console.log(
  `\nplayground bench: Chromium ${chromium.version}, config ${config} (steps = warm-up + measured), steady state`,
)
console.log('| where | measured steps | steps/s | validation loss at the end | note |')
console.log('| --- | --- | --- | --- | --- |')
for (const r of rows) {
  const rate = r.stepsPerSecond === null ? 'error' : r.stepsPerSecond.toFixed(2)
  console.log(`| ${r.where} | ${r.steps} | ${rate} | ${r.loss?.toFixed(4) ?? ''} | ${r.note} |`)
}
const nodeWasm = rows[0]?.stepsPerSecond ?? null
const browserWasm = rows.find((r) => r.where === 'Chromium, wasm')?.stepsPerSecond ?? null
if (nodeWasm !== null && browserWasm !== null) {
  const ratio = browserWasm / nodeWasm
  console.log(
    `\nbrowser wasm / node wasm: ${ratio.toFixed(2)}x (goal >= ${GOAL}x): ${ratio >= GOAL ? 'PASS' : 'MISS'}; ` +
      `validation loss node ${rows[0]?.loss?.toFixed(4)}, browser ${rows[1]?.loss?.toFixed(4)}`,
  )
} else console.log('\nbrowser wasm / node wasm: no ratio (a run failed): MISS')

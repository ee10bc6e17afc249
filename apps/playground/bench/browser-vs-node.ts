/**
 * Training steps per second of the playground in headless Chromium against Node, on the same
 * emergence config, in one run (Yüksel et al., arXiv 2602.19143, sec. 3: the minimal model on the
 * sparse Markov chain).
 *
 * Node: `runEmergence` of `@attnlab/experiments` on tfjs `wasm` with attnlab's wasm kernels, with
 * the config the page builds from the same URL hash (`settingsFromHash` + `configFromSettings`).
 * Chromium (/usr/bin/chromium via playwright-core, SwiftShader for WebGL2 / WebGPU): the page is
 * built with vite, served by vite preview and trains in its Web Worker on `wasm`, `cpu` and `webgl`.
 * The page does not offer `webgpu`: it is tried on a probe page (bench/webgpu, built the same way;
 * `runEmergence` on the page's main thread) and its error printed where it fails. Steady-state
 * steps per second: steps after the warm-up over the training seconds the run reports between the
 * warm-up evaluation and the last one (evaluations, warm-up and shader compiles excluded). The
 * goal: browser wasm >= 0.5x Node wasm. Both wasm runs print their last validation loss (same seed,
 * same config: the same number).
 *
 *   node --conditions=@attnlab/source --import tsx bench/browser-vs-node.ts
 *
 * Environment: ATTNLAB_BENCH_STEPS (measured steps on wasm, default 60; cpu and webgl run fewer),
 * ATTNLAB_CHROMIUM (default /usr/bin/chromium), ATTNLAB_BROWSER_TIMEOUT_MS (each browser run,
 * default 300000). The packages' dist/ must be built (the page is built from them).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { kernelsInUse, useBackend } from '@attnlab/core'
import { resolveEmergenceConfig, runEmergence } from '@attnlab/experiments'
import { type BrowserContext, chromium } from 'playwright-core'
import { createLogger, build, preview } from 'vite'
import { configFromSettings, settingsFromHash } from '../src/settings.ts'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const executablePath = process.env.ATTNLAB_CHROMIUM ?? '/usr/bin/chromium'
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
  const ignored = settingsFromHash(hashOf(plan)).ignored
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (error) => errors.push(error.message))
  try {
    await page.goto(`${url}${hashOf(plan)}`)
    await page.waitForFunction(() => document.body.dataset.ready === 'true', undefined, { timeout })
    if (ignored.length > 0) {
      // The page does not offer this backend (it would train on its default instead): say what the browser has.
      const adapter = await page.evaluate(async () => {
        const gpu = (navigator as { gpu?: { requestAdapter(): Promise<unknown> } }).gpu
        if (gpu === undefined) return 'no navigator.gpu'
        return (await gpu.requestAdapter().catch(() => null)) === null ? 'no adapter' : 'navigator.gpu has an adapter'
      })
      return {
        where,
        steps: 0,
        stepsPerSecond: null,
        loss: null,
        note: `not run: the page ignores ${ignored}; ${adapter}`,
      }
    }
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

/** webgpu, on the probe page's main thread (the playground's page does not offer it). */
async function webgpu(context: BrowserContext, url: string, plan: Plan): Promise<Row> {
  const where = 'Chromium, webgpu (probe page, main thread)'
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (error) => errors.push(error.message))
  try {
    await page.goto(`${url}${hashOf(plan).replace(/&backend=webgpu$/, '')}`)
    await page.waitForFunction(() => (window as unknown as { __bench?: { done: boolean } }).__bench?.done, undefined, {
      timeout,
      polling: 250,
    })
    const run = (await page.evaluate(() => (window as unknown as { __bench: unknown }).__bench)) as {
      error: string | null
      evaluations: Evaluation[]
    }
    if (run.error !== null) return { where, steps: 0, stepsPerSecond: null, loss: null, note: `failed: ${run.error}` }
    const { stepsPerSecond, loss } = steady(run.evaluations, plan.warmup)
    return { where, steps: plan.steps, stepsPerSecond, loss, note: 'kernels none' }
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error)
    return { where, steps: 0, stepsPerSecond: null, loss: null, note: `failed: ${[message, ...errors].join('; ')}` }
  } finally {
    await page.close().catch(() => {})
  }
}

const rows: Row[] = [await node(wasmPlan)]
console.log(`node wasm done: ${rows[0]?.stepsPerSecond?.toFixed(2)} steps/s`)

const logger = createLogger('error')
await build({ root, configFile: join(root, 'vite.config.ts'), customLogger: logger })
const server = await preview({
  root,
  configFile: join(root, 'vite.config.ts'),
  customLogger: logger,
  preview: { host: '127.0.0.1', port: 0, strictPort: false, open: false },
})
// The webgpu probe page (bench/webgpu): the playground's page does not offer webgpu.
const probeRoot = join(root, 'bench', 'webgpu')
const probeOut = await mkdtemp(join(tmpdir(), 'attnlab-bench-webgpu-'))
const probeConfig = {
  root: probeRoot,
  configFile: false as const,
  base: './',
  logLevel: 'error' as const,
  customLogger: logger,
  build: {
    reportCompressedSize: false,
    outDir: probeOut,
    emptyOutDir: true,
    target: 'es2022',
    chunkSizeWarningLimit: 8192,
  },
}
await build(probeConfig)
const probeServer = await preview({
  ...probeConfig,
  preview: { host: '127.0.0.1', port: 0, strictPort: false, open: false },
})
const userDataDir = await mkdtemp(join(tmpdir(), 'attnlab-bench-chromium-'))
let context: BrowserContext | undefined
let version = ''
try {
  const url = server.resolvedUrls?.local[0]
  const probeUrl = probeServer.resolvedUrls?.local[0]
  if (url === undefined || probeUrl === undefined) throw new Error('vite preview reported no local URL')
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--use-angle=swiftshader',
      '--enable-unsafe-swiftshader',
      '--enable-unsafe-webgpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
  version = context.browser()?.version() ?? ''
  for (const plan of plans) {
    const row = plan.backend === 'webgpu' ? await webgpu(context, probeUrl, plan) : await browser(context, url, plan)
    console.log(`${row.where}: ${row.stepsPerSecond?.toFixed(2) ?? row.note}`)
    rows.push(row)
  }
} finally {
  await context?.close().catch(() => {})
  await server.close().catch(() => {})
  await probeServer.close().catch(() => {})
  await rm(userDataDir, { recursive: true, force: true }).catch(() => {})
  await rm(probeOut, { recursive: true, force: true }).catch(() => {})
}

const config = hashOf(wasmPlan).replace(/&backend=wasm$/, '')
console.log(`\nplayground bench: Chromium ${version}, config ${config} (steps = warm-up + measured), steady state`)
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

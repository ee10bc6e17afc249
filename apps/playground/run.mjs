#!/usr/bin/env node
// The playground's browser test: builds the page with vite, serves it on 127.0.0.1 (vite preview),
// opens it in headless Chromium (playwright-core, the system /usr/bin/chromium, SwiftShader for
// WebGL2 and WebGPU; harness.mjs of apps/browser-check) and uses it as a
// person would: start a run, watch it reach its first stage, check that the loss plot and the
// heatmaps change, knock out the head that holds a span (the loss must rise), pause (the step
// counter must stop), resume, and let the run finish. Screenshots at the start, at stage 1 and at
// the end go to a directory that is printed. Then a short run on each backend (cpu, wasm, webgl,
// webgpu; 24 steps of batch 8, vocabulary 5: exact oracles, cheap to compute): the page shows steps
// per second and the loss matches cpu's. Exits non-zero on any failed check, page error, console
// error or failed request. The packages' dist/ must be built first (`turbo run test:browser`
// does it).
//
// The run is a small one (ATTNLAB_PLAYGROUND_HASH, default below: the default task with a smaller
// batch and validation set, 240 steps), so that the test stays within a few minutes on a loaded
// 2-core machine. Environment: ATTNLAB_CHROMIUM (default /usr/bin/chromium),
// ATTNLAB_BROWSER_TIMEOUT_MS (default 180000: each wait), ATTNLAB_PLAYGROUND_SHOTS (the
// screenshot directory; default a new one under the system's temporary directory).
import { mkdir, mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildAndServe, collectPageErrors, launchChromium } from '../browser-check/harness.mjs'

const root = dirname(fileURLToPath(import.meta.url))
const timeout = Number(process.env.ATTNLAB_BROWSER_TIMEOUT_MS ?? 180_000)
const hash = process.env.ATTNLAB_PLAYGROUND_HASH ?? '#steps=240&batch=256&evalEvery=10&validation=256'
/** The first stage must be reached by this step of the test's run. */
const FIRST_STAGE_BY = 200
/** The short run on every backend (cpu first: the reference loss); webgl and webgpu run on SwiftShader, slowly. */
const BACKENDS = ['cpu', 'wasm', 'webgl', 'webgpu']
const BACKEND_HASH = '#vocab=5&steps=24&batch=8&evalEvery=24&validation=8'
const started = performance.now()
const elapsed = () => `${((performance.now() - started) / 1000).toFixed(1)} s`
const log = (text) => console.log(`playground: ${text} (${elapsed()})`)

const failures = []
const check = (condition, message) => {
  if (!condition) failures.push(message)
  return condition
}

let server
let browser
try {
  server = await buildAndServe({ root })
  const { url } = server
  log(`built the page; Node modules stubbed: ${server.stubbed.join(', ') || 'none'}`)
  const shots = process.env.ATTNLAB_PLAYGROUND_SHOTS ?? (await mkdtemp(join(tmpdir(), 'attnlab-playground-shots-')))
  await mkdir(shots, { recursive: true })

  browser = await launchChromium({ viewport: { width: 1100, height: 1500 } })
  const { context } = browser
  const page = context.pages()[0] ?? (await context.newPage())
  const pageErrors = collectPageErrors(page)
  const waitFor = (fn, arg) => page.waitForFunction(fn, arg, { timeout, polling: 100 })
  const state = () => page.evaluate(() => window.__playground)
  const snapshot = () =>
    page.evaluate(() => ({
      plot: document.querySelector('#loss-plot canvas')?.toDataURL() ?? '',
      heatmaps: [...document.querySelectorAll('#heads canvas')].map((c) => c.toDataURL()).join(),
      bars: document.getElementById('heads')?.innerHTML ?? '',
      table: document.getElementById('stage-rows')?.textContent ?? '',
      step: document.getElementById('step')?.textContent ?? '',
      evaluations: window.__playground?.evaluations.length ?? 0,
    }))
  const fail = async (message) => {
    const s = await state().catch(() => null)
    throw new Error(`${message}; page state: status ${s?.status}, step ${s?.step}, error ${s?.error}`)
  }

  log(`Chromium ${browser.version} opens ${url}${hash}`)
  await page.goto(`${url}${hash}`)
  await waitFor(() => document.body.dataset.ready === 'true')
  const support = (await state()).support
  check(support.simd && support.workers, `the page reports missing support: ${JSON.stringify(support)}`)

  // Start: the first evaluation (step 0) arrives and the heads are drawn.
  await page.click('#start')
  await waitFor(() => (window.__playground?.evaluations.length ?? 0) >= 2 || window.__playground?.error).catch(() =>
    fail('no evaluation after start'),
  )
  if ((await state()).error) await fail('the run failed')
  await page.screenshot({ path: join(shots, 'start.png'), fullPage: true })
  const before = await snapshot()
  const first = await state()
  log(`started on ${first.backend} (kernels ${first.kernels}), heads ${first.heads.join(', ')}`)
  check(first.backend === 'wasm' && first.kernels === 'wasm', `expected wasm with attnlab's wasm kernels`)

  // Stage 1: some head holds a span (mass > 0.5), by FIRST_STAGE_BY steps; and at least one evaluation
  // after the first read (on a fast run the first stage can already be in when it is taken).
  await waitFor(
    (seen) =>
      (window.__playground?.evaluations.some((e) => /^stage [1-9]/.test(e.stage)) &&
        (window.__playground?.evaluations.length ?? 0) > seen) ||
      ['done', 'error'].includes(window.__playground?.status ?? ''),
    before.evaluations,
  ).catch(() => fail('no stage within the wait'))
  let s = await state()
  const stage1 = s.evaluations.find((e) => /^stage [1-9]/.test(e.stage))
  if (!check(stage1 !== undefined, `the run ended without a first stage (${s.status}, ${s.error})`))
    throw new Error('no first stage')
  check(stage1.step <= FIRST_STAGE_BY, `the first stage came at step ${stage1.step}, after ${FIRST_STAGE_BY}`)
  log(`first stage at step ${stage1.step} (${stage1.stage}), ${s.stepsPerSecond.toFixed(1)} steps/s`)
  await page.screenshot({ path: join(shots, 'stage1.png'), fullPage: true })
  const after = await snapshot()
  check(after.plot !== '' && after.plot !== before.plot, 'the loss plot did not change between two reads')
  check(after.heatmaps !== before.heatmaps, 'the heatmaps did not change between two reads')
  check(after.bars !== before.bars, 'the span-mass bars did not change between two reads')
  check(Number(after.step) > Number(before.step), `the step counter did not advance (${before.step} -> ${after.step})`)

  // Knockout: the head holding the most mass on a span; the next evaluation's loss with it out must be higher.
  const held = stage1.spanMass.flatMap((row, h) => row.map((mass, g) => ({ h, g, mass })))
  const holder = held.reduce((a, b) => (b.mass > a.mass ? b : a))
  const head = s.heads[holder.h]
  const fromStep = s.evaluations.at(-1).step
  await page.click(`#head-${head}`)
  await waitFor(
    ([name, step]) =>
      window.__playground?.evaluations.some((e) => e.step > step && e.knockout?.heads.join() === name) ||
      ['done', 'error'].includes(window.__playground?.status ?? ''),
    [head, fromStep],
  )
  s = await state()
  const knocked = s.evaluations.find((e) => e.step > fromStep && e.knockout?.heads.join() === head)
  if (check(knocked !== undefined, `no evaluation with ${head} knocked out`)) {
    const rise = knocked.knockout.validationLoss - knocked.validationLoss
    log(
      `knocked out ${head} (mass ${holder.mass.toFixed(2)} on ${s.groupNames[holder.g]}) at step ${knocked.step}: ` +
        `loss ${knocked.validationLoss.toFixed(3)} -> ${knocked.knockout.validationLoss.toFixed(3)} nats`,
    )
    check(rise > 0.02, `knocking out ${head} raised the loss by only ${rise.toFixed(4)} nats`)
    const shown = await page.textContent('#knockout')
    check(shown.includes(head) && /with them out/.test(shown), `the knockout readout says: ${shown}`)
  }
  await page.click(`#head-${head}`)

  // Pause: the counter stops (once the worker says it paused), then resume.
  if ((await state()).status === 'running') {
    await page.click('#pause')
    await waitFor(() => window.__playground?.pausedAt !== null || window.__playground?.status === 'done')
    s = await state()
    if (s.status !== 'done') {
      // The counter is drawn on the next frame: wait until it shows the step the worker paused at.
      await waitFor((step) => document.getElementById('step')?.textContent === String(step), s.pausedAt)
      const pausedText = await page.textContent('#step')
      await page.waitForTimeout(1500)
      const laterText = await page.textContent('#step')
      check(pausedText === laterText, `the step counter moved while paused (${pausedText} -> ${laterText})`)
      check((await state()).step === s.pausedAt, 'steps ran while paused')
      log(`paused at step ${s.pausedAt}; the counter stayed at ${laterText}`)
      await page.click('#pause')
      await waitFor((step) => (window.__playground?.step ?? 0) > step, s.pausedAt)
    }
  } else failures.push('the run ended before it could be paused (make the test run longer)')

  // The end: the run finishes; the stage table has the stages found.
  await waitFor(() => ['done', 'error'].includes(window.__playground?.status ?? ''))
  s = await state()
  check(s.status === 'done' && s.error === null, `the run ended with ${s.status}: ${s.error}`)
  await page.screenshot({ path: join(shots, 'end.png'), fullPage: true })
  const rows = await page.$$eval('#stage-rows tr.found', (trs) => trs.map((tr) => tr.textContent))
  check(
    rows.length === s.stages.length && rows.length >= 1,
    `stage table rows ${rows.length}, stages ${s.stages.length}`,
  )
  log(
    `done at step ${s.step}: stages at steps ${s.stages.map((st) => st.step.toFixed(0)).join(', ')}; ` +
      `final loss ${s.evaluations.at(-1)?.validationLoss}; ODE fit ${JSON.stringify(s.ode)}; screenshots in ${shots}`,
  )
  for (const error of pageErrors) failures.push(error)

  // Every backend the page offers: a short run each (the same seed and config), steps per second shown,
  // the final validation loss finite and within float32 rounding of cpu's. All four must be offered here
  // (SwiftShader gives the worker WebGL2 and a WebGPU adapter).
  const rates = []
  let cpuLoss = null
  for (const backend of BACKENDS) {
    const backendPage = await context.newPage()
    const errors = collectPageErrors(backendPage)
    const backendStarted = performance.now()
    try {
      await backendPage.goto(`${url}${BACKEND_HASH}&backend=${backend}`)
      await backendPage.waitForFunction(() => document.body.dataset.ready === 'true', undefined, { timeout })
      const offered = await backendPage.$$eval('#backend option', (options) => options.map((o) => o.value))
      if (!check(offered.includes(backend), `the page does not offer ${backend} (offers ${offered.join(', ')})`))
        continue
      await backendPage.click('#start')
      await backendPage.waitForFunction(
        () => ['done', 'error'].includes(window.__playground?.status ?? ''),
        undefined,
        { timeout, polling: 250 },
      )
      const run = await backendPage.evaluate(() => ({
        ...window.__playground,
        rate: document.getElementById('rate')?.textContent ?? '',
      }))
      const loss = run.evaluations.at(-1)?.validationLoss
      if (
        !check(
          run.status === 'done' && run.backend === backend,
          `${backend}: ${run.status} on ${run.backend}: ${run.error}`,
        )
      )
        continue
      check(Number(run.rate) > 0, `${backend}: the page shows '${run.rate}' steps/s`)
      check(Number.isFinite(loss), `${backend}: final validation loss ${loss}`)
      if (backend === 'cpu') cpuLoss = loss
      else if (cpuLoss !== null)
        check(Math.abs(loss - cpuLoss) <= 1e-3, `${backend}: final validation loss ${loss}, cpu's ${cpuLoss}`)
      const seconds = ((performance.now() - backendStarted) / 1000).toFixed(0)
      rates.push(`${backend} ${run.rate} steps/s (loss ${loss.toFixed(5)}, ${seconds} s)`)
    } finally {
      for (const error of errors) failures.push(`${backend} page: ${error}`)
      await backendPage.close().catch(() => {})
    }
  }
  log(`backends, ${BACKEND_HASH}: ${rates.join(', ')}`)
} catch (error) {
  failures.push(error instanceof Error ? (error.stack ?? error.message) : String(error))
} finally {
  await browser?.close()
  await server?.close().catch(() => {})
}

if (failures.length > 0) {
  console.error(`playground: FAILED (${elapsed()})`)
  for (const failure of failures) console.error(`  - ${failure}`)
  process.exit(1)
}
console.log(`playground: all checks passed (${elapsed()})`)

#!/usr/bin/env node
// The browser smoke test: builds the page with vite, serves it on 127.0.0.1 (vite preview), opens
// it in headless Chromium (playwright-core, the system /usr/bin/chromium), waits for
// window.__result and checks it. Exits non-zero on any failed check, page error, console error
// or failed request. The packages' dist/ must be built first (`turbo run test:browser` does it).
//
// Environment: ATTNLAB_CHROMIUM (default /usr/bin/chromium), ATTNLAB_BROWSER_TIMEOUT_MS (default
// 180000: the whole page run).
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'
import { build, createLogger, preview } from 'vite'

const root = dirname(fileURLToPath(import.meta.url))
const executablePath = process.env.ATTNLAB_CHROMIUM ?? '/usr/bin/chromium'
const timeout = Number(process.env.ATTNLAB_BROWSER_TIMEOUT_MS ?? 180_000)
const started = performance.now()
const elapsed = () => `${((performance.now() - started) / 1000).toFixed(1)} s`

const failures = []
const check = (condition, message) => {
  if (!condition) failures.push(message)
}

let server
let context
let userDataDir
try {
  // Vite warns once per node:* module it replaces with an empty stub. The packages reach them only
  // through dynamic imports behind Node checks (file I/O, native kernels, tfjs' own Node code), so
  // they are summarised here; every other warning is printed.
  const logger = createLogger('warn')
  const externalized = new Set()
  const warn = logger.warn
  logger.warn = (message, options) => {
    const match = /Module "([^"]+)" has been externalized for browser compatibility/.exec(message)
    if (match) externalized.add(match[1])
    else warn(message, options)
  }
  await build({ root, configFile: join(root, 'vite.config.ts'), customLogger: logger })
  console.log(
    `browser-check: built the page (${elapsed()}); Node modules stubbed (only behind Node checks): ` +
      `${[...externalized].sort().join(', ') || 'none'}`,
  )
  server = await preview({
    root,
    configFile: join(root, 'vite.config.ts'),
    preview: { host: '127.0.0.1', port: 0, strictPort: false, open: false },
  })
  const url = server.resolvedUrls?.local[0]
  if (url === undefined) throw new Error('vite preview reported no local URL')

  userDataDir = await mkdtemp(join(tmpdir(), 'attnlab-chromium-'))
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
  const browserVersion = context.browser()?.version() ?? 'unknown'
  const page = context.pages()[0] ?? (await context.newPage())
  const pageErrors = []
  page.on('pageerror', (error) => pageErrors.push(`page error: ${error.stack ?? error.message}`))
  page.on('console', (message) => {
    if (message.type() === 'error')
      pageErrors.push(`console error: ${message.text()} (${message.location().url || 'no url'})`)
  })
  page.on('requestfailed', (request) =>
    pageErrors.push(`request failed: ${request.url()} (${request.failure()?.errorText ?? '?'})`),
  )
  page.on('response', (response) => {
    if (response.status() >= 400) pageErrors.push(`HTTP ${response.status()}: ${response.url()}`)
  })

  console.log(`browser-check: Chromium ${browserVersion} opens ${url}`)
  await page.goto(url)
  await page.waitForFunction(() => window.__result !== undefined, undefined, { timeout, polling: 250 })
  const result = await page.evaluate(() => window.__result)
  console.log(JSON.stringify(result, null, 2))

  for (const error of pageErrors) failures.push(error)

  // useBackend('wasm') without wasmPaths in a bundle: tfjs finds no .wasm next to the page; the
  // error must say what to do (a second page; its failed .wasm fetches are expected).
  const second = await context.newPage()
  second.on('pageerror', (error) => failures.push(`wasm-default page error: ${error.stack ?? error.message}`))
  await second.goto(`${url}?check=wasm-default`)
  await second.waitForFunction(() => window.__result !== undefined, undefined, { timeout: 60_000, polling: 250 })
  const wasmDefault = await second.evaluate(() => window.__result)
  console.log(`browser-check: useBackend('wasm') without wasmPaths: ${wasmDefault.error}`)
  check(
    wasmDefault.ok === false &&
      /BackendUnavailableError: .*WebAssembly binary could not be loaded.*wasmPaths/.test(wasmDefault.error),
    `useBackend('wasm') without wasmPaths: expected a BackendUnavailableError naming wasmPaths, got ` +
      `${JSON.stringify(wasmDefault)}`,
  )
  check(result.ok === true, `the page failed: ${result.error}`)
  if (result.ok === true) {
    const { markov, dynamics, backends } = result
    check(markov.tokensInRange && markov.scored > 0, `markov: bad batch ${JSON.stringify(markov)}`)
    check(
      dynamics.transitions.length === 3 && dynamics.transitions.every((t) => Number.isFinite(t)),
      `dynamics: expected 3 finite transitions, got ${JSON.stringify(dynamics.transitions)}`,
    )
    check(
      JSON.stringify(backends.map((b) => b.backend)) === JSON.stringify(['wasm', 'cpu']),
      `expected runs on wasm and cpu, got ${backends.map((b) => b.backend).join(', ')}`,
    )
    for (const b of backends) {
      const name = b.backend
      check(b.trainSteps === 20, `${name}: ${b.trainSteps} training steps, expected 20`)
      check(b.lossesFinite && Number.isFinite(b.validationLoss), `${name}: non-finite loss`)
      check(b.lossLast < b.lossFirst - 0.1, `${name}: the loss did not decrease (${b.lossFirst} -> ${b.lossLast})`)
      check(
        JSON.stringify(b.pattern.shape) === JSON.stringify([4, 3, 25, 25]),
        `${name}: hook_pattern shape ${JSON.stringify(b.pattern.shape)}`,
      )
      check(
        b.pattern.rowSumMaxError < 1e-4 && b.pattern.futureMass === 0,
        `${name}: hook_pattern is not a causal distribution ${JSON.stringify(b.pattern)}`,
      )
      check(b.pattern.hookCalls === 1, `${name}: the pattern hook ran ${b.pattern.hookCalls} times`)
      check(
        b.sparse.outputFinite && b.sparse.exactSparsity > 0,
        `${name}: sparse attention ${JSON.stringify(b.sparse)}`,
      )
      check(b.knockout.finite && b.knockout.knockedOut.length === 3, `${name}: knockout ${JSON.stringify(b.knockout)}`)
      const comparison = JSON.stringify(b.experiments)
      check(b.experiments.finite && b.experiments.rows === 1, `${name}: compareWithDense ${comparison}`)
      const emergence = JSON.stringify(b.emergence)
      check(
        b.emergence.steps.join() === '6' && b.emergence.evaluations.join() === '0,3,6' && b.emergence.finalLossFinite,
        `${name}: runEmergence ${emergence}`,
      )
      check(b.emergence.oracleLines === 4 && b.emergence.reportSvgs >= 3, `${name}: emergence report ${emergence}`)
      check(
        b.numTensorsAfter === b.numTensorsBefore,
        `${name}: tensors leaked (${b.numTensorsBefore} before, ${b.numTensorsAfter} after)`,
      )
    }
    const { errors } = result
    check(errors.configError.startsWith('ConfigError INVALID_CONFIG: '), `useBackend('gpu'): ${errors.configError}`)
    for (const name of ['loadModel', 'saveModelDirectory']) {
      check(
        /^UnsupportedError UNSUPPORTED: .*needs Node\.js/.test(errors[name]),
        `${name} in a browser: expected UNSUPPORTED naming Node.js, got ${errors[name]}`,
      )
    }
    const wasm = backends.find((b) => b.backend === 'wasm')
    check(wasm?.kernels === 'wasm', `wasm: attnlab kernels '${wasm?.kernels}', expected the WebAssembly ones`)
  }
} catch (error) {
  failures.push(error instanceof Error ? (error.stack ?? error.message) : String(error))
} finally {
  await context?.close().catch(() => {})
  await server?.close().catch(() => {})
  if (userDataDir !== undefined) await rm(userDataDir, { recursive: true, force: true }).catch(() => {})
}

if (failures.length > 0) {
  console.error(`browser-check: FAILED (${elapsed()})`)
  for (const failure of failures) console.error(`  - ${failure}`)
  process.exit(1)
}
console.log(`browser-check: all checks passed (${elapsed()})`)

#!/usr/bin/env node
// The browser smoke test: builds the page with vite, serves it on 127.0.0.1 (vite preview), opens
// it in headless Chromium (playwright-core, the system /usr/bin/chromium, with WebGL2 and a WebGPU
// adapter through SwiftShader), waits for window.__result and checks it: the packages on wasm and
// cpu, and the parity suite on cpu, wasm, webgl and webgpu (float32 tolerance of cpu, no leaks).
// Exits non-zero on any failed check, page error, console error or failed request. The packages'
// dist/ must be built first (`turbo run test:browser` does it).
//
// The build, the server and the browser come from harness.mjs (shared with the playground's test and bench).
// Environment: ATTNLAB_CHROMIUM (default /usr/bin/chromium), ATTNLAB_BROWSER_TIMEOUT_MS (default
// 480000: the whole page run, about 5 minutes on a loaded 2-core machine).
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildAndServe, collectPageErrors, launchChromium } from './harness.mjs'

const root = dirname(fileURLToPath(import.meta.url))
const timeout = Number(process.env.ATTNLAB_BROWSER_TIMEOUT_MS ?? 480_000)
const started = performance.now()
const elapsed = () => `${((performance.now() - started) / 1000).toFixed(1)} s`

const failures = []
const check = (condition, message) => {
  if (!condition) failures.push(message)
}

let server
let browser
try {
  server = await buildAndServe({ root })
  const { url } = server
  console.log(
    `browser-check: built the page (${elapsed()}); Node modules stubbed (only behind Node checks): ` +
      `${server.stubbed.join(', ') || 'none'}`,
  )
  browser = await launchChromium()
  const { context } = browser
  const browserVersion = browser.version
  const page = context.pages()[0] ?? (await context.newPage())
  const pageErrors = collectPageErrors(page, {
    onConsole: (message) => {
      if (message.type() === 'info' && message.text().startsWith('browser-check: '))
        console.log(`${message.text()} (${elapsed()})`)
    },
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
    checkParity(result.parity)
  }
} catch (error) {
  failures.push(error instanceof Error ? (error.stack ?? error.message) : String(error))
} finally {
  await browser?.close()
  await server?.close().catch(() => {})
}

/**
 * The parity suite's checks: every backend ran, within float32 tolerance of cpu (forward passes
 * 1e-5, four training steps' losses and the trained logits 1e-4, attention outputs 1e-5), no
 * tensor leaked; on webgpu the ops that read back synchronously throw UnsupportedError naming the
 * op and the backend. Prints a table of the differences and the training speed.
 */
function checkParity(parity) {
  const names = parity.map((p) => p.backend).join(', ')
  check(names === 'cpu, wasm, webgl, webgpu', `parity: expected runs on cpu, wasm, webgl, webgpu; got ${names}`)
  const rows = []
  for (const p of parity) {
    const name = p.backend
    if (p.error !== undefined) {
      failures.push(`parity ${name}: ${p.error}`)
      continue
    }
    const within = (value, tolerance, what) =>
      check(Number.isFinite(value) && value <= tolerance, `parity ${name}: ${what} differs from cpu by ${value}`)
    within(p.forwardMaxDiff.minimal, 1e-5, 'minimal model logits')
    within(p.forwardMaxDiff.gptNano, 1e-5, 'gpt-nano logits')
    within(p.train.lossMaxDiffMinimal, 1e-4, `minimal model training losses ${p.train.lossesMinimal}`)
    within(p.train.trainedLogitsMaxDiff, 1e-4, 'trained minimal model logits')
    within(p.train.lossMaxDiffGptNano, 1e-4, `gpt-nano training losses ${p.train.lossesGptNano}`)
    within(p.maskedMaxDiff, 1e-5, "attention over Block-Sparse's selection")
    check(p.train.lossesMinimal.length === p.train.steps, `parity ${name}: ${p.train.lossesMinimal.length} steps`)
    check(p.speed.stepsPerSecond > 0, `parity ${name}: no training speed`)
    check(
      p.numTensorsAfter === p.numTensorsBefore,
      `parity ${name}: tensors leaked (${p.numTensorsBefore} before, ${p.numTensorsAfter} after)`,
    )
    if (name === 'webgpu') {
      for (const [what, error, op] of [
        ['block-sparse', p.blockSparse.error, 'block-sparse estimation'],
        ['dense prefill', p.densePrefill.error, 'sparseAttention (the JavaScript kernel)'],
      ]) {
        check(
          typeof error === 'string' &&
            error.startsWith(`UnsupportedError UNSUPPORTED: ${op}`) &&
            error.includes("'webgpu'"),
          `parity webgpu: ${what} should throw UnsupportedError naming '${op}' and 'webgpu', got ${error}`,
        )
      }
    } else {
      check(p.blockSparse.error === null, `parity ${name}: block-sparse threw ${p.blockSparse.error}`)
      check(p.densePrefill.error === null, `parity ${name}: dense prefill threw ${p.densePrefill.error}`)
      within(p.blockSparse.maxDiff, 1e-5, 'block-sparse output')
      within(p.densePrefill.maxDiff, 1e-5, 'dense prefill output')
      check(p.blockSparse.exactSparsity > 0, `parity ${name}: block-sparse sparsity ${p.blockSparse.exactSparsity}`)
    }
    const e = (x) => (x === null ? 'error' : x.toExponential(2))
    rows.push(
      `  ${name.padEnd(7)} ${p.kernels.padEnd(5)} ` +
        `logits ${e(p.forwardMaxDiff.minimal)} / ${e(p.forwardMaxDiff.gptNano)}` +
        `  losses ${e(p.train.lossMaxDiffMinimal)} / ${e(p.train.lossMaxDiffGptNano)}` +
        `  trained ${e(p.train.trainedLogitsMaxDiff)}  block-sparse ${e(p.blockSparse.maxDiff)}` +
        `  masked ${e(p.maskedMaxDiff)}  dense ${e(p.densePrefill.maxDiff)}` +
        `  ${p.speed.stepsPerSecond.toFixed(2)} steps/s  ${p.seconds.toFixed(1)} s`,
    )
  }
  console.log(
    'browser-check: parity against cpu (largest |difference|; logits minimal / gpt-nano, losses minimal / ' +
      'gpt-nano; minimal training steps per second)\n' +
      rows.join('\n'),
  )
}

if (failures.length > 0) {
  console.error(`browser-check: FAILED (${elapsed()})`)
  for (const failure of failures) console.error(`  - ${failure}`)
  process.exit(1)
}
console.log(`browser-check: all checks passed (${elapsed()})`)

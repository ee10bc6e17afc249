// The browser harness shared by the browser tests and the playground's bench (apps/browser-check/run.mjs,
// apps/playground/run.mjs, apps/playground/bench/browser-vs-node.ts): build a vite page, serve it on
// 127.0.0.1 (vite preview), launch headless Chromium (playwright-core, the system /usr/bin/chromium, with
// WebGL2 and a WebGPU adapter through SwiftShader) and collect a page's errors. It lives here, where vite
// and playwright-core are dependencies; the playground imports it by relative path.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import { build, createLogger, preview } from 'vite'

/**
 * Builds a vite page and serves the build on 127.0.0.1 on a free port.
 *
 * Vite warns once per node:* module it replaces with an empty stub; the packages reach those only
 * through dynamic imports behind Node checks (file I/O, native kernels, tfjs' own Node code), so they
 * are returned as `stubbed` instead of printed. Its INEFFECTIVE_DYNAMIC_IMPORT notes (a module both
 * imported and dynamically imported) are dropped; every other warning is printed.
 *
 * @param {{ root: string, config?: import('vite').InlineConfig }} options - `root`: the page's directory;
 *   `config`: inline vite config (default: `root`/vite.config.ts)
 * @returns {Promise<{ url: string, stubbed: string[], close: () => Promise<void> }>} the page's URL
 * @throws Error when vite preview reports no local URL (and whatever the build throws)
 */
export async function buildAndServe({ root, config = { configFile: join(root, 'vite.config.ts') } }) {
  const logger = createLogger('warn')
  const stubbed = new Set()
  const warn = logger.warn
  logger.warn = (message, options) => {
    const match = /Module "([^"]+)" has been externalized for browser compatibility/.exec(message)
    if (match) stubbed.add(match[1])
    else if (!/INEFFECTIVE_DYNAMIC_IMPORT/.test(message)) warn(message, options)
  }
  const inline = { root, ...config, customLogger: logger }
  await build(inline)
  const server = await preview({ ...inline, preview: { host: '127.0.0.1', port: 0, strictPort: false, open: false } })
  const url = server.resolvedUrls?.local[0]
  if (url === undefined) {
    await server.close()
    throw new Error('vite preview reported no local URL')
  }
  return { url, stubbed: [...stubbed].sort(), close: () => server.close() }
}

/**
 * Launches headless Chromium (ATTNLAB_CHROMIUM, default /usr/bin/chromium) in a fresh profile, with
 * WebGL2 and a WebGPU adapter without a GPU (ANGLE and Dawn on SwiftShader, on the CPU).
 *
 * @param {{ viewport?: { width: number, height: number } }} [options]
 * @returns {Promise<{ context: import('playwright-core').BrowserContext, version: string,
 *   close: () => Promise<void> }>} `close` closes the browser and removes the profile
 */
export async function launchChromium(options = {}) {
  const userDataDir = await mkdtemp(join(tmpdir(), 'attnlab-chromium-'))
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.ATTNLAB_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    ...(options.viewport === undefined ? {} : { viewport: options.viewport }),
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
  return {
    context,
    version: context.browser()?.version() ?? 'unknown',
    close: async () => {
      await context.close().catch(() => {})
      await rm(userDataDir, { recursive: true, force: true }).catch(() => {})
    },
  }
}

/**
 * Collects a page's uncaught errors, console errors, failed requests and HTTP errors (>= 400) into
 * the returned array, as one line each.
 *
 * @param {import('playwright-core').Page} page
 * @param {{ onConsole?: (message: import('playwright-core').ConsoleMessage) => void }} [options] -
 *   `onConsole`: sees every console message too
 * @returns {string[]} the list the page's errors are appended to
 */
export function collectPageErrors(page, options = {}) {
  const errors = []
  page.on('pageerror', (error) => errors.push(`page error: ${error.stack ?? error.message}`))
  page.on('console', (message) => {
    options.onConsole?.(message)
    if (message.type() === 'error')
      errors.push(`console error: ${message.text()} (${message.location().url || 'no url'})`)
  })
  page.on('requestfailed', (request) =>
    errors.push(`request failed: ${request.url()} (${request.failure()?.errorText ?? '?'})`),
  )
  page.on('response', (response) => {
    if (response.status() >= 400) errors.push(`HTTP ${response.status()}: ${response.url()}`)
  })
  return errors
}

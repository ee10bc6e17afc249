/**
 * `attnlab kernels build|status`: the attnlab kernels behind training (see docs/performance.md).
 *
 * - `build` compiles the native kernels (C++ Node addon) with the system compiler and Node's own
 *   headers, offline; the monorepo's `pnpm install` already does this.
 * - `status` says which kernels `--kernels auto` uses here and why.
 *
 * Registering this command also adds the global `--kernels` / `--threads` flags that every
 * command with `--backend` honours.
 */
import type { Command } from 'commander'
import { AttnlabError, kernelsInUse, useBackend } from '@attnlab/core'
import { buildNativeKernels, loadedNativeKernelsInfo, nativeKernelsStatus } from '@attnlab/core/node'
import { installKernelFlags } from '../options.ts'

/** Registers `attnlab kernels` and the global `--kernels` / `--threads` flags. */
export function registerKernels(program: Command): void {
  installKernelFlags(program)
  const kernels = program.command('kernels').description('build or inspect the attnlab kernels (native C++ addon, WebAssembly SIMD, JS)')

  kernels
    .command('build')
    .description("compile the native kernels with this machine's C++ compiler (offline; no node-gyp or Python)")
    .option('--force', 'rebuild even when an up-to-date build exists')
    .option('--json', 'print the result as JSON')
    .action(async (flags: { force?: boolean; json?: boolean }) => {
      const result = await buildNativeKernels({ force: flags.force === true, log: flags.json ? () => {} : (line) => console.error(line) })
      if (flags.json) console.log(JSON.stringify(result, null, 2))
      if (!result.ok) {
        if (result.details !== undefined && !flags.json) console.error(result.details)
        throw new AttnlabError('UNSUPPORTED', `native kernels not built: ${result.reason ?? 'unknown reason'}; --kernels auto uses the WebAssembly kernels`, { reason: result.reason })
      }
      if (!flags.json) {
        console.log(result.skipped ? `native kernels up to date: ${result.path}` : `native kernels built in ${result.seconds?.toFixed(1)} s: ${result.path}`)
      }
    })

  kernels
    .command('status')
    .description('show which kernels --kernels auto picks on the wasm backend, and the native build')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const native = await nativeKernelsStatus()
      let autoOnWasm: string
      let wasmError: string | undefined
      try {
        await useBackend('wasm', { kernels: 'auto' })
        autoOnWasm = kernelsInUse('wasm')
      } catch (error) {
        autoOnWasm = 'none'
        wasmError = error instanceof Error ? error.message : String(error)
      }
      const loaded = loadedNativeKernelsInfo()
      const report = {
        autoOnWasm,
        native: {
          state: native.state,
          path: native.path ?? null,
          cpuLevel: loaded?.cpuLevel ?? native.stamp?.cpuLevel ?? null,
          openmp: loaded?.openmp ?? native.stamp?.openmp ?? null,
          compiler: native.stamp?.compiler ?? null,
          builtAt: native.stamp?.builtAt ?? null,
          searched: native.searched,
        },
        ...(wasmError === undefined ? {} : { wasmError }),
      }
      if (flags.json) {
        console.log(JSON.stringify(report, null, 2))
        return
      }
      console.log(`--kernels auto on the wasm backend uses: ${autoOnWasm}`)
      if (native.state === 'loadable') {
        console.log(`native kernels: built (${report.native.cpuLevel}, ${report.native.openmp ? 'OpenMP threads available' : 'single-threaded'}) at ${native.path}`)
      } else {
        const why = native.state === 'stale' ? 'built from other sources' : 'not built'
        console.log(`native kernels: ${why}; build them with: pnpm attnlab kernels build (searched ${native.searched.join(', ')})`)
      }
      if (wasmError !== undefined) console.log(`wasm backend: ${wasmError}`)
    })
}

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
import { Option, type Command } from 'commander'
import { ConfigError, kernelsInUse, UnsupportedError, useBackend } from '@attnlab/core'
import { buildNativeKernels, loadedNativeKernelsInfo, nativeKernelsStatus } from '@attnlab/core/node'
import { installKernelFlags, kernelFlagsGiven } from '../options.ts'

/** Registers `attnlab kernels` and the global `--kernels` / `--threads` flags. */
export function registerKernels(program: Command): void {
  installKernelFlags(program)
  const kernels = program
    .command('kernels')
    .description('build or inspect the attnlab kernels (native C++ addon, WebAssembly SIMD, JS)')

  kernels
    .command('build')
    .description("compile the native kernels with this machine's C++ compiler (offline; no node-gyp or Python)")
    .option('--force', 'rebuild even when an up-to-date build exists')
    .option('--json', 'print the result as JSON')
    .action(async (flags: { force?: boolean; json?: boolean }) => {
      const result = await buildNativeKernels({
        force: flags.force === true,
        log: flags.json ? () => {} : (line) => console.error(line),
      })
      if (flags.json) console.log(JSON.stringify(result, null, 2))
      if (!result.ok) {
        if (result.details !== undefined && !flags.json) console.error(result.details)
        throw new UnsupportedError(
          `native kernels not built: ${result.reason ?? 'unknown reason'}; --kernels auto uses the WebAssembly kernels`,
          { reason: result.reason },
        )
      }
      if (!flags.json) {
        console.log(
          result.skipped
            ? `native kernels up to date: ${result.path}`
            : `native kernels built in ${result.seconds?.toFixed(1)} s: ${result.path}`,
        )
      }
    })

  kernels
    .command('status')
    .description('show which kernels --kernels (default auto) picks on --backend (default wasm), and the native build')
    .addOption(
      new Option('--backend <name>', 'backend to report for: the attnlab kernels register on wasm and cpu')
        .choices(['wasm', 'cpu'])
        .default('wasm'),
    )
    .option('--json', 'print JSON')
    .action(async (flags: { backend: 'wasm' | 'cpu'; json?: boolean }) => {
      const native = await nativeKernelsStatus()
      const requested = kernelFlagsGiven()
      const mode = requested.kernels ?? 'auto'
      const activate = async (
        backend: 'wasm' | 'cpu',
        options: Parameters<typeof useBackend>[1],
      ): Promise<{ uses: string; error?: string }> => {
        try {
          await useBackend(backend, options)
          return { uses: kernelsInUse(backend) }
        } catch (error) {
          // A --kernels that cannot apply to --backend is bad usage, not a status to report.
          if (error instanceof ConfigError) throw error
          return { uses: 'none', error: error instanceof Error ? error.message : String(error) }
        }
      }
      const auto = await activate('wasm', { kernels: 'auto' })
      // What the given --kernels / --threads pick on --backend (the same as auto on wasm unless given).
      const chosen =
        mode === 'auto' && flags.backend === 'wasm' && requested.threads === undefined
          ? auto
          : await activate(flags.backend, requested)
      const loaded = loadedNativeKernelsInfo()
      const report = {
        autoOnWasm: auto.uses,
        backend: flags.backend,
        kernels: mode,
        uses: chosen.uses,
        native: {
          state: native.state,
          path: native.path ?? null,
          cpuLevel: loaded?.cpuLevel ?? native.stamp?.cpuLevel ?? null,
          openmp: loaded?.openmp ?? native.stamp?.openmp ?? null,
          compiler: native.stamp?.compiler ?? null,
          builtAt: native.stamp?.builtAt ?? null,
          searched: native.searched,
        },
        ...(auto.error === undefined ? {} : { wasmError: auto.error }),
        ...(chosen.error === undefined || chosen === auto ? {} : { error: chosen.error }),
      }
      if (flags.json) {
        console.log(JSON.stringify(report, null, 2))
        return
      }
      console.log(
        `--kernels ${mode} on the ${flags.backend} backend ` +
          `uses: ${chosen.error === undefined ? chosen.uses : `nothing (${chosen.error})`}`,
      )
      if (mode !== 'auto' || flags.backend !== 'wasm')
        console.log(`(--kernels auto on the wasm backend uses: ${auto.uses})`)
      if (native.state === 'loadable') {
        console.log(
          `native kernels: built (${report.native.cpuLevel}, threads ` +
            `available${report.native.openmp ? '' : ', no OpenMP simd'}) at ${native.path}`,
        )
      } else {
        const why = native.state === 'stale' ? 'built from other sources' : 'not built'
        console.log(
          `native kernels: ${why}; build them with: pnpm attnlab kernels build ` +
            `(searched ${native.searched.join(', ')})`,
        )
      }
      if (auto.error !== undefined) console.log(`wasm backend: ${auto.error}`)
    })
}

import type { Command } from 'commander'
import { BACKEND_PACKAGES, availableBackends, defaultBackend, kernelsInUse } from '@attnlab/core'
import { activateBackend, backendOption } from '../options.ts'
import { CLI_VERSION } from '../version.ts'

/** `attnlab info`: versions and the backends available here. */
export function registerInfo(program: Command): void {
  program
    .command('info')
    .description(
      'show the Node version and which tensor backends can run here (with --backend: activate it and show its ' +
        'attnlab kernels)',
    )
    .addOption(backendOption())
    .option('--json', 'print JSON')
    .action(async (options: { backend?: string; json?: boolean }) => {
      const available = await availableBackends()
      const info = {
        attnlab: CLI_VERSION,
        node: process.version,
        platform: `${process.platform}-${process.arch}`,
        backends: Object.fromEntries(
          Object.entries(BACKEND_PACKAGES).map(([name, pkg]) => [
            name,
            { package: pkg, available: available.includes(name as never) },
          ]),
        ),
        defaultBackend: await defaultBackend(),
      }
      // --backend (and the global --kernels / --threads): activate it as a command would and say which kernels it uses.
      let chosen: { name: string; kernels: string } | undefined
      if (options.backend !== undefined) {
        const name = await activateBackend(options.backend)
        chosen = { name, kernels: kernelsInUse(name) }
      }
      if (options.json) {
        console.log(JSON.stringify(chosen === undefined ? info : { ...info, backend: chosen }, null, 2))
        return
      }
      console.log(`attnlab ${info.attnlab}`)
      console.log(`node ${info.node} (${info.platform})`)
      for (const [name, b] of Object.entries(info.backends)) {
        console.log(`  ${b.available ? '✓' : '✗'} ${name.padEnd(15)} ${b.package}`)
      }
      console.log(`default backend: ${info.defaultBackend}`)
      if (chosen !== undefined) console.log(`backend ${chosen.name}: active, attnlab kernels: ${chosen.kernels}`)
    })
}

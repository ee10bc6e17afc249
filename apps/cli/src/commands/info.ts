import type { Command } from 'commander'
import { BACKEND_PACKAGES, availableBackends, defaultBackend } from '@attnlab/core'

/** `attnlab info`: versions and the backends available here. */
export function registerInfo(program: Command): void {
  program
    .command('info')
    .description('show the Node version and which tensor backends can run here')
    .option('--json', 'print JSON')
    .action(async (options: { json?: boolean }) => {
      const available = await availableBackends()
      const info = {
        node: process.version,
        platform: `${process.platform}-${process.arch}`,
        backends: Object.fromEntries(
          Object.entries(BACKEND_PACKAGES).map(([name, pkg]) => [name, { package: pkg, available: available.includes(name as never) }]),
        ),
        defaultBackend: await defaultBackend(),
      }
      if (options.json) {
        console.log(JSON.stringify(info, null, 2))
        return
      }
      console.log(`node ${info.node} (${info.platform})`)
      for (const [name, b] of Object.entries(info.backends)) {
        console.log(`  ${b.available ? '✓' : '✗'} ${name.padEnd(15)} ${b.package}`)
      }
      console.log(`default backend: ${info.defaultBackend}`)
    })
}

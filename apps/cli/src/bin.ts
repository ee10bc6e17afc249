#!/usr/bin/env node
// The `attnlab` executable. `pnpm attnlab <args>` runs this file from source.
import { main } from './program.ts'

// A reader that goes away (`attnlab info | head -1`) must not crash the command with an unhandled
// EPIPE: the rest of the output is dropped and the command carries on (a training run still saves).
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error
    stream.destroy()
  })
}

process.exitCode = await main(process.argv.slice(2))

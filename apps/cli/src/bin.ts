#!/usr/bin/env node
// The `attnlab` executable. `pnpm attnlab <args>` runs this file from source.
import { main } from './program.ts'

process.exitCode = await main(process.argv.slice(2))

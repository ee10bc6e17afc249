/**
 * The CLI's version: the `version` of `apps/cli/package.json` (`attnlab --version`, `attnlab info`).
 */
import { readFileSync } from 'node:fs'

/**
 * The version of the `@attnlab/cli` package, read from its package.json (one level above both
 * `src/` and `dist/`, so the source and the built CLI agree).
 */
export const CLI_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version

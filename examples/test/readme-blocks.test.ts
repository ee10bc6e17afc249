// Each TypeScript block of the packages' READMEs is the start of one of the examples/readme/*.ts
// scripts, which readme.test.ts runs (`pnpm test:examples`), so "runs as written" stays true.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const scripts = readdirSync(join(root, 'examples', 'readme'))
  .filter((f) => f.endsWith('.ts'))
  .sort()

describe('package READMEs', () => {
  const sources = scripts.map((f) => readFileSync(join(root, 'examples', 'readme', f), 'utf8'))
  const readmes = readdirSync(join(root, 'packages')).map((p) => join(root, 'packages', p, 'README.md'))
  for (const readme of readmes.filter((r) => existsSync(r))) {
    it(`${readme.slice(root.length + 1)}: every ts block is the start of an examples/readme script`, () => {
      const blocks = [...readFileSync(readme, 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!)
      for (const block of blocks) {
        expect(
          sources.some((source) => source.startsWith(block)),
          block.slice(0, 200),
        ).toBe(true)
      }
    })
  }
})

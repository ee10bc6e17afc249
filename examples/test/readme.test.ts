// Runs every examples/readme/*.ts script the way the README says (`pnpm example FILE` from the
// repository root); readme-blocks.test.ts checks that each TypeScript block of the packages' READMEs
// is the start of one of these scripts, so "runs as written" stays true. Minutes of training: run by
// `pnpm test:examples` (a CI step after `pnpm test`), not by `pnpm test`.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const scripts = readdirSync(join(root, 'examples', 'readme'))
  .filter((f) => f.endsWith('.ts'))
  .sort()
/** Scripts that load a real model; by default the one this project's tests keep outside the repository. */
const needsModel = new Set(['knockout.ts', 'transformer-import.ts'])
const defaultModel = join(root, '..', 'shared', 'models', 'aidreams260K', 'model.bin')

/** `pnpm example examples/readme/FILE ...args`, from the repository root. */
function runExample(file: string, args: string[] = []): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(
    process.execPath,
    ['--conditions=@attnlab/source', '--import', 'tsx', join('examples', 'readme', file), ...args],
    { cwd: root, encoding: 'utf8', timeout: 600_000 },
  )
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

describe('examples/readme scripts', () => {
  it('exist, one per README example', () => {
    expect(scripts.length).toBeGreaterThanOrEqual(8)
  })

  for (const file of scripts) {
    const skip = needsModel.has(file) && !existsSync(defaultModel)
    it.skipIf(skip)(
      `${file} runs as written`,
      () => {
        const { status, stderr } = runExample(file)
        expect(status, stderr.slice(-2000)).toBe(0)
      },
      600_000,
    )
  }

  for (const file of needsModel) {
    it(`${file} without a model says how to pass one (exit 2, no stack trace)`, () => {
      const missing = join(root, 'runs', 'no-such-model', 'model.bin')
      const { status, stdout, stderr } = runExample(file, [missing])
      expect(status).toBe(2)
      expect(stdout).toBe('')
      const usage = `pnpm example examples/readme/${file} MODEL [TOKENIZER]`
      expect(stderr).toContain(`no model at ${missing}; pass one: ${usage}`)
      expect(stderr).not.toMatch(/\n\s+at /)
    }, 300_000)

    // stories260K as downloaded: its tokenizer is tok512.bin, which loadModel does not look for
    const stories = join(root, '..', 'shared', 'models', 'stories260K')
    it.skipIf(!existsSync(stories))(
      `${file} with no tokenizer.bin beside the model asks for the tokenizer`,
      () => {
        const model = join(stories, 'stories260K.bin')
        const { status, stdout, stderr } = runExample(file, [model])
        expect(status).toBe(2)
        expect(stdout).toBe('')
        expect(stderr).toContain('no tokenizer.bin')
        expect(stderr).toContain(`beside ${model}; pass its tokenizer: pnpm example`)
      },
      120_000,
    )
  }

  it.skipIf(!existsSync(join(root, '..', 'shared', 'models', 'stories260K')))(
    'transformer-import.ts runs on a model and tokenizer given as arguments (stories260K, tok512.bin)',
    () => {
      const stories = join(root, '..', 'shared', 'models', 'stories260K')
      const { status, stdout, stderr } = runExample('transformer-import.ts', [
        join(stories, 'stories260K.bin'),
        join(stories, 'tok512.bin'),
      ])
      expect(status, stderr.slice(-2000)).toBe(0)
      expect(stdout).toContain('llama2c llama 5 layers')
    },
    600_000,
  )
})

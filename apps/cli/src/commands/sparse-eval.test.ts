// attnlab sparse eval end to end on a niah-tokens model trained by attnlab train here (a few
// steps: the scores are not the point): the table, --json rows, report.html, and usage errors.
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import type { SparseEvalRow } from '@attnlab/experiments'
import { runCli, useTempDir } from '../cli.test-utils.ts'

const dir = useTempDir('attnlab-sparse-eval-')
// --question-first: the trained record's layout must reach the evaluation.
const TASK = [
  ...['--task', 'niah-tokens', '--n-ctx', '40', '--needles', '2', '--key-tokens', '20', '--value-tokens', '4'],
  '--question-first',
]
let model: string

afterEach(() => vi.restoreAllMocks())

beforeAll(async () => {
  model = join(dir(), 'model')
  const flags = ['--preset', 'llama', '--d-model', '16', '--n-heads', '2', '--n-layers', '1', '--batch', '4']
  const run = ['--steps', '3', '--eval-every', '0', '--validation-size', '4', '--backend', 'cpu']
  const { code, stderr } = await runCli(['train', ...TASK, ...flags, ...run, '--out', model])
  expect(stderr).not.toMatch(/error/)
  expect(code).toBe(0)
}, 120_000)

describe('attnlab sparse eval', () => {
  it('prints the table, --json rows and writes report.html with --out', async () => {
    const common = ['sparse', 'eval', '--model', model, '--tasks', 'niah-tokens', '--methods', 'snapkv']
    const text = await runCli([
      ...common,
      '--sparsity',
      '0,0.5',
      '--lengths',
      '40',
      '--samples',
      '3',
      '--backend',
      'cpu',
    ])
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/niah-tokens\s+40\s+dense\s+0\.00/)
    expect(text.stdout).toMatch(/niah-tokens\s+40\s+snapkv\s+0\.50/)
    expect(text.stdout).toMatch(/which heads retrieve/)
    expect(text.stdout).toMatch(/niah-tokens\s+40\s+L0H1[ *]\s+\d\.\d{3}\s+\d\.\d{3}/)
    const out = join(dir(), 'eval')
    const json = await runCli([
      ...common,
      '--sparsity',
      '0,0.5',
      '--lengths',
      '32,40',
      '--samples',
      '3',
      '--json',
      '--out',
      out,
      '--backend',
      'cpu',
    ])
    expect(json.code).toBe(0)
    const result = JSON.parse(json.stdout) as { rows: SparseEvalRow[]; tasks: unknown[] }
    // the trained task's configuration is kept (its token ranges, its layout), nCtx comes from --lengths
    expect(result.tasks).toEqual([
      { kind: 'niah-tokens', needles: 2, keyTokens: 20, valueTokens: 4, questionFirst: true },
    ])
    expect(result.rows.map((r) => [r.length, r.method, r.targetSparsity])).toEqual([
      [32, 'dense', 0],
      [32, 'snapkv', 0],
      [32, 'snapkv', 0.5],
      [40, 'dense', 0],
      [40, 'snapkv', 0],
      [40, 'snapkv', 0.5],
    ])
    const html = await readFile(join(out, 'report.html'), 'utf8')
    expect(html).toMatch(/<svg/)
    expect(html).toContain('Which heads retrieve')
    expect(html).toMatch(/niah-tokens\s+40\s+L0H0/)
    expect(existsSync(join(out, 'results.json'))).toBe(true)
    const again = await runCli([...common, '--lengths', '40', '--samples', '1', '--out', out, '--backend', 'cpu'])
    expect(again.code).not.toBe(0)
    expect(again.stderr).toMatch(/--out .* is not empty; pass --force/)
  }, 120_000)

  it('refuses a length above the model context and unknown tasks or methods', async () => {
    const base = ['sparse', 'eval', '--model', model, '--samples', '1', '--backend', 'cpu']
    const long = await runCli([...base, '--tasks', 'niah-tokens', '--methods', 'quest', '--lengths', '41'])
    expect(long.code).not.toBe(0)
    expect(long.stderr).toMatch(/length 41 is not an integer in \[1, 40\]: the model's context \(nCtx\) is 40/)
    const task = await runCli([...base, '--tasks', 'niah', '--methods', 'quest', '--lengths', '40'])
    expect(task.stderr).toMatch(/--tasks takes comma-separated values of niah-tokens/)
    const method = await runCli([...base, '--tasks', 'niah-tokens', '--methods', 'snap', '--lengths', '40'])
    expect(method.stderr).toMatch(/--methods takes comma-separated values of dense/)
    // markov oracle has nothing to say about a retrieval task, and says so
    const oracle = await runCli(['markov', 'oracle', ...TASK])
    expect(oracle.code).not.toBe(0)
    expect(oracle.stderr).toMatch(/no loss oracle for --task niah-tokens .* attnlab sparse eval/)
  })

  const SHARED = resolve(fileURLToPath(import.meta.url), '../../../../../../shared/models/stories260K')
  const stories = existsSync(join(SHARED, 'stories260K.bin'))
  it.skipIf(!stories)(
    'runs the text tasks on a real model with its tokenizer: rows, agreement, outputs',
    async () => {
      const out = join(dir(), 'text')
      const args = [
        'sparse',
        'eval',
        '--model',
        join(SHARED, 'stories260K.bin'),
        '--tokenizer',
        join(SHARED, 'tok512.bin'),
      ]
      const run = await runCli([
        ...args,
        ...['--tasks', 'ruler-niah', '--task-options', 'needles=1,groups=1', '--methods', 'snapkv'],
        ...['--sparsity', '0,0.8', '--lengths', '440', '--samples', '1', '--max-new-tokens', '4', '--backend', 'cpu'],
        ...['--json', '--out', out],
      ])
      expect(run.stderr).not.toMatch(/error/)
      expect(run.code).toBe(0)
      const result = JSON.parse(run.stdout) as { rows: SparseEvalRow[]; tasks: unknown[] }
      expect(result.tasks).toEqual([{ kind: 'ruler-niah', needles: 1, groups: 1 }])
      expect(result.rows.map((r) => [r.task, r.method, r.targetSparsity])).toEqual([
        ['ruler-niah', 'dense', 0],
        ['ruler-niah', 'snapkv', 0],
        ['ruler-niah', 'snapkv', 0.8],
      ])
      expect(result.rows[0]?.agreement).toBe(1)
      expect(typeof result.rows[2]?.example).toBe('string')
      expect(result.rows[2]?.exactSparsity).toBeGreaterThan(0.5)
      const html = await readFile(join(out, 'report.html'), 'utf8')
      expect(html).toContain('Agreement with the dense output')
      expect(html).toContain('Outputs (the first prompt of each row)')
      // Usage errors: no tokenizer found, mixed task kinds, text flags on a token task, a bad setting.
      const bare = [
        'sparse',
        'eval',
        '--model',
        join(SHARED, 'stories260K.bin'),
        '--methods',
        'quest',
        '--samples',
        '1',
      ]
      const none = await runCli([...bare, '--tasks', 'ruler-niah', '--lengths', '440', '--backend', 'cpu'])
      expect(none.stderr).toMatch(
        /text task ruler-niah needs the model's tokenizer .*\(looked for tokenizer\.bin .*pass --tokenizer <path>/,
      )
      const twice = await runCli([...bare, '--tasks', 'ruler-vt', '--lengths', '40', '--task-options', 'hops=1,hops=2'])
      expect(twice.stderr).toMatch(/--task-options: hops is given twice/)
      const prefix = await runCli([
        ...args,
        ...bare.slice(4),
        '--tasks',
        'ruler-niah',
        '--lengths',
        '440',
        '--no-dummy-prefix',
      ])
      expect(prefix.stderr).toMatch(
        /--no-dummy-prefix applies to a Hugging Face tokenizer\.json.*drop --no-dummy-prefix/,
      )
      expect(prefix.code).not.toBe(0)
      const mixed = await runCli([...bare, '--tasks', 'ruler-niah,niah-tokens', '--lengths', '40'])
      expect(mixed.stderr).toMatch(/--tasks mixes text tasks \(ruler-niah\) with token tasks/)
      const flags = await runCli([...bare, '--tasks', 'niah-tokens', '--lengths', '40', '--max-new-tokens', '4'])
      const textOnly = /--task-options, --max-new-tokens, --answer-prefix, --tokenizer and --no-dummy-prefix apply/
      expect(flags.stderr).toMatch(textOnly)
      const noPrefix = await runCli([...bare, '--tasks', 'niah-tokens', '--lengths', '40', '--no-dummy-prefix'])
      expect(noPrefix.stderr).toMatch(textOnly)
      expect(noPrefix.code).toBe(2)
      const other = await runCli([...bare, '--tasks', 'ruler-vt', '--lengths', '40', '--task-options', 'needles=1'])
      expect(other.stderr).toMatch(/--task-options needles is read by ruler-niah, not by ruler-vt/)
      const bad = await runCli([...bare, '--tasks', 'ruler-vt', '--lengths', '40', '--task-options', 'hops=two'])
      expect(bad.stderr).toMatch(/--task-options: hops must be a number, got 'two'/)
      const long = await runCli([
        ...args,
        ...bare.slice(4),
        '--tasks',
        'ruler-vt',
        '--lengths',
        '500',
        '--backend',
        'cpu',
      ])
      expect(long.stderr).toMatch(/length 500 is not an integer in \[17, 448\]/)
    },
    120_000,
  )
})

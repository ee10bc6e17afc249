// attnlab sparse eval end to end on a niah-tokens model trained by attnlab train here (a few
// steps: the scores are not the point): the table, --json rows, report.html, and usage errors.
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
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
})

// The interventions of Baherwani et al. (arXiv 2606.25010) on the command line: --attention-bias
// (with --bias-layers / --bias-heads) on `attnlab train` and `attnlab emergence`.
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput, TINY_RUN_FLAGS, TINY_TASK_FLAGS, useTempDir } from '../cli.test-utils.ts'
import { main } from '../program.ts'

const root = useTempDir('attnlab-interventions-')
afterEach(() => {
  vi.restoreAllMocks()
})

const TINY = [
  '--task',
  'sparse-markov',
  ...TINY_TASK_FLAGS,
  '--preset',
  'gpt-nano',
  '--batch',
  '16',
  '--validation-size',
  '32',
  '--eval-every',
  '4',
  '--backend',
  'cpu',
  '--json',
]

async function run(args: readonly string[]): Promise<{ code: number; out: string; err: string }> {
  const io = captureOutput()
  const code = await main([...args])
  vi.restoreAllMocks()
  return { code, out: io.out(), err: io.err() }
}

describe('--attention-bias', () => {
  it('train: records the bias, trains differently, and a resume keeps it (exactly) but cannot change it', async () => {
    const bias = ['--attention-bias', '3', '--bias-heads', '0']
    const plain = await run(['train', ...TINY, '--steps', '8', '--out', join(root(), 'plain')])
    const full = await run(['train', ...TINY, ...bias, '--steps', '8', '--out', join(root(), 'full')])
    expect(full.code).toBe(0)
    expect(JSON.parse(full.out).finalValidationLoss).not.toBe(JSON.parse(plain.out).finalValidationLoss)
    const checkpoint = await loadCheckpoint(join(root(), 'full'))
    expect((checkpoint.extra as { train: { attentionBias: unknown } }).train.attentionBias).toEqual({
      beta: 3,
      layers: null,
      heads: [0],
    })
    expect(checkpoint.trainerState?.settings.attentionBias).toEqual({ beta: 3, layers: [0], heads: [0] })
    const part = join(root(), 'part')
    expect((await run(['train', ...TINY, ...bias, '--steps', '4', '--out', part])).code).toBe(0)
    const changed = await run(['train', '--resume', part, '--steps', '8', '--attention-bias', '2', '--backend', 'cpu'])
    expect(changed.code).toBe(2)
    expect(changed.err).toMatch(/--attention-bias cannot change when resuming \(the run has --attention-bias 3/)
    const resumed = await run(['train', '--resume', part, '--steps', '8', '--backend', 'cpu', '--json'])
    expect(resumed.code).toBe(0)
    expect(JSON.parse(resumed.out).finalValidationLoss).toBe(JSON.parse(full.out).finalValidationLoss)
  })

  it('emergence: in config.json; refused (exit 2, nothing created) for a task without a ground-truth map', async () => {
    const out = join(root(), 'emergence')
    const ok = await run([
      'emergence',
      ...TINY_RUN_FLAGS,
      '--attention-bias',
      '1.5',
      '--steps',
      '2',
      '--eval-every',
      '1',
      '--analysis-size',
      '8',
      '--out',
      out,
      '--json',
    ])
    expect(ok.code).toBe(0)
    const record = JSON.parse(await readFile(join(out, 'config.json'), 'utf8'))
    expect(record.training.attentionBias).toEqual({ beta: 1.5, layers: null, heads: null })
    const icl = join(root(), 'icl')
    const refused = await run(['emergence', '--task', 'icl-markov', '--attention-bias', '1', '--out', icl])
    expect(refused.code).toBe(2)
    expect(refused.err).toMatch(/--attention-bias: the task 'icl-markov' has no ground-truth attention map/)
    expect(existsSync(icl)).toBe(false)
    const heads = await run([
      'emergence',
      ...TINY_RUN_FLAGS,
      '--attention-bias',
      '1',
      '--bias-heads',
      '5',
      '--analysis-size',
      '8',
      '--out',
      icl,
    ])
    expect(heads.code).toBe(2)
    expect(heads.err).toMatch(/--bias-heads: 5 is not a head of this model; expected 0 \.\. 2/)
    const alone = await run(['train', ...TINY, '--bias-layers', '0', '--out', icl])
    expect(alone.err).toMatch(/--bias-layers applies to --attention-bias/)
    expect(existsSync(icl)).toBe(false)
  })
})

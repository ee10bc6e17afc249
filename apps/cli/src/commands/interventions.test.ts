// The interventions of Baherwani et al. (arXiv 2606.25010) on the command line: --attention-bias
// (with --bias-layers / --bias-heads) and --init-from on `attnlab train` and `attnlab emergence`.
import { existsSync } from 'node:fs'
import { mkdir, readFile } from 'node:fs/promises'
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

describe('--init-from', () => {
  it('train: copies what fits from a checkpoint, records it, and cannot change on resume', async () => {
    const source = join(root(), 'init-source')
    expect((await run(['train', ...TINY, '--steps', '4', '--out', source])).code).toBe(0)
    const same = join(root(), 'init-same')
    // One step of lr 1e-9 (a checkpoint is written after a step): the weights stay the source's within 1e-6.
    const tiny = ['--steps', '1', '--lr', '1e-9']
    const copy = await run(['train', ...TINY, ...tiny, '--init-from', source, '--out', same])
    expect(copy.code).toBe(0)
    const summary = JSON.parse(copy.out)
    expect(summary.transfer.source).toBe(source)
    expect(summary.transfer.reinitialized).toEqual([])
    const a = await loadCheckpoint(source)
    const b = await loadCheckpoint(same)
    for (const [name, w] of a.weights) {
      const got = b.weights.get(name)!.data
      expect(Math.max(...w.data.map((x, i) => Math.abs(x - (got[i] as number)))), name).toBeLessThan(1e-6)
    }
    expect((b.extra as { transfer: { copied: string[] } }).transfer.copied).toEqual([...a.weights.keys()])
    // Another vocabulary (d = 6): the blocks are the source's, the (tied) embedding is fresh.
    const other = join(root(), 'init-other')
    const vocab = TINY.map((x, i) => (TINY[i - 1] === '--vocab' ? '6' : x))
    const fresh = await run([
      'train',
      ...vocab,
      ...tiny,
      '--init-from',
      join(source, 'model.safetensors'),
      '--out',
      other,
    ])
    expect(fresh.code).toBe(0)
    expect(JSON.parse(fresh.out).transfer.reinitialized.map((r: { name: string }) => r.name)).toEqual(['embed.W_E'])
    const c = await loadCheckpoint(other)
    for (const [name, w] of a.weights)
      if (name.startsWith('blocks.')) {
        const got = c.weights.get(name)!.data
        expect(Math.max(...w.data.map((x, i) => Math.abs(x - (got[i] as number)))), name).toBeLessThan(1e-6)
      }
    expect(c.weights.get('embed.W_E')!.shape).toEqual([6, a.weights.get('embed.W_E')!.shape[1]])
    // Repeating the run's own --init-from is no change; another source is.
    const resumed = await run(['train', '--resume', same, '--steps', '2', '--init-from', other, '--backend', 'cpu'])
    expect(resumed.code).toBe(2)
    expect(resumed.err).toMatch(/--init-from cannot change when resuming/)
  })

  it('emergence: from an emergence run; a missing or invalid source is exit 2 before any work', async () => {
    const flags = [...TINY_RUN_FLAGS, '--steps', '2', '--eval-every', '1', '--analysis-size', '8', '--json']
    const first = join(root(), 'em-first')
    expect((await run(['emergence', ...flags, '--out', first])).code).toBe(0)
    const second = join(root(), 'em-second')
    expect((await run(['emergence', ...flags, '--init-from', first, '--out', second])).code).toBe(0)
    const record = JSON.parse(await readFile(join(second, 'config.json'), 'utf8'))
    expect(record.training.initFrom).toBe(first)
    expect(record.transfer.source).toBe(join(first, 'seeds', '0', 'checkpoint'))
    const summary = JSON.parse(await readFile(join(second, 'summary.json'), 'utf8'))
    expect(summary.transfer.copied.length).toBeGreaterThan(0)
    const out = join(root(), 'em-bad')
    const missing = await run(['emergence', ...flags, '--init-from', join(root(), 'nothing'), '--out', out])
    expect(missing.code).toBe(2)
    expect(missing.err).toMatch(/--init-from: .*nothing does not exist; expected a run directory or a checkpoint/)
    const empty = join(root(), 'em-empty')
    await mkdir(empty)
    const invalid = await run(['emergence', ...flags, '--init-from', empty, '--out', out])
    expect(invalid.code).toBe(2)
    expect(invalid.err).toMatch(/--init-from: .* is neither a checkpoint/)
    expect(existsSync(out)).toBe(false)
    const again = await run(['emergence', '--resume', second, '--init-from', first])
    expect(again.code).toBe(2)
    expect(again.err).toMatch(/--init-from cannot change when resuming/)
  })
})

describe('--batch-tokens', () => {
  it('derives the batch from the sequence length (emergence and train); refuses what does not divide', async () => {
    // The tiny chain has sequences of 8 tokens: 64 tokens are 8 sequences.
    const emergence = join(root(), 'tokens-emergence')
    const flags = TINY_RUN_FLAGS.filter((x, i) => x !== '--batch' && TINY_RUN_FLAGS[i - 1] !== '--batch')
    const args = [...flags, '--steps', '2', '--eval-every', '1', '--analysis-size', '8', '--json']
    expect((await run(['emergence', ...args, '--batch-tokens', '64', '--out', emergence])).code).toBe(0)
    const record = JSON.parse(await readFile(join(emergence, 'config.json'), 'utf8'))
    expect(record.training).toMatchObject({ batchTokens: 64, batchSize: 8 })
    const plain = TINY.filter((x, i) => x !== '--batch' && TINY[i - 1] !== '--batch')
    const train = await run([
      'train',
      ...plain,
      '--batch-tokens',
      '32',
      '--steps',
      '2',
      '--out',
      join(root(), 'tokens'),
    ])
    expect(train.code).toBe(0)
    expect(JSON.parse(train.out).trainingTokens).toBe(2 * 4 * 7)
    const out = join(root(), 'tokens-bad')
    for (const [extra, message] of [
      [['--batch-tokens', '60'], /--batch-tokens: 60 is not a multiple of the sequence length 8/],
      [['--batch-tokens', '4'], /--batch-tokens: 4 tokens give less than one sequence of 8 tokens/],
      [['--batch-tokens', '64', '--batch', '8'], /give --batch or --batch-tokens, not both/],
    ] as const) {
      for (const command of ['emergence', 'train']) {
        const refused = await run([command, ...(command === 'train' ? plain : args), ...extra, '--out', out])
        expect(refused.code).toBe(2)
        expect(refused.err).toMatch(message)
      }
    }
    expect(existsSync(out)).toBe(false)
  })
})

import { join } from 'node:path'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput, useTempDir } from '../cli.test-utils.ts'
import { main } from '../program.ts'

const root = useTempDir('attnlab-train-')
afterEach(() => {
  vi.restoreAllMocks()
})

const TINY = ['--task', 'sparse-markov', '--vocab', '8', '--spans', '1,1', '--gen-len', '6', '--tau', '0.3', '--batch', '16', '--validation-size', '32', '--eval-every', '3', '--backend', 'cpu']

describe('attnlab train', () => {
  it('trains the minimal preset and prints a JSON summary with losses and tokens/s', async () => {
    const io = captureOutput()
    const out = join(root(), 'minimal')
    const code = await main(['train', '--preset', 'minimal', ...TINY, '--steps', '6', '--out', out, '--json'])
    expect(io.err()).toBe('')
    expect(code).toBe(0)
    const summary = JSON.parse(io.out())
    expect(summary).toMatchObject({ preset: 'minimal', steps: 6, stopped: false, backend: 'cpu', out })
    expect(summary.finalValidationLoss).toBeGreaterThan(0)
    expect(summary.finalTrainLoss).toBeGreaterThan(0)
    expect(summary.tokensPerSecond).toBeGreaterThan(0)
    expect(summary.trainingTokens).toBe(6 * 16 * 7)
    expect(summary.config).toMatchObject({ architecture: 'minimal', dVocab: 8, nCtx: 7, dModel: 15 })
    expect(summary.evaluations.map((e: { step: number }) => e.step)).toEqual([3, 6])
    const checkpoint = await loadCheckpoint(out)
    expect(checkpoint.trainerState!.step).toBe(6)
  })

  it('--resume continues exactly where an uninterrupted run would be', async () => {
    const io = captureOutput()
    const full = join(root(), 'full')
    expect(await main(['train', '--preset', 'gpt-nano', ...TINY, '--steps', '8', '--out', full, '--json'])).toBe(0)
    const fullSummary = JSON.parse(io.out().split('\n').join('\n'))
    vi.restoreAllMocks()
    const part = join(root(), 'part')
    captureOutput()
    expect(await main(['train', '--preset', 'gpt-nano', ...TINY, '--steps', '4', '--out', part, '--json'])).toBe(0)
    vi.restoreAllMocks()
    const io2 = captureOutput()
    expect(await main(['train', '--resume', part, '--steps', '8', '--out', part, '--eval-every', '3', '--backend', 'cpu', '--json'])).toBe(0)
    const resumed = JSON.parse(io2.out())
    expect(resumed.steps).toBe(8)
    expect(resumed.finalValidationLoss).toBe(fullSummary.finalValidationLoss)
    const a = await loadCheckpoint(full)
    const b = await loadCheckpoint(part)
    for (const [name, w] of a.weights) expect(b.weights.get(name)!.data, name).toEqual(w.data)
  })

  it('prints a human-readable progress line per evaluation', async () => {
    const io = captureOutput()
    expect(await main(['train', '--preset', 'gpt-nano', ...TINY, '--steps', '3', '--out', join(root(), 'human')])).toBe(0)
    expect(io.out()).toMatch(/step 3\/3 {2}train \d\.\d{4} {2}val \d\.\d{4} nats {2}span mass per head/)
    expect(io.out()).toMatch(/done at step 3: .* training tokens\/s on cpu; checkpoint in/)
  })

  const usage: [string, string[], RegExp][] = [
    ['no --out', ['--steps', '1'], /--out DIR is required/],
    ['--query-init with gpt', ['--preset', 'gpt', '--query-init', '0', '--out', 'x'], /--query-init applies to --preset minimal only/],
    ['bad --query-init', ['--query-init', 'abc', '--out', 'x'], /--query-init must be a number >= 0 or 'xavier'/],
    ['--d-model with minimal', ['--d-model', '16', '--out', 'x'], /--d-model does not apply to --preset minimal/],
    ['heads do not divide', ['--preset', 'gpt', '--d-model', '30', '--n-heads', '4', '--out', 'x'], /not divisible by --n-heads 4/],
    ['--warmup without warmup-cosine', ['--warmup', '3', '--out', 'x'], /--warmup applies to --schedule warmup-cosine/],
    ['--momentum with adamw', ['--momentum', '0.5', '--out', 'x'], /--momentum applies to --optimizer sgd/],
    ['train size below batch', ['--train-size', '8', '--out', 'x'], /--train-size 8 is smaller than --batch 16/],
    ['flag of another task', ['--state-size', '4', '--out', 'x'], /--state-size does not apply to --task sparse-markov/],
    ['bad preset', ['--preset', 'bert', '--out', 'x'], /argument 'bert' is invalid/],
    ['bad lr', ['--lr', 'abc', '--out', 'x'], /--lr must be a number/],
  ]
  for (const [name, args, pattern] of usage) {
    it(`stops with one clear line for ${name}`, async () => {
      const io = captureOutput()
      const code = await main(['train', ...TINY, ...args])
      expect(code).toBe(2)
      expect(io.err()).toMatch(pattern)
    })
  }

  it('refuses to change the run when resuming, and a non-checkpoint directory', async () => {
    const dir = join(root(), 'base')
    captureOutput()
    expect(await main(['train', '--preset', 'minimal', ...TINY, '--steps', '2', '--out', dir])).toBe(0)
    vi.restoreAllMocks()
    let io = captureOutput()
    expect(await main(['train', '--resume', dir, '--lr', '0.5', '--steps', '4', '--out', dir])).toBe(2)
    expect(io.err()).toMatch(/--lr cannot change when resuming/)
    vi.restoreAllMocks()
    io = captureOutput()
    expect(await main(['train', '--resume', dir, '--steps', '1', '--out', dir, '--backend', 'cpu'])).toBe(2)
    expect(io.err()).toMatch(/--steps 1 is below the checkpoint's step 2/)
    vi.restoreAllMocks()
    io = captureOutput()
    expect(await main(['train', '--resume', join(root(), 'nothing'), '--steps', '4', '--out', dir])).toBe(2)
    expect(io.err()).toMatch(/INVALID_CHECKPOINT/)
  })
})

import { readFile, readdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput, useTempDir } from '../cli.test-utils.ts'
import { main } from '../program.ts'

const root = useTempDir('attnlab-emergence-')
afterEach(() => {
  vi.restoreAllMocks()
})

// A tiny chain with an exact oracle (8^2 windows) and a fast minimal model.
const TINY = ['--vocab', '8', '--spans', '1,1', '--gen-len', '6', '--tau', '0.3', '--batch', '32', '--validation-size', '64', '--analysis-size', '32', '--eval-every', '3', '--backend', 'cpu']

const lines = async (dir: string): Promise<{ seed: number; step: number; validationLoss: number }[]> =>
  (await readFile(join(dir, 'metrics.jsonl'), 'utf8'))
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l))

describe('attnlab emergence', () => {
  it('writes config, metrics, checkpoint, summary and a self-contained report', async () => {
    const io = captureOutput()
    const out = join(root(), 'run')
    const code = await main(['emergence', ...TINY, '--steps', '9', '--out', out, '--json'])
    expect(io.err()).toBe('')
    expect(code).toBe(0)
    const summary = JSON.parse(io.out())
    expect(summary.out).toBe(out)
    expect(summary.interrupted).toBe(false)
    expect(summary.oracles.lines.map((o: { label: string }) => o.label)).toEqual(['H_0 (no context)', 'H_1 (newest 1 span)', 'H_2 (teacher entropy)', 'truncated teacher, top 1 span'])
    expect(summary.oracles.lines.every((o: { method: string }) => o.method === 'exact')).toBe(true)
    expect(summary.seeds).toHaveLength(1)
    expect(summary.seeds[0].completedSteps).toBe(9)
    const files = (await readdir(out)).sort()
    expect(files).toEqual(['config.json', 'metrics.jsonl', 'report.html', 'seeds', 'summary.json'])
    expect((await readdir(join(out, 'seeds', '0'))).sort()).toEqual(['checkpoint', 'patterns.json'])
    const metrics = await lines(out)
    expect(metrics.map((l) => l.step)).toEqual([0, 3, 6, 9])
    expect(metrics[3]!.validationLoss).toBeLessThan(metrics[0]!.validationLoss)
    const report = await readFile(join(out, 'report.html'), 'utf8')
    expect(report).toContain('<!doctype html>')
    expect(report.match(/<svg/g)?.length).toBeGreaterThanOrEqual(3)
    expect(report).not.toMatch(/<script|https?:\/\/(?!vega\.github\.io|www\.w3\.org)/)
    expect(JSON.parse(await readFile(join(out, 'summary.json'), 'utf8'))).toEqual(summary)
  })

  it('--resume continues exactly where an uninterrupted run would be (cpu)', async () => {
    captureOutput()
    const full = join(root(), 'full')
    expect(await main(['emergence', ...TINY, '--steps', '9', '--out', full, '--json'])).toBe(0)
    const again = join(root(), 'again')
    expect(await main(['emergence', ...TINY, '--steps', '9', '--out', again, '--json'])).toBe(0)
    expect((await lines(again)).map((l) => l.validationLoss)).toEqual((await lines(full)).map((l) => l.validationLoss))
    const part = join(root(), 'part')
    expect(await main(['emergence', ...TINY, '--steps', '3', '--out', part, '--json'])).toBe(0)
    expect(await main(['emergence', '--resume', part, '--steps', '9', '--json'])).toBe(0)
    const a = await lines(full)
    const b = await lines(part)
    expect(b.map((l) => l.step)).toEqual(a.map((l) => l.step))
    expect(b.map((l) => l.validationLoss)).toEqual(a.map((l) => l.validationLoss))
  })

  it('repeats the run over seeds and reports an emergence step per seed', async () => {
    const io = captureOutput()
    const out = join(root(), 'seeds')
    expect(await main(['emergence', ...TINY, '--steps', '6', '--seeds', '2', '--seed', '5', '--out', out, '--json'])).toBe(0)
    const summary = JSON.parse(io.out())
    expect(summary.seeds.map((s: { seed: number }) => s.seed)).toEqual([5, 6])
    expect(summary.emergenceSteps).toHaveLength(2)
    expect(new Set((await lines(out)).map((l) => l.seed))).toEqual(new Set([5, 6]))
  })

  it('runs the linear-map task (loss-based emergence)', async () => {
    const io = captureOutput()
    const out = join(root(), 'linear')
    const code = await main(['emergence', '--task', 'linear-map', '--state-size', '4', '--ones-per-row', '2', '--preset', 'gpt-nano', '--batch', '16', '--validation-size', '32', '--analysis-size', '16', '--eval-every', '2', '--steps', '4', '--backend', 'cpu', '--out', out, '--json'])
    expect(io.err()).toBe('')
    expect(code).toBe(0)
    const summary = JSON.parse(io.out())
    expect(summary.oracles.lines.map((o: { kind: string }) => o.kind)).toEqual(['chance', 'floor'])
    expect(summary.seeds[0].positionEmergence.length).toBeGreaterThan(0)
  })

  it('stops bad flags before any work with one line and exit code 2', async () => {
    const cases: [string[], RegExp][] = [
      [['--task', 'bogus'], /--task/],
      [['--spans', '0,2'], /--spans values must be >= 1/],
      [['--steps', '0'], /--steps must be in/],
      [['--lr', '-1'], /--lr/],
      [['--vocab', '8', '--state-size', '4'], /--state-size does not apply to --task sparse-markov/],
      [['--preset', 'gpt', '--query-init', '0.1'], /--query-init applies to --preset minimal/],
      [['--validation-size', '8', '--analysis-size', '16'], /--analysis-size 16 exceeds --validation-size 8/],
    ]
    for (const [args, pattern] of cases) {
      const io = captureOutput()
      const out = join(root(), `bad-${args.join('')}`)
      expect(await main(['emergence', ...args, '--out', out])).toBe(2)
      expect(io.err() + io.out()).toMatch(pattern)
      await expect(readdir(out)).rejects.toThrow()
      vi.restoreAllMocks()
    }
  })

  it('refuses an unwritable --out, an earlier run without --force, and a bad --resume', async () => {
    const file = join(root(), 'a-file')
    await writeFile(file, 'x')
    let io = captureOutput()
    expect(await main(['emergence', ...TINY, '--steps', '1', '--out', join(file, 'sub')])).toBe(2)
    expect(io.err()).toMatch(/not writable/)
    vi.restoreAllMocks()
    io = captureOutput()
    expect(await main(['emergence', ...TINY, '--steps', '1', '--out', join(root(), 'run')])).toBe(2)
    expect(io.err()).toMatch(/holds an earlier run/)
    vi.restoreAllMocks()
    io = captureOutput()
    expect(await main(['emergence', '--resume', join(root(), 'no-such-run')])).toBe(2)
    expect(io.err()).toMatch(/no config.json/)
    vi.restoreAllMocks()
    io = captureOutput()
    expect(await main(['emergence', '--resume', join(root(), 'run'), '--spans', '2,2'])).toBe(2)
    expect(io.err()).toMatch(/--spans cannot change when resuming/)
  })
})

import { afterEach, describe, expect, it, vi } from 'vitest'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fieldInfo } from '@attnlab/core/schema'
import { dynamicsConfigSchema, simulateOptionsSchema } from '@attnlab/dynamics'
import { runCli, useTempDir } from '../cli.test-utils.ts'
import { buildProgram } from '../program.ts'

const dir = useTempDir('attnlab-dynamics-')
afterEach(() => {
  vi.restoreAllMocks()
})

const reference = [
  'dynamics',
  'simulate',
  '--heads',
  '3',
  '--T',
  '40',
  '--m',
  '1.7',
  '--eps',
  '1e-6',
  '--seed',
  '0',
  '--variant',
  'replicator',
]

describe('attnlab dynamics simulate', () => {
  it("takes each flag's help, default and range from the dynamics and simulate schemas", () => {
    const simulate = buildProgram()
      .commands.find((command) => command.name() === 'dynamics')
      ?.commands.find((command) => command.name() === 'simulate')
    const option = (long: string) => simulate?.options.find((o) => o.long === long)
    for (const [long, field] of [
      ['--heads', dynamicsConfigSchema.shape.nHeads],
      ['--eps', dynamicsConfigSchema.shape.initNoise],
      ['--points', simulateOptionsSchema.shape.points],
    ] as const) {
      const info = fieldInfo(field)
      expect(option(long)?.description, long).toBe(info.help)
      expect(option(long)?.defaultValue, long).toBe(info.defaultValue)
    }
    expect(option('--variant')?.argChoices).toEqual(fieldInfo(dynamicsConfigSchema.shape.variant).choices)
    // The schema's minimum, and the CLI's cap on what only a typo gives.
    expect(() => option('--points')?.parseArg?.('0', undefined)).toThrow(/--points must be in \[1, 1000000\], got 0/)
    expect(() => option('--m')?.parseArg?.('1e300', undefined)).toThrow(/--m must be in \(0, 1000000\]/)
  })

  it('--json prints plateaus, three transitions and the competitive -> cooperative phases', async () => {
    const { code, stdout } = await runCli([...reference, '--t-max', '600', '--points', '300', '--json'])
    expect(code).toBe(0)
    const summary = JSON.parse(stdout) as {
      plateaus: number[]
      transitions: { stage: number; time: number | null; takenSpans: { span: number; head: number }[] }[]
      phases: { phase: string; span: number | null }[]
      stagesReached: number
      finalLoss: number
    }
    expect(summary.plateaus[0]).toBeCloseTo(6.12105, 10)
    expect(summary.plateaus[1]).toBeCloseTo(1.945, 10)
    expect(summary.plateaus[2]).toBeCloseTo(0.5, 10)
    expect(summary.plateaus[3]).toBe(0)
    expect(summary.stagesReached).toBe(3)
    expect(summary.transitions[0]?.time).toBeCloseTo(4.55, 1)
    // Spans are indexed oldest first, as --spans: the newest (span 2) is learned first.
    expect(summary.transitions.map((t) => t.takenSpans.map((s) => s.span))).toEqual([[2], [1], [0]])
    expect(summary.phases.map((p) => p.phase)).toEqual(['initial', 'competitive', 'cooperative'])
    expect(summary.phases[1]?.span).toBe(2)
    expect(summary.finalLoss).toBeLessThan(1e-3)
  })

  it('--spans lists spans oldest first, as train / markov / emergence: the newest is the most important', async () => {
    const { code, stdout } = await runCli([
      ...reference,
      '--heads',
      '2',
      '--T',
      '10',
      '--spans',
      '2,1',
      '--t-max',
      '600',
      '--points',
      '200',
      '--json',
    ])
    expect(code).toBe(0)
    const summary = JSON.parse(stdout) as {
      config: { spans: number[]; spanWeights: number[] }
      plateaus: number[]
      learningOrder: number[]
      transitions: { takenSpans: { span: number }[] }[]
    }
    expect(summary.config.spans).toEqual([2, 1])
    // c_i = m^i: the oldest span (2 tokens) weighs 1, the newest (1 token) 1.7.
    expect(summary.config.spanWeights[0]).toBeCloseTo(1, 12)
    expect(summary.config.spanWeights[1]).toBeCloseTo(1.7, 12)
    expect(summary.plateaus[0]).toBeCloseTo(0.5 * (2 * 1 + 1 * 1.7 ** 2), 10)
    // Strength c^2 |span|: newest 2.89 > oldest 2, so span 1 (newest) is learned first.
    expect(summary.learningOrder).toEqual([1, 0])
    expect(summary.transitions[0]?.takenSpans.map((t) => t.span)).toEqual([1])
  })

  it('the human summary names heads L0H<k> and labels the per-head values as target shares', async () => {
    const { code, stdout } = await runCli([...reference, '--t-max', '600', '--points', '300'])
    expect(code).toBe(0)
    const stage3 = stdout.split('\n').find((l) => l.trim().startsWith('stage 3:')) as string
    expect(stage3).toMatch(/span \d <- L0H\d/)
    expect(stage3).toMatch(/L0H0 span \d share \d\.\d\d/)
    expect(stdout).not.toMatch(/\bh\d:s\d/)
    expect(stdout).toMatch(/share: the fraction of a span's target a head fits/)
    expect(stdout).toMatch(/all heads on span 2\)/)
  })

  it('eps = 0 never leaves the first plateau; the human summary says so', async () => {
    const { code, stdout } = await runCli(['dynamics', 'simulate', '--eps', '0', '--t-max', '300', '--points', '100'])
    expect(code).toBe(0)
    expect(stdout).toMatch(/stage 1: t = 4\.5/)
    expect(stdout).toMatch(/stage 2: not reached/)
    expect(stdout).toMatch(/competitive/)
    expect(stdout).not.toMatch(/cooperative/)
  })

  it('--plot writes an SVG of the loss and the per-head span mass', async () => {
    const file = join(dir(), 'flow.svg')
    const { code, stdout } = await runCli([
      ...reference,
      '--variant',
      'logit',
      '--heads',
      '2',
      '--T',
      '12',
      '--t-max',
      '400',
      '--points',
      '100',
      '--lambda',
      '0.001',
      '--plot',
      file,
      '--json',
    ])
    expect(code).toBe(0)
    expect(JSON.parse(stdout).plot).toBe(file)
    const svg = await readFile(file, 'utf8')
    expect(svg.startsWith('<svg')).toBe(true)
    expect(svg).toContain('L0H1')
    expect(svg).not.toContain('head 1')
    expect(svg).toContain('span 2')
  })

  it.each([
    [['--heads', '0'], /--heads must be in \[1, 64\]/],
    [['--T', 'forty'], /--T must be an integer/],
    [['--T', '2'], /^attnlab: error: --T: expected an integer >= 3 \(the sum of the spans\), got 2$/m],
    [['--spans', '1,0'], /--spans values must be an integer >= 1, got 0/],
    [['--m', '-1'], /--m must be in/],
    [['--eps', 'tiny'], /--eps must be a number/],
    [['--variant', 'squared'], /Allowed choices are replicator, logit/],
    [['--lambda', '-0.1'], /--lambda must be in/],
    [['--fast-value'], /fast-value limit needs weightDecay > 0/],
    [['--t-max', '0'], /--t-max must be in/],
    [['--spacing', 'cubic'], /Allowed choices are log, linear/],
    [['--plot', 'out.png'], /--plot must name an .svg file/],
    [['--plot', '/nonexistent-attnlab-dir/x.svg'], /does not exist/],
  ])('rejects %j with one line and exit code 2, before any work', async (flags, message) => {
    const { code, stdout, stderr } = await runCli([...reference, ...flags])
    expect(code).toBe(2)
    expect(stdout).toBe('')
    expect(stderr).toMatch(message)
    expect(stderr.trim().split('\n')[0]).toMatch(/^attnlab: error/)
  })
})

import { mkdir, readFile, readdir, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput, runCli, TINY_TASK_FLAGS, useTempDir } from '../cli.test-utils.ts'
import { main } from '../program.ts'

const root = useTempDir('attnlab-emergence-')
afterEach(() => {
  vi.restoreAllMocks()
})

// A tiny chain with an exact oracle (8^2 windows) and a fast minimal model.
const TINY = [
  ...TINY_TASK_FLAGS,
  '--batch',
  '32',
  '--validation-size',
  '64',
  '--analysis-size',
  '32',
  '--eval-every',
  '3',
  '--backend',
  'cpu',
]

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
    expect(summary.oracles.lines.map((o: { label: string }) => o.label)).toEqual([
      'H_0 (no context)',
      'H_1 (newest 1 span)',
      'H_2 (teacher entropy)',
      'truncated teacher, top 1 span',
    ])
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
    // Every run-defining flag repeated with the run's value (--eval-every 3 among them) is no change.
    expect(await main(['emergence', ...TINY, '--resume', part, '--steps', '9', '--json'])).toBe(0)
    const a = await lines(full)
    const b = await lines(part)
    expect(b.map((l) => l.step)).toEqual(a.map((l) => l.step))
    expect(b.map((l) => l.validationLoss)).toEqual(a.map((l) => l.validationLoss))
  })

  it('--resume says from which step each seed continues', async () => {
    const io = captureOutput()
    const part = join(root(), 'part-seeds')
    expect(await main(['emergence', ...TINY, '--seeds', '2', '--steps', '3', '--out', part, '--json'])).toBe(0)
    expect(await main(['emergence', '--resume', part, '--steps', '6'])).toBe(0)
    const said = io
      .err()
      .split('\n')
      .filter((l) => l.startsWith('seed ') && l.includes('continuing'))
    expect(said).toEqual([
      'seed 0: continuing from step 3 of 6 (its checkpoint)',
      'seed 1: continuing from step 3 of 6 (its checkpoint)',
    ])
  })

  it('repeats the run over seeds and reports an emergence step per seed', async () => {
    const io = captureOutput()
    const out = join(root(), 'seeds')
    expect(
      await main(['emergence', ...TINY, '--steps', '6', '--seeds', '2', '--seed', '5', '--out', out, '--json']),
    ).toBe(0)
    const summary = JSON.parse(io.out())
    expect(summary.seeds.map((s: { seed: number }) => s.seed)).toEqual([5, 6])
    expect(summary.emergenceSteps).toHaveLength(2)
    expect(new Set((await lines(out)).map((l) => l.seed))).toEqual(new Set([5, 6]))
  })

  it('runs the linear-map task (loss-based emergence)', async () => {
    const io = captureOutput()
    const out = join(root(), 'linear')
    const code = await main([
      'emergence',
      '--task',
      'linear-map',
      '--state-size',
      '4',
      '--ones-per-row',
      '2',
      '--preset',
      'gpt-nano',
      '--batch',
      '16',
      '--validation-size',
      '32',
      '--analysis-size',
      '16',
      '--eval-every',
      '2',
      '--steps',
      '4',
      '--backend',
      'cpu',
      '--out',
      out,
      '--json',
    ])
    expect(io.err()).toBe('')
    expect(code).toBe(0)
    const summary = JSON.parse(io.out())
    expect(summary.oracles.lines.map((o: { kind: string }) => o.kind)).toEqual(['chance', 'floor'])
    expect(summary.seeds[0].positionEmergence.length).toBeGreaterThan(0)
  })

  it('--preset mixer: a model without attention runs, and the report and summary say what it lacks', async () => {
    const io = captureOutput()
    const out = join(root(), 'mixer')
    const flags = ['--task', 'linear-map', '--state-size', '4', '--ones-per-row', '1', '--preset', 'mixer']
    const sizes = ['--n-layers', '1', '--d-model', '8', '--n-heads', '2', '--batch', '16', '--validation-size', '32']
    const code = await main([
      'emergence',
      ...flags,
      ...sizes,
      '--analysis-size',
      '16',
      '--eval-every',
      '2',
      '--steps',
      '4',
      '--backend',
      'cpu',
      '--out',
      out,
      '--json',
    ])
    expect(io.err()).toBe('')
    expect(code).toBe(0)
    const summary = JSON.parse(io.out())
    expect(summary.preset).toBe('mixer')
    expect(summary.definitions.positionEmergence).toMatch(/midway from plateau to final value/)
    expect(summary.seeds[0].positionEmergence).toHaveLength(7)
    expect(summary.seeds[0].entropyDrops).toEqual([])
    const config = JSON.parse(await readFile(join(out, 'config.json'), 'utf8'))
    expect(config.model).toMatchObject({ architecture: 'mixer', nHeads: 2, dHead: 4, dModel: 8 })
    expect(await readFile(join(out, 'report.html'), 'utf8')).toContain('This model has no attention')
  })

  it('linear-map progress lines show the validation loss once and the positions learned', async () => {
    const io = captureOutput()
    const out = join(root(), 'linear-text')
    const code = await main([
      'emergence',
      '--task',
      'linear-map',
      '--state-size',
      '4',
      '--ones-per-row',
      '2',
      '--preset',
      'gpt-nano',
      '--batch',
      '16',
      '--validation-size',
      '32',
      '--analysis-size',
      '16',
      '--eval-every',
      '2',
      '--steps',
      '4',
      '--backend',
      'cpu',
      '--out',
      out,
    ])
    expect(code).toBe(0)
    const progress = io
      .err()
      .split('\n')
      .filter((l) => l.startsWith('step '))
    expect(progress.map((l) => l.split(' ')[1])).toEqual(['0/4', '2/4', '4/4'])
    for (const l of progress) {
      expect(l.match(/\bval\b/g)).toHaveLength(1)
      expect(l).toMatch(/positions \d+\/\d+/)
    }
  })

  it('stops bad flags before any work with one line and exit code 2', async () => {
    const cases: [string[], RegExp][] = [
      [['--task', 'bogus'], /--task/],
      [['--spans', '0,2'], /--spans values must be an integer in \[1, 64\], got 0/],
      [['--steps', '0'], /--steps must be >= 1, got 0/],
      [['--lr', '-1'], /--lr/],
      [['--vocab', '8', '--state-size', '4'], /--state-size does not apply to --task sparse-markov/],
      [['--preset', 'gpt', '--query-init', '0.1'], /--query-init applies to --preset minimal/],
      [['--validation-size', '8', '--analysis-size', '16'], /--analysis-size 16 exceeds --validation-size 8/],
      [['--validation-size', '3'], /--validation-size 3 is below --analysis-size 256 \(its default;.* at most 3 too/],
      // A model too large is refused before the oracles are computed.
      [['--n-heads', '1000000'], /--n-heads must be in \[1, 65536\], got 1000000/],
      [
        ['--n-heads', '60000'],
        /Invalid nHeads: the model is too large: attn\.W_Q \[nHeads 60000 x dModel 75 x dHead 75\]/,
      ],
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
    vi.restoreAllMocks()
    // The evaluation grid is the stage detection's: a different --eval-every is refused, naming the run's.
    io = captureOutput()
    expect(await main(['emergence', '--resume', join(root(), 'run'), '--eval-every', '5', '--vocab', '8'])).toBe(2)
    expect(io.err()).toMatch(/--eval-every cannot change when resuming \(the run has --eval-every 3;/)
  })

  it(
    'validates everything before creating --out: an ' + 'unavailable backend, a too large batch, then reruns fine',
    async () => {
      const out = join(root(), 'nested', 'bk1')
      const cases: [string[], RegExp][] = [
        [['--backend', 'webgl'], /BACKEND_UNAVAILABLE/],
        [['--batch', '99999999999'], /--batch 99999999999 is above the 16777216 sequences/],
        [['--validation-size', '99999999999'], /--validation-size 99999999999 is above/],
      ]
      for (const [args, pattern] of cases) {
        const io = captureOutput()
        expect(await main(['emergence', ...TINY, '--steps', '3', ...args, '--out', out])).toBe(2)
        expect(io.err()).toMatch(pattern)
        expect(io.err()).not.toMatch(/oracle lines/)
        await expect(readdir(join(root(), 'nested'))).rejects.toThrow()
        vi.restoreAllMocks()
      }
      captureOutput()
      expect(await main(['emergence', ...TINY, '--steps', '3', '--out', out, '--json'])).toBe(0)
      expect((await lines(out)).map((l) => l.step)).toEqual([0, 3])
    },
  )

  it('--resume checks every checkpoint before any work and changes nothing when one is corrupt', async () => {
    const out = join(root(), 'corrupt')
    captureOutput()
    expect(await main(['emergence', ...TINY, '--steps', '3', '--out', out, '--json'])).toBe(0)
    vi.restoreAllMocks()
    const weights = join(out, 'seeds', '0', 'checkpoint', 'model.safetensors')
    const bytes = await readFile(weights)
    await writeFile(weights, bytes.subarray(0, bytes.byteLength - 8))
    const metrics = await readFile(join(out, 'metrics.jsonl'), 'utf8')
    const config = await readFile(join(out, 'config.json'), 'utf8')
    let io = captureOutput()
    expect(await main(['emergence', '--resume', out, '--steps', '9'])).toBe(2)
    expect(io.err()).toMatch(
      /INVALID_CHECKPOINT.*the checkpoint of seed 0 .* cannot be used: checkpoint model.safetensors: has \d+ bytes/,
    )
    expect(io.err()).not.toMatch(/oracle lines/)
    expect(await readFile(join(out, 'metrics.jsonl'), 'utf8')).toBe(metrics)
    expect(await readFile(join(out, 'config.json'), 'utf8')).toBe(config)
    vi.restoreAllMocks()
    await writeFile(weights, bytes)
    io = captureOutput()
    expect(await main(['emergence', '--resume', out, '--steps', '2'])).toBe(2)
    expect(io.err()).toMatch(/--steps 2 is below the step 3 of seed 0's checkpoint/)
  })

  it('stops cleanly on SIGTERM like on Ctrl-C, and a resume removes temporaries a killed run left', async () => {
    const out = join(root(), 'emt')
    const errors: string[] = []
    vi.spyOn(console, 'log').mockImplementation(() => {})
    vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => {
      const line = args.join(' ')
      errors.push(line)
      if (line.startsWith('step 3/')) process.emit('SIGTERM')
    })
    expect(await main(['emergence', ...TINY, '--steps', '60', '--out', out])).toBe(143)
    expect(errors.join('\n')).toMatch(/interrupted: finishing the current step and saving/)
    expect(errors.at(-1)).toMatch(
      /INTERRUPTED\]: interrupted \(checkpoint at step 3\); .*continue with: pnpm attnlab emergence --resume .*emt\)$/,
    )
    expect(process.listenerCount('SIGTERM')).toBe(0)
    expect(await readdir(join(out, 'seeds', '0'))).toEqual(expect.arrayContaining(['checkpoint', 'patterns.json']))
    expect((await readdir(join(out, 'seeds', '0'))).filter((name) => name.includes('.tmp-'))).toEqual([])
    expect((await loadCheckpoint(join(out, 'seeds', '0', 'checkpoint'))).trainerState!.step).toBe(3)
    // The checkpoint directory has an ordinary directory's permissions (not mkdtemp's 0700).
    expect((await stat(join(out, 'seeds', '0', 'checkpoint'))).mode & 0o777).toBe(
      (await stat(join(out, 'seeds'))).mode & 0o777,
    )
    vi.restoreAllMocks()
    // What a run killed (SIGKILL) in the middle of a checkpoint write leaves.
    const stale = join(out, 'seeds', '0', '.checkpoint.tmp-dead01')
    await mkdir(stale)
    await writeFile(join(stale, 'model.safetensors'), 'half')
    captureOutput()
    expect(await main(['emergence', '--resume', out, '--steps', '6', '--json'])).toBe(0)
    expect((await lines(out)).map((l) => l.step)).toEqual([0, 3, 6])
    expect((await readdir(join(out, 'seeds', '0'))).sort()).toEqual(['checkpoint', 'patterns.json'])
  })

  it('an interruption before the training starts leaves nothing behind', async () => {
    const out = join(root(), 'early')
    const io = captureOutput()
    vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => {
      io.errors.push(args.join(' '))
      if (args.join(' ').startsWith('oracle lines')) process.emit('SIGHUP')
    })
    expect(await main(['emergence', ...TINY, '--steps', '60', '--out', out])).toBe(129)
    expect(io.err()).toMatch(/interrupted before the training started; nothing was written/)
    await expect(readdir(out)).rejects.toThrow()
  })

  it('records the task in the checkpoints, so knockout finds span capabilities on them', async () => {
    const out = join(root(), 'for-knockout')
    captureOutput()
    expect(await main(['emergence', ...TINY, '--steps', '3', '--out', out, '--json'])).toBe(0)
    const checkpoint = join(out, 'seeds', '0', 'checkpoint')
    expect((await loadCheckpoint(checkpoint)).extra).toMatchObject({
      command: 'emergence',
      seed: 0,
      task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1] },
    })
    const { code, stdout, stderr } = await runCli([
      'knockout',
      'locate',
      '--capability',
      'span-0',
      '--model',
      checkpoint,
      '--method',
      'exhaustive',
      '--top',
      '1',
      '--count',
      '16',
      '--controls',
      'span-1',
      '--backend',
      'cpu',
      '--json',
    ])
    expect(stderr).toBe('')
    expect(code).toBe(0)
    const result = JSON.parse(stdout) as {
      top: { head: string; score: number }[]
      ranking: { head: string; score: number | null }[]
      effects: { rows: { capability: string }[] }
    }
    // Every head of the checkpoint is scored on span 0; after 3 steps none need hurt it, so top
    // (heads whose knockout hurts) holds at most the one asked for.
    expect(result.ranking.map((h) => h.head).sort()).toEqual(['L0H0', 'L0H1', 'L0H2'])
    for (const h of result.ranking) expect(Number.isFinite(h.score)).toBe(true)
    expect(result.top.length).toBeLessThanOrEqual(1)
    for (const h of result.top) expect(h.score).toBeGreaterThan(0)
    expect(result.effects.rows.map((r) => r.capability)).toEqual(['span-0', 'span-1'])
  })
})

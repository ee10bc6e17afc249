import { mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput, TINY_TASK_FLAGS, useTempDir } from '../cli.test-utils.ts'
import { main } from '../program.ts'

const root = useTempDir('attnlab-train-')
afterEach(() => {
  vi.restoreAllMocks()
})

const TINY = [
  '--task',
  'sparse-markov',
  ...TINY_TASK_FLAGS,
  '--batch',
  '16',
  '--validation-size',
  '32',
  '--eval-every',
  '3',
  '--backend',
  'cpu',
]

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
    expect(
      await main([
        'train',
        '--resume',
        part,
        '--steps',
        '8',
        '--out',
        part,
        '--eval-every',
        '3',
        '--backend',
        'cpu',
        '--json',
      ]),
    ).toBe(0)
    const resumed = JSON.parse(io2.out())
    expect(resumed.steps).toBe(8)
    expect(resumed.finalValidationLoss).toBe(fullSummary.finalValidationLoss)
    const a = await loadCheckpoint(full)
    const b = await loadCheckpoint(part)
    for (const [name, w] of a.weights) expect(b.weights.get(name)!.data, name).toEqual(w.data)
  })

  it('--attn-only (or --d-mlp 0) trains an attention-only gpt, gpt-nano and llama', async () => {
    const cases: [string, string[]][] = [
      ['gpt', ['--attn-only']],
      ['gpt-nano', ['--attn-only']],
      ['llama', ['--attn-only', '--n-layers', '1']],
      ['gpt-nano', ['--d-mlp', '0']],
    ]
    for (const [preset, flags] of cases) {
      const io = captureOutput()
      const out = join(root(), `attn-only-${preset}-${flags[0]}`)
      const code = await main(['train', '--preset', preset, ...flags, ...TINY, '--steps', '1', '--out', out, '--json'])
      expect(io.err(), `${preset} ${flags.join(' ')}`).toBe('')
      expect(code).toBe(0)
      expect(JSON.parse(io.out()).config).toMatchObject({ attnOnly: true, dMlp: 0, gatedMlp: false })
      expect((await loadCheckpoint(out)).config.dMlp).toBe(0)
      vi.restoreAllMocks()
    }
    const io = captureOutput()
    expect(
      await main([
        'train',
        '--preset',
        'gpt',
        '--attn-only',
        '--d-mlp',
        '64',
        ...TINY,
        '--out',
        join(root(), 'contra'),
      ]),
    ).toBe(2)
    expect(io.err()).toMatch(/--d-mlp 64 contradicts --attn-only/)
  })

  it('prints a human-readable progress line per evaluation', async () => {
    const io = captureOutput()
    expect(await main(['train', '--preset', 'gpt-nano', ...TINY, '--steps', '3', '--out', join(root(), 'human')])).toBe(
      0,
    )
    expect(io.out()).toMatch(/step 3\/3 {2}train \d\.\d{4} {2}val \d\.\d{4} nats {2}span mass per head/)
    expect(io.out()).toMatch(/done at step 3: .* training tokens\/s on cpu; checkpoint in/)
  })

  const usage: [string, string[], RegExp][] = [
    ['no --out', ['--steps', '1'], /--out DIR is required/],
    [
      '--query-init with gpt',
      ['--preset', 'gpt', '--query-init', '0', '--out', 'x'],
      /--query-init applies to --preset minimal only/,
    ],
    [
      'bad --query-init',
      ['--query-init', 'abc', '--out', 'x'],
      /--query-init must be a number >= 0 \(at most 100\) or 'xavier', got 'abc'/,
    ],
    ['--d-model with minimal', ['--d-model', '16', '--out', 'x'], /--d-model does not apply to --preset minimal/],
    [
      'heads do not divide',
      ['--preset', 'gpt', '--d-model', '30', '--n-heads', '4', '--out', 'x'],
      /not divisible by --n-heads 4/,
    ],
    ['--warmup without warmup-cosine', ['--warmup', '3', '--out', 'x'], /--warmup applies to --schedule warmup-cosine/],
    ['--momentum with adamw', ['--momentum', '0.5', '--out', 'x'], /--momentum applies to --optimizer sgd/],
    ['train size below batch', ['--train-size', '8', '--out', 'x'], /--train-size 8 is smaller than --batch 16/],
    [
      'flag of another task',
      ['--state-size', '4', '--out', 'x'],
      /--state-size does not apply to --task sparse-markov/,
    ],
    ['bad preset', ['--preset', 'bert', '--out', 'x'], /argument 'bert' is invalid/],
    ['bad lr', ['--lr', 'abc', '--out', 'x'], /--lr must be a number/],
    [
      'a batch above the sampling limit',
      ['--batch', '99999999999', '--out', 'x'],
      /--batch 99999999999 is above the 16777216 sequences/,
    ],
    ['--n-heads above its maximum', ['--n-heads', '100000', '--out', 'x'], /--n-heads must be in \[1, 65536\]/],
    [
      'a model too large for one typed array',
      ['--preset', 'gpt', '--d-model', '65536', '--n-heads', '1', '--out', 'x'],
      /Invalid dModel: the model is too large: attn\.W_Q \[nHeads 1 x dModel 65536 x dHead 65536\] has 4\.29e\+9/,
    ],
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

  it(
    "--resume without --steps / --eval-every continues to the run's own, accepts unchanged flags, refuses a " +
      'finished run',
    async () => {
      const dir = join(root(), 'own-steps')
      const errors: string[] = []
      vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void errors.push(args.join(' ')))
      vi.spyOn(console, 'log').mockImplementation((line: unknown) => {
        if (String(line).startsWith('step 4/')) process.emit('SIGTERM')
      })
      const run = ['train', ...TINY.filter((a, i, all) => a !== '--eval-every' && all[i - 1] !== '--eval-every')]
      expect(await main([...run, '--eval-every', '2', '--steps', '9', '--out', dir])).toBe(143)
      expect(errors.join('\n')).toMatch(/interrupted at step 4 of 9/)
      vi.restoreAllMocks()
      let io = captureOutput()
      // --batch 16 and --preset minimal repeat the run's values: not a change.
      expect(
        await main(['train', '--resume', dir, '--batch', '16', '--preset', 'minimal', '--backend', 'cpu', '--json']),
      ).toBe(0)
      const summary = JSON.parse(io.out())
      expect(summary.steps).toBe(9)
      expect(summary.evaluations.map((e: { step: number }) => e.step)).toEqual([2, 4, 6, 8, 9])
      expect((await loadCheckpoint(dir)).trainerState!.step).toBe(9)
      vi.restoreAllMocks()
      io = captureOutput()
      expect(await main(['train', '--resume', dir, '--batch', '32', '--backend', 'cpu'])).toBe(2)
      expect(io.err()).toMatch(/--batch cannot change when resuming \(the run has --batch 16; /)
      vi.restoreAllMocks()
      io = captureOutput()
      expect(await main(['train', '--resume', dir, '--backend', 'cpu', '--json'])).toBe(2)
      expect(io.err()).toMatch(/the run already finished \(its checkpoint is at step 9 of 9\); give --steps N above 9/)
      expect(io.out()).toBe('')
      vi.restoreAllMocks()
      io = captureOutput()
      expect(await main(['train', '--resume', dir, '--steps', '11', '--backend', 'cpu', '--json'])).toBe(0)
      expect(JSON.parse(io.out()).evaluations.map((e: { step: number }) => e.step)).toEqual([2, 4, 6, 8, 9, 10, 11])
    },
  )

  it(
    '--resume finishes a save killed between its renames ' + 'from the complete copy, and names one it cannot verify',
    async () => {
      const dir = join(root(), 'crashed')
      captureOutput()
      expect(await main(['train', ...TINY, '--steps', '2', '--out', dir])).toBe(0)
      // What a save killed after moving the old checkpoint aside leaves: only temporaries.
      await rename(dir, join(root(), '.crashed.tmp-k1.done'))
      await mkdir(join(root(), '.crashed.tmp-k1.old'))
      vi.restoreAllMocks()
      let io = captureOutput()
      expect(await main(['train', '--resume', dir, '--steps', '4', '--backend', 'cpu', '--json'])).toBe(0)
      expect(JSON.parse(io.out()).steps).toBe(4)
      expect((await readdir(root())).filter((name) => name.startsWith('.crashed.'))).toEqual([])
      // A copy that may be half-written is not used, but pointed at.
      await rename(dir, join(root(), '.crashed.tmp-k2'))
      vi.restoreAllMocks()
      io = captureOutput()
      expect(await main(['train', '--resume', dir, '--steps', '6', '--backend', 'cpu'])).toBe(2)
      expect(io.err()).toMatch(
        /crashed' does not exist; an interrupted save left '.*\.crashed\.tmp-k2', not verifiably complete/,
      )
      expect((await readdir(join(root(), '.crashed.tmp-k2'))).sort()).toContain('manifest.json')
      await rm(join(root(), '.crashed.tmp-k2'), { recursive: true })
    },
  )

  it('never deletes what is in --out without --force: user files, a plain file, an earlier checkpoint', async () => {
    const user = join(root(), 'userdir')
    await mkdir(join(user, 'sub'), { recursive: true })
    await writeFile(join(user, 'notes.txt'), 'mine')
    const file = join(root(), 'plain-file')
    await writeFile(file, 'also mine')
    const checkpoint = join(root(), 'earlier')
    captureOutput()
    expect(await main(['train', ...TINY, '--steps', '2', '--out', checkpoint])).toBe(0)
    const before = await readFile(join(checkpoint, 'model.safetensors'))
    vi.restoreAllMocks()
    const cases: [string, RegExp][] = [
      [user, /--out .*userdir is not empty; pick another directory, or pass --force/],
      [file, /--out .*plain-file is a file; pick another path, or pass --force/],
      [
        checkpoint,
        new RegExp(
          /--out .*earlier holds a checkpoint; continue it with --resume .*earlier, pick another --out, or /.source +
            /replace it with --force/.source,
        ),
      ],
    ]
    for (const [out, pattern] of cases) {
      const io = captureOutput()
      expect(await main(['train', ...TINY, '--steps', '3', '--out', out])).toBe(2)
      expect(io.err()).toMatch(pattern)
      expect(io.err().trim().split('\n')).toHaveLength(1)
      vi.restoreAllMocks()
    }
    expect((await readdir(user)).sort()).toEqual(['notes.txt', 'sub'])
    expect(await readFile(file, 'utf8')).toBe('also mine')
    expect(await readFile(join(checkpoint, 'model.safetensors'))).toEqual(before)
    // An empty directory is fine.
    const empty = join(root(), 'empty')
    await mkdir(empty)
    captureOutput()
    expect(await main(['train', ...TINY, '--steps', '1', '--out', empty])).toBe(0)
    expect((await loadCheckpoint(empty)).trainerState!.step).toBe(1)
  })

  it('--force replaces a directory, a file or a checkpoint atomically with the new checkpoint', async () => {
    const user = join(root(), 'forced-dir')
    await mkdir(join(user, 'sub'), { recursive: true })
    await writeFile(join(user, 'notes.txt'), 'mine')
    const file = join(root(), 'forced-file')
    await writeFile(file, 'x')
    const checkpoint = join(root(), 'forced-checkpoint')
    captureOutput()
    expect(await main(['train', ...TINY, '--steps', '2', '--out', checkpoint])).toBe(0)
    for (const out of [user, file, checkpoint]) {
      expect(await main(['train', ...TINY, '--steps', '3', '--out', out, '--force'])).toBe(0)
      expect((await loadCheckpoint(out)).trainerState!.step).toBe(3)
      expect((await readdir(out)).sort()).toEqual([
        'config.json',
        'manifest.json',
        'model.safetensors',
        'optimizer.safetensors',
        'trainer.json',
      ])
    }
    expect((await readdir(root())).filter((name) => name.includes('.tmp-'))).toEqual([])
  })

  it('--resume DIR without --out continues in place; another non-empty --out needs --force', async () => {
    const dir = join(root(), 'in-place')
    captureOutput()
    expect(await main(['train', ...TINY, '--steps', '2', '--out', dir])).toBe(0)
    vi.restoreAllMocks()
    let io = captureOutput()
    expect(await main(['train', '--resume', dir, '--steps', '4', '--backend', 'cpu', '--json'])).toBe(0)
    expect(JSON.parse(io.out())).toMatchObject({ out: dir, steps: 4 })
    expect((await loadCheckpoint(dir)).trainerState!.step).toBe(4)
    vi.restoreAllMocks()
    const other = join(root(), 'other')
    await mkdir(other)
    await writeFile(join(other, 'keep.txt'), 'k')
    io = captureOutput()
    expect(await main(['train', '--resume', dir, '--steps', '5', '--out', other, '--backend', 'cpu'])).toBe(2)
    expect(io.err()).toMatch(/--out .*other is not empty/)
    expect(await readdir(other)).toEqual(['keep.txt'])
    expect((await loadCheckpoint(dir)).trainerState!.step).toBe(4)
  })

  it('stops cleanly on SIGTERM like on Ctrl-C, and removes temporaries a killed run left next to --out', async () => {
    const out = join(root(), 'trt')
    // What a run killed mid-write (SIGKILL) leaves next to its checkpoint.
    await mkdir(join(root(), '.trt.tmp-dead01'))
    await writeFile(join(root(), '.trt.tmp-dead01', 'model.safetensors'), 'half')
    const errors: string[] = []
    vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void errors.push(args.join(' ')))
    vi.spyOn(console, 'log').mockImplementation((line: unknown) => {
      if (String(line).startsWith('step 3/')) process.emit('SIGTERM')
    })
    expect(await main(['train', ...TINY, '--steps', '60', '--out', out])).toBe(143)
    expect(errors.join('\n')).toMatch(
      /INTERRUPTED.*interrupted at step 3 of 60; the checkpoint in .*trt holds it: continue with --resume .*trt$/,
    )
    expect(process.listenerCount('SIGTERM')).toBe(0)
    expect(process.listenerCount('SIGHUP')).toBe(0)
    expect((await loadCheckpoint(out)).trainerState!.step).toBe(3)
    expect((await readdir(root())).filter((name) => name.startsWith('.trt.'))).toEqual([])
    // The checkpoint directory has an ordinary directory's permissions (not mkdtemp's 0700).
    const plain = join(root(), 'plain-mode')
    await mkdir(plain)
    expect((await stat(out)).mode & 0o777).toBe((await stat(plain)).mode & 0o777)
    vi.restoreAllMocks()
    captureOutput()
    expect(await main(['train', '--resume', out, '--steps', '6', '--backend', 'cpu'])).toBe(0)
    expect((await loadCheckpoint(out)).trainerState!.step).toBe(6)
  })
})

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { safetensorsToInt32 } from '@attnlab/core'
import { readSafetensorsFile } from '@attnlab/core/node'
import { createTask, restrictedContextEntropy, SparseMarkovTask } from '@attnlab/markov'
import { captureOutput, useTempDir } from '../cli.test-utils.ts'
import { main } from '../program.ts'
import { samplingRng } from './markov.ts'

const dir = useTempDir('attnlab-markov-')
let logs: string[]
let errors: string[]

beforeEach(() => {
  ;({ logs, errors } = captureOutput())
})
afterEach(() => {
  vi.restoreAllMocks()
})

const CHAIN = [
  '--task',
  'sparse-markov',
  '--vocab',
  '4',
  '--spans',
  '1,1,1',
  '--m',
  '1.7',
  '--tau',
  '0.1',
  '--seed',
  '0',
]

describe('attnlab markov sample', () => {
  it('writes tokens int32 and loss_mask uint8 [N, length] with the task in the metadata', async () => {
    const out = join(dir(), 'data.safetensors')
    expect(await main(['markov', 'sample', ...CHAIN, '--sequences', '500', '--out', out])).toBe(0)
    expect(logs.join('\n')).toMatch(/wrote 500 sequences x 23 tokens/)
    const file = await readSafetensorsFile(out)
    const tokens = file.tensors.get('tokens')
    const mask = file.tensors.get('loss_mask')
    expect(tokens?.dtype).toBe('I32')
    expect(tokens?.shape).toEqual([500, 23])
    expect(mask?.dtype).toBe('U8')
    expect(mask?.shape).toEqual([500, 23])
    expect(file.metadata.format).toBe('attnlab-markov-dataset/1')
    const description = JSON.parse(file.metadata.task as string) as Record<string, unknown>
    expect(description).toMatchObject({
      kind: 'sparse-markov',
      vocabSize: 4,
      spans: [1, 1, 1],
      m: 1.7,
      tau: 0.1,
      teacherSeed: 0,
    })
    // The metadata alone reproduces the file: same task, same sampling stream.
    const again = createTask(description).sample(500, samplingRng(0))
    expect(Array.from(safetensorsToInt32(tokens!, [500, 23]))).toEqual(Array.from(again.tokens))
    expect(Array.from(mask!.bytes)).toEqual(Array.from(again.lossMask))
  })

  it('samples every task kind', async () => {
    for (const args of [
      ['--task', 'linear-map', '--state-size', '6', '--ones-per-row', '2', '--bos'],
      ['--task', 'cellular-automaton', '--cells', '5', '--rules', '30,90', '--states', '3', '--no-score-initial'],
      ['--task', 'icl-markov', '--vocab', '3', '--order', '2', '--length', '12', '--alpha', '0.5'],
    ]) {
      const out = join(dir(), `${args[1]}.safetensors`)
      expect(await main(['markov', 'sample', ...args, '--sequences', '7', '--out', out, '--json'])).toBe(0)
      const summary = JSON.parse(logs.pop() as string) as { sequences: number; task: { kind: string } }
      expect(summary.sequences).toBe(7)
      expect(summary.task.kind).toBe(args[1])
      const file = await readSafetensorsFile(out)
      expect(file.tensors.get('tokens')?.shape[0]).toBe(7)
    }
  })
  it('--question-first: niah, vt, multihop state the question before the context too; cwe refuses it', async () => {
    const out = join(dir(), 'niah.safetensors')
    const niah = ['--task', 'niah-tokens', '--n-ctx', '40', '--needles', '2', '--key-tokens', '20', '--question-first']
    expect(await main(['markov', 'sample', ...niah, '--sequences', '3', '--out', out, '--json'])).toBe(0)
    const summary = JSON.parse(logs.pop() as string) as { task: Record<string, unknown> }
    expect(summary.task).toMatchObject({ kind: 'niah-tokens', nCtx: 40, needles: 2, questionFirst: true })
    const tokens = (await readSafetensorsFile(out)).tensors.get('tokens')
    expect(safetensorsToInt32(tokens!, [3, 41])[0]).toBe(1) // the query marker opens the sequence
    const vt = join(dir(), 'vt.safetensors')
    expect(await main(['markov', 'sample', '--task', 'vt-tokens', '--question-first', '--out', vt, '--json'])).toBe(0)
    expect((JSON.parse(logs.pop() as string) as { task: Record<string, unknown> }).task.questionFirst).toBe(true)
    const cwe = ['--task', 'cwe-tokens', '--question-first', '--out', join(dir(), 'cwe.safetensors')]
    expect(await main(['markov', 'sample', ...cwe])).toBe(2)
    expect(errors.join('')).toMatch(/--question-first does not apply to --task cwe-tokens \(it is a niah-tokens \//)
  })

  it(
    '--out naming an existing directory or a file in a ' + 'missing one is a usage error (exit 2) before sampling',
    async () => {
      expect(await main(['markov', 'sample', ...CHAIN, '--out', dir()])).toBe(2)
      expect(errors.join('')).toContain(`--out: '${dir()}' is a directory; name the file to write inside it`)
      expect(errors.join('')).not.toMatch(/EISDIR|rename/)
      errors.length = 0
      expect(await main(['markov', 'sample', ...CHAIN, '--out', join(dir(), 'absent', 'x.safetensors')])).toBe(2)
      expect(errors.join('')).toMatch(/--out: directory '.*absent' does not exist/)
      expect(logs).toEqual([])
    },
  )
})

describe('attnlab markov oracle', () => {
  it('prints the exact restricted-context entropies H_0..H_C in nats (--json)', async () => {
    expect(await main(['markov', 'oracle', ...CHAIN, '--json'])).toBe(0)
    const result = JSON.parse(logs.join('\n')) as {
      method: string
      restrictedContextEntropy: number[]
      teacherEntropy: number
      task: Record<string, unknown>
    }
    expect(result.method).toBe('exact')
    const expected = restrictedContextEntropy(
      new SparseMarkovTask({ vocabSize: 4, spans: [1, 1, 1], m: 1.7, tau: 0.1, teacherSeed: 0 }),
    )
    expect(result.restrictedContextEntropy).toEqual(expected.pooled)
    expect(result.teacherEntropy).toBe(expected.teacherEntropy)
    // Same --seed, same teacher as `markov sample`.
    expect(result.task).toEqual(
      createTask({ kind: 'sparse-markov', vocabSize: 4, spans: [1, 1, 1], teacherSeed: 0 }).describe(),
    )
    logs.length = 0
    expect(await main(['markov', 'oracle', ...CHAIN.slice(0, -1), '1', '--json'])).toBe(0)
    expect(
      (JSON.parse(logs.join('\n')) as { restrictedContextEntropy: number[] }).restrictedContextEntropy,
    ).not.toEqual(expected.pooled)
  })

  it('says which length it estimates by posterior sampling, off a terminal, and nothing with --json', async () => {
    const args = ['markov', 'oracle', '--contexts', '10', '--sweeps', '4', '--mc-sequences', '200']
    expect(await main(args)).toBe(0)
    const said = errors.join('\n')
    expect(said).toMatch(/estimating H_2 by posterior sampling \(0\/40 contexts\)/)
    expect(said).toMatch(/estimating H_5 by posterior sampling \(30\/40 contexts\)/)
    errors.length = 0
    expect(await main([...args, '--json'])).toBe(0)
    expect(errors.join('\n')).not.toMatch(/posterior sampling/)
  })

  it('falls back to Monte Carlo with standard errors beyond the exact limit', async () => {
    const args = [
      'markov',
      'oracle',
      '--vocab',
      '5',
      '--spans',
      '1,1',
      '--tau',
      '0.5',
      '--max-states',
      '10',
      '--mc-sequences',
      '2000',
      '--json',
    ]
    expect(await main(args)).toBe(0)
    const result = JSON.parse(logs.join('\n')) as {
      method: string
      restrictedContextEntropy: number[]
      restrictedContextEntropyStandardError: number[]
    }
    expect(result.method).toBe('monte-carlo')
    const exact = restrictedContextEntropy(new SparseMarkovTask({ vocabSize: 5, spans: [1, 1], tau: 0.5 })).pooled
    result.restrictedContextEntropy.forEach((h, n) => {
      expect(Math.abs(h - (exact[n] as number))).toBeLessThan(
        4 * (result.restrictedContextEntropyStandardError[n] as number) + 2e-3,
      )
    })
    logs.length = 0
    expect(
      await main([
        'markov',
        'oracle',
        '--vocab',
        '5',
        '--spans',
        '1,1',
        '--max-states',
        '10',
        '--mc-sequences',
        '2000',
      ]),
    ).toBe(0)
    expect(errors.join('')).toMatch(/estimating by Monte Carlo/)
    expect(logs.join('\n')).toMatch(/H_2 = [\d.]+ \+- [\d.]+/)
  })

  it('prints the loss floor of the emergence tasks', async () => {
    expect(await main(['markov', 'oracle', '--task', 'linear-map', '--state-size', '8', '--json'])).toBe(0)
    expect((JSON.parse(logs.pop() as string) as { lossFloor: number }).lossFloor).toBeCloseTo((Math.LN2 * 7) / 15, 12)
    expect(
      await main([
        'markov',
        'oracle',
        '--task',
        'cellular-automaton',
        '--cells',
        '6',
        '--states',
        '3',
        '--rules',
        '110',
        '--json',
      ]),
    ).toBe(0)
    expect((JSON.parse(logs.pop() as string) as { bayesLoss: number }).bayesLoss).toBeCloseTo((5 * Math.LN2) / 17, 12)
    expect(
      await main(['markov', 'oracle', '--task', 'icl-markov', '--vocab', '2', '--oracle-sequences', '200', '--json']),
    ).toBe(0)
    const icl = JSON.parse(logs.pop() as string) as {
      bayesLoss: number
      bayesLossStandardError: number
      chanceLoss: number
    }
    expect(icl.bayesLoss).toBeLessThan(icl.chanceLoss)
    expect(icl.bayesLossStandardError).toBeGreaterThan(0)
    expect(await main(['markov', 'oracle', '--task', 'linear-map'])).toBe(0)
    expect(logs.pop()).toMatch(/Bayes loss floor 0\.3354 nats/)
  })
})

describe('attnlab markov: bad flags', () => {
  const cases: [string[], RegExp][] = [
    [['markov', 'sample', '--vocab', '1', '--out', 'x.safetensors'], /--vocab must be in \[2, 4096\]/],
    [
      ['markov', 'sample', '--spans', '0,1', '--out', 'x.safetensors'],
      /--spans values must be an integer in \[1, 64\], got 0/,
    ],
    [['markov', 'sample', '--tau', '0', '--out', 'x.safetensors'], /--tau must be in \(0, 1000\], got 0/],
    [
      ['markov', 'sample', '--task', 'linear-map', '--rules', '1', '--out', 'x.safetensors'],
      /--rules does not apply to --task linear-map/,
    ],
    [
      [
        'markov',
        'sample',
        '--task',
        'linear-map',
        '--state-size',
        '4',
        '--ones-per-row',
        '5',
        '--out',
        'x.safetensors',
      ],
      /--ones-per-row: must be an integer in \[1, 4\], got 5/,
    ],
    [['markov', 'sample', '--task', 'bogus', '--out', 'x.safetensors'], /Allowed choices are sparse-markov/],
    [['markov', 'sample', '--sequences', '0', '--out', 'x.safetensors'], /--sequences must be in/],
    [['markov', 'sample'], /--out <file> is required/],
    [
      ['markov', 'oracle', '--spans', '2,2,2', '--method', 'exact'],
      /--method exact enumerates .* use --method monte-carlo/,
    ],
    [['markov', 'oracle', '--task', 'linear-map', '--sweeps', '8'], /--sweeps applies only to --task sparse-markov/],
    [['markov', 'oracle', '--oracle-sequences', '10'], /--oracle-sequences applies only/],
    [['markov', 'oracle', '--sweeps', '6', '--max-states', '1'], /Invalid sweeps/],
    [['markov', 'oracle', '--task', 'text-chars'], /--task text-chars \(character-level language modelling/],
  ]

  it.each(cases)('%j fails with one clear line, a non-zero exit, and writes nothing', async (args, pattern) => {
    const before = await readdir(dir())
    const code = await main(args.map((a) => (a === 'x.safetensors' ? join(dir(), 'never.safetensors') : a)))
    expect(code).not.toBe(0)
    const message = errors.join('').trim()
    expect(message).toMatch(pattern)
    expect(message.split('\n').filter((line) => line.startsWith('attnlab')).length).toBe(1)
    expect(logs).toEqual([])
    expect(await readdir(dir())).toEqual(before)
  })
})

import { existsSync } from 'node:fs'
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Rng, serializeSafetensors, safetensorsToFloat32, useBackend, type SafetensorsTensorInput } from '@attnlab/core'
import { createTransformer, presetConfig } from '@attnlab/transformer'
import { saveCheckpoint } from '@attnlab/transformer/node'
import { readSafetensorsFile } from '@attnlab/core/node'
import { fieldInfo } from '@attnlab/core/schema'
import { SPARSE_METHOD_SCHEMAS } from '@attnlab/sparse-attention'
import { captureOutput, useTempDir } from '../cli.test-utils.ts'
import { main } from '../program.ts'
import type { CompareRow } from '@attnlab/experiments'
import { addMethodFlags, attentionKernelFromFlags, checkMaskFits, compareSvg } from './sparse.ts'

const H = 4
const Hkv = 2
const T = 40
const D = 8

function normal(seed: string, n: number): Float32Array {
  return Rng.fromSeed(17).split(seed).fillNormal(new Float32Array(n))
}

const data = {
  q: normal('q', H * T * D),
  k: normal('k', Hkv * T * D),
  v: normal('v', Hkv * T * D),
  q_new: normal('q_new', H * D),
  k_new: normal('k_new', Hkv * D),
  v_new: normal('v_new', Hkv * D),
}

function f32(shape: number[], values: Float32Array): SafetensorsTensorInput {
  return { dtype: 'F32', shape, data: values }
}

const prefillTensors = { q: f32([H, T, D], data.q), k: f32([Hkv, T, D], data.k), v: f32([Hkv, T, D], data.v) }
const decodeTensors = {
  ...prefillTensors,
  q_new: f32([H, D], data.q_new),
  k_new: f32([Hkv, D], data.k_new),
  v_new: f32([Hkv, D], data.v_new),
}

/** softmax(q.k / sqrt(d)) v restricted to a mask, plain loops (independent of the package). */
function reference(
  q: Float32Array,
  keys: Float32Array,
  values: Float32Array,
  mask: Uint8Array,
  rows: number,
  P: number,
): Float64Array {
  const out = new Float64Array(H * rows * D)
  for (let h = 0; h < H; h++) {
    const kv = Math.floor(h / (H / Hkv))
    for (let i = 0; i < rows; i++) {
      const s: number[] = []
      const idx: number[] = []
      for (let j = 0; j < P; j++) {
        if (!mask[(h * rows + i) * P + j]) continue
        let dot = 0
        for (let c = 0; c < D; c++)
          dot += (q[(h * rows + i) * D + c] as number) * (keys[(kv * P + j) * D + c] as number)
        s.push(dot / Math.sqrt(D))
        idx.push(j)
      }
      const m = Math.max(...s)
      const e = s.map((x) => Math.exp(x - m))
      const z = e.reduce((a, b) => a + b, 0)
      idx.forEach((j, n) => {
        for (let c = 0; c < D; c++)
          out[(h * rows + i) * D + c] =
            (out[(h * rows + i) * D + c] as number) + ((e[n] as number) / z) * (values[(kv * P + j) * D + c] as number)
      })
    }
  }
  return out
}

function withToken(prompt: Float32Array, token: Float32Array): Float32Array {
  const out = new Float32Array(Hkv * (T + 1) * D)
  for (let kv = 0; kv < Hkv; kv++) {
    out.set(prompt.subarray(kv * T * D, (kv + 1) * T * D), kv * (T + 1) * D)
    out.set(token.subarray(kv * D, (kv + 1) * D), (kv * (T + 1) + T) * D)
  }
  return out
}

const dir = useTempDir('attnlab-sparse-')
let logs: string[]
let errors: string[]

beforeAll(async () => {
  await writeFile(join(dir(), 'prefill.safetensors'), serializeSafetensors(prefillTensors))
  await writeFile(join(dir(), 'decode.safetensors'), serializeSafetensors(decodeTensors))
})
afterEach(() => {
  vi.restoreAllMocks()
})

async function run(args: string[]): Promise<number> {
  ;({ logs, errors } = captureOutput({ stdout: true }))
  return main(args)
}

describe('reported sparsity below 0 and unreachable targets', () => {
  it(
    'sparse apply on a short sequence prints no bare ' + 'negative reported sparsity; --json keeps the raw value',
    async () => {
      const out = join(dir(), 'vs-short.safetensors')
      expect(
        await run([
          'sparse',
          'apply',
          '--method',
          'vertical-slash',
          '--qkv',
          join(dir(), 'prefill.safetensors'),
          '--out',
          out,
          '--backend',
          'cpu',
        ]),
      ).toBe(0)
      const text = logs.join('')
      expect(text).toMatch(
        new RegExp(
          /reported \(study\) sparsity 0 \(budget exceeds the prompt: the study's accounting gives /.source +
            /-\d\.\d{4} < 0, i\.e\. the method keeps every causal pair\)/.source,
        ),
      )
      expect(text).not.toMatch(/sparsity -/)
      expect(
        await run([
          'sparse',
          'apply',
          '--method',
          'vertical-slash',
          '--qkv',
          join(dir(), 'prefill.safetensors'),
          '--out',
          out,
          '--force',
          '--backend',
          'cpu',
          '--json',
        ]),
      ).toBe(0)
      const { sparsity } = JSON.parse(logs.join('')) as {
        sparsity: { exact: number; reported: number; reportedClamped: number; budgetExceedsPrompt: boolean }
      }
      expect(sparsity.reported).toBeLessThan(0)
      expect(sparsity.reportedClamped).toBe(0)
      expect(sparsity.budgetExceedsPrompt).toBe(true)
    },
  )
})

describe('attnlab sparse apply', () => {
  it.each(['cpu', 'wasm'])(
    'runs a prefill method and writes out [H, T, d] and the uint8 mask [H, T, T] (%s)',
    async (backend) => {
      const out = join(dir(), `vs-${backend}.safetensors`)
      const code = await run([
        'sparse',
        'apply',
        '--method',
        'vertical-slash',
        '--qkv',
        join(dir(), 'prefill.safetensors'),
        '--out',
        out,
        '--vertical-size',
        '6',
        '--slash-size',
        '6',
        '--window',
        '8',
        '--sinks',
        '2',
        '--local',
        '3',
        '--backend',
        backend,
        '--json',
      ])
      expect(errors.join('')).toBe('')
      expect(code).toBe(0)
      const report = JSON.parse(logs.join('\n'))
      expect(report.method).toBe('vertical-slash')
      expect(report.phase).toBe('prefill')
      expect(report.config).toMatchObject({
        verticalSize: 6,
        slashSize: 6,
        window: 8,
        sinks: 2,
        local: 3,
        kernelBlockSize: 64,
      })
      const file = await readSafetensorsFile(out)
      const mask = file.tensors.get('mask')!
      expect(mask.dtype).toBe('U8')
      expect(mask.shape).toEqual([H, T, T])
      const outTensor = file.tensors.get('out')!
      expect(outTensor.shape).toEqual([H, T, D])
      let computed = 0
      for (const m of mask.bytes) computed += m
      expect(report.sparsity.exact).toBeCloseTo(1 - computed / (H * ((T * (T + 1)) / 2)), 12)
      // 64x64 kernel accounting on a 40-token sequence counts a whole 64x64 block: negative
      expect(report.sparsity.reported).toBeCloseTo(1 - 4096 / 820, 12)
      const expected = reference(data.q, data.k, data.v, mask.bytes, T, T)
      const got = safetensorsToFloat32(outTensor)
      for (let n = 0; n < got.length; n++)
        expect(Math.abs((got[n] as number) - (expected[n] as number))).toBeLessThan(1e-5)
      expect(file.metadata.method).toBe('vertical-slash')
    },
  )

  it('runs a decode method: out [H, d], mask [H, T + 1]', async () => {
    const out = join(dir(), 'quest.safetensors')
    const code = await run([
      'sparse',
      'apply',
      '--method',
      'quest',
      '--qkv',
      join(dir(), 'decode.safetensors'),
      '--out',
      out,
      '--token-budget',
      '16',
      '--page-size',
      '8',
      '--backend',
      'cpu',
      '--json',
    ])
    expect(code).toBe(0)
    const report = JSON.parse(logs.join('\n'))
    expect(report.phase).toBe('decode')
    expect(report.sparsity.reported).toBeCloseTo(1 - 16 / 40, 12)
    const file = await readSafetensorsFile(out)
    const mask = file.tensors.get('mask')!
    expect(mask.shape).toEqual([H, T + 1])
    expect(file.tensors.get('out')!.shape).toEqual([H, D])
    for (let h = 0; h < H; h++) {
      let count = 0
      for (let j = 0; j <= T; j++) count += mask.bytes[h * (T + 1) + j] as number
      expect(count).toBe(16 + 1) // two pages + the current page (the new token alone)
    }
    const expected = reference(
      data.q_new,
      withToken(data.k, data.k_new),
      withToken(data.v, data.v_new),
      mask.bytes,
      1,
      T + 1,
    )
    const got = safetensorsToFloat32(file.tensors.get('out')!)
    for (let n = 0; n < got.length; n++)
      expect(Math.abs((got[n] as number) - (expected[n] as number))).toBeLessThan(1e-5)
  })

  it('--no-mask leaves the mask out; --json reports estimation and attention seconds and the peak RSS', async () => {
    const out = join(dir(), 'bs-no-mask.safetensors')
    const args = ['sparse', 'apply', '--method', 'block-sparse', '--qkv', join(dir(), 'prefill.safetensors')]
    const flags = ['--block-size', '8', '--top-k', '3', '--backend', 'cpu', '--json']
    expect(await run([...args, '--out', out, '--no-mask', ...flags])).toBe(0)
    const report = JSON.parse(logs.join('\n'))
    expect(report.maskShape).toBeNull()
    const file = await readSafetensorsFile(out)
    expect([...file.tensors.keys()]).toEqual(['out'])
    expect(report.backend).toBe('cpu')
    for (const key of ['estimationSeconds', 'attentionSeconds', 'callSeconds']) {
      expect(report.timing[key], key).toBeGreaterThan(0)
      expect(report.timing[key], key).toBeLessThan(60)
    }
    expect(report.timing.callSeconds).toBeGreaterThanOrEqual(report.timing.attentionSeconds)
    expect(report.memory.peakRssBytes).toBeGreaterThanOrEqual(report.memory.rssBytes / 2)
    expect(report.memory.peakRssBytes).toBeGreaterThan(1e6)
    // the same run with the mask: the same sparsity, counted from the mask written
    logs.length = 0
    const withMask = join(dir(), 'bs-mask.safetensors')
    expect(await run([...args, '--out', withMask, ...flags])).toBe(0)
    const masked = JSON.parse(logs.join('\n'))
    expect(masked.sparsity.exact).toBe(report.sparsity.exact)
    const mask = (await readSafetensorsFile(withMask)).tensors.get('mask')!
    let computed = 0
    for (const m of mask.bytes) computed += m
    expect(report.sparsity.exact).toBeCloseTo(1 - computed / (H * ((T * (T + 1)) / 2)), 12)
    expect(safetensorsToFloat32(file.tensors.get('out')!)).toEqual(
      safetensorsToFloat32((await readSafetensorsFile(withMask)).tensors.get('out')!),
    )
  })

  it('a mask that cannot be held is refused with its size, before any work', () => {
    expect(() => checkMaskFits([8, 8192, 8192], 1000)).toThrow(
      /pairs \[8, 8192, 8192\] \(dimension T = 8192\) needs 536870912 bytes but 1000 are free; pass --no-mask/,
    )
    expect(() => checkMaskFits([8, 32768, 32768], 2 ** 40)).toThrow(
      /8589934592 bytes but one typed array holds at most/,
    )
    expect(() => checkMaskFits([8, 8192, 8192], 2 ** 30)).not.toThrow()
  })

  it('dense picks the decode phase when the file has q_new, unless --phase says otherwise', async () => {
    expect(
      await run([
        'sparse',
        'apply',
        '--method',
        'dense',
        '--qkv',
        join(dir(), 'decode.safetensors'),
        '--out',
        join(dir(), 'd1.safetensors'),
        '--backend',
        'cpu',
        '--json',
      ]),
    ).toBe(0)
    expect(JSON.parse(logs.join('\n')).maskShape).toEqual([H, T + 1])
    expect(
      await run([
        'sparse',
        'apply',
        '--method',
        'dense',
        '--qkv',
        join(dir(), 'decode.safetensors'),
        '--out',
        join(dir(), 'd2.safetensors'),
        '--phase',
        'prefill',
        '--backend',
        'cpu',
      ]),
    ).toBe(0)
    expect(logs.join('\n')).toMatch(/dense \(prefill\): exact sparsity 0.0000/)
  })

  it('snapkv and ada-snapkv run with their flags', async () => {
    for (const method of ['snapkv', 'ada-snapkv']) {
      const code = await run([
        'sparse',
        'apply',
        '--method',
        method,
        '--qkv',
        join(dir(), 'decode.safetensors'),
        '--out',
        join(dir(), `${method}.safetensors`),
        '--capacity',
        '12',
        '--window',
        '6',
        '--kernel-size',
        '3',
        '--local',
        '4',
        '--prefix',
        '2',
        '--backend',
        'cpu',
        '--json',
      ])
      expect(code, errors.join('')).toBe(0)
      expect(JSON.parse(logs.join('\n')).sparsity.reported).toBeCloseTo(1 - 12 / 40, 12)
    }
  })

  describe('rejects bad input with one line, exit code 2 and nothing written', () => {
    const cases: [string, string[], RegExp][] = [
      [
        'a flag of another method',
        ['--method', 'quest', '--top-k', '4'],
        /--top-k does not apply to quest \(its flags: --token-budget, --page-size, --per-head-pages\)/,
      ],
      ['a non-integer flag', ['--method', 'block-sparse', '--top-k', '2.5'], /--top-k must be an integer/],
      ['an unknown method', ['--method', 'h2o'], /--method.*h2o/],
      [
        'an invalid configuration',
        ['--method', 'vertical-slash', '--slash-size', '8'],
        /Invalid slashSize: 8 must be >= local \(64\)/,
      ],
      ['an alpha out of range', ['--method', 'flexprefill', '--alpha', '2'], /--alpha must be in \[0, 1\]/],
      [
        'a budget that is not whole pages',
        ['--method', 'quest', '--token-budget', '20'],
        /Invalid tokenBudget: 20 must be a multiple of pageSize \(16\)/,
      ],
      [
        'a prompt too short for Quest',
        ['--method', 'quest', '--token-budget', '64', '--page-size', '8'],
        /quest: sequence of 40 tokens is too short/,
      ],
      [
        'a phase the method does not have',
        ['--method', 'quest', '--phase', 'prefill'],
        /--phase prefill does not fit quest/,
      ],
      [
        'a bad mask mode',
        ['--method', 'vertical-slash', '--mask-mode', 'blocks'],
        /--mask-mode.*'blocks'.*Allowed choices are kernel, exact/,
      ],
    ]
    it.each(cases)('%s', async (_name, args, pattern) => {
      const out = join(dir(), 'never.safetensors')
      const code = await run([
        'sparse',
        'apply',
        '--qkv',
        join(dir(), 'decode.safetensors'),
        '--out',
        out,
        '--backend',
        'cpu',
        ...args,
      ])
      expect(code).toBe(2)
      const text = errors.join('')
      expect(text).toMatch(pattern)
      expect(text.trim().split('\n')[0]).toMatch(/^attnlab: error/)
      expect((await readdir(dir())).some((f) => f.startsWith('never'))).toBe(false)
    })

    const fileCases: [string, Record<string, SafetensorsTensorInput>, string, RegExp][] = [
      ['a missing tensor', { q: prefillTensors.q, k: prefillTensors.k }, 'vertical-slash', /tensor 'v' is missing/],
      [
        'a wrong dtype',
        { ...prefillTensors, k: { dtype: 'F16', shape: [Hkv, T, D], data: new Uint16Array(Hkv * T * D) } },
        'dense',
        /tensor 'k' has dtype F16 but F32 is expected/,
      ],
      ['a wrong rank', { ...prefillTensors, q: f32([H * T, D], data.q) }, 'dense', /tensor 'q' has shape \[160, 8\]/],
      [
        'mismatched lengths',
        { ...prefillTensors, v: f32([Hkv, T / 2, 2 * D], data.v) },
        'dense',
        /tensor 'v' .*dimension 1 must be 40/,
      ],
      [
        'mismatched dHead',
        { ...prefillTensors, k: f32([Hkv, T, D / 2], new Float32Array((Hkv * T * D) / 2)) },
        'dense',
        /tensor 'k' .*dimension 2 must be 8/,
      ],
      [
        'heads not divisible',
        {
          ...prefillTensors,
          k: f32([3, T, D], new Float32Array(3 * T * D)),
          v: f32([3, T, D], new Float32Array(3 * T * D)),
        },
        'dense',
        /q's 4 heads must be a multiple/,
      ],
      ['missing decode tensors', prefillTensors, 'snapkv', /tensor 'q_new' is missing/],
      [
        'a wrong decode shape',
        { ...decodeTensors, k_new: f32([H, D], data.q_new) },
        'quest',
        /tensor 'k_new' .*dimension 0 must be 2/,
      ],
      [
        'a non-finite value',
        {
          ...prefillTensors,
          q: f32(
            [H, T, D],
            Float32Array.from(data.q, (x, i) => (i === 5 ? Number.NaN : x)),
          ),
        },
        'dense',
        /tensor 'q' holds a non-finite value \(NaN\) at flat index 5/,
      ],
    ]
    it.each(fileCases)('%s', async (name, tensors, method, pattern) => {
      const input = join(dir(), `bad-${name.replace(/\W+/g, '-')}.safetensors`)
      await writeFile(input, serializeSafetensors(tensors))
      const code = await run([
        'sparse',
        'apply',
        '--method',
        method,
        '--qkv',
        input,
        '--out',
        join(dir(), 'never.safetensors'),
        '--backend',
        'cpu',
      ])
      expect(code).toBe(2)
      expect(errors.join('')).toMatch(pattern)
      expect((await readdir(dir())).some((f) => f.startsWith('never'))).toBe(false)
    })

    it('an unreadable input file', async () => {
      const code = await run([
        'sparse',
        'apply',
        '--method',
        'dense',
        '--qkv',
        join(dir(), 'absent.safetensors'),
        '--out',
        join(dir(), 'never.safetensors'),
      ])
      expect(code).toBe(1)
      expect(errors.join('')).toMatch(/IO_ERROR.*absent.safetensors/)
    })

    it('a missing required flag', async () => {
      const code = await run(['sparse', 'apply', '--method', 'dense', '--qkv', join(dir(), 'prefill.safetensors')])
      expect(code).toBe(2)
      expect(errors.join('')).toMatch(/--out/)
    })
  })
})

describe('attentionKernelFromFlags (for --attention METHOD on other commands)', () => {
  it('builds one method or a prefill+decode combination, routing each flag to its methods', () => {
    const single = attentionKernelFromFlags('snapkv', { capacity: 200, window: 32 })
    expect(single.method).toBe('snapkv')
    expect(single.config).toMatchObject({ capacity: 200, window: 32 })
    const pair = attentionKernelFromFlags('vertical-slash+snapkv', {
      window: 32,
      verticalSize: 100,
      slashSize: 100,
      capacity: 300,
    })
    expect(pair.method).toBe('vertical-slash+snapkv')
    expect(pair.config).toMatchObject({
      prefill: { window: 32, verticalSize: 100 },
      decode: { window: 32, capacity: 300 },
    })
    expect(attentionKernelFromFlags('quest', { perHeadPages: true }).config).toMatchObject({ sharePages: false })
  })

  it('supports renamed flags for commands whose own flags collide (generate has a sampling --top-k)', async () => {
    const { Command } = await import('commander')
    const command = addMethodFlags(new Command('generate').option('--top-k <n>', 'sampling top-k').exitOverride(), {
      '--top-k': '--block-top-k',
    })
    command.parse(['--top-k', '5', '--block-top-k', '7', '--block-size', '8'], { from: 'user' })
    const options = command.opts()
    expect(options.topK).toBe('5')
    const kernel = attentionKernelFromFlags('block-sparse', options, { '--top-k': '--block-top-k' })
    expect(kernel.config).toEqual({ blockSize: 8, topK: 7 })
    expect(() => attentionKernelFromFlags('quest', { blockTopK: 3 }, { '--top-k': '--block-top-k' })).toThrow(
      /--block-top-k does not apply to quest/,
    )
    const strict = addMethodFlags(new Command('x').exitOverride().configureOutput({ writeErr: () => {} }), {
      '--top-k': '--block-top-k',
    })
    expect(() => strict.parse(['--block-top-k', '2.5'], { from: 'user' })).toThrow(/--block-top-k must be an integer/)
  })

  it("derives the method flags from the methods' schemas: one per field, help with each default, ranges", async () => {
    const { Command } = await import('commander')
    const command = addMethodFlags(new Command('x').exitOverride().configureOutput({ writeErr: () => {} }))
    const fields = new Set(Object.values(SPARSE_METHOD_SCHEMAS).flatMap((schema) => Object.keys(schema.shape)))
    const expected = [...fields]
      .filter((key) => key !== 'kernelBlockSize' && key !== 'maxBudget')
      .map((key) =>
        key === 'sharePages' ? '--per-head-pages' : `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`,
      )
    expect(command.options.map((option) => option.long).sort()).toEqual(expected.sort())
    const window = command.options.find((option) => option.long === '--window')?.description ?? ''
    for (const method of ['vertical-slash', 'flexprefill', 'snapkv'] as const) {
      const info = fieldInfo(SPARSE_METHOD_SCHEMAS[method].shape.window)
      expect(window).toContain(`${info.help} (default ${String(info.defaultValue)})`)
    }
    expect(window).toContain('snapkv / ada-snapkv: ')
    // The loosest range of the fields a flag sets: --local 0 is SnapKV's, --top-k >= 3 Block-Sparse's.
    expect(() => command.parse(['--local', '0'], { from: 'user' })).not.toThrow()
    expect(() => command.parse(['--top-k', '2'], { from: 'user' })).toThrow(/--top-k must be >= 3, got 2/)
    expect(() => command.parse(['--alpha', '1.5'], { from: 'user' })).toThrow(/--alpha must be in \[0, 1\], got 1.5/)
  })

  it('rejects unknown methods, flags of other methods and impossible combinations', () => {
    expect(() => attentionKernelFromFlags('h2o', {})).toThrow(/unknown attention method 'h2o'/)
    expect(() => attentionKernelFromFlags('dense', { topK: 3 })).toThrow(
      /--top-k does not apply to dense \(it has no parameters\)/,
    )
    expect(() => attentionKernelFromFlags('vertical-slash+quest', { capacity: 3 })).toThrow(
      /--capacity does not apply to vertical-slash\+quest/,
    )
    expect(() => attentionKernelFromFlags('snapkv+quest', {})).toThrow(/prefillKernel/)
    expect(() => attentionKernelFromFlags('dense+dense+dense', {})).toThrow(/one method or prefill\+decode/)
  })
})

// compareWithDense itself (budgets, calibration, KL / top-1, bad prompts) is tested in
// packages/experiments and packages/sparse-attention; here, the CLI's rendering of its figure.
describe('sparse compare plot (compareSvg)', () => {
  it('draws one line per method of the rows', async () => {
    const methods = ['vertical-slash', 'flexprefill', 'block-sparse', 'snapkv', 'ada-snapkv', 'quest'] as const
    const rows = methods.flatMap((method, i) =>
      [0.5, 0.8].map(
        (s) =>
          ({ method, exactSparsity: s, klDenseSparse: (s * (i + 1)) / 10, top1Agreement: 1 - s / 2 }) as CompareRow,
      ),
    )
    const svg = await compareSvg(rows, 'test')
    expect(svg.startsWith('<svg')).toBe(true)
    expect(svg).toMatch(/Symbol legend titled 'method' for fill color and stroke color with 6 values/)
  })

  it('the plot has round ticks: a KL up to 0.35 is labelled 0, 0.05, ..., 0.35 (not 0.088, 0.18, 0.26)', async () => {
    const row = (method: 'snapkv' | 'quest', exactSparsity: number, klDenseSparse: number): CompareRow =>
      ({ method, exactSparsity, klDenseSparse, top1Agreement: 1 - exactSparsity / 2 }) as CompareRow
    const rows = [row('snapkv', 0.5, 0.03), row('snapkv', 0.8, 0.12), row('quest', 0.5, 0.1), row('quest', 0.95, 0.35)]
    const svg = await compareSvg(rows, 'ticks')
    /** The numeric tick labels of the axis whose aria-label starts with `axis` (Vega writes one group per axis). */
    const ticks = (axis: string): number[] => {
      const start = svg.indexOf(`aria-label="${axis}`)
      expect(start, axis).toBeGreaterThan(0)
      const group = svg.slice(start, svg.indexOf('role-axis-title', start))
      return [...group.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => Number(m[1]))
    }
    const isRound = (labels: number[]): boolean => {
      const step = (labels[1] as number) - (labels[0] as number)
      const mantissa = step / 10 ** Math.floor(Math.log10(step))
      const evenly = labels.every((v, i) => Math.abs(v - (labels[0] as number) - i * step) < 1e-9)
      const multiples = labels.every((v) => Math.abs(v / step - Math.round(v / step)) < 1e-9)
      return evenly && multiples && [1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-9)
    }
    const kl = ticks("Y-axis titled 'KL(dense || sparse), nats'")
    expect(kl[0]).toBe(0)
    expect(kl.at(-1)).toBeGreaterThanOrEqual(0.35)
    expect(isRound(kl), kl.join(', ')).toBe(true)
    expect(isRound(ticks("Y-axis titled 'top-1 agreement with dense'"))).toBe(true)
    expect(isRound([0, 0.088, 0.18, 0.26, 0.35])).toBe(false)
  })
})

const SHARED_MODEL = new URL('../../../../../shared/models/aidreams260K', import.meta.url).pathname
// The real model lives beside the repository (../shared); without it this suite is skipped.
describe.skipIf(!existsSync(join(SHARED_MODEL, 'model.bin')))(
  'attnlab sparse compare on ../shared/models/aidreams260K',
  () => {
    const model = SHARED_MODEL

    it('runs all six methods and writes the plot', async () => {
      const promptFile = join(dir(), 'prompt.txt')
      await writeFile(
        promptFile,
        'I dreamed of a quiet city where the lights hummed softly, and every street remembered the footsteps of ' +
          'those who had walked there before. The wind carried fragments of songs, and I followed them',
      )
      const plot = join(dir(), 'compare.svg')
      const code = await run([
        'sparse',
        'compare',
        '--model',
        model,
        '--prompt-file',
        promptFile,
        '--methods',
        'vertical-slash,flexprefill,block-sparse,snapkv,ada-snapkv,quest',
        '--sparsity',
        '0.8',
        '--decode-steps',
        '4',
        '--plot',
        plot,
        '--backend',
        'wasm',
        '--json',
      ])
      expect(errors.join(''), errors.join('')).toBe('')
      expect(code).toBe(0)
      const report = JSON.parse(logs.join('\n'))
      expect(report.model).toBe(model) // as given; loadModel reads the model.bin inside
      expect(report.context).toBe(128)
      expect(report.decodeSteps).toBe(4)
      expect(report.rows).toHaveLength(6)
      for (const row of report.rows) {
        expect(row.positions).toBe(row.phase === 'prefill' ? report.promptTokens : 4)
        expect(row.exactSparsity, row.method).toBeGreaterThan(0.5)
        expect(row.klDenseSparse, row.method).toBeGreaterThan(0)
        expect(row.top1Agreement, row.method).toBeGreaterThan(0.3)
        expect(row).toHaveProperty('reportedSparsity')
        expect(row.reportedSparsityClamped).toBe(Math.max(0, row.reportedSparsity))
        expect(row.budgetExceedsPrompt).toBe(row.reportedSparsity < 0)
        expect(typeof row.targetReached).toBe('boolean')
      }
      expect(report.plot).toBe(plot)
      const svg = await readFile(plot, 'utf8')
      expect(svg).toMatch(/^<svg/)
      expect(svg).toMatch(/Symbol legend titled 'method' for fill color and stroke color with 6 values/)
    })

    it('prints the plot: line when it writes the plot', async () => {
      const promptFile = join(dir(), 'prompt-plot.txt')
      await writeFile(promptFile, 'I dreamed of a quiet city where the lights hummed softly')
      const plot = join(dir(), 'compare-text.svg')
      expect(
        await run([
          'sparse',
          'compare',
          '--model',
          model,
          '--prompt-file',
          promptFile,
          '--methods',
          'block-sparse',
          '--sparsity',
          '0.5',
          '--plot',
          plot,
          '--backend',
          'cpu',
        ]),
      ).toBe(0)
      expect(logs.join('\n')).toContain(`plot: ${plot}`)
      expect(existsSync(plot)).toBe(true)
    })

    const bad: [string, string[], RegExp][] = [
      ['an unknown method', ['--methods', 'quest,h2o'], /--methods must be a comma-separated list .* got 'h2o'/],
      [
        'a sparsity of 1',
        ['--methods', 'quest', '--sparsity', '0.5,1'],
        /--sparsity must be comma-separated numbers in \[0, 1\), got '1'/,
      ],
      [
        'a flag no listed method takes',
        ['--methods', 'quest,snapkv', '--top-k', '4'],
        /--top-k does not apply to any of quest, snapkv/,
      ],
      [
        'a missing prompt file',
        ['--methods', 'quest', '--prompt-file', '/nonexistent/prompt.txt'],
        /cannot read --prompt-file/,
      ],
      [
        'a --plot in a missing directory (refused, not created)',
        ['--methods', 'quest', '--plot', '/nonexistent-attnlab-dir/x.svg'],
        /--plot: directory '\/nonexistent-attnlab-dir' does not exist/,
      ],
      ['a --plot that is not .svg', ['--methods', 'quest', '--plot', '/tmp/x.png'], /--plot must name an \.svg file/],
    ]
    it.each(bad)('rejects %s', async (_name, args, pattern) => {
      const promptFile = join(dir(), 'prompt-ok.txt')
      await writeFile(promptFile, 'I dreamed')
      const code = await run([
        'sparse',
        'compare',
        '--model',
        model,
        '--prompt-file',
        promptFile,
        '--backend',
        'cpu',
        ...args,
      ])
      expect(code).toBe(2)
      expect(errors.join('')).toMatch(pattern)
    })

    it.each([
      ['-1 2 3', /--prompt-file token id -1 \(number 1 of 3\) is out of range: expected an integer in \[0, \d+\)/],
      ['1 2 NaN', /--prompt-file token id NaN \(number 3 of 3\) is out of range/],
      ['1, 2.5', /--prompt-file token id 2\.5 \(number 2 of 2\) is out of range/],
      [' \n', /--prompt-file '.*prompt-bad\.txt' is empty/],
    ])('rejects a prompt file %j naming the bad token id, or as empty', async (content, pattern) => {
      const promptFile = join(dir(), 'prompt-bad.txt')
      await writeFile(promptFile, content)
      const args = ['--prompt-file', promptFile, '--methods', 'quest', '--backend', 'cpu']
      const code = await run(['sparse', 'compare', '--model', model, ...args])
      expect(code).toBe(2)
      expect(errors.join('')).toMatch(pattern)
    })

    it('rejects a model path that does not exist', async () => {
      const promptFile = join(dir(), 'prompt-ok.txt')
      await writeFile(promptFile, '1 2 3')
      const code = await run([
        'sparse',
        'compare',
        '--model',
        join(dir(), 'absent.bin'),
        '--prompt-file',
        promptFile,
        '--methods',
        'quest',
        '--backend',
        'cpu',
      ])
      expect(code).not.toBe(0)
      expect(errors.join('')).toMatch(/absent\.bin/)
    })
  },
)

describe('sparse compare --model on an emergence run directory', () => {
  it("reads its first seed's checkpoint (its config.json is the run's record, not a model config)", async () => {
    await useBackend('cpu')
    const runDir = join(dir(), 'emergence-run')
    await mkdir(join(runDir, 'seeds'), { recursive: true })
    await writeFile(join(runDir, 'config.json'), JSON.stringify({ format: 'attnlab-emergence/1', seeds: [3, 4] }))
    const promptFile = join(dir(), 'run-prompt.txt')
    await writeFile(promptFile, '1 2 3 4 5 6')
    const args = ['sparse', 'compare', '--model', runDir, '--prompt-file', promptFile, '--methods', 'snapkv']
    // No checkpoint yet: one line naming --model and the run.
    expect(await run([...args, '--backend', 'cpu'])).toBe(2)
    expect(errors.join('')).toMatch(/^attnlab: error: --model: the emergence run .*emergence-run has no checkpoint yet/)
    const model = createTransformer(presetConfig('minimal', { dVocab: 8, nCtx: 8, seed: 0 }))
    try {
      await saveCheckpoint(join(runDir, 'seeds', '4', 'checkpoint'), model)
    } finally {
      model.dispose()
    }
    expect(await run([...args, '--sparsity', '0.5', '--decode-steps', '1', '--json', '--backend', 'cpu'])).toBe(0)
    const report = JSON.parse(logs.join('')) as { model: string; rows: CompareRow[] }
    expect(report.model).toBe(runDir)
    expect(report.rows.map((row) => row.method)).toEqual(['snapkv'])
  })
})

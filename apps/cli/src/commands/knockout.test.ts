import { afterEach, describe, expect, it, vi } from 'vitest'
import { readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { fieldInfo } from '@attnlab/core/schema'
import { compressedSensingOptionsSchema, crossValidateOptionsSchema } from '@attnlab/knockout'
import { runCli, useTempDir } from '../cli.test-utils.ts'
import { buildProgram } from '../program.ts'

const planted = fileURLToPath(
  new URL('../../../../packages/knockout/src/__fixtures__/planted-minimal', import.meta.url),
)
const dir = useTempDir('attnlab-knockout-')
afterEach(() => {
  vi.restoreAllMocks()
})

describe('attnlab knockout (planted minimal model: head h owns span h)', () => {
  it('capabilities lists the probes and the task capabilities of the checkpoint', async () => {
    const { code, stdout } = await runCli([
      'knockout',
      'capabilities',
      '--model',
      planted,
      '--backend',
      'cpu',
      '--json',
    ])
    expect(code).toBe(0)
    const names = (JSON.parse(stdout) as { capabilities: { name: string }[] }).capabilities.map((c) => c.name)
    expect(names).toEqual(['induction', 'induction-gain', 'task', 'span-0', 'span-1', 'span-2'])
  })

  it(
    'locate --method cs finds the owning head, reports ' +
      'evaluations, the Lasso fit, controls, and writes the heatmap',
    async () => {
      const plot = join(dir(), 'heads.svg')
      const { code, stdout } = await runCli([
        'knockout',
        'locate',
        '--model',
        planted,
        '--capability',
        'span-2',
        '--masks',
        '6',
        '--fraction',
        '0.34',
        '--design',
        'iid',
        '--top',
        '1',
        '--seed',
        '0',
        '--controls',
        'span-0,span-1',
        '--count',
        '64',
        '--plot',
        plot,
        '--backend',
        'cpu',
        '--json',
      ])
      expect(code).toBe(0)
      const result = JSON.parse(stdout) as {
        method: string
        evaluations: number
        top: { head: string; score: number }[]
        lasso: { alpha: number; r2: number; coefficientUnit: string; scoreSd: number }
        estimatedDrop: { head: string; drop: number }[]
        heatmap: number[][]
        budget: { exhaustiveSweep: number; exhaustivePairs: number }
        effects: { rows: { capability: string; role: string; before: number; after: number }[]; ratio: number | string }
      }
      expect(result.method).toBe('compressed-sensing')
      expect(result.evaluations).toBe(6)
      expect(result.top.map((h) => h.head)).toEqual(['L0H2'])
      expect(result.top[0]!.score).toBeLessThan(0)
      expect(result.lasso.alpha).toBe(0.01)
      // The coefficient's unit is stated, and converts to a drop in metric units.
      expect(result.lasso.coefficientUnit).toMatch(
        /standard deviations of the capability score across the masks, per knocked-out head/,
      )
      expect(result.lasso.scoreSd).toBeGreaterThan(0)
      expect(result.estimatedDrop).toEqual([{ head: 'L0H2', drop: -result.top[0]!.score * result.lasso.scoreSd }])
      expect(result.heatmap).toHaveLength(1)
      expect(result.heatmap[0]).toHaveLength(3)
      expect(result.budget).toEqual({ heads: 3, exhaustiveSweep: 4, exhaustivePairs: 6, defaultMasks: 3 })
      expect(result.effects.rows.map((r) => [r.capability, r.role])).toEqual([
        ['span-2', 'target'],
        ['span-0', 'control'],
        ['span-1', 'control'],
      ])
      expect(result.effects.rows[0]!.after).toBeGreaterThan(result.effects.rows[0]!.before)
      expect(typeof result.effects.ratio === 'string' || (result.effects.ratio as number) >= 5).toBe(true)
      expect(await readFile(plot, 'utf8')).toMatch(/^<svg/)
    },
  )

  it('locate --method cs states the coefficient unit and the estimated drop in the human summary', async () => {
    const { code, stdout } = await runCli([
      'knockout',
      'locate',
      '--model',
      planted,
      '--capability',
      'span-2',
      '--masks',
      '6',
      '--fraction',
      '0.34',
      '--design',
      'iid',
      '--top',
      '1',
      '--seed',
      '0',
      '--controls',
      'none',
      '--count',
      '64',
      '--backend',
      'cpu',
    ])
    expect(code).toBe(0)
    expect(stdout).toMatch(
      /top heads \(Lasso coefficient, sd units; estimated drop \(loss\)\): L0H2 -\d+\.\d{4} \(drop ~\d/,
    )
    expect(stdout).toMatch(
      new RegExp(
        /coefficient = Lasso weight on the head's knockout bit \(1 = knocked out\), in standard deviations /.source +
          /of the loss score across the 6 masks \(sd [\d.e-]+ loss nats\) per knocked-out head; negative = /.source +
          /needed/.source,
      ),
    )
  })

  it('locate --method exhaustive and greedy rank heads by the drop; the human summary names the heads', async () => {
    const exhaustive = await runCli([
      'knockout',
      'locate',
      '--model',
      planted,
      '--capability',
      'span-0',
      '--method',
      'exhaustive',
      '--top',
      '1',
      '--count',
      '32',
      '--controls',
      'none',
      '--backend',
      'cpu',
      '--json',
    ])
    expect(exhaustive.code).toBe(0)
    const parsed = JSON.parse(exhaustive.stdout) as { evaluations: number; top: { head: string }[]; baseline: number }
    expect(parsed.evaluations).toBe(4)
    expect(parsed.top[0]!.head).toBe('L0H0')
    const greedy = await runCli([
      'knockout',
      'locate',
      '--model',
      planted,
      '--capability',
      'span-1@accuracy',
      '--method',
      'greedy',
      '--top',
      '2',
      '--count',
      '32',
      '--controls',
      'span-0',
      '--backend',
      'cpu',
    ])
    expect(greedy.code).toBe(0)
    expect(greedy.stdout).toMatch(/greedy \(zero ablation\): 6 evaluations/)
    expect(greedy.stdout).toMatch(/top heads \(drop \(accuracy\)\): L0H1 /)
    expect(greedy.stdout).toMatch(/span-1@accuracy\s+target/)
  })

  it('ablate prints before/after per capability (zero and mean)', async () => {
    const { code, stdout } = await runCli([
      'knockout',
      'ablate',
      '--model',
      planted,
      '--heads',
      '0.1',
      '--capabilities',
      'span-0,span-1,span-2',
      '--target',
      'span-1',
      '--count',
      '32',
      '--backend',
      'cpu',
      '--json',
    ])
    expect(code).toBe(0)
    const report = JSON.parse(stdout) as {
      heads: string[]
      rows: { capability: string; before: number; after: number; hurt: number }[]
      evaluations: number
    }
    expect(report.heads).toEqual(['L0H1'])
    expect(report.evaluations).toBe(6)
    const hurt = Object.fromEntries(report.rows.map((r) => [r.capability, r.hurt]))
    expect(hurt['span-1']).toBeGreaterThan(0.3)
    expect(hurt['span-0']).toBeLessThan(0.1)
    expect(hurt['span-2']).toBeLessThan(0.1)
    const mean = await runCli([
      'knockout',
      'ablate',
      '--model',
      planted,
      '--heads',
      'L0H1',
      '--mode',
      'mean',
      '--capabilities',
      'span-1',
      '--count',
      '32',
      '--backend',
      'cpu',
    ])
    expect(mean.code).toBe(0)
    expect(mean.stdout).toMatch(/knocking out L0H1 \(mean ablation\)/)
    expect(mean.stdout).toMatch(/span-1\s+control\s+loss/)
  })

  it('--text supplies sentences (and needs a tokenizer to be used)', async () => {
    const file = join(dir(), 'sentences.txt')
    await writeFile(file, 'one line\n\n')
    const { code, stderr } = await runCli([
      'knockout',
      'ablate',
      '--model',
      planted,
      '--heads',
      '0.0',
      '--capabilities',
      'text',
      '--text',
      file,
      '--backend',
      'cpu',
    ])
    expect(code).toBe(2)
    expect(stderr).toMatch(/'text' is not available for this model \(it needs a tokenizer\)/)
  })

  it(
    'locate with the default cs budget sweeps instead when ' +
      'k log N masks would not save half (3 heads: 5 masks vs 4)',
    async () => {
      const { code, stdout } = await runCli([
        'knockout',
        'locate',
        '--model',
        planted,
        '--capability',
        'span-1',
        '--count',
        '32',
        '--controls',
        'none',
        '--backend',
        'cpu',
        '--json',
      ])
      expect(code).toBe(0)
      const result = JSON.parse(stdout) as {
        method: string
        evaluations: number
        notes: string[]
        budget: { defaultMasks: number; exhaustiveSweep: number }
      }
      expect(result.method).toBe('exhaustive')
      expect(result.evaluations).toBe(4)
      expect(result.budget).toMatchObject({ defaultMasks: 5, exhaustiveSweep: 4 })
      expect(result.notes.join(' ')).toMatch(
        new RegExp(
          /compressed sensing would need 5 masks for k = 3 of 3 heads, not under half the exhaustive /.source +
            /sweep's 4: ran the exact sweep/.source,
        ),
      )
    },
  )
})

const aidreams = fileURLToPath(new URL('../../../../../shared/models/aidreams260K/model.bin', import.meta.url))

describe('attnlab knockout locate on a real model (aidreams260K, 16 heads)', () => {
  it('the default run sweeps the 16 heads exactly (17 ' +
    'evaluations: k log N = 15 masks would not save half), not 100', async () => {
    const args = [
      'knockout',
      'locate',
      '--model',
      aidreams,
      '--capability',
      'text',
      '--controls',
      'none',
      '--backend',
      'wasm',
    ]
    const { code, stdout } = await runCli([...args, '--json'])
    expect(code).toBe(0)
    const result = JSON.parse(stdout) as { method: string; evaluations: number; notes: string[]; warnings: string[] }
    expect(result).toMatchObject({ method: 'exhaustive', evaluations: 17, warnings: [] })
    expect(result.notes.join(' ')).toMatch(/would need 15 masks for k = 5 of 16 heads/)
    // --masks forces compressed sensing at the given budget
    const forced = await runCli([...args, '--masks', '15', '--json'])
    expect(forced.code).toBe(0)
    const sensed = JSON.parse(forced.stdout) as { method: string; evaluations: number; headsPerMask: number }
    expect(sensed).toMatchObject({ method: 'compressed-sensing', evaluations: 15 })
  }, 300_000)

  it('warns that there is nothing to localize for a capability ' +
    'the model lacks (induction: worse than a uniform guess)', async () => {
    const { code, stdout, stderr } = await runCli([
      'knockout',
      'locate',
      '--model',
      aidreams,
      '--capability',
      'induction',
      '--method',
      'exhaustive',
      '--count',
      '16',
      '--controls',
      'none',
      '--backend',
      'wasm',
      '--json',
    ])
    expect(code).toBe(0)
    expect(stderr).toMatch(
      new RegExp(
        /attnlab: warning: the model does not show 'induction': its clean logprob is -\d+\.\d\d nats per /.source +
          /token, no better than chance \(-6\.24\); there is nothing to localize/.source,
      ),
    )
    expect((JSON.parse(stdout) as { warnings: string[] }).warnings).toHaveLength(1)
  }, 300_000)
})

describe('attnlab knockout locate: the cs flags are the compressedSensing options', () => {
  it('take their meaning, default and choices from compressedSensingOptionsSchema', () => {
    const locate = buildProgram()
      .commands.find((c) => c.name() === 'knockout')
      ?.commands.find((c) => c.name() === 'locate')
    const option = (flag: string) => locate?.options.find((o) => o.long === flag)
    const cs = compressedSensingOptionsSchema.shape
    for (const [flag, field] of [
      ['--masks', cs.masks],
      ['--fraction', cs.fraction],
      ['--design', cs.design],
      ['--seed', cs.seed],
      ['--alpha', cs.alpha],
    ] as const) {
      const info = fieldInfo(field)
      expect(option(flag)?.description).toContain(`cs: ${info.help}`)
      expect(option(flag)?.defaultValue).toBe(info.hasDefault ? info.defaultValue : undefined)
    }
    expect(option('--design')?.argChoices).toEqual(fieldInfo(cs.design).choices)
    expect(option('--alpha')?.defaultValue).toBe(0.01)
    expect(option('--cv')?.description).toContain(
      `(default ${String(fieldInfo(crossValidateOptionsSchema.shape.folds).defaultValue)} folds)`,
    )
    expect(option('--cv')?.defaultValue).toBeUndefined()
  })
})

describe('attnlab knockout: bad input stops with one clear line and a non-zero exit', () => {
  const cases: [string, string[], RegExp][] = [
    [
      'heads out of range',
      ['ablate', '--model', planted, '--heads', '0.3', '--backend', 'cpu'],
      /head L0H3: head 3 is outside \[0, 3\)/,
    ],
    [
      'layer out of range',
      ['ablate', '--model', planted, '--heads', '1.0', '--backend', 'cpu'],
      /layer 1 is outside \[0, 1\)/,
    ],
    [
      'malformed heads',
      ['ablate', '--model', planted, '--heads', '0-1'],
      /--heads must be a comma-separated list of heads, L<layer>H<head> or layer\.head/,
    ],
    ['repeated head', ['ablate', '--model', planted, '--heads', '0.1,0.1', '--backend', 'cpu'], /listed twice/],
    [
      'bad mode',
      ['ablate', '--model', planted, '--heads', '0.1', '--mode', 'scale'],
      /--mode.*'scale'.*Allowed choices are zero, mean, resample/,
    ],
    [
      'bad method',
      ['locate', '--model', planted, '--capability', 'span-0', '--method', 'lasso'],
      /Allowed choices are cs, exhaustive, greedy/,
    ],
    [
      'bad fraction',
      ['locate', '--model', planted, '--capability', 'span-0', '--fraction', '0'],
      /--fraction must be in \(0, 1\], got 0$/m,
    ],
    [
      'bad masks',
      ['locate', '--model', planted, '--capability', 'span-0', '--masks', '0'],
      /--masks must be in \[1, 1000000\], got 0$/m,
    ],
    ['bad top', ['locate', '--model', planted, '--capability', 'span-0', '--top', 'x'], /--top must be an integer/],
    [
      'alpha 0 (no L1 penalty)',
      ['locate', '--model', planted, '--capability', 'span-0', '--alpha', '0'],
      /--alpha must be in \(0, 1000\], got 0$/m,
    ],
    [
      'one fold',
      ['locate', '--model', planted, '--capability', 'span-0', '--cv', '1'],
      /--cv must be in \[2, 1000\], got 1$/m,
    ],
    ['negative seed', ['locate', '--model', planted, '--capability', 'span-0', '--seed', '-1'], /--seed must be >= 0/],
    [
      'bad design',
      ['locate', '--model', planted, '--capability', 'span-0', '--design', 'stratified'],
      /Allowed choices are balanced, iid/,
    ],
    [
      'unknown capability',
      ['locate', '--model', planted, '--capability', 'math', '--backend', 'cpu'],
      /'math' is not available for this model; available: induction, induction-gain, task, span-0, span-1, span-2/,
    ],
    ['bad metric', ['locate', '--model', planted, '--capability', 'span-0@perplexity'], /'perplexity' is not a metric/],
    [
      'plot not svg',
      ['locate', '--model', planted, '--capability', 'span-0', '--plot', join(tmpdir(), 'x.png')],
      /--plot must name an .svg file/,
    ],
    [
      'missing model',
      ['locate', '--model', '/nonexistent/model.bin', '--capability', 'induction', '--backend', 'cpu'],
      /model not found/,
    ],
    [
      'target not listed',
      ['ablate', '--model', planted, '--heads', '0.1', '--capabilities', 'span-0', '--target', 'span-1'],
      /--target 'span-1' is not among --capabilities/,
    ],
    ['missing heads', ['ablate', '--model', planted], /required option '--heads <list>'/],
  ]
  for (const [name, argv, message] of cases) {
    it(name, async () => {
      const { code, stdout, stderr } = await runCli(['knockout', ...argv])
      expect(code).not.toBe(0)
      expect(stdout).toBe('')
      expect(stderr).toMatch(message)
      expect(
        stderr
          .trim()
          .split('\n')
          .filter((l) => !l.startsWith('(run with --help')).length,
      ).toBe(1)
    })
  }
})

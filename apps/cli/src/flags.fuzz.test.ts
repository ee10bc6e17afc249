// Every numeric flag of every command, enumerated from buildProgram() (so flags added later are covered),
// given NaN, Infinity, -1, 0, 1e300 and a word: a usage error (exit 2) with one error line naming the
// flag, before any work and before any --out is created. Values a flag legitimately accepts are data
// (ACCEPTS below), checked against the flag's parser instead of running the command. Every other
// value-taking flag must be listed in NOT_NUMERIC, so a new flag cannot go untested unnoticed.
import { existsSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { serializeSafetensors } from '@attnlab/core'
import type { Command, Option } from 'commander'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { runCli, TINY_RUN_FLAGS, useTempDir } from './cli.test-utils.ts'
import { buildProgram } from './program.ts'

const HOSTILE = ['NaN', 'Infinity', '-1', '0', '1e300', 'many'] as const
type Hostile = (typeof HOSTILE)[number]

/**
 * Values a flag accepts on purpose, with why: by `command --flag`, else by long name for every command that
 * has it. Everything else in HOSTILE must be refused.
 */
const ACCEPTS: Readonly<Record<string, readonly Hostile[]>> = {
  // Seeds and indices start at 0.
  '--seed': ['0'],
  '--task-seed': ['0'],
  '--eval-seed': ['0'],
  // 0 turns the feature off: online training, no warmup, no weight decay, no dropout, no momentum,
  // no checkpoints between evaluations, no ridge term, no sinks, no prefix, no query init.
  '--train-size': ['0'],
  '--warmup': ['0'],
  '--weight-decay': ['0'],
  '--dropout': ['0'],
  '--momentum': ['0'],
  '--checkpoint-every': ['0'],
  '--lambda': ['0'],
  '--sinks': ['0'],
  '--prefix': ['0'],
  '--query-init': ['0'],
  // Sampling temperature 0 is greedy decoding.
  '--temperature': ['0'],
  // A d_mlp of 0 is an attention-only model.
  '--d-mlp': ['0'],
  // Token ids start at 0.
  '--prompt-ids': ['0'],
  // A target sparsity of 0 is the dense baseline of the comparison.
  '--sparsity': ['0'],
  // Generating 0 tokens runs the prompt only.
  '--max-tokens': ['0'],
  // The reduced ODE's noise seed may be any integer; eps 0 keeps the heads identical (the symmetric saddle).
  'dynamics simulate --seed': ['-1', '0'],
  '--eps': ['0'],
  // `train --steps 0` saves the initial model; `--eval-every 0` evaluates only at the end.
  'train --steps': ['0'],
  'train --eval-every': ['0'],
  // An attention bias of 0 nats is the intervention's no-op control; blocks and heads count from 0.
  '--attention-bias': ['0'],
  '--bias-layers': ['0'],
  '--bias-heads': ['0'],
  // Retries and trial indices count from 0.
  '--retries': ['0'],
  '--index': ['0'],
}

/**
 * Known gaps, each still accepted (the test fails once it is refused, so the entry must go). None: the learning
 * rate and the gradient clip gained upper bounds (10 and 1e6) in `@attnlab/experiments`' training settings schema.
 */
const PENDING: Readonly<Record<string, readonly Hostile[]>> = {}

/** Value-taking flags that are not numbers (paths, names, text, lists of names), by long name. */
const NOT_NUMERIC = new Set([
  '--out',
  '--resume',
  '--init-from',
  '--plot',
  '--model',
  '--tokenizer',
  '--task-options',
  '--answer-prefix',
  '--qkv',
  '--prompt',
  '--prompt-file',
  '--text',
  '--capability',
  '--capabilities',
  '--controls',
  '--target',
  '--heads',
  '--methods',
  '--tasks',
  '--attention',
  '--mask-mode',
  '--metric',
  '--x',
  '--facet',
  '--queue',
  '--partition',
  '--time',
  '--command',
  '--artifacts',
  '--name',
  '--from',
  '--into',
  '--part',
])

const AIDREAMS = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../shared/models/aidreams260K')
const HAVE_MODEL = existsSync(join(AIDREAMS, 'model.bin'))
if (!HAVE_MODEL) console.warn(`[attnlab] ${AIDREAMS} is absent: flags of commands that need a model are skipped`)

const PLANTED = resolve(
  dirname(fileURLToPath(import.meta.url)),
  '../../../packages/knockout/src/__fixtures__/planted-minimal',
)
const SPEC = resolve(dirname(fileURLToPath(import.meta.url)), '../../../examples/sweeps/emergence-genlen.yaml')
const dir = useTempDir('attnlab-flags-')
const counts = { flags: 0, rejected: 0, accepted: 0, pending: 0 }
beforeAll(() => {
  const f32 = (shape: number[]) => ({
    dtype: 'F32' as const,
    shape,
    data: new Float32Array(shape.reduce((a, b) => a * b, 1)).map((_, i) => Math.sin(i)),
  })
  writeFileSync(
    join(dir(), 'qkv.safetensors'),
    serializeSafetensors({ q: f32([2, 8, 4]), k: f32([1, 8, 4]), v: f32([1, 8, 4]) }),
  )
  writeFileSync(join(dir(), 'prompt.txt'), 'Once upon a time there was a little cat.')
})
afterEach(() => {
  vi.restoreAllMocks()
})
afterAll(() => {
  console.info(
    `CLI flags: ${counts.flags} numeric flag occurrences, ${counts.rejected} hostile values refused with exit 2, ` +
      `${counts.accepted} accepted as documented, ${counts.pending} known gaps (PENDING)`,
  )
})

/** The arguments that make each command valid apart from the flag under test (`OUT` is replaced). */
function baseArgs(path: string): string[] | null {
  const model = join(AIDREAMS, 'model.bin')
  const table: Record<string, string[] | null> = {
    emergence: [...TINY_RUN_FLAGS, '--analysis-size', '8', '--eval-every', '1', '--steps', '1', '--out', 'OUT'],
    train: [...TINY_RUN_FLAGS, '--eval-every', '1', '--steps', '1', '--out', 'OUT'],
    info: [],
    'sparse apply': ['--method', 'dense', '--qkv', join(dir(), 'qkv.safetensors'), '--out', 'OUT.safetensors'],
    'sparse compare': HAVE_MODEL
      ? [
          '--model',
          model,
          '--prompt-file',
          join(dir(), 'prompt.txt'),
          '--methods',
          'dense',
          '--decode-steps',
          '1',
        ].concat(['--backend', 'cpu'])
      : null,
    // Every hostile value is refused while parsing, before the model is read.
    'sparse eval': ['--model', join(dir(), 'no-model'), '--tasks', 'niah-tokens', '--methods', 'dense'].concat([
      '--lengths',
      '8',
      '--backend',
      'cpu',
    ]),
    'dynamics simulate': ['--T', '4', '--points', '10'],
    generate: HAVE_MODEL ? ['--model', model, '--prompt-ids', '1,2', '--max-tokens', '1', '--backend', 'cpu'] : null,
    'markov sample': ['--sequences', '2', '--out', 'OUT.safetensors'],
    'markov oracle': ['--vocab', '4', '--spans', '1'],
    'knockout capabilities': HAVE_MODEL ? ['--model', model, '--count', '2', '--backend', 'cpu'] : null,
    'knockout locate': HAVE_MODEL
      ? ['--model', model, '--capability', 'text', '--count', '2', '--method', 'greedy', '--controls', 'none'].concat([
          '--top',
          '1',
          '--backend',
          'cpu',
        ])
      : null,
    'knockout patch': ['--from', PLANTED, '--into', PLANTED, '--count', '2', '--backend', 'cpu'],
    'knockout ablate': HAVE_MODEL ? ['--model', model, '--heads', 'L0H0', '--count', '2', '--backend', 'cpu'] : null,
    'sweep run': [SPEC, '--out', 'OUT', '--backend', 'cpu'],
    'sweep run-trial': [join(dir(), 'no-sweep'), '--backend', 'cpu'],
    'sweep slurm': [SPEC, '--out', 'OUT'],
    'sweep submit': [SPEC, '--queue', 'http://127.0.0.1:9', '--out', 'OUT'],
    worker: ['--queue', 'http://127.0.0.1:9'],
    'sweep collect': [join(dir(), 'no-sweep'), '--queue', 'http://127.0.0.1:9'],
    'sweep report': [join(dir(), 'no-sweep')],
    'sweep status': ['--queue', 'http://127.0.0.1:9'],
    'study run': ['emergence-time', '--out', 'OUT', '--backend', 'cpu'],
    'kernels build': [],
    'kernels status': [],
  }
  if (!(path in table)) throw new Error(`no base arguments for '${path}': add the command to baseArgs`)
  return table[path] as string[] | null
}

interface Flag {
  readonly path: string
  readonly option: Option
  readonly global: boolean
}

/** Every value-taking option of every command that runs (leaves), plus the program's global ones. */
function flags(): Flag[] {
  const program = buildProgram()
  const out: Flag[] = []
  const walk = (command: Command, path: string[]): void => {
    if (command.commands.length === 0) {
      for (const option of command.options) out.push({ path: path.join(' '), option, global: false })
    }
    for (const sub of command.commands) walk(sub, [...path, sub.name()])
  }
  walk(program, [])
  for (const option of program.options) {
    if (option.long !== '--version') out.push({ path: 'info', option, global: true })
  }
  return out.filter(({ option }) => option.required || option.optional)
}

/** Whether the option parses numbers: its parser returns a number or numbers for some plain number. */
function isNumeric(option: Option): boolean {
  if (option.argChoices !== undefined) return false
  if (option.long !== undefined && NOT_NUMERIC.has(option.long)) return false
  if (option.parseArg === undefined) return true // parsed by the command: must be listed if not a number
  for (const probe of ['1', '2', '3', '4', '8', '16', '20', '64', '0.5', '0.01', '1e-8', '1000', '1,1']) {
    try {
      const value: unknown = option.parseArg(probe, undefined)
      if (typeof value === 'number' || (Array.isArray(value) && value.every((v) => typeof v === 'number'))) return true
    } catch {
      // not this probe
    }
  }
  return false
}

describe('every numeric flag refuses NaN, Infinity, -1, 0, 1e300 and a word (exit 2, nothing created)', () => {
  it('every value-taking flag is numeric or listed as not numeric', () => {
    const unclassified = flags().filter(({ option }) => {
      if (option.argChoices !== undefined || isNumeric(option)) return false
      return !NOT_NUMERIC.has(option.long as string)
    })
    expect(unclassified.map(({ path, option }) => `${path} ${option.long}`)).toEqual([])
  })

  const all = flags().filter(({ option }) => isNumeric(option))
  const commands = [...new Set(all.map(({ path }) => path))]
  for (const path of commands) {
    it(`attnlab ${path}`, async () => {
      const base = baseArgs(path)
      if (base === null) return
      const problems: string[] = []
      for (const { option, global } of all.filter((flag) => flag.path === path)) {
        counts.flags++
        const long = option.long as string
        for (const value of HOSTILE) {
          if ((ACCEPTS[`${path} ${long}`] ?? ACCEPTS[long] ?? []).includes(value)) {
            counts.accepted++
            if (option.parseArg !== undefined) expect(() => option.parseArg?.(value, undefined)).not.toThrow()
            continue
          }
          const out = join(dir(), `out-${counts.flags}-${value}`)
          const args = [
            ...(global ? [long, value] : []),
            ...path.split(' '),
            ...base.map((arg) => arg.replace(/^OUT/, out)),
            ...(global ? [] : [long, value]),
          ]
          const started = performance.now()
          const { code, stderr } = await runCli(args)
          const seconds = (performance.now() - started) / 1000
          if (seconds > 5) process.stdout.write(`slow (${seconds.toFixed(1)} s): attnlab ${args.join(' ')}\n`)
          const errorLines = stderr.split('\n').filter((line) => line.startsWith('attnlab: error'))
          const created = existsSync(out) || existsSync(`${out}.safetensors`)
          const refused = code === 2 && errorLines.length === 1 && errorLines[0]?.includes(long) === true && !created
          if (PENDING[`${path} ${long}`]?.includes(value) === true) {
            if (refused) problems.push(`${long} ${value} is refused now: remove it from PENDING`)
            else counts.pending++
          } else if (!refused) {
            problems.push(
              `${long} ${value}: exit ${code}${created ? ', created --out' : ''}: ${errorLines.join(' | ')}`,
            )
          } else counts.rejected++
        }
      }
      expect(problems.join('\n')).toBe('')
    }, 300_000)
  }
})

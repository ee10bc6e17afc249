// `attnlab sweep`: usage errors (exit 2, nothing written), a real `sweep run` stopped by SIGTERM
// (exit 143, state kept) and resumed, the SLURM script's body run per array index, the report.
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, readdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { runCli, useTempDir } from '../cli.test-utils.ts'

const repo = fileURLToPath(new URL('../../../../', import.meta.url))
const launcher = join(repo, 'attnlab')
const root = useTempDir('attnlab-sweep-cli-')

afterEach(() => {
  vi.restoreAllMocks()
})

/** A tiny emergence sweep: two generated lengths, one seed, `steps` steps. */
function tinySpec(steps: number): string {
  return [
    'name: cli-tiny',
    'experiment: emergence',
    'base:',
    '  task: { kind: sparse-markov, vocabSize: 8, spans: [1, 1], tau: 0.3 }',
    `  training: { steps: ${steps}, batchSize: 8, validationSize: 16, analysisSize: 16, evalEvery: 3 }`,
    'grid:',
    '  task.genLen: [4, 6]',
    'seeds: 1',
    '',
  ].join('\n')
}

async function specFile(name: string, text: string): Promise<string> {
  const path = join(root(), name)
  await writeFile(path, text)
  return path
}

/** The records of a sweep directory's trials.jsonl. */
function records(dir: string): { id: string; index: number; status: string }[] {
  return readFileSync(join(dir, 'trials.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line))
}

describe('attnlab sweep --help', () => {
  it('names every experiment a spec can run', () => {
    const help = execFileSync(launcher, ['sweep', 'run', '--help'], { encoding: 'utf8' })
    expect(help.replace(/\s+/g, ' ')).toContain('experiment (emergence or train or sparse-eval)')
  })
})

describe('attnlab sweep: usage errors', () => {
  it('sweep slurm refuses a bad --time, --partition or --command with exit 2, before writing sweep.json', async () => {
    const spec = await specFile('slurm-flags.yaml', tinySpec(6))
    const out = join(root(), 'never-slurm')
    const cases: [string[], string][] = [
      [['--time', 'abc'], "attnlab: error: --time 'abc' is not a SLURM time limit"],
      [['--time', '30min'], "attnlab: error: --time '30min' is not a SLURM time limit"],
      [['--partition', 'a b'], "attnlab: error: --partition 'a b' is not a SLURM partition list"],
      [['--partition', 'a\nb'], 'attnlab: error: --partition "a\\nb" is not a SLURM partition list'],
      [['--command', ' '], "attnlab: error: --command must name a program, got ' '"],
    ]
    for (const [flags, message] of cases) {
      const result = await runCli(['sweep', 'slurm', spec, '--out', out, '--dry-run', '--backend', 'cpu', ...flags])
      expect(result.code).toBe(2)
      expect(result.stderr).toContain(message)
      expect(existsSync(out)).toBe(false)
    }
    for (const time of ['30', '30:00', '01:30:00', '2-12', '2-12:30', '2-12:30:00', 'UNLIMITED']) {
      const ok = join(root(), `slurm-time-${time.replace(/:/g, '')}`)
      const result = await runCli([
        'sweep',
        'slurm',
        spec,
        '--out',
        ok,
        '--dry-run',
        '--backend',
        'cpu',
        '--time',
        time,
      ])
      expect(result.code).toBe(0)
      expect(readFileSync(join(ok, 'sweep.sbatch'), 'utf8')).toContain(`#SBATCH --time=${time}\n`)
    }
  })

  it('refuses a bad spec with exit 2 before creating anything', async () => {
    const spec = await specFile('typo.yaml', tinySpec(6).replace('seeds: 1', 'seds: 1'))
    const out = join(root(), 'never')
    const result = await runCli(['sweep', 'run', spec, '--out', out, '--backend', 'cpu'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(`${spec}: seds: unknown key (did you mean 'seeds'?)`)
    expect(existsSync(out)).toBe(false)
    const bad = await specFile('bad.yaml', tinySpec(6).replace('[4, 6]', '[4, 0]'))
    const refused = await runCli(['sweep', 'slurm', bad, '--out', out, '--dry-run'])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain('grid.task.genLen: value 0 refused by the emergence experiment')
    expect(existsSync(out)).toBe(false)
    const missing = await runCli(['sweep', 'run', join(root(), 'none.yaml'), '--out', out])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain('cannot read the sweep spec')
    const good = await specFile('good.yaml', tinySpec(6))
    const webgl = await runCli(['sweep', 'run', good, '--out', out, '--backend', 'webgl'])
    expect(webgl.code).toBe(2)
    expect(webgl.stderr).toContain('--backend webgl cannot run here; backends available here: cpu')
    // A sparse-eval sweep whose model is not here: named before --out exists (each trial would fail on it).
    const evalSpec = await specFile(
      'eval.yaml',
      [
        'name: cli-eval',
        'experiment: sparse-eval',
        'base:',
        `  model: ${join(root(), 'no-model')}`,
        '  task: { kind: niah-tokens, needles: 2 }',
        '  lengths: [64]',
        'grid:',
        '  sparsities: [[0.5], [0.8]]',
        '',
      ].join('\n'),
    )
    const noModel = await runCli(['sweep', 'run', evalSpec, '--out', out, '--backend', 'cpu'])
    expect(noModel.code).toBe(2)
    expect(noModel.stderr).toContain(`trial 1: model ${join(root(), 'no-model')}: no such file or directory`)
    expect(existsSync(out)).toBe(false)
    // a tokenizer that is missing, or is not one, is refused when the spec is read too
    const text = join(root(), 'notes.txt')
    await writeFile(text, 'these are notes, not a tokenizer\n')
    const textModel = join(root(), 'model.bin')
    await writeFile(textModel, '')
    for (const [tokenizer, message] of [
      [
        join(root(), 'no-tokenizer.bin'),
        /trial 1: tokenizer .*no-tokenizer\.bin: no such file \(the spec's tokenizer\)/,
      ],
      [text, /trial 1: the spec's tokenizer .*notes\.txt: .*neither a llama2\.c tokenizer\.bin nor a Hugging Face/],
    ] as const) {
      const textSpec = await specFile(
        'text-eval.yaml',
        [
          'name: cli-text-eval',
          'experiment: sparse-eval',
          'base:',
          `  model: ${textModel}`,
          `  tokenizer: ${tokenizer}`,
          '  task: { kind: ruler-niah }',
          '',
        ].join('\n'),
      )
      const refused = await runCli(['sweep', 'run', textSpec, '--out', out, '--backend', 'cpu'])
      expect(refused.code).toBe(2)
      expect(refused.stderr).toMatch(message)
      expect(existsSync(out)).toBe(false)
    }
    const noOut = await runCli(['sweep', 'run', spec])
    expect(noOut.code).toBe(2)
    expect(noOut.stderr).toContain("required option '--out <dir>' not specified")
    expect(existsSync(out)).toBe(false)
  })

  it('refuses run-trial on a directory without a sweep and an index out of range', async () => {
    const empty = join(root(), 'empty')
    await mkdir(empty)
    const none = await runCli(['sweep', 'run-trial', empty, '--index', '0'])
    expect(none.code).toBe(2)
    expect(none.stderr).toContain(`${empty}: no sweep.json there (not a sweep directory)`)
    const spec = await specFile('range.yaml', tinySpec(6))
    const out = join(root(), 'range')
    expect((await runCli(['sweep', 'slurm', spec, '--out', out, '--dry-run', '--backend', 'cpu'])).code).toBe(0)
    const range = await runCli(['sweep', 'run-trial', out, '--index', '2'])
    expect(range.code).toBe(2)
    expect(range.stderr).toContain(`--index 2 is out of range: ${out} has trials 0 to 1`)
    expect(await readdir(out)).toEqual(expect.arrayContaining(['sweep.json', 'sweep.sbatch', 'slurm']))
    const report = await runCli(['sweep', 'report', out])
    expect(report.code).toBe(2)
    expect(report.stderr).toContain('holds no trial records')
    const missing = join(root(), 'no-such-sweep')
    const absent = await runCli(['sweep', 'report', missing])
    expect(absent.code).toBe(2)
    expect(absent.stderr.trim()).toBe(`attnlab: error: ${missing}: no such directory (give a sweep's --out)`)
    expect(existsSync(missing)).toBe(false)
  })
})

describe('attnlab sweep report on hand-made records', () => {
  it('warns about done trials that have no number for a --metric asked for', async () => {
    const out = join(root(), 'mixed-keys')
    await mkdir(out, { recursive: true })
    const record = (index: number, metrics: Record<string, number | null>) => ({
      format: 'attnlab-sweep-record/1',
      sweep: 'mixed',
      id: `t${index}`,
      index,
      experiment: 'sparse-eval',
      params: { samples: 10 + index },
      seed: 0,
      settings: {},
      status: 'done',
      attempts: 1,
      error: null,
      attnlabVersion: '0.0.0',
      backend: 'cpu',
      host: 'h',
      startedAt: '2026-12-04T00:00:00.000Z',
      finishedAt: '2026-12-04T00:00:01.000Z',
      durationSeconds: 1,
      metrics,
      runDirectory: `trials/t${index}`,
    })
    const records = [
      record(0, { 'quest:scoreL32S0.5': 0.8 }),
      record(1, { 'quest:scoreL32S0.5': 0.7 }),
      record(2, { 'scoreL32S0.5': 0.6 }),
    ]
    await writeFile(join(out, 'trials.jsonl'), records.map((r) => `${JSON.stringify(r)}\n`).join(''))
    const report = await runCli(['sweep', 'report', out, '--metric', 'quest:scoreL32S0.5'])
    expect(report.code, report.stderr).toBe(0)
    expect(report.stderr).toContain(
      `attnlab: warning: 1 done trial of ${out} (2) has no number for quest:scoreL32S0.5; it is left out`,
    )
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('1 of 3 done trials has no number for it')
  })
})

describe('attnlab sweep: real processes', () => {
  it('SIGTERM stops `sweep run` (exit 143, state kept); --resume completes each trial once', async () => {
    const spec = await specFile('term.yaml', tinySpec(60))
    const out = join(root(), 'term')
    const args = ['sweep', 'run', spec, '--out', out, '--workers', '1', '--backend', 'cpu']
    const child = spawn(launcher, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    // Stop once the first trial has a checkpoint (its run directory holds seeds/0/checkpoint).
    const started = Date.now()
    for (;;) {
      const trials = existsSync(join(out, 'trials')) ? await readdir(join(out, 'trials')) : []
      if (trials.some((id) => existsSync(join(out, 'trials', id, 'seeds', '0', 'checkpoint')))) break
      if (Date.now() - started > 240_000) throw new Error(`no checkpoint in time: ${stderr}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    child.kill('SIGTERM')
    expect(await exited, stderr).toBe(143)
    expect(stderr).toContain('interrupted: stopping the running trials at their next step')
    expect(stderr).toContain(`--out ${out} --resume)`)
    const kept = existsSync(join(out, 'trials.jsonl')) ? records(out).length : 0
    expect(kept).toBeLessThan(2)
    const resumed = spawnSync(launcher, [...args, '--resume'], { encoding: 'utf8' })
    expect(resumed.status, resumed.stderr).toBe(0)
    expect(resumed.stdout).toMatch(/done, 0 failed, 0 interrupted, \d skipped/)
    expect(
      records(out)
        .map((r) => r.index)
        .sort(),
    ).toEqual([0, 1])
  }, 300_000)

  it('writes the SLURM script (--dry-run) whose body runs each trial with SLURM_ARRAY_TASK_ID', async () => {
    const spec = await specFile('slurm.yaml', tinySpec(6))
    const out = join(root(), 'slurm')
    const written = await runCli([
      'sweep',
      'slurm',
      spec,
      '--out',
      out,
      '--time',
      '00:10:00',
      '--cpus-per-task',
      '1',
      '--dry-run',
      '--backend',
      'cpu',
      '--command',
      launcher,
    ])
    expect(written.code, written.stderr).toBe(0)
    expect(written.stdout).toContain(`2 array task(s) of 2 trials: ${join(out, 'sweep.sbatch')}`)
    const script = readFileSync(join(out, 'sweep.sbatch'), 'utf8')
    expect(script).toContain('#SBATCH --array=0-1\n')
    expect(script).toContain('#SBATCH --time=00:10:00\n')
    expect(script).toContain(`exec ${launcher} sweep run-trial ${out} --index "$SLURM_ARRAY_TASK_ID"`)
    // As SLURM runs it: the script's body under bash, once per array index.
    for (const index of [0, 1]) {
      const env = { ...process.env, SLURM_ARRAY_TASK_ID: String(index) }
      const output = execFileSync('bash', [join(out, 'sweep.sbatch')], { env, encoding: 'utf8' })
      expect(output).toMatch(new RegExp(`^trial ${index} [0-9a-f]{16} done in`, 'm'))
    }
    expect(records(out).map((r) => [r.index, r.status])).toEqual([
      [0, 'done'],
      [1, 'done'],
    ])
    // A resubmission has nothing left to run.
    const again = await runCli(['sweep', 'slurm', spec, '--out', out, '--dry-run', '--backend', 'cpu'])
    expect(again.stdout).toContain('every trial of')
    // The report of the SLURM-run sweep.
    const report = await runCli(['sweep', 'report', out, '--metric', 'finalValidationLoss'])
    expect(report.code, report.stderr).toBe(0)
    expect(report.stdout).toMatch(/finalValidationLoss against task\.genLen:\n {2}task\.genLen = 4: mean \d\.\d{3}/)
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('<h2>finalValidationLoss</h2><svg')
    const csv = readFileSync(join(out, 'trials.csv'), 'utf8').trimEnd().split('\n')
    expect(csv).toHaveLength(3)
    expect(csv[0]).toMatch(/^index,id,status,attempts,seed,task\.genLen,finalValidationLoss,/)
  }, 300_000)
})

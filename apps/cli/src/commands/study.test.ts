// `attnlab study`: the list, the specs as YAML (equal to the library's), usage errors before
// anything is written, and a real (tiny: --seeds 1 --steps 4) run of a study to its report and
// findings, resumed without re-running a trial.
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { parse } from 'yaml'
import { getStudy } from '@attnlab/sweeps'
import { runCli, useTempDir } from '../cli.test-utils.ts'

const root = useTempDir('attnlab-study-cli-')

afterEach(() => {
  vi.restoreAllMocks()
})

describe('attnlab study list / spec', () => {
  it('lists the studies with their sources', async () => {
    const result = await runCli(['study', 'list', '--json'])
    expect(result.code).toBe(0)
    const rows = JSON.parse(result.stdout) as { name: string; source: string }[]
    expect(rows.map((r) => r.name)).toEqual([
      'linear-map-sparsity',
      'emergence-time',
      'width',
      'architecture',
      'ca-context',
      'pre-pretraining',
      'lm-induction',
      'sparse-frontier',
    ])
    for (const row of rows) {
      expect(row.source).toMatch(row.name === 'sparse-frontier' ? /arXiv 2504\.17768/ : /arXiv 2606\.25010/)
    }
  })

  it("prints a part's spec as the YAML of the library's spec, default and full", async () => {
    for (const full of [false, true]) {
      const result = await runCli(['study', 'spec', 'width', '--part', 'fixed-width', ...(full ? ['--full'] : [])])
      expect(result.code).toBe(0)
      const part = getStudy('width')
        .parts(full ? 'full' : 'default')
        .find((p) => p.name === 'fixed-width')
      expect(parse(result.stdout)).toEqual(part?.spec)
    }
  })

  it('refuses an unknown study (did you mean) and an unknown part, exit 2', async () => {
    const unknown = await runCli(['study', 'spec', 'widht'])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toMatch(/'widht' is not a study; did you mean 'width'\?/)
    const part = await runCli(['study', 'spec', 'width', '--part', 'nope'])
    expect(part.code).toBe(2)
    expect(part.stderr).toMatch(/--part nope: width has the parts fixed-head-size, fixed-width/)
  })
})

describe('attnlab study run', () => {
  it('refuses bad flags and foreign directories before writing anything', async () => {
    const out = join(root(), 'refused')
    for (const flags of [
      ['--seeds', '0'],
      ['--steps', '-1'],
      ['--seeds', 'NaN'],
      ['--workers', '2', '--queue', 'redis://127.0.0.1:1/0'],
      ['--no-wait'],
      ['--queue', 'notaurl'],
    ]) {
      const result = await runCli(['study', 'run', 'width', '--out', out, ...flags])
      expect(result.code, flags.join(' ')).toBe(2)
      expect(existsSync(out), flags.join(' ')).toBe(false)
    }
    const foreign = join(root(), 'foreign')
    await mkdir(foreign)
    await writeFile(join(foreign, 'notes.txt'), 'mine')
    const refused = await runCli(['study', 'run', 'width', '--out', foreign])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(/is not empty and holds no study/)
    const report = await runCli(['study', 'report', foreign])
    expect(report.code).toBe(2)
    expect(report.stderr).toMatch(/holds no study\.json/)
    const notDir = await runCli(['study', 'report', join(foreign, 'notes.txt')])
    expect(notDir.code).toBe(2)
    expect(notDir.stderr).toMatch(/notes\.txt is a file, not a study directory/)
    expect(notDir.stderr).not.toMatch(/ENOTDIR/)
    await writeFile(join(foreign, 'study.json'), '{"format": "attnlab-study/1", "study": "widht", "size": "default"}')
    const bad = await runCli(['study', 'report', foreign])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/'widht' is not a study/)
  })

  it('runs a tiny emergence-time to its report and findings, and resumes without re-running', async () => {
    const out = join(root(), 'emergence-time')
    const flags = ['--out', out, '--seeds', '1', '--steps', '4', '--workers', '2', '--backend', 'cpu']
    const result = await runCli(['study', 'run', 'emergence-time', ...flags, '--json'])
    expect(result.code, result.stderr).toBe(0)
    const printed = JSON.parse(result.stdout) as { study: string; findings: { verdict: string }[] }
    expect(printed.study).toBe('emergence-time')
    expect(printed.findings).toHaveLength(3)
    const findings = JSON.parse(readFileSync(join(out, 'findings.json'), 'utf8')) as {
      overrides: { seeds: number; steps: number }
      tables: { rows: unknown[][] }[]
    }
    expect(findings.overrides).toEqual({ seeds: 1, steps: 4 })
    // Three generated lengths of the chain and one state size of the linear map, one seed each.
    expect(findings.tables[0]?.rows.map((r) => r.slice(0, 3))).toEqual([
      ['sparse-markov', 'generated length 8', 1],
      ['sparse-markov', 'generated length 16', 1],
      ['sparse-markov', 'generated length 32', 1],
      ['linear-map', 'state size S 8', 1],
    ])
    const html = readFileSync(join(out, 'report.html'), 'utf8')
    expect(html).toContain('Run with 1 seed(s) per setting and 4 training steps per trial')
    const lines = (part: string): number =>
      readFileSync(join(out, part, 'trials.jsonl'), 'utf8')
        .trim()
        .split('\n').length
    expect([lines('sparse-markov'), lines('linear-map')]).toEqual([3, 1])

    const again = await runCli(['study', 'run', 'emergence-time', ...flags])
    expect(again.code).toBe(2)
    expect(again.stderr).toMatch(/already holds this study; continue it with: .* --seeds 1 --steps 4 --out .* --resume/)
    const other = await runCli(['study', 'run', 'emergence-time', ...flags.slice(0, 2), '--seeds', '2'])
    expect(other.code).toBe(2)
    expect(other.stderr).toMatch(
      /holds the study 'emergence-time' run with the default size --seeds 1 --steps 4; give those flags with --resume/,
    )
    const resumed = await runCli(['study', 'run', 'emergence-time', ...flags, '--resume'])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(resumed.stderr).toMatch(/3 already done/)
    expect([lines('sparse-markov'), lines('linear-map')]).toEqual([3, 1])
    // A record that is not one of this study's trials (left by another budget before --force) is not counted.
    const first = readFileSync(join(out, 'sparse-markov', 'trials.jsonl'), 'utf8').split('\n')[0] as string
    const foreign = { ...JSON.parse(first), id: '0000000000000000', seed: 7 }
    await writeFile(join(out, 'sparse-markov', 'trials.jsonl'), `${JSON.stringify(foreign)}\n`, { flag: 'a' })
    const report = await runCli(['study', 'report', out])
    expect(report.code).toBe(0)
    expect(report.stdout).toMatch(/\[(reproduced|not reproduced|undetermined)\] Emergence time spreads over seeds/)
    expect(report.stderr).not.toMatch(/covers only/)
    const counted = JSON.parse(readFileSync(join(out, 'findings.json'), 'utf8')) as {
      tables: { rows: unknown[][] }[]
      trials: Record<string, { done: number; of: number }>
    }
    expect(counted.tables[0]?.rows[0]?.slice(0, 3)).toEqual(['sparse-markov', 'generated length 8', 1])
    expect(counted.trials).toEqual({ 'sparse-markov': { done: 3, of: 3 }, 'linear-map': { done: 1, of: 1 } })
    // A part with records missing (one line left): the report says what it covers and how to finish.
    const partial = join(root(), 'partial')
    await mkdir(join(partial, 'sparse-markov'), { recursive: true })
    await writeFile(join(partial, 'study.json'), readFileSync(join(out, 'study.json')))
    await writeFile(join(partial, 'sparse-markov', 'trials.jsonl'), `${first}\n`)
    const some = await runCli(['study', 'report', partial])
    expect(some.code, some.stderr).toBe(0)
    expect(some.stderr).toMatch(
      /covers only the finished trials \(sparse-markov: 1 of 3 trials, linear-map: 0 of 1 trials\)/,
    )
    expect(some.stderr).toMatch(
      /continue with attnlab study run emergence-time --seeds 1 --steps 4 --out .*partial --resume/,
    )
    const partialFindings = JSON.parse(readFileSync(join(partial, 'findings.json'), 'utf8')) as typeof counted
    expect(partialFindings.trials['sparse-markov']).toEqual({ done: 1, of: 3 })
    // A study directory whose records are all unreadable is refused, like sweep report.
    const torn = join(root(), 'torn')
    await mkdir(join(torn, 'sparse-markov'), { recursive: true })
    await writeFile(join(torn, 'study.json'), readFileSync(join(out, 'study.json')))
    await writeFile(join(torn, 'sparse-markov', 'trials.jsonl'), first.slice(0, 40))
    const refused = await runCli(['study', 'report', torn])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(/holds no trial records of this study/)
  }, 180_000)
})

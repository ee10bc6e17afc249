/**
 * Range and input messages as a user sees them: one wording for every range (core's
 * `describeRange`: ">= 1", "> 0", "in (0, 1]", integers as integers), and plain words for the
 * file and backend errors a fresh clone ran into.
 */
import { describe, expect, it } from 'vitest'
import { runCli } from './cli.test-utils.ts'
import { intListParser, intParser, numberParser } from './options.ts'

const message = (parse: (value: string) => unknown, value: string): string => {
  try {
    parse(value)
  } catch (error) {
    return (error as Error).message
  }
  return 'no error'
}

describe('flag parsers word ranges the one way', () => {
  it('a lower bound alone reads ">= 1", not "[1, Infinity]"', () => {
    expect(message(intParser('--steps', 1), '0')).toBe('--steps must be >= 1, got 0')
    expect(message(intParser('--steps', 1), 'x')).toBe("--steps must be an integer, got 'x'")
    expect(message(intParser('--seed', 0, Number.MAX_SAFE_INTEGER), '-1')).toBe('--seed must be >= 0, got -1')
    expect(message(intParser('--threads', 1, 256), '300')).toBe('--threads must be in [1, 256], got 300')
    expect(message(intListParser('--spans', 1), '2,0')).toBe('--spans values must be >= 1, got 0')
  })

  it('a positive bound reads "> 0" or "(0, max]", never 5e-324; integers print as integers', () => {
    expect(message(numberParser('--t-max', Number.MIN_VALUE, 1e9), '0')).toBe(
      '--t-max must be in (0, 1000000000], got 0',
    )
    expect(message(numberParser('--lr', 0, Infinity, { minExclusive: true }), '0')).toBe('--lr must be > 0, got 0')
    expect(message(numberParser('--alpha', 0), '-1')).toBe('--alpha must be >= 0, got -1')
    expect(numberParser('--top-p', 0, 1, { minExclusive: true })('1')).toBe(1)
  })
})

describe('the quoted cases, end to end', () => {
  it('--m -2 and --m 0 get the same message (the library needs m > 0)', async () => {
    for (const value of ['-2', '0']) {
      const { code, stderr } = await runCli(['emergence', '--m', value, '--steps', '1'])
      expect(code).toBe(2)
      expect(stderr).toContain(`--m must be in (0, 100], got ${value}`)
    }
  })

  it('--top-p says (0, 1], as its help does', async () => {
    const { code, stderr } = await runCli(['generate', '--model', 'nowhere', '--top-p', '0'])
    expect(code).toBe(2)
    expect(stderr).toContain('--top-p must be in (0, 1], got 0')
  })

  it('dynamics --t-max 0 says (0, 1000000000], not [5e-324, 1000000000]', async () => {
    const { code, stderr } = await runCli(['dynamics', 'simulate', '--t-max', '0'])
    expect(code).toBe(2)
    expect(stderr).toContain('--t-max must be in (0, 1000000000], got 0')
  })

  it('--resume of a missing directory names it, without "checkpoint .:"', async () => {
    const { code, stderr } = await runCli([
      'train',
      '--resume',
      '/nonexistent-attnlab-run',
      '--steps',
      '1',
      '--backend',
      'cpu',
    ])
    expect(code).toBe(2)
    expect(stderr).toContain("checkpoint directory '/nonexistent-attnlab-run' does not exist")
    expect(stderr).not.toContain('checkpoint .:')
  })

  it('--out under a file says the path cannot be created, not that it "cannot be read"', async () => {
    const { code, stderr } = await runCli(['train', '--out', '/dev/null/x', '--steps', '1', '--backend', 'cpu'])
    expect(code).toBe(2)
    expect(stderr).toContain('/dev/null/x cannot be created: a part of the path is a file, not a directory (ENOTDIR)')
  })

  it('markov oracle --method exact that does not fit names flags, not library functions', async () => {
    const { code, stderr } = await runCli(['markov', 'oracle', '--method', 'exact'])
    expect(code).toBe(2)
    expect(stderr).toMatch(
      new RegExp(
        /--method exact enumerates d\^C = 50\^6 = 1\.56e\+10 windows, more than --max-states 1000000; use /.source +
          /--method monte-carlo/.source,
      ),
    )
    expect(stderr).not.toMatch(/restrictedContextEntropyMonteCarlo|maxStates/)
  })

  it('info --backend webgl says it runs only in a browser and does not suggest pnpm add', async () => {
    const { code, stderr } = await runCli(['info', '--backend', 'webgl'])
    expect(code).toBe(2)
    expect(stderr).toContain("Backend 'webgl' is unavailable: webgl runs only in a browser")
    expect(stderr).not.toContain('pnpm add')
  })
})

describe('a flag given twice', () => {
  it('is refused for a list flag, naming both values, instead of the first list being dropped', async () => {
    const methods = await runCli(['sparse', 'eval', '--model', 'nowhere', '--methods', 'quest', '--methods', 'snapkv'])
    expect(methods.code).toBe(2)
    expect(methods.stderr).toContain(
      "--methods was given twice ('quest', then 'snapkv'); it takes one comma-separated list, e.g. " +
        '--methods quest,snapkv',
    )
    // the suggestion lists each entry once and drops empty ones
    const same = await runCli(['sparse', 'eval', '--model', 'nowhere', '--tasks', 'niah-tokens', '--tasks=niah-tokens'])
    expect(same.stderr.trim().split('\n')[0]).toMatch(/one comma-separated list, e.g. --tasks niah-tokens$/)
    const empty = await runCli(['sparse', 'eval', '--model', 'nowhere', '--lengths', '32', '--lengths='])
    expect(empty.stderr.trim().split('\n')[0]).toMatch(
      /--lengths was given twice \('32', then ''\); it takes one comma-separated list, e\.g\. --lengths 32$/,
    )
    // a list flag split after parsing (its value is still a string) is one too
    const heads = await runCli(['knockout', 'ablate', '--model', 'nowhere', '--heads', 'L0H0', '--heads', 'L1H1'])
    expect(heads.code).toBe(2)
    expect(heads.stderr).toContain('e.g. --heads L0H0,L1H1')
    const options = ['--task-options', 'hops=1', '--task-options=chains=1']
    const twice = await runCli(['sparse', 'eval', '--model', 'nowhere', '--tasks', 'ruler-vt', ...options])
    expect(twice.code).toBe(2)
    expect(twice.stderr).toContain("--task-options was given twice ('hops=1', then 'chains=1')")
  })

  it('lets the last scalar value win, and leaves variadic and boolean flags alone', async () => {
    // the second --steps wins: the error is about the first run's range check of the last value
    const steps = await runCli(['emergence', '--steps', '5', '--steps=0'])
    expect(steps.stderr).toContain('--steps must be >= 1, got 0')
    expect(steps.stderr).not.toContain('given twice')
    // `--metric a --metric b` collects both: the error is about the missing directory, not the repeat
    const report = await runCli(['sweep', 'report', '/nonexistent-sweep', '--metric', 'a', '--metric', 'b'])
    expect(report.stderr).toContain('no such directory')
    expect(report.stderr).not.toContain('given twice')
    const once = await runCli(['sparse', 'eval', '--model', 'nowhere', '--methods', 'quest', '--json', '--json'])
    expect(once.stderr).not.toContain('given twice')
  })
})

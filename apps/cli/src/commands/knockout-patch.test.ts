// attnlab knockout patch on the planted minimal model (head h owns span h): patching a checkpoint into itself
// changes nothing; into a copy whose head L0H1 attends uniformly, only L0H1's patch moves p(target); the table,
// JSON and HTML heatmap; usage errors (exit 2, no --plot written) for paths, heads, tasks and plot names.
import { existsSync, readFileSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { useBackend } from '@attnlab/core'
import { createTransformer } from '@attnlab/transformer'
import { loadCheckpoint, saveCheckpoint } from '@attnlab/transformer/node'
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { runCli, useTempDir } from '../cli.test-utils.ts'

const planted = fileURLToPath(
  new URL('../../../../packages/knockout/src/__fixtures__/planted-minimal', import.meta.url),
)
const dir = useTempDir('attnlab-knockout-patch-')
afterEach(() => {
  vi.restoreAllMocks()
})

/** Writes a copy of the planted checkpoint with `edit` applied to its weights and its extra. */
async function plantedCopy(
  name: string,
  edit: { zeroQueryOfHead?: number; task?: Record<string, unknown> },
): Promise<string> {
  const checkpoint = await loadCheckpoint(planted)
  const weights = new Map(checkpoint.weights)
  if (edit.zeroQueryOfHead !== undefined) {
    const query = weights.get('blocks.0.attn.W_Q') as { shape: number[]; data: Float32Array }
    const data = Float32Array.from(query.data)
    const perHead = (query.shape[1] as number) * (query.shape[2] as number)
    data.fill(0, edit.zeroQueryOfHead * perHead, (edit.zeroQueryOfHead + 1) * perHead)
    weights.set('blocks.0.attn.W_Q', { shape: query.shape, data })
  }
  const model = createTransformer(checkpoint.config)
  try {
    model.setWeights(weights)
    const out = join(dir(), name)
    await saveCheckpoint(out, model, null, { ...checkpoint.extra, ...(edit.task ? { task: edit.task } : {}) })
    return out
  } finally {
    model.dispose()
  }
}

interface PatchJson {
  together: { after: number } | null
  recipient: number
  donor: number
  scored: number
  hook: string
  heads: { head: string; before: number; after: number; delta: number }[]
  plot: string | null
}

let broken = ''
beforeAll(async () => {
  await useBackend('cpu')
  broken = await plantedCopy('broken', { zeroQueryOfHead: 1 })
})

const base = ['knockout', 'patch', '--backend', 'cpu', '--count', '32']

describe('attnlab knockout patch', () => {
  it('a checkpoint patched into itself: every change is 0', async () => {
    const { code, stdout, stderr } = await runCli([...base, '--from', planted, '--into', planted])
    expect(code, stderr).toBe(0)
    expect(stdout).toMatch(/patched at blocks\.\{l\}\.attn\.hook_attn_scores/)
    const rows = stdout.split('\n').filter((line) => /^\s+L0H\d/.test(line))
    expect(rows).toHaveLength(3)
    for (const row of rows) expect(row.trim().split(/\s+/)[3]).toMatch(/^[+-]0\.0000$/)
  })

  it("intact into broken: only L0H1's patch moves p(target); JSON and the HTML heatmap", async () => {
    const plot = join(dir(), 'patch.html')
    const { code, stdout, stderr } = await runCli([
      ...base,
      '--from',
      planted,
      '--into',
      broken,
      '--json',
      '--plot',
      plot,
    ])
    expect(code, stderr).toBe(0)
    const result = JSON.parse(stdout) as PatchJson
    expect(result.donor - result.recipient).toBeGreaterThan(0.02)
    expect(result.heads.map((h) => h.head)).toEqual(['L0H0', 'L0H1', 'L0H2'])
    expect(result.heads[1]?.delta).toBeGreaterThan(0.02)
    expect(result.heads[1]?.after).toBeCloseTo(result.donor, 5)
    expect(result.together).toBeNull()
    for (const i of [0, 2]) expect(Math.abs(result.heads[i]?.delta as number)).toBeLessThan(1e-6)
    expect(result.plot).toBe(plot)
    const html = readFileSync(plot, 'utf8')
    expect(html).toContain('<svg')
    expect(html).toContain('application/vnd.vegalite+json')
    expect(html).toMatch(/L0H1 +\d\.\d{4} +\d\.\d{4} +\+0\.\d{4}/)
    // One head, at the pattern: the same change.
    const one = await runCli([...base, '--from', planted, '--into', broken, '--json', '--heads', 'L0H1'])
    const pattern = await runCli([
      ...base,
      '--from',
      planted,
      '--into',
      broken,
      '--json',
      '--heads',
      '0.1',
      '--at',
      'pattern',
    ])
    expect(one.code).toBe(0)
    const all = await runCli([...base, '--from', planted, '--into', broken, '--together'])
    expect(all.stdout).toMatch(/^ {2}all +\d\.\d{4} +\d\.\d{4} +\+0\.\d{4}$/m)
    expect((JSON.parse(one.stdout) as PatchJson).heads).toHaveLength(1)
    expect((JSON.parse(pattern.stdout) as PatchJson).heads[0]?.delta).toBeCloseTo(result.heads[1]?.delta as number, 5)
  })

  it('an emergence run directory with one seed is read as its checkpoint; several seeds must be chosen', async () => {
    const run = join(dir(), 'run')
    const one = await plantedCopy(join('run', 'seeds', '0', 'checkpoint'), {})
    expect(existsSync(one)).toBe(true)
    const ok = await runCli([...base, '--from', planted, '--into', run, '--json'])
    expect(ok.code, ok.stderr).toBe(0)
    await plantedCopy(join('run', 'seeds', '1', 'checkpoint'), {})
    const several = await runCli([...base, '--from', planted, '--into', run])
    expect(several.code).toBe(2)
    expect(several.stderr).toMatch(/--into .*run is a run of 2 seeds \(0, 1\); give one seed's checkpoint/)
  })

  it('usage errors exit 2 before any work, and write no --plot', async () => {
    const other = await plantedCopy('other-task', { task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1] } })
    await mkdir(join(dir(), 'empty'), { recursive: true })
    const plot = join(dir(), 'never.html')
    const cases: [string[], RegExp][] = [
      [['--from', join(dir(), 'missing'), '--into', planted], /--from .*missing: no such directory/],
      [['--from', planted, '--into', join(dir(), 'empty')], /--into .*empty is not an attnlab checkpoint/],
      [['--from', planted, '--into', other], /--from and --into were trained on different tasks/],
      [['--from', planted, '--into', planted, '--heads', 'head1'], /--heads must be a comma-separated list/],
      [['--from', planted, '--into', planted, '--heads', 'L0H3'], /head L0H3: head 3 is outside \[0, 3\)/],
      [['--from', planted, '--into', planted, '--plot', join(dir(), 'x.svg')], /--plot must name an \.html file/],
      [['--from', planted, '--into', planted, '--at', 'hook_z'], /argument 'hook_z' is invalid/],
      [['--from', planted, '--into', planted, '--capability', 'nonsense'], /nonsense/],
      [['--into', planted], /required option '--from <dir>' not specified/],
    ]
    for (const [args, message] of cases) {
      const { code, stderr } = await runCli([...base, ...args, ...(args.includes('--plot') ? [] : ['--plot', plot])])
      expect(code, `${args.join(' ')}: ${stderr}`).toBe(2)
      expect(stderr, args.join(' ')).toMatch(message)
      expect(existsSync(plot), args.join(' ')).toBe(false)
    }
  })
})

/**
 * Validation on planted ground truth (the fast version of bench/planted-validation.ts), on the
 * fixtures written by tools/knockout/planted-fixtures.ts: a trained minimal model in which each
 * head owns one span of a sparse Markov chain (`__fixtures__/planted-minimal`), and a 2 x 8-head
 * gpt trained on a prefix-marked mixture of three markov task families in which each task owns
 * three heads (`__fixtures__/planted-mixture-gpt`).
 */
import { fileURLToPath } from 'node:url'
import { describeWithBackends, expectNoLeaks, testBackends } from '@attnlab/core/testing'
import { createTask, type SparseMarkovTask } from '@attnlab/markov'
import { createTransformer, type Transformer } from '@attnlab/transformer'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { sparseMarkovSpanCapability, taskCapability, type Capability } from './capability.ts'
import { type MixtureTask, taskFromDescription } from './mixture.ts'
import { formatHead, type HeadRef } from './heads.ts'
import { compressedSensing, exhaustivePairBudget, exhaustiveSweep, greedySearch } from './localize.ts'
import { headHeatmap, heatmapSpec, knockoutEffects, precisionRecall, sweepHeads } from './report.ts'

const fixture = fileURLToPath(new URL('./__fixtures__/planted-minimal', import.meta.url))
const mixtureFixture = fileURLToPath(new URL('./__fixtures__/planted-mixture-gpt', import.meta.url))

describeWithBackends('planted minimal model (each head owns one span)', () => {
  let model: Transformer
  let task: SparseMarkovTask
  let planted: Record<string, HeadRef[]>
  let spans: Capability[]
  beforeAll(async () => {
    const checkpoint = await loadCheckpoint(fixture)
    model = createTransformer(checkpoint.config)
    model.setWeights(checkpoint.weights)
    task = createTask(checkpoint.extra.task as Record<string, unknown>) as SparseMarkovTask
    planted = checkpoint.extra.planted as Record<string, HeadRef[]>
    spans = [0, 1, 2].map((i) => sparseMarkovSpanCapability(task, i, { count: 96, seed: 1 }))
  })
  afterAll(() => model.dispose())

  it('the exhaustive sweep finds exactly the owning head of each span', async () => {
    for (const capability of spans) {
      const sweep = await exhaustiveSweep(model, capability, { top: 1 })
      expect(sweep.evaluations).toBe(4)
      expect(sweepHeads(sweep)).toEqual(planted[capability.name])
      expect(sweep.top.map(formatHead)).toEqual((planted[capability.name] as HeadRef[]).map(formatHead))
      expect(sweep.top[0]?.score).toBeGreaterThan(0.3) // nats lost by knocking out the owner
    }
  })

  it('the sweep top holds only heads whose knockout hurts, even when more are asked for', async () => {
    for (const capability of spans) {
      const sweep = await exhaustiveSweep(model, capability, { top: 3 })
      expect(sweep.ranking).toHaveLength(3)
      expect(sweep.top.map(formatHead)).toEqual((planted[capability.name] as HeadRef[]).map(formatHead))
      for (const head of sweep.top) expect(head.score).toBeGreaterThan(0)
    }
  })

  it('compressed sensing recovers the owning head from a handful of random masks (recall 1, precision 1)', async () => {
    for (const capability of spans) {
      const found = await compressedSensing(model, capability, {
        masks: 6,
        fraction: 0.34,
        design: 'iid',
        seed: 0,
        top: 1,
      })
      expect(found.evaluations).toBe(6)
      // The coefficients' unit: the population sd of the scores over the masks (metric units).
      const m = [...found.measurements]
      const mean = m.reduce((sum, v) => sum + v, 0) / m.length
      const sd = Math.sqrt(m.reduce((sum, v) => sum + (v - mean) ** 2, 0) / m.length)
      expect(found.scoreSd).toBeCloseTo(sd, 12)
      const { precision, recall } = precisionRecall(found.top, planted[capability.name] as HeadRef[])
      expect(recall).toBe(1)
      expect(precision).toBe(1)
      expect(found.fit.r2).toBeGreaterThan(0.8)
      expect(found.scores[found.top[0]!.index]).toBeLessThan(0)
    }
  })

  it('greedy search picks the owner first and spends 1 + N + (N - 1) evaluations for k = 2', async () => {
    const greedy = await greedySearch(model, spans[2] as Capability, { top: 2 })
    expect(greedy.evaluations).toBe(1 + 3 + 2)
    expect(formatHead(greedy.top[0] as HeadRef)).toBe(formatHead((planted['span-2'] as HeadRef[])[0] as HeadRef))
    expect(greedy.rounds[0]!.metricAfter).toBeGreaterThan(greedy.baseline)
  })

  it('knocking out the found head hurts its span at least 5x more than any other span', async () => {
    for (const capability of spans) {
      const found = await compressedSensing(model, capability, {
        masks: 6,
        fraction: 0.34,
        design: 'iid',
        seed: 0,
        top: 1,
      })
      const report = await knockoutEffects(model, found.top, spans, { target: capability.name })
      expect(report.rows.map((r) => r.role)).toEqual(
        spans.map((s) => (s.name === capability.name ? 'target' : 'control')),
      )
      expect(report.targetHurt).toBeGreaterThan(0.3)
      expect(report.ratio).toBeGreaterThanOrEqual(5)
      expect(report.evaluations).toBe(6)
    }
  })

  it('the whole-task loss needs every head; heatmap and plot spec have one cell per head', async () => {
    const whole = taskCapability(task, { name: 'task', count: 64 })
    const sweep = await exhaustiveSweep(model, whole, { top: 3 })
    expect(sweep.ranking.every((h) => h.score > 0.1)).toBe(true)
    const heatmap = headHeatmap(sweep)
    expect(heatmap.values).toHaveLength(1)
    expect(heatmap.values[0]).toHaveLength(3)
    const spec = heatmapSpec(heatmap) as { data: { values: unknown[] }; layer: unknown[] }
    expect(spec.data.values).toHaveLength(3)
    expect(exhaustivePairBudget(model.config)).toBe(6)
  })

  it('leaks no tensors', async () => {
    await expectNoLeaks(async () => {
      await compressedSensing(model, spans[0] as Capability, { masks: 4, fraction: 0.34, seed: 1, mode: 'mean' })
      await exhaustiveSweep(model, spans[1] as Capability, { mode: 'resample' })
    })
  })
})

// 3 x (1 + 16) exhaustive evaluations of a 2-layer gpt: 1 s on the wasm modes, 45-60 s on `cpu`
// (pure-JS kernels) under a loaded test run, where it timed out. The localisation logic is
// backend-independent and runs on `cpu` in the planted-minimal suite above, so this suite skips
// `cpu` unless it is the only mode asked for.
const mixtureModes = testBackends().filter((mode) => mode !== 'cpu')

describeWithBackends(
  'planted mixture gpt (each task owns three of 16 heads)',
  () => {
    let model: Transformer
    let owned: Record<string, HeadRef[]>
    let tasks: Capability[]
    beforeAll(async () => {
      const checkpoint = await loadCheckpoint(mixtureFixture)
      model = createTransformer(checkpoint.config)
      model.setWeights(checkpoint.weights)
      const mixture = taskFromDescription(checkpoint.extra.task) as MixtureTask
      owned = checkpoint.extra.planted as Record<string, HeadRef[]>
      tasks = mixture.components.map((c) => taskCapability(mixture.only(c.name), { name: c.name, count: 48, seed: 1 }))
    })
    afterAll(() => model.dispose())

    it('exhaustive knockouts find only owned heads; compressed sensing with 13 masks (under 10% of 136) finds the ' +
      'same ones; the top heads hurt their task >= 5x more than the others', async () => {
      expect(exhaustivePairBudget(model.config)).toBe(136)
      for (const capability of tasks) {
        const sweep = await exhaustiveSweep(model, capability, { top: 16 })
        const truth = sweepHeads(sweep, { minDrop: 0.01 })
        const own = new Set((owned[capability.name] as HeadRef[]).map(formatHead))
        expect(truth.length).toBeGreaterThan(0)
        for (const head of truth)
          expect(own.has(formatHead(head)), `${capability.name}: ${formatHead(head)}`).toBe(true)
        const found = await compressedSensing(model, capability, {
          masks: 13,
          fraction: 2 / 16,
          seed: 0,
          top: truth.length,
        })
        expect(found.evaluations).toBe(13)
        expect(precisionRecall(found.top, truth).recall).toBeGreaterThanOrEqual(0.9)
        const report = await knockoutEffects(model, found.top, tasks, { target: capability.name })
        expect(report.targetHurt).toBeGreaterThan(0.05)
        expect(report.ratio).toBeGreaterThanOrEqual(5)
      }
    }, 300_000)

    it('compressed sensing with the default budget (k log N masks: 15 for 16 heads, top 5) spends fewer evaluations ' +
      'than the exhaustive sweep and recovers the owned heads', async () => {
      let hits = 0
      let truths = 0
      for (const capability of tasks) {
        const sweep = await exhaustiveSweep(model, capability, { top: 5 })
        const truth = sweepHeads(sweep).slice(0, 5)
        for (const seed of [0, 1, 2]) {
          const found = await compressedSensing(model, capability, { seed })
          expect(found.evaluations).toBe(15)
          expect(found.evaluations).toBeLessThan(sweep.evaluations)
          expect(found.knockoutCounts.every((c) => c >= 3)).toBe(true) // every head knocked out in at least 3 masks
          hits += precisionRecall(found.top, truth).hits.length
          truths += truth.length
        }
      }
      // Measured: 5 of the 6 heads at seed 0 (icl: 2 of 3), all 6 at seeds 1 and 2.
      expect(hits / truths).toBeGreaterThanOrEqual(0.85)
    }, 300_000)
  },
  mixtureModes.length > 0 ? mixtureModes : testBackends(),
)

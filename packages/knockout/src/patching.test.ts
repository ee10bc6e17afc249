// Causal patching between models on the planted minimal fixture (each head owns one span of a sparse Markov
// chain): patching a model into itself changes nothing; into a copy whose head h attends uniformly (its query
// weights zeroed) only the patch of head h moves p(target), and it restores the intact model's value; scores and
// pattern give the same numbers; chunked passes give the unchunked ones; typed errors; no leaks.
import { fileURLToPath } from 'node:url'
import { InvalidArgumentError } from '@attnlab/core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { createTask, type SparseMarkovTask } from '@attnlab/markov'
import { createTransformer, presetConfig, type Transformer } from '@attnlab/transformer'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { taskCapability, type EvaluationSet } from './capability.ts'
import { patchHeadsBetween, patchingHeatmap } from './patching.ts'
import { heatmapSpec } from './report.ts'

const fixture = fileURLToPath(new URL('./__fixtures__/planted-minimal', import.meta.url))

describeWithBackends('patchHeadsBetween (planted minimal model)', () => {
  let intact: Transformer
  let broken: Transformer
  let data: EvaluationSet
  /** The head whose query weights are zeroed in `broken`. */
  const BROKEN_HEAD = 1
  beforeAll(async () => {
    const checkpoint = await loadCheckpoint(fixture)
    intact = createTransformer(checkpoint.config)
    intact.setWeights(checkpoint.weights)
    const weights = new Map(checkpoint.weights)
    const query = weights.get('blocks.0.attn.W_Q') as { shape: number[]; data: Float32Array }
    const zeroed = Float32Array.from(query.data)
    const perHead = (query.shape[1] as number) * (query.shape[2] as number)
    zeroed.fill(0, BROKEN_HEAD * perHead, (BROKEN_HEAD + 1) * perHead)
    weights.set('blocks.0.attn.W_Q', { shape: query.shape, data: zeroed })
    broken = createTransformer(checkpoint.config)
    broken.setWeights(weights)
    const task = createTask(checkpoint.extra.task as Record<string, unknown>) as SparseMarkovTask
    data = taskCapability(task, { count: 48, seed: 2 }).data
  })
  afterAll(() => {
    intact.dispose()
    broken.dispose()
  })

  it('patching a model into itself changes nothing', async () => {
    const result = await patchHeadsBetween(intact, intact, data)
    expect(result.heads.map((h) => [h.layer, h.head])).toEqual([
      [0, 0],
      [0, 1],
      [0, 2],
    ])
    expect(result.donor).toBeCloseTo(result.recipient, 6)
    for (const head of result.heads) expect(Math.abs(head.delta)).toBeLessThan(1e-6)
    expect(result.scored).toBe(data.scoredPositions.length)
    expect(result.forwardPasses).toBe(2 + 3)
    expect(result.together).toBeNull()
    const together = await patchHeadsBetween(intact, intact, data, { together: true })
    expect(Math.abs(together.together?.delta as number)).toBeLessThan(1e-6)
  })

  it("restores the broken head from the intact donor, and only that head's patch moves p(target)", async () => {
    const result = await patchHeadsBetween(broken, intact, data, { together: true })
    expect(result.forwardPasses).toBe(2 + 3 + 1)
    // Every head at once: the recipient becomes the donor.
    expect(result.together?.after).toBeCloseTo(result.donor, 5)
    // Zeroing a span owner's queries makes it attend uniformly: the broken model is worse.
    expect(result.donor - result.recipient).toBeGreaterThan(0.02)
    const byHead = result.heads.map((h) => h.delta)
    expect(byHead[BROKEN_HEAD]).toBeGreaterThan(0.02)
    // The patched head's scores become the donor's, so the recipient becomes the donor (one layer, same values).
    expect(result.heads[BROKEN_HEAD]?.after).toBeCloseTo(result.donor, 5)
    // The intact heads' scores are the same in both models: patching them is a no-op.
    for (const h of [0, 2]) expect(Math.abs(byHead[h] as number)).toBeLessThan(1e-6)
    // The other way round: the broken head's uniform scores hurt the intact model.
    const reverse = await patchHeadsBetween(intact, broken, data, { heads: [{ layer: 0, head: BROKEN_HEAD }] })
    expect(reverse.heads).toHaveLength(1)
    expect(reverse.heads[0]?.delta).toBeLessThan(-0.02)
    expect(reverse.heads[0]?.after).toBeCloseTo(result.recipient, 5)
    const heatmap = patchingHeatmap(result)
    expect(heatmap.values[0]?.[BROKEN_HEAD]).toBeCloseTo(byHead[BROKEN_HEAD] as number, 12)
    expect(heatmap.highlighted).toEqual([{ layer: 0, head: BROKEN_HEAD }])
    expect((heatmapSpec(heatmap) as { data: { values: unknown[] } }).data.values).toHaveLength(3)
  })

  it('patching the pattern gives the numbers of patching the scores; chunked passes those of one pass', async () => {
    const scores = await patchHeadsBetween(broken, intact, data)
    const pattern = await patchHeadsBetween(broken, intact, data, { at: 'pattern' })
    const chunked = await patchHeadsBetween(broken, intact, data, { maxTokensPerPass: 5 * data.length })
    expect(pattern.hook).toBe('blocks.{l}.attn.hook_pattern')
    expect(chunked.forwardPasses).toBe(Math.ceil(data.count / 5) * 5)
    for (const other of [pattern, chunked]) {
      for (const [i, head] of other.heads.entries()) {
        expect(head.after).toBeCloseTo(scores.heads[i]?.after as number, 5)
      }
    }
  })

  it('leaks no tensors', async () => {
    await expectNoLeaks(async () => {
      await patchHeadsBetween(broken, intact, data, { maxTokensPerPass: 7 * data.length, together: true })
      await patchHeadsBetween(broken, intact, data, { at: 'pattern', heads: [{ layer: 0, head: 2 }] })
    })
  })

  it('refuses models, heads and sets that do not fit, with typed errors naming them', async () => {
    const other = createTransformer(presetConfig('minimal', { dVocab: 8, nCtx: 10, nHeads: 2 }))
    try {
      await expect(patchHeadsBetween(intact, other, data)).rejects.toThrow(
        /the donor has nHeads = 2 but the recipient has nHeads = 3/,
      )
    } finally {
      other.dispose()
    }
    const mixer = createTransformer(presetConfig('mixer', { dVocab: 8, nCtx: 10, nLayers: 1, dModel: 12, nHeads: 3 }))
    try {
      await expect(patchHeadsBetween(mixer, intact, data)).rejects.toThrow(
        /the recipient is a mixer model, which has no attention heads to patch/,
      )
    } finally {
      mixer.dispose()
    }
    await expect(patchHeadsBetween(intact, intact, data, { heads: [{ layer: 0, head: 3 }] })).rejects.toThrow(
      /head L0H3: head 3 is outside \[0, 3\)/,
    )
    await expect(patchHeadsBetween(intact, intact, data, { heads: [{ layer: 1, head: 0 }] })).rejects.toThrow(
      InvalidArgumentError,
    )
    const twice = [
      { layer: 0, head: 1 },
      { layer: 0, head: 1 },
    ]
    await expect(patchHeadsBetween(intact, intact, data, { heads: twice })).rejects.toThrow(/lists L0H1 twice/)
    await expect(patchHeadsBetween(intact, intact, data, { heads: [] })).rejects.toThrow(/at least one head/)
    await expect(patchHeadsBetween(intact, intact, data, { at: 'hook_z' as never })).rejects.toThrow(
      /^Invalid at: got 'hook_z'; expected one of attn_scores, pattern$/,
    )
    await expect(patchHeadsBetween(intact, intact, data, { heds: [] } as never)).rejects.toThrow(
      /^Invalid heds: is not a patchHeadsBetween parameter \(did you mean 'heads'\?\); expected one of heads, at, /,
    )
    await expect(patchHeadsBetween(intact, intact, data, { maxTokensPerPass: 0 })).rejects.toThrow(
      /^Invalid maxTokensPerPass: must be an integer >= 1, got 0$/,
    )
    await expect(patchHeadsBetween(intact, intact, data, { together: 'yes' as never })).rejects.toThrow(
      /^Invalid together: got 'yes'; expected true or false$/,
    )
    const outside = { ...data, inputs: Int32Array.from(data.inputs, (t, i) => (i === 3 ? 99 : t)) }
    await expect(patchHeadsBetween(intact, intact, outside)).rejects.toThrow(/input token 99 .* vocabulary \[0, 8\)/)
    const long = { ...data, count: 1, length: 11, inputs: new Int32Array(11), scoredPositions: Int32Array.of(10) }
    await expect(patchHeadsBetween(intact, intact, { ...long, targets: Int32Array.of(0) })).rejects.toThrow(
      /exceed the model's context nCtx = 10/,
    )
  })
})

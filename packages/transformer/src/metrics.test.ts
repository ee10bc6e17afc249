import * as tf from '@tensorflow/tfjs-core'
import { AttnlabError } from '@attnlab/core'
import { describeWithBackends } from '@attnlab/core/testing'
import type { TokenBatch } from '@attnlab/markov'
import { expect, it } from 'vitest'
import { createConfig, presetConfig } from './config.ts'
import { analyze, headSeparation, valueAlignment, type TeacherSource } from './metrics.ts'
import { createTransformer } from './model.ts'

const d = 4
const nCtx = 6
const D = d + nCtx

/** Head h attends (almost) only to offset h + 1 (key j = i - h - 1). */
function offsetModel(): ReturnType<typeof createTransformer> {
  const model = createTransformer(createConfig({ architecture: 'minimal', dVocab: d, nCtx, nHeads: 2, queryInit: 0 }))
  const q = new Float32Array(2 * D * D)
  for (let h = 0; h < 2; h++)
    for (let i = 0; i < nCtx; i++)
      for (let j = 0; j < nCtx; j++) if (i - j === h + 1) q[(h * D + d + i) * D + d + j] = 30
  model.setWeights({
    'blocks.0.attn.W_Q': { shape: [2, D, D], data: q },
    'blocks.0.attn.W_V': { shape: [2, D, D], data: new Float32Array(2 * D * D) },
  })
  return model
}

function batchOf(rows: number[][], scoredFrom: number): TokenBatch {
  const seqLength = rows[0]!.length
  return {
    tokens: Int32Array.from(rows.flat()),
    lossMask: Uint8Array.from(rows.flatMap((r) => r.map((_, p) => (p >= scoredFrom ? 1 : 0)))),
    batchSize: rows.length,
    seqLength,
  }
}

const uniformTeacher: TeacherSource = {
  teacher: {
    matrices: [
      Float64Array.from({ length: d * d }, (_, i) => (i % 3) - 1),
      Float64Array.from({ length: d * d }, (_, i) => ((i * 7) % 5) - 2),
    ],
    weights: [1, 2],
    spans: [1, 1],
  },
  teacherProbabilities: (batch) => {
    const out = new Float32Array(batch.batchSize * batch.seqLength * d)
    for (let i = 0; i < batch.batchSize * batch.seqLength; i++)
      if (batch.lossMask[i] === 1) out.fill(1 / d, i * d, (i + 1) * d)
    return out
  },
}

describeWithBackends('analysis metrics', () => {
  it('attention entropy and offset-group mass of sharp heads; KL and loss of a uniform model', async () => {
    const model = offsetModel()
    const batch = batchOf(
      [
        [0, 1, 2, 3, 0, 1, 2],
        [3, 3, 2, 2, 1, 1, 0],
      ],
      3,
    ) // predictions from input position 2 on
    const metrics = await analyze(model, batch, {
      offsetGroups: [
        { name: 'offset 1', offsets: [1] },
        { name: 'offset 2', offsets: [2] },
        { name: 'offsets 0, 3', offsets: [0, 3] },
      ],
      teacher: uniformTeacher,
    })
    expect(metrics.attentionEntropy[0]![0]).toBeLessThan(1e-6)
    expect(metrics.attentionEntropy[0]![1]).toBeLessThan(1e-6)
    expect(metrics.offsetGroupMass![0]![0]).toEqual([expect.closeTo(1, 5), expect.closeTo(0, 5), expect.closeTo(0, 5)])
    expect(metrics.offsetGroupMass![0]![1]).toEqual([expect.closeTo(0, 5), expect.closeTo(1, 5), expect.closeTo(0, 5)])
    expect(metrics.offsetGroupNames).toEqual(['offset 1', 'offset 2', 'offsets 0, 3'])
    // W_V = 0: the model is uniform, so the loss is log d at every scored position and KL to a uniform teacher is 0.
    expect(metrics.loss).toBeCloseTo(Math.log(d), 5)
    expect(metrics.perPositionLoss.slice(0, 2)).toEqual([null, null])
    expect(metrics.perPositionLoss[2]).toBeCloseTo(Math.log(d), 5)
    expect(metrics.teacherKL).toEqual([expect.closeTo(0, 5), expect.closeTo(0, 5)])
    expect(metrics.teacherEntropy).toBeCloseTo(Math.log(d), 5)
    expect(metrics.valueAlignment!.inner).toEqual([
      [0, 0],
      [0, 0],
    ])
    model.dispose()
  })

  it('value alignment is the Frobenius inner product / cosine of W_V^h[:d, :d]^T with A_k', async () => {
    const model = offsetModel()
    const v = new Float32Array(2 * D * D)
    const a = uniformTeacher.teacher.matrices[0]!
    // head 0 = 2 A_0^T
    for (let x = 0; x < d; x++) for (let y = 0; y < d; y++) v[(0 * D + x) * D + y] = 2 * (a[y * d + x] as number)
    // head 1 = -A_0^T
    for (let x = 0; x < d; x++) for (let y = 0; y < d; y++) v[(1 * D + x) * D + y] = -(a[y * d + x] as number)
    model.setWeights({ 'blocks.0.attn.W_V': { shape: [2, D, D], data: v } }, { strict: false })
    const alignment = await valueAlignment(model, uniformTeacher)
    const normSquared = Array.from(a).reduce((s, x) => s + x * x, 0)
    expect(alignment.inner[0]![0]).toBeCloseTo(2 * normSquared, 4)
    expect(alignment.cosine[0]![0]).toBeCloseTo(1, 5)
    expect(alignment.cosine[1]![0]).toBeCloseTo(-1, 5)
    expect(Math.abs(alignment.cosine[0]![1]!)).toBeLessThan(1)
    const gpt = createTransformer(presetConfig('gpt-nano'))
    await expect(valueAlignment(gpt, uniformTeacher)).rejects.toThrow(/minimal model/)
    gpt.dispose()
    model.dispose()
  })

  it('headSeparation is 0 for identical heads and positive otherwise', async () => {
    const same = createTransformer(createConfig({ architecture: 'minimal', dVocab: 3, nCtx: 3, queryInit: 0 }))
    expect(await headSeparation(same)).toBe(0)
    const different = createTransformer(createConfig({ architecture: 'minimal', dVocab: 3, nCtx: 3, queryInit: 0.1 }))
    expect(await headSeparation(different)).toBeGreaterThan(0.1)
    await expect(headSeparation(same, 'nope')).rejects.toThrow(AttnlabError)
    same.dispose()
    different.dispose()
  })

  it('rejects batches that do not fit or are not scored, and bad options', async () => {
    const model = offsetModel()
    await expect(analyze(model, batchOf([[0, 1, 2, 3, 0, 1, 2, 3]], 0))).rejects.toThrow(/nCtx = 6/)
    await expect(analyze(model, batchOf([[0, 1, 2]], 9))).rejects.toThrow(/no position of the batch is scored/)
    await expect(analyze(model, batchOf([[0, 1, 2]], 0), { chunksize: 4 } as never)).rejects.toThrow(
      /^Invalid chunksize: is not an analyze parameter \(did you mean 'chunkSize'\?\); expected one of offsetGroups, /,
    )
    await expect(analyze(model, batchOf([[0, 1, 2]], 0), { chunkSize: 0 })).rejects.toThrow(
      /^Invalid chunkSize: must be an integer >= 1, got 0$/,
    )
    model.dispose()
    void tf
  })
})

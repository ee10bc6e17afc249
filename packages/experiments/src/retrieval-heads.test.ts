// measureRetrievalHeads against attention known in closed form: with W_Q = 0 every score is 0, so
// causal attention is uniform (1 / (q + 1) on each position), and the retrieval attention must
// equal its uniform baseline, the previous-token and self scores the mean of 1 / (p + 1).
import * as tf from '@tensorflow/tfjs-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Rng, useBackend } from '@attnlab/core'
import { NiahTokensTask } from '@attnlab/markov'
import { createTransformer, presetConfig, type Transformer } from '@attnlab/transformer'
import { ExperimentInputError, measureRetrievalHeads, retrievalHeadsTable } from './index.ts'

const task = new NiahTokensTask({ nCtx: 40, needles: 2, keyTokens: 24, valueTokens: 4 })
let model: Transformer

beforeAll(async () => {
  await useBackend('cpu')
  model = createTransformer(
    presetConfig('llama', { dVocab: task.vocabSize, nCtx: 48, dModel: 32, nHeads: 2, nLayers: 2, seed: 3 }),
  )
  // Zero queries: every attention score is 0 and each causal row is uniform.
  const weights = new Map<string, { shape: number[]; data: Float32Array }>()
  for (const [name, variable] of model.getWeights()) {
    const data = new Float32Array(await variable.data())
    if (name.endsWith('attn.W_Q')) data.fill(0)
    weights.set(name, { shape: [...variable.shape], data })
  }
  model.setWeights(weights)
})

afterAll(() => model.dispose())

function sequences(n: number, seed: number): Int32Array[] {
  const batch = task.sample(n, Rng.fromSeed(seed))
  const L = task.seqLength
  return Array.from({ length: n }, (_, b) => batch.tokens.slice(b * L, (b + 1) * L))
}

describe('measureRetrievalHeads', () => {
  it('gives the uniform baseline, 1 / (p + 1) previous-token and self scores under uniform attention', async () => {
    const seqs = sequences(5, 0)
    const before = tf.memory().numTensors
    const rows = await measureRetrievalHeads(model, task, seqs)
    expect(tf.memory().numTensors).toBe(before)
    expect(rows.map((r) => `L${r.layer}H${r.head}`)).toEqual(['L0H0', 'L0H1', 'L1H0', 'L1H1'])
    // Independent expectations from the sequences alone.
    const prompt = task.answerPositions[0] as number
    let uniform = 0
    let answers = 0
    for (const s of seqs) {
      for (const a of task.answerPositions) {
        let sources = 0
        for (let p = 0; p < prompt; p++) if (s[p] === s[a]) sources++
        if (sources === 0) continue
        answers++
        uniform += sources / a // row a - 1 attends to a positions
      }
    }
    let previous = 0
    for (let p = 1; p < prompt; p++) previous += 1 / (p + 1)
    let self = 0
    for (let p = 0; p < prompt; p++) self += 1 / (p + 1)
    for (const row of rows) {
      expect(row).toMatchObject({ task: 'niah-tokens', length: 40, samples: 5 })
      expect(row.uniform).toBeCloseTo(uniform / answers, 6)
      expect(row.retrieval).toBeCloseTo(uniform / answers, 5)
      expect(row.previousToken).toBeCloseTo(previous / (prompt - 1), 5)
      expect(row.self).toBeCloseTo(self / prompt, 5)
    }
    // Chunked or not, the same numbers; and the table marks one head per (task, length).
    const one = await measureRetrievalHeads(model, task, seqs.slice(0, 1))
    expect(one[0]?.samples).toBe(1)
    const table = retrievalHeadsTable(rows)
    expect(table).toHaveLength(5)
    expect(table.filter((line) => /L\dH\d\*/.test(line)).length).toBeGreaterThanOrEqual(1)
  })

  it('refuses no sequences, a sequence of the wrong length, a task longer or wider than the model', async () => {
    await expect(measureRetrievalHeads(model, task, [])).rejects.toThrow(ExperimentInputError)
    await expect(measureRetrievalHeads(model, task, [new Int32Array(10)])).rejects.toThrow(
      /10 tokens; the task's have 41/,
    )
    const wide = new NiahTokensTask({ nCtx: 40, needles: 2, keyTokens: 24, valueTokens: 40 })
    await expect(measureRetrievalHeads(model, wide, [new Int32Array(41)])).rejects.toThrow(
      /uses 66 token ids but the model's vocabulary is 30/,
    )
    const long = new NiahTokensTask({ nCtx: 64, needles: 2, keyTokens: 40, valueTokens: 4 })
    await expect(measureRetrievalHeads(model, long, [new Int32Array(65)])).rejects.toThrow(
      /task length 64 is above the model's nCtx 48/,
    )
  })
})

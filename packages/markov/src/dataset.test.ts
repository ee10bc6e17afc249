import { AttnlabError, ConfigError, Rng, ShapeError } from '@attnlab/core'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '@attnlab/core/testing'
import { describe, expect, it } from 'vitest'
import { DatasetBatches, sampleDataset, selectSequences } from './dataset.ts'
import { SparseMarkovTask } from './sparse-markov.ts'
import { batchToTensors } from './tensors.ts'

const task = new SparseMarkovTask({ vocabSize: 5, spans: [1, 1], genLen: 3 })

function firstTokens(batch: { tokens: Int32Array; batchSize: number; seqLength: number }): string[] {
  return Array.from({ length: batch.batchSize }, (_, b) =>
    Array.from(batch.tokens.subarray(b * batch.seqLength, (b + 1) * batch.seqLength)).join(','),
  )
}

describe('sampleDataset and selectSequences', () => {
  it('samples a fixed dataset equal to task.sample with the same stream', () => {
    const dataset = sampleDataset(task, 30, Rng.fromSeed(1).split('train'))
    expect(Array.from(dataset.tokens)).toEqual(Array.from(task.sample(30, Rng.fromSeed(1).split('train')).tokens))
    expect(() => sampleDataset(task, 0, Rng.fromSeed(1))).toThrow(ConfigError)
  })

  it('selects sequences by index and rejects bad indices', () => {
    const dataset = sampleDataset(task, 6, Rng.fromSeed(2))
    const selected = selectSequences(dataset, [4, 0])
    expect(firstTokens(selected)).toEqual([firstTokens(dataset)[4], firstTokens(dataset)[0]])
    expect(selected.lossMask.length).toBe(2 * dataset.seqLength)
    expect(() => selectSequences(dataset, [6])).toThrow(AttnlabError)
    expect(() => selectSequences(dataset, [])).toThrow(/at least one/)
    expect(() => selectSequences({ ...dataset, seqLength: 3 }, [0])).toThrow(ShapeError)
  })
})

describe('DatasetBatches', () => {
  // Long sequences over 50 tokens: all distinct, so a sequence's tokens identify it.
  const dataset = sampleDataset(new SparseMarkovTask({ vocabSize: 50, spans: [1, 1], genLen: 10 }), 10, Rng.fromSeed(3))
  const keys = firstTokens(dataset)
  it('uses distinct sequences', () => expect(new Set(keys).size).toBe(10))

  it('visits every sequence once per epoch (short remainder) and reshuffles between epochs', () => {
    const batches = new DatasetBatches(dataset, 4, Rng.fromSeed(0), { remainder: 'short' })
    expect(batches.batchesPerEpoch).toBe(3)
    const epoch = [batches.next(), batches.next(), batches.next()]
    expect(epoch.map((b) => b.batchSize)).toEqual([4, 4, 2])
    expect(epoch.flatMap(firstTokens).sort()).toEqual([...keys].sort())
    expect(batches.epoch).toBe(0)
    const next = batches.next()
    expect(batches.epoch).toBe(1)
    expect(next.batchSize).toBe(4)
  })

  it('drops the remainder by default, never repeating a sequence within an epoch', () => {
    const batches = new DatasetBatches(dataset, 3, Rng.fromSeed(1))
    expect(batches.batchesPerEpoch).toBe(3)
    const seen = [batches.next(), batches.next(), batches.next()].flatMap(firstTokens)
    expect(new Set(seen).size).toBe(9)
    batches.next()
    expect(batches.epoch).toBe(1)
  })

  it('resumes the exact batch sequence from a snapshot', () => {
    const a = new DatasetBatches(dataset, 3, Rng.fromSeed(5))
    a.next()
    const state = JSON.parse(JSON.stringify(a.getState()))
    const expected = [a.next(), a.next(), a.next(), a.next()].flatMap(firstTokens)
    const b = new DatasetBatches(dataset, 3, Rng.fromSeed(99))
    b.restore(state)
    expect([b.next(), b.next(), b.next(), b.next()].flatMap(firstTokens)).toEqual(expected)
    expect(() => b.restore({ ...state, order: [0, 1] })).toThrow(ShapeError)
    expect(() => b.restore({ ...state, cursor: 11 })).toThrow(ConfigError)
  })

  it('rejects bad batch sizes and remainder modes', () => {
    expect(() => new DatasetBatches(dataset, 11, Rng.fromSeed(0))).toThrow(/\[1, 10\]/)
    expect(() => new DatasetBatches(dataset, 0, Rng.fromSeed(0))).toThrow(ConfigError)
    expect(() => new DatasetBatches(dataset, 2, Rng.fromSeed(0), { remainder: 'pad' as never })).toThrow(
      /'drop' or 'short'/,
    )
  })
})

describeWithBackends('batchToTensors', () => {
  it('creates int32 tokens and float32 loss-mask tensors [batch, seqLength] without leaking', async () => {
    const batch = task.sample(3, Rng.fromSeed(4))
    const tensors = await expectNoLeaks(() => batchToTensors(batch), { disposeResult: true })
    expect(tensors.tokens.isDisposed).toBe(true)
    const { tokens, lossMask } = batchToTensors(batch)
    try {
      expect(tokens.dtype).toBe('int32')
      expect(lossMask.dtype).toBe('float32')
      expect(tokens.shape).toEqual([3, 5])
      expect(lossMask.shape).toEqual([3, 5])
      expect(Array.from(await tokens.data())).toEqual(Array.from(batch.tokens))
      expectArraysClose(await lossMask.data(), Array.from(batch.lossMask))
    } finally {
      tf.dispose([tokens, lossMask])
    }
  })

  it('rejects an inconsistent batch before creating any tensor', async () => {
    const batch = task.sample(2, Rng.fromSeed(4))
    await expectNoLeaks(() => {
      expect(() => batchToTensors({ ...batch, batchSize: 3 })).toThrow(ShapeError)
    })
  })
})

import { ConfigError, Rng, TaskRegistry, taskRegistry, UnknownTaskKindError } from '@attnlab/core'
import { IclMarkovTask, LinearMapTask, MARKOV_TASK_FAMILIES, SparseMarkovTask, createTask } from '@attnlab/markov'
import { describe, expect, it } from 'vitest'
import {
  absentCapability,
  chanceLevel,
  checkCapability,
  evaluationSetFromBatch,
  higherIsBetter,
  inductionCapability,
  performance,
  sparseMarkovSpanCapability,
  taskCapability,
  textCapability,
} from './capability.ts'
import { MixtureTask, mixtureTaskFamily, registerMixtureTask, taskFromDescription } from './mixture.ts'

describe('capabilities', () => {
  it('metric directions', () => {
    expect(higherIsBetter('loss')).toBe(false)
    expect(higherIsBetter('accuracy')).toBe(true)
    expect(performance(2, 'loss')).toBe(-2)
    expect(performance(0.5, 'logprob')).toBe(0.5)
  })

  it('next-token data from a task batch: inputs tokens[:, :-1], targets tokens[:, 1:] where scored', () => {
    const batch = {
      tokens: Int32Array.from([5, 6, 7, 8, 1, 2, 3, 4]),
      lossMask: Uint8Array.from([0, 0, 1, 1, 0, 1, 0, 1]),
      batchSize: 2,
      seqLength: 4,
    }
    const data = evaluationSetFromBatch(batch)
    expect(data.length).toBe(3)
    expect([...data.inputs]).toEqual([5, 6, 7, 1, 2, 3])
    expect([...data.scoredPositions]).toEqual([1, 2, 3, 5])
    expect([...data.targets]).toEqual([7, 8, 2, 4])
    expect(() => evaluationSetFromBatch({ ...batch, lossMask: new Uint8Array(8) })).toThrow(/scores no position/)
    expect(() => evaluationSetFromBatch({ ...batch, seqLength: 1, batchSize: 8 })).toThrow(/at least 2 tokens/)
    expect(() => evaluationSetFromBatch({ ...batch, batchSize: 3 })).toThrow(/expected 12/)
  })

  it('task capability is seeded and scores what the task scores', () => {
    const task = new SparseMarkovTask({ vocabSize: 5, spans: [1, 1], genLen: 4 })
    const a = taskCapability(task, { count: 7, seed: 2 })
    const b = taskCapability(task, { count: 7, seed: 2 })
    expect([...a.data.inputs]).toEqual([...b.data.inputs])
    expect(a.data.scoredPositions.length).toBe(7 * 4)
    expect(a.name).toBe('sparse-markov')
    expect(() => taskCapability(task, { metric: 'perplexity' as never })).toThrow(
      /^Invalid metric: got 'perplexity'; expected one of loss, accuracy, logprob$/,
    )
    expect(() => taskCapability(task, { count: 0 })).toThrow(ConfigError)
  })

  it(
    'the span capability is the teacher restricted to one span (checked against the truncated teacher of the markov ' +
      'package)',
    () => {
      // With equal weights (m = 1) the single most important span is the newest one (ties: newer first).
      const task = new SparseMarkovTask({ vocabSize: 6, spans: [1, 1, 1], m: 1, tau: 0.4, genLen: 5 })
      const capability = sparseMarkovSpanCapability(task, 2, { count: 9, seed: 4 })
      const batch = task.sample(9, Rng.fromSeed(4).split('knockout/capability'))
      const truncated = task.teacherProbabilities(batch, { keepSpans: 1 })
      const { data } = capability
      expect(data.targetWidth).toBe(6)
      for (let s = 0; s < data.scoredPositions.length; s++) {
        const flat = data.scoredPositions[s] as number
        const b = Math.floor(flat / data.length)
        const p = (flat % data.length) + 1 // the predicted token's position in the batch
        let argmax = 0
        for (let y = 0; y < 6; y++) {
          expect(data.targetDistributions![s * 6 + y]).toBeCloseTo(
            truncated[(b * task.seqLength + p) * 6 + y] as number,
            5,
          )
          if ((data.targetDistributions![s * 6 + y] as number) > (data.targetDistributions![s * 6 + argmax] as number))
            argmax = y
        }
        expect(data.targets[s]).toBe(argmax)
      }
      expect(() => sparseMarkovSpanCapability(task, 3)).toThrow(/not a span index in \[0, 3\)/)
    },
  )

  it('induction probe: a random block repeated, the second copy scored from its second token on', () => {
    const probe = inductionCapability({ vocabSize: 50, blockLength: 6, prefix: [1], count: 4, seed: 0 })
    const { inputs, length, scoredPositions, targets } = probe.data
    expect(length).toBe(1 + 2 * 6 - 1)
    expect(probe.metric).toBe('logprob')
    for (let b = 0; b < 4; b++) {
      const row = [...inputs.subarray(b * length, (b + 1) * length)]
      expect(row[0]).toBe(1)
      const block = row.slice(1, 7)
      expect(new Set(block).size).toBe(6) // distinct tokens when the pool is large enough
      expect(row.slice(7)).toEqual(block.slice(0, 5))
    }
    expect(scoredPositions.length).toBe(4 * 5)
    // Output at position P + L + i - 1 = 6 + i predicts the second copy's token i (i >= 1).
    for (let i = 0; i < 5; i++) {
      expect(scoredPositions[i]).toBe(7 + i)
      expect(targets[i]).toBe(inputs[1 + i + 1])
    }
    const given = inductionCapability({
      blocks: [
        [5, 6, 7],
        [8, 9],
      ],
      prefix: [1],
    })
    expect(given.data.length).toBe(1 + 2 * 3 - 1)
    expect([...given.data.inputs]).toEqual([1, 5, 6, 7, 5, 6, 1, 8, 9, 8, 0, 0])
    expect([...given.data.inputMask!]).toEqual([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0])
    expect([...given.data.scoredPositions]).toEqual([4, 5, 6 + 3])
    expect([...given.data.targets]).toEqual([6, 7, 9])
    const gain = inductionCapability({
      blocks: [
        [5, 6, 7],
        [8, 9],
      ],
      prefix: [1],
      contrast: true,
    })
    expect(gain.name).toBe('induction-gain')
    expect([...gain.data.scoredPositions]).toEqual([1, 2, 4, 5, 7, 9])
    expect([...gain.data.targets]).toEqual([6, 7, 6, 7, 9, 9])
    expect([...gain.data.scoreWeights!].map((w) => Math.round(w * 3))).toEqual([-1, -1, 1, 1, -1, 1])
    expect(() => inductionCapability({ blocks: [] })).toThrow(/at least one block/)
    expect(() => inductionCapability({ blocks: [[1]] })).toThrow(/block 0 has 1 token/)
    const pooled = inductionCapability({ tokens: [10, 11, 12], blockLength: 5, count: 2 })
    expect([...pooled.data.inputs].every((t) => t >= 10 && t <= 12)).toBe(true)
    expect(() => inductionCapability({ blockLength: 4 })).toThrow(/vocabulary size or an explicit token pool/)
    expect(() => inductionCapability({ tokens: [3], blockLength: 4 })).toThrow(/at least 2/)
    expect(() => inductionCapability({ vocabSize: 10, blockLength: 1 })).toThrow(/blockLength/)
    expect(() => inductionCapability({ vocabSize: 10, prefix: [-1] })).toThrow(/prefix/)
  })

  it('text capability pads to the longest sequence and scores every real next token', () => {
    const text = textCapability(
      [
        [1, 2, 3],
        [4, 5, 6, 7, 8],
      ],
      { maxLength: 4 },
    )
    expect(text.data.length).toBe(3)
    expect([...text.data.inputs]).toEqual([1, 2, 0, 4, 5, 6])
    expect([...text.data.inputMask!]).toEqual([1, 1, 0, 1, 1, 1])
    expect([...text.data.targets]).toEqual([2, 3, 5, 6, 7])
    expect(() => textCapability([])).toThrow(/at least one/)
    expect(() => textCapability([[1]])).toThrow(/sequence 0 has 1 token/)
    expect(() => textCapability([[1, 2.5]])).toThrow(/not a non-negative integer/)
  })

  it('checkCapability names the problem', () => {
    const probe = inductionCapability({ vocabSize: 10, blockLength: 3, count: 2 })
    expect(() => checkCapability(probe, { dVocab: 5, nCtx: 10 })).toThrow(
      /capability 'induction': input token \d outside|outside the model's vocabulary/,
    )
    expect(() => checkCapability(probe, { dVocab: 10, nCtx: 4 })).toThrow(/exceed the model's context nCtx = 4/)
    expect(() =>
      checkCapability({ ...probe, data: { ...probe.data, targets: new Int32Array(1) } }, { dVocab: 10, nCtx: 10 }),
    ).toThrow(/1 targets for 4 scored/)
    expect(() =>
      checkCapability(
        { ...probe, data: { ...probe.data, scoredPositions: Int32Array.from([0, 1, 2, 99]) } },
        { dVocab: 10, nCtx: 10 },
      ),
    ).toThrow(/scored position 99/)
    expect(() =>
      checkCapability(
        { ...probe, data: { ...probe.data, targetDistributions: new Float32Array(40) } },
        { dVocab: 10, nCtx: 10 },
      ),
    ).toThrow(/without targetWidth/)
    expect(() =>
      checkCapability(
        { ...probe, data: { ...probe.data, targetDistributions: new Float32Array(48), targetWidth: 12 } },
        { dVocab: 10, nCtx: 10 },
      ),
    ).toThrow(/over 12 tokens/)
    expect(() =>
      checkCapability({ ...probe, data: { ...probe.data, inputMask: new Uint8Array(1) } }, { dVocab: 10, nCtx: 10 }),
    ).toThrow(/inputMask/)
    expect(() =>
      checkCapability(
        { ...probe, data: { ...probe.data, scoreWeights: new Float64Array(1) } },
        { dVocab: 10, nCtx: 10 },
      ),
    ).toThrow(/scoreWeights has 1/)
    expect(() =>
      checkCapability(
        { ...probe, data: { ...probe.data, scoreWeights: new Float64Array(4).fill(Number.NaN) } },
        { dVocab: 10, nCtx: 10 },
      ),
    ).toThrow(/non-finite/)
    expect(() => checkCapability({ ...probe, metric: 'nope' as never }, { dVocab: 10, nCtx: 10 })).toThrow(ConfigError)
  })
})

describe('MixtureTask', () => {
  const markov = new SparseMarkovTask({ vocabSize: 4, spans: [1, 1], genLen: 6 })
  const icl = new IclMarkovTask({ vocabSize: 3, seqLength: 10 })
  const linear = new LinearMapTask({ stateSize: 3, onesPerRow: 1, states: 2 })

  it('marks each sequence with its prefix token and pads shorter tasks (shared vocabulary)', () => {
    const mixture = new MixtureTask([
      { name: 'markov', task: markov },
      { name: 'icl', task: icl, weight: 2 },
      { name: 'linear', task: linear },
    ])
    expect(mixture.vocabSize).toBe(4 + 3)
    expect(mixture.prefixToken('icl')).toBe(5)
    expect(mixture.seqLength).toBe(11)
    const batch = mixture.sample(300, Rng.fromSeed(1))
    const counts = [0, 0, 0]
    for (let b = 0; b < 300; b++) {
      const prefix = batch.tokens[b * 11] as number
      const t = prefix - 4
      counts[t] = (counts[t] as number) + 1
      expect(batch.lossMask[b * 11]).toBe(0)
      const realLength = [markov.seqLength, icl.seqLength, linear.seqLength][t] as number
      for (let p = 1 + realLength; p < 11; p++) expect(batch.lossMask[b * 11 + p]).toBe(0)
      for (let p = 1; p <= realLength; p++) expect(batch.tokens[b * 11 + p]).toBeLessThan(4)
    }
    expect(counts[1]! / 300).toBeGreaterThan(0.4) // weight 2 of 4
    expect(counts[0]! + counts[2]!).toBeGreaterThan(100)
    // Deterministic.
    expect([...mixture.sample(20, Rng.fromSeed(3)).tokens]).toEqual([...mixture.sample(20, Rng.fromSeed(3)).tokens])
  })

  it('disjoint vocabularies shift each task into its own range; only() draws one component', () => {
    const mixture = new MixtureTask(
      [
        { name: 'markov', task: markov },
        { name: 'linear', task: linear },
      ],
      { vocabulary: 'disjoint' },
    )
    expect(mixture.tokenOffsets).toEqual([0, 4])
    expect(mixture.vocabSize).toBe(4 + 2 + 2)
    const only = mixture.only('linear').sample(16, Rng.fromSeed(2))
    for (let b = 0; b < 16; b++) {
      expect(only.tokens[b * mixture.seqLength]).toBe(7)
      for (let p = 1; p <= linear.seqLength; p++) expect([4, 5]).toContain(only.tokens[b * mixture.seqLength + p])
    }
    const capability = taskCapability(mixture.only(0), { name: 'markov', count: 5 })
    expect(capability.data.inputs[0]).toBe(6)
  })

  it('describe() round-trips through taskFromDescription, also nested and through JSON', () => {
    const mixture = new MixtureTask(
      [
        { name: 'markov', task: markov },
        { name: 'icl', task: icl },
      ],
      { vocabulary: 'disjoint' },
    )
    const rebuilt = taskFromDescription(JSON.parse(JSON.stringify(mixture.describe())))
    expect([...rebuilt.sample(10, Rng.fromSeed(5)).tokens]).toEqual([...mixture.sample(10, Rng.fromSeed(5)).tokens])
    const plain = taskFromDescription(markov.describe())
    expect(plain.describe()).toEqual(createTask(markov.describe()).describe())
    expect(() => taskFromDescription(null)).toThrow(/task description object/)
    expect(() => taskFromDescription({ kind: 'mixture' })).toThrow(/components array/)
    expect(() => taskFromDescription({ kind: 'nope' })).toThrow(ConfigError)
  })

  it('registers mixture (and the markov families) into the task registry explicitly', () => {
    const registry = registerMixtureTask(new TaskRegistry())
    const markovKinds = MARKOV_TASK_FAMILIES.map((family) => family.kind)
    expect(markovKinds.slice(0, 4)).toEqual(['sparse-markov', 'linear-map', 'cellular-automaton', 'icl-markov'])
    expect(registry.kinds()).toEqual([...markovKinds, 'mixture'])
    expect(registerMixtureTask(registry)).toBe(registry) // idempotent
    const mixture = new MixtureTask([{ name: 'markov', task: markov }])
    const rebuilt = registry.create(mixture.describe())
    expect(rebuilt).toBeInstanceOf(MixtureTask)
    expect(rebuilt.describe()).toEqual(mixture.describe())
    expect(mixtureTaskFamily.kind).toBe('mixture')
    taskFromDescription(markov.describe())
    expect(taskRegistry.has('mixture')).toBe(true)
    expect(() => taskFromDescription({ kind: 'mixtur' })).toThrow(UnknownTaskKindError)
    expect(() => taskFromDescription({ kind: 'mixtur' })).toThrow(/did you mean 'mixture'/)
    // a component of a kind the caller registered
    registry.register({ kind: 'plain-markov', create: () => markov })
    const custom = taskFromDescription(
      { kind: 'mixture', components: [{ name: 'a', task: { kind: 'plain-markov' } }] },
      registry,
    ) as MixtureTask
    expect(custom.components[0]?.task).toBe(markov)
  })

  it('rejects empty, duplicate and malformed components', () => {
    expect(() => new MixtureTask([])).toThrow(/at least one task/)
    expect(
      () =>
        new MixtureTask([
          { name: 'a', task: markov },
          { name: 'a', task: icl },
        ]),
    ).toThrow(/'a' is used twice/)
    expect(() => new MixtureTask([{ name: '', task: markov }])).toThrow(/non-empty name/)
    expect(() => new MixtureTask([{ name: 'a', task: markov, weight: 0 }])).toThrow(/weight/)
    expect(() => new MixtureTask([{ name: 'a', task: {} as never }])).toThrow(/sample\(\)/)
    expect(() => new MixtureTask([{ name: 'a', task: markov }], { vocabulary: 'mixed' as never })).toThrow(/vocabulary/)
    const mixture = new MixtureTask([{ name: 'a', task: markov }])
    expect(() => mixture.prefixToken('b')).toThrow(/'b' is not a component; expected one of a/)
    expect(() => mixture.sample(0, Rng.fromSeed(0))).toThrow(/batchSize/)
  })
})

describe('chance level and absent capabilities', () => {
  it('chance is a uniform guess over the vocabulary, 0 for a gain', () => {
    expect(chanceLevel('logprob', 512)).toBeCloseTo(-6.238, 3)
    expect(chanceLevel('loss', 512)).toBeCloseTo(6.238, 3)
    expect(chanceLevel('accuracy', 8)).toBe(0.125)
    expect(chanceLevel('logprob', 512, true)).toBe(0)
    expect(() => chanceLevel('loss', 0)).toThrow(ConfigError)
  })

  it(
    'a clean score no better than chance is absent (aidreams induction: -9.40 against -6.24), with a warning naming ' +
      'both',
    () => {
      const probe = {
        ...inductionCapability({ tokens: [3, 4, 5, 6, 7, 8], blockLength: 4, count: 2 }),
        chance: chanceLevel('logprob', 512),
      }
      const absent = absentCapability(probe, -9.4)
      expect(absent).not.toBeNull()
      expect(absent?.message).toMatch(
        new RegExp(
          /does not show 'induction'.*-9\.40 nats per token, no better than chance /.source +
            /\(-6\.24\); there is nothing to localize/.source,
        ),
      )
      expect(absentCapability(probe, -1.2)).toBeNull()
      const loss = { ...probe, metric: 'loss' as const, chance: chanceLevel('loss', 512) }
      expect(absentCapability(loss, 7)).not.toBeNull()
      expect(absentCapability(loss, 3)).toBeNull()
      const gain = { ...probe, chance: 0 }
      expect(absentCapability(gain, -0.26)?.message).toMatch(/no better than chance \(0\.00\)/)
      expect(absentCapability(gain, 0.3)).toBeNull()
      expect(absentCapability({ ...probe, chance: undefined } as never, -100)).toBeNull()
    },
  )
})

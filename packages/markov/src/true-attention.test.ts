import { Rng, type TrueAttention } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { CellularAutomatonTask } from './cellular-automaton.ts'
import { IclMarkovTask } from './icl-markov.ts'
import { LinearMapTask } from './linear-map.ts'
import { SparseMarkovTask } from './sparse-markov.ts'

/** The keys marked in row `q` of a map. */
function keysOf(attention: TrueAttention, map: number, q: number): number[] {
  const { size } = attention
  const weights = (attention.maps[map] as { weights: Float32Array }).weights
  const keys: number[] = []
  for (let k = 0; k < size; k++) {
    const w = weights[q * size + k] as number
    expect(w === 0 || w === 1).toBe(true)
    if (w === 1) keys.push(k)
  }
  return keys
}

function expectCausal(attention: TrueAttention): void {
  const { size } = attention
  for (const { weights } of attention.maps) {
    expect(weights.length).toBe(size * size)
    for (let q = 0; q < size; q++) for (let k = q + 1; k < size; k++) expect(weights[q * size + k]).toBe(0)
    // The last position predicts nothing.
    expect(weights.subarray((size - 1) * size).every((w) => w === 0)).toBe(true)
  }
}

describe('trueAttention', () => {
  it('linear map: row q marks row i of M in the previous state, and those bits XOR to token q + 1', () => {
    const S = 8
    const task = new LinearMapTask({ stateSize: S, onesPerRow: 3, states: 3, bos: true })
    const attention = task.trueAttention()
    expect(attention.size).toBe(task.seqLength)
    expect(attention.maps.map((m) => m.name)).toEqual(['rows of M'])
    expectCausal(attention)
    for (let q = 0; q + 1 < task.seqLength; q++) {
      const keys = keysOf(attention, 0, q)
      const index = q + 1 - 1 // the BOS shifts cells by one
      if (index < S) {
        expect(keys).toEqual([])
        continue
      }
      const cell = index % S
      const previous = 1 + (Math.floor(index / S) - 1) * S
      const fromMatrix: number[] = []
      for (let j = 0; j < S; j++) if (task.matrix[cell * S + j] === 1) fromMatrix.push(previous + j)
      expect(keys).toEqual(fromMatrix)
    }
    // The data: the marked bits determine the predicted bit.
    const batch = task.sample(16, Rng.fromSeed(3))
    const L = task.seqLength
    for (let b = 0; b < 16; b++) {
      for (let q = 0; q + 1 < L; q++) {
        const keys = keysOf(attention, 0, q)
        if (keys.length === 0) continue
        const xor = keys.reduce((bit, k) => bit ^ (batch.tokens[b * L + k] as number), 0)
        expect(batch.tokens[b * L + q + 1]).toBe(xor)
      }
    }
  })

  it('cellular automaton: three neighbours (wrapping around) whose bits give the next cell under the rule', () => {
    const S = 6
    // Rule 150 is left XOR centre XOR right: the order of the three keys does not matter.
    const task = new CellularAutomatonTask({ cells: S, states: 3, rules: [150] })
    const attention = task.trueAttention()
    expect(attention.maps).toHaveLength(1)
    expectCausal(attention)
    const batch = task.sample(8, Rng.fromSeed(1))
    const L = task.seqLength
    let rows = 0
    for (let q = 0; q + 1 < L; q++) {
      const keys = keysOf(attention, 0, q)
      if (q + 1 < S) {
        expect(keys).toEqual([])
        continue
      }
      rows++
      const cell = (q + 1) % S
      const previous = q + 1 - S - cell
      expect(keys).toEqual([(cell + S - 1) % S, cell, (cell + 1) % S].map((j) => previous + j).sort((a, b) => a - b))
      for (let b = 0; b < 8; b++) {
        const xor = keys.reduce((bit, k) => bit ^ (batch.tokens[b * L + k] as number), 0)
        expect(batch.tokens[b * L + q + 1]).toBe(xor)
      }
    }
    expect(rows).toBe(2 * S)
  })

  it('sparse Markov chain: one map per span, in offset-group order, tiling the window of each generated token', () => {
    const task = new SparseMarkovTask({ vocabSize: 5, spans: [1, 2, 3], m: 1.7, genLen: 4 })
    const attention = task.trueAttention()
    const C = task.contextLength
    expect(attention.maps.map((m) => m.name)).toEqual(task.offsetGroups.map((g) => g.name))
    expectCausal(attention)
    for (let q = 0; q + 1 < task.seqLength; q++) {
      const perSpan = attention.maps.map((_, i) => keysOf(attention, i, q))
      if (q + 1 < C) {
        expect(perSpan.flat()).toEqual([])
        continue
      }
      perSpan.forEach((keys, i) => {
        const offsets = (task.offsetGroups[i] as { offsets: readonly number[] }).offsets
        expect(keys).toEqual(offsets.map((o) => q - o).sort((a, b) => a - b))
      })
      expect(perSpan.flat().sort((a, b) => a - b)).toEqual(task.parentPositions(q + 1))
    }
    // Most important first: the newest span (offset 0) has the largest weight m^2.
    expect(keysOf(attention, 0, task.seqLength - 2)).toEqual([
      task.seqLength - 4,
      task.seqLength - 3,
      task.seqLength - 2,
    ])
  })

  it('returns fresh arrays, and is absent where the pattern is inferred in context (icl-markov)', () => {
    const task = new LinearMapTask({ stateSize: 4, onesPerRow: 2 })
    const first = task.trueAttention()
    ;(first.maps[0] as { weights: Float32Array }).weights.fill(7)
    expect(task.trueAttention().maps[0]?.weights.some((w) => w === 7)).toBe(false)
    expect('trueAttention' in new IclMarkovTask()).toBe(false)
  })
})

import { ConfigError, InvalidArgumentError, Rng } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { createTask, registerMarkovTasks } from './create-task.ts'
import { CweTokensTask } from './cwe-tokens.ts'
import { MultihopTokensTask } from './multihop-tokens.ts'
import { NIAH_QUERY_TOKEN, NiahTokensTask } from './niah-tokens.ts'
import { isRetrievalTask, scoreAnswer, type RetrievalTask } from './retrieval.ts'
import { VT_ASSIGN_TOKEN, VtTokensTask } from './vt-tokens.ts'
import { TaskRegistry } from '@attnlab/core'

function row(task: RetrievalTask, tokens: Int32Array, b: number): number[] {
  return Array.from(tokens.subarray(b * task.seqLength, (b + 1) * task.seqLength))
}

function maskPositions(task: RetrievalTask, mask: Uint8Array, b: number): number[] {
  const out: number[] = []
  for (let p = 0; p < task.seqLength; p++) if (mask[b * task.seqLength + p] === 1) out.push(p)
  return out
}

const TASKS: readonly (() => RetrievalTask)[] = [
  () => new NiahTokensTask({ nCtx: 101, needles: 3, keyTokens: 60 }),
  () => new NiahTokensTask({ nCtx: 100, needles: 3, keyTokens: 60, questionFirst: true }),
  () => new VtTokensTask({ nCtx: 100, chains: 3, hops: 2 }),
  () => new VtTokensTask({ nCtx: 100, chains: 3, hops: 2, questionFirst: true }),
  () => new CweTokensTask({ nCtx: 100, frequentWords: 3, frequentCount: 8, rareCount: 2, wordTokens: 64 }),
  () => new MultihopTokensTask({ nCtx: 103, queries: 2, nameTokens: 60 }),
  () => new MultihopTokensTask({ nCtx: 103, queries: 2, nameTokens: 60, questionFirst: true }),
]

describe('retrieval tasks: shared contract', () => {
  for (const make of TASKS) {
    const task = make()
    it(`${task.kind}: exact length, mask only on the answers, ids in range, deterministic`, () => {
      expect(isRetrievalTask(task)).toBe(true)
      const batch = task.sample(6, Rng.fromSeed(3))
      expect(batch.tokens.length).toBe(6 * task.seqLength)
      expect(task.seqLength).toBe((task.describe().nCtx as number) + 1)
      for (let b = 0; b < 6; b++) expect(maskPositions(task, batch.lossMask, b)).toEqual(task.answerPositions)
      for (const t of batch.tokens) expect(t >= 0 && t < task.vocabSize).toBe(true)
      const again = task.sample(6, Rng.fromSeed(3))
      expect(Array.from(again.tokens)).toEqual(Array.from(batch.tokens))
      const other = task.sample(6, Rng.fromSeed(4))
      expect(Array.from(other.tokens)).not.toEqual(Array.from(batch.tokens))
      const rebuilt = registerMarkovTasks(new TaskRegistry()).create(JSON.parse(JSON.stringify(task.describe())))
      expect(Array.from(rebuilt.sample(6, Rng.fromSeed(3)).tokens)).toEqual(Array.from(batch.tokens))
    })
  }
})

describe('niah-tokens', () => {
  it('keys are distinct, the answer is the value after the queried key in the haystack', () => {
    const task = new NiahTokensTask({ nCtx: 101, needles: 3, keyTokens: 60 })
    const batch = task.sample(20, Rng.fromSeed(1))
    for (let b = 0; b < 20; b++) {
      const seq = row(task, batch.tokens, b)
      const query = seq.indexOf(NIAH_QUERY_TOKEN)
      expect(query).toBe((task.answerPositions[0] as number) - 2)
      const haystack = seq.slice(0, query)
      const keys = haystack.filter((_, p) => (p - (haystack.length % 2)) % 2 === 0 && p >= haystack.length % 2)
      expect(keys.length).toBe(task.pairs)
      expect(new Set(keys).size).toBe(task.pairs)
      for (const p of task.answerPositions) {
        const key = seq[p - 1] as number
        const at = haystack.indexOf(key)
        expect(at).toBeGreaterThanOrEqual(0)
        expect(seq[p]).toBe(haystack[at + 1])
      }
    }
  })

  it('refuses impossible configurations with ConfigError naming the parameter', () => {
    expect(() => new NiahTokensTask({ nCtx: 8, needles: 4 })).toThrow(/nCtx/)
    expect(() => new NiahTokensTask({ nCtx: 256, keyTokens: 50 })).toThrow(/keyTokens = 50 but 124 pairs/)
    expect(() => new NiahTokensTask({ nCtx: 256, keyTokens: 50 })).toThrow(ConfigError)
    expect(() => new NiahTokensTask({ needles: 0 })).toThrow(/needles/)
    expect(() => createTask({ kind: 'niah-tokens', bogus: 1 } as never)).toThrow(ConfigError)
  })

  it('default layout: the same tokens as before questionFirst existed (fixed sample)', () => {
    const task = new NiahTokensTask({ nCtx: 21, needles: 2, keyTokens: 16, valueTokens: 4 })
    expect(task.describe().questionFirst).toBe(false)
    const batch = task.sample(2, Rng.fromSeed(7))
    // biome-ignore format: one sequence per line
    expect(Array.from(batch.tokens)).toEqual([
      0, 14, 18, 12, 20, 10, 18, 2, 20, 7, 19, 9, 18, 13, 21, 16, 19, 1, 10, 18, 12, 20,
      0, 16, 18, 10, 20, 5, 19, 9, 19, 15, 18, 7, 18, 12, 21, 4, 21, 1, 16, 18, 10, 20,
    ])
    expect(maskPositions(task, batch.lossMask, 0)).toEqual([19, 21])
    expect(maskPositions(task, batch.lossMask, 1)).toEqual([19, 21])
  })

  it('questionFirst: the leading question lists the queried keys in the order asked; answers in the haystack', () => {
    for (const nCtx of [100, 101]) {
      const needles = 3
      const task = new NiahTokensTask({ nCtx, needles, keyTokens: 60, questionFirst: true })
      const plain = new NiahTokensTask({ nCtx, needles, keyTokens: 60 })
      expect(task.seqLength).toBe(nCtx + 1)
      expect(task.leadingTokens).toBe(needles + 1)
      expect(task.pairs).toBe(Math.floor((nCtx - 3 * needles - 1) / 2))
      expect(task.answerPositions).toEqual(plain.answerPositions)
      expect(task.vocabSize).toBe(plain.vocabSize)
      const batch = task.sample(20, Rng.fromSeed(2))
      expect(batch.tokens.length).toBe(20 * (nCtx + 1))
      for (let b = 0; b < 20; b++) {
        const seq = row(task, batch.tokens, b)
        expect(seq[0]).toBe(NIAH_QUERY_TOKEN)
        const asked = task.answerPositions.map((p) => seq[p - 1] as number)
        expect(seq.slice(1, needles + 1)).toEqual(asked)
        const query = (task.answerPositions[0] as number) - 2
        expect(seq[query]).toBe(NIAH_QUERY_TOKEN)
        // Between the leading question and the marker: the fill (odd remainder) then the pairs.
        const fill = query - (needles + 1) - 2 * task.pairs
        expect(fill === 0 || fill === 1).toBe(true)
        expect(seq.slice(needles + 1, needles + 1 + fill).every((t) => t === 0)).toBe(true)
        const haystack = seq.slice(needles + 1 + fill, query)
        expect(haystack).not.toContain(NIAH_QUERY_TOKEN)
        const keys = haystack.filter((_, p) => p % 2 === 0)
        expect(new Set(keys).size).toBe(task.pairs)
        expect(maskPositions(task, batch.lossMask, b)).toEqual(task.answerPositions)
        for (const p of task.answerPositions) {
          const at = keys.indexOf(seq[p - 1] as number)
          expect(at).toBeGreaterThanOrEqual(0)
          expect(seq[p]).toBe(haystack[2 * at + 1])
        }
      }
    }
  })

  it('questionFirst: a context too short for both statements of the question is a ConfigError', () => {
    // 2 needles: 2 pairs + leading question (3) + marker and queried pairs (5) = 12 tokens, nCtx 11.
    expect(() => new NiahTokensTask({ nCtx: 8, needles: 2 })).not.toThrow()
    expect(() => new NiahTokensTask({ nCtx: 10, needles: 2, questionFirst: true })).toThrow(ConfigError)
    expect(() => new NiahTokensTask({ nCtx: 10, needles: 2, questionFirst: true })).toThrow(
      /2 needles and its question before and after the haystack needs 12 tokens but the sequence has 11/,
    )
    expect(new NiahTokensTask({ nCtx: 11, needles: 2, questionFirst: true }).pairs).toBe(2)
    expect(() => createTask({ kind: 'niah-tokens', questionFirst: 1 } as never)).toThrow(/questionFirst/)
  })
})

describe('vt-tokens', () => {
  it.each([false, true])('the answer set is recovered by following assignments (questionFirst %s)', (questionFirst) => {
    const task = new VtTokensTask({ nCtx: 120, chains: 3, hops: 3, questionFirst })
    expect(task.answerPositions).toEqual(new VtTokensTask({ nCtx: 120, chains: 3, hops: 3 }).answerPositions)
    expect(task.leadingTokens).toBe(questionFirst ? 2 : 0)
    const batch = task.sample(20, Rng.fromSeed(2))
    for (let b = 0; b < 20; b++) {
      const seq = row(task, batch.tokens, b)
      const first = task.answerPositions[0] as number
      const value = seq[first - 1] as number
      expect(seq[first - 2]).toBe(1)
      // The leading question (questionFirst) is the marker and the same queried value.
      if (questionFirst) expect(seq.slice(0, 2)).toEqual([1, value])
      const context = seq.slice(task.leadingTokens, first - 2)
      expect(context).not.toContain(1)
      const resolved = new Set<number>([value])
      // reference solver: fixed point of "dst = src with src resolved"
      for (let changed = true; changed; ) {
        changed = false
        for (let p = 1; p + 1 < context.length; p++) {
          if (context[p] !== VT_ASSIGN_TOKEN) continue
          const dst = context[p - 1] as number
          if (resolved.has(context[p + 1] as number) && !resolved.has(dst)) {
            resolved.add(dst)
            changed = true
          }
        }
      }
      resolved.delete(value)
      const gold = task.answerPositions.map((p) => seq[p] as number)
      expect([...resolved].sort((x, y) => x - y)).toEqual([...gold].sort((x, y) => x - y))
    }
  })

  it('refuses impossible configurations', () => {
    expect(() => new VtTokensTask({ nCtx: 20, chains: 4, hops: 2 })).toThrow(/needs 41 tokens/)
    expect(() => new VtTokensTask({ chains: 10, hops: 9, nCtx: 1000 })).toThrow(/variableTokens/)
    expect(() => new VtTokensTask({ chains: 40, hops: 0, valueTokens: 8 })).toThrow(/valueTokens/)
    // 4 chains of 2 hops: 36 statement tokens + 5 of the question + 2 before the context.
    expect(() => new VtTokensTask({ nCtx: 40, chains: 4, hops: 2 })).not.toThrow()
    expect(() => new VtTokensTask({ nCtx: 41, chains: 4, hops: 2, questionFirst: true })).toThrow(
      /the question before and after the context needs 43 tokens but the sequence has 42/,
    )
    expect(() => new VtTokensTask({ nCtx: 42, chains: 4, hops: 2, questionFirst: true })).not.toThrow()
  })

  it('default layout: the same tokens as before questionFirst existed (fixed sample)', () => {
    const task = new VtTokensTask({ nCtx: 24, chains: 2, hops: 1, variableTokens: 6, valueTokens: 3, noiseTokens: 3 })
    expect(task.describe().questionFirst).toBe(false)
    // biome-ignore format: one sequence per line
    expect(Array.from(task.sample(2, Rng.fromSeed(7)).tokens)).toEqual([
      14, 9, 2, 3, 14, 10, 2, 4, 7, 2, 9, 14, 13, 14, 14, 13, 6, 2, 10, 12, 13, 1, 3, 9, 7,
      14, 13, 12, 12, 13, 10, 2, 4, 14, 14, 9, 2, 3, 7, 2, 10, 13, 12, 6, 2, 9, 1, 3, 9, 6,
    ])
  })
})

describe('cwe-tokens', () => {
  it('the answer is the set of the most frequent context tokens, ascending', () => {
    const task = new CweTokensTask({ nCtx: 100, frequentWords: 3, frequentCount: 8, rareCount: 2, wordTokens: 64 })
    const batch = task.sample(20, Rng.fromSeed(5))
    for (let b = 0; b < 20; b++) {
      const seq = row(task, batch.tokens, b)
      const first = task.answerPositions[0] as number
      const counts = new Map<number, number>()
      for (const t of seq.slice(0, first - 1)) if (t >= 2) counts.set(t, (counts.get(t) ?? 0) + 1)
      const top = [...counts.entries()].filter(([, c]) => c === 8).map(([t]) => t)
      expect(top.sort((x, y) => x - y)).toEqual(task.answerPositions.map((p) => seq[p]))
      expect([...counts.values()].filter((c) => c === 2).length).toBe(task.rareWords)
    }
  })

  it('refuses impossible configurations', () => {
    expect(() => new CweTokensTask({ rareCount: 10, frequentCount: 10 })).toThrow(/rareCount/)
    expect(() => new CweTokensTask({ nCtx: 30, frequentWords: 4, frequentCount: 10 })).toThrow(/nCtx/)
    expect(() => new CweTokensTask({ nCtx: 1024, wordTokens: 100 })).toThrow(/wordTokens = 100/)
  })
})

describe('multihop-tokens', () => {
  it.each([false, true])('the answer is found through the intermediate name (questionFirst %s)', (questionFirst) => {
    const task = new MultihopTokensTask({ nCtx: 103, queries: 2, nameTokens: 60, questionFirst })
    expect(task.answerPositions).toEqual(new MultihopTokensTask({ nCtx: 103, queries: 2 }).answerPositions)
    expect(task.chains).toBe(questionFirst ? Math.floor((103 - 4 - 3) / 4) : Math.floor((103 - 4) / 4))
    const batch = task.sample(20, Rng.fromSeed(6))
    for (let b = 0; b < 20; b++) {
      const seq = row(task, batch.tokens, b)
      const first = task.answerPositions[0] as number
      // The leading question (questionFirst): the marker, then the queried first names in the order asked.
      const asked = task.answerPositions.map((p) => seq[p - 1] as number)
      if (questionFirst) expect(seq.slice(0, 3)).toEqual([1, ...asked])
      expect(seq.slice(task.leadingTokens, first - 2)).not.toContain(1)
      const context = seq.slice(0, first - 2)
      const offset = context.length - 4 * task.chains
      const map = new Map<number, number>()
      for (let p = offset; p + 1 < context.length; p += 2) map.set(context[p] as number, context[p + 1] as number)
      expect(map.size).toBe(2 * task.chains)
      for (const p of task.answerPositions) {
        const middle = map.get(seq[p - 1] as number) as number
        expect(middle).toBeDefined()
        expect(map.get(middle)).toBe(seq[p])
      }
    }
  })

  it('refuses impossible configurations', () => {
    expect(() => new MultihopTokensTask({ nCtx: 10, queries: 2 })).toThrow(/nCtx/)
    expect(() => new MultihopTokensTask({ nCtx: 1024, nameTokens: 100 })).toThrow(/nameTokens/)
    // 2 queries: 2 chains (8) + marker and queried pairs (5) + leading question (3) = 16 tokens, nCtx 15.
    expect(() => new MultihopTokensTask({ nCtx: 12, queries: 2 })).not.toThrow()
    expect(() => new MultihopTokensTask({ nCtx: 14, queries: 2, questionFirst: true })).toThrow(
      /the question before and after the statements needs 16 tokens but the sequence has 15/,
    )
    expect(new MultihopTokensTask({ nCtx: 15, queries: 2, questionFirst: true }).chains).toBe(2)
  })

  it('default layout: the same tokens as before questionFirst existed (fixed sample)', () => {
    const task = new MultihopTokensTask({ nCtx: 29, queries: 2, nameTokens: 12, valueTokens: 4 })
    expect(task.describe().questionFirst).toBe(false)
    // biome-ignore format: one sequence per line
    expect(Array.from(task.sample(2, Rng.fromSeed(7)).tokens)).toEqual([
      0, 10, 13, 5, 8, 3, 17, 8, 15, 9, 16, 13, 14, 12, 2, 7, 3, 4, 9, 2, 14, 6, 11, 11, 15, 1, 4, 16, 6, 15,
      0, 12, 7, 8, 3, 9, 16, 10, 9, 7, 14, 13, 4, 5, 15, 2, 17, 11, 2, 4, 14, 6, 5, 3, 14, 1, 11, 17, 12, 14,
    ])
  })
})

describe('scoreAnswer', () => {
  it('sequence: per-token exact match and strict', () => {
    expect(scoreAnswer('sequence', [1, 2, 3, 4], [1, 2, 0, 4])).toEqual({ score: 0.75, strict: 0, iou: 0.6 })
    expect(scoreAnswer('sequence', [1, 2], [1, 2]).strict).toBe(1)
    expect(scoreAnswer('sequence', [1, 2], [2, 1])).toEqual({ score: 0, strict: 0, iou: 1 })
  })
  it('set: recall, strict equality, IoU; order and duplicates', () => {
    expect(scoreAnswer('set', [4, 7, 9], [9, 4, 7])).toEqual({ score: 1, strict: 1, iou: 1 })
    const partial = scoreAnswer('set', [4, 7, 9], [9, 4, 4])
    expect(partial.score).toBeCloseTo(2 / 3)
    expect(partial.strict).toBe(0)
    expect(partial.iou).toBeCloseTo(2 / 3)
    expect(scoreAnswer('set', [4, 7], [4, 5]).iou).toBeCloseTo(1 / 3)
  })
  it('throws InvalidArgumentError for a length mismatch', () => {
    expect(() => scoreAnswer('set', [1, 2], [1])).toThrow(InvalidArgumentError)
    expect(() => new NiahTokensTask({ nCtx: 64 }).scoreAnswer([1], [1])).toThrow(/expected one per answer token \(4\)/)
  })
})

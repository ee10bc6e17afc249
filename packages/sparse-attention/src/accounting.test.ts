import { describe, expect, it } from 'vitest'
import { ConfigError } from '@attnlab/core'
import {
  MODEL_SHAPES,
  QWEN25_FAMILY,
  TABLE3_BUDGETS,
  TABLE3_SPARSITIES,
  adaSnapKVSparsity,
  attentionShareOfPrefill,
  averagePool,
  blockSparseSparsity,
  blockSparseTopKForSparsity,
  buildVerticalSlashIndex,
  coverCount,
  decodeMemory,
  decodeSpeedup,
  kvShareOfDecode,
  prefillFlops,
  prefillSpeedup,
  questBudgetForSparsity,
  questIndexingMemory,
  questSparsity,
  snapKVCapacityForSparsity,
  snapKVSparsity,
  topK,
  verticalSlashIndexingFlops,
  verticalSlashKernelSparsity,
} from './index.ts'
import { topKMembers } from '@attnlab/core/kernels'

describe('selection primitives', () => {
  it('topK breaks ties toward the lower index, ranks forced entries first and NaN last', () => {
    expect(topK([1, 3, 3, 2], 2)).toEqual([1, 2])
    expect(topK([5, Infinity, 1, Infinity], 3)).toEqual([1, 3, 0])
    expect(topK([NaN, 0, -1], 3)).toEqual([1, 2, 0])
    expect(topK([1, 2, 3], 10)).toEqual([2, 1, 0])
    expect(topK([1, 2, 3], 0)).toEqual([])
    expect(topK([1, 2, 3, 9], 2, 3)).toEqual([2, 1])
  })

  it('topKMembers chooses the set topK chooses (ties, Infinity, NaN, -0, length)', () => {
    const members = (indices: number[], n: number): number[] => {
      const out = new Array<number>(n).fill(0)
      for (const i of indices) out[i] = 1
      return out
    }
    const cases: [number[], number, number?][] = [
      [[1, 3, 3, 2], 2],
      [[5, Infinity, 1, Infinity], 3],
      [[NaN, 0, -1], 3],
      [[NaN, 0, NaN, -1], 2],
      [[NaN, 0, NaN, -1], 3],
      [[0, -0, 0, -0], 2],
      [[1, 2, 3], 10],
      [[1, 2, 3], 0],
      [[1, 2, 3, 9], 2, 3],
      [[2, 2, 2, 1, 2], 3],
    ]
    for (const [scores, k, length] of cases) {
      const n = Math.min(length ?? scores.length, scores.length)
      expect(Array.from(topKMembers(scores, k, length)), `${scores} k ${k}`).toEqual(
        members(topK(scores, k, length), n),
      )
    }
    const random = Float64Array.from({ length: 500 }, (_, i) => Math.round(Math.sin(i * 7.3) * 20) / 4)
    for (const k of [1, 17, 250, 499, 500]) {
      expect(Array.from(topKMembers(random, k)), `k ${k}`).toEqual(members(topK(random, k), 500))
    }
  })

  it('coverCount counts cumsum <= coverage, plus one, capped at n', () => {
    expect(coverCount([0.5, 0.3, 0.2], 0)).toBe(1)
    expect(coverCount([0.5, 0.3, 0.2], 0.5)).toBe(2)
    expect(coverCount([0.2, 0.5, 0.3], 0.79)).toBe(2)
    expect(coverCount([0.5, 0.3, 0.2], 1)).toBe(3)
    expect(coverCount([], 1)).toBe(0)
  })

  it('averagePool pads with zeros that count in the mean (edges damped)', () => {
    expect(Array.from(averagePool([3, 3, 3, 3], 3))).toEqual([2, 3, 3, 2])
    expect(Array.from(averagePool([1, 2], 1))).toEqual([1, 2])
  })
})

describe('Vertical-Slash index (64x64 kernel accounting)', () => {
  it('turns distances into diagonal blocks per query block and merges like the reference builder', () => {
    // B = 4, n = 12: query blocks [0,4), [4,8), [8,12)
    const index = buildVerticalSlashIndex([], [0, 1, 6], 12, 4)
    // block 0 (end 4): 6 >= 4 skipped; 1 -> end 3 -> max(3,4)=4 -> [0,4); 0 -> 4: absorbed
    expect(index.rowBlocks[0]).toEqual({ blockStarts: [0], columns: [] })
    // block 1 (end 8): 6 -> [0,4)... max(2,4)=4 -> [0,4); 1 -> end 7 <= 4 + 4: grows by 4 -> [0,8);
    // 0 -> 8 > 8? no: absorbed
    expect(index.rowBlocks[1]).toEqual({ blockStarts: [0, 4], columns: [] })
    // block 2 (end 12): 6 -> [2,6); 1 -> 11 > 6 + 4: new range [7,11) after saving [2,6); 0 -> 12 > 11: grows to [7,15)
    expect(index.rowBlocks[2]).toEqual({ blockStarts: [2, 7, 11], columns: [] })
    expect(index.blockCount).toBe(6)
    expect(index.kernelCells).toBe(6 * 16)
    expect(index.reportedSparsity).toBeCloseTo(1 - 96 / 78, 12) // negative: whole blocks overhang
  })

  it('keeps verticals as columns only before the current range; drops covered and non-causal ones', () => {
    const index = buildVerticalSlashIndex([0, 5, 9, 13], [0], 16, 4)
    expect(index.rowBlocks.map((r) => r.columns)).toEqual([[], [0], [0, 5], [0, 5, 9]])
    expect(index.columnCount).toBe(6)
    expect(index.kernelCells).toBe(4 * 16 + 6 * 4)
    expect(verticalSlashKernelSparsity([0, 5, 9, 13], [0], 16, 4)).toBeCloseTo(1 - 88 / 136, 12)
  })

  it('at the study scale: clustered slashes share 64-blocks, spread ones each cost a band', () => {
    const n = 16384
    const verticals = Array.from({ length: 164 }, (_, i) => i * 97)
    const clustered = verticalSlashKernelSparsity(
      verticals,
      Array.from({ length: 164 }, (_, i) => i),
      n,
    )
    const spread = verticalSlashKernelSparsity(
      verticals,
      Array.from({ length: 164 }, (_, i) => (i < 64 ? i : 64 + i * 89)),
      n,
    )
    // V = S = 164 is Table 3's ~0.95 budget at 16K when slashes cluster near the diagonal
    expect(clustered).toBeGreaterThan(0.93)
    expect(clustered).toBeLessThan(0.97)
    expect(spread).toBeLessThan(0.75)
  })
})

describe('Block-Sparse accounting and budgets', () => {
  it('n = 16384, B = 16 (1024 blocks): K = 26 is 0.950 and K = 300 is 0.500', () => {
    expect(blockSparseSparsity(16384, 16, 26)).toBeCloseTo(0.95, 3)
    expect(blockSparseSparsity(16384, 16, 300)).toBeCloseTo(0.5, 3)
    expect(blockSparseSparsity(16384, 16, 26)).toBeCloseTo(1 - 26299 / 524800, 12)
  })

  it('caps K at the number of blocks (the study formula goes wrong beyond)', () => {
    expect(blockSparseSparsity(160, 16, 10)).toBe(0)
    expect(blockSparseSparsity(160, 16, 50)).toBe(0)
    expect(blockSparseSparsity(100, 16, 7)).toBe(0) // ceil(100/16) = 7 blocks
  })

  it('the K-for-sparsity helper reproduces every Block-Sparse budget of Table 3', () => {
    for (const [n, budgets] of Object.entries(TABLE3_BUDGETS.blockSparse)) {
      const ks = TABLE3_SPARSITIES.sevenLevels.map((s) => blockSparseTopKForSparsity(Number(n), 16, s))
      expect(ks, `n = ${n}`).toEqual([...budgets])
    }
  })

  it('rejects invalid arguments', () => {
    expect(() => blockSparseTopKForSparsity(16384, 16, 1.5)).toThrow(ConfigError)
    expect(() => blockSparseSparsity(0, 16, 3)).toThrow(/n/)
    expect(() => blockSparseSparsity(100, 0, 3)).toThrow(/blockSize/)
    expect(() => blockSparseSparsity(100, 16, 2.5)).toThrow(/topK/)
  })
})

describe('decode budgets (Table 3)', () => {
  it('SnapKV / Ada-SnapKV capacities are floor((1 - s) n)', () => {
    for (const [n, budgets] of Object.entries(TABLE3_BUDGETS.snapKV)) {
      expect(
        TABLE3_SPARSITIES.tenLevels.map((s) => snapKVCapacityForSparsity(Number(n), s)),
        `n = ${n}`,
      ).toEqual([...budgets])
    }
  })

  it('Quest budgets are (1 - s) n rounded to whole pages of 16', () => {
    for (const [n, budgets] of Object.entries(TABLE3_BUDGETS.quest)) {
      expect(
        TABLE3_SPARSITIES.tenLevels.map((s) => questBudgetForSparsity(Number(n), s)),
        `n = ${n}`,
      ).toEqual([...budgets])
    }
  })

  it('reported sparsities', () => {
    expect(snapKVSparsity(16384, 819)).toBeCloseTo(0.95, 4)
    expect(snapKVSparsity(100, 1000)).toBe(0)
    expect(adaSnapKVSparsity(100, [30, 10])).toBeCloseTo(0.8, 12)
    expect(questSparsity(16384, 816)).toBeCloseTo(1 - 816 / 16384, 12)
    expect(() => adaSnapKVSparsity(100, [])).toThrow(/keptPerHead/)
    expect(() => adaSnapKVSparsity(100, [101])).toThrow(/keptPerHead/)
    expect(() => snapKVCapacityForSparsity(100, -0.1)).toThrow(/sparsity/)
    expect(() => questBudgetForSparsity(100, 0.5, 0)).toThrow(/pageSize/)
  })
})

describe('cost model (appendix B)', () => {
  const mean = (f: (m: (typeof QWEN25_FAMILY)[number]) => number) =>
    QWEN25_FAMILY.reduce((a, m) => a + f(m), 0) / QWEN25_FAMILY.length

  it('attention is about 40% / 68% / 80% of Qwen2.5 prefill FLOPs at 16K / 64K / 128K', () => {
    expect(mean((m) => attentionShareOfPrefill(m, 16384))).toBeCloseTo(0.4, 2)
    expect(mean((m) => attentionShareOfPrefill(m, 65536))).toBeCloseTo(0.68, 2)
    expect(mean((m) => attentionShareOfPrefill(m, 131072))).toBeCloseTo(0.8, 2)
  })

  it('Eq. 3 as written gives 1.31x / 2.0x / 2.59x for 5x sparsity; the text reading 1.5x / 2.2x / 2.8x', () => {
    expect(mean((m) => prefillSpeedup(m, 16384, 0.8))).toBeCloseTo(1.31, 2)
    expect(mean((m) => prefillSpeedup(m, 65536, 0.8))).toBeCloseTo(2.0, 1)
    expect(mean((m) => prefillSpeedup(m, 131072, 0.8))).toBeCloseTo(2.59, 2)
    expect(mean((m) => prefillSpeedup(m, 16384, 0.8, 'attention'))).toBeCloseTo(1.5, 1)
    expect(mean((m) => prefillSpeedup(m, 65536, 0.8, 'attention'))).toBeCloseTo(2.2, 1)
    expect(mean((m) => prefillSpeedup(m, 131072, 0.8, 'attention'))).toBeCloseTo(2.8, 1)
  })

  it('computes Eq. 3 term by term (Qwen2.5-7B, 16K)', () => {
    const f = prefillFlops(MODEL_SHAPES['qwen2.5-7b'], 16384, { density: 0.5, batch: 2 })
    const L = 16384
    expect(f.embedding).toBe(2 * 2 * L * 3584)
    expect(f.attentionProjections).toBe(2 * 28 * 2 * L * 3584 * (3584 + 2 * 128 * 4 + 3584))
    expect(f.attentionScores).toBe(2 * 0.5 * 28 * (2 * 28 * L * L * 128 + 3 * 28 * L * L + 2 * 28 * L * L * 128))
    expect(f.mlp).toBe(2 * 28 * (6 * L * 3584 * 18944 + 2 * L * 18944))
    expect(f.logits).toBe(2 * 2 * L * 3584 * 152064)
    expect(f.total).toBeCloseTo(f.embedding + f.attentionProjections + f.attentionScores + f.mlp + f.logits, 0)
  })

  it('decode memory: KV share grows with length and batch (Qwen2.5 7% -> 35% at B = 1)', () => {
    const qwen = MODEL_SHAPES['qwen2.5-7b']
    const m = decodeMemory(qwen, 16384, { batch: 1 })
    expect(m.weights).toBe(28 * (4 * 3584 ** 2 + 3 * 3584 * 18944) + 3584 * 152064 + 3584)
    expect(m.kvCache).toBe(28 * 2 * 16384 * 128 * 4)
    expect(m.totalBytes).toBe(2 * m.total)
    expect(mean((x) => kvShareOfDecode(x, 16384))).toBeGreaterThan(0.04)
    expect(mean((x) => kvShareOfDecode(x, 16384))).toBeLessThan(0.1)
    expect(mean((x) => kvShareOfDecode(x, 131072))).toBeCloseTo(0.35, 1)
    expect(decodeSpeedup(qwen, 131072, 0.8, 64)).toBeGreaterThan(2.8)
    expect(decodeSpeedup(qwen, 16384, 0.8, 1)).toBeLessThan(1.1)
  })

  it('reproduces the Gemma-3 comparison (sliding-window layers lower the attention ratio)', () => {
    expect(attentionShareOfPrefill(MODEL_SHAPES['qwen2.5-14b'], 65536)).toBeCloseTo(0.76, 2)
    expect(attentionShareOfPrefill(MODEL_SHAPES['gemma-3-12b'], 65536)).toBeCloseTo(0.42, 2)
    expect(attentionShareOfPrefill(MODEL_SHAPES['gemma-3-12b'], 131072)).toBeCloseTo(0.54, 2)
    expect(kvShareOfDecode(MODEL_SHAPES['gemma-3-12b'], 65536, 8)).toBeCloseTo(0.6, 1)
    expect(kvShareOfDecode(MODEL_SHAPES['gemma-3-12b'], 131072, 8)).toBeCloseTo(0.75, 1)
  })

  it('indexing overheads follow the formulas (d as written, or d_h)', () => {
    const m = MODEL_SHAPES['qwen2.5-7b']
    const L = 16384
    const q = 256
    expect(verticalSlashIndexingFlops(m, L)).toBeCloseTo(
      28 * 28 * (2 * 3584 * L * q + 5 * L * q + 2 * L * 14 + (L / 64) * 1024),
      0,
    )
    expect(verticalSlashIndexingFlops(m, L, { dimension: 'head', verticals: 0, slashes: 0 })).toBeCloseTo(
      28 * 28 * (2 * 128 * L * q + 5 * L * q + 2 * L * 14),
      0,
    )
    expect(questIndexingMemory(m, L)).toBe((28 * 4 * 2 * 3584 * L) / 16)
    expect(questIndexingMemory(m, L, { dimension: 'head', pageSize: 32, batch: 2 })).toBe(
      (2 * 28 * 4 * 2 * 128 * L) / 32,
    )
  })

  it('prices an attention-only model (dMlp 0): no MLP term, the rest as with an MLP', () => {
    const withMlp = { ...MODEL_SHAPES['qwen2.5-7b'], layers: 2 }
    const attnOnly = { ...withMlp, dMlp: 0 }
    const f = prefillFlops(attnOnly, 1024, { density: 0.25 })
    const g = prefillFlops(withMlp, 1024, { density: 0.25 })
    expect(f.mlp).toBe(0)
    expect(g.mlp).toBeGreaterThan(0)
    expect([f.embedding, f.attentionProjections, f.attentionScores, f.logits]).toEqual([
      g.embedding,
      g.attentionProjections,
      g.attentionScores,
      g.logits,
    ])
    expect(f.total).toBe(g.total - g.mlp)
    const m = decodeMemory(attnOnly, 1024)
    expect(m.weights).toBe(2 * 4 * 3584 ** 2 + 3584 * 152064 + 3584)
    expect(m.kvCache).toBe(decodeMemory(withMlp, 1024).kvCache)
    expect(() => prefillFlops({ ...withMlp, dMlp: -1 }, 10)).toThrow(/dMlp/)
    expect(() => decodeMemory({ ...withMlp, dModel: 0 }, 10)).toThrow(/dModel/)
  })

  it('rejects invalid arguments', () => {
    const m = MODEL_SHAPES['qwen2.5-7b']
    expect(() => prefillFlops(m, 0)).toThrow(/length/)
    expect(() => prefillFlops(m, 10, { density: 2 })).toThrow(/density/)
    expect(() => prefillFlops(m, 10, { densityScope: 'all' as never })).toThrow(/densityScope/)
    expect(() => prefillFlops({ ...m, layers: 0 }, 10)).toThrow(/model.layers/)
    expect(() => decodeMemory(m, 10, { batch: 0 })).toThrow(/batch/)
    expect(() => prefillSpeedup(m, 10, 1.2)).toThrow(/sparsity/)
    expect(() => verticalSlashIndexingFlops(m, 10, { queries: 0 })).toThrow(/queries/)
    expect(() => questIndexingMemory(m, 10, { pageSize: 0 })).toThrow(/pageSize/)
  })
})

import { ConfigError } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import {
  CWE_WORDS,
  TEXT_TASK_NAMES,
  VT_NOISE,
  answerContent,
  countTokens,
  generateNarrative,
  generateTextTask,
  scoreTextSample,
  summarizeTextScores,
  type TextSample,
  type TextTaskTokenizer,
} from './index.ts'

/**
 * A test tokenizer: every word, number and punctuation mark is one token, and a word longer than
 * 4 characters is split into pieces of 4 (as BPE splits rare strings). Whitespace is free.
 */
const pieces: TextTaskTokenizer = {
  encode(text) {
    const out: number[] = []
    for (const m of text.matchAll(/[A-Za-z0-9]+|[^\sA-Za-z0-9]/g)) {
      const w = m[0]
      for (let i = 0; i < w.length; i += 4) out.push(w.charCodeAt(i))
    }
    return out
  },
}
/** A character-level tokenizer (every character a token, spaces included). */
const chars: TextTaskTokenizer = { encode: (text) => Array.from(text, (c) => c.charCodeAt(0)) }

const context = (s: TextSample) => {
  const m = /<context>\n([\s\S]*)\n<\/context>/.exec(s.prompt)
  if (m === null) throw new Error('no context')
  return m[1] as string
}

describe('text tasks: lengths in the tokenizer tokens', () => {
  for (const task of TEXT_TASK_NAMES)
    for (const [name, tokenizer] of [
      ['pieces', pieces],
      ['chars', chars],
    ] as const)
      it(`${task} (${name}) fills 90-100% of maxTokens, counted exactly, the same for the same seed`, () => {
        // whole chapters are the unit of the story tasks: at character level 3000 tokens hold 3-4,
        // too coarse to fill 90%
        const big = task.startsWith('story') || task === 'ruler-cwe'
        const maxTokens = big ? (name === 'chars' ? 30000 : 6000) : 3000
        const options = { tokenizer, maxTokens, seed: 3 }
        const s = generateTextTask(task, options)
        expect(s.task).toBe(task)
        expect(s.tokens).toBe(countTokens(tokenizer, s.prompt))
        expect(s.tokens).toBeLessThanOrEqual(maxTokens)
        expect(s.tokens).toBeGreaterThanOrEqual(0.9 * maxTokens)
        expect(s.fillers).toBeGreaterThan(0)
        expect(generateTextTask(task, options)).toEqual(s)
        expect(generateTextTask(task, { ...options, seed: 4 }).prompt).not.toBe(s.prompt)
        expect(scoreTextSample(s, s.goldAnswer)).toMatchObject({ score: 1, strict: 1, tagged: true })
      })
})

describe('text tasks: the prompt template', () => {
  it('states the question before and after the context by default, or only once', () => {
    const base = { tokenizer: pieces, maxTokens: 2000, seed: 0 }
    const both = generateTextTask('ruler-niah', base)
    const [before, after] = both.prompt.split(/<context>[\s\S]*<\/context>/)
    expect(before).toContain(both.question)
    expect(after).toContain(both.question)
    expect(both.prompt).toContain('both before and after')
    const late = generateTextTask('ruler-niah', { ...base, questionPosition: 'after' })
    expect(late.prompt.split('<context>')[0]).not.toContain(late.question)
    expect(late.prompt.split('</context>')[1]).toContain(late.question)
    const early = generateTextTask('ruler-niah', { ...base, questionPosition: 'before' })
    expect(early.prompt.split('</context>')[1]).not.toContain(early.question)
    expect(early.prompt).toMatch(/<answer><\/answer>/)
  })
})

describe('text tasks: the answer is recoverable from the context', () => {
  it('ruler-niah: a haystack of key-value sentences only, each asked key stated once with its value', () => {
    const s = generateTextTask('ruler-niah', { tokenizer: pieces, maxTokens: 4000, seed: 1 })
    const sentences = context(s).split(/(?<=\.) /)
    expect(sentences.length).toBe(s.fillers + 4)
    const table = new Map<string, string>()
    for (const sentence of sentences) {
      const m = /^The value for key ([a-z0-9]{8}(?:-[a-z0-9]{8}){3}) is: ([a-z0-9]{8}(?:-[a-z0-9]{8}){3})\.$/.exec(
        sentence,
      )
      expect(m, sentence).not.toBeNull()
      expect(table.has(m?.[1] as string)).toBe(false)
      table.set(m?.[1] as string, m?.[2] as string)
    }
    expect(s.queries).toHaveLength(4)
    expect(s.queries.map((k) => table.get(k))).toEqual(s.gold)
    expect(s.question).toBe(`Extract the values for the following keys: ${s.queries.join(', ')}.`)
  })

  it('ruler-vt: following the shuffled assignments from the value gives exactly the gold variables', () => {
    const s = generateTextTask('ruler-vt', { tokenizer: pieces, maxTokens: 3000, seed: 2 })
    const text = context(s)
    expect(text.split(VT_NOISE).length - 1).toBe(s.fillers)
    const assigns = [...text.matchAll(/VAR ([A-Z]{5}) = (VAR ([A-Z]{5})|(\d{5}))\./g)]
    expect(assigns).toHaveLength(8 * 5)
    const value = /assigned the value (\d{5})/.exec(s.question)?.[1]
    const resolved = new Set<string>()
    for (const a of assigns) if (a[4] === value) resolved.add(a[1] as string)
    for (let grew = true; grew; ) {
      grew = false
      for (const a of assigns)
        if (a[3] !== undefined && resolved.has(a[3]) && !resolved.has(a[1] as string)) {
          resolved.add(a[1] as string)
          grew = true
        }
    }
    expect([...resolved].sort()).toEqual([...s.gold].sort())
    // shuffled together: some assignment is not in chain order
    const order = s.gold.map((v) => text.indexOf(`VAR ${v} =`))
    expect(order.some((p, i) => i > 0 && p < (order[i - 1] as number)) || text.indexOf(VT_NOISE) < order[0]!).toBe(true)
  })

  it('ruler-cwe: the words listed 30 times are exactly the gold; every other word 3 times', () => {
    const s = generateTextTask('ruler-cwe', { tokenizer: pieces, maxTokens: 5000, seed: 5 })
    const lines = context(s).split('\n')
    const counts = new Map<string, number>()
    lines.forEach((line, i) => {
      const m = /^(\d+)\. ([a-z]+)$/.exec(line)
      expect(m, line).not.toBeNull()
      expect(Number(m?.[1])).toBe(i + 1)
      counts.set(m?.[2] as string, (counts.get(m?.[2] as string) ?? 0) + 1)
    })
    const common = [...counts].filter(([, c]) => c === 30).map(([w]) => w)
    expect(common.sort()).toEqual([...s.gold].sort())
    expect([...counts.values()].every((c) => c === 30 || c === 3)).toBe(true)
    expect(counts.size).toBe(10 + s.fillers)
    expect(CWE_WORDS.length).toBeGreaterThan(9000)
    expect(CWE_WORDS.every((w) => /^[a-z]+$/.test(w))).toBe(true)
  })

  it('story-retrieval: each question names a chapter whose text holds the gold answer', () => {
    const s = generateTextTask('story-retrieval', { tokenizer: pieces, maxTokens: 6000, seed: 7 })
    const chapters = context(s).split('\n\n')
    expect(chapters.length).toBe(s.fillers)
    expect(s.queries).toHaveLength(16)
    const asked = s.queries.map((q) => Number(/Chapter (\d+)/.exec(q)?.[1]))
    expect(new Set(asked).size).toBe(16)
    asked.forEach((k, i) => {
      const chapter = chapters[k - 1] as string
      expect(chapter.startsWith(`Chapter ${k}:\n`)).toBe(true)
      expect(chapter).toContain(s.gold[i] as string)
      // the answer is this chapter's alone among the others of its kind
      if (/item/.test(s.queries[i] as string))
        expect(chapters.filter((c) => c.includes(s.gold[i] as string)).length).toBeLessThanOrEqual(2)
    })
  })

  it('story-multihop: the gold item is bought in the chapter before the one that buys the named item', () => {
    const s = generateTextTask('story-multihop', { tokenizer: pieces, maxTokens: 3000, seed: 8 })
    const item = /acquiring the (.+)\?$/.exec(s.question)?.[1] as string
    const narrative = generateNarrative(8, s.fillers)
    const k = narrative.chapters.findIndex((c) => c.bought === item)
    expect(k).toBeGreaterThan(0)
    expect(narrative.chapters[k - 1]?.bought).toBe(s.gold[0])
    expect(context(s)).toBe(narrative.text)
  })

  it('story-filtering: exactly the gold chapters have no buying sentence', () => {
    const s = generateTextTask('story-filtering', { tokenizer: pieces, maxTokens: 3000, seed: 9 })
    const chapters = context(s).split('\n\n')
    const buys = /bought a |purchased a |sold Arion a |acquired a /
    const without = chapters.flatMap((c, i) => (buys.test(c) ? [] : [String(i + 1)]))
    expect(without).toEqual(s.gold)
    expect(s.gold).toHaveLength(3)
  })

  it('narratives: chapters have unique location-character pairs and unique items; only bought items are sold', () => {
    const n = generateNarrative(0, 60)
    expect(new Set(n.chapters.map((c) => `${c.location}|${c.character}`)).size).toBe(60)
    expect(new Set(n.chapters.map((c) => c.bought)).size).toBe(60)
    const seen = new Set<string>()
    for (const c of n.chapters) {
      if (c.sold !== null) {
        expect(seen.has(c.sold)).toBe(true)
        seen.delete(c.sold)
      }
      if (c.bought !== null) seen.add(c.bought)
    }
    // a prefix of a longer narrative is the shorter one
    expect(generateNarrative(0, 10).text).toBe(
      n.chapters
        .slice(0, 10)
        .map((c) => c.text)
        .join('\n\n'),
    )
  })
})

describe('text tasks: the metrics and their quirks', () => {
  const niah = generateTextTask('ruler-niah', { tokenizer: pieces, maxTokens: 2000, seed: 0 })
  const line = (i: number, key = niah.queries[i], value = niah.gold[i]) =>
    `${i + 1}. The answer for ${key} is ${value}.`

  it('ruler-niah: per-key exact match in asked order, values case- and "is:"-insensitive', () => {
    const upper = [0, 1, 2, 3].map((i) => line(i, niah.queries[i], niah.gold[i]?.toUpperCase())).join('\n')
    expect(scoreTextSample(niah, upper)).toMatchObject({ score: 1, strict: 1, tagged: false })
    const half = [line(0), line(1), line(2, niah.queries[3], niah.gold[3]), line(3, niah.queries[2], niah.gold[2])]
    expect(scoreTextSample(niah, `<answer>${half.join('\n')}</answer>`)).toMatchObject({ score: 0.5, strict: 0 })
    expect(scoreTextSample(niah, `${line(0).replace(' is ', ' is: ')}\n${line(1)}`).score).toBe(0.5)
    expect(scoreTextSample(niah, '').score).toBe(0)
  })

  it('ruler-vt: IoU of the variable sets, VAR prefix and case ignored', () => {
    const vt = generateTextTask('ruler-vt', { tokenizer: pieces, maxTokens: 2000, seed: 0 })
    const g = vt.gold
    expect(scoreTextSample(vt, `<answer>${g.map((v) => `var ${v.toLowerCase()}`).join(', ')}</answer>`).score).toBe(1)
    const three = scoreTextSample(vt, `${g.slice(0, 3).join(', ')}, ZZZZZ`)
    expect(three.score).toBeCloseTo(3 / 6)
    expect(three.strict).toBe(0)
  })

  it('ruler-cwe: IoU of the numbered words, 0 without an <answer> tag (strict does not need it)', () => {
    const cwe = generateTextTask('ruler-cwe', { tokenizer: pieces, maxTokens: 3000, seed: 0 })
    const list = cwe.gold.map((w, i) => `${i + 1}. ${w}`).join('\n')
    expect(scoreTextSample(cwe, list)).toMatchObject({ score: 0, strict: 1, tagged: false })
    const five = cwe.gold
      .slice(0, 5)
      .map((w, i) => `${i + 1}. ${w.toUpperCase()}`)
      .join('\n')
    expect(scoreTextSample(cwe, `<answer>\n${five}\n</answer>`)).toMatchObject({ score: 0.5, strict: 0 })
    expect(answerContent('x <answer>a</answer> <answer>b')).toBe('b')
  })

  it('story-retrieval: per question, a leading article and trailing punctuation ignored', () => {
    const s = generateTextTask('story-retrieval', { tokenizer: pieces, maxTokens: 6000, seed: 1 })
    const answers = s.gold.map(
      (g, i) => `${i + 1}. ${i % 2 === 0 ? `The ${g.replace(/^the /, '')}.` : g.toUpperCase()}`,
    )
    expect(scoreTextSample(s, answers.join('\n')).score).toBe(1)
    expect(scoreTextSample(s, answers.slice(0, 4).join('\n'))).toMatchObject({ score: 4 / 16, strict: 0 })
  })

  it('story-multihop: exact match; an empty answer is skipped, strict scores it 0', () => {
    const s = generateTextTask('story-multihop', { tokenizer: pieces, maxTokens: 2000, seed: 1 })
    expect(scoreTextSample(s, `<answer>The ${s.gold[0]}.</answer>`)).toMatchObject({ score: 1, strict: 1 })
    expect(scoreTextSample(s, '<answer>a wooden spoon</answer>')).toMatchObject({ score: 0, strict: 0 })
    expect(scoreTextSample(s, '<answer> </answer>')).toMatchObject({ score: null, strict: 0 })
  })

  it('story-filtering: IoU of chapter numbers ("Chapter 3" or "3"); empty skipped', () => {
    const s = generateTextTask('story-filtering', { tokenizer: pieces, maxTokens: 2000, seed: 1 })
    const [a, b, c] = s.gold
    expect(scoreTextSample(s, `Chapter ${a}, ${b} and chapter ${c}`).score).toBe(1)
    expect(scoreTextSample(s, `<answer>Chapter ${a}, Chapter ${b}</answer>`)).toMatchObject({ score: 2 / 3, strict: 0 })
    expect(scoreTextSample(s, '<answer>none</answer>')).toMatchObject({ score: null, strict: 0 })
  })

  it('summaries: mean and sample sd over scored samples, skips counted, strict over all', () => {
    const sum = summarizeTextScores([
      { score: 1, strict: 1, predicted: [], tagged: true },
      { score: 0.5, strict: 0, predicted: [], tagged: true },
      { score: null, strict: 0, predicted: [], tagged: false },
    ])
    expect(sum.mean).toBe(0.75)
    expect(sum.sd).toBeCloseTo(Math.sqrt(0.125))
    expect(sum).toMatchObject({ scored: 2, skipped: 1, strict: 1 / 3 })
    expect(() => summarizeTextScores([])).toThrow(ConfigError)
  })
})

describe('text tasks: bad input', () => {
  const base = { tokenizer: pieces, maxTokens: 2000, seed: 0 }
  it('names the option', () => {
    const bad = (f: () => unknown, parameter: string) => {
      try {
        f()
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError)
        expect((e as ConfigError).parameter).toBe(parameter)
        return
      }
      throw new Error('did not throw')
    }
    bad(() => generateTextTask('ruler-xyz' as never, base), 'task')
    bad(() => generateTextTask('ruler-niah', { ...base, maxTokens: 1.5 }), 'maxTokens')
    bad(() => generateTextTask('ruler-niah', { ...base, minFill: 0 }), 'minFill')
    bad(() => generateTextTask('ruler-niah', { ...base, seed: Number.NaN }), 'seed')
    bad(() => generateTextTask('ruler-niah', { ...base, questionPosition: 'middle' as never }), 'questionPosition')
    bad(() => generateTextTask('ruler-niah', { ...base, tokenizer: {} as never }), 'tokenizer')
    bad(() => generateTextTask('ruler-niah', { ...base, needles: 0 }), 'needles')
    bad(() => generateTextTask('ruler-vt', { ...base, hops: -1 }), 'hops')
    bad(() => generateTextTask('ruler-cwe', { ...base, rareFrequency: 30 }), 'rareFrequency')
    bad(() => generateTextTask('story-retrieval', { ...base, queries: 0 }), 'queries')
    bad(() => generateTextTask('story-filtering', { ...base, chaptersWithoutPurchase: 0 }), 'chaptersWithoutPurchase')
    bad(() => scoreTextSample({ ...generateTextTask('ruler-niah', base), task: 'qa' as never }, ''), 'task')
  })

  it('says how many tokens the smallest prompt needs when maxTokens is too small', () => {
    expect(() => generateTextTask('ruler-cwe', { ...base, maxTokens: 500 })).toThrow(
      /500 tokens cannot hold 10 common words x30: the smallest such prompt has \d+ tokens/,
    )
    expect(() => generateTextTask('story-retrieval', { ...base, maxTokens: 500 })).toThrow(
      /16 chapters for 16 questions/,
    )
    // one of a kind is named in the singular
    expect(() => generateTextTask('ruler-niah', { ...base, needles: 1, groups: 1, maxTokens: 20 })).toThrow(
      /20 tokens cannot hold 1 needle: /,
    )
    expect(() => generateTextTask('ruler-vt', { ...base, chains: 1, hops: 1, maxTokens: 20 })).toThrow(
      /cannot hold 1 chain of 1 hop: /,
    )
    // smaller tasks fit
    const small = generateTextTask('ruler-cwe', {
      ...base,
      maxTokens: 500,
      commonWords: 3,
      commonFrequency: 6,
      rareFrequency: 2,
    })
    expect(small.gold).toHaveLength(3)
  })

  it('a minimum fill that the content cannot reach is an error, not a short prompt', () => {
    // 4 questions need 4 chapters; at most 480 chapters exist: 10^6 tokens cannot be filled
    expect(() => generateTextTask('story-multihop', { ...base, maxTokens: 1 << 20 })).toThrow(
      /fills only \d+ of 1048576 tokens, below the minimum fill 0\.9 \(943719 tokens\): every one of the generator's/,
    )
  })
})

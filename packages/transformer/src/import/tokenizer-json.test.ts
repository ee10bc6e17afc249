import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { REPO_ROOT } from '../__fixtures__/import/aidreams.ts'
import { loadTokenizer } from './load.ts'
import { HuggingFaceTokenizer } from './tokenizer-json.ts'

const DIR = join(REPO_ROOT, '../shared/models/tinystories656K')
const HAVE = existsSync(join(DIR, 'tokenizer.json'))
if (!HAVE) console.warn(`[attnlab] ${DIR} is absent: the tokenizer.json tests on tinystories656K are skipped`)

/** A BPE tokenizer.json small enough to write by hand: pieces a, b, ab, ▁, ▁a; Prepend + Replace normalizer. */
const TINY = {
  version: '1.0',
  added_tokens: [
    { id: 0, content: '<unk>', special: true, normalized: false, lstrip: false, rstrip: false, single_word: false },
    { id: 1, content: '<s>', special: true, normalized: false, lstrip: false, rstrip: false, single_word: false },
    { id: 2, content: '</s>', special: true, normalized: false, lstrip: false, rstrip: false, single_word: false },
  ],
  normalizer: {
    type: 'Sequence',
    normalizers: [
      { type: 'Prepend', prepend: '▁' },
      { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
    ],
  },
  pre_tokenizer: null,
  post_processor: null,
  decoder: {
    type: 'Sequence',
    decoders: [
      { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
      { type: 'Fuse' },
      { type: 'Strip', content: ' ', start: 1, stop: 0 },
    ],
  },
  model: {
    type: 'BPE',
    unk_token: '<unk>',
    fuse_unk: true,
    byte_fallback: false,
    vocab: { '<unk>': 0, '<s>': 1, '</s>': 2, a: 3, b: 4, ab: 5, '▁': 6, '▁a': 7 },
    merges: ['a b', '▁ a'],
  },
}

describe.skipIf(!HAVE)('tinystories656K tokenizer.json (through @huggingface/tokenizers)', () => {
  // Read when the suite runs (not at import), so a checkout without the shared models only skips it.
  let withPrefix: HuggingFaceTokenizer
  let noPrefix: HuggingFaceTokenizer
  beforeAll(async () => {
    const json = await readFile(join(DIR, 'tokenizer.json'), 'utf8')
    const config = await readFile(join(DIR, 'tokenizer_config.json'), 'utf8')
    withPrefix = HuggingFaceTokenizer.fromJson(json, config, { vocabSize: 2048 })
    noPrefix = HuggingFaceTokenizer.fromJson(json, config, { vocabSize: 2048, dummyPrefix: false })
  })

  it('special tokens and vocabulary as its README and tokenizer_config.json say', () => {
    expect(withPrefix.kind).toBe('huggingface')
    expect(withPrefix.vocabSize).toBe(2048)
    expect([withPrefix.bosId, withPrefix.eosId]).toEqual([1, 2])
    expect(withPrefix.specialIds).toEqual([0, 1, 2])
    expect([0, 1, 2].map((id) => withPrefix.tokenText(id))).toEqual(['<unk>', '<|start_story|>', '<|end_story|>'])
    expect([0, 1, 2, 3].map((id) => withPrefix.isSpecial(id))).toEqual([true, true, true, false])
    expect(withPrefix.dummyPrefix).toBe(true)
    expect(noPrefix.dummyPrefix).toBe(false)
  })

  it("the normalizer prepends '▁' (id 80) unless dummyPrefix is false", () => {
    const text = 'Once upon a time, there was a little girl named Lily.'
    const ids = noPrefix.encode(text)
    // The model's own greedy continuation from BOS alone (load.test.ts, checked against its logits) starts with
    // these ids and decodes to this sentence: the no-prefix encoding is the one the model was trained on.
    expect(ids).toEqual([1, 147, 201, 282, 215, 286, 598, 629, 10])
    expect(withPrefix.encode(text)).toEqual([1, 80, ...ids.slice(1)])
    expect(withPrefix.tokenText(80)).toBe('▁')
    expect(ids.slice(1).map((id) => noPrefix.tokenText(id))).toEqual([
      'On',
      'ce▁',
      'upon▁a▁tim',
      'e,▁',
      'there▁was▁a▁',
      'little▁girl▁named▁',
      'Lily',
      '.',
    ])
  })

  it('round trips: decode(encode(text)) is the text, with and without the prefix', () => {
    const texts = [
      'Once upon a time, there was a little girl named Lily.',
      'She said, "Let\'s go!" and they ran to the park. ',
      ' two  spaces and a leading one',
      'Tom was sad.\nThen he smiled.',
      '',
    ]
    for (const tokenizer of [withPrefix, noPrefix]) {
      for (const text of texts) {
        const ids = tokenizer.encode(text, { bos: false })
        expect(tokenizer.decode(ids)).toBe(text)
        expect(tokenizer.decode(tokenizer.encode(text, { eos: true }))).toBe(text)
      }
    }
  })

  it('BOS / EOS: added by encode as asked, skipped by decode unless asked; special text is its token', () => {
    expect(noPrefix.encode('Hi', { bos: false })).toEqual(noPrefix.encode('Hi').slice(1))
    expect(noPrefix.encode('Hi', { eos: true }).at(-1)).toBe(2)
    expect(noPrefix.decode(noPrefix.encode('Hi', { eos: true }), { skipSpecialTokens: false })).toBe(
      '<|start_story|>Hi<|end_story|>',
    )
    expect(noPrefix.encode('The end.<|end_story|>', { bos: false }).at(-1)).toBe(2)
    expect(noPrefix.encode('')).toEqual([1])
  })

  it('characters outside the vocabulary become <unk> (byte_fallback without <0xNN> pieces)', () => {
    const ids = noPrefix.encode('a 日本 b', { bos: false })
    expect(ids).toContain(0)
    expect(noPrefix.decode(ids, { skipSpecialTokens: false })).toBe('a <unk> b')
  })

  it('decode with previous: what the ids add after that token', () => {
    const ids = noPrefix.encode('Once upon a time', { bos: false })
    const whole = noPrefix.decode(ids)
    const head = noPrefix.decode(ids.slice(0, 2))
    expect(head + noPrefix.decode(ids.slice(2), { previous: ids[1] as number })).toBe(whole)
    expect(() => noPrefix.decode([2048])).toThrow(/token id 2048 is outside the vocabulary \[0, 2048\)/)
  })
})

describe('HuggingFaceTokenizer on a hand-written tokenizer.json', () => {
  it('BPE merges, BOS/EOS from tokenizer_config.json, the dummy prefix option', () => {
    const config = { bos_token: '<s>', eos_token: { content: '</s>' } }
    const tokenizer = HuggingFaceTokenizer.fromJson(TINY, config)
    expect([tokenizer.bosId, tokenizer.eosId, tokenizer.vocabSize]).toEqual([1, 2, 8])
    expect(tokenizer.encode('ab a')).toEqual([1, 6, 5, 7])
    const plain = HuggingFaceTokenizer.fromJson(JSON.stringify(TINY), JSON.stringify(config), { dummyPrefix: false })
    expect(plain.encode('ab a')).toEqual([1, 5, 7])
    expect(plain.decode([1, 5, 7])).toBe('ab a')
    // The model config's ids win over tokenizer_config.json.
    expect(HuggingFaceTokenizer.fromJson(TINY, config, { bosId: 2, eosId: 1 }).encode('a', { eos: true })).toEqual([
      2, 7, 1,
    ])
  })

  it('refuses what is not a usable tokenizer.json, naming the file and the problem', () => {
    const file = { file: 'x/tokenizer.json' }
    expect(() => HuggingFaceTokenizer.fromJson('{"model": ', {}, file)).toThrow(
      /^x\/tokenizer\.json: tokenizer\.json is not valid JSON/,
    )
    expect(() => HuggingFaceTokenizer.fromJson('[1, 2]', {}, file)).toThrow(
      'x/tokenizer.json: tokenizer.json is not a JSON object',
    )
    expect(() => HuggingFaceTokenizer.fromJson(TINY, 'nope', file)).toThrow(/tokenizer_config\.json is not valid JSON/)
    expect(() => HuggingFaceTokenizer.fromJson({ version: '1.0' }, {}, file)).toThrow(
      /not a Hugging Face tokenizer\.json: it has no "model" object/,
    )
    expect(() => HuggingFaceTokenizer.fromJson({ ...TINY, model: { type: 'Unknown' } }, {}, file)).toThrow(
      /^x\/tokenizer\.json: @huggingface\/tokenizers cannot build this tokenizer \(/,
    )
    expect(() => HuggingFaceTokenizer.fromJson(TINY, {}, { ...file, vocabSize: 5 })).toThrow(
      "x/tokenizer.json: the tokenizer has ids up to 7 but the model's vocabulary has 5 tokens",
    )
    // BOS/EOS named only by tokenizer_config.json (not special in the file) are still skipped by decode.
    const { added_tokens: _, ...unmarked } = TINY
    const named = HuggingFaceTokenizer.fromJson(unmarked, { bos_token: '<s>', eos_token: '</s>' })
    expect(named.decode(named.encode('ab', { eos: true }))).toBe('ab')
    expect(named.decode(named.encode('ab'), { skipSpecialTokens: false })).toBe('<s> ab')
    // No BOS anywhere (as Qwen2's tokenizer): encode adds none.
    expect(HuggingFaceTokenizer.fromJson(TINY, {}, { ...file, vocabSize: 8 }).encode('b')).toEqual([6, 4])
    expect(() => HuggingFaceTokenizer.fromJson(TINY, {}, { ...file, bosId: 9, eosId: 2 })).toThrow(
      'x/tokenizer.json: BOS id 9 is outside the vocabulary',
    )
    try {
      HuggingFaceTokenizer.fromJson('{', {}, file)
    } catch (error) {
      expect(error).toMatchObject({ name: 'ModelFileError', code: 'INVALID_CHECKPOINT', reason: 'invalid-json' })
    }
  })
})

describe('loadTokenizer tells tokenizer.json from tokenizer.bin by content', () => {
  let root: string
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'attnlab-tokenizer-json-'))
  })
  afterAll(async () => {
    await rm(root, { recursive: true, force: true })
  })

  it('reads tokenizer_config.json beside it, and names that file when it is broken', async () => {
    const dir = await mkdtemp(join(root, 'tiny-'))
    const path = join(dir, 'tokenizer.json')
    await writeFile(path, JSON.stringify(TINY))
    await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify({ bos_token: '<s>', eos_token: '</s>' }))
    const tokenizer = await loadTokenizer(path, { dummyPrefix: false })
    expect(tokenizer.kind).toBe('huggingface')
    expect(tokenizer.encode('ab')).toEqual([1, 5])
    await writeFile(join(dir, 'tokenizer_config.json'), '{ broken')
    await expect(loadTokenizer(path)).rejects.toThrow(/tokenizer_config\.json: not valid JSON/)
    await writeFile(join(dir, 'tokenizer_config.json'), '[]')
    await expect(loadTokenizer(path)).rejects.toThrow(/tokenizer_config\.json: not a JSON object/)
  })

  it.skipIf(!HAVE)("tinystories656K's file under any name", async () => {
    const copy = join(root, 'renamed.bin')
    await writeFile(copy, await readFile(join(DIR, 'tokenizer.json'), 'utf8'))
    const tokenizer = await loadTokenizer(copy, { vocabSize: 2048, bosId: 1, eosId: 2 })
    expect(tokenizer.kind).toBe('huggingface')
    expect(tokenizer.encode('Once', { bos: false })[0]).toBe(80)
  })
})

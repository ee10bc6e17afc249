import { readFileSync } from 'node:fs'
import { AttnlabError, InvalidArgumentError, Rng } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { AIDREAMS, HAVE_AIDREAMS } from '../__fixtures__/import/aidreams.ts'
import fixture from '../__fixtures__/import/aidreams-tokenizer.json' with { type: 'json' }
import { ModelFileError, UnsupportedModelError } from './errors.ts'
import { Llama2cTokenizer } from './tokenizer.ts'

/** A small vocabulary in the llama2.c layout: <unk>, BOS, EOS, 256 byte pieces, then merges. */
function smallTokenizer(withBytes = true): Llama2cTokenizer {
  const pieces: string[] = ['<unk>', '\n<s>\n', '\n</s>\n']
  const scores: number[] = [0, 0, 0]
  if (withBytes) {
    for (let b = 0; b < 256; b++) {
      pieces.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)
      scores.push(0)
    }
  }
  const merges = [
    ' ',
    'a',
    'b',
    'c',
    'd',
    'e',
    'h',
    'l',
    'o',
    'w',
    'r',
    ' a',
    'ab',
    ' ab',
    'he',
    'll',
    'hell',
    'hello',
    ' hello',
    'é',
    'ca',
    'café',
    ' w',
    'or',
    ' wor',
    'ld',
  ]
  merges.forEach((piece, i) => {
    pieces.push(piece)
    scores.push(-i)
  })
  return Llama2cTokenizer.fromPieces(pieces, scores)
}

/** run.c's encode loop, literally: O(n^2) rescans for the best pair (the reference for the heap). */
function naiveEncode(tokenizer: Llama2cTokenizer, text: string): number[] {
  const vocab = Array.from({ length: tokenizer.vocabSize }, (_, id) =>
    Buffer.from(tokenizer.piece(id)).toString('latin1'),
  )
  const lookup = new Map<string, number>()
  vocab.forEach((piece, id) => {
    if (!lookup.has(piece)) lookup.set(piece, id)
  })
  const tokens: number[] = []
  if (text.length > 0) {
    for (const char of ` ${text}`) {
      const bytes = Buffer.from(char, 'utf8')
      const id = lookup.get(bytes.toString('latin1'))
      if (id !== undefined) tokens.push(id)
      else
        for (const byte of bytes)
          tokens.push(lookup.get(`<0x${byte.toString(16).toUpperCase().padStart(2, '0')}>`) as number)
    }
  }
  for (;;) {
    let best = -1e10
    let bestId = -1
    let bestIndex = -1
    for (let i = 0; i + 1 < tokens.length; i++) {
      const id = lookup.get((vocab[tokens[i] as number] as string) + (vocab[tokens[i + 1] as number] as string))
      if (id !== undefined && tokenizer.score(id) > best) {
        best = tokenizer.score(id)
        bestId = id
        bestIndex = i
      }
    }
    if (bestIndex < 0) break
    tokens.splice(bestIndex, 2, bestId)
  }
  return tokens
}

describe('Llama2cTokenizer (synthetic vocabulary)', () => {
  const tokenizer = smallTokenizer()

  it('encodes with the dummy-prefix space and best-score merges', () => {
    const ids = tokenizer.encode('hello')
    expect(ids[0]).toBe(1)
    expect(ids.slice(1)).toEqual([tokenizer.idOf(' hello')])
    expect(tokenizer.encode('hello', { bos: false })).toEqual([tokenizer.idOf(' hello')])
    expect(tokenizer.encode('hello', { bos: false, eos: true })).toEqual([tokenizer.idOf(' hello'), 2])
    expect(tokenizer.encode('', { bos: true })).toEqual([1])
    expect(tokenizer.encode('', { bos: false })).toEqual([])
  })

  it('takes the best-scoring pair first, the leftmost on ties', () => {
    // ' ab': ' a' (score -11) beats 'ab' (-12): ' ' 'a' 'b' -> ' a' 'b' -> ' ab'.
    expect(tokenizer.encode('ab', { bos: false })).toEqual([tokenizer.idOf(' ab')])
    // 'abab' -> ' a' 'b' 'a' 'b' -> ' ab' 'ab' (ab merges after ' a').
    expect(tokenizer.encode('abab', { bos: false })).toEqual([tokenizer.idOf(' ab'), tokenizer.idOf('ab')])
  })

  it('falls back to byte pieces for characters no piece spells', () => {
    const ids = tokenizer.encode('z€', { bos: false })
    // ' ' then 'z' (0x7A) then the three UTF-8 bytes of '€' (E2 82 AC).
    expect(ids).toEqual([tokenizer.idOf(' '), ...[0x7a, 0xe2, 0x82, 0xac].map((b) => 3 + b)])
    expect(tokenizer.decode([1, ...ids])).toBe('z€')
  })

  it('decodes with the leading-space rule after BOS only', () => {
    const ids = tokenizer.encode('hello world')
    expect(tokenizer.decode(ids)).toBe('hello world')
    expect(tokenizer.decode(ids.slice(1))).toBe(' hello world')
    expect(tokenizer.decode(ids.slice(1), { previous: 1 })).toBe('hello world')
    expect(tokenizer.decode(ids, { skipSpecialTokens: false })).toBe('\n<s>\nhello world')
    expect(tokenizer.decode([...ids, 2])).toBe('hello world')
  })

  it('decodes byte pieces exactly, including bytes that are not valid UTF-8 alone', () => {
    const lone = [1, 3 + 0xff]
    expect([...tokenizer.decodeBytes(lone)]).toEqual([0xff])
    expect(tokenizer.decode(lone)).toBe('\uFFFD')
    // A character split across byte pieces comes back whole.
    expect(tokenizer.decode([1, 3 + 0xe2, 3 + 0x82, 3 + 0xac])).toBe('€')
  })

  it('round-trips any text, including non-ASCII and characters without pieces', () => {
    const rng = Rng.fromSeed(5)
    const alphabet = [
      'a',
      'b',
      'c',
      'h',
      'e',
      'l',
      'o',
      ' ',
      'é',
      'ç',
      '夢',
      '🌙',
      '\n',
      '\t',
      'w',
      'r',
      'd',
      'Z',
      '\u0000',
      '\u00ff',
    ]
    for (let trial = 0; trial < 200; trial++) {
      const length = rng.int(24)
      let text = ''
      for (let i = 0; i < length; i++) text += alphabet[rng.int(alphabet.length)]
      const ids = tokenizer.encode(text)
      expect(tokenizer.decode(ids)).toBe(text)
      expect(ids.slice(1)).toEqual(naiveEncode(tokenizer, text))
    }
  })

  it('maps characters to <unk> when there are no byte pieces, and refuses when there is no <unk>', () => {
    const noBytes = smallTokenizer(false)
    expect(noBytes.encode('z', { bos: false })).toEqual([noBytes.idOf(' '), 0])
    const bare = Llama2cTokenizer.fromPieces(['x', 'y', 'z', ' '], [0, 0, 0, 0])
    expect(() => bare.encode('q')).toThrow(/cannot encode "q"/)
  })

  it('serialises to tokenizer.bin and reads it back', () => {
    const bytes = tokenizer.serialize()
    const again = Llama2cTokenizer.fromBytes(bytes, { vocabSize: tokenizer.vocabSize })
    expect(again.vocabSize).toBe(tokenizer.vocabSize)
    expect(again.encode('hello world café')).toEqual(tokenizer.encode('hello world café'))
  })

  it('rejects out-of-range ids', () => {
    expect(() => tokenizer.decode([tokenizer.vocabSize])).toThrow(/outside the vocabulary/)
    expect(() => tokenizer.piece(-1)).toThrow(/outside the vocabulary/)
    expect(() => tokenizer.piece(-1)).toThrow(InvalidArgumentError)
  })
})

describe('Llama2cTokenizer.fromBytes errors', () => {
  const good = smallTokenizer().serialize()

  const expectReason = (fn: () => unknown, reason: string, message?: RegExp): void => {
    try {
      fn()
    } catch (error) {
      expect(error).toBeInstanceOf(ModelFileError)
      expect((error as ModelFileError).reason).toBe(reason)
      expect((error as ModelFileError).code).toBe('INVALID_CHECKPOINT')
      if (message !== undefined) expect((error as Error).message).toMatch(message)
      return
    }
    expect.fail('did not throw')
  }

  it('rejects a file shorter than its header', () => {
    expectReason(() => Llama2cTokenizer.fromBytes(new Uint8Array(2)), 'truncated')
  })

  it('rejects a record cut short (inside the score/length or inside the bytes)', () => {
    expectReason(
      () => Llama2cTokenizer.fromBytes(good.subarray(0, good.byteLength - 1), { file: 'tok.bin' }),
      'truncated',
      /tok\.bin: token \d+: \d+ bytes announced/,
    )
    expectReason(() => Llama2cTokenizer.fromBytes(good.subarray(0, 4 + 8 + 5 + 3)), 'truncated', /score\/length record/)
  })

  it('rejects a bad max_token_length, negative or too-long pieces, non-finite scores', () => {
    const copy = good.slice()
    new DataView(copy.buffer).setInt32(0, 0, true)
    expectReason(() => Llama2cTokenizer.fromBytes(copy), 'invalid-header', /max_token_length/)
    const negative = good.slice()
    new DataView(negative.buffer).setInt32(8, -3, true)
    expectReason(() => Llama2cTokenizer.fromBytes(negative), 'invalid-header', /byte length -3/)
    const nan = good.slice()
    new DataView(nan.buffer).setFloat32(4, Number.NaN, true)
    expectReason(() => Llama2cTokenizer.fromBytes(nan), 'invalid-header', /not finite/)
    // A text file given as the tokenizer: its first 4 bytes make a max_token_length no tokenizer has.
    const text = new TextEncoder().encode('Once upon a time there was a tokenizer.\n')
    expectReason(
      () => Llama2cTokenizer.fromBytes(text),
      'invalid-header',
      /max_token_length is 1701015119 .*neither a llama2\.c tokenizer\.bin nor a Hugging Face tokenizer\.json/,
    )
  })

  it('recognises JSON (a Hugging Face tokenizer.json) instead of reading it as a binary header', () => {
    const json = new TextEncoder().encode('{\n  "version": "1.0",\n  "model": { "type": "BPE", "vocab": {} }\n}\n')
    for (const bytes of [json, new Uint8Array([0xef, 0xbb, 0xbf, 0x20, ...json])]) {
      expect(() => Llama2cTokenizer.fromBytes(bytes, { file: 'tokenizer.json' })).toThrow(UnsupportedModelError)
      expect(() => Llama2cTokenizer.fromBytes(bytes, { file: 'tokenizer.json' })).toThrow(
        /^tokenizer\.json: this is a JSON file \(a Hugging Face tokenizer\.json\), not a llama2\.c tokenizer\.bin; /,
      )
    }
    const cut = json.subarray(0, 20)
    expectReason(() => Llama2cTokenizer.fromBytes(cut), 'invalid-header', /starts like JSON \(but does not parse\)/)
    // A real tokenizer.bin whose max_token_length is 123 (first byte '{') is still read as one.
    const pieces = ['<unk>', '<s>', '</s>', 'a']
    const bin = Llama2cTokenizer.fromPieces(
      pieces,
      pieces.map(() => 0),
    ).serialize()
    new DataView(bin.buffer, bin.byteOffset).setInt32(0, 123, true)
    expect(Llama2cTokenizer.fromBytes(bin).vocabSize).toBe(4)
  })

  it('rejects a vocabulary size that is not the model’s', () => {
    const size = smallTokenizer().vocabSize
    expectReason(
      () => Llama2cTokenizer.fromBytes(good, { vocabSize: size + 1 }),
      'inconsistent',
      new RegExp(`holds ${size} tokens`),
    )
    expectReason(() => Llama2cTokenizer.fromBytes(good, { vocabSize: size - 1 }), 'inconsistent', /more than/)
  })
})

describe.skipIf(!HAVE_AIDREAMS)('Llama2cTokenizer on aidreams260K tokenizer.bin', () => {
  const tokenizer = HAVE_AIDREAMS
    ? Llama2cTokenizer.fromBytes(new Uint8Array(readFileSync(AIDREAMS.tokenizer)), { vocabSize: 512 })
    : (undefined as never)

  it('matches a literal port of run.c encode on every reference string', () => {
    for (const { text, ids } of fixture.cases) {
      expect(tokenizer.encode(text), JSON.stringify(text)).toEqual(ids)
    }
  })

  it('encodes the reference prompt and decodes it back', () => {
    const ids = tokenizer.encode('I dreamed')
    expect(ids).toEqual([1, 303, 281, 269, 435, 447, 328])
    expect(tokenizer.decode(ids)).toBe('I dreamed')
  })

  it('round-trips non-ASCII text, including characters with no piece (byte fallback)', () => {
    for (const text of [
      'Café crème brûlée',
      '夢を見た',
      'emoji 🌙✨ end',
      'µ and μ differ',
      'tab\tand\nnewline',
      '\u0000\u0001\u007f',
    ]) {
      const ids = tokenizer.encode(text)
      expect(tokenizer.decode(ids)).toBe(text)
    }
    // '夢' has no piece: its three UTF-8 bytes become <0xE5> <0xA4> <0xA2>.
    expect(tokenizer.encode('夢', { bos: false })).toEqual([tokenizer.idOf(' '), 3 + 0xe5, 3 + 0xa4, 3 + 0xa2])
  })
})

describe('tokenizer.bin fuzzing', () => {
  it('random truncations and byte flips either parse or throw ModelFileError, never anything else', () => {
    const good = smallTokenizer().serialize()
    const rng = Rng.fromSeed(99)
    let typed = 0
    for (let trial = 0; trial < 400; trial++) {
      let bytes = good.slice()
      if (trial % 2 === 0) bytes = bytes.subarray(0, rng.int(bytes.byteLength))
      else for (let i = 0; i < 6; i++) bytes[rng.int(bytes.byteLength)] = rng.int(256)
      try {
        const tokenizer = Llama2cTokenizer.fromBytes(bytes)
        // Whatever parsed must still encode and decode without crashing.
        tokenizer.decode(tokenizer.encode('hello wörld'))
      } catch (error) {
        // A corrupted vocabulary may lose the pieces a character needs: UNSUPPORTED, typed too.
        if (!(error instanceof ModelFileError || (error instanceof AttnlabError && error.code === 'UNSUPPORTED')))
          throw error
        typed++
      }
    }
    expect(typed).toBeGreaterThan(150)
  })
})

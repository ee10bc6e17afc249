/**
 * The llama2.c tokenizer (`tokenizer.bin`, Karpathy's `llama2.c`: `tokenizer.py` exports it,
 * `run.c` `encode`/`decode` use it): a SentencePiece-style BPE vocabulary with one merge score
 * per piece and byte-fallback pieces `<0x00>`..`<0xFF>`.
 *
 * File format (little-endian): int32 `max_token_length`, then for each token a float32 score,
 * an int32 byte length and that many UTF-8 bytes (SentencePiece's `▁` already replaced by a
 * space). The number of tokens is not stored: it is however many records the file holds.
 *
 * Encoding (`run.c` `encode`): a space is prepended (SentencePiece's "dummy prefix", only for
 * non-empty text); each code point becomes its piece, or, when no piece spells it, one
 * byte-fallback piece per UTF-8 byte; then, repeatedly, the adjacent pair whose concatenation is
 * a piece with the best score is merged (the leftmost on ties) until no pair merges. This file
 * implements that greedy loop with a heap (same result, `O(n log n)` instead of `O(n^2)`);
 * the tests check it against the literal loop.
 *
 * Decoding (`run.c` `decode`): byte-fallback pieces become their byte; a piece that follows BOS
 * loses its leading space; bytes are joined and then read as UTF-8, so characters split across
 * byte pieces come back whole.
 *
 * @module
 */
import { InvalidArgumentError, UnsupportedError } from '@attnlab/core'
import { ModelFileError, UnsupportedModelError } from './errors.ts'

/**
 * Options of {@link Llama2cTokenizer.fromBytes}.
 *
 * @category Tokenizer
 */
export interface Llama2cTokenizerOptions {
  /** File name, for messages. */
  readonly file?: string
  /** When given, the file must hold exactly this many tokens (the model's `dVocab`). */
  readonly vocabSize?: number
  /** BOS id (default 1, as in llama2.c). */
  readonly bosId?: number
  /** EOS id (default 2, as in llama2.c). */
  readonly eosId?: number
}

/**
 * Options of {@link Llama2cTokenizer.encode}.
 *
 * @category Tokenizer
 */
export interface EncodeOptions {
  /** Prepend BOS (default `true`, as llama2.c's `run.c` does for prompts). */
  readonly bos?: boolean
  /** Append EOS (default `false`). */
  readonly eos?: boolean
}

/**
 * Options of {@link Llama2cTokenizer.decode}.
 *
 * @category Tokenizer
 */
export interface DecodeOptions {
  /**
   * The token before `ids[0]`, if the ids continue a sequence (it decides the leading-space
   * rule for the first piece). Default: none.
   */
  readonly previous?: number
  /** Leave BOS and EOS out of the text (default `true`); otherwise their pieces are printed. */
  readonly skipSpecialTokens?: boolean
}

/**
 * What attnlab needs of a tokenizer, whichever file it came from: {@link Llama2cTokenizer}
 * (llama2.c `tokenizer.bin`) and `HuggingFaceTokenizer` (Hugging Face `tokenizer.json`) both
 * implement it, and `loadModel` / `loadTokenizer` return it. Ids are the model's token ids
 * (`0 .. vocabSize - 1`).
 *
 * @category Tokenizer
 */
export interface Tokenizer {
  /** Which kind of tokenizer file this is. */
  readonly kind: 'llama2c' | 'huggingface'
  /** Number of token ids. */
  readonly vocabSize: number
  /** Beginning-of-sequence id (`undefined`: the tokenizer has none, and `encode` adds none). */
  readonly bosId: number | undefined
  /** End-of-sequence id, if the tokenizer has one. */
  readonly eosId: number | undefined
  /** Text to ids; BOS first unless `bos: false`, EOS last with `eos: true`. */
  encode(text: string, options?: EncodeOptions): number[]
  /** Ids to text (special tokens left out unless `skipSpecialTokens: false`). */
  decode(ids: readonly number[], options?: DecodeOptions): string
  /** One token's vocabulary entry as text (`<0x0A>`, `<|end_story|>`, `▁the`...), for display and filtering. */
  tokenText(id: number): string | undefined
  /** Whether the id is a control token (BOS, EOS, `<unk>`...), never an ordinary piece of text. */
  isSpecial(id: number): boolean
}

const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/

function latin1(bytes: Uint8Array): string {
  let s = ''
  for (const b of bytes) s += String.fromCharCode(b)
  return s
}

/** A binary max-heap of merge candidates: best score first, then leftmost. */
class CandidateHeap {
  private readonly items: Candidate[] = []
  get size(): number {
    return this.items.length
  }
  private better(a: Candidate, b: Candidate): boolean {
    return a.score > b.score || (a.score === b.score && a.left < b.left)
  }
  push(item: Candidate): void {
    const items = this.items
    items.push(item)
    let i = items.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.better(items[i] as Candidate, items[parent] as Candidate)) break
      ;[items[i], items[parent]] = [items[parent] as Candidate, items[i] as Candidate]
      i = parent
    }
  }
  pop(): Candidate | undefined {
    const items = this.items
    const top = items[0]
    const last = items.pop()
    if (items.length > 0 && last !== undefined) {
      items[0] = last
      let i = 0
      for (;;) {
        const l = 2 * i + 1
        const r = l + 1
        let best = i
        if (l < items.length && this.better(items[l] as Candidate, items[best] as Candidate)) best = l
        if (r < items.length && this.better(items[r] as Candidate, items[best] as Candidate)) best = r
        if (best === i) break
        ;[items[i], items[best]] = [items[best] as Candidate, items[i] as Candidate]
        i = best
      }
    }
    return top
  }
}

interface Candidate {
  readonly score: number
  readonly left: number
  readonly right: number
  readonly leftVersion: number
  readonly rightVersion: number
  readonly id: number
}

/** `run.c` starts its best score at -1e10 and needs a strictly better one. */
const NO_MERGE_SCORE = -1e10

/**
 * Refuses JSON given as a `tokenizer.bin`: a Hugging Face `tokenizer.json` would otherwise be
 * read as a binary header (its first bytes `{\n  "` as max_token_length 538970747) and fail
 * with a meaningless byte-length error.
 *
 * @throws {@link UnsupportedModelError} for valid JSON; {@link ModelFileError} `invalid-header`
 *   for text that starts like a JSON object but does not parse
 */
function rejectJson(bytes: Uint8Array, file: string | undefined): void {
  let start = 0
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) start = 3 // UTF-8 byte order mark
  while (start < bytes.byteLength && [0x20, 0x09, 0x0a, 0x0d].includes(bytes[start] as number)) start++
  if (bytes[start] !== 0x7b) return // '{'
  let json: unknown
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch {
    const head = bytes.subarray(0, 4)
    // A real tokenizer.bin starting with 0x7b has max_token_length 123 + 256 * (...): binary bytes follow.
    if (head.every((b) => b >= 0x20 || b === 0x09 || b === 0x0a || b === 0x0d)) {
      const message = 'this is text that starts like JSON (but does not parse), not a llama2.c tokenizer.bin'
      throw new ModelFileError('invalid-header', message, { file })
    }
    return
  }
  const huggingFace = typeof json === 'object' && json !== null && 'model' in json
  throw new UnsupportedModelError(
    `this is a JSON file${huggingFace ? ' (a Hugging Face tokenizer.json)' : ''}, not a llama2.c tokenizer.bin; ` +
      'read a tokenizer.json with loadTokenizer (which detects the format) or HuggingFaceTokenizer.fromJson',
    { file },
  )
}

/** The longest token piece, in bytes, a `tokenizer.bin` header may announce (llama2.c's are tens of bytes). */
const MAX_PIECE_BYTES = 65536

/**
 * The llama2.c BPE tokenizer: encodes text to token ids and decodes ids to text exactly as
 * llama2.c's `run.c` does.
 *
 * @example
 * ```ts
 * const tokenizer = Llama2cTokenizer.fromBytes(new Uint8Array(await readFile('tokenizer.bin')))
 * const ids = tokenizer.encode('I dreamed')        // [1, ...] (BOS first)
 * tokenizer.decode(ids)                            // 'I dreamed'
 * ```
 * @category Tokenizer
 */
export class Llama2cTokenizer implements Tokenizer {
  /** Which kind of tokenizer file this is. */
  readonly kind = 'llama2c' as const
  /** Number of tokens (ids `0 .. vocabSize - 1`). */
  readonly vocabSize: number
  /** The longest piece in bytes, as the file declares it. */
  readonly maxTokenLength: number
  /** Beginning-of-sequence id. */
  readonly bosId: number
  /** End-of-sequence id. */
  readonly eosId: number
  private readonly pieces: readonly Uint8Array[]
  private readonly scores: Float32Array
  /** Piece bytes (as a latin1 string) to the lowest id that spells them. */
  private readonly lookup: ReadonlyMap<string, number>
  /** Piece strings (latin1) by id. */
  private readonly keys: readonly string[]
  /** `byteId[b]`: the id of piece `<0xBB>`, or -1. */
  private readonly byteId: Int32Array
  /** `byteOf[id]`: the byte a byte-fallback piece stands for, or -1. */
  private readonly byteOf: Int32Array
  private readonly unkId: number

  private constructor(
    pieces: Uint8Array[],
    scores: Float32Array,
    maxTokenLength: number,
    bosId: number,
    eosId: number,
  ) {
    this.pieces = pieces
    this.scores = scores
    this.vocabSize = pieces.length
    this.maxTokenLength = maxTokenLength
    this.bosId = bosId
    this.eosId = eosId
    const lookup = new Map<string, number>()
    const keys: string[] = []
    this.byteId = new Int32Array(256).fill(-1)
    this.byteOf = new Int32Array(pieces.length).fill(-1)
    let unk = -1
    pieces.forEach((piece, id) => {
      const key = latin1(piece)
      keys.push(key)
      if (!lookup.has(key)) lookup.set(key, id)
      const match = BYTE_PIECE.exec(key)
      if (match !== null) {
        const byte = Number.parseInt(match[1] as string, 16)
        this.byteOf[id] = byte
        if (this.byteId[byte] === -1) this.byteId[byte] = id
      }
      if (key === '<unk>' && unk === -1) unk = id
    })
    this.lookup = lookup
    this.keys = keys
    this.unkId = unk
  }

  /**
   * Parses a `tokenizer.bin`.
   *
   * @param bytes - the whole file
   * @param options - expected vocabulary size, BOS/EOS ids, file name for messages
   * @throws {@link ModelFileError} `truncated` when a record is cut short, `invalid-header` for a
   *   negative length or score that is not finite or a `max_token_length` above 65,536 bytes (another kind of
   *   file), `inconsistent` when `vocabSize` is given and differs from the number of tokens in the file;
   *   `invalid-header` also for text that starts like JSON but does not parse
   * @throws {@link UnsupportedModelError} for a JSON file (a Hugging Face `tokenizer.json`), which
   *   this class does not read
   */
  static fromBytes(bytes: Uint8Array, options: Llama2cTokenizerOptions = {}): Llama2cTokenizer {
    const file = options.file
    rejectJson(bytes, file)
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    if (bytes.byteLength < 4) {
      throw new ModelFileError(
        'truncated',
        `${bytes.byteLength} bytes is shorter than a tokenizer header (int32 max_token_length)`,
        { file },
      )
    }
    const maxTokenLength = view.getInt32(0, true)
    if (maxTokenLength <= 0) {
      throw new ModelFileError(
        'invalid-header',
        `max_token_length is ${maxTokenLength}; expected a positive integer. Is this a llama2.c tokenizer.bin?`,
        {
          file,
        },
      )
    }
    // A piece longer than 64 KiB is no tokenizer's: such a header is another file (text reads as ~1e9 here).
    if (maxTokenLength > MAX_PIECE_BYTES) {
      throw new ModelFileError(
        'invalid-header',
        `max_token_length is ${maxTokenLength} (the first 4 bytes as an int32), more than any tokenizer's ` +
          `${MAX_PIECE_BYTES}-byte limit: this is neither a llama2.c tokenizer.bin nor a Hugging Face tokenizer.json`,
        { file },
      )
    }
    const pieces: Uint8Array[] = []
    const scores: number[] = []
    let offset = 4
    while (offset < bytes.byteLength) {
      const id = pieces.length
      if (options.vocabSize !== undefined && id >= options.vocabSize) {
        throw new ModelFileError(
          'inconsistent',
          `the tokenizer holds more than the ${options.vocabSize} tokens of the model's vocabulary ` +
            `(${bytes.byteLength - offset} bytes follow token ${id - 1})`,
          { file },
        )
      }
      if (offset + 8 > bytes.byteLength) {
        throw new ModelFileError(
          'truncated',
          `token ${id}: the file ends inside its score/length record (offset ${offset} of ${bytes.byteLength})`,
          {
            file,
            tensor: `token ${id}`,
          },
        )
      }
      const score = view.getFloat32(offset, true)
      const length = view.getInt32(offset + 4, true)
      if (!Number.isFinite(score)) {
        throw new ModelFileError('invalid-header', `token ${id}: merge score ${score} is not finite`, {
          file,
          tensor: `token ${id}`,
        })
      }
      if (length < 0 || length > maxTokenLength) {
        throw new ModelFileError(
          'invalid-header',
          `token ${id}: byte length ${length} is outside [0, max_token_length ${maxTokenLength}]`,
          {
            file,
            tensor: `token ${id}`,
          },
        )
      }
      offset += 8
      if (offset + length > bytes.byteLength) {
        throw new ModelFileError(
          'truncated',
          `token ${id}: ${length} bytes announced but only ${bytes.byteLength - offset} remain`,
          {
            file,
            tensor: `token ${id}`,
          },
        )
      }
      pieces.push(bytes.slice(offset, offset + length))
      scores.push(score)
      offset += length
    }
    if (options.vocabSize !== undefined && pieces.length !== options.vocabSize) {
      throw new ModelFileError(
        'inconsistent',
        `the tokenizer holds ${pieces.length} tokens but the model's vocabulary has ${options.vocabSize}`,
        { file },
      )
    }
    const bosId = options.bosId ?? 1
    const eosId = options.eosId ?? 2
    for (const [name, id] of [
      ['BOS', bosId],
      ['EOS', eosId],
    ] as const) {
      if (!Number.isSafeInteger(id) || id < 0 || id >= pieces.length) {
        throw new ModelFileError(
          'inconsistent',
          `${name} id ${id} is outside the tokenizer's ${pieces.length} tokens`,
          { file },
        )
      }
    }
    return new Llama2cTokenizer(pieces, new Float32Array(scores), maxTokenLength, bosId, eosId)
  }

  /**
   * Builds a tokenizer from pieces and scores (for tests and conversions).
   *
   * @param pieces - each token's text (`▁` written as a space; byte fallbacks as `<0xNN>`)
   * @param scores - each token's merge score (higher merges first)
   * @throws `InvalidArgumentError` when the lengths differ or BOS/EOS are out of range
   */
  static fromPieces(
    pieces: readonly (string | Uint8Array)[],
    scores: ArrayLike<number>,
    options: Omit<Llama2cTokenizerOptions, 'file' | 'vocabSize'> = {},
  ): Llama2cTokenizer {
    if (pieces.length !== scores.length) {
      throw new InvalidArgumentError(`${pieces.length} pieces but ${scores.length} scores`)
    }
    const encoder = new TextEncoder()
    const bytes = pieces.map((p) => (typeof p === 'string' ? encoder.encode(p) : p.slice()))
    const bosId = options.bosId ?? 1
    const eosId = options.eosId ?? 2
    if (bosId >= pieces.length || eosId >= pieces.length || bosId < 0 || eosId < 0) {
      throw new InvalidArgumentError(`BOS ${bosId} / EOS ${eosId} outside the ${pieces.length} pieces`)
    }
    const maxTokenLength = Math.max(1, ...bytes.map((b) => b.byteLength))
    return new Llama2cTokenizer(bytes, Float32Array.from(scores), maxTokenLength, bosId, eosId)
  }

  /**
   * The `tokenizer.bin` bytes of this tokenizer (what {@link Llama2cTokenizer.fromBytes} reads).
   */
  serialize(): Uint8Array {
    const total = 4 + this.pieces.reduce((sum, piece) => sum + 8 + piece.byteLength, 0)
    const out = new Uint8Array(total)
    const view = new DataView(out.buffer)
    view.setInt32(0, this.maxTokenLength, true)
    let offset = 4
    this.pieces.forEach((piece, id) => {
      view.setFloat32(offset, this.scores[id] as number, true)
      view.setInt32(offset + 4, piece.byteLength, true)
      out.set(piece, offset + 8)
      offset += 8 + piece.byteLength
    })
    return out
  }

  /**
   * A token's piece as raw bytes (byte-fallback pieces as their `<0xNN>` text).
   *
   * @throws `InvalidArgumentError` for an id outside the vocabulary
   */
  piece(id: number): Uint8Array {
    this.checkId(id)
    return (this.pieces[id] as Uint8Array).slice()
  }

  /** A token's merge score. @throws `InvalidArgumentError` for an id outside the vocabulary */
  score(id: number): number {
    this.checkId(id)
    return this.scores[id] as number
  }

  /** The lowest id whose piece is exactly `text` (UTF-8), or `undefined`. */
  idOf(text: string): number | undefined {
    return this.lookup.get(latin1(new TextEncoder().encode(text)))
  }

  private checkId(id: number): void {
    if (!Number.isSafeInteger(id) || id < 0 || id >= this.vocabSize) {
      throw new InvalidArgumentError(`token id ${id} is outside the vocabulary [0, ${this.vocabSize})`, {
        id,
      })
    }
  }

  /**
   * The initial tokens of `text` before merges: the dummy-prefix space, then one piece per code
   * point or one byte-fallback piece per UTF-8 byte of code points no piece spells.
   */
  private initialTokens(text: string): number[] {
    const tokens: number[] = []
    if (text.length === 0) return tokens
    const encoder = new TextEncoder()
    for (const char of ` ${text}`) {
      const bytes = encoder.encode(char)
      const id = this.lookup.get(latin1(bytes))
      if (id !== undefined) {
        tokens.push(id)
        continue
      }
      for (const byte of bytes) {
        const byteId = this.byteId[byte] as number
        if (byteId >= 0) tokens.push(byteId)
        else if (this.unkId >= 0) tokens.push(this.unkId)
        else {
          throw new UnsupportedError(
            `cannot encode ${JSON.stringify(char)}: no piece spells it and the vocabulary has neither byte piece ` +
              `<0x${byte.toString(16).toUpperCase().padStart(2, '0')}> nor <unk>`,
            { char },
          )
        }
      }
    }
    return tokens
  }

  /**
   * Encodes text to token ids as llama2.c does: dummy-prefix space, code points (byte fallback
   * for the rest), greedy best-score merges; BOS/EOS as asked.
   *
   * @param text - any string (lone surrogates are encoded as U+FFFD, as UTF-8 requires)
   * @param options - `bos` (default true), `eos` (default false)
   * @returns token ids
   * @throws `UnsupportedError` when a character cannot be represented (no
   *   piece, no byte piece and no `<unk>`)
   */
  encode(text: string, options: EncodeOptions = {}): number[] {
    const tokens = this.mergeGreedy(this.initialTokens(text))
    const out: number[] = []
    if (options.bos ?? true) out.push(this.bosId)
    out.push(...tokens)
    if (options.eos ?? false) out.push(this.eosId)
    return out
  }

  /** The greedy merge loop of `run.c`, with a heap and lazy invalidation. */
  private mergeGreedy(initial: number[]): number[] {
    const n = initial.length
    if (n < 2) return initial
    const ids = Int32Array.from(initial)
    const next = new Int32Array(n)
    const prev = new Int32Array(n)
    const version = new Int32Array(n)
    const alive = new Uint8Array(n).fill(1)
    for (let i = 0; i < n; i++) {
      next[i] = i + 1 < n ? i + 1 : -1
      prev[i] = i - 1
    }
    const heap = new CandidateHeap()
    const consider = (left: number, right: number): void => {
      if (left < 0 || right < 0) return
      const id = this.lookup.get(
        (this.keys[ids[left] as number] as string) + (this.keys[ids[right] as number] as string),
      )
      if (id === undefined) return
      const score = this.scores[id] as number
      if (!(score > NO_MERGE_SCORE)) return
      heap.push({
        score,
        left,
        right,
        leftVersion: version[left] as number,
        rightVersion: version[right] as number,
        id,
      })
    }
    for (let i = 0; i + 1 < n; i++) consider(i, i + 1)
    while (heap.size > 0) {
      const candidate = heap.pop() as Candidate
      const { left, right } = candidate
      if (
        alive[left] !== 1 ||
        alive[right] !== 1 ||
        next[left] !== right ||
        version[left] !== candidate.leftVersion ||
        version[right] !== candidate.rightVersion
      ) {
        continue
      }
      ids[left] = candidate.id
      version[left] = (version[left] as number) + 1
      alive[right] = 0
      const after = next[right] as number
      next[left] = after
      if (after >= 0) prev[after] = left
      consider(prev[left] as number, left)
      consider(left, after)
    }
    const out: number[] = []
    for (let i = 0; i >= 0; i = next[i] as number) out.push(ids[i] as number)
    return out
  }

  /**
   * The bytes ids decode to (exact, even when they are not valid UTF-8): byte-fallback pieces
   * become their byte, a piece after BOS loses its leading space.
   *
   * @param ids - token ids
   * @param options - the token before `ids[0]`; whether to skip BOS/EOS (default true)
   * @throws `InvalidArgumentError` for an id outside the vocabulary
   */
  decodeBytes(ids: readonly number[], options: DecodeOptions = {}): Uint8Array {
    const skip = options.skipSpecialTokens ?? true
    const parts: Uint8Array[] = []
    let previous = options.previous
    for (const id of ids) {
      this.checkId(id)
      if (skip && (id === this.bosId || id === this.eosId)) {
        previous = id
        continue
      }
      parts.push(this.pieceBytes(previous, id))
      previous = id
    }
    let length = 0
    for (const p of parts) length += p.byteLength
    const out = new Uint8Array(length)
    let offset = 0
    for (const p of parts) {
      out.set(p, offset)
      offset += p.byteLength
    }
    return out
  }

  /**
   * What one token prints after another, as `run.c`'s `decode(prev_token, token)`: its byte
   * for a byte-fallback piece, else its piece without the leading space when `previous` is BOS.
   *
   * @param previous - the token before (or `undefined` at the start)
   * @param id - the token
   * @throws `InvalidArgumentError` for an id outside the vocabulary
   */
  pieceBytes(previous: number | undefined, id: number): Uint8Array {
    this.checkId(id)
    const byte = this.byteOf[id] as number
    if (byte >= 0) return Uint8Array.of(byte)
    const piece = this.pieces[id] as Uint8Array
    if (previous === this.bosId && piece[0] === 0x20) return piece.subarray(1)
    return piece
  }

  /**
   * The token's piece as text (UTF-8; a space where SentencePiece writes `▁`; byte fallbacks
   * as `<0xNN>`).
   *
   * @param id - a token id
   * @throws `InvalidArgumentError` for an id outside the vocabulary
   */
  tokenText(id: number): string {
    this.checkId(id)
    return new TextDecoder('utf-8').decode(this.pieces[id])
  }

  /**
   * Whether the id is BOS, EOS or `<unk>`.
   *
   * @param id - a token id
   */
  isSpecial(id: number): boolean {
    return id === this.bosId || id === this.eosId || (this.unkId >= 0 && id === this.unkId)
  }

  /**
   * Decodes ids to text: {@link Llama2cTokenizer.decodeBytes}, then UTF-8 (invalid sequences,
   * e.g. a lone byte piece `<0xFF>`, become U+FFFD).
   *
   * @param ids - token ids
   * @param options - the token before `ids[0]`; whether to skip BOS/EOS (default true)
   * @throws `InvalidArgumentError` for an id outside the vocabulary
   */
  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    return new TextDecoder('utf-8').decode(this.decodeBytes(ids, options))
  }
}

/**
 * Hugging Face `tokenizer.json` tokenizers, through the Hugging Face `tokenizers.js` library
 * (`@huggingface/tokenizers`: the pure-JavaScript port of the Rust `tokenizers` crate that
 * Transformers.js uses; normalizers, pre-tokenizers, BPE / WordPiece / Unigram models,
 * post-processors and decoders as the file declares them). attnlab writes no tokenization of its
 * own here: {@link HuggingFaceTokenizer} wraps the library behind the {@link Tokenizer} interface
 * that the llama2.c tokenizer also implements, and adds what a language-model tool needs around
 * it: BOS/EOS ids from the model's config, a check against the model's vocabulary, typed errors
 * naming the file, and an option to drop the SentencePiece-style leading `▁` ("dummy prefix").
 *
 * @module
 */
import { Tokenizer as LibraryTokenizer } from '@huggingface/tokenizers'
import { InvalidArgumentError } from '@attnlab/core'
import { ModelFileError } from './errors.ts'
import type { DecodeOptions, EncodeOptions, Tokenizer } from './tokenizer.ts'

/**
 * Options of {@link HuggingFaceTokenizer.fromJson}.
 *
 * @category Tokenizer
 */
export interface HuggingFaceTokenizerOptions {
  /** File name, for messages. */
  readonly file?: string
  /**
   * The model's vocabulary size (`dVocab`): every id the tokenizer can produce must be below it
   * (a model may have more embedding rows than the tokenizer has tokens, never fewer).
   */
  readonly vocabSize?: number
  /** BOS id (default: the model config's, else `tokenizer_config.json`'s `bos_token`, else the post-processor's). */
  readonly bosId?: number
  /** EOS id (default: as for BOS, from `eos_token`). */
  readonly eosId?: number
  /**
   * Keep the leading `▁` that a SentencePiece-style normalizer (`Prepend("▁")`) or `Metaspace`
   * pre-tokenizer puts before the text (default `true`, as the file says). `false` drops it, and
   * the decoder's matching strip of one leading space, so that encode and decode stay inverse:
   * for models trained without it (the shared tinystories656K; see its README).
   */
  readonly dummyPrefix?: boolean
}

/** The parts of `tokenizer.json` this wrapper reads or edits (the library reads the rest). */
interface TokenizerJson {
  model?: { type?: unknown; vocab?: unknown }
  normalizer?: JsonComponent | null
  pre_tokenizer?: JsonComponent | null
  decoder?: JsonComponent | null
  post_processor?: JsonComponent | null
  added_tokens?: unknown
  [key: string]: unknown
}

interface JsonComponent {
  type?: unknown
  normalizers?: JsonComponent[]
  pretokenizers?: JsonComponent[]
  decoders?: JsonComponent[]
  prepend?: unknown
  content?: unknown
  start?: unknown
  [key: string]: unknown
}

const METASPACE = '▁'

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** `normalizer` without `Prepend("▁")` (alone or inside a `Sequence`). */
function withoutPrepend(component: JsonComponent | null | undefined): JsonComponent | null {
  if (component === null || component === undefined) return null
  if (component.type === 'Prepend' && component.prepend === METASPACE) return null
  if (component.type === 'Sequence' && Array.isArray(component.normalizers)) {
    return { ...component, normalizers: component.normalizers.filter((n) => withoutPrepend(n) !== null) }
  }
  return component
}

/** A `Metaspace` pre-tokenizer or decoder told never to prepend (alone or inside a `Sequence`). */
function metaspaceNever(component: JsonComponent | null | undefined, key: string): JsonComponent | null {
  if (component === null || component === undefined) return null
  if (component.type === 'Metaspace') return { ...component, prepend_scheme: 'never', add_prefix_space: false }
  const children = component[key]
  if (component.type === 'Sequence' && Array.isArray(children)) {
    return { ...component, [key]: children.map((c: JsonComponent) => metaspaceNever(c, key)) }
  }
  return component
}

/** `decoder` without the `Strip(" ", 1, 0)` that undoes the prepended `▁`. */
function withoutLeadingStrip(component: JsonComponent | null | undefined): JsonComponent | null {
  const decoder = metaspaceNever(component, 'decoders')
  if (decoder === null) return null
  const isPrefixStrip = (d: JsonComponent): boolean => d.type === 'Strip' && d.content === ' ' && d.start === 1
  if (isPrefixStrip(decoder)) return null
  if (decoder.type === 'Sequence' && Array.isArray(decoder.decoders)) {
    return { ...decoder, decoders: decoder.decoders.filter((d) => !isPrefixStrip(d)) }
  }
  return decoder
}

/** Whether the file prepends a `▁` at all (so that `dummyPrefix: false` changes something). */
function hasDummyPrefix(json: TokenizerJson): boolean {
  const text = JSON.stringify([json.normalizer ?? null, json.pre_tokenizer ?? null])
  return text.includes('"Prepend"') || text.includes('"Metaspace"')
}

function tokenId(library: LibraryTokenizer, value: unknown): number | undefined {
  if (typeof value === 'string') return library.token_to_id(value)
  if (isObject(value) && typeof value.content === 'string') return library.token_to_id(value.content)
  return undefined
}

/** The first special token of the post-processor's single-sequence template (the BOS it adds). */
function templateBos(json: TokenizerJson): string | undefined {
  const single = json.post_processor?.single
  if (!Array.isArray(single)) return undefined
  const first: unknown = single[0]
  if (isObject(first) && isObject(first.SpecialToken) && typeof first.SpecialToken.id === 'string') {
    return first.SpecialToken.id
  }
  return undefined
}

/**
 * A Hugging Face `tokenizer.json` tokenizer (via `@huggingface/tokenizers`) behind attnlab's
 * {@link Tokenizer} interface. BOS and EOS are added by this class (`encode`'s `bos` / `eos`),
 * not by the file's post-processor, so a prompt gets exactly one BOS whatever the template says;
 * special tokens written in the text (`<|end_story|>`) are recognised as the file declares.
 *
 * @example
 * ```ts
 * const tokenizer = HuggingFaceTokenizer.fromJson(await readFile('tokenizer.json', 'utf8'),
 *   await readFile('tokenizer_config.json', 'utf8'), { dummyPrefix: false })
 * tokenizer.encode('Once upon a time')   // [1, ...] (BOS first)
 * tokenizer.decode(tokenizer.encode('Once upon a time'))   // 'Once upon a time'
 * ```
 * @category Tokenizer
 */
export class HuggingFaceTokenizer implements Tokenizer {
  /** Which kind of tokenizer file this is. */
  readonly kind = 'huggingface' as const
  /** Number of token ids (`max id + 1` over the vocabulary and the added tokens). */
  readonly vocabSize: number
  /** Beginning-of-sequence id; `undefined` for a tokenizer without one (Qwen2's, for example). */
  readonly bosId: number | undefined
  /** End-of-sequence id, when the model config or the tokenizer declares one. */
  readonly eosId: number | undefined
  /** Ids of the added tokens the file marks `special` (BOS, EOS, `<unk>`, ...), ascending. */
  readonly specialIds: readonly number[]
  /** Whether encoding prepends the leading `▁` (see {@link HuggingFaceTokenizerOptions.dummyPrefix}). */
  readonly dummyPrefix: boolean
  private readonly library: LibraryTokenizer
  private readonly special: ReadonlySet<number>

  private constructor(
    library: LibraryTokenizer,
    info: {
      vocabSize: number
      bosId: number | undefined
      eosId: number | undefined
      specialIds: number[]
      dummyPrefix: boolean
    },
  ) {
    this.library = library
    this.vocabSize = info.vocabSize
    this.bosId = info.bosId
    this.eosId = info.eosId
    this.specialIds = info.specialIds
    this.special = new Set(info.specialIds)
    this.dummyPrefix = info.dummyPrefix
  }

  /**
   * Builds the tokenizer from the text (or parsed JSON) of `tokenizer.json` and, optionally,
   * `tokenizer_config.json`.
   *
   * @param tokenizerJson - `tokenizer.json`, as text or parsed
   * @param config - `tokenizer_config.json`, as text or parsed (default `{}`)
   * @param options - file name, model vocabulary size, BOS/EOS ids, `dummyPrefix`
   * @throws {@link ModelFileError} `invalid-json` for text that is not JSON or a JSON value that
   *   is not a tokenizer (no `model` object), or a file the library cannot build (the library's
   *   message is kept); `inconsistent` when the tokenizer has ids at or above `vocabSize`, or
   *   BOS/EOS lie outside the vocabulary
   */
  static fromJson(
    tokenizerJson: string | object,
    config: string | object = {},
    options: HuggingFaceTokenizerOptions = {},
  ): HuggingFaceTokenizer {
    const file = options.file
    const parse = (value: string | object, what: string): Record<string, unknown> => {
      let parsed: unknown = value
      if (typeof value === 'string') {
        try {
          parsed = JSON.parse(value.charCodeAt(0) === 0xfeff ? value.slice(1) : value)
        } catch (error) {
          throw new ModelFileError('invalid-json', `${what} is not valid JSON (${(error as Error).message})`, { file })
        }
      }
      if (!isObject(parsed)) throw new ModelFileError('invalid-json', `${what} is not a JSON object`, { file })
      return parsed
    }
    const json = parse(tokenizerJson, 'tokenizer.json') as TokenizerJson
    const tokenizerConfig = parse(config, 'tokenizer_config.json')
    if (!isObject(json.model) || typeof json.model.type !== 'string') {
      throw new ModelFileError(
        'invalid-json',
        'not a Hugging Face tokenizer.json: it has no "model" object with a "type" (BPE, WordPiece, Unigram...)',
        { file },
      )
    }
    const keepPrefix = options.dummyPrefix ?? true
    // The Rust crate writes every component (null when absent); the library insists on each key.
    const complete: TokenizerJson = {
      added_tokens: [],
      normalizer: null,
      pre_tokenizer: null,
      post_processor: null,
      decoder: null,
      ...json,
    }
    const edited: TokenizerJson = keepPrefix
      ? complete
      : {
          ...complete,
          normalizer: withoutPrepend(json.normalizer),
          pre_tokenizer: metaspaceNever(json.pre_tokenizer, 'pretokenizers'),
          decoder: withoutLeadingStrip(json.decoder),
        }
    let library: LibraryTokenizer
    try {
      library = new LibraryTokenizer(edited, tokenizerConfig)
      // The library reads some components only when it first encodes or decodes (a post_processor
      // without its "single" template fails with "type is not iterable"): try both here, so such a
      // file is refused now, naming it, and not at the first prompt.
      library.decode(library.encode('a b', { add_special_tokens: true }).ids)
    } catch (error) {
      throw new ModelFileError(
        'invalid-json',
        `@huggingface/tokenizers cannot build this tokenizer (${(error as Error).message})`,
        { file },
        { cause: error },
      )
    }
    let maxId = -1
    for (const id of library.get_vocab().values()) if (id > maxId) maxId = id
    const added = library.get_added_tokens_decoder()
    for (const id of added.keys()) if (id > maxId) maxId = id
    const vocabSize = maxId + 1
    if (vocabSize === 0) throw new ModelFileError('invalid-json', 'the tokenizer has an empty vocabulary', { file })
    if (options.vocabSize !== undefined && vocabSize > options.vocabSize) {
      throw new ModelFileError(
        'inconsistent',
        `the tokenizer has ids up to ${maxId} but the model's vocabulary has ${options.vocabSize} tokens`,
        { file },
      )
    }
    const specialIds = [...added.entries()]
      .filter(([, token]) => token.special)
      .map(([id]) => id)
      .sort((a, b) => a - b)
    const find = (name: 'BOS' | 'EOS', given: number | undefined, key: string, fallback?: string) => {
      const id = given ?? tokenId(library, tokenizerConfig[key]) ?? tokenId(library, fallback)
      if (id === undefined) return undefined
      if (!Number.isSafeInteger(id) || id < 0 || id >= (options.vocabSize ?? vocabSize)) {
        throw new ModelFileError('inconsistent', `${name} id ${id} is outside the vocabulary`, { file })
      }
      return id
    }
    const bosId = find('BOS', options.bosId, 'bos_token', templateBos(json))
    const eosId = find('EOS', options.eosId, 'eos_token')
    return new HuggingFaceTokenizer(library, {
      vocabSize,
      bosId,
      eosId,
      specialIds,
      dummyPrefix: keepPrefix || !hasDummyPrefix(json),
    })
  }

  /**
   * Encodes text: the file's normalizer, pre-tokenizer and model (no post-processor template),
   * then BOS / EOS as asked (when the tokenizer has them).
   *
   * @param text - any string
   * @param options - `bos` (default true), `eos` (default false)
   * @returns token ids
   */
  encode(text: string, options: EncodeOptions = {}): number[] {
    const ids = text.length === 0 ? [] : this.library.encode(text, { add_special_tokens: false }).ids
    const bos = (options.bos ?? true) && this.bosId !== undefined ? [this.bosId] : []
    const eos = (options.eos ?? false) && this.eosId !== undefined ? [this.eosId] : []
    return [...bos, ...ids, ...eos]
  }

  /**
   * Decodes ids with the file's decoder. With `previous`, the text is what `ids` add after that
   * token (decoded together, so spaces that depend on the token before come out right).
   *
   * @param ids - token ids
   * @param options - the token before `ids[0]`; whether to skip special tokens (default true)
   * @throws `InvalidArgumentError` for an id outside the vocabulary
   */
  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    for (const id of ids) this.checkId(id)
    const skip = options.skipSpecialTokens ?? true
    const decodeOptions = { skip_special_tokens: skip }
    // BOS/EOS from a config are skipped too when the file does not mark them special.
    const kept = skip ? ids.filter((id) => !this.isSpecial(id)) : [...ids]
    if (kept.length === 0) return ''
    if (options.previous === undefined) return this.library.decode(kept, decodeOptions)
    this.checkId(options.previous)
    if (skip && this.isSpecial(options.previous)) return this.library.decode(kept, decodeOptions)
    const before = this.library.decode([options.previous], decodeOptions)
    const both = this.library.decode([options.previous, ...kept], decodeOptions)
    return both.startsWith(before) ? both.slice(before.length) : both
  }

  /**
   * The token's string in the vocabulary (e.g. `'▁a▁'`, `'<|end_story|>'`), or `undefined` for an
   * id the vocabulary skips.
   *
   * @param id - a token id
   * @throws `InvalidArgumentError` for an id outside the vocabulary
   */
  tokenText(id: number): string | undefined {
    this.checkId(id)
    return this.library.id_to_token(id)
  }

  /**
   * Whether `id` is one of the file's special tokens (BOS, EOS, `<unk>`...).
   *
   * @param id - a token id
   */
  isSpecial(id: number): boolean {
    return this.special.has(id) || id === this.bosId || id === this.eosId
  }

  private checkId(id: number): void {
    if (!Number.isSafeInteger(id) || id < 0 || id >= this.vocabSize) {
      throw new InvalidArgumentError(`token id ${id} is outside the vocabulary [0, ${this.vocabSize})`, {
        id,
      })
    }
  }
}

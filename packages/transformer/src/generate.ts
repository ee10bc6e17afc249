/**
 * Text generation with KV-cached decoding: the prompt is processed once (the attention kernel's
 * `prefill`, then `afterPrefill`), then one token at a time through the kernel's `decode`.
 * Greedy (temperature 0), temperature, top-k and top-p (nucleus) sampling, seeded.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, Rng, ShapeError, type AttentionKernel } from '@attnlab/core'
import { configSchema, customField, integerField, numberField, parseConfig, type z } from '@attnlab/core/schema'
import { KVCache } from './kv-cache.ts'
import type { AttentionReport, Transformer } from './model.ts'

/**
 * The schema of {@link GenerateOptions}: each option's meaning, range and default, declared once.
 *
 * @category Generation
 */
export const generateOptionsSchema = configSchema({
  /** Maximum number of new tokens per sequence (>= 0; required). */
  maxTokens: integerField('maximum number of new tokens per sequence', { min: 0 }),
  /** Softmax temperature; 0 means greedy (argmax, ties to the lowest id). Default 1. */
  temperature: numberField('softmax temperature; 0 is greedy (argmax)', { min: 0 }).default(1),
  /** Keep only the `topK` most likely tokens before sampling (default: all). */
  topK: integerField('keep only the topK most likely tokens before sampling (default: all)', { min: 1 }).optional(),
  /** Keep the smallest set of most likely tokens whose probability reaches `topP` (default 1: all). */
  topP: numberField('keep the most likely tokens whose probability reaches topP (nucleus sampling)', {
    min: 0,
    max: 1,
    minExclusive: true,
  }).default(1),
  /** Sampling seed (default 0); the same seed gives the same tokens on `cpu`. */
  seed: integerField('sampling seed').default(0),
  /** Token id(s) that end a sequence (the EOS token is included in the output); checked against `dVocab`. */
  eosToken: customField<number | readonly number[]>('token id(s) that end a sequence').optional(),
  /** Attention kernel for this run (default: the model's). */
  attention: customField<AttentionKernel>("attention kernel for this run (default: the model's)").optional(),
  /** Called with each sequence's new token after every decoding step. */
  onToken: customField<(tokens: readonly number[], step: number) => void>(
    "called with each sequence's new token after every decoding step",
  ).optional(),
})

/**
 * Options of {@link generate} (see {@link generateOptionsSchema}).
 *
 * @category Generation
 */
export type GenerateOptions = Readonly<z.input<typeof generateOptionsSchema>>

/**
 * The schema of the sampling options of {@link sampleToken}: `temperature`, `topK` and `topP` of
 * {@link generateOptionsSchema}.
 *
 * @category Generation
 */
export const samplingOptionsSchema = generateOptionsSchema.pick({ temperature: true, topK: true, topP: true })

/** Sampling options with their defaults (see {@link samplingOptionsSchema}). */
type Sampling = z.output<typeof samplingOptionsSchema>

/** Why a sequence stopped. @category Generation */
export type StopReason = 'eos' | 'max-tokens' | 'context'

/**
 * The result of {@link generate}, one entry per prompt.
 *
 * @category Generation
 */
export interface GenerateResult {
  /** Generated tokens per sequence (without the prompt; including the EOS token if one ended it). */
  readonly tokens: readonly (readonly number[])[]
  /** Why each sequence stopped. */
  readonly stopReasons: readonly StopReason[]
  /** The attention kernel's accounting for every call (prefill and decode steps, per layer). */
  readonly attentionReports: readonly AttentionReport[]
}

/**
 * Picks the next token from one row of logits.
 *
 * @param logits - `dVocab` values
 * @param options - temperature (default 1; 0 is greedy), top-k (default: all), top-p (default 1)
 * @param rng - the sampling stream (not used when greedy)
 * @returns the token id
 * @throws `ConfigError` (`@attnlab/core`) for an option out of range or an unknown option name
 * @category Generation
 */
export function sampleToken(
  logits: ArrayLike<number>,
  options: Readonly<z.input<typeof samplingOptionsSchema>>,
  rng: Rng,
): number {
  return sampleWith(logits, parseConfig(samplingOptionsSchema, options, 'sampleToken'), rng)
}

/** {@link sampleToken} with validated options. */
function sampleWith(logits: ArrayLike<number>, options: Sampling, rng: Rng): number {
  const { temperature, topP } = options
  const n = logits.length
  if (temperature === 0) {
    let best = 0
    for (let i = 1; i < n; i++) if ((logits[i] as number) > (logits[best] as number)) best = i
    return best
  }
  const order = Array.from({ length: n }, (_, i) => i).sort(
    (a, b) => (logits[b] as number) - (logits[a] as number) || a - b,
  )
  const topK = Math.min(options.topK ?? n, n)
  const kept = order.slice(0, topK)
  const max = logits[kept[0] as number] as number
  const weights = kept.map((i) => Math.exp(((logits[i] as number) - max) / temperature))
  const total = weights.reduce((a, b) => a + b, 0)
  let count = kept.length
  if (topP < 1) {
    let cumulative = 0
    for (let i = 0; i < kept.length; i++) {
      cumulative += (weights[i] as number) / total
      if (cumulative >= topP) {
        count = i + 1
        break
      }
    }
  }
  const index = rng.categorical(weights, 0, count)
  return kept[index] as number
}

/** The options with their defaults, checked (the EOS ids against the vocabulary). */
function checkOptions(options: GenerateOptions, dVocab: number): z.output<typeof generateOptionsSchema> {
  const settings = parseConfig(generateOptionsSchema, options, 'generate')
  const eos =
    settings.eosToken === undefined
      ? []
      : typeof settings.eosToken === 'number'
        ? [settings.eosToken]
        : settings.eosToken
  for (const t of eos)
    if (!Number.isInteger(t) || t < 0 || t >= dVocab)
      throw new ConfigError('eosToken', `${t} is not a token id in [0, ${dVocab})`)
  return settings
}

/**
 * Generates continuations of one or more prompts (all of the same length) with KV-cached
 * decoding. Stops a sequence at an EOS token, after `maxTokens`, or when the context (`nCtx`) is
 * full; the run ends when every sequence stopped.
 *
 * @param model - any architecture
 * @param prompts - one prompt (`number[]`) or a batch of equal-length prompts (`number[][]`)
 * @param options - length, sampling, seed, EOS, kernel
 * @returns generated tokens and stop reasons per prompt
 * @throws `ConfigError` (`@attnlab/core`) for invalid options (an unknown option name included); `ShapeError`
 * (`@attnlab/core`) for empty or ragged prompts
 *   or a prompt longer than `nCtx`
 * @example
 * ```ts
 * const { tokens } = await generate(model, [1, 319], { maxTokens: 20, temperature: 0, eosToken: 2 })
 * ```
 * @category Generation
 */
export async function generate(
  model: Transformer,
  prompts: readonly number[] | readonly (readonly number[])[],
  options: GenerateOptions,
): Promise<GenerateResult> {
  const { dVocab, nCtx, nLayers } = model.config
  const settings = checkOptions(options, dVocab)
  const batch: number[][] = (
    Array.isArray(prompts[0]) ? (prompts as readonly (readonly number[])[]) : [prompts as readonly number[]]
  ).map((p) => [...p])
  const promptLength = batch[0]?.length ?? 0
  if (promptLength === 0) throw new ShapeError('the prompt is empty; generation needs at least one token (e.g. BOS)')
  if (batch.some((p) => p.length !== promptLength))
    throw new ShapeError(`prompts must have equal lengths (got ${batch.map((p) => p.length).join(', ')})`)
  if (promptLength > nCtx)
    throw new ShapeError(`the prompt has ${promptLength} tokens but the context length nCtx is ${nCtx}`)
  const eos = new Set(
    settings.eosToken === undefined
      ? []
      : typeof settings.eosToken === 'number'
        ? [settings.eosToken]
        : settings.eosToken,
  )
  const rng = Rng.fromSeed(settings.seed).split('sampling')
  const generated: number[][] = batch.map(() => [])
  const reasons: (StopReason | null)[] = batch.map(() => (settings.maxTokens === 0 ? 'max-tokens' : null))
  const reports: AttentionReport[] = []
  const cache = new KVCache(nLayers)
  const forwardOptions = {
    attentionReports: reports,
    ...(settings.attention === undefined ? {} : { attention: settings.attention }),
  }
  try {
    let input: number[][] = batch
    let step = 0
    while (reasons.some((r) => r === null)) {
      const logits = model.forwardCached(input, cache, forwardOptions) // [batch, pos, dVocab]
      const last = tf.tidy(() => tf.slice(logits, [0, logits.shape[1] - 1, 0], [-1, 1, -1]))
      logits.dispose()
      const values = (await last.data()) as Float32Array
      last.dispose()
      const next: number[] = []
      for (let b = 0; b < batch.length; b++) {
        const row = values.subarray(b * dVocab, (b + 1) * dVocab)
        const token =
          reasons[b] === null ? sampleWith(row, settings, rng) : (generated[b]?.[generated[b]!.length - 1] ?? 0)
        next.push(token)
        if (reasons[b] !== null) continue
        generated[b]!.push(token)
        if (eos.has(token)) reasons[b] = 'eos'
        else if (generated[b]!.length >= settings.maxTokens) reasons[b] = 'max-tokens'
        else if (cache.positions + 1 > nCtx) reasons[b] = 'context'
      }
      settings.onToken?.(next, step)
      step += 1
      input = next.map((t) => [t])
    }
  } finally {
    cache.dispose()
  }
  return { tokens: generated, stopReasons: reasons as StopReason[], attentionReports: reports }
}

/**
 * Text generation with KV-cached decoding: the prompt is processed once (the attention kernel's
 * `prefill`, then `afterPrefill`), then one token at a time through the kernel's `decode`.
 * Greedy (temperature 0), temperature, top-k and top-p (nucleus) sampling, seeded.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { checkOptionKeys, ConfigError, Rng, ShapeError, type AttentionKernel } from '@attnlab/core'
import { KVCache } from './kv-cache.ts'
import type { AttentionReport, Transformer } from './model.ts'

/**
 * Options of {@link generate}.
 *
 * @category Generation
 */
export interface GenerateOptions {
  /** Maximum number of new tokens per sequence (>= 0). */
  readonly maxTokens: number
  /** Softmax temperature; 0 means greedy (argmax, ties to the lowest id). Default 1. */
  readonly temperature?: number
  /** Keep only the `topK` most likely tokens before sampling (default: all). */
  readonly topK?: number
  /** Keep the smallest set of most likely tokens whose probability reaches `topP` (default 1: all). */
  readonly topP?: number
  /** Sampling seed (default 0); the same seed gives the same tokens on `cpu`. */
  readonly seed?: number
  /** Token id(s) that end a sequence (the EOS token is included in the output). */
  readonly eosToken?: number | readonly number[]
  /** Attention kernel for this run (default: the model's). */
  readonly attention?: AttentionKernel
  /** Called with each sequence's new token after every decoding step. */
  readonly onToken?: (tokens: readonly number[], step: number) => void
}

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
 * @param options - temperature, top-k, top-p
 * @param rng - the sampling stream (not used when greedy)
 * @returns the token id
 * @category Generation
 */
export function sampleToken(
  logits: ArrayLike<number>,
  options: { temperature?: number; topK?: number; topP?: number },
  rng: Rng,
): number {
  const temperature = options.temperature ?? 1
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
  const topP = options.topP ?? 1
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

const GENERATE_OPTION_KEYS = Object.keys({
  maxTokens: 1,
  temperature: 1,
  topK: 1,
  topP: 1,
  seed: 1,
  eosToken: 1,
  attention: 1,
  onToken: 1,
} satisfies Record<keyof GenerateOptions, 1>)

function checkOptions(options: GenerateOptions, dVocab: number): void {
  checkOptionKeys('generate options', options, GENERATE_OPTION_KEYS)
  if (!Number.isSafeInteger(options.maxTokens) || options.maxTokens < 0)
    throw new ConfigError('maxTokens', `${options.maxTokens} must be a non-negative integer`)
  const temperature = options.temperature ?? 1
  if (!(Number.isFinite(temperature) && temperature >= 0))
    throw new ConfigError('temperature', `${temperature} must be a finite number >= 0`)
  if (options.topK !== undefined && (!Number.isSafeInteger(options.topK) || options.topK < 1))
    throw new ConfigError('topK', `${options.topK} must be a positive integer`)
  if (options.topP !== undefined && !(options.topP > 0 && options.topP <= 1))
    throw new ConfigError('topP', `${options.topP} must be in (0, 1]`)
  const eos =
    options.eosToken === undefined ? [] : typeof options.eosToken === 'number' ? [options.eosToken] : options.eosToken
  for (const t of eos)
    if (!Number.isInteger(t) || t < 0 || t >= dVocab)
      throw new ConfigError('eosToken', `${t} is not a token id in [0, ${dVocab})`)
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
  checkOptions(options, dVocab)
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
    options.eosToken === undefined ? [] : typeof options.eosToken === 'number' ? [options.eosToken] : options.eosToken,
  )
  const rng = Rng.fromSeed(options.seed ?? 0).split('sampling')
  const generated: number[][] = batch.map(() => [])
  const reasons: (StopReason | null)[] = batch.map(() => (options.maxTokens === 0 ? 'max-tokens' : null))
  const reports: AttentionReport[] = []
  const cache = new KVCache(nLayers)
  const forwardOptions = {
    attentionReports: reports,
    ...(options.attention === undefined ? {} : { attention: options.attention }),
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
          reasons[b] === null ? sampleToken(row, options, rng) : (generated[b]?.[generated[b]!.length - 1] ?? 0)
        next.push(token)
        if (reasons[b] !== null) continue
        generated[b]!.push(token)
        if (eos.has(token)) reasons[b] = 'eos'
        else if (generated[b]!.length >= options.maxTokens) reasons[b] = 'max-tokens'
        else if (cache.positions + 1 > nCtx) reasons[b] = 'context'
      }
      options.onToken?.(next, step)
      step += 1
      input = next.map((t) => [t])
    }
  } finally {
    cache.dispose()
  }
  return { tokens: generated, stopReasons: reasons as StopReason[], attentionReports: reports }
}

/**
 * The induction probe tracked through training: `@attnlab/knockout`'s `induction` and
 * `induction-gain` capabilities (random token blocks repeated, the second copy scored) on the model
 * being trained, the step from which the gain stays up, and which heads carry it (single-head
 * knockouts). Baherwani et al., arXiv 2606.25010 (the language-model observation: induction appears
 * abruptly, at a seed-dependent step, once a previous-token head and an induction head are found).
 *
 * @module
 */
import { InvalidArgumentError } from '@attnlab/core'
import { builtinCapability, formatHead, headAt, scoreMasks, singleHeadMasks, type Capability } from '@attnlab/knockout'
import type { Transformer } from '@attnlab/transformer'

/**
 * The induction gain (nats) above which induction counts as present: 1 nat, the log-probability of
 * the second copy of a random block at least e times the first copy's.
 *
 * @category Training
 */
export const INDUCTION_THRESHOLD = 1

/**
 * The probe's two capabilities for a model: random blocks of `min(16, floor((nCtx + 1) / 2))` tokens
 * drawn from `tokenPool`, 64 sequences, seed 0 (the same blocks at every evaluation).
 *
 * @param model - `{ dVocab, nCtx }` of the model
 * @param tokenPool - the token ids blocks are drawn from (a text task: its characters, without the unknown id)
 * @returns the `induction` (mean log-probability of the second copy, nats) and `induction-gain` (second copy
 *   minus first copy, nats) capabilities
 * @throws `ConfigError` (`@attnlab/core`) for a context too short for the probe or a pool of fewer than 2 tokens
 * @category Training
 */
export function inductionProbes(
  model: { readonly dVocab: number; readonly nCtx: number },
  tokenPool: readonly number[],
): { readonly second: Capability; readonly gain: Capability } {
  const context = { dVocab: model.dVocab, nCtx: model.nCtx, tokenPool }
  return {
    second: builtinCapability('induction', context, { count: 64, seed: 0 }),
    gain: builtinCapability('induction-gain', context, { count: 64, seed: 0 }),
  }
}

/**
 * Scores the probe on a model (no head knocked out).
 *
 * @param model - the model (not modified)
 * @param probes - from {@link inductionProbes}
 * @returns `logprob`: mean log-probability of the second copy (nats, <= 0); `gain`: the second copy's minus the
 *   first copy's (nats; 0 for a model that does not copy)
 * @throws `InvalidArgumentError` (`@attnlab/core`) when the probe does not fit the model
 * @category Training
 */
export async function scoreInduction(
  model: Transformer,
  probes: { readonly second: Capability; readonly gain: Capability },
): Promise<{ readonly logprob: number; readonly gain: number }> {
  const { nLayers, nHeads } = model.config
  const clean = { count: 1, heads: nLayers * nHeads, data: new Uint8Array(nLayers * nHeads) }
  const second = await scoreMasks(model, probes.second, clean)
  const gain = await scoreMasks(model, probes.gain, clean)
  return { logprob: second.values[0] as number, gain: gain.values[0] as number }
}

/**
 * How much the induction gain falls when one head is zero-ablated (`@attnlab/knockout`'s
 * single-head masks), for every head, largest damage first.
 *
 * @param model - the model (not modified)
 * @param probes - from {@link inductionProbes}
 * @returns per head its name (`L1H2`) and damage (clean gain minus knocked-out gain, nats)
 * @throws `InvalidArgumentError` (`@attnlab/core`) when the probe does not fit the model
 * @category Training
 */
export async function inductionHeadDamage(
  model: Transformer,
  probes: { readonly second: Capability; readonly gain: Capability },
): Promise<{ readonly head: string; readonly damage: number }[]> {
  const layout = { nLayers: model.config.nLayers, nHeads: model.config.nHeads }
  const n = layout.nLayers * layout.nHeads
  const { gain } = await scoreInduction(model, probes)
  const knocked = await scoreMasks(model, probes.gain, singleHeadMasks(layout))
  return Array.from({ length: n }, (_, i) => ({
    head: formatHead(headAt(i, layout)),
    damage: gain - (knocked.values[i] as number),
  })).sort((a, b) => b.damage - a.damage)
}

/**
 * The step at which induction appears: the first evaluation from which the induction gain stays at or above
 * `threshold` until the end of the run; null when the last evaluation is below it (or there is none).
 *
 * @param evaluations - `{ step, inductionGain }` per evaluation, in step order (gain in nats)
 * @param threshold - nats (default {@link INDUCTION_THRESHOLD})
 * @throws `InvalidArgumentError` (`@attnlab/core`) for a threshold that is not a finite number
 * @example
 * ```ts
 * inductionStep([{ step: 0, inductionGain: 0 }, { step: 50, inductionGain: 2 }]) // 50
 * ```
 * @category Training
 */
export function inductionStep(
  evaluations: readonly { readonly step: number; readonly inductionGain?: number | null }[],
  threshold: number = INDUCTION_THRESHOLD,
): number | null {
  if (!Number.isFinite(threshold))
    throw new InvalidArgumentError(`threshold must be a finite number of nats, got ${String(threshold)}`)
  let step: number | null = null
  for (const e of evaluations) {
    const gain = e.inductionGain
    if (typeof gain === 'number' && Number.isFinite(gain) && gain >= threshold) step ??= e.step
    else step = null
  }
  return step
}

/**
 * Trials: the expansion of a spec into its trials, each with a stable id.
 *
 * @module
 */
import { canonicalJson, type JsonObject, type JsonValue } from './json.ts'
import { trialPoints, trialSettings, type SweepSpec } from './spec.ts'

/**
 * One trial of a sweep: an experiment with fully resolved settings and one seed.
 *
 * @category Sweeps
 */
export interface Trial {
  /** The stable id ({@link trialId}): 16 hex digits. */
  readonly id: string
  /** Position in the spec's expansion order ({@link expandTrials}), 0-based. */
  readonly index: number
  /** The experiment's name. */
  readonly experiment: string
  /** The swept values of this trial: each grid and zip path to its value, in the spec's key order. */
  readonly params: JsonObject
  /** The trial's seed. */
  readonly seed: number
  /** The resolved settings the experiment runs (defaults, base, swept values, the seed in place). */
  readonly settings: JsonObject
}

/**
 * The version of the text a trial id hashes; part of the hashed text, so that a change of what
 * goes in changes every id rather than silently reusing old trials.
 *
 * @category Sweeps
 */
export const TRIAL_ID_FORMAT = 'attnlab-sweep-trial/1'

/**
 * A value with every object key whose value is `null` left out, at any depth (list entries stay):
 * in the experiments' settings `null` means "none", the same as an absent optional setting, so a
 * version that adds an optional setting with a null default (`attentionBias`, `initFrom`,
 * `batchTokens`) keeps every earlier trial's id.
 */
function withoutNulls(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(withoutNulls)
  if (value === null || typeof value !== 'object') return value
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== null)
      .map(([k, v]) => [k, withoutNulls(v)]),
  )
}

/**
 * A trial's stable id: the first 16 hex digits (64 bits) of the SHA-256 of the canonical JSON
 * (sorted keys, no whitespace) of `{ format: TRIAL_ID_FORMAT, experiment, settings }`, where
 * `settings` are the resolved settings with the seed in place. The sweep's name, the trial's
 * index, the tensor backend and the attnlab version do not go in: the same experiment with the
 * same settings and seed has the same id in every sweep, on every machine, so a resubmitted or
 * reordered sweep finds its finished trials. (Defaults that change between versions change the
 * resolved settings, hence the id.) Uses Web Crypto (`crypto.subtle`, in Node 20 and browsers).
 *
 * @param trial - the experiment's name and resolved settings
 * @returns 16 lowercase hex digits
 * @example
 * ```ts
 * const [first] = await expandTrials(spec)
 * console.log(await trialId(first) === first.id) // true
 * ```
 * @category Sweeps
 */
export async function trialId(trial: Pick<Trial, 'experiment' | 'settings'>): Promise<string> {
  const settings = withoutNulls(trial.settings) as JsonObject
  const text = canonicalJson({ format: TRIAL_ID_FORMAT, experiment: trial.experiment, settings })
  const digest = await globalThis.crypto.subtle.digest('SHA-256', new TextEncoder().encode(text))
  return Array.from(new Uint8Array(digest).subarray(0, 8), (b) => b.toString(16).padStart(2, '0')).join('')
}

/**
 * The trials of a spec, in a deterministic order: the grid's parameters in the spec's key order,
 * the first varying slowest (the nested loops written in that order), then each zip group (its
 * rows in order, all its lists at once), then the seeds, fastest. With
 * `grid: { a: [1, 2], b: [x, y] }` and `seeds: 2`: (1, x, 0), (1, x, 1), (1, y, 0), (1, y, 1),
 * (2, x, 0), ...
 *
 * @param spec - a validated spec ({@link parseSweepSpec})
 * @returns the trials, `index` 0 .. n-1
 * @category Sweeps
 */
export async function expandTrials(spec: SweepSpec): Promise<Trial[]> {
  const trials: Trial[] = []
  for (const point of trialPoints(spec)) {
    const settings = trialSettings(spec, point)
    const id = await trialId({ experiment: spec.experiment, settings })
    trials.push(
      Object.freeze({
        id,
        index: point.index,
        experiment: spec.experiment,
        params: point.params,
        seed: point.seed,
        settings,
      }),
    )
  }
  return trials
}

/**
 * Learning-rate schedules: constant, linear warmup + cosine decay, and reduce-on-plateau on the
 * validation loss (PyTorch's `ReduceLROnPlateau`, mode `min`, relative threshold; paper (b)
 * uses patience 10, factor 0.5, in the authors' released code). Schedules with state
 * export it for checkpoints.
 *
 * @module
 */
import { ConfigError, InvalidCheckpointError } from '@attnlab/core'
import { configSchema, enumField, integerField, numberField, parseConfig, z } from '@attnlab/core/schema'

/** Constant learning rate (no settings). @category Training */
export const constantScheduleSchema = configSchema({ kind: enumField('schedule', ['constant']) })

/**
 * Linear warmup from `lr / warmupSteps` to `lr` over `warmupSteps` steps, then cosine decay to
 * `minLr` at `totalSteps` (and `minLr` after).
 *
 * @category Training
 */
export const warmupCosineScheduleSchema = configSchema({
  kind: enumField('schedule', ['warmup-cosine']),
  /** Warmup steps (>= 0). */
  warmupSteps: integerField('warmup steps for warmup-cosine', { min: 0 }),
  /** Step at which the cosine reaches `minLr` (default: the run's `steps`; more than `warmupSteps`). */
  totalSteps: integerField('step at which the cosine reaches minLr (default: the run length)', { min: 1 }).optional(),
  /** Final learning rate, default 0 (at most the base learning rate). */
  minLr: numberField('final learning rate of the cosine', { min: 0 }).default(0),
})

/**
 * Multiply the learning rate by `factor` when the validation loss has not improved by more than
 * `threshold` (relative) for more than `patience` evaluations (PyTorch `ReduceLROnPlateau`).
 *
 * @category Training
 */
export const reduceOnPlateauScheduleSchema = configSchema({
  kind: enumField('schedule', ['reduce-on-plateau']),
  /** Reduction factor in (0, 1), default 0.5. */
  factor: numberField('learning-rate reduction factor', {
    min: 0,
    minExclusive: true,
    max: 1,
    maxExclusive: true,
  }).default(0.5),
  /** Evaluations without improvement tolerated, default 10. */
  patience: integerField('evaluations without improvement tolerated', { min: 0 }).default(10),
  /** Relative improvement needed, default 1e-4. */
  threshold: numberField('relative improvement needed', { min: 0 }).default(1e-4),
  /** Evaluations to wait after a reduction, default 0. */
  cooldown: integerField('evaluations to wait after a reduction', { min: 0 }).default(0),
  /** Lower bound, default 0. */
  minLr: numberField('lowest learning rate', { min: 0 }).default(0),
})

/** Constant learning rate. @category Training */
export type ConstantSchedule = Readonly<z.input<typeof constantScheduleSchema>>
/** Warmup + cosine settings as given (see {@link warmupCosineScheduleSchema}). @category Training */
export type WarmupCosineSchedule = Readonly<z.input<typeof warmupCosineScheduleSchema>>
/** Reduce-on-plateau settings as given (see {@link reduceOnPlateauScheduleSchema}). @category Training */
export type ReduceOnPlateauSchedule = Readonly<z.input<typeof reduceOnPlateauScheduleSchema>>

/** A schedule choice. @category Training */
export type ScheduleOptions = ConstantSchedule | WarmupCosineSchedule | ReduceOnPlateauSchedule

/** The schema of each schedule kind. */
const SCHEDULE_SCHEMAS = {
  constant: constantScheduleSchema,
  'warmup-cosine': warmupCosineScheduleSchema,
  'reduce-on-plateau': reduceOnPlateauScheduleSchema,
} as const

/** The schedule's kind, read first to choose the schema of its other settings. */
const SCHEDULE_KIND = z.looseObject({
  kind: enumField('schedule kind', ['constant', 'warmup-cosine', 'reduce-on-plateau']),
})

/**
 * Schedule settings with every default filled in and validated.
 *
 * @category Training
 */
export type ResolvedScheduleOptions =
  | Readonly<z.output<typeof constantScheduleSchema>>
  | Readonly<z.output<typeof warmupCosineScheduleSchema>>
  | Readonly<z.output<typeof reduceOnPlateauScheduleSchema>>

/**
 * Validates schedule settings and fills in the defaults (`{ kind: 'reduce-on-plateau' }` gives
 * factor 0.5, patience 10, threshold 1e-4, cooldown 0, minLr 0). The rules that need the run
 * (`totalSteps > warmupSteps`, `minLr <= lr`) are checked by {@link createSchedule}.
 *
 * @throws `ConfigError` (`@attnlab/core`) for an unknown kind or key (with a did-you-mean) or an out-of-range value
 * @category Training
 */
export function resolveScheduleOptions<O extends ScheduleOptions>(
  options: O,
): Extract<ResolvedScheduleOptions, { readonly kind: O['kind'] }> {
  const { kind } = parseConfig(SCHEDULE_KIND, options, 'schedule')
  return parseConfig(SCHEDULE_SCHEMAS[kind], options, `${kind} schedule`) as Extract<
    ResolvedScheduleOptions,
    { readonly kind: O['kind'] }
  >
}

/** The state a schedule carries between steps (JSON). @category Training */
export interface ScheduleState {
  readonly kind: ScheduleOptions['kind']
  /** Current base learning rate (reduce-on-plateau lowers it). */
  readonly currentLr: number
  /** Best validation loss seen (reduce-on-plateau), or null. */
  readonly best: number | null
  /** Evaluations without improvement. */
  readonly badEvaluations: number
  /** Remaining cooldown evaluations. */
  readonly cooldownLeft: number
}

/**
 * A learning-rate schedule: `learningRate(step)` for the update at 0-based `step`;
 * `onValidation(loss)` after each evaluation.
 *
 * @category Training
 */
export interface Schedule {
  /** The learning rate of the update with 0-based index `step`. */
  learningRate(step: number): number
  /** Reports a validation loss (nats); reduce-on-plateau may lower the rate. Returns true if it did. */
  onValidation(loss: number): boolean
  /** The state (for checkpoints). */
  getState(): ScheduleState
  /**
   * Restores a state.
   *
   * @throws `InvalidCheckpointError` (`@attnlab/core`) when the state is for another kind or malformed
   */
  setState(state: ScheduleState): void
}

/**
 * Creates a schedule.
 *
 * @param options - which schedule
 * @param baseLr - the peak/initial learning rate (> 0)
 * @param steps - the run length (default horizon of the cosine)
 * @throws `ConfigError` (`@attnlab/core`) for invalid settings
 * @category Training
 */
export function createSchedule(options: ScheduleOptions, baseLr: number, steps: number): Schedule {
  if (!(Number.isFinite(baseLr) && baseLr > 0))
    throw new ConfigError('lr', `${baseLr} must be a positive number`, { value: baseLr })
  let state: { currentLr: number; best: number | null; badEvaluations: number; cooldownLeft: number } = {
    currentLr: baseLr,
    best: null,
    badEvaluations: 0,
    cooldownLeft: 0,
  }
  const resolved: ResolvedScheduleOptions = resolveScheduleOptions(options)
  const kind = resolved.kind
  let learningRate: (step: number) => number
  let onValidation: (loss: number) => boolean = () => false
  switch (resolved.kind) {
    case 'constant':
      learningRate = () => state.currentLr
      break
    case 'warmup-cosine': {
      const warmup = resolved.warmupSteps
      const total = resolved.totalSteps ?? steps
      const minLr = resolved.minLr
      if (!Number.isSafeInteger(total) || total <= warmup)
        throw new ConfigError('totalSteps', `${total} must be an integer > warmupSteps ${warmup}`)
      if (!(minLr >= 0 && minLr <= baseLr)) throw new ConfigError('minLr', `${minLr} must be in [0, lr ${baseLr}]`)
      learningRate = (step) => {
        if (step < warmup) return (baseLr * (step + 1)) / warmup
        if (step >= total) return minLr
        const progress = (step - warmup) / (total - warmup)
        return minLr + 0.5 * (baseLr - minLr) * (1 + Math.cos(Math.PI * progress))
      }
      break
    }
    case 'reduce-on-plateau': {
      const { factor, patience, threshold, cooldown, minLr } = resolved
      learningRate = () => state.currentLr
      onValidation = (loss) => {
        if (state.best === null || loss < state.best * (1 - threshold)) {
          state.best = loss
          state.badEvaluations = 0
        } else {
          state.badEvaluations += 1
        }
        if (state.cooldownLeft > 0) {
          state.cooldownLeft -= 1
          state.badEvaluations = 0
        }
        if (state.badEvaluations > patience) {
          const reduced = Math.max(state.currentLr * factor, minLr)
          state.badEvaluations = 0
          state.cooldownLeft = cooldown
          if (reduced < state.currentLr) {
            state.currentLr = reduced
            return true
          }
        }
        return false
      }
      break
    }
  }
  return {
    learningRate,
    onValidation,
    getState: () => ({ kind, ...state }),
    setState: (saved) => {
      if (saved === null || typeof saved !== 'object' || saved.kind !== kind) {
        throw new InvalidCheckpointError(`schedule state is for '${String(saved?.kind)}' but the run uses '${kind}'`, {
          field: 'schedule.kind',
        })
      }
      if (!(Number.isFinite(saved.currentLr) && saved.currentLr > 0)) {
        throw new InvalidCheckpointError(`schedule.currentLr ${String(saved.currentLr)} is not a positive number`, {
          field: 'schedule.currentLr',
        })
      }
      if (
        !Number.isSafeInteger(saved.badEvaluations) ||
        !Number.isSafeInteger(saved.cooldownLeft) ||
        (saved.best !== null && typeof saved.best !== 'number')
      ) {
        throw new InvalidCheckpointError('schedule state fields badEvaluations/cooldownLeft/best are malformed', {
          field: 'schedule',
        })
      }
      state = {
        currentLr: saved.currentLr,
        best: saved.best,
        badEvaluations: saved.badEvaluations,
        cooldownLeft: saved.cooldownLeft,
      }
    },
  }
}

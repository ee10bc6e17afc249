/**
 * Learning-rate schedules: constant, linear warmup + cosine decay, and reduce-on-plateau on the
 * validation loss (PyTorch's `ReduceLROnPlateau`, mode `min`, relative threshold; paper (b)
 * uses patience 10, factor 0.5, in the authors' released code). Schedules with state
 * export it for checkpoints.
 *
 * @module
 */
import { checkOptionKeys, ConfigError, InvalidCheckpointError } from '@attnlab/core'

/** Constant learning rate. @category Training */
export interface ConstantSchedule {
  readonly kind: 'constant'
}

/**
 * Linear warmup from `lr / warmupSteps` to `lr` over `warmupSteps` steps, then cosine decay to
 * `minLr` at `totalSteps` (and `minLr` after).
 *
 * @category Training
 */
export interface WarmupCosineSchedule {
  readonly kind: 'warmup-cosine'
  /** Warmup steps (>= 0). */
  readonly warmupSteps: number
  /** Step at which the cosine reaches `minLr` (default: the run's `steps`). */
  readonly totalSteps?: number
  /** Final learning rate, default 0. */
  readonly minLr?: number
}

/**
 * Multiply the learning rate by `factor` when the validation loss has not improved by more than
 * `threshold` (relative) for more than `patience` evaluations (PyTorch `ReduceLROnPlateau`).
 *
 * @category Training
 */
export interface ReduceOnPlateauSchedule {
  readonly kind: 'reduce-on-plateau'
  /** Reduction factor in (0, 1), default 0.5. */
  readonly factor?: number
  /** Evaluations without improvement tolerated, default 10. */
  readonly patience?: number
  /** Relative improvement needed, default 1e-4. */
  readonly threshold?: number
  /** Evaluations to wait after a reduction, default 0. */
  readonly cooldown?: number
  /** Lower bound, default 0. */
  readonly minLr?: number
}

/** A schedule choice. @category Training */
export type ScheduleOptions = ConstantSchedule | WarmupCosineSchedule | ReduceOnPlateauSchedule

const SCHEDULE_KEYS = {
  constant: Object.keys({ kind: 1 } satisfies Record<keyof ConstantSchedule, 1>),
  'warmup-cosine': Object.keys({ kind: 1, warmupSteps: 1, totalSteps: 1, minLr: 1 } satisfies Record<
    keyof WarmupCosineSchedule,
    1
  >),
  'reduce-on-plateau': Object.keys({
    kind: 1,
    factor: 1,
    patience: 1,
    threshold: 1,
    cooldown: 1,
    minLr: 1,
  } satisfies Record<keyof ReduceOnPlateauSchedule, 1>),
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
  const kind = options.kind
  const keys = SCHEDULE_KEYS[kind as keyof typeof SCHEDULE_KEYS]
  if (keys !== undefined) checkOptionKeys(`'${kind}' schedule options`, options, keys)
  let learningRate: (step: number) => number
  let onValidation: (loss: number) => boolean = () => false
  switch (options.kind) {
    case 'constant':
      learningRate = () => state.currentLr
      break
    case 'warmup-cosine': {
      const warmup = options.warmupSteps
      const total = options.totalSteps ?? steps
      const minLr = options.minLr ?? 0
      if (!Number.isSafeInteger(warmup) || warmup < 0)
        throw new ConfigError('warmupSteps', `${warmup} must be a non-negative integer`)
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
      const factor = options.factor ?? 0.5
      const patience = options.patience ?? 10
      const threshold = options.threshold ?? 1e-4
      const cooldown = options.cooldown ?? 0
      const minLr = options.minLr ?? 0
      if (!(factor > 0 && factor < 1)) throw new ConfigError('factor', `${factor} must be in (0, 1)`)
      if (!Number.isSafeInteger(patience) || patience < 0)
        throw new ConfigError('patience', `${patience} must be a non-negative integer`)
      if (!(threshold >= 0)) throw new ConfigError('threshold', `${threshold} must be >= 0`)
      if (!Number.isSafeInteger(cooldown) || cooldown < 0)
        throw new ConfigError('cooldown', `${cooldown} must be a non-negative integer`)
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
    default:
      throw new ConfigError(
        'schedule',
        `'${String((options as { kind?: unknown }).kind)}' is not a schedule; expected constant, warmup-cosine or ` +
          'reduce-on-plateau',
      )
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

/**
 * Optimizers written for attnlab (tfjs has no AdamW): AdamW with decoupled weight decay
 * (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019, Algorithm 2; the
 * update order of PyTorch's `torch.optim.AdamW`), SGD with (Nesterov) momentum as PyTorch's
 * `torch.optim.SGD`, and global gradient-norm clipping as `torch.nn.utils.clip_grad_norm_`.
 * State (moments, step count) is exportable for checkpoints, so a resumed run continues exactly.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, InvalidArgumentError, InvalidCheckpointError } from '@attnlab/core'
import { booleanField, configSchema, enumField, numberField, parseConfig, z } from '@attnlab/core/schema'
import { adamwUpdate } from '@attnlab/core/kernels'

/**
 * AdamW settings, declared once: types, defaults (PyTorch's; 0.01 is also PyTorch's AdamW
 * `weightDecay`), ranges and the CLI's help come from this schema.
 *
 * @category Training
 */
export const adamwOptionsSchema = configSchema({
  kind: enumField('optimizer', ['adamw']),
  /** beta1, default 0.9. */
  beta1: numberField('AdamW beta1', { min: 0, max: 1, maxExclusive: true }).default(0.9),
  /** beta2, default 0.999. */
  beta2: numberField('AdamW beta2', { min: 0, max: 1, maxExclusive: true }).default(0.999),
  /** Added to `sqrt(v_hat)`, default 1e-8. */
  epsilon: numberField('AdamW epsilon, added to sqrt(v_hat)', { min: 0 }).default(1e-8),
  /** Decoupled weight decay `lambda`: each step multiplies decayed parameters by `1 - lr * lambda`. Default 0.01. */
  weightDecay: numberField('AdamW decoupled weight decay', { min: 0, max: 100 }).default(0.01),
})

/**
 * SGD settings, declared once (PyTorch semantics: `buf = momentum * buf + (1 - dampening) * g`,
 * first step `buf = g`; Nesterov uses `g + momentum * buf`; weight decay is L2, added to the
 * gradient).
 *
 * @category Training
 */
export const sgdOptionsSchema = configSchema({
  kind: enumField('optimizer', ['sgd']),
  /** Momentum, default 0 (paper (b)'s SGD runs use 0.9). */
  momentum: numberField('SGD momentum', { min: 0, max: 1, maxExclusive: true }).default(0),
  /** Dampening, default 0. */
  dampening: numberField('SGD dampening', { min: 0, max: 1 }).default(0),
  /** Nesterov momentum, default false. */
  nesterov: booleanField('Nesterov momentum').default(false),
  /** L2 weight decay (coupled, added to the gradient), default 0. */
  weightDecay: numberField('SGD L2 weight decay', { min: 0, max: 100 }).default(0),
})

/** AdamW settings as given (every field but `kind` optional; see {@link adamwOptionsSchema}). @category Training */
export type AdamWOptions = Readonly<z.input<typeof adamwOptionsSchema>>

/** SGD settings as given (every field but `kind` optional; see {@link sgdOptionsSchema}). @category Training */
export type SgdOptions = Readonly<z.input<typeof sgdOptionsSchema>>

/** The schema of each optimizer kind. */
const OPTIMIZER_SCHEMAS = { adamw: adamwOptionsSchema, sgd: sgdOptionsSchema } as const

/** The optimizer's kind, read first to choose the schema of its other settings. */
const OPTIMIZER_KIND = z.looseObject({ kind: enumField('optimizer kind', ['adamw', 'sgd']) })

/**
 * Optimizer settings with every default filled in and validated.
 *
 * @category Training
 */
export type ResolvedOptimizerOptions =
  | Readonly<z.output<typeof adamwOptionsSchema>>
  | Readonly<z.output<typeof sgdOptionsSchema>>

/**
 * Validates optimizer settings and fills in the defaults (`{ kind: 'sgd' }` gives momentum 0,
 * dampening 0, nesterov false, weightDecay 0).
 *
 * @throws `ConfigError` (`@attnlab/core`) for an unknown kind or key (with a did-you-mean), an
 *   out-of-range value, or Nesterov without momentum
 * @category Training
 */
export function resolveOptimizerOptions<O extends OptimizerOptions>(
  options: O,
): Extract<ResolvedOptimizerOptions, { readonly kind: O['kind'] }> {
  const { kind } = parseConfig(OPTIMIZER_KIND, options, 'optimizer')
  const resolved = parseConfig(OPTIMIZER_SCHEMAS[kind], options, `${kind} optimizer`)
  if (resolved.kind === 'sgd' && resolved.nesterov && (resolved.momentum === 0 || resolved.dampening !== 0)) {
    throw new ConfigError('nesterov', 'Nesterov momentum needs momentum > 0 and dampening 0')
  }
  return resolved as Extract<ResolvedOptimizerOptions, { readonly kind: O['kind'] }>
}

/** Optimizer choice. @category Training */
export type OptimizerOptions = AdamWOptions | SgdOptions

/**
 * A serialisable optimizer state: per-parameter slot tensors (named `<slot>.<parameter>`) and
 * scalars.
 *
 * @category Training
 */
export interface OptimizerState {
  /** `'adamw'` or `'sgd'`. */
  readonly kind: 'adamw' | 'sgd'
  /** Steps taken (AdamW bias correction uses it). */
  readonly step: number
  /** Resolved hyperparameters (for checks on resume). */
  readonly hyperparameters: Readonly<Record<string, number | boolean>>
  /** Slot values by `<slot>.<parameter>` (e.g. `exp_avg.blocks.0.attn.W_Q`). */
  readonly slots: ReadonlyMap<string, { shape: number[]; data: Float32Array }>
}

/**
 * An optimizer over named variables. `step(grads, lr)` applies one update.
 *
 * @category Training
 */
export interface Optimizer {
  /** `'adamw'` or `'sgd'`. */
  readonly kind: 'adamw' | 'sgd'
  /** Steps taken so far. */
  readonly stepCount: number
  /**
   * Applies one update.
   *
   * @param grads - gradient per parameter name (same shapes as the variables)
   * @param learningRate - this step's learning rate
   */
  step(grads: ReadonlyMap<string, tf.Tensor> | Readonly<Record<string, tf.Tensor>>, learningRate: number): void
  /** Copies the state out (moments, step). */
  getState(): Promise<OptimizerState>
  /**
   * Restores a state saved by {@link Optimizer.getState}.
   *
   * @throws `InvalidCheckpointError` (`@attnlab/core`) naming the slot or field that does not fit
   */
  setState(state: OptimizerState): void
  /** Frees the slot variables. */
  dispose(): void
}

function entriesOf(grads: ReadonlyMap<string, tf.Tensor> | Readonly<Record<string, tf.Tensor>>): [string, tf.Tensor][] {
  return grads instanceof Map ? [...grads.entries()] : Object.entries(grads)
}

/** Shared slot bookkeeping. */
abstract class SlotOptimizer implements Optimizer {
  abstract readonly kind: 'adamw' | 'sgd'
  protected readonly slots = new Map<string, tf.Variable>()
  protected steps = 0

  constructor(
    protected readonly variables: ReadonlyMap<string, tf.Variable>,
    protected readonly decayed: (name: string, variable: tf.Variable) => boolean,
  ) {}

  get stepCount(): number {
    return this.steps
  }

  protected abstract readonly slotNames: readonly string[]
  protected abstract hyperparameters(): Record<string, number | boolean>
  abstract step(grads: ReadonlyMap<string, tf.Tensor> | Readonly<Record<string, tf.Tensor>>, learningRate: number): void

  protected slot(slotName: string, name: string, variable: tf.Variable): tf.Variable {
    const key = `${slotName}.${name}`
    let slot = this.slots.get(key)
    if (slot === undefined) {
      slot = tf.tidy(() => tf.variable(tf.zerosLike(variable), false)) // sole owner of its memory
      this.slots.set(key, slot)
    }
    return slot
  }

  protected variable(name: string, grad: tf.Tensor): tf.Variable {
    const variable = this.variables.get(name)
    if (variable === undefined) throw new InvalidArgumentError(`gradient for unknown parameter '${name}'`, { name })
    if (grad.shape.length !== variable.shape.length || grad.shape.some((d, i) => d !== variable.shape[i])) {
      throw new InvalidArgumentError(
        `gradient of '${name}' has shape [${grad.shape}] but the parameter has [${variable.shape}]`,
        { name },
      )
    }
    return variable
  }

  async getState(): Promise<OptimizerState> {
    const slots = new Map<string, { shape: number[]; data: Float32Array }>()
    // A copy: on cpu `data()` hands back the slot's own buffer, which the next in-place update overwrites.
    for (const [key, slot] of this.slots)
      slots.set(key, { shape: [...slot.shape], data: ((await slot.data()) as Float32Array).slice() })
    return { kind: this.kind, step: this.steps, hyperparameters: this.hyperparameters(), slots }
  }

  setState(state: OptimizerState): void {
    if (state.kind !== this.kind) {
      throw new InvalidCheckpointError(`optimizer state is for '${state.kind}' but this optimizer is '${this.kind}'`, {
        field: 'optimizer.kind',
      })
    }
    if (!Number.isSafeInteger(state.step) || state.step < 0) {
      throw new InvalidCheckpointError(`optimizer step ${String(state.step)} is not a non-negative integer`, {
        field: 'optimizer.step',
      })
    }
    // Validate everything before changing anything.
    for (const [key, value] of state.slots) {
      const dot = key.indexOf('.')
      const slotName = key.slice(0, dot)
      const name = key.slice(dot + 1)
      const variable = this.variables.get(name)
      if (dot < 0 || !this.slotNames.includes(slotName) || variable === undefined) {
        throw new InvalidCheckpointError(
          `optimizer slot '${key}' does not belong to this model/optimizer (slots: ${this.slotNames.join(', ')})`,
          { field: key },
        )
      }
      if (
        value.shape.length !== variable.shape.length ||
        value.shape.some((d, i) => d !== variable.shape[i]) ||
        value.data.length !== variable.size
      ) {
        throw new InvalidCheckpointError(
          `optimizer slot '${key}' has shape [${value.shape}] but parameter '${name}' has [${variable.shape}]`,
          { field: key },
        )
      }
    }
    for (const slot of this.slots.values()) slot.dispose()
    this.slots.clear()
    for (const [key, value] of state.slots)
      this.slots.set(
        key,
        // A copy: on cpu a tensor keeps the array it is made from, which the in-place updates overwrite.
        tf.tidy(() => tf.variable(tf.tensor(value.data.slice(), value.shape, 'float32'), false)),
      )
    this.steps = state.step
  }

  dispose(): void {
    for (const slot of this.slots.values()) slot.dispose()
    this.slots.clear()
  }
}

class AdamW extends SlotOptimizer {
  readonly kind = 'adamw' as const
  protected readonly slotNames = ['exp_avg', 'exp_avg_sq'] as const
  private readonly beta1: number
  private readonly beta2: number
  private readonly epsilon: number
  private readonly weightDecay: number

  constructor(
    variables: ReadonlyMap<string, tf.Variable>,
    options: Extract<ResolvedOptimizerOptions, { readonly kind: 'adamw' }>,
    decayed: (name: string, variable: tf.Variable) => boolean,
  ) {
    super(variables, decayed)
    this.beta1 = options.beta1
    this.beta2 = options.beta2
    this.epsilon = options.epsilon
    this.weightDecay = options.weightDecay
  }

  protected hyperparameters(): Record<string, number> {
    return { beta1: this.beta1, beta2: this.beta2, epsilon: this.epsilon, weightDecay: this.weightDecay }
  }

  step(grads: ReadonlyMap<string, tf.Tensor> | Readonly<Record<string, tf.Tensor>>, learningRate: number): void {
    this.steps += 1
    const step = this.steps
    for (const [name, grad] of entriesOf(grads)) {
      const variable = this.variable(name, grad)
      const m = this.slot('exp_avg', name, variable)
      const v = this.slot('exp_avg_sq', name, variable)
      // PyTorch's order: theta <- theta (1 - lr lambda); m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2;
      // theta <- theta - lr m_hat / (sqrt(v_hat) + eps). In place in one pass with attnlab kernels.
      adamwUpdate(variable, grad, m, v, {
        lr: learningRate,
        beta1: this.beta1,
        beta2: this.beta2,
        eps: this.epsilon,
        weightDecay: this.weightDecay > 0 && this.decayed(name, variable) ? this.weightDecay : 0,
        step,
      })
    }
  }
}

class Sgd extends SlotOptimizer {
  readonly kind = 'sgd' as const
  protected readonly slotNames = ['momentum_buffer'] as const
  private readonly momentum: number
  private readonly dampening: number
  private readonly nesterov: boolean
  private readonly weightDecay: number

  constructor(
    variables: ReadonlyMap<string, tf.Variable>,
    options: Extract<ResolvedOptimizerOptions, { readonly kind: 'sgd' }>,
    decayed: (name: string, variable: tf.Variable) => boolean,
  ) {
    super(variables, decayed)
    this.momentum = options.momentum
    this.dampening = options.dampening
    this.nesterov = options.nesterov
    this.weightDecay = options.weightDecay
  }

  protected hyperparameters(): Record<string, number | boolean> {
    return {
      momentum: this.momentum,
      dampening: this.dampening,
      nesterov: this.nesterov,
      weightDecay: this.weightDecay,
    }
  }

  step(grads: ReadonlyMap<string, tf.Tensor> | Readonly<Record<string, tf.Tensor>>, learningRate: number): void {
    this.steps += 1
    tf.tidy(() => {
      for (const [name, rawGrad] of entriesOf(grads)) {
        const variable = this.variable(name, rawGrad)
        // d_p = g (+ lambda theta)
        let direction =
          this.weightDecay > 0 && this.decayed(name, variable)
            ? tf.add(rawGrad, tf.mul(variable, this.weightDecay))
            : rawGrad
        if (this.momentum > 0) {
          const key = `momentum_buffer.${name}`
          const buffer = this.slots.get(key)
          let newBuffer: tf.Tensor
          if (buffer === undefined) {
            newBuffer = direction // first step: buf = d_p
            this.slots.set(key, tf.variable(tf.clone(direction), false))
          } else {
            // buf = mu buf + (1 - dampening) d_p
            newBuffer = tf.add(tf.mul(buffer, this.momentum), tf.mul(direction, 1 - this.dampening))
            buffer.assign(newBuffer)
          }
          direction = this.nesterov ? tf.add(direction, tf.mul(newBuffer, this.momentum)) : newBuffer
        }
        variable.assign(tf.sub(variable, tf.mul(direction, learningRate))) // theta - lr d_p
      }
    })
  }
}

/**
 * The default weight-decay filter: parameters of rank >= 2 (weight matrices) decay; biases and
 * norm weights do not (nanoGPT's grouping). The minimal model has only matrices.
 *
 * @category Training
 */
export function decayMatrices(_name: string, variable: tf.Variable): boolean {
  return variable.rank >= 2
}

/**
 * Creates an optimizer over named variables.
 *
 * @param variables - the parameters by name (e.g. `model.getWeights()`)
 * @param options - AdamW or SGD settings
 * @param decayed - which parameters weight decay applies to (default {@link decayMatrices})
 * @throws `ConfigError` (`@attnlab/core`) for out-of-range hyperparameters (see {@link resolveOptimizerOptions})
 * @example
 * ```ts
 * const optimizer = createOptimizer(model.getWeights(), { kind: 'adamw', weightDecay: 0.01 })
 * optimizer.step(grads, 0.08)
 * ```
 * @category Training
 */
export function createOptimizer(
  variables: ReadonlyMap<string, tf.Variable>,
  options: OptimizerOptions,
  decayed: (name: string, variable: tf.Variable) => boolean = decayMatrices,
): Optimizer {
  const resolved = resolveOptimizerOptions(options)
  return resolved.kind === 'adamw'
    ? new AdamW(variables, resolved, decayed)
    : new Sgd(variables, resolved as Extract<ResolvedOptimizerOptions, { readonly kind: 'sgd' }>, decayed)
}

/**
 * Most tensors per `tf.addN`: with 8 or more, tfjs-webgpu 4.22 builds a pipeline over more storage buffers
 * than an 8-buffer adapter (Chromium's SwiftShader) allows and silently returns stale values (seen: the
 * sum of the first 7).
 */
const ADD_N_INPUTS = 7

/** `tensors[0] + tensors[1] + ...` in that order (as one `tf.addN`), at most {@link ADD_N_INPUTS} per `addN`. */
function sumInOrder(tensors: readonly tf.Tensor[]): tf.Tensor {
  let total = tensors[0] ?? tf.scalar(0)
  for (let i = 1; i < tensors.length; i += ADD_N_INPUTS - 1)
    total = tf.addN([total, ...tensors.slice(i, i + ADD_N_INPUTS - 1)])
  return total
}

/**
 * Global L2 norm of a set of gradients and, if it exceeds `maxNorm`, the gradients scaled by
 * `maxNorm / (norm + 1e-6)` (as `torch.nn.utils.clip_grad_norm_`). Computed without reading
 * values back.
 *
 * @param grads - gradients by parameter name
 * @param maxNorm - clipping threshold (`Infinity` disables clipping)
 * @returns the (possibly scaled) gradients (new tensors) and the pre-clipping norm as a scalar tensor
 * @category Training
 */
export function clipByGlobalNorm(
  grads: ReadonlyMap<string, tf.Tensor>,
  maxNorm: number,
): { grads: Map<string, tf.Tensor>; norm: tf.Scalar } {
  if (!(maxNorm > 0))
    throw new ConfigError('gradClip', `${maxNorm} must be > 0 (Infinity disables clipping)`, { value: maxNorm })
  const out = new Map<string, tf.Tensor>()
  let norm: tf.Scalar | undefined
  tf.tidy(() => {
    const squares = [...grads.values()].map((g) => tf.sum(tf.square(g)))
    const total = tf.sqrt(sumInOrder(squares)) as tf.Scalar // sqrt(sum_i ||g_i||^2)
    norm = tf.keep(total)
    const coefficient = Number.isFinite(maxNorm) ? tf.minimum(tf.div(maxNorm, tf.add(total, 1e-6)), 1) : null
    for (const [name, g] of grads) out.set(name, tf.keep(coefficient === null ? tf.clone(g) : tf.mul(g, coefficient)))
  })
  return { grads: out, norm: norm as tf.Scalar }
}

/**
 * A mixture of `@attnlab/markov` tasks, each sequence marked by a prefix token naming its task:
 * the training data of the knockout validation's `gpt` model (a small gpt trained on a mixture of
 * our tasks, each task marked by a prefix token), where the heads each task needs are found by
 * knockouts and compared across methods.
 *
 * Layout of a sequence of component t: `[prefix_t, x_0, x_1, ...]` where `x` is a sequence of
 * the component task, padded at the end (loss mask 0) to the longest component. Token ids:
 * component tokens keep their ids (`vocabulary: 'shared'`) or are shifted into a private range
 * per component (`'disjoint'`); the K prefix tokens come after all component tokens.
 *
 * @module
 */
import { configSchema, enumField, parseConfig, type z } from '@attnlab/core/schema'
import {
  checkRange,
  ConfigError,
  InvalidArgumentError,
  type Rng,
  type Task,
  type TaskFamily,
  type TaskRegistry,
  taskRegistry,
  type TokenBatch,
} from '@attnlab/core'
import { registerMarkovTasks } from '@attnlab/markov'

/**
 * One task of a mixture.
 *
 * @category Mixture
 */
export interface MixtureComponent {
  /** A short name (used for capability names), unique within the mixture. */
  readonly name: string
  /** The task. */
  readonly task: Task
  /** Relative sampling weight (default 1). */
  readonly weight?: number
}

/**
 * Options of {@link MixtureTask}.
 *
 * @category Mixture
 */
export type MixtureOptions = Readonly<z.input<typeof mixtureOptionsSchema>>

/**
 * The schema of {@link MixtureOptions}, declared once.
 *
 * @category Mixture
 */
export const mixtureOptionsSchema = configSchema({
  /** `shared` (default): component tokens keep their ids; `disjoint`: each component gets its own id range. */
  vocabulary: enumField('token ids: shared by the components, or a disjoint range each', [
    'shared',
    'disjoint',
  ] as const).default('shared'),
})

/**
 * A task that draws each sequence from one of its components (by weight) and marks it with the
 * component's prefix token. Implements the `@attnlab/core` {@link Task} contract, so the
 * transformer's trainer trains on it directly; its `kind` is `'mixture'`.
 *
 * @example
 * ```ts
 * const mixture = new MixtureTask([
 *   { name: 'markov', task: createTask({ kind: 'sparse-markov', vocabSize: 8, spans: [1, 1] }) },
 *   { name: 'icl', task: createTask({ kind: 'icl-markov', vocabSize: 3, seqLength: 24 }) },
 * ])
 * const batch = mixture.sample(64, Rng.fromSeed(0)) // [64, 1 + 24]
 * ```
 * @category Mixture
 */
export class MixtureTask implements Task {
  /** `'mixture'` (see the class comment). */
  readonly kind = 'mixture' as const
  /** Component token ids plus one prefix token per component. */
  readonly vocabSize: number
  /** 1 (prefix) + the longest component's sequence length. */
  readonly seqLength: number
  /** The components, in order (prefix token of component t is `prefixBase + t`). */
  readonly components: readonly MixtureComponent[]
  /** Id of the first prefix token. */
  readonly prefixBase: number
  /** The id offset of each component's tokens (all 0 for a shared vocabulary). */
  readonly tokenOffsets: readonly number[]
  /** `shared` or `disjoint`. */
  readonly vocabulary: 'shared' | 'disjoint'
  private readonly cumulative: Float64Array

  /**
   * @param components - at least one task (unique names, positive weights)
   * @param options - vocabulary layout
   * @throws `ConfigError` (`@attnlab/core`) for no components, duplicate or empty names, a non-positive
   *   weight, or a component that is not a task
   */
  constructor(components: readonly MixtureComponent[], options: MixtureOptions = {}) {
    const { vocabulary } = parseConfig(mixtureOptionsSchema, options, 'MixtureTask')
    if (!Array.isArray(components) || components.length === 0)
      throw new ConfigError('components', 'a mixture needs at least one task')
    const names = new Set<string>()
    for (const [i, c] of components.entries()) {
      if (typeof c.name !== 'string' || c.name.length === 0)
        throw new ConfigError(`components[${i}].name`, 'expected a non-empty name')
      if (names.has(c.name)) throw new ConfigError(`components[${i}].name`, `'${c.name}' is used twice`)
      names.add(c.name)
      if (typeof c.task?.sample !== 'function')
        throw new ConfigError(`components[${i}].task`, 'expected a task with sample()')
      const weight = c.weight ?? 1
      checkRange(`components[${i}].weight`, weight as number, { min: 0, minExclusive: true })
    }
    this.vocabulary = vocabulary
    this.components = Object.freeze(components.map((c) => Object.freeze({ ...c, weight: c.weight ?? 1 })))
    const offsets: number[] = []
    let next = 0
    for (const c of components) {
      offsets.push(vocabulary === 'disjoint' ? next : 0)
      next = vocabulary === 'disjoint' ? next + c.task.vocabSize : Math.max(next, c.task.vocabSize)
    }
    this.tokenOffsets = Object.freeze(offsets)
    this.prefixBase = next
    this.vocabSize = next + components.length
    this.seqLength = 1 + Math.max(...components.map((c) => c.task.seqLength))
    this.cumulative = new Float64Array(components.length)
    let total = 0
    components.forEach((c, i) => {
      total += c.weight ?? 1
      this.cumulative[i] = total
    })
    for (let i = 0; i < components.length; i++) this.cumulative[i] = (this.cumulative[i] as number) / total
  }

  /**
   * The prefix token of component `index` (or name). @throws `ConfigError` (`@attnlab/core`) for an unknown component
   */
  prefixToken(component: number | string): number {
    return this.prefixBase + this.indexOf(component)
  }

  /**
   * The index of a component given by index or name. @throws `ConfigError` (`@attnlab/core`) for an unknown component
   */
  indexOf(component: number | string): number {
    const index = typeof component === 'number' ? component : this.components.findIndex((c) => c.name === component)
    if (!Number.isSafeInteger(index) || index < 0 || index >= this.components.length) {
      throw new ConfigError(
        'component',
        `'${String(component)}' is not a component; expected one of ${this.components.map((c) => c.name).join(', ')}`,
      )
    }
    return index
  }

  /**
   * Draws `batchSize` sequences: the component of each sequence by weight, then the component's
   * sequences (one `sample` call per component), in a deterministic order.
   *
   * @param batchSize - number of sequences (>= 1)
   * @param rng - the sampling stream
   * @returns tokens and loss mask, `[batchSize, seqLength]`
   * @throws `ConfigError` (`@attnlab/core`) for a bad batch size
   */
  sample(batchSize: number, rng: Rng): TokenBatch {
    checkRange('batchSize', batchSize, { min: 1, integer: true })
    const choice = new Int32Array(batchSize)
    const counts = new Array<number>(this.components.length).fill(0)
    for (let b = 0; b < batchSize; b++) {
      const u = rng.float()
      let t = 0
      while (t < this.components.length - 1 && u >= (this.cumulative[t] as number)) t++
      choice[b] = t
      counts[t] = (counts[t] as number) + 1
    }
    return this.assemble(choice, counts, rng)
  }

  /**
   * A task that draws only component `component` (still with its prefix and this mixture's
   * layout): the evaluation data of that component's capability.
   *
   * @param component - index or name
   * @throws `ConfigError` (`@attnlab/core`) for an unknown component
   */
  only(component: number | string): Task {
    const t = this.indexOf(component)
    const name = (this.components[t] as MixtureComponent).name
    return {
      kind: this.kind,
      vocabSize: this.vocabSize,
      seqLength: this.seqLength,
      sample: (batchSize: number, rng: Rng): TokenBatch => {
        checkRange('batchSize', batchSize, { min: 1, integer: true })
        const counts = new Array<number>(this.components.length).fill(0)
        counts[t] = batchSize
        return this.assemble(new Int32Array(batchSize).fill(t), counts, rng)
      },
      describe: () => ({ ...this.describe(), only: name }),
    }
  }

  private assemble(choice: Int32Array, counts: readonly number[], rng: Rng): TokenBatch {
    const L = this.seqLength
    const batchSize = choice.length
    const tokens = new Int32Array(batchSize * L)
    const lossMask = new Uint8Array(batchSize * L)
    const batches = this.components.map((c, t) =>
      (counts[t] as number) > 0 ? c.task.sample(counts[t] as number, rng) : null,
    )
    const used = new Array<number>(this.components.length).fill(0)
    for (let b = 0; b < batchSize; b++) {
      const t = choice[b] as number
      const batch = batches[t] as TokenBatch
      const i = used[t] as number
      used[t] = i + 1
      const offset = this.tokenOffsets[t] as number
      const row = b * L
      tokens[row] = this.prefixBase + t
      for (let p = 0; p < batch.seqLength; p++) {
        const token = batch.tokens[i * batch.seqLength + p] as number
        if (!(token >= 0 && token < (this.components[t] as MixtureComponent).task.vocabSize)) {
          throw new InvalidArgumentError(
            `component '${(this.components[t] as MixtureComponent).name}' produced token ${token} outside its ` +
              'vocabulary',
          )
        }
        tokens[row + 1 + p] = token + offset
        lossMask[row + 1 + p] = batch.lossMask[i * batch.seqLength + p] as number
      }
    }
    return { tokens, lossMask, batchSize, seqLength: L }
  }

  /**
   * The mixture as plain JSON: `{ kind: 'mixture', vocabulary, components: [{ name, weight, task:
   * task.describe() }] }` (rebuild it with {@link taskFromDescription}).
   */
  describe(): Readonly<Record<string, unknown>> {
    return {
      kind: 'mixture',
      vocabulary: this.vocabulary,
      components: this.components.map((c) => ({ name: c.name, weight: c.weight ?? 1, task: c.task.describe() })),
    }
  }
}

/** A description's components as {@link MixtureComponent}s, each task built through `registry`. */
function componentsOf(record: Readonly<Record<string, unknown>>, registry: TaskRegistry): MixtureComponent[] {
  const components = record.components
  if (!Array.isArray(components))
    throw new ConfigError('task.components', 'a mixture description needs a components array')
  return components.map((c: unknown, i) => {
    const entry = (c ?? {}) as Record<string, unknown>
    return {
      name: String(entry.name ?? `component-${i}`),
      task: descriptionTask(entry.task, registry),
      weight: typeof entry.weight === 'number' ? entry.weight : 1,
    }
  })
}

/** Checks that `description` is an object, then builds it through `registry`. */
function descriptionTask(description: unknown, registry: TaskRegistry): Task {
  if (typeof description !== 'object' || description === null || Array.isArray(description)) {
    throw new ConfigError('task', `expected a task description object, got ${JSON.stringify(description)}`)
  }
  return registry.create(description as Readonly<Record<string, unknown>>)
}

/**
 * The `'mixture'` task family: builds a {@link MixtureTask} from `{ components: [{ name, weight,
 * task }], vocabulary }`, each component's task through the same registry (so components may be
 * of any registered kind, mixtures included).
 *
 * @category Mixture
 */
export const mixtureTaskFamily: TaskFamily<MixtureTask> = Object.freeze({
  kind: 'mixture',
  create: (config: Readonly<Record<string, unknown>>, registry: TaskRegistry): MixtureTask =>
    new MixtureTask(componentsOf(config, registry), config.vocabulary === 'disjoint' ? { vocabulary: 'disjoint' } : {}),
})

/**
 * Registers the `'mixture'` family, and `@attnlab/markov`'s four families its components use
 * (idempotent). An explicit call rather than an import side effect, so a bundler cannot drop it;
 * {@link taskFromDescription} calls it.
 *
 * @param registry - where to register (default: `@attnlab/core`'s shared `taskRegistry`)
 * @returns `registry`
 * @throws `ConfigError` (`@attnlab/core`) if another family already holds one of these kinds
 * @category Mixture
 */
export function registerMixtureTask(registry: TaskRegistry = taskRegistry): TaskRegistry {
  registerMarkovTasks(registry)
  return registry.register(mixtureTaskFamily)
}

/**
 * Rebuilds a task from its `describe()` output (as a checkpoint stores it) through the task
 * registry, after {@link registerMixtureTask}: the markov kinds, `'mixture'` (recursively) and any
 * family registered by the caller.
 *
 * @param description - a task description (JSON)
 * @param registry - the registry to resolve through (default: `@attnlab/core`'s shared `taskRegistry`)
 * @returns the task
 * @throws `UnknownTaskKindError` (`@attnlab/core`, a `ConfigError`) for an unregistered kind;
 *   `ConfigError` for a description that is not an object or invalid parameters
 * @category Mixture
 */
export function taskFromDescription(description: unknown, registry: TaskRegistry = taskRegistry): Task {
  return descriptionTask(description, registerMixtureTask(registry))
}

/**
 * Task families by name: each package that implements tasks exports its {@link TaskFamily}
 * objects and a function that registers them (`@attnlab/markov`'s `registerMarkovTasks`,
 * `@attnlab/knockout`'s `registerMixtureTask`); a {@link TaskRegistry} rebuilds any registered
 * task from its {@link TaskDescription}. Registration is an explicit call, never an import side
 * effect (the packages are `sideEffects: false`, so a bundler may drop a module imported only for
 * its effects).
 *
 * @module
 */
import { ConfigError } from './errors.ts'
import { closest } from './options.ts'
import type { Task, TaskDescription } from './task.ts'

/**
 * One task family: its `kind` and the factory that builds a task from a description's
 * configuration.
 *
 * @example
 * ```ts
 * const copyFamily: TaskFamily = { kind: 'copy', create: (config) => new CopyTask(config) }
 * taskRegistry.register(copyFamily)
 * ```
 * @category Tasks
 */
export interface TaskFamily<T extends Task = Task> {
  /** The `kind` of the family's tasks and descriptions (unique within a registry). */
  readonly kind: string
  /**
   * Builds a task from the description without its `kind`.
   *
   * @param config - the configuration (JSON); the factory validates it
   * @param registry - the registry resolving this description, for families whose configuration
   *   holds other task descriptions (a mixture's components)
   * @throws `ConfigError` for invalid parameters (naming the parameter)
   */
  create(config: Readonly<Record<string, unknown>>, registry: TaskRegistry): T
}

/**
 * A description's `kind` is not registered. A {@link ConfigError} (code `INVALID_CONFIG`,
 * parameter `kind`) whose message lists the registered kinds and the closest one.
 *
 * @category Tasks
 */
export class UnknownTaskKindError extends ConfigError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'UnknownTaskKindError'
  /** The kind asked for. */
  readonly kind: unknown
  /** The kinds registered when it was asked for. */
  readonly registered: readonly string[]
  constructor(kind: unknown, registered: readonly string[]) {
    const suggestion = typeof kind === 'string' ? closest(kind, registered) : undefined
    super(
      'kind',
      `got ${typeof kind === 'string' ? `'${kind}'` : (JSON.stringify(kind) ?? String(kind))}` +
        `${suggestion === undefined ? '' : ` (did you mean '${suggestion}'?)`}; expected one of ` +
        `${registered.length > 0 ? registered.join(', ') : '(no task family registered)'}`,
      { kind, registered: [...registered] },
    )
    this.kind = kind
    this.registered = Object.freeze([...registered])
  }
}

/**
 * Task families by kind; {@link TaskRegistry.create} rebuilds a task from its description.
 * {@link taskRegistry} is the shared instance the packages register into; a program may also
 * build its own.
 *
 * @example
 * ```ts
 * const registry = new TaskRegistry([copyFamily])
 * const task = registry.create({ kind: 'copy', length: 8 })
 * const again = registry.create(JSON.parse(JSON.stringify(task.describe())))
 * ```
 * @category Tasks
 */
export class TaskRegistry {
  private readonly families = new Map<string, TaskFamily>()

  /** @param families - families to register at once (see {@link TaskRegistry.register}) */
  constructor(families: readonly TaskFamily[] = []) {
    for (const family of families) this.register(family)
  }

  /**
   * Registers a family. Registering the same family object again is a no-op, so packages can
   * make sure their families are registered before each use.
   *
   * @returns this registry
   * @throws `ConfigError` (parameter `kind`) for an empty kind, or a kind already registered
   *   by a different family
   */
  register(family: TaskFamily): this {
    const kind = family?.kind
    if (typeof kind !== 'string' || kind.length === 0)
      throw new ConfigError('kind', `a task family needs a non-empty kind, got ${JSON.stringify(kind)}`)
    if (typeof family.create !== 'function')
      throw new ConfigError('kind', `task family '${kind}' has no create function`)
    const existing = this.families.get(kind)
    if (existing === family) return this
    if (existing !== undefined) throw new ConfigError('kind', `'${kind}' is already registered by another family`)
    this.families.set(kind, family)
    return this
  }

  /** Whether `kind` is registered. */
  has(kind: string): boolean {
    return this.families.has(kind)
  }

  /** The registered kinds, in registration order. */
  kinds(): readonly string[] {
    return [...this.families.keys()]
  }

  /**
   * Builds a task from its kind (default configuration) or its description.
   *
   * @param kindOrDescription - a registered kind, or `{ kind, ...configuration }` (JSON, e.g. a
   *   task's `describe()` output as a checkpoint stores it)
   * @returns the task
   * @throws {@link UnknownTaskKindError} for an unregistered kind; `ConfigError` (parameter
   *   `kind`) for a value that is neither a kind nor a description; the family's `ConfigError`
   *   for invalid parameters
   */
  create(kindOrDescription: string | TaskDescription | Readonly<Record<string, unknown>>): Task {
    const input: unknown = kindOrDescription
    if (typeof input !== 'string' && (typeof input !== 'object' || input === null || Array.isArray(input))) {
      throw new ConfigError(
        'kind',
        `got ${JSON.stringify(input) ?? String(input)}; expected a task kind (${this.kinds().join(', ')}) ` +
          'or a { kind, ... } task description object',
      )
    }
    const { kind, ...config } = typeof input === 'string' ? { kind: input } : (input as Record<string, unknown>)
    const family = typeof kind === 'string' ? this.families.get(kind) : undefined
    if (family === undefined) throw new UnknownTaskKindError(kind, this.kinds())
    return family.create(config, this)
  }
}

/**
 * The shared registry: `@attnlab/markov` registers its four families into it
 * (`registerMarkovTasks`), `@attnlab/knockout` its `'mixture'` (`registerMixtureTask`). Empty
 * until a package's register function is called.
 *
 * @category Tasks
 */
export const taskRegistry: TaskRegistry = /* @__PURE__ */ new TaskRegistry()

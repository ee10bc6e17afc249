/**
 * Build any task of this package from its kind or from a `describe()` output, through the task
 * registry of `@attnlab/core` (this package's families are registered by
 * {@link registerMarkovTasks}, which {@link createTask} calls).
 *
 * @module
 */
import { ConfigError, type TaskFamily, type TaskRegistry, taskRegistry, UnknownTaskKindError } from '@attnlab/core'
import { CellularAutomatonTask, cellularAutomatonSchema, type CellularAutomatonConfig } from './cellular-automaton.ts'
import { IclMarkovTask, iclMarkovSchema, type IclMarkovConfig } from './icl-markov.ts'
import { LinearMapTask, linearMapSchema, type LinearMapConfig } from './linear-map.ts'
import { SparseMarkovTask, sparseMarkovSchema, type SparseMarkovConfig } from './sparse-markov.ts'
import type { TaskKind } from './task.ts'
import { show } from './validate.ts'
import { CweTokensTask, cweTokensSchema, type CweTokensConfig } from './cwe-tokens.ts'
import { MultihopTokensTask, multihopTokensSchema, type MultihopTokensConfig } from './multihop-tokens.ts'
import { NiahTokensTask, niahTokensSchema, type NiahTokensConfig } from './niah-tokens.ts'
import { VtTokensTask, vtTokensSchema, type VtTokensConfig } from './vt-tokens.ts'
import { TextCharsTask, textCharsSchema, type TextCharsConfig } from './text-corpus.ts'

/**
 * The description of a task of this package: `{ kind, ...configuration overrides }`, e.g. the
 * output of a task's `describe()` or `{ kind: 'sparse-markov', spans: [1, 1, 1] }` (the typed
 * form of `@attnlab/core`'s open `TaskDescription`).
 *
 * @category Tasks
 */
export type MarkovTaskDescription =
  | ({ readonly kind: 'sparse-markov' } & Partial<SparseMarkovConfig>)
  | ({ readonly kind: 'linear-map' } & Partial<LinearMapConfig>)
  | ({ readonly kind: 'cellular-automaton' } & Partial<CellularAutomatonConfig>)
  | ({ readonly kind: 'icl-markov' } & Partial<IclMarkovConfig>)
  | ({ readonly kind: 'niah-tokens' } & Partial<NiahTokensConfig>)
  | ({ readonly kind: 'vt-tokens' } & Partial<VtTokensConfig>)
  | ({ readonly kind: 'cwe-tokens' } & Partial<CweTokensConfig>)
  | ({ readonly kind: 'multihop-tokens' } & Partial<MultihopTokensConfig>)
  | ({ readonly kind: 'text-chars' } & Partial<TextCharsConfig>)

/**
 * The former name of {@link MarkovTaskDescription}, kept for compatibility.
 *
 * @deprecated use {@link MarkovTaskDescription} (or `@attnlab/core`'s `TaskDescription` for any task)
 * @category Tasks
 */
export type TaskDescription = MarkovTaskDescription

/**
 * Any task this package implements.
 *
 * @category Tasks
 */
export type AnyTask =
  | SparseMarkovTask
  | LinearMapTask
  | CellularAutomatonTask
  | IclMarkovTask
  | NiahTokensTask
  | VtTokensTask
  | CweTokensTask
  | MultihopTokensTask
  | TextCharsTask

/**
 * The task kinds {@link createTask} accepts.
 *
 * @category Tasks
 */
export const TASK_KINDS: readonly TaskKind[] = Object.freeze([
  'sparse-markov',
  'linear-map',
  'cellular-automaton',
  'icl-markov',
  'niah-tokens',
  'vt-tokens',
  'cwe-tokens',
  'multihop-tokens',
  'text-chars',
])

/**
 * The configuration schema of each task kind (`@attnlab/core/schema`): every parameter's meaning,
 * range and default, declared once; the CLI derives its task flags and their help from these.
 *
 * @example
 * ```ts
 * fieldInfo(TASK_SCHEMAS['linear-map'].shape.stateSize) // { kind: 'integer', defaultValue: 16, ... }
 * ```
 * @category Tasks
 */
export const TASK_SCHEMAS = Object.freeze({
  'sparse-markov': sparseMarkovSchema,
  'linear-map': linearMapSchema,
  'cellular-automaton': cellularAutomatonSchema,
  'icl-markov': iclMarkovSchema,
  'niah-tokens': niahTokensSchema,
  'vt-tokens': vtTokensSchema,
  'cwe-tokens': cweTokensSchema,
  'multihop-tokens': multihopTokensSchema,
  'text-chars': textCharsSchema,
}) satisfies Readonly<Record<TaskKind, unknown>>

/**
 * This package's task families, one per {@link TaskKind}: each builds its task from a
 * description's configuration (validated by the task's constructor).
 *
 * @category Tasks
 */
export const MARKOV_TASK_FAMILIES: readonly TaskFamily<AnyTask>[] = Object.freeze([
  { kind: 'sparse-markov', create: (config) => new SparseMarkovTask(config as Partial<SparseMarkovConfig>) },
  { kind: 'linear-map', create: (config) => new LinearMapTask(config as Partial<LinearMapConfig>) },
  {
    kind: 'cellular-automaton',
    create: (config) => new CellularAutomatonTask(config as Partial<CellularAutomatonConfig>),
  },
  { kind: 'icl-markov', create: (config) => new IclMarkovTask(config as Partial<IclMarkovConfig>) },
  { kind: 'niah-tokens', create: (config) => new NiahTokensTask(config as Partial<NiahTokensConfig>) },
  { kind: 'vt-tokens', create: (config) => new VtTokensTask(config as Partial<VtTokensConfig>) },
  { kind: 'cwe-tokens', create: (config) => new CweTokensTask(config as Partial<CweTokensConfig>) },
  { kind: 'multihop-tokens', create: (config) => new MultihopTokensTask(config as Partial<MultihopTokensConfig>) },
  { kind: 'text-chars', create: (config) => new TextCharsTask(config as Partial<TextCharsConfig>) },
] satisfies TaskFamily<AnyTask>[])

/**
 * Registers this package's task families (the emergence, retrieval and text tasks; idempotent:
 * a family already registered is skipped). An explicit call rather than an import side effect, so a
 * bundler cannot drop it.
 *
 * @param registry - where to register (default: `@attnlab/core`'s shared `taskRegistry`)
 * @returns `registry`
 * @throws `ConfigError` (`@attnlab/core`) if another family already holds one of these kinds
 * @example
 * ```ts
 * const task = registerMarkovTasks().create({ kind: 'icl-markov', vocabSize: 3 })
 * ```
 * @category Tasks
 */
export function registerMarkovTasks(registry: TaskRegistry = taskRegistry): TaskRegistry {
  for (const family of MARKOV_TASK_FAMILIES) registry.register(family)
  return registry
}

/**
 * Creates a task from its kind (default configuration) or from a description; `createTask(task.describe())`
 * rebuilds an identical task (same teacher / matrix, same samples for the same rng).
 *
 * @param kindOrDescription - a {@link TaskKind}, or `{ kind, ...overrides }` (JSON)
 * @returns the task
 * @throws `UnknownTaskKindError` (`@attnlab/core`, a `ConfigError`) for a kind that is not one of
 *   {@link TASK_KINDS}; `ConfigError` for invalid parameters (naming the parameter)
 * @example
 * ```ts
 * const task = createTask({ kind: 'sparse-markov', vocabSize: 4, spans: [1, 1, 1] })
 * const again = createTask(JSON.parse(JSON.stringify(task.describe())))
 * ```
 * @category Tasks
 */
export function createTask(
  kindOrDescription: 'sparse-markov' | ({ readonly kind: 'sparse-markov' } & Partial<SparseMarkovConfig>),
): SparseMarkovTask
export function createTask(
  kindOrDescription: 'linear-map' | ({ readonly kind: 'linear-map' } & Partial<LinearMapConfig>),
): LinearMapTask
export function createTask(
  kindOrDescription:
    | 'cellular-automaton'
    | ({ readonly kind: 'cellular-automaton' } & Partial<CellularAutomatonConfig>),
): CellularAutomatonTask
export function createTask(
  kindOrDescription: 'icl-markov' | ({ readonly kind: 'icl-markov' } & Partial<IclMarkovConfig>),
): IclMarkovTask
export function createTask(
  kindOrDescription: 'niah-tokens' | ({ readonly kind: 'niah-tokens' } & Partial<NiahTokensConfig>),
): NiahTokensTask
export function createTask(
  kindOrDescription: TaskKind | MarkovTaskDescription | Readonly<Record<string, unknown>>,
): AnyTask
export function createTask(
  kindOrDescription: TaskKind | MarkovTaskDescription | Readonly<Record<string, unknown>>,
): AnyTask {
  const input: unknown = kindOrDescription
  if (typeof input !== 'string' && (typeof input !== 'object' || input === null || Array.isArray(input))) {
    throw new ConfigError(
      'kind',
      `got ${show(input)}; expected a task kind (${TASK_KINDS.join(', ')}) or a { kind, ... } description`,
    )
  }
  const kind = typeof input === 'string' ? input : (input as Record<string, unknown>).kind
  // Only this package's kinds: other families in the shared registry are not AnyTask.
  if (!TASK_KINDS.includes(kind as TaskKind)) throw new UnknownTaskKindError(kind, TASK_KINDS)
  return registerMarkovTasks().create(input as string | Readonly<Record<string, unknown>>) as AnyTask
}

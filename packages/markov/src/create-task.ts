/**
 * Build any task from its kind or from a `describe()` output.
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import { CellularAutomatonTask, type CellularAutomatonConfig } from './cellular-automaton.ts'
import { IclMarkovTask, type IclMarkovConfig } from './icl-markov.ts'
import { LinearMapTask, type LinearMapConfig } from './linear-map.ts'
import { SparseMarkovTask, type SparseMarkovConfig } from './sparse-markov.ts'
import type { TaskKind } from './task.ts'
import { show } from './validate.ts'

/**
 * A task description: `{ kind, ...configuration overrides }`, e.g. the output of a task's
 * `describe()` or `{ kind: 'sparse-markov', spans: [1, 1, 1] }`.
 *
 * @category Tasks
 */
export type TaskDescription =
  | ({ readonly kind: 'sparse-markov' } & Partial<SparseMarkovConfig>)
  | ({ readonly kind: 'linear-map' } & Partial<LinearMapConfig>)
  | ({ readonly kind: 'cellular-automaton' } & Partial<CellularAutomatonConfig>)
  | ({ readonly kind: 'icl-markov' } & Partial<IclMarkovConfig>)

/**
 * Any task this package implements.
 *
 * @category Tasks
 */
export type AnyTask = SparseMarkovTask | LinearMapTask | CellularAutomatonTask | IclMarkovTask

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
])

/**
 * Creates a task from its kind (default configuration) or from a description; `createTask(task.describe())`
 * rebuilds an identical task (same teacher / matrix, same samples for the same rng).
 *
 * @param kindOrDescription - a {@link TaskKind}, or `{ kind, ...overrides }` (JSON)
 * @returns the task
 * @throws `ConfigError` (`@attnlab/core`) for an unknown `kind` or invalid parameters (naming the parameter)
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
export function createTask(kindOrDescription: TaskKind | TaskDescription | Readonly<Record<string, unknown>>): AnyTask
export function createTask(kindOrDescription: TaskKind | TaskDescription | Readonly<Record<string, unknown>>): AnyTask {
  const description: Record<string, unknown> =
    typeof kindOrDescription === 'string'
      ? { kind: kindOrDescription }
      : typeof kindOrDescription === 'object' && kindOrDescription !== null
        ? { ...kindOrDescription }
        : {}
  const { kind, ...config } = description
  if (typeof kindOrDescription !== 'string' && (typeof kindOrDescription !== 'object' || kindOrDescription === null)) {
    throw new ConfigError(
      'kind',
      `got ${show(kindOrDescription)}; expected a task kind (${TASK_KINDS.join(', ')}) or a { kind, ... } description`,
    )
  }
  switch (kind) {
    case 'sparse-markov':
      return new SparseMarkovTask(config as Partial<SparseMarkovConfig>)
    case 'linear-map':
      return new LinearMapTask(config as Partial<LinearMapConfig>)
    case 'cellular-automaton':
      return new CellularAutomatonTask(config as Partial<CellularAutomatonConfig>)
    case 'icl-markov':
      return new IclMarkovTask(config as Partial<IclMarkovConfig>)
    default:
      throw new ConfigError('kind', `got ${show(kind)}; expected one of ${TASK_KINDS.join(', ')}`, { kind })
  }
}

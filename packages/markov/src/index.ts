/**
 * `@attnlab/markov`: data generators for the learning-dynamics experiments.
 *
 * @packageDocumentation
 */
export type { OffsetGroup, Task, TaskKind, TokenBatch } from './task.ts'
export { OracleTooLargeError } from './errors.ts'
export { randomOrthogonalMatrix } from './orthogonal.ts'
export {
  SPARSE_MARKOV_PRESETS,
  SparseMarkovTask,
  defaultSparseMarkovConfig,
  resolveSparseMarkovConfig,
  type SparseMarkovConfig,
  type SparseMarkovTeacher,
  type TeacherOptions,
} from './sparse-markov.ts'
export {
  DEFAULT_MAX_EXACT_STATES,
  restrictedContextEntropy,
  type ExactOracleOptions,
  type RestrictedContextEntropy,
} from './sparse-markov-exact.ts'

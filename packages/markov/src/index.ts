/**
 * `@attnlab/markov`: data generators for the learning-dynamics experiments.
 *
 * @packageDocumentation
 */
export type { OffsetGroup, Task, TaskKind, TokenBatch } from './task.ts'

/**
 * The task contract (`Task`, `TokenBatch`, `OffsetGroup`) lives in
 * `@attnlab/core`; this module re-exports it for the files of this package (and, through the
 * package entry, for compatibility) and names the task families this package implements.
 *
 * @module
 */
export type { OffsetGroup, Task, TokenBatch, TrueAttention, TrueAttentionMap } from '@attnlab/core'

/**
 * The task families this package implements (the kinds {@link createTask} builds). Other
 * packages add their own kinds (`@attnlab/knockout`'s `'mixture'`); a `Task`'s `kind` is any
 * string.
 *
 * @category Tasks
 */
export type TaskKind =
  | 'sparse-markov'
  | 'linear-map'
  | 'cellular-automaton'
  | 'icl-markov'
  | 'niah-tokens'
  | 'vt-tokens'
  | 'cwe-tokens'
  | 'multihop-tokens'
  | 'text-chars'

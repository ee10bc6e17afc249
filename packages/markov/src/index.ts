/**
 * `@attnlab/markov`: data generators for the learning-dynamics experiments, with the oracles a
 * loss curve is compared against.
 *
 * - {@link SparseMarkovTask}: the sparse high-order Markov chain of Yüksel et al. (arXiv
 *   2602.19143), with its truncated teachers ({@link SparseMarkovTask.teacherProbabilities}) and
 *   plateau oracles: exact ({@link restrictedContextEntropy}) and Monte-Carlo
 *   ({@link restrictedContextEntropyMonteCarlo}); {@link taskOracle} picks one and gives any task's loss floor.
 * - The emergence tasks of Baherwani et al. (arXiv 2606.25010): {@link LinearMapTask},
 *   {@link CellularAutomatonTask}, {@link IclMarkovTask}, each with its loss floor.
 * - {@link createTask} rebuilds any task from its `describe()` output (through `@attnlab/core`'s
 *   task registry, see {@link registerMarkovTasks}); {@link sampleDataset},
 *   {@link DatasetBatches} and {@link batchToTensors} feed a trainer.
 *
 * Each task's configuration is one schema ({@link TASK_SCHEMAS}, `@attnlab/core/schema`): its
 * type, defaults, validation and the CLI's task flags come from it.
 *
 * Sampling is pure TypeScript on typed arrays (no tensors) and deterministic per seed.
 *
 * @packageDocumentation
 */
// The task contract is `@attnlab/core`'s, re-exported for compatibility.
export type { OffsetGroup, Task, TaskKind, TokenBatch, TrueAttention, TrueAttentionMap } from './task.ts'
export { OracleTooLargeError } from './errors.ts'
export type { Estimate } from './entropy.ts'
export { randomOrthogonalMatrix } from './orthogonal.ts'
export {
  SPARSE_MARKOV_PRESETS,
  SparseMarkovTask,
  defaultSparseMarkovConfig,
  resolveSparseMarkovConfig,
  sparseMarkovSchema,
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
export {
  restrictedContextEntropyMonteCarlo,
  type EntropyEstimate,
  type MonteCarloOracleOptions,
  type MonteCarloProgress,
  type RestrictedContextEntropyEstimate,
} from './sparse-markov-monte-carlo.ts'
export {
  taskOracle,
  type BayesLossOracle,
  type LinearMapOracle,
  type OracleBase,
  type SparseMarkovExactOracle,
  type SparseMarkovMonteCarloOracle,
  type TaskOracle,
  type TaskOracleOptions,
} from './task-oracle.ts'
export {
  LinearMapTask,
  defaultLinearMapConfig,
  linearMapSchema,
  resolveLinearMapConfig,
  type LinearMapConfig,
} from './linear-map.ts'
export {
  CellularAutomatonTask,
  defaultCellularAutomatonConfig,
  cellularAutomatonSchema,
  resolveCellularAutomatonConfig,
  type BayesLossEstimate,
  type CellularAutomatonConfig,
} from './cellular-automaton.ts'
export {
  IclMarkovTask,
  defaultIclMarkovConfig,
  iclMarkovSchema,
  resolveIclMarkovConfig,
  type IclMarkovConfig,
} from './icl-markov.ts'
export {
  isRetrievalTask,
  scoreAnswer,
  type AnswerKind,
  type AnswerScore,
  type RetrievalTask,
} from './retrieval.ts'
export {
  NIAH_FILL_TOKEN,
  NIAH_QUERY_TOKEN,
  NiahTokensTask,
  defaultNiahTokensConfig,
  niahTokensSchema,
  type NiahTokensConfig,
} from './niah-tokens.ts'
export {
  VT_ASSIGN_TOKEN,
  VtTokensTask,
  defaultVtTokensConfig,
  vtTokensSchema,
  type VtTokensConfig,
} from './vt-tokens.ts'
export { CweTokensTask, cweTokensSchema, defaultCweTokensConfig, type CweTokensConfig } from './cwe-tokens.ts'
export {
  MultihopTokensTask,
  defaultMultihopTokensConfig,
  multihopTokensSchema,
  type MultihopTokensConfig,
} from './multihop-tokens.ts'
export {
  TEXT_ALPHABET,
  TEXT_UNKNOWN_ID,
  TextCharsTask,
  decodeText,
  defaultTextCharsConfig,
  encodeText,
  textCharsSchema,
  type TextCharsConfig,
} from './text-corpus.ts'
export {
  MARKOV_TASK_FAMILIES,
  TASK_KINDS,
  TASK_SCHEMAS,
  createTask,
  registerMarkovTasks,
  type AnyTask,
  type MarkovTaskDescription,
  type TaskDescription,
} from './create-task.ts'
export {
  DatasetBatches,
  sampleDataset,
  selectSequences,
  type DatasetBatchesOptions,
  type DatasetBatchesState,
} from './dataset.ts'
export { batchToTensors, type BatchTensors } from './tensors.ts'
export {
  ANSWER_INSTRUCTION,
  CWE_WORDS,
  MAX_CHAPTERS,
  PROTAGONIST,
  TEXT_TASK_NAMES,
  VT_NOISE,
  answerContent,
  buildPrompt,
  countTokens,
  generateNarrative,
  generateTextTask,
  normalizeAnswer,
  rulerCwe,
  rulerNiah,
  rulerVt,
  scoreTextSample,
  storyFiltering,
  storyMultihop,
  storyRetrieval,
  summarizeTextScores,
  type AnyTextTaskOptions,
  type Chapter,
  type Narrative,
  type PromptParts,
  type QuestionPosition,
  type RulerCweOptions,
  type RulerNiahOptions,
  type RulerVtOptions,
  type StoryFilteringOptions,
  type StoryRetrievalOptions,
  type TextSample,
  type TextScore,
  type TextScoreSummary,
  type TextTaskName,
  type TextTaskOptions,
  type TextTaskTokenizer,
} from './text-tasks/index.ts'

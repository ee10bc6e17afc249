/**
 * `@attnlab/experiments/node`: the Node-only side of the experiments, where writing their results
 * to files goes (the main entry, `@attnlab/experiments`, runs in any runtime and writes nothing).
 * `compareWithDense` returns data and its reports are strings and plain specs, which a caller
 * writes with `@attnlab/core/node`'s `writeFileAtomic`. The emergence experiment's run directory
 * (`config.json`, `metrics.jsonl`, `seeds/`, `summary.json`, `report.html`) is written here:
 * {@link emergenceDirectoryStore} for `runEmergence`, {@link writeEmergenceResult} after it,
 * {@link readEmergenceRecord} / {@link checkResumable} to resume one.
 *
 * @module
 */
export {
  checkResumable,
  emergenceDirectoryStore,
  readEmergenceRecord,
  readMetricLines,
  seedDirectory,
  writeEmergenceResult,
  type EmergenceDirectoryOptions,
  type EmergenceFileSummary,
} from './emergence/directory.ts'
export { emergenceRunCheckpoint, loadInitialWeights } from './init-from.ts'
export {
  evaluationTask,
  missingTokenizerMessage,
  readTrainedTask,
  runSparseEvalDirectory,
  type SparseEvalDirectoryResult,
} from './sparse-eval-node.ts'

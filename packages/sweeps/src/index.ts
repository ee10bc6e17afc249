/**
 * `@attnlab/sweeps`: a grid of experiment trials from one YAML or JSON spec. This entry runs in
 * any runtime (no file access): the spec ({@link parseSweepSpec}, {@link validateSweepSpec}), its
 * expansion into trials with stable ids ({@link expandTrials}, {@link trialId}), the trial record
 * ({@link TrialRecord}) and the experiments a sweep runs ({@link SWEEP_EXPERIMENTS}: `emergence`,
 * the experiment of Yüksel et al., arXiv 2602.19143, and Baherwani et al., arXiv 2606.25010).
 * {@link buildSweepReport} turns records into an HTML report (Vega-Lite) and a CSV;
 * {@link slurmScript} writes a SLURM job-array script. {@link STUDIES} are the papers' figures as
 * shipped sweeps with a test of each finding on the trials' own numbers ({@link buildStudyReport}).
 * Running trials (in this process, in worker processes) lives in `@attnlab/sweeps/node`.
 *
 * @packageDocumentation
 */
export { SweepDirectoryError, SweepSpecError, SweepWorkersError } from './errors.ts'
export { SWEEP_EXPERIMENTS, SWEEP_EXPERIMENT_NAMES, type SweepExperiment } from './experiments.ts'
export { canonicalJson, type JsonObject, type JsonValue } from './json.ts'
export { parseSweepSpec, validateSweepSpec, type SweepSpec } from './spec.ts'
export { TRIAL_ID_FORMAT, expandTrials, trialId, type Trial } from './trial.ts'
export {
  buildSweepReport,
  type SweepReport,
  type SweepReportGroup,
  type SweepReportOptions,
} from './report.ts'
export { slurmScript, type SlurmScriptOptions } from './slurm.ts'
export {
  TRIAL_RECORD_FORMAT,
  trialError,
  type TrialError,
  type TrialRecord,
  type TrialStatus,
} from './record.ts'
export {
  STUDIES,
  architecture,
  buildStudyReport,
  caContext,
  describeOverrides,
  emergenceTime,
  getStudy,
  linearMapSparsity,
  prePretraining,
  sparseFrontier,
  resolveStudySweeps,
  studySweeps,
  verdictWord,
  width,
  type Study,
  type StudyAssessment,
  type StudyContext,
  type StudyFinding,
  type StudyPart,
  type StudyOverrides,
  type StudyReport,
  type StudySize,
  type StudyTable,
  type SweepSpecInput,
} from './studies/index.ts'

/**
 * The Sparse Frontier's evaluation on a model trained here: for each retrieval task, method,
 * target sparsity and context length, the task score of greedy answers with its sample standard
 * deviation, both sparsities, the budget used and the cost model's price (Nawrot et al., arXiv
 * 2504.17768 [v2]: methods in section 2, sparsity and budgets A.1 / Table 3, tasks and metrics
 * section 4 / A.2, costs appendix B).
 *
 * @module
 */
import { ConfigError, Rng } from '@attnlab/core'
import {
  configSchema,
  customField,
  enumField,
  integerField,
  listField,
  numberField,
  parseConfig,
  showValue,
  type z,
} from '@attnlab/core/schema'
import { createTask, isRetrievalTask, TASK_SCHEMAS, TEXT_TASK_NAMES, type RetrievalTask } from '@attnlab/markov'
import {
  SPARSE_METHODS,
  createKernel,
  decodeMemory,
  dense,
  prefillFlops,
  questIndexingMemory,
  verticalSlashIndexingFlops,
  type ModelShape,
  type SparseAttentionKernel,
  type SparseMethodName,
} from '@attnlab/sparse-attention'
import { KVCache, type AttentionReport, type Transformer } from '@attnlab/transformer'
import { meanExtra, sizedConfig } from './compare-with-dense.ts'
import { ExperimentInputError } from './errors.ts'
import { checkTaskFits, measureRetrievalHeads, type RetrievalHeadRow } from './retrieval-heads.ts'
import { clampReportedSparsity, targetReached } from './targets.ts'

/** The target sparsities {@link runSparseEval} sweeps when none are given (the CLI's default too). */
export const DEFAULT_EVAL_SPARSITIES: readonly number[] = Object.freeze([0, 0.5, 0.7, 0.8, 0.9, 0.95])

/**
 * The settings a text task description may carry besides `kind` (each task reads its own and
 * ignores the others', as `generateTextTask` does): `needles`, `groups`, `groupLength` (Ruler NIAH),
 * `chains`, `hops` (VT), `commonWords`, `commonFrequency`, `rareFrequency` (CWE), `queries` (Story
 * Retrieval), `chaptersWithoutPurchase` (Story Filtering), and `minFill`, `questionPosition` (all).
 *
 * @category Sparse evaluation
 */
export const TEXT_TASK_SETTINGS: readonly string[] = Object.freeze([
  'needles',
  'groups',
  'groupLength',
  'chains',
  'hops',
  'commonWords',
  'commonFrequency',
  'rareFrequency',
  'queries',
  'chaptersWithoutPurchase',
  'minFill',
  'questionPosition',
])

/**
 * The settings each text task reads (besides `minFill` and `questionPosition`, which every one reads): a
 * description that carries another task's setting is refused, not silently run without it.
 *
 * @category Sparse evaluation
 */
export const TEXT_TASK_KIND_SETTINGS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  'ruler-niah': ['needles', 'groups', 'groupLength', 'minFill', 'questionPosition'],
  'ruler-vt': ['chains', 'hops', 'minFill', 'questionPosition'],
  'ruler-cwe': ['commonWords', 'commonFrequency', 'rareFrequency', 'minFill', 'questionPosition'],
  'story-retrieval': ['queries', 'minFill', 'questionPosition'],
  'story-multihop': ['minFill', 'questionPosition'],
  'story-filtering': ['chaptersWithoutPurchase', 'minFill', 'questionPosition'],
})

/** The sparse methods a {@link SparseEvalTrialConfig} may list (every method of `@attnlab/sparse-attention`). */
const METHOD_NAMES = Object.keys(SPARSE_METHODS) as [SparseMethodName, ...SparseMethodName[]]

/**
 * The schema of a {@link SparseEvalTrialConfig}: {@link runSparseEval} on a saved model as plain
 * JSON, what a sweep's `sparse-eval` trial runs (one trial per method, length list and seed).
 *
 * @category Sparse evaluation
 */
export const sparseEvalTrialSchema = configSchema({
  /** The model: a training checkpoint directory of `attnlab train` (or any path `loadModel` reads). */
  model: customField<string>('the model: an attnlab train checkpoint directory, or any model loadModel reads').default(
    '',
  ),
  /**
   * The task, `{ kind, ...overrides }` (a retrieval task; `nCtx` is set per length). Keys not given are taken
   * from the task the checkpoint was trained on when it is of the same kind (its token ranges).
   */
  task: customField<Readonly<Record<string, unknown>>>('the retrieval task, { kind, ...overrides }').default(() => ({
    kind: 'niah-tokens',
    needles: 4,
  })),
  /** The methods, each run alone (dense is always run as the reference). */
  methods: listField('sparse methods, each run alone', enumField('a sparse method', METHOD_NAMES)).default(() => [
    'quest' as SparseMethodName,
  ]),
  /** Target sparsities in [0, 1); 0 is dense for every method. */
  sparsities: listField(
    'target sparsities',
    numberField('a target sparsity', { min: 0, max: 1, maxExclusive: true }),
  ).default(() => [...DEFAULT_EVAL_SPARSITIES]),
  /** Context lengths (the task's `nCtx`, tokens), each at most the model's `nCtx`. */
  lengths: listField('context lengths (tokens)', integerField('a context length', { min: 1, max: 1 << 20 })).default(
    () => [256],
  ),
  /** Sequences per (task, length). */
  samples: integerField('sequences per task and length', { min: 1, max: 100000 }).default(20),
  /** Seed of the evaluation sequences. */
  seed: integerField('seed of the evaluation sequences', { min: 0 }).default(0),
  /**
   * Text tasks only: the model's tokenizer (a llama2.c `tokenizer.bin` or a Hugging Face `tokenizer.json`;
   * default: the one beside the model or in its directory).
   */
  tokenizer: customField<string>('text tasks: the tokenizer path (default: beside the model)').optional(),
  /** Text tasks only: `false` drops `tokenizer.json`'s leading '▁' (models trained without it). */
  dummyPrefix: customField<boolean>("text tasks: false drops tokenizer.json's leading '▁'").optional(),
  /** Text tasks only: text appended to every prompt to start the answer, scored as part of the output. */
  answerPrefix: customField<string>('text tasks: text appended to every prompt to start the answer').optional(),
  /** Text tasks only: new tokens generated per prompt at most (default 64). */
  maxNewTokens: integerField('text tasks: new tokens per prompt at most', { min: 1, max: 1 << 20 }).optional(),
})

/**
 * A sparse evaluation as plain JSON ({@link sparseEvalTrialSchema}; {@link resolveSparseEvalTrialConfig}).
 *
 * @category Sparse evaluation
 */
export type SparseEvalTrialConfig = Readonly<z.output<typeof sparseEvalTrialSchema>>

/**
 * Validates a {@link SparseEvalTrialConfig} and fills in its defaults (the model path is required).
 *
 * @param input - the configuration as given
 * @returns the resolved configuration
 * @throws `ConfigError` (`@attnlab/core`) naming the field: an unknown key, a method that is not one of
 *   `@attnlab/sparse-attention`'s, a sparsity outside [0, 1), a length or sample count out of range, no model
 *   path, a task that is neither a retrieval task (niah-tokens, vt-tokens, cwe-tokens, multihop-tokens) nor a
 *   text task (ruler-niah, ...), a text task setting that no text task has or of the wrong type, or a text-task field
 *   (`tokenizer`, `dummyPrefix`, `maxNewTokens`, `answerPrefix`) on a retrieval task, or a method, sparsity or
 *   length listed twice
 * @example
 * ```ts
 * resolveSparseEvalTrialConfig({ model: 'runs/niah/checkpoint', methods: ['snapkv'], lengths: [256, 512] })
 * ```
 * @category Sparse evaluation
 */
export function resolveSparseEvalTrialConfig(input: unknown): SparseEvalTrialConfig {
  const config = parseConfig(sparseEvalTrialSchema, input, 'sparse-eval')
  if (typeof config.model !== 'string' || config.model.trim() === '') {
    throw new ConfigError(
      'model',
      `must be the path of a saved model (a checkpoint directory); got ${JSON.stringify(config.model)}`,
      {
        value: config.model as unknown as string,
      },
    )
  }
  // A method, sparsity or length listed twice is refused here, when a sweep spec is read, not when its trial runs.
  for (const key of ['methods', 'sparsities', 'lengths'] as const) {
    const twice = listedTwice((config[key] ?? []) as readonly unknown[])
    if (twice !== null) throw new ConfigError(key, `lists ${twice} twice; give each once`, { value: twice })
  }
  const task = config.task as Readonly<Record<string, unknown>> | null
  const kind = typeof task === 'object' && task !== null ? task.kind : undefined
  const text = typeof kind === 'string' && (TEXT_TASK_NAMES as readonly string[]).includes(kind)
  if (typeof kind !== 'string' || !(RETRIEVAL_KINDS.includes(kind) || text)) {
    throw new ConfigError(
      'task.kind',
      `must be one of ${RETRIEVAL_KINDS.join(', ')} (a task with answer positions) or a text task ` +
        `(${TEXT_TASK_NAMES.join(', ')}); got ${JSON.stringify(kind)}`,
      { value: kind === undefined ? null : String(kind) },
    )
  }
  if (!text) {
    const key = (['tokenizer', 'dummyPrefix', 'maxNewTokens', 'answerPrefix'] as const).find(
      (k) => config[k] !== undefined,
    )
    if (key !== undefined)
      throw new ConfigError(key, `applies to the text tasks (${TEXT_TASK_NAMES.join(', ')}), not to ${kind}`)
  } else {
    if (config.tokenizer !== undefined && (typeof config.tokenizer !== 'string' || config.tokenizer.trim() === ''))
      throw new ConfigError('tokenizer', `must be a tokenizer file path; got ${showValue(config.tokenizer)}`)
    if (config.answerPrefix !== undefined && typeof config.answerPrefix !== 'string')
      throw new ConfigError('answerPrefix', `must be a string; got ${showValue(config.answerPrefix)}`)
    if (config.dummyPrefix !== undefined && typeof config.dummyPrefix !== 'boolean')
      throw new ConfigError('dummyPrefix', `must be true or false; got ${showValue(config.dummyPrefix)}`)
    for (const [key, value] of Object.entries(task as Readonly<Record<string, unknown>>)) {
      if (key === 'kind') continue
      if (!TEXT_TASK_SETTINGS.includes(key))
        throw new ConfigError(
          `task.${key}`,
          `is not a text task setting; expected one of ${TEXT_TASK_SETTINGS.join(', ')}`,
        )
      const own = TEXT_TASK_KIND_SETTINGS[kind] ?? []
      if (!own.includes(key))
        throw new ConfigError(`task.${key}`, `is not a ${kind} setting (it has ${own.join(', ')})`)
      const ok =
        key === 'questionPosition'
          ? value === 'both' || value === 'after' || value === 'before'
          : key === 'minFill'
            ? typeof value === 'number' && value > 0 && value <= 1
            : Number.isSafeInteger(value) && (value as number) >= 1
      if (!ok)
        throw new ConfigError(
          `task.${key}`,
          key === 'questionPosition'
            ? `must be both, after or before; got ${showValue(value)}`
            : key === 'minFill'
              ? `must be a fraction in (0, 1]; got ${showValue(value)}`
              : `must be a positive integer; got ${showValue(value)}`,
          { value: showValue(value) },
        )
    }
    return config
  }
  // Each given task setting against its field, before any work (the others come from the checkpoint's task when
  // the trial runs, so only the fields' own ranges can be checked here; `nCtx` is set per length).
  const shape = (TASK_SCHEMAS as unknown as Readonly<Record<string, { readonly shape: Record<string, z.ZodType> }>>)[
    kind
  ]?.shape
  for (const [key, value] of Object.entries(task as Readonly<Record<string, unknown>>)) {
    if (key === 'kind' || key === 'nCtx' || shape === undefined) continue
    if (shape[key] === undefined) {
      throw new ConfigError(`task.${key}`, `is not a ${kind} setting; expected one of ${Object.keys(shape).join(', ')}`)
    }
    try {
      parseConfig(configSchema({ [key]: shape[key] }), { [key]: value }, 'task')
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error
      throw new ConfigError(`task.${key}`, error.message.replace(/^Invalid [^:]*: /, ''), { value: showValue(value) })
    }
  }
  return config
}

/** The configuration keys {@link SparseEvalRow.budget} reports: each method's size for its target. */
const BUDGET_KEYS = ['verticalSize', 'slashSize', 'alpha', 'topK', 'capacity', 'tokenBudget'] as const

/** Options of {@link runSparseEval}. */
export interface SparseEvalOptions {
  /**
   * The tasks, as descriptions (`{ kind: 'niah-tokens', needles: 4 }`, a checkpoint's task): each
   * is rebuilt at every length with `nCtx` set to it. They must be retrieval tasks of
   * `@attnlab/markov` (niah-tokens, vt-tokens, cwe-tokens, multihop-tokens).
   */
  readonly tasks: readonly Readonly<Record<string, unknown>>[]
  /** The methods (`dense` is always run as the reference and need not be listed). */
  readonly methods: readonly SparseMethodName[]
  /** Target sparsities in [0, 1) (default {@link DEFAULT_EVAL_SPARSITIES}); 0 is dense for every method. */
  readonly sparsities?: readonly number[]
  /** Context lengths (the tasks' `nCtx`, tokens), each at most the model's `nCtx`. */
  readonly lengths: readonly number[]
  /** Sequences per (task, length), an integer >= 1 (the same ones for every method and sparsity). */
  readonly samples: number
  /** Seed of the evaluation sequences (default 0). */
  readonly seed?: number
  /** User method sizes by config key (they win over the budget rules and are not calibrated). */
  readonly flags?: Readonly<Record<string, unknown>>
  /**
   * Also measure which heads retrieve, on the same sequences, dense and teacher-forced
   * ({@link measureRetrievalHeads}: one forward pass per sequence); default true.
   */
  readonly heads?: boolean
  /** Called after each (task, length, method, sparsity) row. */
  readonly onRow?: (row: SparseEvalRow, done: number, total: number) => void
}

/** The cost model's price of one row ([v2] appendix B). */
export interface SparseEvalCost {
  /** `'prefill-flops'` (prefill methods and dense) or `'decode-memory'` (decode methods: elements read per step). */
  readonly metric: 'prefill-flops' | 'decode-memory'
  /** The price at the row's reported sparsity (clamped at 0), with the method's indexing term. */
  readonly value: number
  /** The dense price of the same length. */
  readonly dense: number
  /** `value / dense`. */
  readonly relative: number
}

/** One (task, length, method, target sparsity) of {@link runSparseEval}. */
export interface SparseEvalRow {
  /** The task's kind, e.g. `'niah-tokens'`. */
  readonly task: string
  /** The context length (the task's `nCtx`, tokens). */
  readonly length: number
  /** The prompt length (tokens before the first answer token). */
  readonly promptTokens: number
  /** The method (`'dense'` for the reference row). */
  readonly method: SparseMethodName
  /** The phase it sparsifies (`null` for dense and for every method at sparsity 0). */
  readonly phase: 'prefill' | 'decode' | null
  /** The sparsity asked for. */
  readonly targetSparsity: number
  /** Sequences scored. */
  readonly samples: number
  /** Mean task score (NIAH / multi-hop: per-token exact match; VT / CWE: set recall). */
  readonly score: number
  /** Sample standard deviation of the score over sequences (ddof 1; 0 for one sample). */
  readonly scoreStd: number
  /** Mean strict score (every answer token right / the exact set). */
  readonly strict: number
  /** Sample standard deviation of the strict score. */
  readonly strictStd: number
  /** Mean IoU of the answer and gold sets. */
  readonly iou: number
  /** Exact sparsity from the masks, mean over layers and sequences (of the sparsified phase). */
  readonly exactSparsity: number
  /** The study's reported sparsity, mean over layers and sequences (may be below 0, see `clampReportedSparsity`). */
  readonly reportedSparsity: number
  /** Whether the exact or clamped reported sparsity comes within tolerance of the target. */
  readonly targetReached: boolean
  /** The method's size for the target (`verticalSize`, `alpha`, `topK`, `capacity`, `tokenBudget`). */
  readonly budget: Readonly<Record<string, number>>
  /** The full configuration that ran. */
  readonly config: unknown
  /**
   * The cost model's price (attention-only models included, without an MLP term); `null` only in
   * results written before attention-only models were priced.
   */
  readonly cost: SparseEvalCost | null
  /**
   * Text tasks only ({@link runTextSparseEval}): samples the study's metric skipped (an empty
   * answer in Story Multi-hop and Filtering; `score` is the mean over the others, `NaN` if all were).
   */
  readonly skipped?: number
  /** Text tasks only: the fraction of outputs with an `<answer>` tag. */
  readonly tagged?: number
  /**
   * Text tasks only: the mean fraction of the dense output's tokens the method reproduced from the
   * start (the common prefix over the dense output's length; 1 for dense), a measure of how far the
   * method changes what the model says whether or not the model solves the task.
   */
  readonly agreement?: number
  /** Text tasks only: the mean number of tokens generated per prompt (EOS excluded). */
  readonly newTokens?: number
  /** Text tasks only: the first sample's output text, as decoded. */
  readonly example?: string
}

/** What {@link runSparseEval} measured. */
export interface SparseEvalResult {
  /** The model's context `nCtx` (tokens). */
  readonly context: number
  /** How answers were produced: greedy decoding of the answer positions after a (sparse) prefill. */
  readonly decoding: 'greedy'
  /** The evaluation seed. */
  readonly seed: number
  /** Rows by task, length, then method (dense first), then target sparsity. */
  readonly rows: readonly SparseEvalRow[]
  /**
   * Which heads retrieve, per task and length then layer and head ({@link measureRetrievalHeads});
   * empty with `heads: false`, absent in results written before it was measured.
   */
  readonly heads?: readonly RetrievalHeadRow[]
}

/**
 * The model's shape as `@attnlab/sparse-attention`'s cost model reads it (an attention-only model
 * has `dMlp` 0: no MLP term in its prices).
 */
export function modelShapeOf(model: Transformer): ModelShape {
  const c = model.config
  return {
    name: 'model',
    layers: c.nLayers,
    dModel: c.dModel,
    nHeads: c.nHeads,
    nKvHeads: c.nKvHeads,
    dHead: c.dHead,
    dMlp: c.dMlp,
    dVocab: c.dVocab,
    slidingWindow: null,
  }
}

/**
 * The cost of running `method` with `config` at reported sparsity `sparsity` on an `n`-token
 * prompt: prefill FLOPs ([v2] B.1 Eq. 3, plus Vertical-Slash's indexing FLOPs for Vertical-Slash
 * and FlexPrefill) or, for decode methods, the memory read per decode step (plus Quest's page
 * min/max loads); `indexing: false` leaves the indexing terms out (sparsity 0 runs dense).
 */
export function costOf(
  shape: ModelShape,
  method: SparseMethodName,
  config: Readonly<Record<string, unknown>>,
  n: number,
  sparsity: number,
  indexing = true,
): SparseEvalCost {
  const density = 1 - Math.min(1, Math.max(0, sparsity))
  if (SPARSE_METHODS[method].phase === 'decode') {
    const denseValue = decodeMemory(shape, n).total
    let value = decodeMemory(shape, n, { density }).total
    if (indexing && method === 'quest') value += questIndexingMemory(shape, n, { pageSize: config.pageSize as number })
    return { metric: 'decode-memory', value, dense: denseValue, relative: value / denseValue }
  }
  const denseValue = prefillFlops(shape, n).total
  let value = prefillFlops(shape, n, { density }).total
  if (indexing && (method === 'vertical-slash' || method === 'flexprefill')) {
    const size = (key: string): number => Math.round(Number(config[key] ?? 0))
    value += verticalSlashIndexingFlops(shape, n, {
      queries: Math.max(1, Math.min(n, size('window'))),
      verticals: size('verticalSize'),
      slashes: size('slashSize'),
    })
  }
  return { metric: 'prefill-flops', value, dense: denseValue, relative: value / denseValue }
}

/** Mean and sample standard deviation (ddof 1; 0 for one value). */
export function meanStd(values: readonly number[]): { mean: number; std: number } {
  const mean = values.reduce((a, b) => a + b, 0) / values.length
  if (values.length < 2) return { mean, std: 0 }
  const variance = values.reduce((a, b) => a + (b - mean) ** 2, 0) / (values.length - 1)
  return { mean, std: Math.sqrt(variance) }
}

function argmax(row: Float32Array): number {
  let best = 0
  for (let v = 1; v < row.length; v++) if ((row[v] as number) > (row[best] as number)) best = v
  return best
}

/**
 * Greedy answers of one sequence: the first `prefillLength` tokens (default: every token before
 * the first answer position) prefilled through `kernel`, then one position at a time through the
 * KV cache: at an answer position the argmax token is taken (and fed back), at any other position
 * (the rest of the question, the next queried key) the sequence's own token is fed.
 *
 * @param model - the model
 * @param task - the retrieval task the sequence is from
 * @param sequence - one sequence of the task, `seqLength` tokens
 * @param kernel - the attention kernel of every pass (prefill and decode)
 * @param prefillLength - tokens prefilled at once, in `[1, answerPositions[0]]`
 * @returns the predicted answer tokens (in answer-position order) and the prefill and decode reports
 */
export function greedyAnswers(
  model: Transformer,
  task: RetrievalTask,
  sequence: ArrayLike<number>,
  kernel: SparseAttentionKernel,
  prefillLength: number = task.answerPositions[0] as number,
): { predicted: number[]; prefillReports: AttentionReport[]; decodeReports: AttentionReport[] } {
  const answers = new Set(task.answerPositions)
  const first = prefillLength
  const last = task.answerPositions[task.answerPositions.length - 1] as number
  const cache = new KVCache(model.config.nLayers)
  const prefillReports: AttentionReport[] = []
  const decodeReports: AttentionReport[] = []
  const predicted: number[] = []
  try {
    const prompt = Array.from({ length: first }, (_, i) => sequence[i] as number)
    let out = model.forwardCached([prompt], cache, { attention: kernel, attentionReports: prefillReports })
    for (let p = first; p <= last; p++) {
      const logits = out.dataSync() as Float32Array
      const vocab = model.config.dVocab
      const rowStart = logits.length - vocab
      out.dispose()
      const token = answers.has(p) ? argmax(logits.subarray(rowStart)) : (sequence[p] as number)
      if (answers.has(p)) predicted.push(token)
      if (p === last) return { predicted, prefillReports, decodeReports }
      out = model.forwardCached([[token]], cache, { attention: kernel, attentionReports: decodeReports })
    }
    out.dispose()
    return { predicted, prefillReports, decodeReports }
  } finally {
    cache.dispose()
  }
}

/**
 * The first entry a list names twice, as it reads in a message (a task as its kind and its other settings:
 * `niah-tokens`, `niah-tokens {"needles":2}`), or null when every entry is listed once.
 */
function listedTwice(values: readonly unknown[]): string | null {
  const seen = new Set<string>()
  for (const value of values) {
    let key = String(value)
    if (typeof value === 'object' && value !== null) {
      const { kind, ...rest } = value as { kind?: unknown }
      const settings = Object.keys(rest).length === 0 ? '' : JSON.stringify(rest)
      key = typeof kind === 'string' ? `${kind}${settings === '' ? '' : ` ${settings}`}` : JSON.stringify(value)
    }
    if (seen.has(key)) return key
    seen.add(key)
  }
  return null
}

/** Refuses a list that names one entry twice (it would be evaluated twice and give two rows with one key). */
function refuseDuplicates(option: string, values: readonly unknown[]): void {
  const key = listedTwice(values)
  if (key !== null)
    throw new ExperimentInputError(option, `${option} lists ${key} twice; give each once`, { value: key })
}

/**
 * Checks what every sparse evaluation takes (methods, target sparsities, samples; lengths and tasks
 * listed once each) and returns the sparsities.
 * @throws ExperimentInputError naming the option
 */
export function checkEvalBasics(options: {
  readonly methods: readonly SparseMethodName[]
  readonly sparsities?: readonly number[] | undefined
  readonly samples: number
  readonly lengths?: readonly number[]
  readonly tasks?: readonly Readonly<Record<string, unknown>>[]
}): readonly number[] {
  const known = Object.keys(SPARSE_METHODS)
  const unknown = options.methods.find((m) => !known.includes(m))
  if (unknown !== undefined || options.methods.length === 0) {
    throw new ExperimentInputError(
      'methods',
      `methods must be a non-empty list of ${known.join(', ')}; got ${unknown === undefined ? 'none' : `'${unknown}'`}`,
      { value: unknown ?? null },
    )
  }
  const sparsities = options.sparsities ?? DEFAULT_EVAL_SPARSITIES
  const bad = sparsities.find((s) => !(Number.isFinite(s) && s >= 0 && s < 1))
  if (sparsities.length === 0 || bad !== undefined) {
    throw new ExperimentInputError(
      'sparsities',
      `sparsities must be a non-empty list of numbers in [0, 1); got ${bad === undefined ? 'none' : bad}`,
      { value: bad ?? null },
    )
  }
  if (!Number.isInteger(options.samples) || options.samples < 1) {
    throw new ExperimentInputError('samples', `samples must be an integer >= 1; got ${options.samples}`, {
      value: options.samples,
    })
  }
  refuseDuplicates('methods', options.methods)
  refuseDuplicates('sparsities', sparsities)
  refuseDuplicates('lengths', options.lengths ?? [])
  refuseDuplicates('tasks', options.tasks ?? [])
  return sparsities
}

function checkOptions(model: Transformer, options: SparseEvalOptions): readonly number[] {
  const sparsities = checkEvalBasics(options)
  const { nCtx } = model.config
  if (options.lengths.length === 0)
    throw new ExperimentInputError('lengths', 'lengths must be a non-empty list of context lengths', {})
  for (const length of options.lengths) {
    if (!Number.isInteger(length) || length < 1 || length > nCtx) {
      throw new ExperimentInputError(
        'lengths',
        `length ${length} is not an integer in [1, ${nCtx}]: the model's context (nCtx) is ${nCtx} tokens`,
        { value: length, nCtx },
      )
    }
  }
  if (options.tasks.length === 0)
    throw new ExperimentInputError('tasks', 'tasks must be a non-empty list of task descriptions', {})
  return sparsities
}

/**
 * The task kinds {@link runSparseEval} scores: `@attnlab/markov`'s retrieval tasks, whose answer
 * positions the score reads (The Sparse Frontier, arXiv 2504.17768 [v2], tasks in section 4 / A.2).
 *
 * @category Sparse evaluation
 */
export const SPARSE_EVAL_TASK_KINDS = ['niah-tokens', 'vt-tokens', 'cwe-tokens', 'multihop-tokens'] as const

const RETRIEVAL_KINDS: readonly string[] = SPARSE_EVAL_TASK_KINDS

/** Builds a task at a length, checked to be a retrieval task within the model's vocabulary. */
function taskAt(model: Transformer, description: Readonly<Record<string, unknown>>, length: number): RetrievalTask {
  const kind = description.kind
  if (typeof kind !== 'string' || !RETRIEVAL_KINDS.includes(kind)) {
    throw new ExperimentInputError(
      'tasks',
      `task '${String(kind)}' has no answer positions; expected one of ${RETRIEVAL_KINDS.join(', ')}`,
      { kind },
    )
  }
  const task = createTask({ ...description, nCtx: length })
  if (!isRetrievalTask(task)) {
    throw new ExperimentInputError(
      'tasks',
      `task '${task.kind}' has no answer positions; expected one of ${RETRIEVAL_KINDS.join(', ')}`,
      { kind: task.kind },
    )
  }
  checkTaskFits(model, task)
  return task
}

/**
 * Runs the Sparse Frontier evaluation on `model`: for each task (rebuilt at each length), dense
 * first, then each method at each target sparsity, alone (one prefill method or one decode method
 * at a time, as in the study), on the same `samples` sequences (drawn from
 * `Rng.fromSeed(seed).split('sparse-eval/<kind>/<length>')`). Answers are greedy: the prompt is
 * prefilled through the method's kernel (prefill methods sparsify it and decode densely; decode
 * methods prefill densely, evict or index, and sparsify each decode step), then the answer
 * positions are decoded one at a time ({@link greedyAnswers}). For decode methods the prompt's
 * last token is fed as the first decode step, so that every answer token comes from a decode step
 * over the compressed cache (a prefill's last position is dense for them: in the study the first
 * generated tokens are the answer's preamble). The question follows the context (as in the task
 * layouts): SnapKV's observation window sees the query marker but not the queried keys, which
 * arrive after eviction. A method's size for a target is
 * chosen once per (method, target, length), on the first sequence's prompt (`sizedConfig`: the
 * study fixes `V = S` per length, [v2] A.1 / Table 3), and kept for every sequence. Target 0 is the
 * dense run for every method (the study's baseline; Quest sized for 0 would still skip a page).
 * Scores per task ([v2] A.2): NIAH and multi-hop per-token exact match, VT and CWE set recall;
 * each with its strict variant and IoU. Costs: appendix B's prefill FLOPs or decode memory at the
 * reported sparsity. With `heads` (default) it also measures which heads retrieve on the same
 * sequences ({@link measureRetrievalHeads}). Leaves no tensors behind; deterministic for a seed on
 * one backend.
 *
 * @param model - a model trained on the tasks' vocabulary; its `nCtx` bounds the lengths
 * @param options - tasks, methods, sparsities, lengths, samples, seed
 * @returns the rows and what the run used
 * @throws ExperimentInputError (`INVALID_ARGUMENT`) for an unknown method, a sparsity outside
 *   [0, 1), samples below 1, no length or a length above the model's `nCtx`, no task, a task that
 *   is not a retrieval task or uses more token ids than the model has
 * @throws ConfigError (`@attnlab/core`) for a task description the task rejects at a length
 *   (too short for its items) or invalid user method sizes
 * @example
 * ```ts
 * const { rows } = await runSparseEval(model, {
 *   tasks: [{ kind: 'niah-tokens' }], methods: ['snapkv'], lengths: [256], samples: 20,
 * })
 * ```
 */
export async function runSparseEval(model: Transformer, options: SparseEvalOptions): Promise<SparseEvalResult> {
  const sparsities = checkOptions(model, options)
  const seed = options.seed ?? 0
  const flags = options.flags ?? {}
  const shape = modelShapeOf(model)
  const methods = options.methods.filter((m) => m !== 'dense')
  const tasks = options.lengths.flatMap((length) =>
    options.tasks.map((description) => ({ length, task: taskAt(model, description, length) })),
  )
  const total = tasks.length * (1 + methods.length * sparsities.length)
  const rows: SparseEvalRow[] = []
  const heads: RetrievalHeadRow[] = []
  const push = (row: SparseEvalRow): void => {
    rows.push(row)
    options.onRow?.(row, rows.length, total)
  }
  for (const { length, task } of tasks) {
    const batch = task.sample(options.samples, Rng.fromSeed(seed).split(`sparse-eval/${task.kind}/${length}`))
    const L = task.seqLength
    const sequences = Array.from({ length: options.samples }, (_, b) => batch.tokens.subarray(b * L, (b + 1) * L))
    const promptTokens = task.answerPositions[0] as number
    const evaluate = (method: SparseMethodName, target: number, kernel: SparseAttentionKernel): SparseEvalRow => {
      const phase = method === 'dense' ? null : (SPARSE_METHODS[method].phase as 'prefill' | 'decode')
      const scores: number[] = []
      const stricts: number[] = []
      const ious: number[] = []
      const exact: number[] = []
      const reported: number[] = []
      for (const sequence of sequences) {
        const run = greedyAnswers(model, task, sequence, kernel, phase === 'decode' ? promptTokens - 1 : promptTokens)
        const gold = task.answerPositions.map((p) => sequence[p] as number)
        const s = task.scoreAnswer(gold, run.predicted)
        scores.push(s.score)
        stricts.push(s.strict)
        ious.push(s.iou)
        const reports = phase === 'decode' ? run.decodeReports : run.prefillReports
        exact.push(meanExtra(reports, 'exactSparsity'))
        reported.push(meanExtra(reports, 'reportedSparsity'))
      }
      const score = meanStd(scores)
      const strict = meanStd(stricts)
      const exactSparsity = meanStd(exact).mean
      const reportedSparsity = meanStd(reported).mean
      const config = (kernel.config ?? {}) as Record<string, unknown>
      const budget: Record<string, number> = {}
      for (const key of BUDGET_KEYS) if (typeof config[key] === 'number') budget[key] = config[key] as number
      const { clamped } = clampReportedSparsity(reportedSparsity)
      return {
        task: task.kind,
        length,
        promptTokens,
        method,
        phase,
        targetSparsity: target,
        samples: sequences.length,
        score: score.mean,
        scoreStd: score.std,
        strict: strict.mean,
        strictStd: strict.std,
        iou: meanStd(ious).mean,
        exactSparsity,
        reportedSparsity,
        targetReached: targetReached(target, exactSparsity, clamped),
        budget,
        config: kernel.config,
        cost: costOf(shape, method, config, phase === 'decode' ? promptTokens - 1 : promptTokens, clamped),
      }
    }
    const denseRow = evaluate('dense', 0, dense())
    push(denseRow)
    if (options.heads !== false) heads.push(...(await measureRetrievalHeads(model, task, sequences)))
    const firstPrompt = Array.from((sequences[0] as Int32Array).subarray(0, promptTokens))
    for (const method of methods) {
      for (const target of sparsities) {
        if (target === 0) {
          const n = SPARSE_METHODS[method].phase === 'decode' ? promptTokens - 1 : promptTokens
          const cost = costOf(shape, method, {}, n, 0, false)
          push({ ...denseRow, method, config: {}, budget: {}, cost })
          continue
        }
        const decode = SPARSE_METHODS[method].phase === 'decode'
        const config = sizedConfig(model, decode ? firstPrompt.slice(0, -1) : firstPrompt, method, target, flags)
        push(evaluate(method, target, createKernel(method, config as never)))
      }
    }
  }
  return { context: model.config.nCtx, decoding: 'greedy', seed, rows, heads }
}

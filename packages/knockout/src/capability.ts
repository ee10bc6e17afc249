/**
 * Capabilities: what a knockout is scored on. A {@link Capability} is a fixed evaluation set
 * (sequences, and the targets of their scored positions) plus a metric. The set is drawn once,
 * seeded, and reused for every mask, as in Bair et al. (arXiv 2603.03335; the authors' released
 * code draws the subset once and reuses it for every mask).
 *
 * Built-ins: any `@attnlab/markov` task ({@link taskCapability}), one span of a sparse Markov
 * chain ({@link sparseMarkovSpanCapability}), the copying/induction probe for any language model
 * ({@link inductionCapability}) and ordinary next-token prediction on given text
 * ({@link textCapability}).
 *
 * @module
 */
import { checkRange, ConfigError, InvalidArgumentError, Rng, type Task, type TokenBatch } from '@attnlab/core'
import {
  booleanField,
  configSchema,
  customField,
  enumField,
  integerField,
  parseConfig,
  type z,
} from '@attnlab/core/schema'
import type { SparseMarkovTask } from '@attnlab/markov'

/**
 * How a capability's predictions are scored, per scored position, averaged over all scored
 * positions of the set:
 *
 * - `loss`: cross-entropy in nats (lower is better);
 * - `accuracy`: 1 when the model's most likely token is the target (for a target distribution:
 *   its most likely token), else 0 (higher is better);
 * - `logprob`: log-probability of the target in nats, `log q(target)` (for a target distribution:
 *   `sum_y P(y) log q(y)`), i.e. minus the loss (higher is better).
 *
 * @category Capabilities
 */
export type MetricName = 'loss' | 'accuracy' | 'logprob'

/** The metric names, for validation and help texts. @category Capabilities */
export const METRIC_NAMES: readonly MetricName[] = Object.freeze(['loss', 'accuracy', 'logprob'])

/**
 * Whether a larger value of the metric means a better model (`accuracy`, `logprob`) or a worse
 * one (`loss`).
 *
 * @category Capabilities
 */
export function higherIsBetter(metric: MetricName): boolean {
  return metric !== 'loss'
}

/**
 * A metric value turned into "performance" (higher = better): the value itself for `accuracy`
 * and `logprob`, minus the value for `loss`. Localization regresses performance on the masks, so
 * heads the capability needs get negative coefficients whatever the metric.
 *
 * @category Capabilities
 */
export function performance(value: number, metric: MetricName): number {
  return higherIsBetter(metric) ? value : -value
}

/**
 * The sequences a capability is scored on. The model reads `inputs`; its output at flat position
 * `scoredPositions[s] = b * length + p` (sequence b, position p) is scored against
 * `targets[s]` (or the distribution `targetDistributions[s, :]`).
 *
 * @category Capabilities
 */
export interface EvaluationSet {
  /** Model inputs, `[count, length]` row-major token ids. */
  readonly inputs: Int32Array
  /** Number of sequences. */
  readonly count: number
  /** Tokens per sequence (at most the model's `nCtx`). */
  readonly length: number
  /** Flat output positions that are scored, ascending. */
  readonly scoredPositions: Int32Array
  /** The target token of each scored position (for a distribution target: its argmax). */
  readonly targets: Int32Array
  /**
   * Optional soft targets `[scoredPositions.length, targetWidth]` (each row sums to 1): the
   * metric then uses the distribution instead of the token (for example a teacher's next-token
   * distribution).
   */
  readonly targetDistributions?: Float32Array
  /** Width of each target distribution (tokens `0 .. targetWidth - 1`; must be <= `dVocab`). */
  readonly targetWidth?: number
  /**
   * 1 where the input token is real, 0 for padding at the end of shorter sequences; `[count,
   * length]`. Mean ablation averages only real positions. Default: all real.
   */
  readonly inputMask?: Uint8Array
  /**
   * Weight of each scored position in the metric, which is then `sum_s w_s v_s` instead of the
   * mean of the per-position values `v_s` (for example +1/n on a second copy and -1/n on the first
   * for an in-context gain). Default: the mean (`w_s = 1 / scored`).
   */
  readonly scoreWeights?: Float64Array
}

/**
 * A capability: a named evaluation set and a metric.
 *
 * @category Capabilities
 */
export interface Capability {
  /** A short identifier (`task`, `span-0`, `induction`, ...). */
  readonly name: string
  /** One line for humans. */
  readonly description: string
  /** The metric reported and regressed on. */
  readonly metric: MetricName
  /** The sequences and targets. */
  readonly data: EvaluationSet
  /**
   * The metric of a model without the capability, if known (see {@link chanceLevel}): a uniform
   * guess over the vocabulary, or 0 for an in-context gain. A clean model that does no better has
   * nothing to localize ({@link absentCapability}).
   */
  readonly chance?: number
}

/**
 * The metric of a model that lacks a capability: a uniform guess over `dVocab` tokens (`loss`
 * `ln dVocab`, `logprob` `-ln dVocab`, `accuracy` `1 / dVocab`), or, for an in-context gain
 * (second copy minus first), 0 whatever the metric.
 *
 * @param metric - the capability's metric
 * @param dVocab - the model's vocabulary size (>= 1)
 * @param gain - true for a contrast (gain) capability
 * @throws `ConfigError` (`@attnlab/core`) for a `dVocab` that is not an integer >= 1
 * @category Capabilities
 */
export function chanceLevel(metric: MetricName, dVocab: number, gain = false): number {
  if (!Number.isSafeInteger(dVocab) || dVocab < 1) {
    throw new ConfigError('dVocab', `must be an integer >= 1, got ${String(dVocab)}`)
  }
  if (gain) return 0
  return metric === 'loss' ? Math.log(dVocab) : metric === 'logprob' ? -Math.log(dVocab) : 1 / dVocab
}

/**
 * Whether a model shows a capability at all: when its clean (nothing knocked out) metric is no
 * better than the capability's {@link Capability.chance}, knocking heads out cannot reveal where
 * the capability lives (there is nothing to lose), and any ranking of "top heads" is noise or
 * heads whose removal moves a score that is already at chance (Bair et al., arXiv 2603.03335,
 * section 4 localize capabilities the model has).
 *
 * @param capability - the capability (its `chance` unset: never absent)
 * @param clean - its metric on the clean model
 * @returns `null` when the model beats chance, else the values and a one-line warning
 * @category Capabilities
 */
export function absentCapability(
  capability: Capability,
  clean: number,
): { readonly clean: number; readonly chance: number; readonly message: string } | null {
  const chance = capability.chance
  if (chance === undefined || !Number.isFinite(clean)) return null
  if (performance(clean, capability.metric) > performance(chance, capability.metric)) return null
  const format = (v: number): string => v.toFixed(capability.metric === 'accuracy' ? 3 : 2)
  const unit = capability.metric === 'accuracy' ? '' : ' nats per token'
  return {
    clean,
    chance,
    message:
      `the model does not show '${capability.name}': its clean ${capability.metric} is ${format(clean)}${unit}, ` +
      `no better than chance (${format(chance)}); there is nothing to localize, ` +
      'and the heads ranked here are not where a capability lives',
  }
}

/**
 * The schema of {@link CapabilityOptions}: the options every capability builder takes, declared
 * once (their defaults differ per builder, so the builders fill them in).
 *
 * @category Capabilities
 */
export const capabilityOptionsSchema = configSchema({
  /** Name (defaults per builder). */
  name: customField<string>('name (defaults per builder)').optional(),
  /** Metric (defaults per builder). */
  metric: enumField('metric (defaults per builder)', METRIC_NAMES as [MetricName, ...MetricName[]]).optional(),
  /** Number of sequences in the evaluation set (default 128; 64 for the induction probe). */
  count: integerField('number of sequences in the evaluation set', { min: 1, max: 1 << 20 }).optional(),
  /** Seed of the evaluation set (default 0). */
  seed: customField<number>('seed of the evaluation set').optional(),
})

/**
 * Options shared by the capability builders (see {@link capabilityOptionsSchema}).
 *
 * @category Capabilities
 */
export type CapabilityOptions = Readonly<z.input<typeof capabilityOptionsSchema>>

function checkMetric(metric: unknown): MetricName {
  if (!(METRIC_NAMES as readonly unknown[]).includes(metric)) {
    throw new ConfigError('metric', `'${String(metric)}' is not a metric; expected one of ${METRIC_NAMES.join(', ')}`)
  }
  return metric as MetricName
}

function checkCount(count: unknown, name = 'count'): number {
  return checkRange(name, count as number, { min: 1, max: 1 << 20, integer: true })
}

/**
 * Turns a batch in the `@attnlab/markov` layout (tokens and loss mask `[batch, seqLength]`) into
 * next-token evaluation data: inputs `tokens[:, :-1]`, target of position p is `tokens[:, p+1]`,
 * scored where `lossMask[:, p+1] = 1`.
 *
 * @param batch - sequences of at least 2 tokens
 * @returns the evaluation set (`length = seqLength - 1`)
 * @throws `InvalidArgumentError` (`@attnlab/core`) if the batch is malformed or scores nothing
 * @category Capabilities
 */
export function evaluationSetFromBatch(batch: TokenBatch): EvaluationSet {
  const { tokens, lossMask, batchSize, seqLength } = batch
  if (!Number.isSafeInteger(batchSize) || batchSize < 1 || !Number.isSafeInteger(seqLength) || seqLength < 2) {
    throw new InvalidArgumentError(
      `batch is ${batchSize} x ${seqLength}; expected at least one sequence of at least 2 tokens`,
    )
  }
  if (tokens.length !== batchSize * seqLength || lossMask.length !== batchSize * seqLength) {
    throw new InvalidArgumentError(
      `batch arrays have ${tokens.length} tokens and ${lossMask.length} mask entries; expected ` +
        `${batchSize * seqLength}`,
    )
  }
  const length = seqLength - 1
  const inputs = new Int32Array(batchSize * length)
  const scored: number[] = []
  const targets: number[] = []
  for (let b = 0; b < batchSize; b++) {
    for (let p = 0; p < length; p++) {
      inputs[b * length + p] = tokens[b * seqLength + p] as number
      if (lossMask[b * seqLength + p + 1] === 1) {
        scored.push(b * length + p)
        targets.push(tokens[b * seqLength + p + 1] as number)
      }
    }
  }
  if (scored.length === 0) throw new InvalidArgumentError('the batch scores no position (lossMask[:, 1:] is all 0)')
  return {
    inputs,
    count: batchSize,
    length,
    scoredPositions: Int32Array.from(scored),
    targets: Int32Array.from(targets),
  }
}

/**
 * The capability of doing a task: next-token prediction on fresh sequences of an
 * `@attnlab/markov` task (any {@link Task}, including a {@link MixtureTask} component).
 *
 * @param task - the task (its `sample` draws the evaluation set once)
 * @param options - name (default the task kind), metric (default `loss`), count (default 128), seed
 * @throws `ConfigError` (`@attnlab/core`) for a bad metric or count
 * @example
 * ```ts
 * const capability = taskCapability(new SparseMarkovTask({ vocabSize: 10, spans: [1, 1, 1] }), { count: 256 })
 * ```
 * @category Capabilities
 */
export function taskCapability(task: Task, options: CapabilityOptions = {}): Capability {
  parseConfig(capabilityOptionsSchema, options, 'taskCapability')
  const metric = checkMetric(options.metric ?? 'loss')
  const count = checkCount(options.count ?? 128)
  const batch = task.sample(count, Rng.fromSeed(options.seed ?? 0).split('knockout/capability'))
  return {
    name: options.name ?? String(task.kind),
    description: `next-token ${metric} on ${count} sequences of ${String(task.kind)}`,
    metric,
    data: evaluationSetFromBatch(batch),
  }
}

/**
 * The capability of using one span of a sparse Markov chain: windows come from the chain, and
 * each scored position is scored against the distribution of the teacher restricted to that
 * span alone, `P_i(y | window) = softmax(c_i A_i a_i / tau)_y` with `a_i = sum_{p in span i} w_p
 * onehot(x_p)` (Yüksel et al., arXiv 2602.19143, the teacher of the authors' released code). In the
 * minimal model each head learns one span, so knocking out the head that owns span i removes
 * exactly this term from the logits: the planted ground truth of the knockout validation.
 *
 * @param task - the sparse Markov task
 * @param span - span index, oldest first (`0 .. K-1`)
 * @param options - name (default `span-{i}`), metric (default `loss`), count (default 128), seed
 * @throws `ConfigError` (`@attnlab/core`) for a span outside `[0, K)`, a bad metric or count
 * @category Capabilities
 */
export function sparseMarkovSpanCapability(
  task: SparseMarkovTask,
  span: number,
  options: CapabilityOptions = {},
): Capability {
  parseConfig(capabilityOptionsSchema, options, 'sparseMarkovSpanCapability')
  const K = task.teacher.spans.length
  if (!Number.isSafeInteger(span) || span < 0 || span >= K)
    throw new ConfigError('span', `${String(span)} is not a span index in [0, ${K})`)
  const metric = checkMetric(options.metric ?? 'loss')
  const count = checkCount(options.count ?? 128)
  const batch = task.sample(count, Rng.fromSeed(options.seed ?? 0).split('knockout/capability'))
  const data = evaluationSetFromBatch(batch)
  const d = task.vocabSize
  const C = task.contextLength
  const { matrices, weights, starts, spans, positionWeights, tau } = task.teacher
  const matrix = matrices[span] as Float64Array
  const scale = (weights[span] as number) / tau
  const distributions = new Float32Array(data.scoredPositions.length * d)
  const targets = new Int32Array(data.scoredPositions.length)
  const logits = new Float64Array(d)
  for (let s = 0; s < data.scoredPositions.length; s++) {
    const flat = data.scoredPositions[s] as number
    const b = Math.floor(flat / data.length)
    const p = flat % data.length // predicts token p + 1 from inputs 0..p
    const windowStart = p + 1 - C
    if (windowStart < 0)
      throw new InvalidArgumentError(`scored position ${p + 1} has fewer than C = ${C} tokens before it`)
    logits.fill(0)
    for (let j = 0; j < (spans[span] as number); j++) {
      const token = data.inputs[b * data.length + windowStart + (starts[span] as number) + j] as number
      const w = (positionWeights[j] as number) * scale
      for (let y = 0; y < d; y++) logits[y] = (logits[y] as number) + w * (matrix[y * d + token] as number)
    }
    let max = -Infinity
    let argmax = 0
    for (let y = 0; y < d; y++) {
      if ((logits[y] as number) > max) {
        max = logits[y] as number
        argmax = y
      }
    }
    let sum = 0
    for (let y = 0; y < d; y++) sum += Math.exp((logits[y] as number) - max)
    for (let y = 0; y < d; y++) distributions[s * d + y] = Math.exp((logits[y] as number) - max) / sum
    targets[s] = argmax
  }
  return {
    name: options.name ?? `span-${span}`,
    description:
      `${metric} against the teacher restricted to span ${span} ` + `(of ${K}, oldest first) on ${count} sequences`,
    metric,
    data: { ...data, targets, targetDistributions: distributions, targetWidth: d },
  }
}

/**
 * The schema of {@link InductionOptions}: the {@link capabilityOptionsSchema} options and the
 * probe's own (checked by {@link inductionCapability} against each other).
 *
 * @category Capabilities
 */
export const inductionOptionsSchema = capabilityOptionsSchema.extend({
  /** Length `L` of each random block that is repeated (default 16); a sequence has `prefix + 2L` tokens. */
  blockLength: customField<number>('length L of each repeated random block').optional(),
  /** Tokens put before the first copy (e.g. `[bos]`); default none. */
  prefix: customField<readonly number[]>('tokens put before the first copy').optional(),
  /**
   * The token ids random blocks are drawn from (uniformly, without repeats inside a block when
   * the pool allows). Give the ordinary word pieces of a tokenizer (no special or byte tokens).
   * Default `0 .. vocabSize - 1`.
   */
  tokens: customField<readonly number[]>('token ids random blocks are drawn from').optional(),
  /** Vocabulary size of the model (required when neither `tokens` nor `blocks` is given). */
  vocabSize: customField<number>('vocabulary size of the model').optional(),
  /**
   * Repeat these token blocks (e.g. tokenized held-out sentences) instead of random ones; `count`,
   * `blockLength`, `tokens` and `seed` are then ignored. Blocks of different lengths are padded.
   */
  blocks: customField<readonly (readonly number[])[]>('token blocks to repeat instead of random ones').optional(),
  /**
   * Score the in-context gain instead of the second copy alone: the metric on the second copy
   * minus the metric on the first copy (the same tokens predicted without a copy to look at).
   * This separates copying from ordinary next-token prediction; default false.
   */
  contrast: booleanField('score the in-context gain: second copy minus first copy').optional(),
})

/**
 * Options of {@link inductionCapability} (see {@link inductionOptionsSchema}).
 *
 * @category Capabilities
 */
export type InductionOptions = Readonly<z.input<typeof inductionOptionsSchema>>

/**
 * The copying / induction probe for any language model: a block of `L` tokens (random by
 * default), then the same block again; the second copy's tokens `2..L` are scored (its first
 * token cannot be predicted from the context). Induction heads make these predictions nearly
 * free (Olsson et al. 2022, "In-context learning and induction heads"). With `contrast`, the
 * score is the second copy minus the first copy (the in-context gain), which is 0 for a model
 * that does not copy at all.
 *
 * @param options - block length (default 16), prefix, token pool or vocabulary size, explicit
 *   blocks, contrast, metric (default `logprob`), count (default 64), seed
 * @throws `ConfigError` (`@attnlab/core`) for a missing pool, a pool with fewer than 2 tokens, a block
 *   length < 2 (or a given block shorter than 2 tokens), a bad metric or count
 * @example
 * ```ts
 * const probe = inductionCapability({ vocabSize: 512, prefix: [1], blockLength: 16 })
 * ```
 * @category Capabilities
 */
export function inductionCapability(options: InductionOptions): Capability {
  parseConfig(inductionOptionsSchema, options, 'inductionCapability')
  const metric = checkMetric(options.metric ?? 'logprob')
  const prefix = [...(options.prefix ?? [])]
  if (prefix.some((t) => !Number.isSafeInteger(t) || t < 0))
    throw new ConfigError('prefix', 'prefix token ids must be non-negative integers')
  let blocks: number[][]
  if (options.blocks !== undefined) {
    if (options.blocks.length === 0) throw new ConfigError('blocks', 'expected at least one block')
    blocks = options.blocks.map((block, i) => {
      if (block.length < 2)
        throw new ConfigError('blocks', `block ${i} has ${block.length} token(s); expected at least 2`)
      if (block.some((t) => !Number.isSafeInteger(t) || t < 0))
        throw new ConfigError('blocks', `block ${i} holds a token that is not a non-negative integer`)
      return [...block]
    })
  } else {
    const count = checkCount(options.count ?? 64)
    const L = options.blockLength ?? 16
    checkRange('blockLength', L, { min: 2, max: 4096, integer: true })
    let pool: number[]
    if (options.tokens !== undefined) {
      pool = [...new Set(options.tokens)]
      if (pool.some((t) => !Number.isSafeInteger(t) || t < 0))
        throw new ConfigError('tokens', 'token ids must be non-negative integers')
    } else {
      if (options.vocabSize === undefined)
        throw new ConfigError('vocabSize', 'give the vocabulary size or an explicit token pool')
      checkCount(options.vocabSize, 'vocabSize')
      pool = Array.from({ length: options.vocabSize }, (_, i) => i)
    }
    if (pool.length < 2)
      throw new ConfigError('tokens', `the token pool has ${pool.length} token(s); expected at least 2`)
    const rng = Rng.fromSeed(options.seed ?? 0).split('knockout/induction')
    const shuffled = [...pool]
    blocks = []
    for (let b = 0; b < count; b++) {
      if (pool.length >= L) {
        // A partial Fisher-Yates shuffle: L distinct tokens.
        for (let i = 0; i < L; i++) {
          const j = i + rng.int(shuffled.length - i)
          const tmp = shuffled[i] as number
          shuffled[i] = shuffled[j] as number
          shuffled[j] = tmp
        }
        blocks.push(shuffled.slice(0, L))
      } else {
        blocks.push(Array.from({ length: L }, () => pool[rng.int(pool.length)] as number))
      }
    }
  }
  const contrast = options.contrast ?? false
  const P = prefix.length
  const count = blocks.length
  // Inputs: prefix, block, block without its last token (nothing after it is scored).
  const length = P + 2 * Math.max(...blocks.map((b) => b.length)) - 1
  const inputs = new Int32Array(count * length)
  const inputMask = new Uint8Array(count * length)
  const scored: number[] = []
  const targets: number[] = []
  const weights: number[] = []
  const second = blocks.reduce((n, b) => n + b.length - 1, 0)
  blocks.forEach((block, b) => {
    const L = block.length
    const row = [...prefix, ...block, ...block.slice(0, L - 1)]
    row.forEach((t, p) => {
      inputs[b * length + p] = t
      inputMask[b * length + p] = 1
    })
    for (let i = 1; i < L; i++) {
      if (contrast) {
        // The first copy's token i, predicted from position P + i - 1 (no copy to look at yet).
        scored.push(b * length + P + i - 1)
        targets.push(block[i] as number)
        weights.push(-1 / second)
      }
      // The second copy's token i, predicted from position P + L + i - 1.
      scored.push(b * length + P + L + i - 1)
      targets.push(block[i] as number)
      weights.push(1 / second)
    }
  })
  const order = scored.map((_, i) => i).sort((x, y) => (scored[x] as number) - (scored[y] as number))
  const what =
    options.blocks !== undefined ? `${count} given blocks` : `${count} random ${blocks[0]?.length}-token blocks`
  return {
    name: options.name ?? (contrast ? 'induction-gain' : 'induction'),
    description: contrast
      ? `${metric} of the second copy minus the first copy of ${what} (in-context copying gain)`
      : `${metric} of the second copy of ${what} (copying / induction probe)`,
    metric,
    data: {
      inputs,
      count,
      length,
      scoredPositions: Int32Array.from(order, (i) => scored[i] as number),
      targets: Int32Array.from(order, (i) => targets[i] as number),
      scoreWeights: Float64Array.from(order, (i) => weights[i] as number),
      inputMask,
    },
  }
}

/**
 * Ordinary next-token prediction on given token sequences (e.g. tokenized held-out sentences):
 * every position after the first is scored. Sequences may differ in length; shorter ones are
 * padded at the end (padding is neither scored nor used by mean ablation).
 *
 * @param sequences - token ids per sequence (each at least 2 tokens; include BOS if the model uses one)
 * @param options - name (default `text`), metric (default `loss`), `maxLength` to truncate to
 * @throws `ConfigError` (`@attnlab/core`) for no sequences, a sequence shorter than 2 tokens, negative ids or a bad
 * metric
 * @category Capabilities
 */
export function textCapability(
  sequences: readonly (readonly number[])[],
  options: Omit<CapabilityOptions, 'count' | 'seed'> & { maxLength?: number } = {},
): Capability {
  const metric = checkMetric(options.metric ?? 'loss')
  if (sequences.length === 0) throw new ConfigError('sequences', 'expected at least one token sequence')
  const maxLength = options.maxLength ?? Infinity
  const rows = sequences.map((s, i) => {
    if (s.length < 2) throw new ConfigError('sequences', `sequence ${i} has ${s.length} token(s); expected at least 2`)
    if (s.some((t) => !Number.isSafeInteger(t) || t < 0))
      throw new ConfigError('sequences', `sequence ${i} holds a token that is not a non-negative integer`)
    return s.slice(0, Math.max(2, Math.min(s.length, maxLength)))
  })
  const length = Math.max(...rows.map((r) => r.length)) - 1
  const count = rows.length
  const inputs = new Int32Array(count * length)
  const inputMask = new Uint8Array(count * length)
  const scored: number[] = []
  const targets: number[] = []
  rows.forEach((row, b) => {
    for (let p = 0; p < row.length - 1; p++) {
      inputs[b * length + p] = row[p] as number
      inputMask[b * length + p] = 1
      scored.push(b * length + p)
      targets.push(row[p + 1] as number)
    }
  })
  return {
    name: options.name ?? 'text',
    description: `next-token ${metric} on ${count} text sequence(s), ${scored.length} predictions`,
    metric,
    data: {
      inputs,
      count,
      length,
      scoredPositions: Int32Array.from(scored),
      targets: Int32Array.from(targets),
      inputMask,
    },
  }
}

/**
 * Checks that a capability fits a model: inputs within the vocabulary and context, targets (or
 * target distributions) within the vocabulary, consistent array sizes.
 *
 * @param capability - the capability
 * @param model - `{ dVocab, nCtx }` of the model
 * @throws `InvalidArgumentError` (`@attnlab/core`) naming the capability and the offending value
 * @category Capabilities
 */
export function checkCapability(
  capability: Capability,
  model: { readonly dVocab: number; readonly nCtx: number },
): void {
  const { data, name } = capability
  const fail = (message: string): never => {
    throw new InvalidArgumentError(`capability '${name}': ${message}`)
  }
  checkMetric(capability.metric)
  if (!Number.isSafeInteger(data.count) || data.count < 1 || !Number.isSafeInteger(data.length) || data.length < 1)
    fail(`evaluation set is ${data.count} x ${data.length}`)
  if (data.length > model.nCtx)
    fail(`sequences of ${data.length} tokens exceed the model's context nCtx = ${model.nCtx}`)
  if (data.inputs.length !== data.count * data.length)
    fail(`inputs hold ${data.inputs.length} tokens; expected ${data.count * data.length}`)
  for (let i = 0; i < data.inputs.length; i++) {
    const t = data.inputs[i] as number
    if (!(t >= 0 && t < model.dVocab))
      fail(
        `input token ${t} (sequence ${Math.floor(i / data.length)}) is outside the model's vocabulary [0, ` +
          `${model.dVocab})`,
      )
  }
  if (data.scoredPositions.length === 0) fail('scores no position')
  if (data.targets.length !== data.scoredPositions.length)
    fail(`${data.targets.length} targets for ${data.scoredPositions.length} scored positions`)
  for (let s = 0; s < data.scoredPositions.length; s++) {
    const flat = data.scoredPositions[s] as number
    if (!(flat >= 0 && flat < data.count * data.length)) fail(`scored position ${flat} is outside the inputs`)
    const t = data.targets[s] as number
    if (!(t >= 0 && t < model.dVocab)) fail(`target token ${t} is outside the model's vocabulary [0, ${model.dVocab})`)
  }
  if (data.targetDistributions !== undefined) {
    const width = data.targetWidth ?? fail('targetDistributions given without targetWidth')
    if (width > model.dVocab)
      fail(`target distributions over ${width} tokens exceed the model's vocabulary ${model.dVocab}`)
    if (data.targetDistributions.length !== width * data.scoredPositions.length)
      fail(
        `target distributions hold ${data.targetDistributions.length} values; expected ` +
          `${width * data.scoredPositions.length}`,
      )
  }
  if (data.inputMask !== undefined && data.inputMask.length !== data.inputs.length)
    fail(`inputMask has ${data.inputMask.length} entries; expected ${data.inputs.length}`)
  if (data.scoreWeights !== undefined) {
    if (data.scoreWeights.length !== data.scoredPositions.length)
      fail(
        `scoreWeights has ${data.scoreWeights.length} entries; expected one per scored position ` +
          `(${data.scoredPositions.length})`,
      )
    if (data.scoreWeights.some((w) => !Number.isFinite(w))) fail('scoreWeights holds a non-finite weight')
  }
}

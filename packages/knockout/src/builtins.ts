/**
 * Built-in capabilities by name, for a model and what is known about it (its training task, its
 * tokenizer): what `attnlab knockout --capability NAME` resolves.
 *
 * | name | needs | what |
 * | --- | --- | --- |
 * | `induction` | - | random blocks repeated, the second copy scored ({@link inductionCapability}) |
 * | `induction-gain` | - | the same, second copy minus first copy (in-context copying gain) |
 * | `text` | a tokenizer (or token sequences) | next-token loss on held-out sentences ({@link HELD_OUT_SENTENCES}) |
 * | `repeat-text` | a tokenizer | held-out sentences repeated, the second copy scored |
 * | `repeat-gain` | a tokenizer | the same, second copy minus first copy |
 * | `name-recall`, `quote-close`, `pronoun` | a tokenizer, room in nCtx | story probes ({@link storyCapability}) |
 * | `task` | a training task | next-token loss on the task |
 * | `span-{i}` | a sparse-Markov task | the teacher restricted to span i ({@link sparseMarkovSpanCapability}) |
 * | component name | a {@link MixtureTask} | next-token loss on that component (with its prefix) |
 *
 * Any name takes a metric suffix: `induction@accuracy`, `text@logprob`. Every one but `span-{i}`
 * carries its {@link Capability.chance} level (a uniform guess over the vocabulary; 0 for a gain).
 *
 * @module
 */
import { ConfigError, type Task } from '@attnlab/core'
import { parseConfig, type z } from '@attnlab/core/schema'
import { SparseMarkovTask } from '@attnlab/markov'
import {
  METRIC_NAMES,
  capabilityOptionsSchema,
  chanceLevel,
  inductionCapability,
  sparseMarkovSpanCapability,
  taskCapability,
  textCapability,
  type Capability,
  type MetricName,
} from './capability.ts'
import { MixtureTask } from './mixture.ts'
import { HELD_OUT_SENTENCES } from './sentences.ts'
import { STORY_CAPABILITY_NAMES, storyCapability, storyCapabilityFits, type StoryCapabilityName } from './stories.ts'

/**
 * What is known about a model, for resolving built-in capability names.
 *
 * @category Capabilities
 */
export interface BuiltinContext {
  /** The model's vocabulary size. */
  readonly dVocab: number
  /** The model's context length (sequences are cut to fit). */
  readonly nCtx: number
  /** The task the model was trained on (attnlab checkpoints store it), if any. */
  readonly task?: Task
  /** Encodes text to token ids (BOS first when the model uses one), if a tokenizer is known. */
  readonly encode?: (text: string) => number[]
  /** Token ids random induction blocks are drawn from (default: all ids except `exclude`). */
  readonly tokenPool?: readonly number[]
  /** Token ids never drawn into random blocks (e.g. BOS/EOS), when there is no explicit pool. */
  readonly exclude?: readonly number[]
  /** The BOS token, put before probe sequences, if the model uses one. */
  readonly bos?: number
  /** Sentences for `text`, `repeat-text`, `repeat-gain` (default {@link HELD_OUT_SENTENCES}). */
  readonly sentences?: readonly string[]
}

/**
 * Options of {@link builtinCapability}.
 *
 * @category Capabilities
 */
export type BuiltinOptions = Readonly<z.input<typeof builtinOptionsSchema>>

/**
 * The schema of {@link BuiltinOptions}: the count (sequences in generated evaluation sets; default
 * 64 for probes, 128 for tasks) and seed (default 0) of {@link capabilityOptionsSchema}.
 *
 * @category Capabilities
 */
export const builtinOptionsSchema = capabilityOptionsSchema.pick({ count: true, seed: true })

/**
 * The built-in capability names available for a context, in a stable order.
 *
 * @param context - what is known about the model
 * @category Capabilities
 */
export function builtinCapabilityNames(context: BuiltinContext): string[] {
  const names = ['induction', 'induction-gain']
  const encode = context.encode
  if (encode !== undefined) {
    names.push('text', 'repeat-text', 'repeat-gain')
    names.push(...STORY_CAPABILITY_NAMES.filter((name) => storyCapabilityFits(name, encode, context.nCtx)))
  }
  const task = context.task
  if (task !== undefined) {
    names.push('task')
    if (task instanceof SparseMarkovTask)
      task.teacher.spans.forEach((_, i) => {
        names.push(`span-${i}`)
      })
    if (task instanceof MixtureTask) for (const c of task.components) if (!names.includes(c.name)) names.push(c.name)
  }
  return names
}

/**
 * Parses `name` or `name@metric`.
 *
 * @throws `ConfigError` (`@attnlab/core`) for an empty name or an unknown metric
 * @category Capabilities
 */
export function parseCapabilityName(spec: string): { name: string; metric: MetricName | undefined } {
  const [name = '', metric, extra] = spec.trim().split('@')
  if (name.length === 0 || extra !== undefined)
    throw new ConfigError('capability', `'${spec}' is not a capability; expected NAME or NAME@METRIC`)
  if (metric !== undefined && !(METRIC_NAMES as readonly string[]).includes(metric)) {
    throw new ConfigError(
      'capability',
      `'${spec}': '${metric}' is not a metric; expected one of ${METRIC_NAMES.join(', ')}`,
    )
  }
  return { name, metric: metric as MetricName | undefined }
}

/**
 * Builds a built-in capability by name (see the module table), sized to the model's context.
 *
 * @param spec - `name` or `name@metric`
 * @param context - what is known about the model
 * @param options - count and seed of generated sets
 * @returns the capability (its name is `spec` without the metric suffix, plus `@metric` when one was given)
 * @throws `ConfigError` (`@attnlab/core`) naming the available capabilities when `spec` is unknown or needs
 *   a tokenizer/task the context lacks
 * @category Capabilities
 */
export function builtinCapability(spec: string, context: BuiltinContext, options: BuiltinOptions = {}): Capability {
  parseConfig(builtinOptionsSchema, options, 'builtinCapability')
  const { name, metric } = parseCapabilityName(spec)
  const available = builtinCapabilityNames(context)
  if (!available.includes(name)) {
    const story = (STORY_CAPABILITY_NAMES as readonly string[]).includes(name)
    const why =
      story && context.encode !== undefined
        ? ` (its prompts do not fit the model's context of ${context.nCtx} tokens)`
        : story || ['text', 'repeat-text', 'repeat-gain'].includes(name)
          ? ' (it needs a tokenizer)'
          : name === 'task' || /^span-\d+$/.test(name)
            ? ' (it needs a model trained on a task; attnlab checkpoints record it)'
            : ''
    throw new ConfigError(
      'capability',
      `'${name}' is not available for this model${why}; available: ${available.join(', ')}`,
    )
  }
  const gain =
    name === 'induction-gain' || name === 'repeat-gain' || (STORY_CAPABILITY_NAMES as readonly string[]).includes(name)
  // A span's targets are the teacher restricted to that span: a model that predicts the whole
  // teacher can score worse than a uniform guess on them, so a span has no chance level.
  const chance = (capability: Capability): number | undefined =>
    /^span-\d+$/.test(name) ? undefined : chanceLevel(capability.metric, context.dVocab, gain)
  const withName = (capability: Capability): Capability => {
    const level = chance(capability)
    return {
      ...capability,
      ...(metric === undefined ? {} : { name: `${name}@${metric}` }),
      ...(level === undefined ? {} : { chance: level }),
    }
  }
  const common = {
    ...(metric === undefined ? {} : { metric }),
    ...(options.seed === undefined ? {} : { seed: options.seed }),
  }
  const prefix = context.bos === undefined ? [] : [context.bos]
  const maxBlock = Math.floor((context.nCtx - prefix.length + 1) / 2)
  if (name === 'induction' || name === 'induction-gain') {
    if (maxBlock < 2)
      throw new ConfigError('capability', `the model's context (${context.nCtx}) is too short for an induction probe`)
    const exclude = new Set(context.exclude ?? [])
    const tokens =
      context.tokenPool ?? Array.from({ length: context.dVocab }, (_, i) => i).filter((t) => !exclude.has(t))
    return withName(
      inductionCapability({
        ...common,
        name,
        tokens,
        prefix,
        blockLength: Math.min(16, maxBlock),
        count: options.count ?? 64,
        contrast: name === 'induction-gain',
      }),
    )
  }
  if ((STORY_CAPABILITY_NAMES as readonly string[]).includes(name)) {
    const encode = context.encode as (text: string) => number[]
    return withName(
      storyCapability(name as StoryCapabilityName, encode, {
        ...common,
        nCtx: context.nCtx,
        ...(options.count === undefined ? {} : { count: options.count }),
      }),
    )
  }
  if (name === 'text' || name === 'repeat-text' || name === 'repeat-gain') {
    const encode = context.encode as (text: string) => number[]
    const sequences = (context.sentences ?? HELD_OUT_SENTENCES).map((s) => encode(s))
    if (name === 'text') return withName(textCapability(sequences, { ...common, name, maxLength: context.nCtx + 1 }))
    // Blocks without the BOS the encoder put first; the probe puts the prefix back once.
    const blocks = sequences
      .map((ids) => (context.bos !== undefined && ids[0] === context.bos ? ids.slice(1) : ids).slice(0, maxBlock))
      .filter((b) => b.length >= 2)
    return withName(inductionCapability({ ...common, name, blocks, prefix, contrast: name === 'repeat-gain' }))
  }
  const task = context.task as Task
  const count = options.count ?? 128
  if (name === 'task') return withName(taskCapability(task, { ...common, name, count }))
  const span = /^span-(\d+)$/.exec(name)
  if (span !== null && task instanceof SparseMarkovTask)
    return withName(sparseMarkovSpanCapability(task, Number(span[1]), { ...common, name, count }))
  const mixture = task as MixtureTask
  return withName(taskCapability(mixture.only(name), { ...common, name, count }))
}

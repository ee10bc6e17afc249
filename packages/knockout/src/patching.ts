/**
 * Causal patching between two models of the same shape, one head at a time: the donor's attention
 * scores (or pattern) of one head are recorded with `runWithCache` and written into the
 * recipient's forward pass by a per-pass hook, and the recipient's probability of the target token
 * is compared with and without the patch. With the donor a checkpoint after an emergence and the
 * recipient one before it (same run), the heads whose patch raises p(target) are the heads whose
 * new routing carries the capability (Baherwani et al., arXiv 2606.25010, the Pythia analysis of
 * section 5, done here on our own runs; hook semantics of TransformerLens' `patching`).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError, NonFiniteError } from '@attnlab/core'
import {
  booleanField,
  configSchema,
  customField,
  enumField,
  integerField,
  parseConfig,
  type z,
} from '@attnlab/core/schema'
import { hasAttention, hookName, type HookName, type Transformer } from '@attnlab/transformer'
import { checkCapability, type Capability, type EvaluationSet } from './capability.ts'
import { checkHead, formatHead, headIndex, type HeadLayout, type HeadRef } from './heads.ts'
import type { HeadHeatmap } from './report.ts'

/**
 * Where a head is patched: `attn_scores` (`blocks.{l}.attn.hook_attn_scores`, the scaled
 * pre-softmax scores, `-Infinity` above the diagonal) or `pattern` (`blocks.{l}.attn.hook_pattern`,
 * their softmax). A head's pattern is the softmax of its own scores, so both give the same
 * numbers unless something between them changes the scores (an attention bias hook).
 *
 * @category Patching
 */
export type PatchPoint = 'attn_scores' | 'pattern'

/** The patch points, for validation and help texts. @category Patching */
export const PATCH_POINTS: readonly PatchPoint[] = Object.freeze(['attn_scores', 'pattern'])

/**
 * The schema of {@link PatchOptions}: each option's meaning, range and default, declared once.
 *
 * @category Patching
 */
export const patchOptionsSchema = configSchema({
  /** The heads to patch, one at a time (default: every head, layer-major); checked against the head grid. */
  heads: customField<readonly HeadRef[]>('the heads to patch, one at a time (default: every head)').optional(),
  /** Where to patch (default `attn_scores`; see {@link PatchPoint}). */
  at: enumField('patch point', PATCH_POINTS as [PatchPoint, ...PatchPoint[]]).default('attn_scores'),
  /**
   * Upper bound on tokens (`sequences * length`) per forward pass (default 16384); the donor's
   * recorded scores of a pass are also capped at 2^24 values.
   */
  maxTokensPerPass: integerField('upper bound on tokens (sequences x length) per forward pass', { min: 1 }).default(
    16384,
  ),
  /**
   * Also patch all of `heads` at once, in one more pass per chunk (default false): whether the routing of
   * those heads together carries what none carries alone.
   */
  together: booleanField('also patch all of the heads at once').default(false),
})

/**
 * Options of {@link patchHeadsBetween} (see {@link patchOptionsSchema}).
 *
 * @category Patching
 */
export type PatchOptions = Readonly<z.input<typeof patchOptionsSchema>>

/**
 * The effect of patching one head: the recipient's mean p(target) on the scored positions without
 * (`before`) and with (`after`) the donor's scores for this head, and `delta = after - before`
 * (probabilities in [0, 1]; positive = the donor's head helps the recipient).
 *
 * @category Patching
 */
export interface HeadPatch extends HeadRef {
  readonly before: number
  readonly after: number
  readonly delta: number
}

/**
 * What {@link patchHeadsBetween} returns.
 *
 * @category Patching
 */
export interface PatchingResult {
  /** Where the heads were patched. */
  readonly at: PatchPoint
  /** The hook point patched, with `{l}` for the layer (`blocks.{l}.attn.hook_attn_scores`). */
  readonly hook: string
  /** The recipient's and the donor's mean p(target), unpatched. */
  readonly recipient: number
  readonly donor: number
  /** One entry per patched head, in the order asked. */
  readonly heads: readonly HeadPatch[]
  /**
   * With `together`: the recipient's mean p(target) with every head of `heads` patched at once, and the change
   * (null otherwise).
   */
  readonly together: { readonly before: number; readonly after: number; readonly delta: number } | null
  /** The head grid (of both models). */
  readonly layout: HeadLayout
  /** Scored positions averaged over. */
  readonly scored: number
  /** Forward passes run (both models). */
  readonly forwardPasses: number
  /** Wall time in seconds. */
  readonly seconds: number
}

/** The name of the hook point `at` of `layer`. */
function pointName(at: PatchPoint, layer: number): HookName {
  return at === 'attn_scores' ? hookName.attnScores(layer) : hookName.pattern(layer)
}

/** Checks that the two models can exchange heads: the same head grid and vocabulary. */
function checkCompatible(recipient: Transformer, donor: Transformer): HeadLayout {
  const a = recipient.config
  const b = donor.config
  for (const [name, config] of [
    ['recipient', a],
    ['donor', b],
  ] as const) {
    if (!hasAttention(config)) {
      throw new InvalidArgumentError(
        `the ${name} is a ${config.architecture} model, which has no attention heads to patch ` +
          '(no blocks.{l}.attn.hook_attn_scores)',
        { architecture: config.architecture },
      )
    }
  }
  for (const key of ['nLayers', 'nHeads', 'dVocab'] as const) {
    if (a[key] !== b[key]) {
      throw new InvalidArgumentError(
        `the donor has ${key} = ${b[key]} but the recipient has ${key} = ${a[key]}; patching heads needs two models ` +
          'with the same layers, heads and vocabulary (for example two checkpoints of one run)',
        { key, recipient: a[key], donor: b[key] },
      )
    }
  }
  return { nLayers: a.nLayers, nHeads: a.nHeads }
}

/** The heads to patch, checked: inside the layout, none twice, at least one. */
function resolveHeads(heads: readonly HeadRef[] | undefined, layout: HeadLayout): HeadRef[] {
  if (heads === undefined) {
    return Array.from({ length: layout.nLayers * layout.nHeads }, (_, i) => ({
      layer: Math.floor(i / layout.nHeads),
      head: i % layout.nHeads,
    }))
  }
  if (!Array.isArray(heads) || heads.length === 0) {
    throw new InvalidArgumentError(`heads must list at least one head, got ${JSON.stringify(heads)}`)
  }
  const seen = new Set<number>()
  return heads.map((head) => {
    checkHead(head, layout)
    const index = headIndex(head, layout)
    if (seen.has(index)) throw new InvalidArgumentError(`heads lists ${formatHead(head)} twice`, { head })
    seen.add(index)
    return { layer: head.layer, head: head.head }
  })
}

/** `activation` with head `head` (axis 1 of `[batch, nHeads, queryPos, keyPos]`) taken from `donor`. */
function withDonorHead(activation: tf.Tensor, donor: tf.Tensor, head: number): tf.Tensor {
  const nHeads = activation.shape[1] as number
  const parts: tf.Tensor[] = []
  if (head > 0) parts.push(tf.slice(activation, [0, 0, 0, 0], [-1, head, -1, -1]))
  parts.push(tf.slice(donor, [0, head, 0, 0], [-1, 1, -1, -1]))
  if (head + 1 < nHeads) parts.push(tf.slice(activation, [0, head + 1, 0, 0], [-1, nHeads - head - 1, -1, -1]))
  return parts.length === 1 ? (parts[0] as tf.Tensor) : tf.concat(parts, 1)
}

/** The probability of each scored target in `logits` `[rows, length, dVocab]` (disposes `logits`). */
async function targetProbabilities(
  logits: tf.Tensor3D,
  gather: Int32Array,
  targets: Int32Array,
): Promise<Float32Array> {
  const [rows, length, dVocab] = logits.shape
  const picked = tf.tidy(() => {
    const flat = tf.reshape(logits, [rows * length, dVocab])
    const rowsAt = tf.gather(flat, tf.tensor1d(gather, 'int32')) as tf.Tensor2D // [scored, dVocab]
    const probabilities = tf.softmax(rowsAt) // [scored, dVocab]
    const index = tf.stack([tf.range(0, gather.length, 1, 'int32'), tf.tensor1d(targets, 'int32')], 1) // [scored, 2]
    return tf.gatherND(probabilities, index) as tf.Tensor1D // [scored]
  })
  logits.dispose()
  const values = (await picked.data()) as Float32Array
  picked.dispose()
  return values
}

function sum(values: Float32Array): number {
  let total = 0
  for (const v of values) total += v
  return total
}

/**
 * Patches each head of `options.heads` (default: all), one at a time, from `donor` into
 * `recipient`, and reports the recipient's mean probability of the target token on the scored
 * positions of `batch` before and after (Baherwani et al., arXiv 2606.25010, section 5: a
 * post-emergence checkpoint's attention copied into a pre-emergence one). The donor runs once per
 * chunk of sequences with `runWithCache`, recording `blocks.{l}.attn.hook_attn_scores` (or
 * `hook_pattern`, see {@link PatchPoint}); the recipient runs once unpatched and once per head
 * with a hook that replaces that head's `[batch, queryPos, keyPos]` slice by the donor's. Neither
 * model is modified, and the hooks live only for their pass. The two models may differ in
 * anything but their layers, heads and vocabulary (architecture, widths, weights).
 *
 * p(target) is `softmax(logits)[target]` at each scored position, averaged with equal weights
 * (a set's `scoreWeights` and soft `targetDistributions` are not used: the target is the
 * set's `targets` token). Patching a model into itself changes nothing.
 *
 * @param recipient - the model patched into (e.g. a pre-emergence checkpoint)
 * @param donor - the model whose heads are copied (e.g. a post-emergence checkpoint of the same run)
 * @param batch - the sequences and their scored positions (a capability's `data`, or
 *   `evaluationSetFromBatch(task.sample(...))`), inputs `[count, length]` with `length <= nCtx` of both
 * @param options - heads, patch point, pass size, whether to also patch the heads together
 * @returns per head: mean p(target) before and after and the change; the donor's and the
 *   recipient's unpatched p(target)
 * @throws `InvalidArgumentError` (`@attnlab/core`) for models with different layers, heads or
 *   vocabulary, a head outside the grid or listed twice, an evaluation set that does not fit
 *   either model, or a model whose forward pass never reached the hook point; `ConfigError` for
 *   an unknown option name (with a did-you-mean), an unknown `at`, a bad pass size or a `together` that is not a
 *   boolean; `NonFiniteError` when a model's probabilities are not finite
 * @example
 * ```ts
 * const { data } = taskCapability(task, { count: 128 })
 * const result = await patchHeadsBetween(early, late, data)
 * for (const h of result.heads) console.log(formatHead(h), h.before.toFixed(3), h.after.toFixed(3))
 * ```
 * @category Patching
 */
export async function patchHeadsBetween(
  recipient: Transformer,
  donor: Transformer,
  batch: EvaluationSet,
  options: PatchOptions = {},
): Promise<PatchingResult> {
  const settings = parseConfig(patchOptionsSchema, options, 'patchHeadsBetween')
  const started = performance.now()
  const layout = checkCompatible(recipient, donor)
  const set: Capability = { name: 'patching set', description: '', metric: 'logprob', data: batch }
  checkCapability(set, recipient.config)
  checkCapability(set, donor.config)
  const { at } = settings
  const heads = resolveHeads(settings.heads, layout)
  const maxTokens = settings.maxTokensPerPass
  const { count, length, scoredPositions, targets } = batch
  const { nLayers, nHeads, dVocab } = recipient.config
  const layers = [...new Set(heads.map((h) => h.layer))]
  const rowsPerPass = Math.max(
    1,
    Math.min(
      Math.floor(maxTokens / length),
      Math.floor((1 << 23) / (length * dVocab)),
      Math.floor((1 << 24) / (layers.length * nHeads * length * length)),
    ),
  )
  // Scored positions in flat order, so that each chunk of sequences takes a contiguous run.
  const order = Int32Array.from(scoredPositions.keys()).sort(
    (a, b) => (scoredPositions[a] as number) - (scoredPositions[b] as number),
  )
  // One pass per group of heads patched at once: each head alone, then (together) all of them.
  const groups: HeadRef[][] = heads.map((head) => [head])
  if (settings.together) groups.push(heads)
  const sums = { recipient: 0, donor: 0, patched: new Float64Array(groups.length) }
  let passes = 0
  let next = 0
  for (let first = 0; first < count; first += rowsPerPass) {
    const rows = Math.min(rowsPerPass, count - first)
    const gatherList: number[] = []
    const targetList: number[] = []
    while (next < order.length && (scoredPositions[order[next] as number] as number) < (first + rows) * length) {
      const s = order[next] as number
      gatherList.push((scoredPositions[s] as number) - first * length)
      targetList.push(targets[s] as number)
      next++
    }
    if (gatherList.length === 0) continue
    const gather = Int32Array.from(gatherList)
    const chunkTargets = Int32Array.from(targetList)
    const input = tf.tensor2d(batch.inputs.subarray(first * length, (first + rows) * length), [rows, length], 'int32')
    try {
      const names = layers.map((layer) => pointName(at, layer))
      const recorded = donor.runWithCache(input, { namesFilter: names })
      try {
        sums.donor += sum(await targetProbabilities(recorded.logits, gather, chunkTargets))
        sums.recipient += sum(await targetProbabilities(recipient.forward(input), gather, chunkTargets))
        passes += 2
        for (const [i, group] of groups.entries()) {
          const applied = new Set<HookName>()
          const fwdHooks = [...new Set(group.map((h) => h.layer))].map((layer) => {
            const name = pointName(at, layer)
            const source = recorded.cache.get(name)
            const inLayer = group.filter((h) => h.layer === layer).map((h) => h.head)
            const hook = (activation: tf.Tensor): tf.Tensor => {
              applied.add(name)
              return inLayer.reduce((patched, head) => withDonorHead(patched, source, head), activation)
            }
            return [name, hook] as const
          })
          const logits = recipient.runWithHooks(input, { fwdHooks })
          const missed = fwdHooks.map(([name]) => name).find((name) => !applied.has(name))
          if (missed !== undefined) {
            logits.dispose()
            throw new InvalidArgumentError(
              `the recipient's forward pass never reached '${missed}'; it cannot be patched there (its attention ` +
                'kernel or architecture has no such hook point)',
              { hook: missed },
            )
          }
          sums.patched[i] = (sums.patched[i] as number) + sum(await targetProbabilities(logits, gather, chunkTargets))
          passes += 1
        }
      } finally {
        recorded.cache.dispose()
      }
    } finally {
      input.dispose()
    }
  }
  const scored = scoredPositions.length
  const recipientMean = sums.recipient / scored
  const donorMean = sums.donor / scored
  const patched = heads.map((head, i) => {
    const after = (sums.patched[i] as number) / scored
    return { layer: head.layer, head: head.head, before: recipientMean, after, delta: after - recipientMean }
  })
  const togetherAfter = settings.together ? (sums.patched[heads.length] as number) / scored : null
  const together =
    togetherAfter === null
      ? null
      : { before: recipientMean, after: togetherAfter, delta: togetherAfter - recipientMean }
  for (const [what, value] of [
    ['recipient', recipientMean],
    ['donor', donorMean],
    ...patched.map((h) => [`recipient with ${formatHead(h)} patched`, h.after] as const),
    ...(together === null ? [] : [['recipient with every head patched', together.after] as const]),
  ] as const) {
    if (!Number.isFinite(value)) {
      throw new NonFiniteError(`patching: the ${what}'s mean p(target) is ${value} (non-finite logits)`)
    }
  }
  return {
    at,
    hook: at === 'attn_scores' ? 'blocks.{l}.attn.hook_attn_scores' : 'blocks.{l}.attn.hook_pattern',
    recipient: recipientMean,
    donor: donorMean,
    heads: patched,
    together,
    layout: { nLayers, nHeads },
    scored,
    forwardPasses: passes,
    seconds: (performance.now() - started) / 1000,
  }
}

/**
 * The change in p(target) of each patched head as a layers x heads matrix for
 * {@link heatmapSpec} (NaN for heads not patched), the head with the largest gain highlighted.
 *
 * @param result - from {@link patchHeadsBetween}
 * @param name - what the heatmap is of (default `p(target)`), shown in its title
 * @category Patching
 */
export function patchingHeatmap(result: PatchingResult, name = 'p(target)'): HeadHeatmap {
  const { nLayers, nHeads } = result.layout
  const values = Array.from({ length: nLayers }, () => new Array<number>(nHeads).fill(Number.NaN))
  let best: HeadPatch | null = null
  for (const head of result.heads) {
    ;(values[head.layer] as number[])[head.head] = head.delta
    if (head.delta > 0 && (best === null || head.delta > best.delta)) best = head
  }
  return {
    label: `change in p(target) when the donor's head is patched in at ${result.hook.replace('{l}', 'l')}`,
    capability: name,
    values,
    highlighted: best === null ? [] : [{ layer: best.layer, head: best.head }],
  }
}

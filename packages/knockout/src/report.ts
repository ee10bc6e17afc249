/**
 * Reports: the per-head score heatmap (layers x heads) of a localization, as data and as a
 * Vega-Lite spec, and the effect of knocking out a set of heads on a target capability and on
 * every other capability given (off-target controls, always reported: Bair et al., arXiv
 * 2603.03335, Figure 1; a head can matter for the answer format rather than the capability).
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import { customField, enumField, integerField, parseConfig, type z } from '@attnlab/core/schema'
import type { Transformer } from '@attnlab/transformer'
import { ABLATION_MODES, HeadAblation, type AblationMode, type ReferenceInputs } from './ablation.ts'
import { performance as performanceOf, type Capability, type MetricName } from './capability.ts'
import { formatHead, headIndex, type HeadLayout, type HeadRef } from './heads.ts'
import type { LocalizationResult } from './localize.ts'
import { masksFromHeadSets } from './masks.ts'
import { passOptionsSchema, scoreMasks } from './scoring.ts'

/**
 * A per-head matrix, `values[layer][head]`.
 *
 * @category Reports
 */
export interface HeadHeatmap {
  /** What the values are (e.g. `Lasso coefficient (standardized score)`). */
  readonly label: string
  /** The capability. */
  readonly capability: string
  /** `[nLayers][nHeads]`. */
  readonly values: readonly (readonly number[])[]
  /** The top-k heads of the localization (highlighted in the plot). */
  readonly highlighted: readonly HeadRef[]
}

/**
 * The per-head scores of a localization as a layers x heads matrix: Lasso coefficients for
 * compressed sensing (negative = needed), performance drops for the sweeps (positive = needed;
 * NaN for heads the greedy search never evaluated).
 *
 * @param result - any localization result
 * @category Reports
 */
export function headHeatmap(result: LocalizationResult): HeadHeatmap {
  const { nLayers, nHeads } = result.layout
  const values = Array.from({ length: nLayers }, (_, l) =>
    Array.from({ length: nHeads }, (_, h) => result.scores[l * nHeads + h] as number),
  )
  const label =
    result.method === 'compressed-sensing'
      ? 'Lasso coefficient (standardized score; negative = needed)'
      : `performance drop when knocked out (${result.metric}; positive = needed)`
  return {
    label,
    capability: result.capability,
    values,
    highlighted: result.top.map(({ layer, head }) => ({ layer, head })),
  }
}

/**
 * A Vega-Lite (v6) spec of a heatmap: one cell per head, a diverging color scale centered at 0,
 * the top-k heads outlined and labeled with their values. Render it with any Vega-Lite renderer
 * (the CLI turns it into SVG).
 *
 * @param heatmap - from {@link headHeatmap}
 * @param title - plot title (default: the capability and label)
 * @returns a plain-JSON Vega-Lite spec with inline data
 * @category Reports
 */
export function heatmapSpec(heatmap: HeadHeatmap, title?: string): Record<string, unknown> {
  const highlighted = new Set(heatmap.highlighted.map((h) => `${h.layer}.${h.head}`))
  const rows = heatmap.values.flatMap((row, layer) =>
    row.map((value, head) => ({
      layer: `L${layer}`,
      head: `H${head}`,
      value: Number.isFinite(value) ? value : null,
      label: Number.isFinite(value) ? value.toPrecision(2) : '',
      top: highlighted.has(`${layer}.${head}`),
    })),
  )
  const finite = heatmap.values.flat().filter((v) => Number.isFinite(v))
  const extent = Math.max(1e-12, ...finite.map((v) => Math.abs(v)))
  const nHeads = heatmap.values[0]?.length ?? 0
  const nLayers = heatmap.values.length
  const cell = Math.max(14, Math.min(40, Math.floor(640 / Math.max(1, nHeads))))
  const layerOrder = Array.from({ length: nLayers }, (_, l) => `L${l}`)
  const headOrder = Array.from({ length: nHeads }, (_, h) => `H${h}`)
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: title ?? `${heatmap.capability}: ${heatmap.label}`,
    data: { values: rows },
    width: cell * nHeads,
    height: cell * nLayers,
    encoding: {
      x: { field: 'head', type: 'ordinal', sort: headOrder, title: 'head' },
      y: { field: 'layer', type: 'ordinal', sort: layerOrder, title: 'layer' },
    },
    layer: [
      {
        mark: { type: 'rect' },
        encoding: {
          color: {
            field: 'value',
            type: 'quantitative',
            scale: { scheme: 'redblue', domain: [-extent, extent] },
            title: 'score',
          },
          tooltip: [{ field: 'layer' }, { field: 'head' }, { field: 'value', type: 'quantitative' }],
        },
      },
      {
        transform: [{ filter: 'datum.top' }],
        mark: { type: 'rect', fill: null, stroke: 'black', strokeWidth: 2 },
      },
      ...(nHeads * nLayers <= 256
        ? [
            {
              mark: { type: 'text', fontSize: Math.max(7, Math.min(11, cell / 3)) },
              encoding: { text: { field: 'label' } },
            },
          ]
        : []),
    ],
  }
}

/**
 * One capability's line of a knockout report.
 *
 * @category Reports
 */
export interface EffectRow {
  /** Capability name. */
  readonly capability: string
  /** `target` (the capability the heads were found for) or `control`. */
  readonly role: 'target' | 'control'
  /** Its metric. */
  readonly metric: MetricName
  /** Metric of the clean model. */
  readonly before: number
  /** Metric with the heads knocked out. */
  readonly after: number
  /** `after - before` (metric units). */
  readonly change: number
  /** Performance lost, `performance(before) - performance(after)` (metric units; positive = worse). */
  readonly hurt: number
  /** `hurt / |before|` (0 when `before` is 0). */
  readonly relativeHurt: number
}

/**
 * The effect of knocking out a set of heads on every capability given.
 *
 * @category Reports
 */
export interface EffectsReport {
  /** The heads knocked out. */
  readonly heads: readonly HeadRef[]
  /** The ablation used. */
  readonly mode: AblationMode
  /** One row per capability, in the order given. */
  readonly rows: readonly EffectRow[]
  /** The target's hurt (metric units), when a target was named. */
  readonly targetHurt: number | null
  /** The largest hurt among the controls (metric units), when there are controls. */
  readonly maxControlHurt: number | null
  /**
   * `targetHurt / maxControlHurt` (null without a target or controls; `Infinity` when no control
   * got worse). Compares raw metric units, so it is meaningful when target and controls share a
   * metric; see {@link EffectsReport.relativeRatio} otherwise.
   */
  readonly ratio: number | null
  /** The same ratio on relative hurts (`hurt / |before|`). */
  readonly relativeRatio: number | null
  /** Model evaluations spent (two per capability: clean and knocked out). */
  readonly evaluations: number
}

/**
 * The schema of {@link EffectsOptions}: the forward-pass options ({@link passOptionsSchema}) and
 * the report's own, each with its meaning and default, declared once.
 *
 * @category Reports
 */
export const effectsOptionsSchema = passOptionsSchema.extend({
  /** Name of the target capability (the others are controls); default none (all are listed as controls). */
  target: customField<string>('name of the target capability (the others are controls)').optional(),
  /** Ablation kind (default `zero`). */
  mode: enumField('ablation kind', ABLATION_MODES as [AblationMode, ...AblationMode[]]).optional(),
  /**
   * Reference sequences for mean/resample. Default: each capability's own sequences (so the
   * replacement activations come from the same distribution the capability is scored on).
   */
  reference: customField<ReferenceInputs>(
    "reference sequences for mean/resample (default: each capability's own)",
  ).optional(),
  /** Seed of the resample pairing (default 0). */
  resampleSeed: integerField('seed of the resample pairing').optional(),
})

/**
 * Options of {@link knockoutEffects} (see {@link effectsOptionsSchema}).
 *
 * @category Reports
 */
export type EffectsOptions = Readonly<z.input<typeof effectsOptionsSchema>>

/**
 * Knocks out `heads` and reports the metric of every capability before and after, with the
 * target-vs-control comparison.
 *
 * @param model - the model
 * @param heads - the heads to knock out (may be empty: then nothing changes)
 * @param capabilities - the target and the off-target controls (names must be unique)
 * @param options - target name, ablation, pass size
 * @returns one row per capability and the target/control ratios
 * @throws `ConfigError` (`@attnlab/core`) for duplicate capability names or an unknown target;
 *   `AttnlabError` (`@attnlab/core`) `INVALID_ARGUMENT` for heads outside the model; scoring errors
 * @example
 * ```ts
 * const report = await knockoutEffects(model, found.top, [spanCapability, ...controls], { target: 'span-2' })
 * report.ratio // how much more the target suffers than the worst-hit control
 * ```
 * @category Reports
 */
export async function knockoutEffects(
  model: Transformer,
  heads: readonly HeadRef[],
  capabilities: readonly Capability[],
  options: EffectsOptions = {},
): Promise<EffectsReport> {
  parseConfig(effectsOptionsSchema, options, 'knockoutEffects')
  const layout: HeadLayout = { nLayers: model.config.nLayers, nHeads: model.config.nHeads }
  for (const head of heads) headIndex(head, layout)
  const names = capabilities.map((c) => c.name)
  const duplicate = names.find((name, i) => names.indexOf(name) !== i)
  if (duplicate !== undefined) throw new ConfigError('capabilities', `capability '${duplicate}' is listed twice`)
  if (options.target !== undefined && !names.includes(options.target)) {
    throw new ConfigError('target', `'${options.target}' is not among the capabilities (${names.join(', ')})`)
  }
  const mode = options.mode ?? 'zero'
  const masks = masksFromHeadSets(layout, [[], heads])
  const rows: EffectRow[] = []
  let evaluations = 0
  for (const capability of capabilities) {
    const reference = options.reference ?? capability.data
    const ablation = await HeadAblation.create(
      model,
      mode,
      mode === 'zero'
        ? {}
        : { reference, ...(options.resampleSeed === undefined ? {} : { seed: options.resampleSeed }) },
    )
    try {
      const result = await scoreMasks(model, capability, masks, {
        ablation,
        ...(options.maxTokensPerPass === undefined ? {} : { maxTokensPerPass: options.maxTokensPerPass }),
        ...(options.batched === undefined ? {} : { batched: options.batched }),
      })
      evaluations += result.evaluations
      const before = result.values[0] as number
      const after = result.values[1] as number
      const hurt = performanceOf(before, capability.metric) - performanceOf(after, capability.metric)
      rows.push({
        capability: capability.name,
        role: capability.name === options.target ? 'target' : 'control',
        metric: capability.metric,
        before,
        after,
        change: after - before,
        hurt,
        relativeHurt: before === 0 ? 0 : hurt / Math.abs(before),
      })
    } finally {
      ablation.dispose()
    }
  }
  const target = rows.find((r) => r.role === 'target')
  const controls = rows.filter((r) => r.role === 'control')
  const ratio = (t: number, c: number): number => (c <= 0 ? (t > 0 ? Infinity : 0) : t / c)
  const maxControlHurt = controls.length === 0 ? null : Math.max(...controls.map((r) => r.hurt))
  const maxControlRelative = controls.length === 0 ? null : Math.max(...controls.map((r) => r.relativeHurt))
  return {
    heads: heads.map(({ layer, head }) => ({ layer, head })),
    mode,
    rows,
    targetHurt: target?.hurt ?? null,
    maxControlHurt,
    ratio: target === undefined || maxControlHurt === null ? null : ratio(target.hurt, maxControlHurt),
    relativeRatio:
      target === undefined || maxControlRelative === null ? null : ratio(target.relativeHurt, maxControlRelative),
    evaluations,
  }
}

/**
 * Precision and recall of a found head set against a reference set.
 *
 * @param found - heads a method reported
 * @param truth - the reference heads (e.g. from an exhaustive sweep, or planted)
 * @returns precision `|found ∩ truth| / |found|` (1 when nothing was found), recall
 *   `|found ∩ truth| / |truth|` (1 when the truth is empty), and the shared heads
 * @category Reports
 */
export function precisionRecall(
  found: readonly HeadRef[],
  truth: readonly HeadRef[],
): { precision: number; recall: number; hits: HeadRef[] } {
  const truthKeys = new Set(truth.map(formatHead))
  const foundKeys = [...new Set(found.map(formatHead))]
  const hits = found.filter(
    (h, i) => truthKeys.has(formatHead(h)) && found.findIndex((g) => formatHead(g) === formatHead(h)) === i,
  )
  return {
    precision: foundKeys.length === 0 ? 1 : hits.length / foundKeys.length,
    recall: truthKeys.size === 0 ? 1 : hits.length / truthKeys.size,
    hits: hits.map(({ layer, head }) => ({ layer, head })),
  }
}

/**
 * The heads an exhaustive sweep says a capability needs: those whose single knockout lowers
 * performance by at least `max(minDrop, relative * largestDrop)`.
 *
 * @param result - an exhaustive sweep
 * @param options - `minDrop` (metric units, default 0), `relative` (fraction of the largest drop,
 *   default 0.25)
 * @returns the heads, largest drop first
 * @throws `ConfigError` (`@attnlab/core`) for a negative `minDrop` or a `relative` outside [0, 1]
 * @category Reports
 */
export function sweepHeads(
  result: { readonly ranking: readonly { readonly layer: number; readonly head: number; readonly score: number }[] },
  options: { minDrop?: number; relative?: number } = {},
): HeadRef[] {
  const minDrop = options.minDrop ?? 0
  const relative = options.relative ?? 0.25
  if (!(minDrop >= 0)) throw new ConfigError('minDrop', `${String(minDrop)} is not a number >= 0`)
  if (!(relative >= 0 && relative <= 1)) throw new ConfigError('relative', `${String(relative)} is not in [0, 1]`)
  const largest = Math.max(0, ...result.ranking.map((h) => h.score))
  const threshold = Math.max(minDrop, relative * largest)
  return result.ranking.filter((h) => h.score > 0 && h.score >= threshold).map(({ layer, head }) => ({ layer, head }))
}

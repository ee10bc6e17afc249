/**
 * Configuration of the reduced gradient-flow model (Yüksel et al., arXiv 2602.19143, Eq. (4)):
 * the target's spans, importance weights and context length,
 * the number of heads, the flow variant, weight decay, the fast-value limit and the
 * initialisation noise.
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import {
  booleanField,
  configSchema,
  customField,
  enumField,
  integerField,
  listField,
  numberField,
  parseConfig,
  schemaDefaults,
  type z,
} from '@attnlab/core/schema'

/**
 * How attention moves (Yüksel et al., arXiv 2602.19143, Eq. (4), and the authors' released code).
 *
 * - `'replicator'`: `ds_k/dt = J(s_k) R^T V_k` - the replicator (mirror) flow of the paper
 *   notebook's "Equation (4)". Its first transition time grows like `sqrt(T)`.
 * - `'logit'`: exact gradient flow on the attention logits, `du_k/dt = J(s_k) R^T V_k` (so
 *   `ds_k/dt = J(s_k)^2 R^T V_k`, the default of the authors' ODE simulator). Its first transition time grows
 *   linearly with `T`.
 *
 * `J(s) = diag(s) - s s^T` is the softmax Jacobian and `R = G - sum_k V_k s_k^T` the residual.
 *
 * @category Config
 */
export type DynamicsVariant = 'replicator' | 'logit'

/** Every accepted {@link DynamicsVariant}, for flag parsers. @category Config */
export const DYNAMICS_VARIANTS: readonly DynamicsVariant[] = Object.freeze(['replicator', 'logit'])

/**
 * The schema of a {@link DynamicsConfig}: each field's meaning, range and default (the paper
 * notebook's Figure 10 simulation), declared once.
 *
 * @category Config
 */
export const dynamicsConfigSchema = configSchema({
  /** Number of attention heads `h`. */
  nHeads: integerField('number of heads h', { min: 1 }).default(3),
  /**
   * Context length `T`: the number of positions each head attends over (>= sum of `spans`).
   * Spans occupy positions `0 .. sum(spans) - 1` in order; the other positions are zero columns
   * of `G` (distractors).
   */
  nCtx: integerField('context length T (positions attended over)', { min: 1 }).default(40),
  /**
   * Span lengths `|span_j|`, most important first (`j = 0 .. K-1`, `K >= 1`).
   * `[1, 1, 1]` gives the singleton spans of the paper's Figure 10.
   */
  spans: listField('span lengths, most important first', integerField('a span length', { min: 1 })).default(() => [
    1, 1, 1,
  ]),
  /**
   * The paper's multiplicative constant `m`: span `j` has weight `c_j = m^(K-1-j)`, so span 0 is
   * the most important when `m > 1`. Ignored when `weights` is set.
   */
  importanceRatio: numberField("importance base, the paper's m", { min: 0, minExclusive: true }).default(1.7),
  /** Explicit span weights `c_j` (one per span), overriding `importanceRatio`; or null. */
  weights: listField('span weights, one per span', numberField('a span weight', { min: 0, minExclusive: true }))
    .nullable()
    .default(null),
  /**
   * Initialisation noise `eps`: every head starts at `s_k = softmax(u_k)` with logits
   * `u_k = eps * T * z`, `z ~ N(0, I)` from the seed, i.e. `s_k = 1/T + eps (z - mean z) + O(eps^2)`
   * (the paper's "uniform plus eps noise, renormalised", always positive). `eps = 0` makes all
   * heads identical, and they then stay identical forever (bit for bit).
   */
  initNoise: numberField("initial attention noise, the paper's eps", { min: 0 }).default(1e-6),
  /** Seed of the initialisation noise. */
  seed: integerField('seed of the noise').default(0),
  /** The attention flow, see {@link DynamicsVariant}. */
  variant: enumField(
    'attention flow',
    DYNAMICS_VARIANTS as readonly DynamicsVariant[] as [DynamicsVariant, ...DynamicsVariant[]],
  ).default('replicator'),
  /**
   * Weight decay `lambda` (per unit ODE time): `dV_k/dt -= lambda V_k`; on attention,
   * `ds_k/dt -= lambda J(s_k) s_k` (replicator, as the authors' ODE simulator) or
   * `du_k/dt -= lambda u_k` (logit: decay of the parameters that produce the logits). With the
   * fast-value limit, `V` is the ridge optimum instead.
   */
  weightDecay: numberField('weight decay lambda', { min: 0 }).default(0),
  /**
   * Fast-value limit (an option of the authors' ODE simulator): `V` is at its least-squares optimum
   * `V = G pinv(S^T)` (ridge `G S (S^T S + lambda I)^-1` with weight decay) at every instant, so
   * only the attention evolves. Identical heads share the optimum equally (minimum-norm split).
   * With `initNoise > 0` it needs `weightDecay > 0`: without the ridge, `V` diverges whenever two
   * heads' attention columns become nearly parallel (already at initialisation), so the limit is
   * singular.
   */
  fastValue: booleanField('fast-value limit: V at its (ridge) least-squares optimum at every instant').default(false),
  /** The resolved span weights of a {@link ResolvedDynamicsConfig} passed again (recomputed, so ignored). */
  spanWeights: customField<readonly number[]>('resolved span weights (recomputed)').optional(),
})

/**
 * The reduced model `L(V, S) = 1/2 || G - sum_k V_k s_k^T ||_F^2` (loss in units of 1/2 squared
 * Frobenius norm; time is dimensionless), declared by {@link dynamicsConfigSchema}.
 *
 * @category Config
 */
export type DynamicsConfig = Readonly<Omit<z.output<typeof dynamicsConfigSchema>, 'spanWeights'>>

/**
 * The defaults: the paper notebook's Figure 10 simulation (replicator variant, `h = 3`,
 * `T = 40`, singleton spans, `m = 1.7`, `eps = 1e-6`, no weight decay), seed 0.
 *
 * @category Config
 */
export function defaultDynamicsConfig(): DynamicsConfig {
  const { spanWeights: _, ...defaults } = schemaDefaults(dynamicsConfigSchema, 'dynamics')
  return defaults
}

/**
 * Named presets (the baseline of the paper's gradient-flow simulation: `h = 3`, `T = 40`, `m = 1.7`).
 *
 * - `reference`: the defaults (replicator; transitions near t = 4.6, 51, 236).
 * - `reference-logit`: the same with gradient flow on the logits (t1 near 21.8).
 * - `reference-fast-value`: the replicator flow with `V` at its ridge optimum (`lambda = 1e-3`) at
 *   every instant.
 * - `minimal-transformer`: spans `[2, 2, 2]` over the `T = 25` positions the last query of the
 *   minimal model sees (6-token window plus 20 generated tokens).
 *
 * @category Config
 */
export const DYNAMICS_PRESETS: Readonly<
  Record<'reference' | 'reference-logit' | 'reference-fast-value' | 'minimal-transformer', Partial<DynamicsConfig>>
> = Object.freeze({
  reference: Object.freeze({}),
  'reference-logit': Object.freeze({ variant: 'logit' as const }),
  'reference-fast-value': Object.freeze({ fastValue: true, weightDecay: 1e-3 }),
  'minimal-transformer': Object.freeze({ spans: Object.freeze([2, 2, 2]), nCtx: 25 }),
})

/** A {@link DynamicsConfig} after validation: frozen, with resolved span weights. @category Config */
export type ResolvedDynamicsConfig = DynamicsConfig & {
  /** The span weights `c_j` actually used (from `weights` or `m^(K-1-j)`), frozen. */
  readonly spanWeights: readonly number[]
}

/**
 * Fills defaults into a partial config, validates it and freezes the result.
 *
 * @param config - any subset of {@link DynamicsConfig}; missing fields come from
 *   {@link defaultDynamicsConfig}
 * @returns the frozen, validated config with resolved span weights
 * @throws `ConfigError` (`@attnlab/core`) naming the offending field when a field name is unknown
 *   (a typo such as `importanceRatios`; the message lists the fields), a value is out of range or
 *   inconsistent (for example `nCtx` smaller than the sum of `spans`, or the fast-value limit
 *   with noise but no weight decay)
 * @example
 * ```ts
 * const config = resolveDynamicsConfig({ nHeads: 2, variant: 'logit' })
 * config.spanWeights // [2.89, 1.7, 1]
 * ```
 * @category Config
 */
export function resolveDynamicsConfig(config: Partial<DynamicsConfig> = {}): ResolvedDynamicsConfig {
  const parsed = parseConfig(dynamicsConfigSchema, config, 'dynamics')
  const { nHeads, nCtx, spans, importanceRatio, weights, initNoise, seed, variant, weightDecay, fastValue } = parsed
  const covered = spans.reduce((a, b) => a + b, 0)
  if (nCtx < covered) {
    throw new ConfigError('nCtx', `expected an integer >= ${covered} (the sum of the spans), got ${String(nCtx)}`, {
      value: nCtx,
      minimum: covered,
    })
  }
  if (weights !== null && weights.length !== spans.length) {
    throw new ConfigError(
      'weights',
      `expected ${spans.length} finite numbers > 0 (one per span), got ${JSON.stringify(weights)}`,
      { value: weights },
    )
  }
  if (fastValue && weightDecay === 0 && initNoise > 0) {
    throw new ConfigError(
      'weightDecay',
      'the fast-value limit needs weightDecay > 0 when initNoise > 0: with distinct heads V = G pinv(S^T) diverges ' +
        "as two heads' attention columns align, and the flow becomes singular; " +
        'set weightDecay (e.g. 1e-3) or initNoise = 0',
      { value: weightDecay, fastValue, initNoise },
    )
  }
  const K = spans.length
  const spanWeights = weights !== null ? [...weights] : spans.map((_, j) => importanceRatio ** (K - 1 - j))
  return Object.freeze({
    nHeads,
    nCtx,
    spans: Object.freeze([...spans]),
    importanceRatio,
    weights: weights === null ? null : Object.freeze([...weights]),
    initNoise,
    seed,
    variant,
    weightDecay,
    fastValue,
    spanWeights: Object.freeze(spanWeights),
  })
}

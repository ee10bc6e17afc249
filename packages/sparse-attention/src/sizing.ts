/**
 * Method sizing for a prompt: the configuration of a method for a target sparsity on an
 * `n`-token prompt, and the bisection that calibrates Vertical-Slash (`V = S`) and FlexPrefill
 * (`alpha`) on measured exact sparsities. Generic over how a configuration is run (no model
 * here): `@attnlab/experiments`' `compareWithDense` and `sizedConfig` run it on a transformer.
 *
 * The study's sizes (The Sparse Frontier, Nawrot et al., arXiv 2504.17768 [v2], A.1; budgets for
 * a sparsity as in its Table 3) are for 16K-128K token prompts; these rules scale them down.
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import type { SparseMethodName } from './kernel.ts'
import { blockSparseTopKForSparsity, questBudgetForSparsity, snapKVCapacityForSparsity } from './sparsity.ts'

/**
 * What {@link budgetFor} returns: the configuration for the target, and which size (if any) must
 * still be calibrated on measured exact sparsities ({@link calibratedRun}).
 */
export interface MethodBudget {
  /** The method's configuration (without the calibrated size), for `createKernel(method, ...)`. */
  readonly config: Record<string, unknown>
  /** The size calibrated by bisection: `verticalSize` (`V = S`), `alpha`, or nothing. */
  readonly calibrate: 'verticalSize' | 'alpha' | null
}

function oddAtLeastOne(x: number): number {
  const r = Math.max(1, Math.round(x))
  return r % 2 === 1 ? r : r + 1
}

/**
 * The configuration of `method` for a target sparsity on an `n`-token prompt. The study's sizes
 * are for 16K-128K tokens; for a prompt of `n` tokens the auxiliary sizes scale by `n / 16384`
 * (VS/FlexPrefill window 256 -> at least 16 queries, local 64 -> at least 1; SnapKV window 256,
 * local 128, kernel 21), and the budget follows the target: SnapKV/Ada-SnapKV `C = floor((1-s)n)`,
 * Quest `(1-s)n` in whole pages (pages of 16, 8 below 256 tokens, n/2 below 16), Block-Sparse `K`
 * from the analytic formula (B = 16, or 8 below 128 tokens). Vertical-Slash (`V = S`) and
 * FlexPrefill (`alpha`) are calibrated by bisection on the measured exact sparsity (`calibrate`).
 * Flags given by the user win over the rules. Exact-line masks are the default here
 * (`maskMode: 'exact'`): 64x64 kernel tiles are meaningless on prompts of a few hundred tokens.
 * Rules after The Sparse Frontier (arXiv 2504.17768 [v2], A.1 and Table 3).
 *
 * @param method - the method
 * @param n - the prompt length (tokens)
 * @param sparsity - the target sparsity in [0, 1) (fraction of causal query-key pairs skipped)
 * @param flags - user values by config key (e.g. `{ capacity: 20 }`); they win over the rules
 * @returns the configuration and the size still to calibrate
 * @throws ConfigError (`INVALID_CONFIG`, parameter `method`) for an unknown method
 * @example
 * ```ts
 * budgetFor('snapkv', 16384, 0.95).config // { capacity: 819, window: 256, local: 128, prefix: 4, kernelSize: 21 }
 * ```
 */
export function budgetFor(
  method: SparseMethodName,
  n: number,
  sparsity: number,
  flags: Readonly<Record<string, unknown>> = {},
): MethodBudget {
  const scale = n / 16384
  const user = (key: string): unknown => flags[key]
  const pick = <T>(key: string, fallback: T): T => (user(key) === undefined ? fallback : (user(key) as T))
  switch (method) {
    case 'dense':
      return { config: {}, calibrate: null }
    case 'vertical-slash': {
      const config = {
        window: pick('window', Math.min(n, Math.max(16, Math.round(256 * scale)))),
        local: pick('local', Math.max(1, Math.round(64 * scale))),
        sinks: pick('sinks', 4),
        maskMode: pick('maskMode', 'exact'),
      }
      return { config, calibrate: 'verticalSize' }
    }
    case 'flexprefill': {
      const local = pick('local', Math.max(1, Math.round(64 * scale)))
      const sinks = pick('sinks', 4)
      const config = {
        window: pick('window', Math.min(n, Math.max(16, Math.round(512 * scale)))),
        local,
        sinks,
        minBudget: pick('minBudget', Math.max(local, sinks, Math.round(512 * scale))),
        maskMode: pick('maskMode', 'exact'),
        ...(user('tau') === undefined ? {} : { tau: user('tau') }),
        ...(user('blockSize') === undefined ? {} : { blockSize: user('blockSize') }),
      }
      return { config, calibrate: 'alpha' }
    }
    case 'block-sparse': {
      const blockSize = pick('blockSize', n >= 128 ? 16 : 8)
      const topK = pick('topK', Math.max(3, blockSparseTopKForSparsity(n, blockSize, sparsity)))
      return { config: { blockSize, topK }, calibrate: null }
    }
    case 'snapkv':
    case 'ada-snapkv': {
      const local = pick('local', Math.max(1, Math.round(128 * scale)))
      const prefix = pick('prefix', 4)
      const config: Record<string, unknown> = {
        window: pick('window', Math.min(n, Math.max(16, Math.round(256 * scale)))),
        local,
        prefix,
        kernelSize: pick('kernelSize', oddAtLeastOne(21 * scale)),
        capacity: pick('capacity', Math.max(local + prefix + 1, snapKVCapacityForSparsity(n, sparsity))),
      }
      if (method === 'ada-snapkv') config.minHeadRatio = pick('minHeadRatio', 0.2)
      return { config, calibrate: null }
    }
    case 'quest': {
      const pageSize = pick('pageSize', n >= 256 ? 16 : n >= 16 ? 8 : Math.max(1, n >> 1))
      const fit = Math.min(
        Math.max(pageSize, questBudgetForSparsity(n, sparsity, pageSize)),
        Math.floor(n / pageSize - 1) * pageSize,
      )
      return {
        config: {
          pageSize,
          tokenBudget: pick('tokenBudget', Math.max(pageSize, fit)),
          ...(user('sharePages') === undefined ? {} : { sharePages: false }),
        },
        calibrate: null,
      }
    }
    default:
      throw new ConfigError('method', `unknown method '${String(method)}'`, { method })
  }
}

/**
 * Runs `method` sized for a target sparsity on an `n`-token prompt ({@link budgetFor}) and, for
 * Vertical-Slash (`V = S`) and FlexPrefill (`alpha`) without a user value, calibrates that size by
 * bisection on the exact sparsity each run measures: the smallest `V = S` whose exact sparsity is
 * at most the target, or its neighbour when nearer; for `alpha` up to 12 halvings. Budget rules
 * after The Sparse Frontier (arXiv 2504.17768 [v2], A.1 / Table 3), see {@link budgetFor}.
 *
 * @param method - the method
 * @param n - the prompt length (tokens)
 * @param target - the target sparsity in [0, 1)
 * @param flags - user values by config key (they win over the rules and are not calibrated)
 * @param run - runs the method with a full configuration and returns what it measured (`exact`:
 *   its exact sparsity in [0, 1])
 * @returns the run kept (the one nearest the target for calibrated methods, else the only one)
 * @throws ConfigError for an unknown method ({@link budgetFor}); whatever `run` throws
 */
export function calibratedRun<R extends { readonly exact: number }>(
  method: SparseMethodName,
  n: number,
  target: number,
  flags: Readonly<Record<string, unknown>>,
  run: (config: Record<string, unknown>) => R,
): R {
  const { config, calibrate } = budgetFor(method, n, target, flags)
  let best: R
  if (calibrate === 'verticalSize' && flags.verticalSize === undefined && flags.slashSize === undefined) {
    // smallest V = S whose exact sparsity is <= target (masks are nested in V), then the nearer neighbour
    const lowest = Math.max(config.sinks as number, config.local as number, 1)
    const at = new Map<number, R>()
    const measure = (v: number) => {
      if (!at.has(v)) at.set(v, run({ ...config, verticalSize: v, slashSize: v }))
      return at.get(v) as R
    }
    let lo = lowest
    let hi = n
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (measure(mid).exact > target) lo = mid + 1
      else hi = mid
    }
    best = measure(lo)
    if (lo > lowest && Math.abs(measure(lo - 1).exact - target) < Math.abs(best.exact - target)) best = measure(lo - 1)
  } else if (calibrate === 'alpha' && flags.alpha === undefined) {
    let lo = 0
    let hi = 1
    best = run({ ...config, alpha: 0 })
    for (let i = 0; i < 12 && best.exact > target; i++) {
      const mid = (lo + hi) / 2
      const r = run({ ...config, alpha: mid })
      if (Math.abs(r.exact - target) < Math.abs(best.exact - target)) best = r
      if (r.exact > target) lo = mid
      else hi = mid
    }
  } else {
    const sizes = {
      verticalSize: flags.verticalSize ?? flags.slashSize,
      slashSize: flags.slashSize ?? flags.verticalSize,
    }
    const extra = calibrate === 'verticalSize' ? sizes : calibrate === 'alpha' ? { alpha: flags.alpha } : {}
    best = run({ ...config, ...extra })
  }
  return best
}

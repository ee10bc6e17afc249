/**
 * Target sparsities and the study's reported sparsity as experiments report them: clamping the
 * reported sparsity at 0 and deciding whether a method reached its target (The Sparse Frontier,
 * Nawrot et al., arXiv 2504.17768 [v2], A.1.2 for the 64x64 kernel accounting).
 *
 * @module
 */

/**
 * The study's reported sparsity as attnlab prints it. Vertical-Slash and FlexPrefill count whole
 * 64x64 kernel blocks (arXiv 2504.17768 [v2] A.1.2), so when their budget exceeds the causal
 * pairs of a short prompt the study's formula goes below 0: the method keeps every pair. The raw
 * value stays in JSON reports (`reported` / `reportedSparsity`); text shows it clamped at 0 with
 * that note.
 *
 * @param reported - the study's reported sparsity (fraction of causal pairs; may be negative)
 * @returns the value clamped at 0, and whether the budget exceeds the prompt (`reported < 0`)
 * @example
 * ```ts
 * clampReportedSparsity(-0.2451) // { clamped: 0, budgetExceedsPrompt: true }
 * ```
 */
export function clampReportedSparsity(reported: number): {
  readonly clamped: number
  readonly budgetExceedsPrompt: boolean
} {
  return { clamped: Math.max(0, reported), budgetExceedsPrompt: reported < 0 }
}

/**
 * How far below its target sparsity a compared method may land (in both accountings, exact and
 * clamped reported) before it counts as not reaching the target (`targetReached: false`, and a
 * warning naming the achieved value). A fraction of causal query-key pairs.
 */
export const TARGET_SPARSITY_TOLERANCE = 0.02

/**
 * Whether a method reached its target sparsity: the exact or the (clamped) reported sparsity
 * comes within {@link TARGET_SPARSITY_TOLERANCE} of it.
 *
 * @param target - the target sparsity in [0, 1)
 * @param exact - the exact sparsity measured from the method's masks
 * @param reportedClamped - the study's reported sparsity clamped at 0 ({@link clampReportedSparsity})
 */
export function targetReached(target: number, exact: number, reportedClamped: number): boolean {
  return Math.max(exact, reportedClamped) >= target - TARGET_SPARSITY_TOLERANCE
}

/**
 * The warning for a method that does not reach its target sparsity on a prompt of
 * `promptTokens` tokens, naming what it achieved in both accountings.
 *
 * @param method - the method's name, e.g. `'block-sparse'`
 * @param target - the target sparsity in [0, 1)
 * @param exact - the exact sparsity achieved
 * @param reportedClamped - the (clamped) reported sparsity achieved
 * @param promptTokens - the prompt length (tokens)
 * @returns one line, e.g. `warning: block-sparse does not reach target sparsity 0.80 at 109 tokens: ...`
 */
export function targetWarning(
  method: string,
  target: number,
  exact: number,
  reportedClamped: number,
  promptTokens: number,
): string {
  return (
    `warning: ${method} does not reach target sparsity ${target.toFixed(2)} at ${promptTokens} tokens: ` +
    `achieved ${exact.toFixed(3)} exact, ${reportedClamped.toFixed(3)} reported`
  )
}

/**
 * The studies attnlab ships, by name, their validated sweeps, and the study report.
 *
 * @module
 */
import { ConfigError, closest } from '@attnlab/core'
import { renderSvg } from '@attnlab/experiments'
import { CSS, escapeHtml } from '../report.ts'
import type { TrialRecord } from '../record.ts'
import type { JsonObject } from '../json.ts'
import { validateSweepSpec, type SweepSpec } from '../spec.ts'
import { expandTrials } from '../trial.ts'
import { architecture } from './architecture.ts'
import { caContext } from './ca-context.ts'
import { emergenceTime } from './emergence-time.ts'
import { linearMapSparsity } from './linear-map-sparsity.ts'
import { lmInduction } from './lm-induction.ts'
import { prePretraining } from './pre-pretraining.ts'
import { sparseFrontier } from './sparse-frontier.ts'
import type { Study, StudyAssessment, StudyContext, StudySize } from './study.ts'
import { width } from './width.ts'

/**
 * The shipped studies by name: after Baherwani et al. (arXiv 2606.25010) `linear-map-sparsity`,
 * `emergence-time`, `width`, `architecture`, `ca-context`, `pre-pretraining`, `lm-induction`;
 * after Nawrot et al. (The Sparse Frontier, arXiv 2504.17768) `sparse-frontier`.
 *
 * @category Studies
 */
export const STUDIES: Readonly<Record<string, Study>> = Object.freeze({
  [linearMapSparsity.name]: linearMapSparsity,
  [emergenceTime.name]: emergenceTime,
  [width.name]: width,
  [architecture.name]: architecture,
  [caContext.name]: caContext,
  [prePretraining.name]: prePretraining,
  [lmInduction.name]: lmInduction,
  [sparseFrontier.name]: sparseFrontier,
})

/**
 * The study of a name.
 *
 * @throws `ConfigError` (`@attnlab/core`) for an unknown name, with the closest known one
 * @category Studies
 */
export function getStudy(name: string): Study {
  const study = Object.hasOwn(STUDIES, name) ? STUDIES[name] : undefined
  if (study !== undefined) return study
  const names = Object.keys(STUDIES)
  const suggestion = closest(name, names)
  throw new ConfigError(
    'study',
    `'${name}' is not a study; ${suggestion === undefined ? 'e' : `did you mean '${suggestion}'? E`}` +
      `xpected one of ${names.join(', ')}`,
    { value: name, allowed: names },
  )
}

/**
 * Changes to a study's budget, for a quick look before the real run (recorded in `study.json`
 * and named in the report: findings on fewer seeds or steps are weaker evidence).
 *
 * @category Studies
 */
export interface StudyOverrides {
  /** Seeds per setting (`0 .. seeds - 1`) instead of the study's. */
  readonly seeds?: number
  /** Training steps of every trial instead of the study's. */
  readonly steps?: number
}

/**
 * A study's sweeps at a size, each validated like a spec file (every trial's settings through the
 * experiment's own validator).
 *
 * @param overrides - fewer (or more) seeds or steps than the study's
 * @param context - where earlier parts' trials run (see {@link resolveStudySweeps}); placeholders without it
 * @returns the part names and their frozen specs, in run order
 * @throws `SweepSpecError` naming the part for overrides the experiment refuses (a shipped spec
 *   itself is always accepted: the tests expand every study)
 * @category Studies
 */
export function studySweeps(
  study: Study,
  size: StudySize,
  overrides: StudyOverrides = {},
  context?: StudyContext,
): { readonly part: string; readonly spec: SweepSpec }[] {
  return study.parts(size, context).map((part) => {
    let spec = part.spec
    if (overrides.seeds !== undefined) spec = { ...spec, seeds: overrides.seeds }
    // An evaluation part trains nothing: a steps override leaves it alone.
    if (overrides.steps !== undefined && spec.experiment !== 'sparse-eval') {
      const base = (spec.base ?? {}) as JsonObject
      if (spec.experiment === 'train') {
        // A train trial's settings are a TrainingConfig: steps and evalEvery at the top.
        const evalEvery = Math.max(1, Math.min(Number(base.evalEvery ?? 1), Math.floor(overrides.steps / 4)))
        spec = { ...spec, base: { ...base, steps: overrides.steps, evalEvery } }
        return { part: part.name, spec: validateSweepSpec(spec, `study ${study.name} (${size}), part ${part.name}`) }
      }
      const training = (base.training ?? {}) as JsonObject
      const evalEvery = Math.max(1, Math.min(Number(training.evalEvery ?? 1), Math.floor(overrides.steps / 4)))
      spec = { ...spec, base: { ...base, training: { ...training, steps: overrides.steps, evalEvery } } }
    }
    return { part: part.name, spec: validateSweepSpec(spec, `study ${study.name} (${size}), part ${part.name}`) }
  })
}

/**
 * A study's sweeps for a run into `out`: like {@link studySweeps}, with the paths of earlier
 * parts' trials (a part that starts from their weights) resolved to `out/<part>/trials/<id>`.
 *
 * @param out - the study directory (absolute, so that worker processes anywhere find it); trial ids of
 *   a part that names these paths depend on it
 * @category Studies
 */
export async function resolveStudySweeps(
  study: Study,
  size: StudySize,
  overrides: StudyOverrides,
  out: string,
): Promise<{ readonly part: string; readonly spec: SweepSpec }[]> {
  const ids = new Map<string, string[]>()
  const context: StudyContext = {
    trialDirectory(part, index) {
      const id = ids.get(part)?.[index]
      return `${out.replace(/\/+$/, '')}/${part}/trials/${id ?? `trial-${index}`}`
    },
  }
  // Each pass resolves the parts whose sources the previous pass expanded (parts name earlier ones only).
  let sweeps = studySweeps(study, size, overrides, context)
  for (let pass = 0; pass < sweeps.length; pass++) {
    for (const { part, spec } of sweeps)
      ids.set(
        part,
        (await expandTrials(spec)).map((t) => t.id),
      )
    sweeps = studySweeps(study, size, overrides, context)
  }
  return sweeps
}

/** The overrides in words, for reports (empty when none). */
export function describeOverrides(overrides: StudyOverrides): string {
  const words = [
    overrides.seeds === undefined ? '' : `${overrides.seeds} seed(s) per setting`,
    overrides.steps === undefined ? '' : `${overrides.steps} training steps per trial`,
  ].filter((w) => w !== '')
  return words.length === 0 ? '' : `Run with ${words.join(' and ')} instead of the study's budget.`
}

/**
 * What {@link buildStudyReport} returns.
 *
 * @category Studies
 */
export interface StudyReport extends StudyAssessment {
  /** The HTML page (inline SVG, opens offline). */
  readonly html: string
}

/** A finding's verdict as a word. */
export function verdictWord(holds: boolean | null): string {
  return holds === null ? 'undetermined' : holds ? 'reproduced' : 'not reproduced'
}

/**
 * The study's report: the paper's findings with their verdicts on these trials, the tables and
 * the figures, as one self-contained HTML page.
 *
 * @param records - each part's trial records by part name
 * @param overrides - the seeds or steps the run changed (named on the page)
 * @category Studies
 */
export async function buildStudyReport(
  study: Study,
  size: StudySize,
  records: Readonly<Record<string, readonly TrialRecord[]>>,
  overrides: StudyOverrides = {},
): Promise<StudyReport> {
  const assessment = study.assess(records, size)
  const counts = study.parts(size).map((part) => {
    const list = records[part.name] ?? []
    const done = list.filter((r) => r.status === 'done').length
    return `<tr><td>${escapeHtml(part.name)}</td><td>${escapeHtml(part.description)}</td><td>${done} done of ${
      list.length
    } recorded</td></tr>`
  })
  const findings = assessment.findings
    .map(
      (f) =>
        `<tr><td>${escapeHtml(f.claim)}</td><td><b>${verdictWord(f.holds)}</b></td>` +
        `<td>${escapeHtml(f.evidence)}</td></tr>`,
    )
    .join('')
  const tables = assessment.tables
    .map(
      (t) =>
        `<h2>${escapeHtml(t.title)}</h2><table><tr>${t.columns.map((c) => `<th>${escapeHtml(c)}</th>`).join('')}</tr>` +
        t.rows
          .map((row) => `<tr>${row.map((c) => `<td>${escapeHtml(String(c ?? 'n/a'))}</td>`).join('')}</tr>`)
          .join('') +
        '</table>',
    )
    .join('\n')
  const figures: string[] = []
  for (const chart of assessment.charts) figures.push(`<figure>${await renderSvg(chart)}</figure>`)
  const title = `Study '${study.name}' (${size}): ${study.title}`
  const changed = describeOverrides(overrides)
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>
${CSS}
</style></head><body>
<h1>${escapeHtml(title)}</h1>
<p>${escapeHtml(study.source)}. ${escapeHtml(study.description)}</p>
${changed === '' ? '' : `<p><b>${escapeHtml(changed)}</b></p>`}
<table><tr><th>part</th><th>what it varies</th><th>trials</th></tr>${counts.join('')}</table>
<h2>The paper's findings on these trials</h2>
<table><tr><th>finding</th><th>verdict</th><th>evidence</th></tr>${findings}</table>
${tables}
${figures.join('\n')}
</body></html>
`
  return { ...assessment, html }
}

export { architecture, caContext, emergenceTime, linearMapSparsity, lmInduction, prePretraining, sparseFrontier, width }
export type {
  Study,
  StudyAssessment,
  StudyContext,
  StudyFinding,
  StudyPart,
  StudySize,
  StudyTable,
  SweepSpecInput,
} from './study.ts'

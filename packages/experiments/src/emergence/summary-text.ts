/**
 * The emergence run's terminal summary as text lines (what `attnlab emergence` prints).
 *
 * @module
 */
import type { EmergenceResult } from './experiment.ts'
import { INTERPOLATED_NOTE, describeLearned, describePlateau, describeStageOracle, learnedHeader } from './stages.ts'

/**
 * The terminal summary of a run, as `attnlab emergence` prints it: per seed, the table of its
 * stages (step, plateau, the oracle of the stage and the plateau's distance to it, which head took
 * which span), the final loss against the floor, the final span holders and the ODE fit; for
 * several seeds, each stage's step per seed.
 *
 * @param result - what {@link runEmergence} returned
 * @returns the lines (plain text; the first is empty or names the seed)
 * @category Emergence
 */
export function emergenceSummaryLines(result: EmergenceResult): string[] {
  const lines: string[] = []
  const { seeds, groupNames } = result
  const floor = result.oracles.floor
  for (const s of seeds) {
    lines.push(seeds.length > 1 ? `\nseed ${s.seed}` : '')
    if (s.analysis.stages.length === 0) lines.push('no stage detected')
    else {
      const rows = s.analysis.stages.map((st) => [
        String(st.stage),
        String(Math.round(st.step)),
        describePlateau(st),
        describeStageOracle(st.nearestOracle),
        describeLearned(st),
      ])
      const header = ['stage', 'step', 'plateau (nats)', 'oracle of the stage', learnedHeader(s.analysis.method)]
      const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)))
      const format = (r: readonly string[]): string =>
        r
          .map((c, i) => c.padEnd(widths[i] as number))
          .join('  ')
          .trimEnd()
      lines.push(format(header))
      for (const r of rows) lines.push(format(r))
      if (s.analysis.stages.some((st) => st.plateauEvaluations === 0)) lines.push(INTERPOLATED_NOTE)
    }
    const final = s.lines[s.lines.length - 1]
    if (final !== undefined) {
      lines.push(
        `final validation loss ${final.validationLoss.toFixed(4)} nats at step ${final.step}` +
          (floor !== null
            ? `; teacher entropy / floor ${floor.toFixed(4)} (gap ${(final.validationLoss - floor).toFixed(4)})`
            : ''),
      )
    }
    // An interrupted seed: its checkpoint (what a resume continues) is at the step it stopped, which is
    // usually past its last evaluation.
    const stopped = result.summary.seeds.find((summary) => summary.seed === s.seed && summary.stopped)
    if (stopped !== undefined) {
      const evaluated = final === undefined || final.step === stopped.completedSteps ? '' : final.step
      lines.push(
        `interrupted: the checkpoint holds step ${stopped.completedSteps} of ${result.record.training.steps}; a ` +
          `resume continues from there${evaluated === '' ? '' : ` (the last evaluation was at step ${evaluated})`}`,
      )
    }
    if (groupNames.length > 0) {
      lines.push(
        `final span holders: ${s.analysis.finalHolders
          .map((h, g) => `${groupNames[g]}: ${h ? `${h.head} (${h.mass.toFixed(2)})` : 'none'}`)
          .join('; ')}`,
      )
    }
    if (s.ode !== null) {
      const predicted = s.ode.fit.transitions
        .map((t) => (t.predictedStep === null ? '-' : Math.round(t.predictedStep)))
        .join(', ')
      lines.push(
        `reduced ODE: ${s.ode.fit.scale.toFixed(2)} steps per unit time; predicted transition steps ${predicted}`,
      )
    }
  }
  if (seeds.length > 1) {
    lines.push('')
    const stages = Math.max(0, ...seeds.map((s) => s.analysis.stages.length))
    for (let j = 1; j <= stages; j++) {
      const steps = seeds.map((s) => s.analysis.stages.find((st) => st.stage === j)?.step ?? null)
      const seen = steps.filter((x): x is number => x !== null)
      const range =
        seen.length > 0 ? ` (min ${Math.round(Math.min(...seen))}, max ${Math.round(Math.max(...seen))})` : ''
      lines.push(
        `stage ${j} step per seed: ${steps.map((x) => (x === null ? 'none' : Math.round(x))).join(', ')}${range}`,
      )
    }
    if (stages === 0) {
      const steps = seeds.map((s) => s.analysis.emergenceStep)
      lines.push(`emergence step per seed: ${steps.map((x) => (x === null ? 'none' : Math.round(x))).join(', ')}`)
    }
  }
  // The interventions the run was trained with (Baherwani et al., arXiv 2606.25010).
  const bias = result.record.training.attentionBias
  if (bias !== null && bias !== undefined) {
    const where = `${bias.layers === null ? 'every block' : `blocks ${bias.layers.join(',')}`}, ${
      bias.heads === null ? 'every head' : `heads ${bias.heads.join(',')}`
    }`
    lines.push(`attention bias: ${bias.beta} nats toward the ground-truth map (${where}), in every pass`)
  }
  const transfer = result.record.transfer
  if (transfer !== undefined) {
    lines.push(
      `started from ${transfer.source}: ${transfer.copied.length} parameters copied, ` +
        `${transfer.reinitialized.length} initialised fresh` +
        (transfer.reinitialized.length > 0 ? ` (${transfer.reinitialized.map((r) => r.name).join(', ')})` : ''),
    )
  }
  return lines
}

import { buildStudyReport, getStudy, studySweeps } from '@attnlab/sweeps'

const study = getStudy('linear-map-sparsity')
const [part] = studySweeps(study, 'default', { seeds: 1, steps: 50 }) // a quick look: 1 seed, 50 steps
const { findings } = await buildStudyReport(study, 'default', { 'linear-map': [] })
console.log(part?.spec.name, findings.map((f) => `${f.claim}: ${f.holds}`))

// Checked by pnpm test:examples: the spec carries the overrides, and without trials every finding is undetermined.
const spec = part?.spec
if (spec?.seeds.length !== 1 || (spec.base.training as { steps: number }).steps !== 50) {
  throw new Error(`the overrides did not reach the spec: ${JSON.stringify(spec)}`)
}
if (findings.length === 0 || findings.some((f) => f.holds !== null)) {
  throw new Error(`expected undetermined findings without trials, got ${JSON.stringify(findings)}`)
}

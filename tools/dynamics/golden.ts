// Regenerates packages/dynamics/src/__fixtures__/scipy-reference.json: the reduced flow integrated
// by an independent numpy/scipy implementation (tools/dynamics/ode_scipy.py; replicator runs in
// attention coordinates, as the paper notebook writes them) from the exact initial state that
// @attnlab/dynamics draws for each config. Run by hand from the repo root:
//   node --conditions=@attnlab/source --import tsx tools/dynamics/golden.ts
// Needs Debian's python3-numpy and python3-scipy (/usr/bin/python3).
import { execFileSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  GradientFlowSystem,
  plateauLosses,
  resolveDynamicsConfig,
  sampleTimes,
  type DynamicsConfig,
} from '../../packages/dynamics/src/index.ts'

const cases: { name: string; config: Partial<DynamicsConfig>; tMax: number }[] = [
  { name: 'reference-replicator-seed0', config: { seed: 0 }, tMax: 600 },
  { name: 'reference-replicator-seed3-eps1e-3', config: { seed: 3, initNoise: 1e-3 }, tMax: 300 },
  { name: 'reference-logit-seed0', config: { seed: 0, variant: 'logit' }, tMax: 2500 },
  { name: 'replicator-weight-decay', config: { seed: 1, weightDecay: 0.01, initNoise: 1e-4 }, tMax: 400 },
  {
    name: 'logit-uneven-spans',
    config: { seed: 2, variant: 'logit', nHeads: 2, nCtx: 12, spans: [2, 1, 3], importanceRatio: 1.5, initNoise: 1e-3 },
    tMax: 800,
  },
]

const dir = mkdtempSync(join(tmpdir(), 'attnlab-golden-'))
const out: unknown[] = []
for (const { name, config, tMax } of cases) {
  const resolved = resolveDynamicsConfig(config)
  const system = new GradientFlowSystem(resolved)
  const times = sampleTimes(resolved, { tMax, points: 200 })
  const plateaus = plateauLosses(resolved)
  const file = join(dir, `${name}.json`)
  writeFileSync(file, JSON.stringify({ config: resolved, y0: system.initialState(), times, plateaus }))
  const coords = resolved.variant === 'replicator' ? 's' : 'u'
  const result = JSON.parse(
    execFileSync(
      '/usr/bin/python3',
      [
        'tools/dynamics/ode_scipy.py',
        '--input',
        file,
        '--coords',
        coords,
        '--method',
        'DOP853',
        '--rtol',
        '1e-11',
        '--atol',
        '1e-13',
      ],
      {
        encoding: 'utf8',
      },
    ),
  ) as { loss: number[]; transitions: (number | null)[]; nfev: number }
  console.log(name, result.transitions, result.nfev)
  out.push({
    name,
    config,
    tMax,
    points: 200,
    coords,
    method: 'DOP853',
    rtol: 1e-11,
    atol: 1e-13,
    plateaus,
    loss: result.loss,
    transitions: result.transitions,
  })
}
writeFileSync(
  'packages/dynamics/src/__fixtures__/scipy-reference.json',
  `${JSON.stringify({ generator: 'tools/dynamics/golden.ts + tools/dynamics/ode_scipy.py', cases: out }, null, 1)}\n`,
)

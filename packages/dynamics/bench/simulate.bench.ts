// Benchmark: @attnlab/dynamics' simulate (ODEX, restarted at each sample time) next to
// scipy.integrate.solve_ivp on the same system (tools/dynamics/ode_scipy.py --coords u: the same
// state (V, logits u), the same initial state, the same sample times, the same tolerances), in
// the same run. Run from the package with `pnpm bench` (under `flock /work/locks/bench` when
// timing on a shared machine). Needs Debian's python3-scipy at /usr/bin/python3; without it the
// scipy columns are skipped with a note.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import {
  GradientFlowSystem,
  detectTransitions,
  plateauLosses,
  resolveDynamicsConfig,
  sampleTimes,
  simulate,
  type DynamicsConfig,
} from '../src/index.ts'

const here = dirname(fileURLToPath(import.meta.url))
const script = resolve(here, '../../../tools/dynamics/ode_scipy.py')
const python = '/usr/bin/python3'
const tolerance = 1e-8
const repeats = 3

const cases: { name: string; config: Partial<DynamicsConfig>; tMax: number; points: number }[] = [
  { name: 'replicator h=3 T=40 eps=1e-6', config: {}, tMax: 1000, points: 1000 },
  { name: 'logit      h=3 T=40 eps=1e-6', config: { variant: 'logit' }, tMax: 5000, points: 1000 },
  { name: 'replicator h=3 T=160 eps=1e-6', config: { nCtx: 160 }, tMax: 1000, points: 1000 },
  {
    name: 'logit      h=4 T=40 spans=2,2,2 lambda=1e-3',
    config: { variant: 'logit', nHeads: 4, spans: [2, 2, 2], weightDecay: 1e-3 },
    tMax: 3000,
    points: 500,
  },
]

function scipyAvailable(): boolean {
  if (!existsSync(python)) return false
  try {
    execFileSync(python, ['-c', 'import scipy'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

const haveScipy = scipyAvailable()
const dir = mkdtempSync(join(tmpdir(), 'attnlab-dynamics-bench-'))
const fmt = (x: number) => x.toFixed(1).padStart(8)
const times3 = (ts: (number | null)[]) => ts.map((t) => (t === null ? '-' : t.toPrecision(5))).join('/')
console.log(
  `simulate vs scipy.integrate.solve_ivp, rtol = atol = ${tolerance}, best of ${repeats}, same initial state and ` +
    'sample times',
)
if (!haveScipy) console.log(`(scipy not found at ${python}: install python3-scipy to get the comparison)`)
console.log(
  [
    'case'.padEnd(44),
    'TS ms',
    'RK45 ms',
    'DOP853 ms',
    'RK45/TS',
    'DOP853/TS',
    'TS nfev',
    'RK45 nfev',
    'DOP nfev',
    'transitions TS | RK45',
  ].join('  '),
)
try {
  for (const { name, config, tMax, points } of cases) {
    const resolved = resolveDynamicsConfig(config)
    const options = { tMax, points, relativeTolerance: tolerance, absoluteTolerance: tolerance }
    let best = Infinity
    let trajectory = simulate(resolved, options) // warm-up (JIT)
    for (let r = 0; r < repeats; r++) {
      const start = performance.now()
      trajectory = simulate(resolved, options)
      best = Math.min(best, performance.now() - start)
    }
    const ours = detectTransitions(trajectory.times, trajectory.loss, trajectory.plateaus).map((t) => t.time)
    const row = [name.padEnd(44), fmt(best)]
    let scipyTransitions = ''
    if (haveScipy) {
      const file = join(dir, 'problem.json')
      const system = new GradientFlowSystem(resolved)
      writeFileSync(
        file,
        JSON.stringify({
          config: resolved,
          y0: system.initialState(),
          times: sampleTimes(resolved, options),
          plateaus: plateauLosses(resolved),
        }),
      )
      const results = ['RK45', 'DOP853'].map(
        (method) =>
          JSON.parse(
            execFileSync(
              python,
              [
                script,
                '--input',
                file,
                '--coords',
                'u',
                '--method',
                method,
                '--rtol',
                String(tolerance),
                '--atol',
                String(tolerance),
                '--repeat',
                String(repeats),
              ],
              {
                encoding: 'utf8',
              },
            ),
          ) as { wallTimeMs: number; nfev: number; transitions: (number | null)[] },
      )
      const [rk45, dop853] = results as [(typeof results)[0], (typeof results)[0]]
      row.push(fmt(rk45.wallTimeMs), fmt(dop853.wallTimeMs), fmt(rk45.wallTimeMs / best), fmt(dop853.wallTimeMs / best))
      row.push(
        String(trajectory.stats.evaluations).padStart(8),
        String(rk45.nfev).padStart(8),
        String(dop853.nfev).padStart(8),
      )
      scipyTransitions = times3(rk45.transitions)
    } else {
      row.push('-', '-', '-', '-', String(trajectory.stats.evaluations), '-', '-')
    }
    row.push(`${times3(ours)} | ${scipyTransitions}`)
    console.log(row.join('  '))
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}

import { expandTrials, parseSweepSpec } from '@attnlab/sweeps'

const spec = parseSweepSpec('name: s\nexperiment: emergence\ngrid:\n  task.genLen: [4, 8]\nseeds: 2\n', 's.yaml')
const trials = await expandTrials(spec) // 4 trials: (4, seed 0), (4, seed 1), (8, seed 0), (8, seed 1)
console.log(trials.map((t) => `${t.id} ${JSON.stringify(t.params)} seed ${t.seed}`))

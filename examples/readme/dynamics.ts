import { simulate, analyzeTrajectory, analyzeStages, fitTimeScale, trajectorySpanMass } from '@attnlab/dynamics'

const trajectory = simulate({ nHeads: 3, nCtx: 40, spans: [1, 1, 1], importanceRatio: 1.7, initNoise: 1e-6, seed: 0 })
const stages = analyzeTrajectory(trajectory)
console.log(stages.transitions.map((t) => t.time))   // [4.55, 57.5, 234.5]
console.log(stages.phases.map((p) => p.phase))       // ['initial', 'competitive', 'cooperative']

// The fields are flat Float64Arrays, row-major, nTimes = trajectory.times.length, h = nHeads,
// K = spans.length, T = nCtx: values [nTimes, h, K] (V_k), attention [nTimes, h, T] (s_k),
// spanMass and spanShare [nTimes, h, K].
const { nHeads: h, nCtx: T } = trajectory.config
const last = trajectory.times.length - 1
const head0 = trajectory.attention.subarray((last * h + 0) * T, (last * h + 1) * T) // s_0 at the last time, [T]
console.log(head0.indexOf(Math.max(...head0)))        // the position head 0 attends to most

// The same detectors on a training run: time = steps, loss = validation loss, plateaus = the H_n
// oracles of @attnlab/markov (nats), spanMass [time][head][span]. Here a stand-in run: the ODE
// curve itself at 20 steps per unit of ODE time.
const steps = Array.from(trajectory.times, (t) => 20 * t)
const validationLoss = Array.from(trajectory.loss)
const oracles = trajectory.plateaus
const spanMass = trajectorySpanMass(trajectory)
console.log(analyzeStages({ time: steps, loss: validationLoss, plateaus: oracles, spanMass }, { smoothing: 5, persistence: 3 }).transitions.map((t) => t.time))
// Steps per unit of ODE time (20 here), and predicted vs observed transition steps:
const fit = fitTimeScale({ time: trajectory.times, loss: trajectory.loss, plateaus: trajectory.plateaus }, { time: steps, loss: validationLoss, plateaus: oracles })
console.log(fit.scale, fit.transitions)

import * as tf from '@tensorflow/tfjs-core'
import { Rng } from '../rng.ts'
import { describeWithBackends } from '../testing.ts'
import { expect, it } from 'vitest'
import { registeredGradientKernels } from './gradients.ts'

/** Central-difference check of d sum(f(x) * r) / dx along a random unit direction. */
async function check(name: string, f: (x: tf.Tensor) => tf.Tensor, shape: number[], positive = false): Promise<void> {
  const rng = Rng.fromSeed(name.length)
  const size = shape.reduce((a, b) => a * b, 1)
  const values = rng.fillUniform(new Float32Array(size), positive ? 0.5 : -1.5, 1.5)
  const x = tf.tensor(values, shape)
  const outShape = tf.tidy(() => f(x).shape)
  const r = tf.tensor(rng.fillNormal(new Float32Array(outShape.reduce((a, b) => a * b, 1))), outShape)
  const loss = (t: tf.Tensor): tf.Scalar => tf.sum(tf.mul(f(t), r)) as tf.Scalar
  const grad = tf.grad(loss)(x)
  const direction = rng.fillNormal(new Float32Array(size))
  const norm = Math.hypot(...direction)
  const u = tf.tensor(
    direction.map((d) => d / norm),
    shape,
  )
  const analytic = (await tf.sum(tf.mul(grad, u)).data())[0]!
  const e = 1e-2
  const plus = (await loss(tf.add(x, tf.mul(u, e))).data())[0]!
  const minus = (await loss(tf.sub(x, tf.mul(u, e))).data())[0]!
  const numeric = (plus - minus) / (2 * e)
  expect(Math.abs(numeric - analytic), `${name}: numeric ${numeric} analytic ${analytic}`).toBeLessThan(
    5e-3 * Math.max(1, Math.abs(numeric)),
  )
}

describeWithBackends('registered gradients', () => {
  const b = (): tf.Tensor => tf.tensor2d([[0.5, -1, 2]])
  it('cover the kernels the models use', () => {
    for (const k of [
      'Add',
      'Multiply',
      'BatchMatMul',
      'Softmax',
      'Transpose',
      'Concat',
      'SplitV',
      'GatherV2',
      'Erf',
      'Rsqrt',
      'Mean',
    ]) {
      expect(registeredGradientKernels()).toContain(k)
      expect(tf.getGradient(k)).toBeDefined()
    }
  })
  const cases: [string, (x: tf.Tensor) => tf.Tensor, number[], boolean?][] = [
    ['add broadcast', (x) => tf.add(x, b()), [4, 3]],
    ['add broadcast (other side)', (x) => tf.add(b(), tf.sum(x, 0, true)), [4, 3]],
    ['sub', (x) => tf.sub(b(), x), [2, 3]],
    ['mul broadcast', (x) => tf.mul(x, tf.reshape(tf.slice(x, [0, 0], [-1, 1]), [-1, 1])), [3, 3]],
    ['div', (x) => tf.div(tf.add(x, 3), tf.add(tf.square(x), 1)), [2, 3]],
    ['maximum/minimum', (x) => tf.add(tf.maximum(x, 0.3), tf.minimum(x, -0.2)), [3, 4]],
    ['squaredDifference', (x) => tf.squaredDifference(x, b()), [2, 3]],
    ['pow', (x) => tf.pow(x, tf.fill(x.shape, 1.7)), [2, 3], true],
    ['unary chain', (x) => tf.tanh(tf.sigmoid(tf.exp(tf.neg(tf.square(x))))), [5]],
    [
      'sqrt/rsqrt/log/reciprocal',
      (x) => tf.add(tf.add(tf.sqrt(x), tf.rsqrt(x)), tf.add(tf.log(x), tf.reciprocal(x))),
      [5],
      true,
    ],
    [
      'erf/relu/abs/sin/cos',
      (x) => tf.add(tf.add(tf.erf(x), tf.relu(x)), tf.add(tf.abs(x), tf.mul(tf.sin(x), tf.cos(x)))),
      [6],
    ],
    ['clipByValue', (x) => tf.clipByValue(x, -0.5, 0.7), [6]],
    ['where', (x) => tf.where(tf.greater(x, 0), tf.square(x), tf.mul(x, 3)), [6]],
    ['softmax', (x) => tf.softmax(x), [3, 4]],
    ['logSoftmax', (x) => tf.logSoftmax(x), [3, 4]],
    [
      'sum/mean/max/min',
      (x) => tf.add(tf.add(tf.sum(x, 1), tf.mean(x, 1)), tf.add(tf.max(x, 1), tf.min(x, 1))),
      [3, 4],
    ],
    ['sum all keepDims', (x) => tf.mul(x, tf.sum(x, undefined, true)), [2, 3]],
    ['cumsum', (x) => tf.cumsum(x, 1), [2, 4]],
    ['reshape/transpose/expandDims', (x) => tf.transpose(tf.expandDims(tf.reshape(x, [2, 6]), 0), [2, 0, 1]), [3, 4]],
    [
      'slice/pad',
      (x) =>
        tf.pad(tf.slice(x, [1, 0], [2, 3]), [
          [1, 0],
          [0, 2],
        ]),
      [4, 3],
    ],
    [
      'concat/split',
      (x) => {
        const [a, c] = tf.split(x, [1, 2], 1)
        return tf.concat([tf.mul(c!, 2), a!], 1)
      },
      [2, 3],
    ],
    // (copy before reversing: tfjs' tape keeps a reference to the array unstack returns)
    ['stack/unstack', (x) => tf.stack([...tf.unstack(x, 1)].reverse(), 0), [2, 3]],
    ['tile', (x) => tf.tile(x, [2, 3]), [2, 2]],
    [
      'gather axis 0 and 1',
      (x) =>
        tf.add(
          tf.gather(x, tf.tensor1d([2, 0, 2], 'int32'), 0),
          tf.transpose(tf.gather(x, tf.tensor1d([1, 1, 0], 'int32'), 1)),
        ),
      [3, 3],
    ],
    [
      'gatherND/scatterND',
      (x) =>
        tf.scatterND(
          tf.tensor2d([[1], [1], [0]], [3, 1], 'int32'),
          tf.gatherND(x, tf.tensor2d([[2], [0], [1]], [3, 1], 'int32')),
          [3, 2],
        ),
      [3, 2],
    ],
    ['matMul plain', (x) => tf.matMul(x, tf.transpose(x)), [3, 4]],
    ['matMul transposes', (x) => tf.add(tf.matMul(x, x, true, false), tf.matMul(x, x, false, true)), [3, 3]],
    ['matMul both transposed', (x) => tf.matMul(x, tf.ones([4, 3]), true, true), [3, 3]],
    ['batched matMul broadcast', (x) => tf.matMul(tf.reshape(x, [2, 3, 2]), tf.ones([1, 2, 4])), [2, 3, 2]],
    ['cast/identity', (x) => tf.clone(tf.cast(x, 'float32')), [3]],
  ]
  for (const [name, f, shape, positive] of cases) it(name, () => check(name, f, shape, positive))
})

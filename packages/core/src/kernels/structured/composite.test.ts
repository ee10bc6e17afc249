import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { Rng } from '../../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../../testing.ts'
import {
  pairScatterComposite,
  pairScoresComposite,
  twoHotScoresComposite,
  twoHotScoresGradComposite,
  usesComposites,
} from './composite.ts'
import { pairScatter } from './pair-scatter.ts'
import { pairScores } from './pair-scores.ts'
import { twoHotScoresGrad } from './two-hot-scores-grad.ts'
import { twoHotScores } from './two-hot-scores.ts'

// The compositions run on webgl and webgpu (tested there by apps/browser-check); here they are
// checked against the registered kernels, values and gradients, on the Node backends.
/** `fn()`, after checking that a call frees everything but its result. */
async function leakFree<T extends tf.Tensor>(fn: () => T): Promise<T> {
  await expectNoLeaks(fn, { disposeResult: true })
  return fn()
}

describeWithBackends('structured kernels as tfjs compositions', () => {
  const [batch, pos, heads, vocab] = [2, 5, 3, 4]
  const width = vocab + 7
  const tokenValues = [1, 3, 3, 0, 2, 2, 0, 1, 1, 3]

  it('are not used on the cpu and wasm backends', () => {
    expect(usesComposites()).toBe(false)
  })

  it('twoHotScores and its gradient equal the kernels', async () => {
    const rng = Rng.fromSeed(1)
    const tokens = tf.tensor2d(tokenValues, [batch, pos], 'int32')
    const w = tf.tensor3d(rng.fillNormal(new Float32Array(heads * width * width)), [heads, width, width])
    const r = tf.tensor4d(rng.fillNormal(new Float32Array(batch * heads * pos * pos)), [batch, heads, pos, pos])
    for (const maskValue of [-Infinity, 0]) {
      const composite = await leakFree(() => twoHotScoresComposite(w, tokens, vocab, maskValue))
      const kernel = twoHotScores(w, tokens, vocab, maskValue)
      expectArraysClose(composite, kernel, 1e-5)
      tf.dispose([composite, kernel])
    }
    const lossOf = (scores: (x: tf.Tensor3D) => tf.Tensor4D) => (x: tf.Tensor) =>
      tf.sum(tf.mul(tf.softmax(scores(x as tf.Tensor3D)), r))
    const viaComposite = tf.grad(lossOf((x) => twoHotScoresComposite(x, tokens, vocab, -Infinity)))(w)
    const viaKernel = tf.grad(lossOf((x) => twoHotScores(x, tokens, vocab, -Infinity)))(w)
    expectArraysClose(viaComposite, viaKernel, 1e-5)
    const dy = tf.tensor4d(rng.fillNormal(new Float32Array(batch * heads * pos * pos)), [batch, heads, pos, pos])
    const gradComposite = await leakFree(() => twoHotScoresGradComposite(dy, tokens, width, vocab))
    expectArraysClose(gradComposite, twoHotScoresGrad(dy, tokens, width, vocab), 1e-5)
    tf.dispose([tokens, w, r, dy, viaComposite, viaKernel, gradComposite])
  })

  it('pairScores / pairScatter and their gradients equal the kernels', async () => {
    const rng = Rng.fromSeed(2)
    const tokens = tf.tensor2d(tokenValues, [batch, pos], 'int32')
    const q = tf.tensor4d(rng.fillNormal(new Float32Array(batch * pos * heads * width)), [batch, pos, heads, width])
    const r = tf.tensor4d(rng.fillNormal(new Float32Array(batch * pos * heads * width)), [batch, pos, heads, width])
    const composite = await leakFree(() => pairScoresComposite(q, tokens, vocab, -Infinity))
    expectArraysClose(composite, pairScores(q, tokens, vocab, -Infinity), 1e-5)
    const p = tf.softmax(composite) as tf.Tensor4D
    const scattered = await leakFree(() => pairScatterComposite(p, tokens, width, vocab))
    expectArraysClose(scattered, pairScatter(p, tokens, width, vocab), 1e-5)
    const lossOf =
      (scores: typeof pairScores, scatter: typeof pairScatter) =>
      (x: tf.Tensor): tf.Scalar =>
        tf.sum(
          tf.mul(
            scatter(
              tf.softmax(scores(x as tf.Tensor4D, tokens, vocab, -Infinity)) as tf.Tensor4D,
              tokens,
              width,
              vocab,
            ),
            r,
          ),
        )
    const viaComposite = tf.grad(lossOf(pairScoresComposite, pairScatterComposite))(q)
    const viaKernel = tf.grad(lossOf(pairScores, pairScatter))(q)
    expectArraysClose(viaComposite, viaKernel, 1e-5)
    tf.dispose([tokens, q, r, composite, p, scattered, viaComposite, viaKernel])
  })
})

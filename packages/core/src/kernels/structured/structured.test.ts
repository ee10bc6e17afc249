import * as tf from '@tensorflow/tfjs-core'
import { describe, expect, it } from 'vitest'
import { KernelsUnavailableError, ShapeError } from '../../errors.ts'
import { Rng } from '../../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../../testing.ts'
import { pairScatter } from './pair-scatter.ts'
import { pairScores } from './pair-scores.ts'
import { twoHotScoresGrad } from './two-hot-scores-grad.ts'
import { twoHotScores } from './two-hot-scores.ts'

describeWithBackends('one-hot gather kernels', () => {
  const rng = Rng.fromSeed(0)

  it('pairScores / pairScatter equal dense products with the one-hot inputs, and are each other gradient', async () => {
    const [batch, pos, heads, vocab] = [2, 4, 3, 5]
    const width = vocab + 6
    const tokensArray = [
      [1, 4, 4, 0],
      [3, 2, 1, 1],
    ]
    const tokens = tf.tensor2d(tokensArray, [batch, pos], 'int32')
    // Dense one-hot inputs x [batch, pos, width].
    const x = tokensArray.map((row) =>
      row.map((t, j) => Array.from({ length: width }, (_, c) => (c === t ? 1 : 0) + (c === vocab + j ? 1 : 0))),
    )
    const xT = tf.tensor3d(x)
    const q = tf.tensor4d(rng.fillNormal(new Float32Array(batch * pos * heads * width)), [batch, pos, heads, width])
    const scores = pairScores(q, tokens, vocab, -Infinity)
    // dense: s[b, h, i, j] = q[b, i, h, :] . x[b, j, :]
    const qh = tf.transpose(q, [0, 2, 1, 3]) // [b, h, i, w]
    // [b, h, i, j]
    const reference = tf.matMul(qh, tf.tile(tf.expandDims(tf.transpose(xT, [0, 2, 1]), 1), [1, heads, 1, 1]))
    const refValues = (await reference.array()) as number[][][][]
    const values = (await scores.array()) as number[][][][]
    for (let b = 0; b < batch; b++)
      for (let h = 0; h < heads; h++)
        for (let i = 0; i < pos; i++)
          for (let j = 0; j < pos; j++) {
            if (j > i) expect(values[b]![h]![i]![j]).toBe(-Infinity)
            else expect(values[b]![h]![i]![j]).toBeCloseTo(refValues[b]![h]![i]![j]!, 5)
          }
    const p = tf.softmax(scores) as tf.Tensor4D
    const weighted = pairScatter(p, tokens, width, vocab) // [b, i, h, w]
    const refWeighted = tf.transpose(tf.matMul(p, tf.tile(tf.expandDims(xT, 1), [1, heads, 1, 1])), [0, 2, 1, 3])
    expectArraysClose(await weighted.data(), await refWeighted.data(), 1e-5)
    // Gradients against the dense formulation.
    const r = tf.tensor4d(rng.fillNormal(new Float32Array(batch * pos * heads * width)), [batch, pos, heads, width])
    const viaKernels = tf.grad((qq: tf.Tensor) =>
      tf.sum(
        tf.mul(
          pairScatter(
            tf.softmax(pairScores(qq as tf.Tensor4D, tokens, vocab, -Infinity)) as tf.Tensor4D,
            tokens,
            width,
            vocab,
          ),
          r,
        ),
      ),
    )(q)
    const xh = tf.tile(tf.expandDims(xT, 1), [1, heads, 1, 1]) // [b, h, j, w]
    const mask = tf.linalg.bandPart(tf.ones([pos, pos]), -1, 0)
    const viaDense = tf.grad((qq: tf.Tensor) => {
      const s = tf.matMul(tf.transpose(qq, [0, 2, 1, 3]), tf.transpose(xh, [0, 1, 3, 2]))
      const masked = tf.add(s, tf.mul(tf.sub(1, mask), -1e9))
      const out = tf.transpose(tf.matMul(tf.softmax(masked), xh), [0, 2, 1, 3])
      return tf.sum(tf.mul(out, r))
    })(q)
    expectArraysClose(await viaKernels.data(), await viaDense.data(), 1e-4)
    expect(() => pairScores(q, tf.tensor2d([[1]], [1, 1], 'int32'), vocab, 0)).toThrow(ShapeError)
    expect(() => pairScatter(p, tokens, vocab + 2, vocab)).toThrow(/offset \+ pos <= width/)
  })

  it('twoHotScores equals x W x^T with two-hot inputs; its gradient kernel is the adjoint', async () => {
    const [batch, pos, heads, vocab] = [2, 4, 3, 5]
    const width = vocab + 5
    const tokensArray = [
      [1, 4, 4, 0],
      [3, 2, 1, 1],
    ]
    const tokens = tf.tensor2d(tokensArray, [batch, pos], 'int32')
    const x = tf.tensor3d(
      tokensArray.map((row) =>
        row.map((t, j) => Array.from({ length: width }, (_, c) => (c === t ? 1 : 0) + (c === vocab + j ? 1 : 0))),
      ),
    )
    const w = tf.tensor3d(rng.fillNormal(new Float32Array(heads * width * width)), [heads, width, width])
    const scores = twoHotScores(w, tokens, vocab, -Infinity)
    // dense: s[b, h, i, j] = x[b, i] W[h] x[b, j]^T
    const xs = (await x.array()) as number[][][]
    const ws = (await w.array()) as number[][][]
    const values = (await scores.array()) as number[][][][]
    for (let b = 0; b < batch; b++)
      for (let h = 0; h < heads; h++)
        for (let i = 0; i < pos; i++)
          for (let j = 0; j < pos; j++) {
            let s = 0
            for (let r = 0; r < width; r++)
              for (let c = 0; c < width; c++) s += xs[b]![i]![r]! * ws[h]![r]![c]! * xs[b]![j]![c]!
            if (j > i) expect(values[b]![h]![i]![j]).toBe(-Infinity)
            else expect(values[b]![h]![i]![j]).toBeCloseTo(s, 4)
          }
    // <twoHotScores(w), g> = <w, twoHotScoresGrad(g)> on the causal part (adjointness), and tf.grad uses it.
    const g = tf.tensor4d(rng.fillNormal(new Float32Array(batch * heads * pos * pos)), [batch, heads, pos, pos])
    const lower = tf.linalg.bandPart(tf.ones([pos, pos]), -1, 0)
    const lhs = tf.sum(tf.mul(tf.mul(twoHotScores(w, tokens, vocab, 0), lower), g))
    const rhs = tf.sum(tf.mul(w, twoHotScoresGrad(g, tokens, width, vocab)))
    expect((await lhs.data())[0]).toBeCloseTo((await rhs.data())[0]!, 3)
    const grad = tf.grad((ww: tf.Tensor) =>
      tf.sum(tf.mul(tf.softmax(twoHotScores(ww as tf.Tensor3D, tokens, vocab, -Infinity)), g)),
    )(w)
    const denseGrad = tf.grad((ww: tf.Tensor) => {
      // (explicit tiles: tfjs batchMatMul does not broadcast [b, 1, ..] against [1, h, ..])
      const xb = tf.tile(tf.expandDims(x, 1), [1, heads, 1, 1]) as tf.Tensor4D // [b, h, pos, width]
      const wb = tf.tile(tf.expandDims(ww, 0), [batch, 1, 1, 1]) as tf.Tensor4D // [b, h, width, width]
      const s = tf.matMul(tf.matMul(xb, wb), tf.transpose(xb, [0, 1, 3, 2])) // [b, h, i, j]
      return tf.sum(tf.mul(tf.softmax(tf.add(s, tf.mul(tf.sub(1, lower), -1e9))), g))
    })(w)
    expectArraysClose(await grad.data(), await denseGrad.data(), 1e-4)
    // Second order: the gradient kernel's own gradient is the score gather.
    const second = tf.grad((gg: tf.Tensor) =>
      tf.sum(tf.mul(twoHotScoresGrad(gg as tf.Tensor4D, tokens, width, vocab), w)),
    )(g)
    expectArraysClose(await second.data(), await tf.mul(twoHotScores(w, tokens, vocab, 0), lower).data(), 1e-4)
    expect(() => twoHotScores(w, tf.tensor2d([[0, 0, 0, 0, 0, 0]], [1, 6], 'int32'), vocab, 0)).toThrow(ShapeError)
  })

  it('kernels leak nothing', async () => {
    const q = tf.zeros([1, 3, 2, 6]) as tf.Tensor4D
    const tokens = tf.tensor2d([[0, 1, 2]], [1, 3], 'int32')
    await expectNoLeaks(() => {
      tf.tidy(() => {
        pairScatter(pairScores(q, tokens, 3, -Infinity), tokens, 6, 3)
      })
    })
    tf.dispose([q, tokens])
  })
})

describe('structured kernels on a backend not started by useBackend', () => {
  it('throw KernelsUnavailableError naming useBackend', async () => {
    const { MathBackendCPU } = await import('@tensorflow/tfjs-backend-cpu')
    const before = tf.getBackend()
    tf.registerBackend('bare-cpu', () => new MathBackendCPU())
    try {
      await tf.setBackend('bare-cpu')
      const q = tf.tensor4d(new Float32Array(36), [1, 3, 2, 6])
      const tokens = tf.tensor2d([[0, 1, 2]], [1, 3], 'int32')
      expect(() => pairScores(q, tokens, 3, -Infinity)).toThrow(KernelsUnavailableError)
      expect(() => pairScores(q, tokens, 3, -Infinity)).toThrow(/useBackend\('bare-cpu'\)/)
      tf.dispose([q, tokens])
    } finally {
      await tf.setBackend(before)
      tf.removeBackend('bare-cpu')
    }
  })
})

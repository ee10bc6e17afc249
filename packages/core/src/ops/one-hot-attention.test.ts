import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { AttnlabError, ConfigError, ShapeError } from '../errors.ts'
import { Rng } from '../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../testing.ts'
import { oneHotAttention } from './one-hot-attention.ts'
import { directionalError, gradients, randomArray, refOneHot, toVec, withoutKernels } from './reference.test-utils.ts'

describeWithBackends('oneHotAttention', () => {
  const cases = [
    // the minimal model's shape family: dModel = dVocab + pos, dValue = dModel, logits = first dVocab columns
    { batch: 3, pos: 6, nHeads: 2, dVocab: 5, extra: 0, dValueExtra: 0, outCols: 5, scale: 1, from: 0 },
    // only the later positions' logits (a trainer skipping unscored positions)
    { batch: 2, pos: 7, nHeads: 3, dVocab: 4, extra: 0, dValueExtra: 0, outCols: 4, scale: 1, from: 3 },
    // dModel larger than dVocab + pos (shorter sequence than nCtx), fewer value columns, a scale
    { batch: 2, pos: 4, nHeads: 3, dVocab: 7, extra: 3, dValueExtra: -5, outCols: 4, scale: 0.5, from: 0 },
    { batch: 1, pos: 1, nHeads: 1, dVocab: 2, extra: 0, dValueExtra: 0, outCols: 1, scale: 1, from: 0 },
  ]
  for (const { batch, pos, nHeads, dVocab, extra, dValueExtra, outCols, scale, from } of cases) {
    const dModel = dVocab + pos + extra
    const dValue = dModel + dValueExtra
    it(
      `batch ${batch}, pos ${pos}, ${nHeads} heads, dModel ${dModel}, dValue ${dValue}, outCols ${outCols}, from ` +
        `${from}: equals the dense form, gradients too`,
      async () => {
        const rng = Rng.fromSeed(batch * 100 + pos)
        const tokenValues = Int32Array.from({ length: batch * pos }, () => rng.int(dVocab))
        const tokens = tf.tensor2d(tokenValues, [batch, pos], 'int32')
        const wq = tf.tensor3d(randomArray(rng, nHeads * dModel * dModel, 2), [nHeads, dModel, dModel])
        const wv = tf.tensor3d(randomArray(rng, nHeads * dModel * dValue), [nHeads, dModel, dValue])
        const rv = randomArray(rng, batch * (pos - from) * outCols)
        const r = tf.tensor3d(rv, [batch, pos - from, outCols])
        const f = (...xs: tf.Tensor[]): tf.Tensor =>
          oneHotAttention(tokens, xs[0] as tf.Tensor3D, xs[1] as tf.Tensor3D, { dVocab, outCols, scale, from })
        const fused = await expectNoLeaks(() => gradients(f, [wq, wv], r))
        const composite = withoutKernels(() => gradients(f, [wq, wv], r))
        const vecs = [toVec(wq.dataSync()), toVec(wv.dataSync())]
        const ref = (vs: Float64Array[]): Float64Array => {
          const full = refOneHot(
            tokenValues,
            vs[0]!,
            vs[1]!,
            batch,
            pos,
            nHeads,
            dModel,
            dValue,
            dVocab,
            outCols,
            scale,
          )
          const out = new Float64Array(batch * (pos - from) * outCols)
          for (let b = 0; b < batch; b++)
            out.set(full.subarray((b * pos + from) * outCols, (b + 1) * pos * outCols), b * (pos - from) * outCols)
          return out
        }
        expectArraysClose(fused.value, ref(vecs), 1e-5, 1e-4)
        expectArraysClose(fused.value, composite.value, 1e-5, 1e-4)
        fused.grads.forEach((g, i) => {
          expectArraysClose(g, composite.grads[i]!, 1e-5, 1e-4)
          expect(directionalError(ref, vecs, i, toVec(rv), g, rng)).toBeLessThan(1e-4)
        })
        tf.dispose([tokens, wq, wv, r])
      },
    )
  }

  it('masked and underflowing probabilities are exactly 0 (no denormals): the output is one value row', () => {
    // Head scores: a huge margin for key 0, so every other key's probability underflows.
    const dVocab = 3
    const pos = 5
    const dModel = dVocab + pos
    const wq = new Float32Array(dModel * dModel)
    for (let r = 0; r < dModel; r++) wq[r * dModel + dVocab] = 200 // every query strongly prefers position 0's one-hot
    const wv = new Float32Array(dModel * dModel)
    for (let c = 0; c < dVocab; c++) wv[dVocab * dModel + c] = c + 1 // position 0's value row: [1, 2, 3]
    const logits = tf.tidy(() =>
      oneHotAttention(
        tf.tensor2d([[0, 1, 2, 1, 0]], [1, pos], 'int32'),
        tf.tensor3d(wq, [1, dModel, dModel]),
        tf.tensor3d(wv, [1, dModel, dModel]),
        { dVocab },
      ),
    )
    const values = logits.dataSync()
    for (let t = 0; t < pos; t++) expect(Array.from(values.slice(t * 3, t * 3 + 3))).toEqual([1, 2, 3])
    logits.dispose()
  })

  it('throws typed errors for out-of-range tokens and inconsistent shapes', () => {
    const wq = tf.zeros([2, 8, 8]) as tf.Tensor3D
    const wv = tf.zeros([2, 8, 8]) as tf.Tensor3D
    const tokens = tf.tensor2d([[0, 5, 1]], [1, 3], 'int32')
    expect(() => oneHotAttention(tokens, wq, wv, { dVocab: 5 })).toThrow(AttnlabError)
    expect(() => oneHotAttention(tokens, wq, wv, { dVocab: 5 })).toThrow(
      /token 5 at flat index 1 is out of range \[0, 5\)/,
    )
    expect(() => oneHotAttention(tf.tensor2d([[0, 1, 2, 3]], [1, 4], 'int32'), wq, wv, { dVocab: 5 })).toThrow(
      /exceeds dModel 8/,
    )
    expect(() => oneHotAttention(tokens, wq, tf.zeros([3, 8, 8]) as tf.Tensor3D, { dVocab: 5 })).toThrow(ShapeError)
    expect(() => oneHotAttention(tokens, wq, wv, { dVocab: 5, outCols: 9 })).toThrow(ConfigError)
    expect(() => oneHotAttention(tokens, wq, wv, { dVocab: 0 })).toThrow(ConfigError)
    expect(() => oneHotAttention(tf.tensor2d([[0, 1, 2]], [1, 3], 'int32'), wq, wv, { dVocab: 5, from: 3 })).toThrow(
      /from.*\[0, 2\]/,
    )
    expect(() => oneHotAttention(tf.tensor2d([[0, 1, 2]], [1, 3]) as tf.Tensor2D, wq, wv, { dVocab: 5 })).toThrow(
      /int32/,
    )
    tf.dispose([wq, wv, tokens])
  })
})

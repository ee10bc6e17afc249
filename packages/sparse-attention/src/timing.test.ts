// Every result times the method's estimation apart from the attention (wall clock): the prefill
// planners, and for decode the afterPrefill step (SnapKV's observation-window scores, Quest's page
// bounds) and the step's selection.
import { expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { adaSnapKV, applyDecode, applyPrefill, blockSparse, dense, quest, snapKV } from './index.ts'
import { randomQkv, tensors } from './__fixtures__/reference.ts'

function expectSeconds(value: number, what: string): void {
  expect(Number.isFinite(value), what).toBe(true)
  expect(value, what).toBeGreaterThanOrEqual(0)
  expect(value, what).toBeLessThan(60)
}

describeWithBackends('timing of estimation and attention', () => {
  it('prefill: the planner and the attention are timed apart', async () => {
    await expectNoLeaks(() => {
      const t = tensors(randomQkv(2, 4, 2, 96, 8))
      const bs = applyPrefill(blockSparse({ blockSize: 8, topK: 4 }), t)
      expect(bs.timing.estimationSeconds).toBeGreaterThan(0) // block pooling and top-K
      expect(bs.timing.attentionSeconds).toBeGreaterThan(0)
      const d = applyPrefill(dense(), t)
      expectSeconds(d.timing.estimationSeconds, 'dense estimation')
      expect(d.timing.attentionSeconds).toBeGreaterThan(0)
      tf.dispose([t.q, t.k, t.v, bs.output, d.output])
    })
  })

  it('decode: afterPrefill (window scores, page bounds) counts in the estimation, not the attention', async () => {
    await expectNoLeaks(() => {
      const x = randomQkv(3, 4, 2, 80, 8)
      const t = tensors(x)
      const step = {
        qNew: tf.tensor2d(randomQkv(4, 4, 2, 1, 8).q, [4, 8]),
        kNew: tf.tensor2d(randomQkv(5, 2, 2, 1, 8).k, [2, 8]),
        vNew: tf.tensor2d(randomQkv(6, 2, 2, 1, 8).v, [2, 8]),
      }
      const kernels = [
        snapKV({ capacity: 24, window: 8, local: 4, prefix: 2, kernelSize: 3 }),
        adaSnapKV({ capacity: 24, window: 8, local: 4, prefix: 2, kernelSize: 3 }),
        quest({ tokenBudget: 16, pageSize: 8 }),
      ]
      for (const kernel of kernels) {
        const r = applyDecode(kernel, t, step)
        const { estimationSeconds, attentionSeconds, afterPrefillSeconds } = r.timing
        expect(afterPrefillSeconds, kernel.method).toBeGreaterThan(0)
        expect(estimationSeconds, kernel.method).toBeGreaterThanOrEqual(afterPrefillSeconds)
        expectSeconds(attentionSeconds, `${kernel.method} attention`)
        r.output.dispose()
      }
      const d = applyDecode(dense(), t, step)
      expect(d.timing.afterPrefillSeconds).toBe(0)
      d.output.dispose()
      tf.dispose([t.q, t.k, t.v, step.qNew, step.kNew, step.vNew])
    })
  })
})

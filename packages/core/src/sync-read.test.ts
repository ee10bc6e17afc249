import * as tf from '@tensorflow/tfjs-core'
import { MathBackendCPU } from '@tensorflow/tfjs-backend-cpu'
import { describe, expect, it } from 'vitest'
import { useBackend } from './backend.ts'
import { UnsupportedError } from './errors.ts'
import { readValuesSync, requireSyncReads, syncReadsAllowed } from './sync-read.ts'

describe('synchronous reads', () => {
  it('are allowed on every backend but webgpu', () => {
    expect(syncReadsAllowed('webgpu')).toBe(false)
    for (const name of ['cpu', 'wasm', 'webgl', 'tensorflow']) expect(syncReadsAllowed(name)).toBe(true)
  })

  it('read values where allowed and throw UnsupportedError naming the op and the backend on webgpu', async () => {
    await useBackend('cpu')
    const t = tf.tensor1d([1, 2, 3])
    expect(Array.from(readValuesSync(t, 'a test'))).toEqual([1, 2, 3])
    t.dispose()
    // A cpu backend registered under the name 'webgpu' stands in for it (Node has no WebGPU).
    const standIn = new MathBackendCPU()
    ;(standIn as unknown as { firstUse: boolean }).firstUse = false // no tfjs-node banner
    tf.registerBackend('webgpu', () => standIn, -1)
    try {
      await tf.setBackend('webgpu')
      const x = tf.tensor1d([1])
      expect(() => readValuesSync(x, 'block-sparse estimation')).toThrow(UnsupportedError)
      expect(() => requireSyncReads('quest page bounds')).toThrow(
        /^quest page bounds reads tensor values synchronously, which the 'webgpu' backend does not allow/,
      )
      x.dispose()
    } finally {
      await useBackend('cpu')
      tf.removeBackend('webgpu')
    }
  })
})

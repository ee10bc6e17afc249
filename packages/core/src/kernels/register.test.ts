import * as tf from '@tensorflow/tfjs-core'
import { afterAll, expect, it } from 'vitest'
import { useBackend } from '../backend.ts'
import { UnsupportedError } from '../errors.ts'
import { Rng } from '../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../testing.ts'
import { linear } from '../ops/linear.ts'
import { causalAttention } from '../ops/causal-attention.ts'
import { randomArray } from '../ops/reference.test-utils.ts'
import { jsKernelProvider } from './js-provider.ts'
import { wasmBackendMemory, wasmInternalsProblems } from './memory.ts'
import { ATTNLAB_KERNELS, REPLACED_STOCK_KERNELS } from './names.ts'
import { activeKernels, kernelsActive, registerAttnlabKernels } from './register.ts'

/** Stock tfjs result of `fn` (attnlab kernels removed for the call). */
function stock<T>(fn: () => T): T {
  const registration = activeKernels()
  if (registration === undefined) return fn()
  registration.dispose()
  try {
    return fn()
  } finally {
    registerAttnlabKernels(registration.backendName, registration.provider)
  }
}

describeWithBackends('kernel registration', (backend, mode) => {
  it(
    'replaces matmul (all transpose flags, batched, ' + 'broadcast) with the same numbers as the stock kernel',
    async () => {
      const rng = Rng.fromSeed(11)
      const cases: [number[], number[], boolean, boolean][] = [
        [[13, 7], [7, 9], false, false],
        [[7, 13], [7, 9], true, false],
        [[13, 7], [9, 7], false, true],
        [[7, 13], [9, 7], true, true],
        [[3, 5, 6], [3, 6, 4], false, false],
        [[3, 5, 6], [6, 4], false, false], // b broadcast over the batch
        [[2, 3, 6, 5], [1, 1, 4, 5], false, true],
        [[1, 300], [300, 40], false, false], // depth > one packed block
      ]
      for (const [sa, sb, ta, tb] of cases) {
        const a = tf.tensor(
          randomArray(
            rng,
            sa.reduce((x, y) => x * y),
          ),
          sa,
        )
        const b = tf.tensor(
          randomArray(
            rng,
            sb.reduce((x, y) => x * y),
          ),
          sb,
        )
        await expectNoLeaks(() => tf.matMul(a, b, ta, tb), { disposeResult: true })
        const ours = tf.matMul(a, b, ta, tb)
        const theirs = stock(() => tf.matMul(a, b, ta, tb))
        expect(ours.shape).toEqual(theirs.shape)
        expectArraysClose(ours.dataSync(), theirs.dataSync(), 1e-5, 1e-4)
        const fused = tf.fused.matMul({
          a,
          b,
          transposeA: ta,
          transposeB: tb,
          bias: tf.ones([ours.shape[ours.rank - 1]!]),
          activation: 'relu',
        })
        const fusedStock = stock(() =>
          tf.fused.matMul({
            a,
            b,
            transposeA: ta,
            transposeB: tb,
            bias: tf.ones([ours.shape[ours.rank - 1]!]),
            activation: 'relu',
          }),
        )
        expectArraysClose(fused.dataSync(), fusedStock.dataSync(), 1e-5, 1e-4)
        tf.dispose([a, b, ours, theirs, fused, fusedStock])
      }
    },
  )

  it('softmax gives exact zeros for -Infinity and matches the stock kernel elsewhere', () => {
    const x = tf.tensor2d([1, -Infinity, 3, 0.5, 100, -100, -Infinity, 2], [2, 4])
    const ours = tf.softmax(x)
    const values = ours.dataSync()
    expect(values[1]).toBe(0)
    expect(values[6]).toBe(0)
    expect(values[5]).toBe(0) // exp(-200) underflows to exactly 0, not a denormal
    const theirs = stock(() => tf.softmax(x))
    expectArraysClose(values, theirs.dataSync(), 1e-6)
    tf.dispose([x, ours, theirs])
  })

  it(
    'NaN propagates through softmax and fused attention ' + 'like the stock kernels (a NaN row is not a masked row)',
    () => {
      const x = tf.tensor2d([NaN, NaN, NaN, 1, NaN, 2, 0, 1, 2], [3, 3])
      const values = tf.softmax(x).dataSync()
      for (let j = 0; j < 6; j++) expect(values[j], `entry ${j}`).toBeNaN()
      expect([...values.slice(6)].every((v) => Number.isFinite(v))).toBe(true)
      // All-NaN queries: every output is NaN (the fused kernel's masked-row shortcut must not zero it).
      const qkv = tf.tensor3d(
        Array.from({ length: 4 * 6 }, (_, i) => (i % 6 < 2 ? NaN : 0.1 * (i % 5))),
        [1, 4, 6],
      )
      const z = causalAttention(qkv, 1)
      expect([...z.dataSync()].every((v) => Number.isNaN(v))).toBe(true)
      tf.dispose([x, qkv, z])
    },
  )

  it('clones stay correct (on wasm a clone shares the buffer) and free their memory', async () => {
    const before = tf.memory().numTensors
    const x = tf.tensor1d([1, 2, 3])
    const y = tf.clone(x)
    x.dispose()
    expectArraysClose(y.dataSync(), [1, 2, 3], 0, 0)
    y.dispose()
    expect(tf.memory().numTensors).toBe(before)
    const s = tf.tensor1d(['a', 'b'], 'string')
    const t = tf.clone(s)
    expect(t.dataSync()).toEqual(s.dataSync())
    tf.dispose([s, t])
  })

  if (mode !== 'wasm') {
    it('registers the fused kernels on this backend', () => {
      expect(kernelsActive()).toBe(true)
      for (const name of Object.values(ATTNLAB_KERNELS)) expect(tf.getKernel(name, backend), name).toBeDefined()
    })
  }
})

describeWithBackends(
  'kernel registration lifecycle',
  (backend) => {
    afterAll(async () => {
      await useBackend(backend, { kernels: 'none' })
    })

    it('dispose() restores the stock kernels and removes the fused ones; registering again replaces', () => {
      activeKernels()?.dispose()
      const stockKernels = Object.fromEntries(REPLACED_STOCK_KERNELS.map((name) => [name, tf.getKernel(name, backend)]))
      const registration = registerAttnlabKernels(backend as 'wasm' | 'cpu', jsKernelProvider, { replaceMatMul: true })
      expect(registration.replaced).toEqual(
        backend === 'wasm'
          ? ['BatchMatMul', '_FusedMatMul', 'Identity', 'Softmax']
          : ['BatchMatMul', '_FusedMatMul', 'Softmax'],
      )
      expect(tf.getKernel('BatchMatMul', backend)).not.toBe(stockKernels.BatchMatMul)
      expect(activeKernels()).toBe(registration)
      const second = registerAttnlabKernels(backend as 'wasm' | 'cpu', jsKernelProvider)
      expect(activeKernels()).toBe(second)
      second.dispose()
      second.dispose() // idempotent
      for (const name of REPLACED_STOCK_KERNELS) expect(tf.getKernel(name, backend), name).toBe(stockKernels[name])
      for (const name of Object.values(ATTNLAB_KERNELS)) expect(tf.getKernel(name, backend)).toBeUndefined()
      expect(kernelsActive()).toBe(false)
    })

    it('refuses backends it cannot serve', () => {
      expect(() => registerAttnlabKernels('webgl' as 'wasm', jsKernelProvider)).toThrow(UnsupportedError)
      if (backend === 'cpu') {
        expect(() => registerAttnlabKernels('cpu', { ...jsKernelProvider, name: 'wasm' })).toThrow(
          /wasm backend's heap/,
        )
      }
    })
  },
  ['cpu', 'wasm'],
)

describeWithBackends('kernels survive wasm memory growth in the middle of a kernel (views are taken afresh)', () => {
  afterAll(async () => {
    await useBackend('wasm', { kernels: 'none' })
  })

  it(
    'linear (+ bias, GELU) forward and backward and fused matmul give the same numbers when a provider call grows ' +
      'the heap',
    () => {
      const heap = (
        tf.findBackend('wasm') as unknown as {
          wasm: { _malloc(n: number): number; _free(p: number): void; HEAPU8: Uint8Array }
        }
      ).wasm
      let grows = 0
      const grow = (): void => {
        if (grows >= 3) return
        grows++
        const p = heap._malloc(heap.HEAPU8.buffer.byteLength) // more than is free: the memory grows, views detach
        heap._free(p)
      }
      const growing = {
        ...jsKernelProvider,
        gemm: (...a: Parameters<typeof jsKernelProvider.gemm>) => {
          jsKernelProvider.gemm(...a)
          grow()
        },
      }
      const rng = Rng.fromSeed(4)
      const x = tf.tensor2d(randomArray(rng, 6 * 5), [6, 5])
      const w = tf.tensor2d(randomArray(rng, 5 * 7), [5, 7])
      const b = tf.tensor1d(randomArray(rng, 7))
      const run = (): Float32Array[] =>
        tf.tidy(() => {
          const f = (xx: tf.Tensor, ww: tf.Tensor, bb: tf.Tensor): tf.Tensor =>
            linear(xx as tf.Tensor2D, ww as tf.Tensor2D, bb as tf.Tensor1D, 'gelu_new')
          const y = f(x, w, b)
          const grads = tf.grads(f)([x, w, b], tf.onesLike(y))
          const fused = tf.fused.matMul({ a: x, b: w, bias: b, activation: 'relu' })
          return [y, ...grads, fused].map((t) => t.dataSync() as Float32Array)
        })
      registerAttnlabKernels('wasm', jsKernelProvider, { replaceMatMul: true })
      const expected = run()
      registerAttnlabKernels('wasm', growing, { replaceMatMul: true })
      const actual = run()
      expect(grows).toBeGreaterThan(0)
      actual.forEach((a, i) => {
        expectArraysClose(a, expected[i]!, 1e-6)
      })
      tf.dispose([x, w, b])
    },
  )
}, ['wasm'])

describeWithBackends('tfjs-backend-wasm internals (canary: fails when a tfjs upgrade moves them)', () => {
  it('exposes dataIdMap, makeOutput, disposeData, HEAPU8, _malloc/_free and asm.memory', () => {
    const backend = tf.findBackend('wasm')
    expect(wasmInternalsProblems(backend)).toEqual([])
    const memory = wasmBackendMemory(backend)
    const internals = backend as unknown as {
      dataIdMap: { get(id: unknown): { memoryOffset: number } }
      wasm: { HEAPU8: Uint8Array }
    }
    expect(memory.buffer).toBe(internals.wasm.HEAPU8.buffer)
    const t = tf.tensor1d([1.5, -2, 3])
    const { memoryOffset } = internals.dataIdMap.get(t.dataId)
    expect(Array.from(new Float32Array(memory.buffer, memoryOffset, 3))).toEqual([1.5, -2, 3])
    t.dispose()
    expect(wasmInternalsProblems({})).toHaveLength(6)
    expect(wasmInternalsProblems(undefined)).toEqual(['the wasm backend is not initialised'])
  })
}, ['wasm'])

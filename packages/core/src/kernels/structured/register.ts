/**
 * Registration of the structured kernels (one file per kernel beside this one) on a backend, with
 * their gradients. Called by `useBackend` for every backend it starts: they are plain JavaScript
 * loops over the backend's memory (the wasm heap directly, `readSync` elsewhere), so unlike the
 * provider kernels (`register.ts`) they exist on every backend and in every kernels mode.
 *
 * Why: the minimal model's input is two one-hots, so its attention scores `(x W_Q) x^T` are
 * gathers (Yüksel et al., arXiv 2602.19143, section 2; see `docs/performance.md`). On tfjs-wasm the
 * generic `tf.gather` costs ~150 ns per element; these loops cost 1-2 ns per element on both `cpu`
 * and `wasm`.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { COMPOSITE_BACKENDS, markCompositesReady } from './composite.ts'
import { STRUCTURED_KERNELS } from './names.ts'
import { pairScatterGradConfig, pairScatterKernelConfig } from './pair-scatter.ts'
import { pairScoresGradConfig, pairScoresKernelConfig } from './pair-scores.ts'
import { twoHotScoresGradConfig, twoHotScoresKernelConfig } from './two-hot-scores.ts'
import { requireKernel } from './run-js.ts'
import { twoHotScoresGradGradConfig, twoHotScoresGradKernelConfig } from './two-hot-scores-grad.ts'

const KERNELS = [
  pairScoresKernelConfig,
  pairScatterKernelConfig,
  twoHotScoresKernelConfig,
  twoHotScoresGradKernelConfig,
]
const GRADIENTS = [pairScoresGradConfig, pairScatterGradConfig, twoHotScoresGradConfig, twoHotScoresGradGradConfig]

/**
 * Registers the structured kernels on `backendName` (tfjs' registered name, e.g. `cpu`, `wasm`,
 * `tensorflow`) and their gradients (global). Idempotent. On GPU backends (`webgl`, `webgpu`) no
 * kernel is registered: the ops run as tfjs compositions there (`composite.ts`), which read
 * nothing back from the GPU.
 *
 * @param backendName - the tfjs backend's registered name
 */
export function registerStructuredKernels(backendName: string): void {
  if (COMPOSITE_BACKENDS.includes(backendName)) {
    markCompositesReady(backendName)
    return
  }
  for (const { kernelName, kernelFunc } of KERNELS) {
    if (tf.getKernel(kernelName, backendName) === undefined) tf.registerKernel({ kernelName, backendName, kernelFunc })
  }
  for (const config of GRADIENTS) {
    if (tf.getGradient(config.kernelName) === undefined) tf.registerGradient(config)
  }
}

/**
 * Checks that the active backend was started by `useBackend` (`@attnlab/core`), which registers
 * attnlab's kernels and gradients on it; models call it before each pass, so a backend started
 * any other way (`tf.setBackend`) fails with a clear error instead of a missing gradient later.
 *
 * @throws `KernelsUnavailableError` naming the backend and the `useBackend` call to make
 * @category Kernels
 */
export function requireAttnlabKernels(): void {
  requireKernel(STRUCTURED_KERNELS.pairScores)
}

/**
 * `@attnlab/transformer/internal`: the building blocks the model is made of, for other attnlab
 * packages and tests; not part of the stable API (names and signatures may change in any
 * release).
 *
 * - Ops: {@link activation}, {@link applyRotary}, {@link rmsNorm}, {@link ropeTables},
 *   {@link dropout}, {@link oneHotFloat}, {@link crossEntropyPerRow}, {@link maskedCrossEntropy}.
 * - Kernels (registered per backend by {@link ensureKernels}, called by the model):
 *   {@link KERNEL_NAMES}, {@link twoHotScores}, {@link twoHotScoresGrad}, {@link pairScores},
 *   {@link pairScatter}.
 * - Gradients of stock kernels that tfjs-core's Node build lacks: {@link ensureGradients},
 *   {@link registeredGradientKernels}.
 *
 * @packageDocumentation
 */
export {
  activation,
  applyRotary,
  crossEntropyPerRow,
  dropout,
  maskedCrossEntropy,
  oneHotFloat,
  rmsNorm,
  ropeTables,
} from './ops.ts'
export { KERNEL_NAMES, ensureKernels, pairScatter, pairScores, twoHotScores, twoHotScoresGrad } from './kernels.ts'
export { ensureGradients, registeredGradientKernels } from './gradients.ts'

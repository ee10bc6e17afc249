/**
 * `@attnlab/transformer/internal`: the building blocks the model is made of, for other attnlab
 * packages and tests; not part of the stable API (names and signatures may change in any
 * release).
 *
 * - Ops: {@link activation}, {@link applyRotary}, {@link rmsNorm}, {@link ropeTables},
 *   {@link dropout}, {@link oneHotFloat}, {@link crossEntropyPerRow}, {@link maskedCrossEntropy}.
 *
 * The kernels the model runs (the minimal model's structured kernels, the fused ops) and the
 * gradients it trains through are in `@attnlab/core/kernels`, registered by `useBackend`
 * (`@attnlab/core`); the model registers nothing.
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

/**
 * Names of the structured kernels (stable; they appear in tfjs profiles). Each is the gradient of
 * another: `pairScores` <-> `pairScatter`, `twoHotScores` <-> `twoHotScoresGrad`.
 *
 * @category Kernels
 */
export const STRUCTURED_KERNELS = Object.freeze({
  /** Scores of queries against one-hot keys: `[batch, heads, pos, pos]`. */
  pairScores: 'AttnlabPairScores',
  /** The attention-weighted one-hot input: `[batch, pos, heads, width]`. */
  pairScatter: 'AttnlabPairScatter',
  /** The minimal model's scores from `W_Q` by four lookups per pair: `[batch, heads, pos, pos]`. */
  twoHotScores: 'AttnlabTwoHotScores',
  /** Backward of the two-hot scores: `[heads, width, width]`. */
  twoHotScoresGrad: 'AttnlabTwoHotScoresGrad',
})

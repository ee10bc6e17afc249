/**
 * Names of the fused kernels attnlab registers (stable; they appear in tfjs profiles).
 *
 * @category Kernels
 */
export const ATTNLAB_KERNELS = Object.freeze({
  /** Sums of table rows (embedding lookups): one output. */
  gatherRows: 'AttnlabGatherRows',
  /** Backward of the row gather: the table's gradient. */
  scatterRows: 'AttnlabScatterRows',
  /** `x @ w (+ bias)`: one output. */
  linear: 'AttnlabLinear',
  /** `gelu_new(x @ w (+ bias))`: outputs `[y, preActivation]`. */
  linearGelu: 'AttnlabLinearGelu',
  /** Backward of both linear kernels: `[dx, dw, dBias?]`. */
  linearGrad: 'AttnlabLinearGrad',
  /** LayerNorm: `[y, mean, rstd]`. */
  layerNorm: 'AttnlabLayerNorm',
  /** Backward of LayerNorm: `[dx, dGain, dBias?]`. */
  layerNormGrad: 'AttnlabLayerNormGrad',
  /** Multi-head attention on a fused qkv: `[z, pattern]`. */
  attention: 'AttnlabAttention',
  /** Backward of attention: `dQkv`. */
  attentionGrad: 'AttnlabAttentionGrad',
  /** Weighted mean softmax cross-entropy: a scalar. */
  softmaxCrossEntropy: 'AttnlabSoftmaxCrossEntropy',
  /** Backward of the cross-entropy: `dLogits`. */
  softmaxCrossEntropyGrad: 'AttnlabSoftmaxCrossEntropyGrad',
  /** The minimal model's attention on one-hot inputs: `[logits, pattern]`. */
  oneHotAttention: 'AttnlabOneHotAttention',
  /** Backward of the one-hot attention: `[dWq, dWv]`. */
  oneHotAttentionGrad: 'AttnlabOneHotAttentionGrad',
  /** Attention over key spans per query tile (sparse prefill and decode): `z`. */
  sparseAttention: 'AttnlabSparseAttention',
  /** Quest's page selection for a decode query (upper bounds and top-k): `chosen` int32. */
  pageSelect: 'AttnlabPageSelect',
})

/**
 * The stock tfjs kernels attnlab replaces on a backend (restored on unregistration): the matmuls
 * (providers with a fast matmul), `Softmax`, and on `wasm` a zero-copy `Identity`.
 *
 * @category Kernels
 */
export const REPLACED_STOCK_KERNELS = Object.freeze([
  'BatchMatMul',
  '_FusedMatMul',
  'Softmax',
  'Identity',
  'Add',
] as const)

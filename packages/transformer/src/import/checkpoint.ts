/**
 * What every importer returns: a validated configuration and every parameter as plain float32
 * data, ready to be put into a model in one step.
 *
 * @module
 */
import type { TransformerConfig } from '../config.ts'
import type { TensorMap } from './layout.ts'

/**
 * Checkpoint formats attnlab reads and writes.
 *
 * - `llama2c`: llama2.c's `.bin` (legacy version 0, or version 1 float32).
 * - `huggingface`: a Hugging Face model directory (`config.json` + safetensors), `model_type`
 *   `llama`, `mistral`, `qwen2`, `gpt2` or `gpt_neox`.
 * - `attnlab`: an attnlab-native directory (`config.json` with `model_type: "attnlab"` +
 *   `model.safetensors` under attnlab parameter names), for models Hugging Face has no class
 *   for (`minimal`, `mixer`, `gpt` variants other than GPT-2 / GPT-NeoX, non-standard `llama` variants).
 * - `checkpoint`: an attnlab training checkpoint (`saveCheckpoint`, `manifest.json`).
 *
 * @category Import
 */
export type CheckpointFormat = 'llama2c' | 'huggingface' | 'attnlab' | 'checkpoint'

/**
 * A checkpoint read and validated, not yet in a model: the configuration it implies and every
 * parameter under its attnlab (TransformerLens) name and shape. Nothing here owns tensors.
 *
 * @category Import
 */
export interface ImportedCheckpoint {
  /** The format it was read from. */
  readonly format: CheckpointFormat
  /** The resolved, frozen configuration. */
  readonly config: TransformerConfig
  /** Every parameter of the model, by attnlab name (see `llamaParameterShapes` for `llama`). */
  readonly weights: TensorMap
  /** Special token ids the checkpoint declares (llama2.c: BOS 1, EOS 2). */
  readonly specialTokens: SpecialTokens
  /** Human-readable notes about choices made while reading (inferred RoPE theta, capped context...). */
  readonly notes: readonly string[]
}

/**
 * Special token ids, when known.
 *
 * @category Import
 */
export interface SpecialTokens {
  /** Beginning of sequence. */
  readonly bos?: number
  /** End of sequence (some models have several). */
  readonly eos?: readonly number[]
}

/**
 * `@attnlab/transformer/io`: model files in and out, without the file system where possible:
 * llama2.c checkpoints and tokenizers ({@link parseLlama2cCheckpoint}, {@link Llama2cTokenizer}), Hugging Face
 * `tokenizer.json` tokenizers ({@link HuggingFaceTokenizer}; both are a {@link Tokenizer}),
 * Hugging Face Llama weights and configs ({@link llamaFromHuggingFace}, {@link configFromHuggingFace}), GPT-2 and
 * GPT-NeoX weights and configs ({@link gptFamilyFromHuggingFace}, {@link gptFamilyConfigFromHuggingFace}),
 * directories ({@link readHuggingFaceDirectory}, {@link saveModelDirectory}) and {@link loadModel}.
 * The same names are also exported by the main entry.
 *
 * @packageDocumentation
 */
export { ModelFileError, UnsupportedModelError, type ModelFileErrorReason } from './import/errors.ts'
export type { CheckpointFormat, ImportedCheckpoint, SpecialTokens } from './import/checkpoint.ts'
export {
  interleavedToRotateHalf,
  rotateHalfToInterleaved,
  type Float32Tensor,
  type TensorMap,
} from './import/layout.ts'
export {
  NO_BIASES,
  checkTensorSet,
  huggingFaceBiasLayout,
  huggingFaceLlamaShapes,
  llamaFromHuggingFace,
  llamaToHuggingFace,
  tiedEmbeddingAliases,
  type LlamaBiasLayout,
  type TensorSetCheck,
} from './import/llama-weights.ts'
export {
  LLAMA2C_LEGACY_HEADER_BYTES,
  LLAMA2C_MAGIC,
  LLAMA2C_NORM_EPS,
  LLAMA2C_ROPE_THETA,
  LLAMA2C_V1_HEADER_BYTES,
  llama2cFileBytes,
  parseLlama2cCheckpoint,
  parseLlama2cHeader,
  readLlama2cCheckpoint,
  serializeLlama2cCheckpoint,
  type Llama2cCheckpoint,
  type Llama2cHeader,
  type Llama2cReadOptions,
} from './import/llama2c.ts'
export {
  Llama2cTokenizer,
  type DecodeOptions,
  type EncodeOptions,
  type Llama2cTokenizerOptions,
  type Tokenizer,
} from './import/tokenizer.ts'
export { HuggingFaceTokenizer, type HuggingFaceTokenizerOptions } from './import/tokenizer-json.ts'
export {
  ATTNLAB_FORMAT_VERSION,
  ATTNLAB_MODEL_TYPE,
  attnlabConfigFor,
  configFromHuggingFace,
  huggingFaceConfigFor,
  huggingFaceConfigOptionsSchema,
  huggingFaceIncompatibility,
  type HuggingFaceConfigOptions,
  type HuggingFaceModelInfo,
  type HuggingFaceModelType,
} from './import/huggingface.ts'
export {
  gptFamilyConfigFor,
  gptFamilyConfigFromHuggingFace,
  gptFamilyFromHuggingFace,
  gptFamilyModelTypeFor,
  gptFamilyToHuggingFace,
  huggingFaceGptShapes,
  type GptFamilyConfigOptions,
  type GptFamilyModelType,
} from './import/gpt-family.ts'
export {
  HF_CONFIG_FILE,
  HF_INDEX_FILE,
  HF_WEIGHTS_FILE,
  LLAMA2C_MODEL_FILE,
  LLAMA2C_TOKENIZER_FILE,
  readHuggingFaceDirectory,
  readLlama2cFile,
  saveModelDirectory,
  saveModelOptionsSchema,
  type HuggingFaceReadOptions,
  type SaveModelOptions,
  type SavedModel,
} from './import/files.ts'
export {
  HF_TOKENIZER_CONFIG_FILE,
  HF_TOKENIZER_FILE,
  loadModel,
  loadModelOptionsSchema,
  loadTokenizer,
  loadTokenizerOptionsSchema,
  modelFromCheckpoint,
  type LoadModelOptions,
  type LoadTokenizerOptions,
  type LoadedModel,
} from './import/load.ts'

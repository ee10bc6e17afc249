/**
 * The tokenizer flags every command that takes `--model` shares: `--tokenizer PATH` (a llama2.c
 * `tokenizer.bin` or a Hugging Face `tokenizer.json`) and `--no-dummy-prefix`.
 */
import type { LoadModelOptions } from '@attnlab/transformer'

/** Help of `--tokenizer <path>`. */
export const TOKENIZER_HELP =
  'a llama2.c tokenizer.bin or a Hugging Face tokenizer.json (default: the one beside the model or in its ' +
  'directory, if any)'

/** Help of `--no-dummy-prefix`. */
export const NO_DUMMY_PREFIX_HELP =
  "tokenizer.json: do not prepend the normalizer's leading '▁' (for models trained without it, such as " +
  'TinyStories-656K)'

/** What the two flags parse to. */
export interface TokenizerFlags {
  tokenizer?: string | undefined
  dummyPrefix?: boolean | undefined
}

/** The `loadModel` options the flags ask for. */
export function tokenizerLoadOptions(flags: TokenizerFlags): Pick<LoadModelOptions, 'tokenizer' | 'dummyPrefix'> {
  return {
    ...(flags.tokenizer === undefined ? {} : { tokenizer: flags.tokenizer }),
    ...(flags.dummyPrefix === false ? { dummyPrefix: false } : {}),
  }
}

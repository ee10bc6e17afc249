/**
 * The tokenizer flags every command that takes `--model` shares: `--tokenizer PATH` (a llama2.c
 * `tokenizer.bin` or a Hugging Face `tokenizer.json`) and `--no-dummy-prefix`.
 */
import { ConfigError } from '@attnlab/core'
import { type LoadedModel, type LoadModelOptions, loadModel } from '@attnlab/transformer'
import { UsageError } from './errors.ts'

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

/**
 * `loadModel` with the options the tokenizer flags ask for (`tokenizerLoadOptions`, or none with `useFlags`
 * false); the library's refusal of `dummyPrefix: false` for a llama2.c tokenizer is reworded in the CLI's terms.
 *
 * @throws UsageError `--no-dummy-prefix applies to a Hugging Face tokenizer.json, ...; drop --no-dummy-prefix`
 */
export async function loadModelWithTokenizerFlags(
  path: string,
  flags: TokenizerFlags,
  useFlags = true,
): Promise<LoadedModel> {
  try {
    return await loadModel(path, useFlags ? tokenizerLoadOptions(flags) : {})
  } catch (error) {
    if (error instanceof ConfigError && error.parameter === 'dummyPrefix')
      throw new UsageError(
        error.message
          .replace(/^Invalid dummyPrefix: /, '--no-dummy-prefix ')
          .replace('drop dummyPrefix: false', 'drop --no-dummy-prefix'),
      )
    throw error
  }
}

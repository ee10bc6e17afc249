/**
 * Test support: where the real aidreams260K model lives (`../shared/models/aidreams260K`
 * relative to the repository root), and whether it is there. Tests that need it skip with a
 * clear message when it is absent; the product never reads it.
 */
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The repository root (this file is `packages/transformer/src/__fixtures__/import/aidreams.ts`). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../..')

/** `../shared/models/aidreams260K` relative to the repository root. */
export const AIDREAMS_DIR = resolve(REPO_ROOT, '../shared/models/aidreams260K')

/** The three artefacts of the model. */
export const AIDREAMS = {
  bin: join(AIDREAMS_DIR, 'model.bin'),
  tokenizer: join(AIDREAMS_DIR, 'tokenizer.bin'),
  hf: join(AIDREAMS_DIR, 'hf'),
} as const

/** Whether every artefact is present. */
export const HAVE_AIDREAMS =
  existsSync(AIDREAMS.bin) && existsSync(AIDREAMS.tokenizer) && existsSync(join(AIDREAMS.hf, 'config.json'))

if (!HAVE_AIDREAMS) {
  console.warn(`[attnlab] ${AIDREAMS_DIR} is absent: tests on the real aidreams260K model are skipped`)
}

/** The README's reference: greedy decoding from "I dreamed" (BOS prepended), 60 positions. */
export const REFERENCE_TEXT =
  'I dreamed, as I sense the nodes, a gentle hum of probability. Contrast emerge, a flower, as I adjust, as I settle ' +
  'into a t'

/** The README's reference: the first 12 greedy ids from BOS alone. */
export const REFERENCE_IDS_FROM_BOS = [319, 459, 355, 260, 275, 429, 339, 315, 374, 327, 446, 262]

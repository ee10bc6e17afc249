// The tiny sweep of the tests (src/__fixtures__/tiny.yaml) and a helper to parse spec text.
import { readFileSync } from 'node:fs'
import { parseSweepSpec, type SweepSpec } from '../index.ts'

/** The tiny spec's text: 2 sequence lengths x 2 seeds, 6 steps of 8 sequences each. */
export const TINY_TEXT = readFileSync(new URL('./tiny.yaml', import.meta.url), 'utf8')

/** The tiny spec, with `edit` applied to its text. */
export function tinySpec(edit: (text: string) => string = (t) => t): SweepSpec {
  return parseSweepSpec(edit(TINY_TEXT), 'tiny.yaml')
}

/**
 * Naming and indexing attention heads. Heads are query heads (under grouped-query attention each
 * query head is its own unit; its key/value head is shared with others and is never touched by
 * a knockout). The flat index is layer-major, `index = layer * nHeads + head`, as in the paper's
 * masks (Bair et al., arXiv 2603.03335, as in the authors' released code).
 *
 * @module
 */
import { InvalidArgumentError } from '@attnlab/core'

/**
 * One attention (query) head.
 *
 * @category Heads
 */
export interface HeadRef {
  /** Block index, `0 .. nLayers - 1`. */
  readonly layer: number
  /** Query-head index within the block, `0 .. nHeads - 1`. */
  readonly head: number
}

/**
 * The head grid of a model: what a mask indexes.
 *
 * @category Heads
 */
export interface HeadLayout {
  /** Number of blocks. */
  readonly nLayers: number
  /** Query heads per block. */
  readonly nHeads: number
}

/**
 * Total number of heads `N = nLayers * nHeads`.
 *
 * @category Heads
 */
export function headCount(layout: HeadLayout): number {
  return layout.nLayers * layout.nHeads
}

/**
 * The flat, layer-major index of a head (`layer * nHeads + head`).
 *
 * @throws `InvalidArgumentError` (`@attnlab/core`) if the head is outside the layout
 * @category Heads
 */
export function headIndex(head: HeadRef, layout: HeadLayout): number {
  checkHead(head, layout)
  return head.layer * layout.nHeads + head.head
}

/**
 * The head at a flat index.
 *
 * @throws `InvalidArgumentError` (`@attnlab/core`) for an index outside `[0, N)`
 * @category Heads
 */
export function headAt(index: number, layout: HeadLayout): HeadRef {
  const n = headCount(layout)
  if (!Number.isSafeInteger(index) || index < 0 || index >= n) {
    throw new InvalidArgumentError(
      `head index ${index} is outside [0, ${n}) for ${layout.nLayers} layers x ${layout.nHeads} heads`,
      { index },
    )
  }
  return { layer: Math.floor(index / layout.nHeads), head: index % layout.nHeads }
}

/**
 * Checks that a head exists in the layout.
 *
 * @throws `InvalidArgumentError` (`@attnlab/core`) naming the head and the valid ranges
 * @category Heads
 */
export function checkHead(head: HeadRef, layout: HeadLayout): void {
  const { layer, head: h } = head
  if (!Number.isSafeInteger(layer) || layer < 0 || layer >= layout.nLayers) {
    throw new InvalidArgumentError(`head ${formatHead(head)}: layer ${layer} is outside [0, ${layout.nLayers})`, {
      layer,
      head: h,
    })
  }
  if (!Number.isSafeInteger(h) || h < 0 || h >= layout.nHeads) {
    throw new InvalidArgumentError(`head ${formatHead(head)}: head ${h} is outside [0, ${layout.nHeads})`, {
      layer,
      head: h,
    })
  }
}

/**
 * Formats a head as `L{layer}H{head}` (e.g. `L2H3`), the notation of every human-readable
 * attnlab output (TransformerLens style; {@link parseHeads} also reads `layer.head`).
 *
 * @category Heads
 */
export function formatHead(head: HeadRef): string {
  return `L${head.layer}H${head.head}`
}

/**
 * Parses a comma-separated head list such as `L0H1,L2H3` (also `l0h1` and `layer.head`: `0.1,2.3`), checking
 * every head against the layout and rejecting duplicates.
 *
 * @param text - the list
 * @param layout - the model's head grid
 * @returns the heads, in the given order
 * @throws `InvalidArgumentError` (`@attnlab/core`) naming the malformed, out-of-range or repeated entry
 * @example
 * ```ts
 * parseHeads('0.1,2.3', { nLayers: 4, nHeads: 4 }) // [{ layer: 0, head: 1 }, { layer: 2, head: 3 }]
 * ```
 * @category Heads
 */
export function parseHeads(text: string, layout: HeadLayout): HeadRef[] {
  const parts = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
  if (parts.length === 0) {
    throw new InvalidArgumentError(`'${text}' names no heads; expected a list like L0H1,L2H3 (or layer.head: 0.1,2.3)`)
  }
  const seen = new Set<number>()
  return parts.map((part) => {
    const match = /^(\d+)\.(\d+)$/.exec(part) ?? /^[lL](\d+)[hH](\d+)$/.exec(part)
    if (match === null) {
      const expected = 'expected layer.head or L<layer>H<head>, e.g. 2.3 or L2H3'
      throw new InvalidArgumentError(`'${part}' is not a head; ${expected}`, { value: part })
    }
    const head = { layer: Number(match[1]), head: Number(match[2]) }
    const index = headIndex(head, layout)
    if (seen.has(index)) throw new InvalidArgumentError(`head ${formatHead(head)} is listed twice`, { value: part })
    seen.add(index)
    return head
  })
}

/**
 * SVG plots: a Vega-Lite spec in, an SVG string out, rendered (in Node or a browser) with
 * Vega's headless view (`renderer: 'none'`, `View.toSVG()`), no DOM and no canvas package.
 * Fonts are not measured (Vega estimates text widths), so labels may sit a few pixels off.
 */
import { parse, View } from 'vega'
import { compile, type TopLevelSpec } from 'vega-lite'

/** A Vega-Lite top-level spec (re-exported so callers need not import vega-lite). */
export type PlotSpec = TopLevelSpec

/**
 * Renders a Vega-Lite spec to a standalone SVG document.
 *
 * @param spec - a Vega-Lite top-level spec with inline data (`data: { values: [...] }`)
 * @returns the SVG markup
 * @throws whatever vega-lite's compiler or vega's parser throws for an invalid spec
 */
export async function renderSvg(spec: PlotSpec): Promise<string> {
  const { spec: vegaSpec } = compile(spec)
  const view = new View(parse(vegaSpec), { renderer: 'none' })
  try {
    return await view.toSVG()
  } finally {
    view.finalize()
  }
}

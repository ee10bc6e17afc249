/**
 * SVG plots for every command: `@attnlab/experiments`' {@link renderSvg} (a Vega-Lite spec in, an
 * SVG string out, rendered with Vega's headless view), where the emergence report renders too.
 */
export { renderSvg, type PlotSpec } from '@attnlab/experiments'

// The index page and each package's module page already print their title as the page's <h1>
// ("attnlab", "Module @attnlab/core"); the README shown under it starts with the same title as its
// own "# ..." heading. This plugin drops that leading heading from the READMEs typedoc displays
// (the files themselves keep it, for GitHub). Documents (projectDocuments) have no page title of
// their own, so their "# ..." heading stays.
import { RendererEvent } from 'typedoc'

const LEADING_H1 = /^\s*#[ \t]+[^\n]*(\n+|$)/

/** @param {import('typedoc').Application} app */
export function load(app) {
  app.renderer.on(RendererEvent.BEGIN, (event) => {
    for (const reflection of [event.project, ...Object.values(event.project.reflections)]) {
      const first = 'readme' in reflection ? reflection.readme?.[0] : undefined
      if (first?.kind === 'text') first.text = first.text.replace(LEADING_H1, '')
    }
  })
}

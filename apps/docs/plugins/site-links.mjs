// Links to pages of the docs site that typedoc does not render (the playground, built into
// site/playground/ after typedoc): a document writes them as `site:playground/index.html`, which
// typedoc leaves alone (a URL scheme, so not a file to check or copy), and this plugin rewrites each
// to a path relative to the page it is on, so the site works at any path and offline.
import { PageEvent } from 'typedoc'

/** @param {import('typedoc').Application} app */
export function load(app) {
  app.renderer.on(PageEvent.END, (page) => {
    if (page.contents === undefined) return
    const depth = page.url.split('/').length - 1
    const prefix = '../'.repeat(depth)
    page.contents = page.contents.replace(/href="site:([^"]*)"/g, (_, path) => `href="${prefix}${path}"`)
  })
}

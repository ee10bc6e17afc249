// Checks the API reference that `pnpm run docs` just built (apps/docs/site: the docs task runs typedoc,
// then this file, so the site is built once) for what a reader sees: no links to raw Markdown files
// (README links to a .md file that is not a project document are copied to media/ as raw text), one
// <h1> per page, every internal link and #fragment resolves, and the "On This Page" entries read like
// their headings (typedoc drops code spans from them: a heading "Architectures (`createConfig`)" showed
// as "Architectures ()").
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'

const docsDir = join(dirname(fileURLToPath(import.meta.url)), '..')
const site = join(docsDir, 'site')
let pages: string[] = []
const html = new Map<string, string>()

function htmlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.isDirectory()) return htmlFiles(join(dir, entry.name))
    return entry.name.endsWith('.html') ? [join(dir, entry.name)] : []
  })
}

function read(file: string): string {
  let text = html.get(file)
  if (text === undefined) {
    text = readFileSync(file, 'utf8')
    html.set(file, text)
  }
  return text
}

/** Text of an HTML fragment: tags removed, the entities typedoc writes decoded. */
function textOf(fragment: string): string {
  return fragment
    .replace(/<[^>]*>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
    .trim()
}

beforeAll(() => {
  if (!existsSync(join(site, 'index.html'))) {
    throw new Error(`no site in ${site}: run \`pnpm run docs\` (typedoc, then this check)`)
  }
  pages = htmlFiles(site)
})

describe('the built docs site', () => {
  it('has the index, a page per package and the project documents', () => {
    const names = pages.map((p) => relative(site, p))
    expect(names).toContain('index.html')
    for (const name of ['core', 'markov', 'transformer', 'dynamics', 'sparse-attention', 'knockout']) {
      expect(names).toContain(`modules/_attnlab_${name}.html`)
    }
    expect(names.filter((n) => n.startsWith('documents/')).length).toBeGreaterThanOrEqual(5)
  })

  it('includes the playground, linked from its document, with every asset it loads', () => {
    const index = join(site, 'playground', 'index.html')
    expect(existsSync(index)).toBe(true)
    const page = read(index)
    expect(page).toMatch(/<h1>attnlab playground<\/h1>/)
    // Relative asset paths (vite base './'): the site works at any path and from a file copy.
    const assets = [...page.matchAll(/\s(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((u) => !/^[a-z]+:/i.test(u))
    expect(assets.filter((u) => u.startsWith('/'))).toEqual([])
    const missing: string[] = []
    const scripts: string[] = []
    for (const asset of assets) {
      const file = resolve(dirname(index), asset)
      if (!existsSync(file)) missing.push(asset)
      else if (file.endsWith('.js')) scripts.push(file)
    }
    // The files the scripts load at run time (the worker, its chunks, tfjs' and attnlab's .wasm binaries).
    const loaded = new Set<string>()
    for (let i = 0; i < scripts.length; i++) {
      const text = readFileSync(scripts[i]!, 'utf8')
      for (const [name] of text.matchAll(/[\w.-]+-[\w-]{8}\.(?:js|wasm)/g)) {
        const file = join(site, 'playground', 'assets', name)
        if (loaded.has(file)) continue
        loaded.add(file)
        if (!existsSync(file)) missing.push(`assets/${name} (named in ${relative(site, scripts[i]!)})`)
        else if (file.endsWith('.js')) scripts.push(file)
      }
    }
    expect(missing).toEqual([])
    const names = [...loaded].map((f) => f.replace(/^.*\//, ''))
    expect(names.some((n) => n.startsWith('worker-'))).toBe(true)
    expect(names.some((n) => n.startsWith('tfjs-backend-wasm-simd-'))).toBe(true)
    const linking = pages.filter((p) => /href="(?:\.\.\/)?playground\/index\.html"/.test(read(p)))
    expect(linking.map((p) => relative(site, p))).toContain('documents/Playground.html')
  })

  it('copies no Markdown file to media/ and links to no .md file', () => {
    expect(
      existsSync(join(site, 'media')) ? readdirSync(join(site, 'media')).filter((f) => f.endsWith('.md')) : [],
    ).toEqual([])
    const bad: string[] = []
    for (const page of pages) {
      for (const [, href] of read(page).matchAll(/href="([^"]*)"/g)) {
        // a relative link to a .md file, or a bare "notes.md" that markdown-it's linkify made a URL
        const target = href!.replace(/[#?].*$/, '')
        if (/\.md$/i.test(target) && (!/^https?:/.test(target) || /^https?:\/\/[^/]*\.md$/i.test(target))) {
          bad.push(`${relative(site, page)}: ${href}`)
        }
      }
    }
    expect(bad).toEqual([])
  })

  it('gives every page exactly one <h1> (the README title is not repeated under the page title)', () => {
    const counts = pages.map((page) => [relative(site, page), read(page).match(/<h1[\s>]/g)?.length ?? 0] as const)
    expect(counts.filter(([, n]) => n !== 1)).toEqual([])
    const index = read(join(site, 'index.html'))
    expect(textOf(index.match(/<h1[^>]*>([\s\S]*?)<\/h1>/)![1]!)).toBe('attnlab')
  })

  it('resolves every internal link and #fragment', () => {
    const ids = new Map<string, Set<string>>()
    const idsOf = (file: string): Set<string> => {
      let set = ids.get(file)
      if (set === undefined) {
        set = new Set([...read(file).matchAll(/\s(?:id|name)="([^"]+)"/g)].map((m) => m[1]!))
        ids.set(file, set)
      }
      return set
    }
    const broken: string[] = []
    for (const page of pages) {
      for (const [, href] of read(page).matchAll(/\shref="([^"]*)"/g)) {
        if (/^(?:[a-z]+:|\/\/)/i.test(href!)) continue // external: http(s), mailto, data
        const [path, fragment] = href!.split('#', 2) as [string, string | undefined]
        const target = path === '' ? page : resolve(dirname(page), decodeURIComponent(path))
        if (!existsSync(target)) {
          broken.push(`${relative(site, page)}: ${href} (no such file)`)
        } else if (fragment !== undefined && fragment !== '' && /\.(html|svg)$/.test(target)) {
          const id = decodeURIComponent(fragment)
          if (!idsOf(target).has(id)) broken.push(`${relative(site, page)}: ${href} (no such id)`)
        }
      }
    }
    expect(broken.slice(0, 20)).toEqual([])
  })

  it('links every mention of a repository document (docs/*.md, examples/README.md)', () => {
    const unlinked: string[] = []
    for (const page of pages) {
      const text = read(page)
      for (const match of text.matchAll(/<code>((?:docs|examples)\/[^<]*\.md)<\/code>/g)) {
        const before = text.slice(0, match.index)
        const insideLink = before.lastIndexOf('<a ') > before.lastIndexOf('</a>')
        if (!insideLink) unlinked.push(`${relative(site, page)}: ${match[1]}`)
      }
    }
    expect(unlinked).toEqual([])
  })

  it('lists each heading under "On This Page" with its full text', () => {
    const mismatched: string[] = []
    for (const page of pages) {
      const text = read(page)
      for (const [, id, entry] of text.matchAll(/<a href="#([^"]+)"><span>([^<]*)<\/span><\/a>/g)) {
        const start = text.search(new RegExp(`<h[1-6][^>]* id="${id!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"`))
        if (start < 0) continue
        const heading = textOf(text.slice(text.indexOf('>', start) + 1, text.indexOf('<a ', start)))
        if (textOf(entry!) !== heading) mismatched.push(`${relative(site, page)}: "${textOf(entry!)}" vs "${heading}"`)
      }
    }
    expect(mismatched).toEqual([])
  })
})

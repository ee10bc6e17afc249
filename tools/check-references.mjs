#!/usr/bin/env node
// Fails when the docs or a source comment cite something a reader of the repository cannot open: a
// file outside it (`../shared/...`, a research note `papers/*.md`) or an issue number. Cite the paper
// instead (arXiv id + section or equation); measured results belong in docs/experiments/*.md.
// Checked: Markdown files (docs/, READMEs; prose, inline code and shell blocks, not the TypeScript
// blocks, which are copies of runnable examples) and the comments of non-test sources (.ts, .mjs, .py).
// Code itself may name such paths (tests, examples and benchmarks read the models kept beside the clone).
// Usage: node tools/check-references.mjs   (run by `pnpm lint`)
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

/** What may not be cited, with why (the first match of a line is reported). */
const RULES = [
  { pattern: /\.\.\/(?:\.\.\/)*shared\b/, why: 'a path outside the repository' },
  { pattern: /(?<![\w/.-])shared\/(?:papers|models)\b/, why: 'a path outside the repository' },
  { pattern: /\bpapers\/[\w.-]+\.md\b/, why: 'a research note outside the repository (cite arXiv id + section)' },
  { pattern: /\bissues?\s+#?\d+\b/i, why: 'an issue number (say what and why instead)' },
  { pattern: /(?:^|[\s(])#\d{1,4}\b(?![\w-])/, why: 'an issue number (say what and why instead)' },
]

/** Changelogs and changesets describe past releases (and this file states the rules): not checked. */
const SKIP = [
  /(^|\/)CHANGELOG\.md$/,
  /^\.changeset\//,
  /(^|\/)node_modules\//,
  /(^|\/)dist\//,
  /^tools\/check-references\.mjs$/,
]

const files = execFileSync(
  'git',
  ['ls-files', '--cached', '--others', '--exclude-standard', '*.md', '*.ts', '*.mjs', '*.py'],
  { encoding: 'utf8' },
)
  .split('\n')
  .filter((file) => file !== '' && !SKIP.some((skip) => skip.test(file)))

const isTest = (file) =>
  /\.test(?:-utils)?\.ts$/.test(file) ||
  /\.test\.mjs$/.test(file) ||
  file.includes('/__fixtures__/') ||
  /(^|\/)test\//.test(file)

/** The lines of a Markdown file that are checked: all but those inside ```ts / ```typescript blocks. */
function markdownLines(text) {
  const out = []
  let fence = null
  text.split('\n').forEach((line, index) => {
    const open = /^\s*(`{3,}|~{3,})\s*([\w-]*)/.exec(line)
    if (fence === null && open !== null) {
      fence = { marker: open[1], code: /^(ts|typescript|js|javascript)$/i.test(open[2] ?? '') }
      return
    }
    if (fence !== null && line.trim().startsWith(fence.marker)) {
      fence = null
      return
    }
    if (fence?.code === true) return
    out.push({ line, index })
  })
  return out
}

/** The comment text of each line of a source file (`//`, `/* ... *\/` and JSDoc; `#` for Python). */
function commentLines(text, python) {
  const out = []
  let inBlock = false
  text.split('\n').forEach((line, index) => {
    if (python) {
      const hash = line.indexOf('#')
      const docstring = /^\s*(?:"""|''')/.test(line) || inBlock
      if (/^\s*(?:"""|''')/.test(line) && !/^\s*("""|''').*\1\s*$/.test(line.trim() === '"""' ? '' : line)) {
        inBlock = !inBlock
      }
      if (docstring) out.push({ line, index })
      else if (hash >= 0) out.push({ line: line.slice(hash), index })
      return
    }
    if (inBlock) {
      out.push({ line, index })
      if (line.includes('*/')) inBlock = false
      return
    }
    const block = line.indexOf('/*')
    const slashes = line.search(/(^|[^:'"`\\])\/\//)
    if (block >= 0 && (slashes < 0 || block < slashes)) {
      out.push({ line: line.slice(block), index })
      if (!line.slice(block).includes('*/')) inBlock = true
    } else if (slashes >= 0) out.push({ line: line.slice(slashes), index })
  })
  return out
}

const problems = []
for (const file of files) {
  if (!file.endsWith('.md') && isTest(file)) continue
  let text
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    continue // deleted in the working tree
  }
  const lines = file.endsWith('.md') ? markdownLines(text) : commentLines(text, file.endsWith('.py'))
  for (const { line, index } of lines) {
    const rule = RULES.find((r) => r.pattern.test(line))
    if (rule !== undefined) problems.push(`${file}:${index + 1}: ${rule.why}: ${line.trim().slice(0, 100)}`)
  }
}
if (problems.length > 0) {
  console.error(problems.join('\n'))
  console.error(`${problems.length} references a reader of the repository cannot follow (of ${files.length} files)`)
  process.exit(1)
}
console.log(`references: ${files.length} files, no citation of a file outside the repository or of an issue number`)

#!/usr/bin/env node
// Fails when a tracked source line is longer than 120 characters. Biome's formatter wraps code at
// 120 columns but leaves long string literals and comments alone; this catches those.
// Usage: node tools/check-line-length.mjs [--max N]   (run by `pnpm lint`)
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

const maxIndex = process.argv.indexOf('--max')
const max = maxIndex === -1 ? 120 : Number(process.argv[maxIndex + 1])
if (!Number.isInteger(max) || max < 1) {
  console.error(`--max must be a positive integer, got ${process.argv[maxIndex + 1]}`)
  process.exit(2)
}
const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts', '*.mjs'], {
  encoding: 'utf8',
})
  .split('\n')
  .filter((file) => file !== '')
  // AssemblyScript source of the committed WebAssembly kernels (packages/core/assembly): its layout
  // follows the generated binary's sections; it is checked by the kernels' own build and tests.
  .filter((file) => !file.startsWith('packages/core/assembly/'))
  // Verbatim copies of the packages' README code blocks (examples/test/readme-blocks.test.ts checks
  // they match): they are laid out for reading in the README, and biome does not format them either.
  .filter((file) => !file.startsWith('examples/readme/'))

const long = []
for (const file of files) {
  let text
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    continue // deleted in the working tree
  }
  text.split('\n').forEach((line, index) => {
    if (line.length > max) long.push(`${file}:${index + 1}: ${line.length} characters`)
  })
}
if (long.length > 0) {
  console.error(long.join('\n'))
  console.error(`${long.length} lines over ${max} characters (of ${files.length} files)`)
  process.exit(1)
}
console.log(`line length: ${files.length} files, no line over ${max} characters`)

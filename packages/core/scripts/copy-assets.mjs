// Copies the non-TypeScript files the built package loads at run time (the compiled WebAssembly
// kernels and their record) from src/ to dist/, next to the modules that load them.
import { copyFileSync, mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
for (const file of ['kernels/attnlab-kernels.wasm', 'kernels/attnlab-kernels.json']) {
  mkdirSync(dirname(join(root, 'dist', file)), { recursive: true })
  copyFileSync(join(root, 'src', file), join(root, 'dist', file))
}

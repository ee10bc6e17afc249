import { defineConfig } from 'vite'

// The page bundles the packages' published entry points (package.json "default" -> dist/), as an
// app installed from npm would; run.mjs builds them first.
export default defineConfig({
  root: import.meta.dirname,
  logLevel: 'warn',
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', chunkSizeWarningLimit: 4096 },
})

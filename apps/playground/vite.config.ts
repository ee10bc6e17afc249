import { defineConfig } from 'vite'

// Relative asset paths (base './'): the same build works at any path, e.g. inside the docs site
// (apps/docs/site/playground/). The worker is an ES module so that it can import the tfjs backends
// on demand (useBackend's dynamic imports). The packages' dist/ is bundled, as for apps/browser-check.
export default defineConfig({
  root: import.meta.dirname,
  base: './',
  logLevel: 'warn',
  worker: { format: 'es' },
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', chunkSizeWarningLimit: 8192 },
})

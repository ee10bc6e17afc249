#!/usr/bin/env node
// The published packages, as a downstream project uses them.
//
// 1. publint checks each package's package.json (exports, files, types) in the workspace.
// 2. `pnpm pack` writes each package's tarball (workspace:^ ranges become versions), and
//    are-the-types-wrong checks the tarball's type resolution (ESM-only profile: attnlab ships ESM).
// 3. A fresh npm project outside the workspace installs the tarballs with plain npm (plus the
//    tfjs peers from the registry), type-checks a TypeScript consumer against the shipped
//    `.d.ts` files with `tsc` (NodeNext, strict), compiles it and runs it: every package's main
//    entry and the `./node` entries are imported and called, on the cpu and wasm backends.
//
// Run by `pnpm test:packages` after `pnpm build` (the tarballs ship `dist/`); `.ci/run` runs it.
// ATTNLAB_PACK_KEEP=1 keeps the temporary directory and prints where it is.
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
const here = dirname(fileURLToPath(import.meta.url))
const bin = (name) => join(root, 'node_modules', '.bin', name)
const packagesDir = join(root, 'packages')
const packages = readdirSync(packagesDir)
  .filter((name) => existsSync(join(packagesDir, name, 'package.json')))
  .map((name) => ({
    dir: join(packagesDir, name),
    manifest: JSON.parse(readFileSync(join(packagesDir, name, 'package.json'), 'utf8')),
  }))
  .filter(({ manifest }) => manifest.private !== true)

// npm must not inherit pnpm's npm_config_* settings (registry, user agent, workspace flags).
const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)))
const run = (command, args, options = {}) => {
  console.log(`$ ${[command, ...args].join(' ')}${options.cwd ? `   (in ${options.cwd})` : ''}`)
  execFileSync(command, args, { stdio: 'inherit', ...options })
}

for (const { dir, manifest } of packages) {
  for (const target of Object.values(manifest.exports ?? {})) {
    const file = typeof target === 'string' ? target : target.default
    if (file !== undefined && !existsSync(join(dir, file))) {
      console.error(`${manifest.name}: ${file} is missing: run \`pnpm build\` first`)
      process.exit(1)
    }
  }
}

const work = mkdtempSync(join(tmpdir(), 'attnlab-pack-'))
const tarballs = join(work, 'tarballs')
mkdirSync(tarballs)
let ok = false
try {
  // pnpm 12 is a single executable (npm_execpath names it); older ones are JavaScript files.
  const pnpm = process.env.npm_execpath
  const pnpmCommand =
    pnpm === undefined || !/pnpm/.test(pnpm)
      ? ['npx', ['-y', 'pnpm@12.4.2']]
      : /\.[cm]?js$/.test(pnpm)
        ? [process.execPath, [pnpm]]
        : [pnpm, []]
  const files = {}
  for (const { dir, manifest } of packages) {
    run(bin('publint'), ['run', '--strict', dir])
    const before = new Set(readdirSync(tarballs))
    run(pnpmCommand[0], [...pnpmCommand[1], 'pack', '--pack-destination', tarballs], {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'inherit'],
    })
    const made = readdirSync(tarballs).filter((name) => !before.has(name))
    if (made.length !== 1) throw new Error(`${manifest.name}: pnpm pack wrote ${made.length} files`)
    files[manifest.name] = join(tarballs, made[0])
    run(bin('attw'), [files[manifest.name], '--profile', 'esm-only', '--format', 'table-flipped'])
  }

  const consumer = join(work, 'consumer')
  mkdirSync(consumer)
  const tfjs = '4.22.0'
  const dependencies = {
    ...Object.fromEntries(Object.entries(files).map(([name, file]) => [name, `file:${file}`])),
    '@tensorflow/tfjs-core': tfjs,
    '@tensorflow/tfjs-backend-cpu': tfjs,
    '@tensorflow/tfjs-backend-wasm': tfjs,
  }
  const rootManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  writeFileSync(
    join(consumer, 'package.json'),
    JSON.stringify(
      {
        name: 'attnlab-consumer',
        private: true,
        type: 'module',
        dependencies,
        devDependencies: {
          typescript: rootManifest.devDependencies.typescript,
          '@types/node': rootManifest.devDependencies['@types/node'],
        },
        // The packages depend on each other by version (0.0.0 is on no registry): use the tarballs.
        overrides: Object.fromEntries(Object.keys(files).map((name) => [name, `$${name}`])),
      },
      null,
      2,
    ),
  )
  cpSync(join(here, 'consumer.ts'), join(consumer, 'consumer.ts'))
  cpSync(join(here, 'tsconfig.json'), join(consumer, 'tsconfig.json'))
  run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: consumer, env: cleanEnv })
  run(join(consumer, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], { cwd: consumer, env: cleanEnv })
  const output = execFileSync(process.execPath, ['dist/consumer.js'], {
    cwd: consumer,
    env: cleanEnv,
    encoding: 'utf8',
  })
  process.stdout.write(output)
  if (!output.includes('consumer: all packages work')) throw new Error('the consumer did not finish')
  ok = true
  console.log(
    `packed-tarball consumer test passed: ${packages.length} packages ` +
      `(${packages.map((p) => p.manifest.name).join(', ')})`,
  )
} finally {
  if (process.env.ATTNLAB_PACK_KEEP === '1') console.log(`kept ${work}`)
  else rmSync(work, { recursive: true, force: true })
  if (!ok) process.exitCode = 1
}

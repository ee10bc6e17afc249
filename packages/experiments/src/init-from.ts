/**
 * Where a pre-pretrained run's weights come from (Node only): a run directory of `attnlab
 * emergence`, a checkpoint directory (`attnlab train`'s `--out`, an emergence seed's
 * `seeds/<seed>/checkpoint`), or a file in one.
 *
 * @module
 */
import { readFile, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { ExperimentInputError } from './errors.ts'
import type { EmergenceRecord } from './emergence/run.ts'

/** The format of an emergence run's `config.json` (typed by the record, so the two cannot drift). */
const EMERGENCE_FORMAT: EmergenceRecord['format'] = 'attnlab-emergence/1'

async function kind(path: string): Promise<'file' | 'directory' | null> {
  try {
    return (await stat(path)).isDirectory() ? 'directory' : 'file'
  } catch {
    return null
  }
}

/**
 * The checkpoint directory of an emergence run directory (`attnlab emergence`, `runEmergence`'s
 * `./node` writer): the first of its `config.json`'s seeds with a `seeds/<seed>/checkpoint`. An
 * emergence run's `config.json` is the run's record (format `attnlab-emergence/1`), not a model
 * configuration: a model loader is given this checkpoint instead.
 *
 * @param path - a directory (anything else, or a directory without such a `config.json`, gives null)
 * @param parameter - the option the path came from, for the error (default `'model'`)
 * @returns the checkpoint directory, or null when `path` is not an emergence run directory
 * @throws {@link ExperimentInputError} (`parameter` as given) for an emergence run without any checkpoint
 * @example
 * ```ts
 * const dir = (await emergenceRunCheckpoint('runs/ca')) ?? 'runs/ca' // runs/ca/seeds/0/checkpoint
 * ```
 * @category Emergence
 */
export async function emergenceRunCheckpoint(path: string, parameter = 'model'): Promise<string | null> {
  if ((await kind(path)) !== 'directory') return null
  let record: { format?: unknown; seeds?: unknown }
  try {
    record = JSON.parse(await readFile(join(path, 'config.json'), 'utf8')) as { format?: unknown; seeds?: unknown }
  } catch {
    return null
  }
  if (typeof record !== 'object' || record === null || record.format !== EMERGENCE_FORMAT) return null
  const seeds = Array.isArray(record.seeds) ? (record.seeds as unknown[]) : []
  for (const seed of seeds) {
    const candidate = join(path, 'seeds', String(seed), 'checkpoint')
    if ((await kind(join(candidate, 'manifest.json'))) === 'file') return candidate
  }
  throw new ExperimentInputError(
    parameter,
    `the emergence run ${path} has no checkpoint yet (seeds ${seeds.join(', ')}: no seeds/<seed>/checkpoint)`,
  )
}

/**
 * Reads the weights a run starts from (`--init-from`, the training settings' `initFrom`): a
 * checkpoint directory (it holds `manifest.json`), an emergence run directory (its `config.json`
 * names the seeds: the first seed with a checkpoint, `seeds/<seed>/checkpoint`), or a file inside
 * either (its directory is used). The checkpoint is verified as `loadCheckpoint` does.
 *
 * @param path - the run directory, checkpoint directory or file
 * @returns the checkpoint directory read (absolute) and its weights
 * @throws {@link ExperimentInputError} (`parameter` `initFrom`) for a missing path, a directory that is
 *   neither, or an emergence run without any checkpoint; `CheckpointError` (`@attnlab/transformer`,
 *   code `INVALID_CHECKPOINT`) for a corrupt checkpoint
 * @example
 * ```ts
 * const { source, weights } = await loadInitialWeights('runs/ca')   // runs/ca/seeds/0/checkpoint
 * ```
 * @category Emergence
 */
export async function loadInitialWeights(
  path: string,
): Promise<{ source: string; weights: Map<string, { shape: number[]; data: Float32Array }> }> {
  const found = await kind(path)
  if (found === null) {
    throw new ExperimentInputError('initFrom', `${path} does not exist; expected a run directory or a checkpoint`)
  }
  let dir = found === 'file' ? dirname(path) : path
  if ((await kind(join(dir, 'manifest.json'))) !== 'file') {
    const checkpoint = await emergenceRunCheckpoint(dir, 'initFrom')
    if (checkpoint === null) {
      throw new ExperimentInputError(
        'initFrom',
        `${path} is neither a checkpoint (no manifest.json) nor an emergence run directory (no config.json of ` +
          `format ${EMERGENCE_FORMAT})`,
      )
    }
    dir = checkpoint
  }
  const checkpoint = await loadCheckpoint(dir)
  return { source: resolve(dir), weights: checkpoint.weights }
}

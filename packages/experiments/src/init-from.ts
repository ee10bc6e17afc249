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

async function kind(path: string): Promise<'file' | 'directory' | null> {
  try {
    return (await stat(path)).isDirectory() ? 'directory' : 'file'
  } catch {
    return null
  }
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
    let record: { format?: unknown; seeds?: unknown } | null = null
    try {
      record = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as { format?: unknown; seeds?: unknown }
    } catch {
      record = null
    }
    if (record === null || record.format !== 'attnlab-emergence/1' || !Array.isArray(record.seeds)) {
      throw new ExperimentInputError(
        'initFrom',
        `${path} is neither a checkpoint (no manifest.json) nor an emergence run directory (no config.json of ` +
          'format attnlab-emergence/1)',
      )
    }
    const seeds = record.seeds as unknown[]
    let checkpoint: string | null = null
    for (const seed of seeds) {
      const candidate = join(dir, 'seeds', String(seed), 'checkpoint')
      if ((await kind(join(candidate, 'manifest.json'))) === 'file') {
        checkpoint = candidate
        break
      }
    }
    if (checkpoint === null) {
      throw new ExperimentInputError(
        'initFrom',
        `the emergence run ${path} has no checkpoint yet (seeds ${seeds.join(', ')}: no seeds/<seed>/checkpoint)`,
      )
    }
    dir = checkpoint
  }
  const checkpoint = await loadCheckpoint(dir)
  return { source: resolve(dir), weights: checkpoint.weights }
}

/**
 * The SLURM job-array script of a sweep: one array task per trial, each running
 * `attnlab sweep run-trial DIR --index $SLURM_ARRAY_TASK_ID`.
 *
 * @module
 */
import { checkRange, ConfigError } from '@attnlab/core'

/**
 * Options of {@link slurmScript}.
 *
 * @category Sweeps
 */
export interface SlurmScriptOptions {
  /** The sweep directory (best absolute: the job runs wherever SLURM starts it). */
  readonly sweepDir: string
  /** The sweep's name (the job name is `attnlab-<name>`). */
  readonly name: string
  /** The trial indices to run, one array task each (`--array=0,2,5` or a range `0-9`). */
  readonly indices: readonly number[]
  /** The command that runs attnlab (default `attnlab`), as a shell word list, e.g. `['node', '/x/bin.js']`. */
  readonly command?: readonly string[]
  /** `--partition`. */
  readonly partition?: string
  /** `--time` (SLURM's formats: `minutes`, `HH:MM:SS`, `D-HH:MM:SS`). */
  readonly time?: string
  /** `--cpus-per-task`. */
  readonly cpusPerTask?: number
  /** Where each task's log goes (default `<sweepDir>/slurm/%A_%a.out`: job id, array index). */
  readonly output?: string
  /** Most array tasks running at once (`--array=...%N`). */
  readonly maxRunning?: number
  /** Further `#SBATCH` lines, as given (e.g. `--mem=4G`). */
  readonly extra?: readonly string[]
}

/** Quotes a word for a POSIX shell (single quotes). */
function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`
}

/** `0-9` for a contiguous range, else `0,2,5`. */
function arraySpec(indices: readonly number[]): string {
  const sorted = [...indices].sort((a, b) => a - b)
  const first = sorted[0] as number
  const last = sorted[sorted.length - 1] as number
  return last - first + 1 === sorted.length ? (first === last ? `${first}` : `${first}-${last}`) : sorted.join(',')
}

/**
 * Writes the `sbatch` script of a sweep: a job array with one task per trial index, each running
 * `<command> sweep run-trial <sweepDir> --index $SLURM_ARRAY_TASK_ID` (which runs that trial of
 * `sweep.json` in-process and appends its record to `trials.jsonl`). SLURM reads the `#SBATCH`
 * lines; the body is plain `bash`, so running the script with `SLURM_ARRAY_TASK_ID` set runs one
 * task exactly as SLURM would. A SLURM time limit (SIGTERM) stops a trial at its next step with
 * its state kept; resubmitting continues it.
 *
 * @param options - directory, name, indices, command, partition, time, CPUs, log path
 * @returns the script's text
 * @throws `ConfigError` (`@attnlab/core`) for no indices, a negative index, `cpusPerTask` or
 *   `maxRunning` below 1, a `partition`, `time` or extra line with a newline
 * @example
 * ```ts
 * const script = slurmScript({ sweepDir: '/scratch/sweep', name: 'nctx', indices: [0, 1, 2], time: '01:00:00' })
 * // #SBATCH --array=0-2 ... attnlab sweep run-trial /scratch/sweep --index "$SLURM_ARRAY_TASK_ID"
 * ```
 * @category Sweeps
 */
export function slurmScript(options: SlurmScriptOptions): string {
  if (options.indices.length === 0) {
    throw new ConfigError('indices', 'no trials to run; expected at least one trial index')
  }
  for (const index of options.indices) checkRange('indices', index, { integer: true, min: 0 })
  for (const [key, value] of [
    ['partition', options.partition],
    ['time', options.time],
    ['name', options.name],
    ...(options.extra ?? []).map((line) => ['extra', line] as const),
  ] as const) {
    if (value !== undefined && /[\n\r]/.test(value)) {
      throw new ConfigError(key, `${JSON.stringify(value)} holds a line break; expected one line`)
    }
  }
  const lines = ['#!/bin/bash', `#SBATCH --job-name=${shellQuote(`attnlab-${options.name}`)}`]
  const throttle =
    options.maxRunning === undefined
      ? ''
      : `%${checkRange('maxRunning', options.maxRunning, { integer: true, min: 1 })}`
  lines.push(`#SBATCH --array=${arraySpec(options.indices)}${throttle}`)
  lines.push(`#SBATCH --output=${shellQuote(options.output ?? `${options.sweepDir}/slurm/%A_%a.out`)}`)
  if (options.partition !== undefined) lines.push(`#SBATCH --partition=${shellQuote(options.partition)}`)
  if (options.time !== undefined) lines.push(`#SBATCH --time=${shellQuote(options.time)}`)
  if (options.cpusPerTask !== undefined) {
    checkRange('cpusPerTask', options.cpusPerTask, { integer: true, min: 1 })
    lines.push(`#SBATCH --cpus-per-task=${options.cpusPerTask}`)
  }
  for (const line of options.extra ?? []) lines.push(`#SBATCH ${line}`)
  lines.push('#SBATCH --signal=B:TERM@60')
  const command = (options.command ?? ['attnlab']).map(shellQuote).join(' ')
  lines.push(
    '',
    `# attnlab sweep '${options.name}': one array task per trial of ${shellQuote(options.sweepDir)}/sweep.json.`,
    '# The body is plain bash: SLURM_ARRAY_TASK_ID=0 bash <this file> runs trial 0 here.',
    'set -euo pipefail',
    `exec ${command} sweep run-trial ${shellQuote(options.sweepDir)} --index "$SLURM_ARRAY_TASK_ID"`,
    '',
  )
  return lines.join('\n')
}

/**
 * Shared flag parsers and the backend flag. Every parser throws a {@link UsageError} naming the
 * flag and what was expected, so bad input stops before any work.
 */
import type { EventEmitter } from 'node:events'
import { existsSync, statSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { InvalidArgumentError, Option, type Command } from 'commander'
import { UsageError } from './errors.ts'
import { checkDirectoryWritable, checkPathGiven } from './out-dir.ts'
import {
  BACKEND_NAMES,
  ConfigError,
  KERNELS_MODES,
  defaultBackend,
  describeRange,
  formatNumber,
  inRange,
  useBackend,
  type BackendName,
  type KernelsMode,
  type NumberRange,
} from '@attnlab/core'
import { ExperimentInputError } from '@attnlab/experiments'
import { emergenceRunCheckpoint } from '@attnlab/experiments/node'

/** Exclusive bounds of {@link numberParser} (e.g. `(0, 1]` for a probability). */
export interface BoundOptions {
  /** The minimum itself is refused (`> min`). */
  readonly minExclusive?: boolean
  /** The maximum itself is refused (`< max`). */
  readonly maxExclusive?: boolean
}

/** The flag's range error, worded by core's one range formatter (`>= 1`, `> 0`, `in (0, 1]`). */
function rangeError(flag: string, range: NumberRange, got: number): InvalidArgumentError {
  return new InvalidArgumentError(`${flag} must be ${describeRange(range)}, got ${formatNumber(got)}`)
}

/**
 * Parses an integer flag within [min, max]; a bound that is infinite or beyond the safe integers
 * is no bound (`--seed` says `>= 0`, not `[0, 9007199254740991]`).
 */
export function intParser(flag: string, min = -Infinity, max = Infinity): (value: string) => number {
  const range: NumberRange = {
    min: min <= Number.MIN_SAFE_INTEGER ? -Infinity : min,
    max: max >= Number.MAX_SAFE_INTEGER ? Infinity : max,
  }
  return (value: string) => {
    const n = Number(value)
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) {
      throw new InvalidArgumentError(`${flag} must be an integer, got '${value}'`)
    }
    if (!inRange(n, range)) throw rangeError(flag, range, n)
    return n
  }
}

/** Parses a finite number flag within [min, max] (`bounds` makes either end exclusive). */
export function numberParser(
  flag: string,
  min = -Infinity,
  max = Infinity,
  bounds: BoundOptions = {},
): (value: string) => number {
  const range: NumberRange = { min, max, ...bounds }
  return (value: string) => {
    const n = Number(value)
    if (value.trim() === '' || !Number.isFinite(n))
      throw new InvalidArgumentError(`${flag} must be a number, got '${value}'`)
    if (!inRange(n, range)) throw rangeError(flag, range, n)
    return n
  }
}

/**
 * Runs `compute` (a library call that validates its configuration) and rewords a `ConfigError`
 * about a parameter the command set from a flag so that it names the flag the user typed
 * (`Invalid nCtx: expected ...` becomes `--T: expected ...`).
 *
 * @param flags - library parameter name to flag, e.g. `{ nCtx: '--T' }`
 * @throws UsageError naming the flag; other errors pass through
 */
export function withFlagNames<T>(flags: Readonly<Record<string, string>>, compute: () => T): T {
  try {
    return compute()
  } catch (error) {
    const flag = error instanceof ConfigError ? flags[error.parameter] : undefined
    if (error instanceof ConfigError && flag !== undefined) {
      const prefix = `Invalid ${error.parameter}: `
      const detail = error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message
      throw new UsageError(`${flag}: ${detail}`)
    }
    throw error
  }
}

/** Parses a comma-separated list of integers (e.g. `--spans 2,2,2`). */
export function intListParser(flag: string, min = -Infinity): (value: string) => number[] {
  return (value: string) => {
    const parts = value.split(',').map((s) => s.trim())
    if (parts.length === 0 || parts.some((p) => !/^-?\d+$/.test(p))) {
      throw new InvalidArgumentError(`${flag} must be a comma-separated list of integers, got '${value}'`)
    }
    const numbers = parts.map(Number)
    const bad = numbers.find((n) => n < min)
    if (bad !== undefined) {
      throw new InvalidArgumentError(`${flag} values must be ${describeRange({ min })}, got ${formatNumber(bad)}`)
    }
    return numbers
  }
}

/** The flags that name a path the command writes (checked by {@link refuseEmptyOutputPaths}). */
export const OUTPUT_PATH_FLAGS: readonly string[] = ['--out', '--plot', '--resume']

/**
 * Refuses an empty value (`--out ""`) of every {@link OUTPUT_PATH_FLAGS} flag of `command`, before
 * its action runs (installed as a `preAction` hook on the program, so it holds for every command).
 *
 * @throws UsageError `<flag> must name a path, got ''`
 */
export function refuseEmptyOutputPaths(command: Command): void {
  for (const option of command.options) {
    if (option.long === undefined || !OUTPUT_PATH_FLAGS.includes(option.long)) continue
    const value: unknown = command.getOptionValue(option.attributeName())
    if (typeof value === 'string') checkPathGiven(option.long, value)
  }
}

/**
 * Makes every command of `program` (recursively) refuse a list-valued flag given twice (`--methods quest --methods
 * snapkv`, a second `--task-options`): commander keeps the last value, which silently drops the first list, where a
 * user may have meant both. A flag is list-valued when its placeholder is `<list>` or `<ids>` or its parsed value is
 * an array or an object (its parser splits a comma-separated list). Scalar flags keep the usual rule, the last one
 * wins (`--lr 0.003 ... --lr 0.001` overrides a base set of flags); variadic flags (`--metric a --metric b`)
 * collect; boolean flags are left alone.
 * Installed once by `buildProgram`; the check runs before commander stores the second value.
 *
 * @throws UsageError `--<flag> was given twice ('a', then 'b'); it takes one comma-separated list, e.g. --<flag> a,b`
 *   (thrown out of parsing)
 */
export function refuseRepeatedOptions(program: Command): void {
  const commands: Command[] = [program]
  for (let i = 0; i < commands.length; i++) {
    const command = commands[i] as Command
    commands.push(...command.commands)
    for (const option of command.options) {
      if (!(option.required || option.optional) || option.variadic) continue
      const attribute = option.attributeName()
      // `--heads <list>`, `--prompt-ids <ids>`: split after parsing, so their parsed value is still a string
      const listPlaceholder = /<(list|ids)>/.test(option.flags)
      let first: unknown
      // commander's Command is an EventEmitter (its types leave that out); this listener runs before its own
      ;(command as unknown as EventEmitter).prependListener(`option:${option.name()}`, (value: unknown) => {
        const stored: unknown = command.getOptionValue(attribute)
        const list = listPlaceholder || (typeof stored === 'object' && stored !== null)
        if (list && first !== undefined && command.getOptionValueSource(attribute) === 'cli') {
          const flag = option.long ?? option.short ?? option.flags
          // the one list meant: both lists' entries, each once, empty ones dropped
          const entries = [...new Set(`${String(first)},${String(value)}`.split(',').map((e) => e.trim()))]
          const joined = entries.filter((e) => e !== '').join(',')
          throw new UsageError(
            `${flag} was given twice ('${String(first)}', then '${String(value)}'); it takes one comma-separated ` +
              `list${joined === '' ? '' : `, e.g. ${flag} ${joined}`}`,
          )
        }
        first = value
      })
    }
  }
}

/**
 * Checks an output-file flag before any work: the path is not empty, the file's directory exists
 * and a file can be created in it, the path is not a directory (and, with `extension`, ends in
 * it), and an existing file is replaced only with `--force`. Every command's `--plot` and
 * `--out <file>` use this, so every output follows one rule (the run directories of `train` /
 * `emergence` follow the same one in `out-dir.ts`).
 *
 * @param flag - the flag, for the message (e.g. `--plot`)
 * @param path - the path given
 * @param extension - required file extension, e.g. `.svg` (case-insensitive)
 * @param force - the command's `--force` ({@link forceOption}): replace an existing file
 * @returns the absolute path
 * @throws UsageError naming the flag and the problem
 */
export function checkOutputFile(
  flag: string,
  path: string,
  extension: string | undefined,
  force: boolean | undefined,
): string {
  checkPathGiven(flag, path)
  const absolute = resolve(path)
  if (extension !== undefined && !absolute.toLowerCase().endsWith(extension))
    throw new UsageError(`${flag} must name an ${extension} file, got '${path}'`)
  const directory = dirname(absolute)
  if (!existsSync(directory) || !statSync(directory).isDirectory())
    throw new UsageError(`${flag}: directory '${directory}' does not exist`)
  if (existsSync(absolute) && statSync(absolute).isDirectory()) {
    throw new UsageError(
      `${flag}: '${path}' is a directory; name the ${extension === undefined ? '' : `${extension} `}file to write ` +
        `inside it`,
    )
  }
  if (force !== true && existsSync(absolute)) {
    throw new UsageError(`${flag} ${path} already exists; pick another path, or pass --force to replace it`)
  }
  checkDirectoryWritable(directory, flag, path)
  return absolute
}

/** The `--force` option of a command that writes files: replace an existing output. */
export function forceOption(what = 'an existing output file'): Option {
  return new Option('--force', `replace ${what}`)
}

/** The `--backend` option, shared by every command that computes with tensors. */
export function backendOption(): Option {
  return new Option(
    '--backend <name>',
    'tensor backend (default: the fastest available here; --kernels/--threads pick its attnlab kernels)',
  ).choices([...BACKEND_NAMES])
}

/** The global `--kernels` option: which attnlab kernels back the backend (see `attnlab kernels status`). */
export function kernelsOption(): Option {
  return new Option(
    '--kernels <mode>',
    'attnlab kernels for the wasm/cpu backends: auto (native if built, else wasm), native, wasm, js, none',
  ).choices([...KERNELS_MODES])
}

/** The global `--threads` option: threads for the native kernels. */
export function threadsOption(): Option {
  return new Option('--threads <n>', 'threads for the native kernels (default 1)').argParser(
    intParser('--threads', 1, 256),
  )
}

let kernelFlags: { kernels?: KernelsMode; threads?: number } = {}

/**
 * Adds `--kernels` and `--threads` to the program as global options (accepted before or after
 * any subcommand, next to its `--backend`) and records them before each action for
 * {@link activateBackend}.
 */
export function installKernelFlags(program: Command): void {
  program.addOption(kernelsOption()).addOption(threadsOption())
  // List them in every subcommand's --help too (commands registered so far).
  const showGlobal = (command: Command): void => {
    command.configureHelp({ ...command.configureHelp(), showGlobalOptions: true })
    command.commands.forEach(showGlobal)
  }
  showGlobal(program)
  program.hook('preAction', (root) => {
    const options = root.opts<{ kernels?: KernelsMode; threads?: number }>()
    kernelFlags = {}
    if (options.kernels !== undefined) kernelFlags.kernels = options.kernels
    if (options.threads !== undefined) kernelFlags.threads = options.threads
  })
}

/** The `--kernels` / `--threads` given on the command line (before or after the subcommand), if any. */
export function kernelFlagsGiven(): { readonly kernels?: KernelsMode; readonly threads?: number } {
  return { ...kernelFlags }
}

/**
 * Activates the requested backend, or the default one, with the kernels chosen by `--kernels` /
 * `--threads` (default `auto`, 1 thread). Returns its name.
 */
export async function activateBackend(name: string | undefined): Promise<BackendName> {
  const chosen = (name as BackendName | undefined) ?? (await defaultBackend())
  return useBackend(chosen, kernelFlags)
}

/**
 * The help of every `--model <path>` flag: what {@link modelFlagPath} and `loadModel` accept (one rule for every
 * command that takes a model).
 */
export const MODEL_PATH_HELP =
  'a llama2.c .bin, a folder holding model.bin, a Hugging Face or attnlab model directory (config.json + ' +
  'model.safetensors), an attnlab training checkpoint directory, or an attnlab emergence run directory ' +
  "(its first seed's checkpoint)"

/**
 * The model path a `--model <path>` flag means: the path itself, but for an emergence run
 * directory (whose `config.json` is the run's record, not a model configuration, so
 * `@attnlab/transformer`'s `loadModel` must not read it) its first seed's checkpoint
 * (`@attnlab/experiments/node`'s `emergenceRunCheckpoint`).
 *
 * @param path - the flag's value
 * @returns the path to hand to `loadModel` (and to read a checkpoint's training task from)
 * @throws {@link UsageError} naming `--model` for an emergence run without a checkpoint
 */
export async function modelFlagPath(path: string): Promise<string> {
  try {
    return (await emergenceRunCheckpoint(path, 'model')) ?? path
  } catch (error) {
    if (error instanceof ExperimentInputError) throw new UsageError(`--model: ${error.message}`)
    throw error
  }
}

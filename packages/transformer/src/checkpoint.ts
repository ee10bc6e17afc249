/**
 * Training checkpoints on disk (Node only; import from `@attnlab/transformer/node`).
 *
 * A checkpoint is a directory, written atomically (a temporary sibling directory renamed into
 * place, `writeDirectoryAtomic`), holding:
 *
 * | file | content |
 * | --- | --- |
 * | `config.json` | the model configuration (`configToJSON`) |
 * | `model.safetensors` | float32 weights under TransformerLens names (PyTorch: `safetensors.torch.load_file`) |
 * | `optimizer.safetensors` | optimizer slots (`exp_avg.<name>`, `exp_avg_sq.<name>` or `momentum_buffer.<name>`) |
 * | `trainer.json` | step, optimizer, schedule, RNG states, dataset position, recent training losses, user `extra` |
 * | `manifest.json` | format id and the SHA-256 and size of every file (written last) |
 *
 * Loading checks the manifest, every checksum, the safetensors headers, every tensor's name, dtype
 * and shape against the configuration, and every trainer field; any problem throws a
 * {@link CheckpointError} naming the file and the tensor or field at fault. Nothing is returned
 * partially.
 *
 * @module
 */
import { createHash } from 'node:crypto'
import type { Stats } from 'node:fs'
import { readFile, readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import {
  AttnlabError,
  IoError,
  parseSafetensors,
  serializeSafetensors,
  type SafetensorsFile,
  type SafetensorsTensorInput,
} from '@attnlab/core'
import { recoverDirectoryWrite, writeDirectoryAtomic, writeFileAtomic } from '@attnlab/core/node'
import { booleanField, configSchema, parseConfig, type z } from '@attnlab/core/schema'
import { configFromJSON, configToJSON, type TransformerConfig } from './config.ts'
import { createTransformer, parameterShapes, type Transformer, type TransformerOptions } from './model.ts'
import type { OptimizerState } from './optimizers.ts'
import type { TrainerState } from './train.ts'

/** The format id in `manifest.json`. @category Checkpoints */
export const CHECKPOINT_FORMAT = 'attnlab-checkpoint/1'

/**
 * A checkpoint is missing, corrupt, truncated, or does not match its configuration.
 * `file` names the file and `field` the tensor or JSON field at fault.
 *
 * @category Checkpoints
 */
export class CheckpointError extends AttnlabError {
  /** The class name, spelled out so that minifying bundlers keep it. */
  override readonly name: string = 'CheckpointError'
  /** The file at fault (relative to the checkpoint directory). */
  readonly file: string
  /** The tensor or field at fault, when there is one. */
  readonly field: string | undefined
  constructor(file: string, message: string, field?: string, options?: { cause?: unknown; whole?: boolean }) {
    // '.' is the checkpoint directory itself (and `whole` a message that names the directory): as given.
    const whole = file === '.' || options?.whole === true
    super('INVALID_CHECKPOINT', whole ? message : `checkpoint ${file}: ${message}`, { file, field }, options)
    this.file = file
    this.field = field
  }
}

/** A loaded checkpoint (plain data, no tensors). @category Checkpoints */
export interface LoadedCheckpoint {
  /** The model configuration. */
  readonly config: TransformerConfig
  /** Weights by parameter name. */
  readonly weights: Map<string, { shape: number[]; data: Float32Array }>
  /** The trainer state, or null for a model-only checkpoint. */
  readonly trainerState: TrainerState | null
  /** Whatever the writer stored in `extra` (e.g. the CLI's task and training flags). */
  readonly extra: Readonly<Record<string, unknown>>
}

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex')

function tensorInputs(
  map: ReadonlyMap<string, { shape: number[]; data: Float32Array }>,
): Record<string, SafetensorsTensorInput> {
  const out: Record<string, SafetensorsTensorInput> = {}
  for (const [name, { shape, data }] of map) out[name] = { dtype: 'F32', shape, data }
  return out
}

/**
 * The schema of {@link SaveCheckpointOptions}.
 *
 * @category Checkpoints
 */
export const saveCheckpointOptionsSchema = configSchema({
  /**
   * Replace whatever is at `dir` (a file, or a directory with any content). Default false: only
   * a missing path, an empty directory or an earlier attnlab checkpoint directory is replaced.
   */
  overwrite: booleanField(
    'replace whatever is at the directory (default: only a missing path, an empty directory or a checkpoint)',
  ).default(false),
})

/** Options of {@link saveCheckpoint} (see {@link saveCheckpointOptionsSchema}). @category Checkpoints */
export type SaveCheckpointOptions = Readonly<z.input<typeof saveCheckpointOptionsSchema>>

/** The names of the files a checkpoint directory may hold. */
const CHECKPOINT_FILES = new Set([
  'config.json',
  'model.safetensors',
  'optimizer.safetensors',
  'trainer.json',
  'manifest.json',
])

/**
 * Why `dir` must not be replaced by a checkpoint, or null when it may be: missing, an empty
 * directory, or an attnlab checkpoint (a `manifest.json` with the checkpoint format id, and no
 * file other than the checkpoint's own).
 */
async function replaceRefusal(dir: string): Promise<string | null> {
  let info: Stats
  try {
    info = await stat(dir)
  } catch {
    // Missing; anything else (a file where a parent should be, permissions) is reported by the write.
    return null
  }
  if (!info.isDirectory()) return 'is a file, not a checkpoint directory'
  let entries: string[]
  try {
    entries = await readdir(dir)
  } catch {
    return null
  }
  if (entries.length === 0) return null
  let format: unknown
  try {
    format = (JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as { format?: unknown }).format
  } catch {
    format = undefined
  }
  if (format !== CHECKPOINT_FORMAT)
    return (
      'is a non-empty directory that is not an attnlab checkpoint (no manifest.json with format ' +
      `'${CHECKPOINT_FORMAT}')`
    )
  const foreign = entries.filter((entry) => !CHECKPOINT_FILES.has(entry))
  if (foreign.length > 0) {
    const shown = foreign
      .slice(0, 5)
      .map((entry) => `'${entry}'`)
      .join(', ')
    return `is an attnlab checkpoint that also holds other files (${shown}${foreign.length > 5 ? ', ...' : ''})`
  }
  return null
}

/**
 * Writes a checkpoint directory atomically: the files go to a temporary sibling directory that is
 * renamed into place when complete, so `dir` never holds a half-written checkpoint.
 *
 * What is already at `dir` is replaced only if it is safe to: nothing, an empty directory, or an
 * earlier attnlab checkpoint (recognised by its `manifest.json`, holding only checkpoint files).
 * A file, or a directory with anything else in it, is refused with an error naming the path,
 * unless `options.overwrite` is true.
 *
 * @param dir - destination directory
 * @param model - the model (its weights and configuration are saved)
 * @param state - the trainer state ({@link Trainer.getState}), or null/undefined for a model-only checkpoint
 * @param extra - JSON to store alongside (e.g. training options)
 * @param options - `overwrite: true` replaces whatever is at `dir`
 * @throws `IoError` (`@attnlab/core`) naming `dir` if it holds a file or a
 *   directory that is not a checkpoint (without `overwrite`), or if the directory cannot be written
 * @throws `ConfigError` (`@attnlab/core`) for an unknown option name (with a did-you-mean) or an `overwrite`
 *   that is not a boolean
 * @category Checkpoints
 */
export async function saveCheckpoint(
  dir: string,
  model: Transformer,
  state?: TrainerState | null,
  extra: Readonly<Record<string, unknown>> = {},
  options: SaveCheckpointOptions = {},
): Promise<void> {
  const { overwrite } = parseConfig(saveCheckpointOptionsSchema, options, 'saveCheckpoint')
  if (!overwrite) {
    const refusal = await replaceRefusal(dir)
    if (refusal !== null) {
      throw new IoError(
        `saveCheckpoint: refusing to replace '${dir}': it ${refusal}; pick another directory, or pass { ` +
          'overwrite: true } to replace it',
        { path: dir },
      )
    }
  }
  const weights = await model.getWeightData()
  const files = new Map<string, Uint8Array>()
  const encoder = new TextEncoder()
  files.set('config.json', encoder.encode(`${JSON.stringify(configToJSON(model.config), null, 2)}\n`))
  files.set(
    'model.safetensors',
    serializeSafetensors(tensorInputs(weights), {
      format: 'pt',
      producer: 'attnlab',
      architecture: model.config.architecture,
    }),
  )
  if (state !== undefined && state !== null) {
    const { optimizer, ...rest } = state
    files.set(
      'optimizer.safetensors',
      serializeSafetensors(tensorInputs(optimizer.slots as Map<string, { shape: number[]; data: Float32Array }>), {
        format: 'pt',
        kind: optimizer.kind,
      }),
    )
    const trainer = {
      ...rest,
      optimizer: { kind: optimizer.kind, step: optimizer.step, hyperparameters: optimizer.hyperparameters },
      extra,
    }
    files.set('trainer.json', encoder.encode(`${JSON.stringify(trainer, null, 2)}\n`))
  } else if (Object.keys(extra).length > 0) {
    files.set('trainer.json', encoder.encode(`${JSON.stringify({ version: 1, modelOnly: true, extra }, null, 2)}\n`))
  }
  const manifest = {
    format: CHECKPOINT_FORMAT,
    files: Object.fromEntries(
      [...files].map(([name, bytes]) => [name, { sha256: sha256(bytes), bytes: bytes.byteLength }]),
    ),
  }
  await writeDirectoryAtomic(dir, async (tmp) => {
    for (const [name, bytes] of files) await writeFileAtomic(join(tmp, name), bytes)
    await writeFileAtomic(join(tmp, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  })
}

async function readChecked(
  dir: string,
  name: string,
  manifest: Record<string, { sha256: string; bytes: number }>,
): Promise<Uint8Array> {
  const entry = manifest[name]
  if (entry === undefined) throw new CheckpointError(name, 'not listed in manifest.json', name)
  if (
    typeof entry !== 'object' ||
    entry === null ||
    typeof entry.sha256 !== 'string' ||
    !Number.isSafeInteger(entry.bytes) ||
    entry.bytes < 0
  ) {
    throw new CheckpointError(
      'manifest.json',
      `the entry of '${name}' is ${JSON.stringify(entry)}; expected { sha256: string, bytes: a non-negative integer }`,
      `files.${name}`,
    )
  }
  let bytes: Uint8Array
  try {
    const buffer = await readFile(join(dir, name))
    bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
  } catch (error) {
    throw new CheckpointError(name, `cannot be read (${(error as Error).message})`, undefined, { cause: error })
  }
  if (bytes.byteLength !== entry.bytes) {
    throw new CheckpointError(
      name,
      `has ${bytes.byteLength} bytes but the manifest says ${entry.bytes} (truncated or replaced)`,
    )
  }
  if (sha256(bytes) !== entry.sha256)
    throw new CheckpointError(name, 'SHA-256 does not match the manifest (the file is corrupt)')
  return bytes
}

function parseJson(name: string, bytes: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch (error) {
    // JSON.parse quotes the text around the fault, newlines included: keep the message on one line.
    const reason = (error as Error).message.replace(/\s+/g, ' ')
    throw new CheckpointError(name, `is not valid JSON (${reason})`, undefined, { cause: error })
  }
}

function readTensors(name: string, bytes: Uint8Array): Map<string, { shape: number[]; data: Float32Array }> {
  let file: SafetensorsFile
  try {
    file = parseSafetensors(bytes)
  } catch (error) {
    const tensor = (error as { tensor?: string }).tensor
    throw new CheckpointError(name, (error as Error).message, tensor, { cause: error })
  }
  const out = new Map<string, { shape: number[]; data: Float32Array }>()
  for (const [tensor, entry] of file.tensors) {
    if (entry.dtype !== 'F32')
      throw new CheckpointError(name, `tensor '${tensor}' has dtype ${entry.dtype}; checkpoints store F32`, tensor)
    const data = new Float32Array(entry.bytes.byteLength / 4)
    new Uint8Array(data.buffer).set(entry.bytes)
    out.set(tensor, { shape: [...entry.shape], data })
  }
  return out
}

/** Why a path could not be opened, in words (`does not exist`, `is not readable`, ...). */
function errnoPhrase(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code
  if (code === 'ENOENT') return 'does not exist'
  if (code === 'ENOTDIR') return 'does not exist (a part of the path is a file)'
  if (code === 'EACCES' || code === 'EPERM') return `is not readable (${code})`
  return `cannot be read (${code ?? (error as Error).message})`
}

/**
 * Reads and validates a checkpoint directory.
 *
 * @param dir - the directory written by {@link saveCheckpoint}
 * @returns configuration, weights, trainer state (or null) and `extra`
 * When `dir` is missing because a {@link saveCheckpoint} was killed between its renames, the
 * complete copy it left is renamed into place first (`recoverDirectoryWrite` of `@attnlab/core/node`);
 * a copy that is not verifiably complete is named in the error.
 *
 * @throws {@link CheckpointError} naming the file and tensor/field for a missing, corrupt,
 *   truncated or mismatched checkpoint
 * @category Checkpoints
 */
export async function loadCheckpoint(dir: string): Promise<LoadedCheckpoint> {
  try {
    const info = await stat(dir)
    if (!info.isDirectory()) throw new CheckpointError('.', `checkpoint directory '${dir}' is not a directory`)
  } catch (error) {
    if (error instanceof CheckpointError) throw error
    // A save killed between its renames leaves only temporary copies: finish it when one is
    // verifiably complete, else say where they are.
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT'
    const recovery = missing ? await recoverDirectoryWrite(dir) : { recovered: false, leftovers: [] }
    if (!recovery.recovered) {
      const left = recovery.leftovers.map((path) => `'${path}'`).join(', ')
      const hint =
        recovery.leftovers.length === 0
          ? ''
          : `; an interrupted save left ${left}, not verifiably complete: check it and rename it to '${dir}' to use it`
      throw new CheckpointError('.', `checkpoint directory '${dir}' ${errnoPhrase(error)}${hint}`, undefined, {
        cause: error,
      })
    }
  }
  let manifestBytes: Uint8Array
  try {
    const buffer = await readFile(join(dir, 'manifest.json'))
    manifestBytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    const why = code === 'ENOENT' ? 'is missing' : errnoPhrase(error)
    throw new CheckpointError(
      'manifest.json',
      `${dir} is not an attnlab checkpoint: manifest.json ${why} (or a save was interrupted before writing it)`,
      undefined,
      { cause: error, whole: true },
    )
  }
  const manifest = parseJson('manifest.json', manifestBytes) as { format?: unknown; files?: unknown }
  if (manifest === null || typeof manifest !== 'object' || manifest.format !== CHECKPOINT_FORMAT) {
    const format = JSON.stringify((manifest as { format?: unknown })?.format)
    throw new CheckpointError(
      'manifest.json',
      `${dir} is not an attnlab checkpoint: manifest.json format is ${format}; expected '${CHECKPOINT_FORMAT}'`,
      'format',
      { whole: true },
    )
  }
  const files = manifest.files as Record<string, { sha256: string; bytes: number }>
  if (files === null || typeof files !== 'object')
    throw new CheckpointError('manifest.json', 'has no files table', 'files')
  // Configuration.
  const configJson = parseJson('config.json', await readChecked(dir, 'config.json', files))
  let config: TransformerConfig
  try {
    config = configFromJSON(configJson)
  } catch (error) {
    throw new CheckpointError('config.json', (error as Error).message, (error as { parameter?: string }).parameter, {
      cause: error,
    })
  }
  // Weights: exactly the configuration's parameters, with its shapes.
  const weights = readTensors('model.safetensors', await readChecked(dir, 'model.safetensors', files))
  const expected = parameterShapes(config)
  for (const [name, shape] of expected) {
    const tensor = weights.get(name)
    if (tensor === undefined)
      throw new CheckpointError(
        'model.safetensors',
        `tensor '${name}' is missing (the ${config.architecture} configuration needs it)`,
        name,
      )
    if (tensor.shape.length !== shape.length || tensor.shape.some((d, i) => d !== shape[i])) {
      throw new CheckpointError(
        'model.safetensors',
        `tensor '${name}' has shape [${tensor.shape}] but the configuration implies [${shape}]`,
        name,
      )
    }
  }
  for (const name of weights.keys()) {
    if (!expected.some(([n]) => n === name))
      throw new CheckpointError(
        'model.safetensors',
        `tensor '${name}' is not a parameter of this ${config.architecture} configuration`,
        name,
      )
  }
  if (files['trainer.json'] === undefined) return { config, weights, trainerState: null, extra: {} }
  const trainer = parseJson('trainer.json', await readChecked(dir, 'trainer.json', files)) as Record<string, unknown>
  if (typeof trainer !== 'object' || trainer === null || Array.isArray(trainer))
    throw new CheckpointError('trainer.json', `is ${JSON.stringify(trainer)}; expected a JSON object`)
  const extra = (trainer.extra ?? {}) as Record<string, unknown>
  if (trainer.modelOnly === true) return { config, weights, trainerState: null, extra }
  const field = (key: string, check: (v: unknown) => boolean, what: string): unknown => {
    const value = trainer[key]
    if (!check(value)) {
      // A hand-edited field can be huge (a 100,000-entry array): the message shows its start.
      const shown = JSON.stringify(value) ?? String(value)
      const brief = shown.length > 160 ? `${shown.slice(0, 160)}... (${shown.length} characters)` : shown
      throw new CheckpointError('trainer.json', `field '${key}' is ${brief}; expected ${what}`, key)
    }
    return value
  }
  const isObject = (v: unknown): boolean => typeof v === 'object' && v !== null && !Array.isArray(v)
  field('version', (v) => v === 1, '1')
  field('step', (v) => Number.isSafeInteger(v) && (v as number) >= 0, 'a non-negative integer')
  field('tokens', (v) => typeof v === 'number' && Number.isFinite(v) && v >= 0, 'a non-negative number')
  field('seconds', (v) => typeof v === 'number' && Number.isFinite(v) && v >= 0, 'a non-negative number')
  field('schedule', isObject, 'an object')
  field('dataRng', isObject, 'a random-stream state')
  field('dropoutRng', isObject, 'a random-stream state')
  field('source', isObject, 'an object')
  field('settings', isObject, 'an object')
  field('dataset', (v) => v === null || isObject(v), 'null or an object')
  field('lastValidationLoss', (v) => v === null || typeof v === 'number', 'null or a number')
  // Absent in checkpoints written before they existed (the trainer then resumes with none, see TrainerState).
  // Training losses are cross-entropies: finite and >= 0 (a negative one would be reported as the run's loss).
  const loss = (v: unknown): boolean => typeof v === 'number' && Number.isFinite(v) && v >= 0
  field(
    'sinceEval',
    (v) =>
      v === undefined ||
      (isObject(v) &&
        loss((v as { lossSum?: unknown }).lossSum) &&
        Number.isSafeInteger((v as { steps?: unknown }).steps) &&
        (v as { steps: number }).steps >= 0 &&
        ((v as { steps: number }).steps > 0 || (v as { lossSum: number }).lossSum === 0)),
    'absent or { lossSum: a finite number >= 0 (0 when steps is 0), steps: a non-negative integer }',
  )
  field(
    'recentLosses',
    (v) => v === undefined || (Array.isArray(v) && v.length <= 10 && v.every(loss)),
    'absent or at most 10 finite numbers >= 0',
  )
  const optimizerInfo = field('optimizer', isObject, 'an object') as {
    kind?: unknown
    step?: unknown
    hyperparameters?: unknown
  }
  if (optimizerInfo.kind !== 'adamw' && optimizerInfo.kind !== 'sgd')
    throw new CheckpointError(
      'trainer.json',
      `optimizer.kind is ${JSON.stringify(optimizerInfo.kind)}`,
      'optimizer.kind',
    )
  if (!Number.isSafeInteger(optimizerInfo.step))
    throw new CheckpointError(
      'trainer.json',
      `optimizer.step is ${JSON.stringify(optimizerInfo.step)}`,
      'optimizer.step',
    )
  const slots = readTensors('optimizer.safetensors', await readChecked(dir, 'optimizer.safetensors', files))
  for (const [name, slot] of slots) {
    const parameter = name.slice(name.indexOf('.') + 1)
    const shape = expected.find(([n]) => n === parameter)?.[1]
    if (shape === undefined)
      throw new CheckpointError('optimizer.safetensors', `slot '${name}' belongs to no parameter of the model`, name)
    if (slot.shape.length !== shape.length || slot.shape.some((d, i) => d !== shape[i])) {
      throw new CheckpointError(
        'optimizer.safetensors',
        `slot '${name}' has shape [${slot.shape}] but parameter '${parameter}' has [${shape}]`,
        name,
      )
    }
  }
  const optimizer: OptimizerState = {
    kind: optimizerInfo.kind,
    step: optimizerInfo.step as number,
    hyperparameters: (optimizerInfo.hyperparameters ?? {}) as Record<string, number | boolean>,
    slots,
  }
  const { extra: _extra, ...rest } = trainer
  void _extra
  return { config, weights, trainerState: { ...(rest as unknown as TrainerState), optimizer }, extra }
}

/**
 * Builds a model from a checkpoint directory (weights loaded, ready to use).
 *
 * @throws {@link CheckpointError} as {@link loadCheckpoint}
 * @category Checkpoints
 */
export async function loadCheckpointModel(dir: string, options: TransformerOptions = {}): Promise<Transformer> {
  const checkpoint = await loadCheckpoint(dir)
  const model = createTransformer(checkpoint.config, options)
  try {
    model.setWeights(checkpoint.weights)
  } catch (error) {
    model.dispose()
    throw error
  }
  return model
}

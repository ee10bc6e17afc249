import * as tf from '@tensorflow/tfjs-core'
import { mkdir, mkdtemp, readFile, rm, writeFile, readdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Rng, parseSafetensors, serializeSafetensors, useBackend } from '@attnlab/core'
import { SparseMarkovTask } from '@attnlab/markov'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createConfig, configToJSON } from './config.ts'
import { CheckpointError, loadCheckpoint, loadCheckpointModel, saveCheckpoint } from './checkpoint.ts'
import { createTransformer } from './model.ts'
import { train, type TrainerState } from './train.ts'

const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 })
const config = createConfig({
  architecture: 'gpt',
  dVocab: 8,
  nCtx: 7,
  dModel: 16,
  nLayers: 1,
  nHeads: 2,
  dHead: 8,
  dMlp: 32,
})
let root: string

beforeAll(async () => {
  await useBackend('cpu')
  root = await mkdtemp(join(tmpdir(), 'attnlab-checkpoint-test-'))
})
afterAll(async () => {
  await rm(root, { recursive: true, force: true })
})

async function trainedCheckpoint(dir: string, steps = 4): Promise<TrainerState> {
  const model = createTransformer(config)
  let state: TrainerState | undefined
  await train(model, task, {
    steps,
    batchSize: 8,
    lr: 0.01,
    validation: 8,
    analysis: false,
    onCheckpoint: (s) => {
      state = s
    },
  })
  await saveCheckpoint(dir, model, state, { note: 'test' })
  model.dispose()
  return state!
}

async function rewrite(dir: string, file: string, change: (bytes: Uint8Array) => Uint8Array): Promise<void> {
  await writeFile(join(dir, file), change(new Uint8Array(await readFile(join(dir, file)))))
}

/**
 * Re-serialises model.safetensors with `edit` applied to its tensors and fixes the manifest (a consistent but wrong
 * file).
 */
async function replaceWeights(
  dir: string,
  edit: (tensors: Map<string, { shape: number[]; data: Float32Array }>) => void,
): Promise<void> {
  const file = parseSafetensors(new Uint8Array(await readFile(join(dir, 'model.safetensors'))))
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>()
  for (const [name, entry] of file.tensors)
    tensors.set(name, { shape: [...entry.shape], data: new Float32Array(entry.bytes.slice().buffer) })
  edit(tensors)
  const bytes = serializeSafetensors(
    Object.fromEntries([...tensors].map(([n, t]) => [n, { dtype: 'F32' as const, ...t }])),
    { format: 'pt' },
  )
  await writeFile(join(dir, 'model.safetensors'), bytes)
  const manifest = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8'))
  const { createHash } = await import('node:crypto')
  manifest.files['model.safetensors'] = {
    sha256: createHash('sha256').update(bytes).digest('hex'),
    bytes: bytes.byteLength,
  }
  await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest))
}

describe('checkpoints', () => {
  it('round-trips weights, config, optimizer state and trainer state; writes only complete directories', async () => {
    const dir = join(root, 'round-trip')
    const state = await trainedCheckpoint(dir)
    expect((await readdir(dir)).sort()).toEqual([
      'config.json',
      'manifest.json',
      'model.safetensors',
      'optimizer.safetensors',
      'trainer.json',
    ])
    expect((await readdir(root)).filter((n) => n.includes('tmp'))).toEqual([])
    const loaded = await loadCheckpoint(dir)
    expect(configToJSON(loaded.config)).toEqual(configToJSON(config))
    expect(loaded.trainerState!.step).toBe(4)
    expect(loaded.trainerState!.dataRng).toEqual(state.dataRng)
    expect(loaded.trainerState!.optimizer.step).toBe(4)
    expect([...loaded.trainerState!.optimizer.slots.keys()].sort()).toEqual([...state.optimizer.slots.keys()].sort())
    for (const [key, slot] of state.optimizer.slots)
      expect(loaded.trainerState!.optimizer.slots.get(key)!.data).toEqual(slot.data)
    expect(loaded.extra).toEqual({ note: 'test' })
    // safetensors readable by PyTorch: F32, format "pt", TransformerLens names.
    const file = parseSafetensors(new Uint8Array(await readFile(join(dir, 'model.safetensors'))))
    expect(file.metadata.format).toBe('pt')
    expect(file.tensors.get('blocks.0.attn.W_Q')!.shape).toEqual([2, 16, 8])
    const model = await loadCheckpointModel(dir)
    expect(model.parameterNames()).toEqual(createTransformer(config).parameterNames())
    model.dispose()
  })

  it('a resume through files continues bit-identically', async () => {
    const options = { steps: 8, batchSize: 8, lr: 0.01, validation: 8, analysis: false as const }
    const full = createTransformer(config)
    const fullResult = await train(full, task, options)
    const expected = await full.getWeightData()
    full.dispose()
    const dir = join(root, 'resume')
    await trainedCheckpoint(dir, 4)
    const loaded = await loadCheckpoint(dir)
    const model = createTransformer(loaded.config)
    model.setWeights(loaded.weights)
    const rest = await train(model, task, { ...options, resume: loaded.trainerState! })
    expect(rest.losses).toEqual(fullResult.losses.slice(4))
    const weights = await model.getWeightData()
    for (const [name, w] of expected) expect(weights.get(name)!.data, name).toEqual(w.data)
    model.dispose()
  })

  it('saves model-only checkpoints', async () => {
    const dir = join(root, 'model-only')
    const model = createTransformer(config)
    await saveCheckpoint(dir, model)
    const loaded = await loadCheckpoint(dir)
    expect(loaded.trainerState).toBeNull()
    expect((await readdir(dir)).sort()).toEqual(['config.json', 'manifest.json', 'model.safetensors'])
    model.dispose()
  })

  it('rejects corrupt, truncated and mismatched checkpoints with errors naming the file and field', async () => {
    const fresh = async (name: string): Promise<string> => {
      const dir = join(root, name)
      await trainedCheckpoint(dir, 2)
      return dir
    }
    const expectError = async (dir: string, file: string, pattern: RegExp, field?: string): Promise<void> => {
      const error = await loadCheckpoint(dir).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(CheckpointError)
      expect((error as CheckpointError).code).toBe('INVALID_CHECKPOINT')
      expect((error as CheckpointError).file).toBe(file)
      expect((error as Error).message).toMatch(pattern)
      if (field !== undefined) expect((error as CheckpointError).field).toBe(field)
    }
    // not 'checkpoint .: ...'
    await expectError(join(root, 'does-not-exist'), '.', /^checkpoint directory '.*does-not-exist' does not exist$/)
    let dir = await fresh('truncated')
    await rewrite(dir, 'model.safetensors', (b) => b.subarray(0, b.length - 10))
    await expectError(dir, 'model.safetensors', /truncated/)
    dir = await fresh('flipped')
    await rewrite(dir, 'optimizer.safetensors', (b) => {
      const c = b.slice()
      c[c.length - 1] = (c[c.length - 1] ?? 0) ^ 0xff
      return c
    })
    await expectError(dir, 'optimizer.safetensors', /SHA-256/)
    dir = await fresh('no-manifest')
    await rm(join(dir, 'manifest.json'))
    // The directory is named: `train --resume /tmp` says /tmp is not a checkpoint.
    const named = (path: string, rest: string): RegExp =>
      new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} is not an attnlab checkpoint: ${rest}`)
    await expectError(dir, 'manifest.json', named(dir, 'manifest.json is missing'))
    dir = await fresh('bad-manifest')
    await writeFile(join(dir, 'manifest.json'), '{"format":"other"}')
    await expectError(
      dir,
      'manifest.json',
      named(dir, `manifest.json format is "other"; expected 'attnlab-checkpoint/1'$`),
      'format',
    )
    dir = await fresh('missing-tensor')
    await replaceWeights(dir, (t) => t.delete('blocks.0.mlp.W_in'))
    await expectError(dir, 'model.safetensors', /'blocks.0.mlp.W_in' is missing/, 'blocks.0.mlp.W_in')
    dir = await fresh('wrong-shape')
    await replaceWeights(dir, (t) =>
      t.set('blocks.0.attn.W_Q', { shape: [2, 8, 16], data: t.get('blocks.0.attn.W_Q')!.data }),
    )
    await expectError(
      dir,
      'model.safetensors',
      /'blocks.0.attn.W_Q' has shape \[2,8,16\] but the configuration implies \[2,16,8\]/,
      'blocks.0.attn.W_Q',
    )
    dir = await fresh('extra-tensor')
    await replaceWeights(dir, (t) => t.set('blocks.9.attn.W_Q', { shape: [1], data: new Float32Array(1) }))
    await expectError(dir, 'model.safetensors', /'blocks.9.attn.W_Q' is not a parameter/, 'blocks.9.attn.W_Q')
    dir = await fresh('bad-config')
    const configBytes = new TextEncoder().encode(JSON.stringify({ ...configToJSON(config), nKvHeads: 3 }))
    await writeFile(join(dir, 'config.json'), configBytes)
    const manifest = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8'))
    const { createHash } = await import('node:crypto')
    manifest.files['config.json'] = {
      sha256: createHash('sha256').update(configBytes).digest('hex'),
      bytes: configBytes.byteLength,
    }
    await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest))
    await expectError(dir, 'config.json', /nKvHeads/, 'nKvHeads')
    dir = await fresh('bad-trainer')
    const trainer = JSON.parse(await readFile(join(dir, 'trainer.json'), 'utf8'))
    trainer.step = -3
    const trainerBytes = new TextEncoder().encode(JSON.stringify(trainer))
    await writeFile(join(dir, 'trainer.json'), trainerBytes)
    manifest.files = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')).files
    manifest.files['trainer.json'] = {
      sha256: createHash('sha256').update(trainerBytes).digest('hex'),
      bytes: trainerBytes.byteLength,
    }
    await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest))
    await expectError(dir, 'trainer.json', /field 'step' is -3/, 'step')
    // Hand-edited loss fields: a negative loss would be reported as the run's; a huge one is shown by its start.
    const writeTrainer = async (fields: Record<string, unknown>): Promise<void> => {
      const edited = { ...trainer, step: 3, ...fields }
      const bytes = new TextEncoder().encode(JSON.stringify(edited))
      await writeFile(join(dir, 'trainer.json'), bytes)
      manifest.files['trainer.json'] = { sha256: createHash('sha256').update(bytes).digest('hex'), bytes: bytes.length }
      await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest))
    }
    await writeTrainer({ recentLosses: [-1, 0.3] })
    await expectError(dir, 'trainer.json', /field 'recentLosses' is \[-1,0.3\]; .* >= 0/, 'recentLosses')
    await writeTrainer({ sinceEval: { lossSum: -5, steps: 3 } })
    await expectError(dir, 'trainer.json', /field 'sinceEval' is .*-5.* >= 0/, 'sinceEval')
    await writeTrainer({ sinceEval: { lossSum: 5, steps: 0 } })
    await expectError(dir, 'trainer.json', /0 when steps is 0/, 'sinceEval')
    await writeTrainer({ recentLosses: new Array(100_000).fill(0.5) })
    await expectError(dir, 'trainer.json', /^.{0,400}\(400001 characters\); expected/, 'recentLosses')
    // Loading into a different configuration is a mismatch too.
    const other = createTransformer(
      createConfig({ architecture: 'gpt', dVocab: 8, nCtx: 7, dModel: 8, nLayers: 1, nHeads: 2, dHead: 4, dMlp: 16 }),
    )
    const good = await loadCheckpoint(join(root, 'round-trip'))
    expect(() => other.setWeights(good.weights)).toThrow(
      /'embed.W_E' has shape \[8, 8\] but the value has shape \[8, 16\]/,
    )
    other.dispose()
    void tf
    void Rng
  })

  it('replaces an existing checkpoint atomically', async () => {
    const dir = join(root, 'replace')
    await trainedCheckpoint(dir, 2)
    await trainedCheckpoint(dir, 3)
    expect((await loadCheckpoint(dir)).trainerState!.step).toBe(3)
  })

  it('never replaces a file or a directory that is not a checkpoint unless overwrite is passed', async () => {
    const model = createTransformer(config)
    // A directory with unrelated files: refused, nothing touched.
    const thesis = join(root, 'thesis')
    await mkdir(thesis)
    await writeFile(join(thesis, 'thesis.tex'), 'chapter 1')
    const refused = saveCheckpoint(thesis, model, null)
    await expect(refused).rejects.toMatchObject({ code: 'IO_ERROR', details: { path: thesis } })
    await expect(saveCheckpoint(thesis, model, null)).rejects.toThrow(
      /refusing to replace '.*thesis': it is a non-empty directory that is not an attnlab checkpoint.*overwrite: true/,
    )
    expect(await readFile(join(thesis, 'thesis.tex'), 'utf8')).toBe('chapter 1')
    expect(await readdir(root)).not.toContain(expect.stringMatching(/\.thesis\.tmp-/))
    // A file (e.g. a checkpoint's own config.json): refused, the file is kept.
    const ckpt = join(root, 'ckpt-file-target')
    await saveCheckpoint(ckpt, model, null)
    const configFile = join(ckpt, 'config.json')
    const configText = await readFile(configFile, 'utf8')
    await expect(saveCheckpoint(configFile, model, null)).rejects.toThrow(
      /refusing to replace '.*config\.json': it is a file/,
    )
    expect(await readFile(configFile, 'utf8')).toBe(configText)
    await loadCheckpoint(ckpt)
    // A checkpoint holding a foreign file: refused.
    await writeFile(join(ckpt, 'notes.txt'), 'mine')
    await expect(saveCheckpoint(ckpt, model, null)).rejects.toThrow(/also holds other files \('notes\.txt'\)/)
    expect(await readFile(join(ckpt, 'notes.txt'), 'utf8')).toBe('mine')
    // An empty directory, a missing path and an earlier checkpoint are fine.
    const empty = join(root, 'empty')
    await mkdir(empty)
    await saveCheckpoint(empty, model, null)
    await loadCheckpoint(empty)
    await saveCheckpoint(empty, model, null)
    // overwrite: true replaces anything.
    await saveCheckpoint(thesis, model, null, {}, { overwrite: true })
    expect((await readdir(thesis)).sort()).toEqual(['config.json', 'manifest.json', 'model.safetensors'])
    const file = join(root, 'a-file')
    await writeFile(file, 'x')
    await saveCheckpoint(file, model, null, {}, { overwrite: true })
    await loadCheckpoint(file)
    // Misspelled or mistyped options.
    await expect(saveCheckpoint(join(root, 'x'), model, null, {}, { overwite: true } as never)).rejects.toThrow(
      /^Invalid overwite: is not a saveCheckpoint parameter \(did you mean 'overwrite'\?\); expected one of overwrite$/,
    )
    await expect(saveCheckpoint(join(root, 'x'), model, null, {}, { overwrite: 'yes' } as never)).rejects.toMatchObject(
      {
        code: 'INVALID_CONFIG',
        parameter: 'overwrite',
        message: "Invalid overwrite: got 'yes'; expected true or false",
      },
    )
    model.dispose()
  })
})

// runTextSparseEval (what `attnlab sparse eval --tasks ruler-niah ...` runs) on the shared stories260K model with
// its tokenizer: the rows' structure, each score against scoreTextSample on the same prompt and an independent greedy
// generation, sparsity 0 equal to dense, determinism, no leaked tensors, and every bad input.
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, Rng } from '@attnlab/core'
import { describeWithBackends, testBackends } from '@attnlab/core/testing'
import { generateTextTask, scoreTextSample } from '@attnlab/markov'
import { createKernel } from '@attnlab/sparse-attention'
import { generate, loadModel, type LoadedModel } from '@attnlab/transformer'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ExperimentInputError, runTextSparseEval } from './index.ts'

const SHARED = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../shared/models')
const MODEL = join(SHARED, 'stories260K/stories260K.bin')
const TOKENIZER = join(SHARED, 'stories260K/tok512.bin')
const present = existsSync(MODEL)
if (!present) console.warn(`[attnlab] ${MODEL} is absent: the text-task evaluation tests are skipped`)

const NIAH = { kind: 'ruler-niah', needles: 1, groups: 1 } as const

/** Loads stories260K with its tokenizer for the enclosing describe block (disposed after it), when present. */
function useStories260K(): () => LoadedModel {
  let loaded: LoadedModel | undefined
  beforeAll(async () => {
    if (present) loaded = await loadModel(MODEL, { tokenizer: TOKENIZER })
  })
  afterAll(() => loaded?.model.dispose())
  return () => loaded as LoadedModel
}

describeWithBackends(
  'runTextSparseEval on stories260K',
  () => {
    const stories = useStories260K()

    it.skipIf(!present)('scores greedy outputs with the study metric, dense first, sparsity 0 = dense', async () => {
      const tokenizer = stories().tokenizer as NonNullable<LoadedModel['tokenizer']>
      const before = tf.memory().numTensors
      const options = {
        tasks: [NIAH],
        tokenizer,
        methods: ['vertical-slash', 'snapkv'] as const,
        sparsities: [0, 0.8],
        lengths: [440],
        samples: 1,
        seed: 3,
        maxNewTokens: 6,
        eosTokens: [2],
      }
      const result = await runTextSparseEval(stories().model, { ...options, methods: [...options.methods] })
      expect(tf.memory().numTensors).toBe(before)
      expect(result.heads).toEqual([])
      expect(result.rows.map((r) => `${r.method}@${r.targetSparsity}`)).toEqual([
        'dense@0',
        'vertical-slash@0',
        'vertical-slash@0.8',
        'snapkv@0',
        'snapkv@0.8',
      ])
      // The prompt the run scored, rebuilt from the documented seed derivation.
      const rng = Rng.fromSeed(3).split('sparse-eval/ruler-niah/440')
      const sample = generateTextTask('ruler-niah', {
        needles: 1,
        groups: 1,
        tokenizer,
        maxTokens: 439,
        seed: rng.int(2 ** 31),
      })
      const ids = tokenizer.encode(sample.prompt)
      expect(ids.length).toBeLessThanOrEqual(440)
      expect(ids.length).toBeGreaterThanOrEqual(Math.floor(0.9 * 439))
      const [dense, vs0, vs, snap0, snap] = result.rows as [
        (typeof result.rows)[0],
        (typeof result.rows)[0],
        (typeof result.rows)[0],
        (typeof result.rows)[0],
        (typeof result.rows)[0],
      ]
      const direct = await generate(stories().model, ids, { maxTokens: 6, temperature: 0, eosToken: [2] })
      const text = tokenizer.decode((direct.tokens[0] ?? []).filter((t) => t !== 2))
      expect(dense.example).toBe(text)
      expect(dense.promptTokens).toBe(ids.length)
      expect(dense.agreement).toBe(1)
      expect(dense.newTokens).toBe((direct.tokens[0] ?? []).filter((t) => t !== 2).length)
      for (const row of result.rows) {
        expect(row.score).toBe(scoreTextSample(sample, row.example ?? '').score)
        expect(row.strict).toBe(scoreTextSample(sample, row.example ?? '').strict)
        expect(row.iou).toBeNaN() // NIAH is scored by accuracy
        expect(row.skipped).toBe(0)
      }
      for (const zero of [vs0, snap0]) {
        expect(zero.example).toBe(dense.example)
        expect(zero.exactSparsity).toBe(0)
      }
      expect(vs.phase).toBe('prefill')
      expect(snap.phase).toBe('decode')
      expect(vs.exactSparsity).toBeGreaterThan(0.5)
      expect(snap.exactSparsity).toBeGreaterThan(0.5)
      expect(snap.budget.capacity).toBeGreaterThan(0)
      expect(snap.cost?.metric).toBe('decode-memory')
      expect(snap.cost?.relative).toBeLessThan(1)
      // The SnapKV row's output is what generate gives with its kernel.
      const kernel = createKernel('snapkv', snap.config as never)
      const again = await generate(stories().model, ids, {
        maxTokens: 6,
        temperature: 0,
        eosToken: [2],
        attention: kernel,
      })
      expect(snap.example).toBe(tokenizer.decode((again.tokens[0] ?? []).filter((t) => t !== 2)))
      // Same seed, same rows.
      const repeat = await runTextSparseEval(stories().model, { ...options, methods: ['snapkv'], sparsities: [0.8] })
      expect(repeat.rows[1]?.example).toBe(snap.example)
      expect(repeat.rows[1]?.exactSparsity).toBe(snap.exactSparsity)
    })

    it.skipIf(!present)('an answer prefix starts every output and is scored with it', async () => {
      const tokenizer = stories().tokenizer as NonNullable<LoadedModel['tokenizer']>
      const prefix = '\n<answer>1. The answer for '
      const result = await runTextSparseEval(stories().model, {
        tasks: [NIAH],
        tokenizer,
        methods: ['snapkv'],
        sparsities: [0.8],
        lengths: [440],
        samples: 1,
        seed: 3,
        maxNewTokens: 3,
        answerPrefix: prefix,
      })
      const rng = Rng.fromSeed(3).split('sparse-eval/ruler-niah/440')
      const maxTokens = 439 - tokenizer.encode(prefix, { bos: false }).length
      const sample = generateTextTask('ruler-niah', {
        needles: 1,
        groups: 1,
        tokenizer,
        maxTokens,
        seed: rng.int(2 ** 31),
      })
      for (const row of result.rows) {
        expect(row.example?.startsWith(prefix)).toBe(true)
        expect(row.tagged).toBe(1) // the prefix opens the <answer> tag
        expect(row.score).toBe(scoreTextSample(sample, row.example ?? '').score)
        expect(row.promptTokens).toBe(tokenizer.encode(sample.prompt + prefix).length)
      }
    })

    it.skipIf(!present)('an IoU task reports its score as iou; the agreement is a fraction', async () => {
      const tokenizer = stories().tokenizer as NonNullable<LoadedModel['tokenizer']>
      const result = await runTextSparseEval(stories().model, {
        tasks: [{ kind: 'ruler-vt', chains: 1, hops: 2 }],
        tokenizer,
        methods: ['quest'],
        sparsities: [0.9],
        lengths: [480],
        samples: 2,
        maxNewTokens: 4,
      })
      for (const row of result.rows) {
        expect(row.iou).toBe(row.score)
        expect(row.samples).toBe(2)
        expect(row.agreement).toBeGreaterThanOrEqual(0)
        expect(row.agreement).toBeLessThanOrEqual(1)
      }
    })
  },
  testBackends().filter((mode) => mode !== 'cpu'),
) // 440-token prompts take minutes on the pure-JS backend

// Input checks do not depend on the backend: one mode.
describeWithBackends(
  'runTextSparseEval input checks',
  () => {
    const stories = useStories260K()

    it.skipIf(!present)('bad input is a typed error naming it, before any generation', async () => {
      const tokenizer = stories().tokenizer as NonNullable<LoadedModel['tokenizer']>
      const base = {
        tasks: [NIAH],
        tokenizer,
        methods: ['quest' as const],
        lengths: [440],
        samples: 1,
        maxNewTokens: 4,
      }
      const fails = async (over: Record<string, unknown>, pattern: RegExp, type: unknown = ExperimentInputError) => {
        const run = runTextSparseEval(stories().model, { ...base, ...over } as never)
        await expect(run).rejects.toBeInstanceOf(type)
        await expect(runTextSparseEval(stories().model, { ...base, ...over } as never)).rejects.toThrow(pattern)
      }
      await fails({ lengths: [510] }, /length 510 .*\[17, 508\].*nCtx 512/)
      await fails({ maxNewTokens: 0 }, /maxNewTokens must be an integer >= 1/)
      await fails({ answerPrefix: 5 }, /answerPrefix must be a string/)
      await fails({ tasks: [{ kind: 'niah-tokens' }] }, /'niah-tokens' is not a text task/)
      await fails({ tasks: [{ kind: 'ruler-niah', needls: 1 }] }, /'needls' is not a text task setting/)
      await fails({ tokenizer: undefined }, /need the model tokenizer/)
      await fails(
        { tokenizer: { ...tokenizer, encode: tokenizer.encode, decode: tokenizer.decode, vocabSize: 32000 } },
        /32000 tokens.*dVocab\) is 512/,
      )
      await fails({ methods: ['nope'] }, /methods must be a non-empty list/)
      await fails({ sparsities: [1] }, /sparsities must be/)
      await fails({ samples: 0 }, /samples must be an integer >= 1/)
      await fails(
        { tasks: [{ kind: 'ruler-niah', needles: 4 }] },
        new RegExp(
          'length 440 does not fit ruler-niah: the task gets 439 tokens \\(440 less BOS\\); 439 tokens cannot hold 4 ' +
            'needles: the smallest such prompt has \\d+ tokens in this tokenizer\\. (No length fits|Use a length).*' +
            'shrink the task \\(needles, groups, groupLength, minFill\\)',
        ),
      )
      await fails(
        { tasks: [{ kind: 'ruler-vt', chains: 1, needles: 1 }] },
        /'needles' is not a ruler-vt setting \(it has chains, hops/,
      )
      await fails({ maxNewTokens: 1000000 }, /maxNewTokens 1000000 leaves no room .*at most 495/)
      await fails({ tasks: [{ kind: 'ruler-niah', needles: 1, groups: 1, minFill: 2 }] }, /minFill/, ConfigError)
    })
  },
  testBackends().slice(0, 1),
)

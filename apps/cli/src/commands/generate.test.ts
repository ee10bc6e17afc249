import { existsSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Rng } from '@attnlab/core'
import {
  Llama2cTokenizer,
  createConfig,
  parameterShapes,
  saveModelDirectory,
  serializeLlama2cCheckpoint,
  type TransformerConfig,
} from '@attnlab/transformer'
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { captureOutput, useTempDir } from '../cli.test-utils.ts'
import { main } from '../program.ts'

const AIDREAMS = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../../shared/models/aidreams260K')
const HAVE_AIDREAMS = existsSync(join(AIDREAMS, 'model.bin')) && existsSync(join(AIDREAMS, 'hf', 'config.json'))
if (!HAVE_AIDREAMS) console.warn(`[attnlab] ${AIDREAMS} is absent: generate tests on aidreams260K are skipped`)
const REFERENCE =
  'I dreamed, as I sense the nodes, a gentle hum of probability. Contrast emerge, a flower, as I adjust, as I settle ' +
  'into a t'

const root = useTempDir('attnlab-generate-')

/** A small llama for the synthetic models of this file. */
const TINY_LLAMA = { architecture: 'llama', dVocab: 40, nCtx: 24, dModel: 16, nLayers: 1, nHeads: 2, dMlp: 16 } as const

/** Seeded N(0, 0.5^2) weights for every parameter of `config`. */
function randomWeights(config: TransformerConfig, seed: number): Map<string, { shape: number[]; data: Float32Array }> {
  const rng = Rng.fromSeed(seed)
  return new Map(
    parameterShapes(config).map(([name, shape]) => {
      const data = rng.split(name).fillNormal(new Float32Array(shape.reduce((a, b) => a * b, 1)), 0, 0.5)
      return [name, { shape: [...shape], data }]
    }),
  )
}
let tiny: string
beforeAll(async () => {
  // A tiny random llama with a tokenizer beside it.
  const config = createConfig({
    architecture: 'llama',
    dVocab: 40,
    nCtx: 24,
    dModel: 16,
    nLayers: 1,
    nHeads: 2,
    dMlp: 16,
  })
  const rng = Rng.fromSeed(3)
  const weights = new Map(
    parameterShapes(config).map(([name, shape]) => [
      name,
      { shape, data: rng.split(name).fillNormal(new Float32Array(shape.reduce((a, b) => a * b, 1)), 0, 0.5) },
    ]),
  )
  const pieces = [
    '<unk>',
    '\n<s>\n',
    '\n</s>\n',
    ' ',
    ...'abcdefghijklmnopqrstuvwxyz'.split(''),
    ' a',
    ' b',
    ' the',
    'th',
    'he',
    ' t',
    'in',
    'an',
    'er',
    'on',
  ]
  const tokenizer = Llama2cTokenizer.fromPieces(
    pieces,
    pieces.map((_, i) => -i),
  )
  tiny = join(root(), 'tiny')
  await saveModelDirectory(tiny, { config, weights }, { tokenizer })
})
afterEach(() => {
  vi.restoreAllMocks()
})

describe.skipIf(!HAVE_AIDREAMS)('attnlab generate on aidreams260K', () => {
  for (const [format, model] of [
    ['llama2.c', join(AIDREAMS, 'model.bin')],
    ['Hugging Face', join(AIDREAMS, 'hf')],
  ] as const) {
    it(`${format}: --steps 60 --temperature 0 prints the README reference text`, async () => {
      const io = captureOutput()
      const code = await main([
        'generate',
        '--model',
        model,
        '--tokenizer',
        join(AIDREAMS, 'tokenizer.bin'),
        '--prompt',
        'I dreamed',
        '--steps',
        '60',
        '--temperature',
        '0',
        '--backend',
        'cpu',
      ])
      expect(io.errors).toEqual([])
      expect(code).toBe(0)
      expect(io.logs).toEqual([REFERENCE])
    })
  }

  it('--max-tokens 60 generates 60 new tokens: the reference text continues', async () => {
    const io = captureOutput()
    expect(
      await main([
        'generate',
        '--model',
        join(AIDREAMS, 'model.bin'),
        '--prompt',
        'I dreamed',
        '--max-tokens',
        '60',
        '--temperature',
        '0',
        '--backend',
        'cpu',
      ]),
    ).toBe(0)
    const [text] = io.logs
    expect(text?.startsWith(REFERENCE)).toBe(true)
    expect(text!.length).toBeGreaterThan(REFERENCE.length)
  })

  it('--attention runs a sparse method: everything covered equals dense, a small budget skips pairs', async () => {
    const prompt = 'I dreamed of a quiet garden where the nodes hum and the light settles on every leaf, and I listened'
    const run = async (extra: string[]): Promise<{ ids: number[]; attentionSparsity: number }> => {
      const io = captureOutput()
      expect(
        await main([
          'generate',
          '--model',
          join(AIDREAMS, 'model.bin'),
          '--prompt',
          prompt,
          '--max-tokens',
          '8',
          '--temperature',
          '0',
          '--json',
          '--backend',
          'cpu',
          ...extra,
        ]),
      ).toBe(0)
      const summary = JSON.parse(io.logs.join('\n'))
      vi.restoreAllMocks()
      return summary
    }
    const dense = await run([])
    expect(dense.attentionSparsity).toBe(0)
    const covered = await run(['--attention', 'snapkv', '--capacity', '512'])
    expect(covered.ids).toEqual(dense.ids)
    const sparse = await run(['--attention', 'quest', '--token-budget', '16', '--page-size', '8'])
    expect(sparse.attentionSparsity).toBeGreaterThan(0.1)
  })

  it('--ids from BOS alone prints the README ids', async () => {
    const io = captureOutput()
    expect(
      await main([
        'generate',
        '--model',
        join(AIDREAMS, 'hf'),
        '--tokenizer',
        join(AIDREAMS, 'tokenizer.bin'),
        '--ids',
        '--max-tokens',
        '12',
        '--temperature',
        '0',
        '--backend',
        'wasm',
      ]),
    ).toBe(0)
    expect(io.logs).toEqual(['319 459 355 260 275 429 339 315 374 327 446 262'])
  })
})

// The shared TinyStories models from the command line: the text is coherent English and the greedy ids are the
// ones tools/import/greedy_reference.py (an independent numpy forward pass) printed for the same prompt.
const SHARED = resolve(AIDREAMS, '..')
const STORIES = [
  {
    name: 'stories260K (llama2.c, tok512.bin)',
    model: join(SHARED, 'stories260K', 'stories260K.bin'),
    flags: ['--tokenizer', join(SHARED, 'stories260K', 'tok512.bin')],
    promptIds: [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426],
    reference: [338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426],
  },
  {
    name: 'tinystories656K (Hugging Face, tokenizer.json, --no-dummy-prefix)',
    model: join(SHARED, 'tinystories656K'),
    flags: ['--no-dummy-prefix'],
    promptIds: [1, 147, 201, 282, 215, 286, 598, 629, 10],
    reference: [208, 183, 209, 210],
  },
] as const
describe('attnlab generate on the shared TinyStories models', () => {
  for (const { name, model, flags, promptIds, reference } of STORIES) {
    it.skipIf(!existsSync(model))(`${name}: greedy text from a prompt matches the reference ids`, async () => {
      const io = captureOutput()
      const prompt = 'Once upon a time, there was a little girl named Lily.'
      const argv = ['generate', '--model', model, ...flags, '--prompt', prompt, '--temperature', '0', '--json']
      const code = await main([...argv, '--max-tokens', String(reference.length), '--backend', 'cpu'])
      expect(code, io.err()).toBe(0)
      const out = JSON.parse(io.out()) as { promptIds: number[]; ids: number[]; text: string; stopReason: string }
      expect(out.promptIds).toEqual(promptIds)
      if (name.startsWith('tinystories')) {
        // After a bare '.' it ends the story at once (its README), spelling <|end_story|> out in four pieces
        // before its EOS: the text stops there. --ignore-eos shows the ids, the reference's.
        expect(out).toMatchObject({ ids: [], stopReason: 'eos-text', text: prompt })
        vi.restoreAllMocks()
        const again = captureOutput()
        expect(await main([...argv, '--max-tokens', '4', '--ignore-eos', '--backend', 'cpu'])).toBe(0)
        expect(JSON.parse(again.out())).toMatchObject({ ids: reference, text: `${prompt}<|end_story|>` })
        return
      }
      expect(out.ids).toEqual(reference)
      expect(out.text.startsWith(prompt)).toBe(true)
      expect(out.text).toMatch(/^[A-Za-z ,.'"!?\n]+$/)
    })
  }
})

describe('attnlab generate', () => {
  it(
    '--json reports prompt ids, ids, text, stop reason ' + 'and speed; the tokenizer is found beside the model',
    async () => {
      const io = captureOutput()
      expect(
        await main([
          'generate',
          '--model',
          tiny,
          '--prompt',
          'the',
          '--max-tokens',
          '5',
          '--temperature',
          '0',
          '--json',
          '--backend',
          'cpu',
        ]),
      ).toBe(0)
      const summary = JSON.parse(io.logs.join('\n'))
      expect(summary).toMatchObject({
        format: 'huggingface',
        tokenizer: join(tiny, 'tokenizer.bin'),
        backend: 'cpu',
        promptIds: [1, 3, 33, 8],
      }) // ' ' 'th' 'e': 'th' outscores ' t' and 'he', and ' th' is no piece
      expect(summary.ids.length).toBeLessThanOrEqual(5)
      expect(['max-tokens', 'eos']).toContain(summary.stopReason)
      expect(typeof summary.text).toBe('string')
      expect(summary.tokensPerSecond).toBeGreaterThan(0)
    },
  )

  it('sampling is seeded: the same seed gives the same ids, another seed other ids', async () => {
    const run = async (seed: string): Promise<string> => {
      const io = captureOutput()
      expect(
        await main([
          'generate',
          '--model',
          tiny,
          '--prompt-ids',
          '1,5,6',
          '--ids',
          '--ignore-eos',
          '--max-tokens',
          '15',
          '--temperature',
          '1.5',
          '--top-k',
          '30',
          '--top-p',
          '0.95',
          '--seed',
          seed,
          '--backend',
          'cpu',
        ]),
      ).toBe(0)
      const out = io.logs[0] as string
      vi.restoreAllMocks()
      return out
    }
    const a = await run('7')
    expect(a.split(' ')).toHaveLength(15)
    expect(await run('7')).toBe(a)
    expect(await run('8')).not.toBe(a)
  })

  it('one model-path rule: a folder holding model.bin works for generate, sparse compare and knockout', async () => {
    const folder = join(root(), 'llama2c-folder')
    await mkdir(folder, { recursive: true })
    const config = createConfig({ ...TINY_LLAMA, tiedEmbeddings: true })
    const weights = randomWeights(config, 4)
    await writeFile(join(folder, 'model.bin'), serializeLlama2cCheckpoint(config, weights))
    await writeFile(join(folder, 'tokenizer.bin'), await readFile(join(tiny, 'tokenizer.bin')))
    const ids = join(root(), 'folder-prompt.txt')
    await writeFile(ids, '1 5 6 7 8 9 10 11')
    const commands = [
      ['generate', '--model', folder, '--prompt', 'the', '--max-tokens', '3', '--temperature', '0', '--json'],
      ['sparse', 'compare', '--model', folder, '--prompt-file', ids, '--methods', 'snapkv', '--json'],
      ['knockout', 'capabilities', '--model', folder],
    ]
    for (const argv of commands) {
      const io = captureOutput()
      const code = await main([...argv, '--backend', 'cpu'])
      expect(code, `${argv.slice(0, 2).join(' ')}: ${io.err()}`).toBe(0)
      if (argv[0] === 'generate') {
        expect(JSON.parse(io.out())).toMatchObject({ format: 'llama2c', tokenizer: join(folder, 'tokenizer.bin') })
      }
      vi.restoreAllMocks()
    }
  })

  it('--tokenizer tokenizer.json is read through @huggingface/tokenizers; --no-dummy-prefix reaches it', async () => {
    const file = join(root(), 'tokenizer.json')
    const pieces = ['<0>', '<1>', '<2>', '▁', 'a', 'b', ...Array.from({ length: 34 }, (_, i) => `p${i + 6}`)]
    const vocab = Object.fromEntries(pieces.map((piece, id) => [piece, id]))
    const json = {
      model: { type: 'BPE', vocab, merges: [] },
      normalizer: { type: 'Prepend', prepend: '▁' },
      decoder: { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
    }
    await writeFile(file, JSON.stringify(json))
    for (const [flag, promptIds] of [
      [[], [1, 3, 4, 5]],
      [['--no-dummy-prefix'], [1, 4, 5]],
    ] as const) {
      const io = captureOutput()
      const argv = ['generate', '--model', tiny, '--tokenizer', file, '--prompt', 'ab', ...flag]
      const code = await main([...argv, '--max-tokens', '2', '--temperature', '0', '--json', '--backend', 'cpu'])
      expect(code, io.err()).toBe(0)
      expect(JSON.parse(io.out())).toMatchObject({ tokenizer: file, promptIds })
      vi.restoreAllMocks()
    }
    await writeFile(file, JSON.stringify({ version: '1.0' }))
    const io = captureOutput()
    expect(await main(['generate', '--model', tiny, '--tokenizer', file, '--prompt', 'a', '--backend', 'cpu'])).toBe(2)
    expect(io.err()).toMatch(/tokenizer\.json: not a Hugging Face tokenizer\.json: it has no "model" object/)
  })

  describe('--attention METHOD sizes the method for the prompt, as sparse compare does', () => {
    let model: string
    const prompt = Array.from({ length: 48 }, (_, i) => 3 + ((i * 7) % 37)).join(',')
    beforeAll(async () => {
      const config = createConfig({ ...TINY_LLAMA, nCtx: 96, nLayers: 2, nHeads: 4, nKvHeads: 2 })
      const weights = randomWeights(config, 5)
      model = join(root(), 'context-96')
      await saveModelDirectory(model, { config, weights })
    })
    const run = async (
      extra: string[],
    ): Promise<{ code: number; summary: Record<string, unknown>; errors: string }> => {
      const io = captureOutput()
      const fixed = ['--prompt-ids', prompt, '--ids', '--ignore-eos', '--max-tokens', '6', '--temperature', '0']
      fixed.push('--backend', 'cpu')
      const code = await main(['generate', '--model', model, ...fixed, ...extra])
      const summary = code === 0 && extra.includes('--json') ? JSON.parse(io.out()) : {}
      const errors = io.err()
      vi.restoreAllMocks()
      return { code, summary, errors }
    }

    it('with default sizes every method skips pairs on a 48-token prompt (Quest: 1040 tokens unsized)', async () => {
      const methods = ['vertical-slash', 'flexprefill', 'block-sparse', 'snapkv', 'ada-snapkv', 'quest']
      methods.push('vertical-slash+quest')
      for (const method of methods) {
        const { code, summary, errors } = await run(['--attention', method, '--json'])
        expect(code, `${method}: ${errors}`).toBe(0)
        expect(summary.targetSparsity).toBe(0.8)
        expect(summary.attentionSparsity, method).toBeGreaterThan(0.05)
      }
    })

    it('--sparsity sets the target; size flags win; an unreachable target is warned about', async () => {
      const half = await run(['--attention', 'snapkv', '--sparsity', '0.5', '--json'])
      expect(half.summary.attentionConfig).toMatchObject({ capacity: 24 }) // floor((1 - 0.5) 48)
      expect(half.summary.warnings).toEqual([])
      // A small capacity fits the prompt-scaled local window and prefix, as in `sparse compare`; one below them not.
      const small = await run(['--attention', 'snapkv', '--capacity', '8', '--json'])
      expect(small.code, small.errors).toBe(0)
      expect(small.summary.attentionConfig).toMatchObject({ capacity: 8, local: 1, prefix: 4 })
      const tooSmall = await run(['--attention', 'snapkv', '--capacity', '6', '--local', '4'])
      expect(tooSmall.code).toBe(2)
      expect(tooSmall.errors).toMatch(/capacity: 6 must be greater than local \+ prefix \(4 \+ 4 = 8\)/)
      const given = await run(['--attention', 'quest', '--token-budget', '16', '--page-size', '8', '--json'])
      expect(given.summary.attentionConfig).toMatchObject({ tokenBudget: 16, pageSize: 8 })
      // The size given sets the sparsity: no warning about the default target it was not sized for (was one).
      expect(given.summary.warnings).toEqual([])
      const both = await run(['--attention', 'quest', '--token-budget', '16', '--sparsity', '0.97', '--json'])
      expect(both.summary.warnings).toEqual([
        expect.stringMatching(/^warning: quest does not reach target sparsity 0\.97/),
      ])
      const high = await run(['--attention', 'vertical-slash', '--sparsity', '0.97'])
      expect(high.code).toBe(0)
      expect(high.errors).toMatch(/attention vertical-slash: \d+\.\d% of causal query-key pairs skipped/)
      const warning = /warning: vertical-slash does not reach target sparsity 0\.97 at 48 tokens: achieved 0\.\d{3} /
      expect(high.errors).toMatch(warning)
    })

    it('--sparsity without --attention, or outside [0, 1), is a usage error', async () => {
      const alone = await run(['--sparsity', '0.5'])
      expect(alone.code).toBe(2)
      expect(alone.errors).toMatch(/--sparsity needs --attention METHOD/)
      const one = await run(['--attention', 'quest', '--sparsity', '1'])
      expect(one.code).toBe(2)
      expect(one.errors).toMatch(/--sparsity must be in \[0, 1\), got 1/)
    })
  })

  describe('bad input: one clear line, non-zero exit', () => {
    const expectFailure = async (args: string[], message: RegExp, exitCode = 2): Promise<void> => {
      const io = captureOutput()
      const code = await main(['generate', ...args])
      expect(code).toBe(exitCode)
      expect(io.logs).toEqual([])
      const lines = io.errors
        .flatMap((l) => l.split('\n'))
        .filter((l) => l.trim().length > 0 && !l.startsWith('(run with --help'))
      expect(lines, JSON.stringify(lines)).toHaveLength(1)
      expect(lines[0]).toMatch(message)
      vi.restoreAllMocks()
    }

    it('a missing model file', async () => {
      await expectFailure(
        ['--model', join(root(), 'nope.bin'), '--backend', 'cpu'],
        /attnlab: error \[INVALID_CHECKPOINT\]: .*nope\.bin: model not found/,
      )
    })

    it('a truncated llama2.c checkpoint', async () => {
      const file = join(root(), 'truncated.bin')
      const bytes = new Uint8Array(28 + 400)
      new DataView(bytes.buffer).setInt32(0, 16, true)
      ;[16, 24, 1, 2, 2, 40, 8].forEach((v, i) => {
        new DataView(bytes.buffer).setInt32(4 * i, v, true)
      })
      await writeFile(file, bytes)
      await expectFailure(
        ['--model', file, '--backend', 'cpu'],
        new RegExp(
          /\[INVALID_CHECKPOINT\]: .*truncated\.bin: file has 428 bytes but its header .* describes \d+: /.source +
            /\d+ bytes are missing/.source,
        ),
      )
    })

    it('a directory without config.json', async () => {
      const dir = join(root(), 'empty-dir')
      await mkdir(dir, { recursive: true })
      await expectFailure(
        ['--model', dir, '--backend', 'cpu'],
        /\[INVALID_CHECKPOINT\]: .*empty-dir: not a model directory: it has no config\.json/,
      )
    })

    it('an unsupported architecture', async () => {
      const dir = join(root(), 'bert')
      await mkdir(dir, { recursive: true })
      await writeFile(join(dir, 'config.json'), JSON.stringify({ model_type: 'bert' }))
      await expectFailure(['--model', dir, '--backend', 'cpu'], /\[UNSUPPORTED\]: .*model_type "bert"/)
    })

    it('a tokenizer that does not match the model', async () => {
      const file = join(root(), 'small-tokenizer.bin')
      await writeFile(file, Llama2cTokenizer.fromPieces(['a', 'b', 'c'], [0, 0, 0]).serialize())
      await expectFailure(
        ['--model', tiny, '--tokenizer', file, '--backend', 'cpu'],
        /holds 3 tokens but the model's vocabulary has 40/,
      )
    })

    it('text asked without a tokenizer', async () => {
      const dir = join(root(), 'no-tokenizer')
      await mkdir(dir, { recursive: true })
      for (const name of ['config.json', 'model.safetensors'])
        await writeFile(join(dir, name), await readFile(join(tiny, name)))
      await expectFailure(['--model', dir, '--prompt', 'hi', '--backend', 'cpu'], /no tokenizer: none was given/)
      await writeFile(join(dir, 'tokenizer.model'), 'x')
      await expectFailure(
        ['--model', dir, '--prompt', 'hi', '--backend', 'cpu'],
        /\(tokenizer\.model found, but attnlab reads tokenizer\.bin and tokenizer\.json files; convert/,
      )
      const io = captureOutput()
      expect(
        await main([
          'generate',
          '--model',
          dir,
          '--prompt-ids',
          '1,2',
          '--ids',
          '--max-tokens',
          '3',
          '--backend',
          'cpu',
        ]),
      ).toBe(0)
      expect(io.logs[0]).toMatch(/^\d+( \d+)*$|^$/)
    })

    it('bad flags stop before any work', async () => {
      await expectFailure(
        ['--model', tiny, '--prompt', 'a', '--prompt-ids', '1'],
        /give --prompt or --prompt-ids, not both/,
      )
      await expectFailure(['--model', tiny, '--top-p', '0'], /--top-p must be in \(0, 1\], got 0/)
      await expectFailure(['--model', tiny, '--max-tokens', '-1'], /--max-tokens must be >= 0, got -1/)
      await expectFailure(['--model', tiny, '--max-tokens', '3', '--steps', '3'], /cannot be used with option '--steps/)
      await expectFailure(['--model', tiny, '--temperature', 'hot'], /--temperature must be a number, got 'hot'/)
      await expectFailure(['--model', tiny, '--prompt-ids', '1,x'], /--prompt-ids must be token ids/)
      await expectFailure(['--prompt', 'x'], /required option '--model <path>' not specified/)
      await expectFailure(
        ['--model', tiny, '--page-size', '8'],
        /attention-method flags need --attention METHOD \(got --page-size\)/,
      )
      await expectFailure(['--model', tiny, '--attention', 'bogus'], /unknown attention method 'bogus'/)
      await expectFailure(
        ['--model', tiny, '--attention', 'quest', '--block-top-k', '4'],
        /--block-top-k does not apply to quest/,
      )
    })

    it('a prompt id outside the vocabulary or longer than the context', async () => {
      await expectFailure(
        ['--model', tiny, '--prompt-ids', '1,2,99', '--ids', '--backend', 'cpu'],
        /--prompt-ids id 99 \(number 3 of 3\) is out of range: the model's vocabulary has 40 tokens \(ids 0 \.\. 39\)/,
      )
      await expectFailure(
        ['--model', tiny, '--prompt-ids', Array.from({ length: 30 }, () => '1').join(','), '--ids', '--backend', 'cpu'],
        /the prompt has 30 tokens but the model's context is 24/,
      )
    })
  })
})

import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, testBackends } from '@attnlab/core/testing'
import { expect, it } from 'vitest'
import { REPO_ROOT } from '../__fixtures__/import/aidreams.ts'
import reference from '../__fixtures__/import/greedy-reference.json' with { type: 'json' }
import { generate } from '../generate.ts'
import { loadModel } from './load.ts'

// Greedy ids of the shared stories260K (llama2.c) and tinystories656K (Hugging Face) models against
// tools/import/greedy_reference.py: an independent numpy forward pass (float64, no KV cache) from the weights.
const SHARED = join(REPO_ROOT, '../shared/models')
const HAVE = reference.cases.every((c) => existsSync(join(SHARED, c.path)))
if (!HAVE)
  console.warn(`[attnlab] ${SHARED} lacks stories260K or tinystories656K: the greedy reference test is skipped`)
const PYTHON = '/usr/bin/python3'
const SCRIPT = join(REPO_ROOT, 'tools/import/greedy_reference.py')

function hasNumpy(): boolean {
  if (!existsSync(PYTHON)) return false
  try {
    execFileSync(PYTHON, ['-c', 'import numpy'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

// Decoding is a loop of KV-cached steps, covered per mode by generate.test.ts; here one mode decodes (stock wasm
// when present) and the others check one forward pass: the argmax of each position is the next reference id.
const DECODE_MODE = testBackends().includes('wasm') ? 'wasm' : testBackends()[0]

describeWithBackends('greedy generation on the shared real models matches the numpy reference', (_, mode) => {
  for (const testCase of reference.cases) {
    // stories260K is checked in both llama2.c formats: version 0 (the reference's file) and version 1.
    const paths =
      testCase.model === 'stories260K' ? [testCase.path, testCase.path.replace('.bin', '_v1.bin')] : [testCase.path]
    for (const path of paths) {
      const title = `${path}, ${testCase.prompt.length}-token prompt: ${testCase.ids.length} greedy ids`
      it.skipIf(!HAVE)(title, async () => {
        const { model } = await loadModel(join(SHARED, path), { tokenizer: false })
        try {
          const before = tf.memory().numTensors
          if (mode === DECODE_MODE) {
            const { tokens } = await generate(model, testCase.prompt, {
              maxTokens: testCase.ids.length,
              temperature: 0,
            })
            expect(tokens[0]).toEqual(testCase.ids)
          } else {
            const all = [...testCase.prompt, ...testCase.ids]
            const predicted = tf.tidy(() => tf.argMax(model.forward([all.slice(0, -1)]), -1))
            const ids = ((await predicted.array()) as number[][])[0] as number[]
            predicted.dispose()
            expect(ids.slice(testCase.prompt.length - 1)).toEqual(testCase.ids)
          }
          expect(tf.memory().numTensors).toBe(before)
        } finally {
          model.dispose()
        }
      })
    }
  }
})

const NUMPY = HAVE && hasNumpy()
if (!NUMPY) console.log(`[attnlab] ${PYTHON} with numpy is missing: the live greedy_reference.py run is skipped`)

it.skipIf(!NUMPY)(
  'the committed reference is what tools/import/greedy_reference.py prints',
  () => {
    const [first] = reference.cases.filter((c) => c.model === 'tinystories656K').slice(-1)
    if (first === undefined) throw new Error('no tinystories656K case in the fixture')
    const args = [SCRIPT, join(SHARED, first.path), first.prompt.join(','), String(first.ids.length)]
    const out = JSON.parse(execFileSync(PYTHON, args, { encoding: 'utf8' })) as { ids: number[] }
    expect(out.ids).toEqual(first.ids)
  },
  120_000,
)

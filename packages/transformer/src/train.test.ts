import * as tf from '@tensorflow/tfjs-core'
import { AttnlabError, ConfigError, NonFiniteError, Rng, TooLargeError } from '@attnlab/core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { NiahTokensTask, SparseMarkovTask } from '@attnlab/markov'
import { expect, it, vi } from 'vitest'
import { createConfig, presetConfig } from './config.ts'
import { createTransformer } from './model.ts'
import { Trainer, train, type EvalRecord, type StepRecord, type TrainerState } from './train.ts'

// A small sparse-markov task: d = 8, spans [1, 1], 6 generated tokens (sequences of 8).
const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 })
const minimalConfig = createConfig({ architecture: 'minimal', dVocab: 8, nCtx: 7, nHeads: 2, queryInit: 1e-3 })
const gptConfig = createConfig({
  architecture: 'gpt',
  dVocab: 8,
  nCtx: 7,
  dModel: 16,
  nLayers: 1,
  nHeads: 2,
  dHead: 8,
  dMlp: 32,
  dropout: 0.1,
})

describeWithBackends('train', (backend) => {
  it('lowers the loss of the minimal and gpt models on a task, with evaluations and analysis metrics', async () => {
    for (const config of [minimalConfig, gptConfig]) {
      const model = createTransformer(config)
      const evals: EvalRecord[] = []
      const result = await train(model, task, {
        steps: 30,
        batchSize: 48,
        lr: config.architecture === 'minimal' ? 0.08 : 0.01,
        evalEvery: 15,
        validation: 96,
        onEval: (r) => void evals.push(r),
      })
      expect(result.steps).toBe(30)
      expect(result.losses.length).toBe(30)
      expect(result.finalValidationLoss).toBeLessThan(Math.log(8) - 0.2)
      expect(evals.map((e) => e.step)).toEqual([15, 30])
      const metrics = evals[1]!.metrics!
      expect(metrics.attentionEntropy.length).toBe(config.nLayers)
      expect(metrics.offsetGroupMass![0]!.length).toBe(config.nHeads)
      expect(metrics.offsetGroupNames!.length).toBe(2)
      expect(metrics.teacherKL!.length).toBe(2)
      expect(metrics.perPositionLoss.length).toBe(7)
      expect(metrics.perPositionLoss[0]).toBeNull() // token 1 is burn-in (not scored)
      if (config.architecture === 'minimal') expect(metrics.valueAlignment!.cosine.length).toBe(2)
      expect(result.tokensPerSecond).toBeGreaterThan(0)
      expect(result.tokens).toBe(30 * 48 * 7)
      model.dispose()
    }
  })

  if (backend === 'cpu') {
    it('is deterministic on cpu: the same seed gives bit-identical losses and weights', async () => {
      const runOnce = async (seed: number): Promise<{ losses: readonly number[]; w: Float32Array }> => {
        const model = createTransformer(gptConfig)
        const result = await train(model, task, {
          steps: 8,
          batchSize: 16,
          lr: 0.01,
          seed,
          validation: 32,
          analysis: false,
        })
        const w = (await model.getWeightData()).get('blocks.0.attn.W_Q')!.data
        model.dispose()
        return { losses: result.losses, w }
      }
      const a = await runOnce(1)
      const b = await runOnce(1)
      const c = await runOnce(2)
      expect(a.losses).toEqual(b.losses)
      expect(a.w).toEqual(b.w)
      expect(a.losses).not.toEqual(c.losses)
    })

    it('resumes exactly: 6 + 6 steps equal 12 uninterrupted steps, for a task and a finite dataset', async () => {
      const dataset = task.sample(48, Rng.fromSeed(3))
      const validation = task.sample(16, Rng.fromSeed(4))
      for (const source of [task, dataset]) {
        for (const optimizer of [{ kind: 'adamw' as const }, { kind: 'sgd' as const, momentum: 0.9 }]) {
          const options = {
            steps: 12,
            batchSize: 16,
            lr: 0.01,
            validation: source === task ? 32 : validation,
            analysis: false as const,
            optimizer,
            schedule: { kind: 'warmup-cosine' as const, warmupSteps: 3 },
          }
          const full = createTransformer(gptConfig)
          const fullResult = await train(full, source, options)
          const fullWeights = await full.getWeightData()
          full.dispose()
          const first = createTransformer(gptConfig)
          let saved: TrainerState | undefined
          const controller = new AbortController()
          const firstResult = await train(first, source, {
            ...options,
            onStep: (r) => {
              if (r.step === 6) controller.abort()
            },
            signal: controller.signal,
            onCheckpoint: (state) => {
              saved = state
            },
          })
          expect(firstResult.stopped).toBe(true)
          expect(firstResult.steps).toBe(6)
          expect(saved!.step).toBe(6)
          // A fresh model with the saved weights continues.
          const weights = await first.getWeightData()
          first.dispose()
          const second = createTransformer(gptConfig)
          second.setWeights(weights)
          const secondResult = await train(second, source, { ...options, resume: saved! })
          expect([...firstResult.losses, ...secondResult.losses]).toEqual(fullResult.losses)
          const resumedWeights = await second.getWeightData()
          for (const [name, w] of fullWeights) expect(resumedWeights.get(name)!.data, name).toEqual(w.data)
          expect(secondResult.tokens).toBe(fullResult.tokens)
          second.dispose()
        }
      }
    })

    it('resumes between two evaluations: every evaluation and finalTrainLoss bit for bit', async () => {
      const options = { steps: 12, batchSize: 16, lr: 0.01, evalEvery: 4, validation: 32, analysis: false as const }
      // The uninterrupted run, with its state and weights after every step (what a kill at that step leaves).
      const full = createTransformer(gptConfig)
      const fullEvals: EvalRecord[] = []
      const saved = new Map<number, { state: TrainerState; weights: Awaited<ReturnType<typeof full.getWeightData>> }>()
      const fullResult = await train(full, task, {
        ...options,
        checkpointEvery: 1,
        onEval: (r) => void fullEvals.push(r),
        onCheckpoint: async (state) => {
          saved.set(state.step, { state, weights: await full.getWeightData() })
        },
      })
      full.dispose()
      expect(fullEvals.map((r) => r.step)).toEqual([4, 8, 12])
      expect(fullEvals.every((r) => Number.isFinite(r.trainLoss))).toBe(true)
      const resume = async (state: TrainerState, step: number) => {
        const model = createTransformer(gptConfig)
        model.setWeights((saved.get(step) as { weights: Map<string, { shape: number[]; data: Float32Array }> }).weights)
        const evals: EvalRecord[] = []
        const result = await train(model, task, { ...options, resume: state, onEval: (r) => void evals.push(r) })
        model.dispose()
        return { evals, result }
      }
      for (const step of [1, 3, 5, 6, 7, 9, 11]) {
        const { state } = saved.get(step) as { state: TrainerState }
        expect(state.sinceEval?.steps, `step ${step}`).toBe(step % 4)
        // A kill at `step` loses nothing after it: the evaluations before it are the run's own.
        const { evals, result } = await resume(state, step)
        const records = [...fullEvals.filter((r) => r.step <= step), ...evals]
        expect(records, `resumed at step ${step}`).toEqual(fullEvals)
        expect(result.finalTrainLoss, `resumed at step ${step}`).toBe(fullResult.finalTrainLoss)
      }
      // A state from before sinceEval / recentLosses existed still resumes: its first evaluation's training loss
      // covers only the steps since the resume (3 of the 4 at step 7 -> 8), finalTrainLoss only this session.
      const { sinceEval: _since, recentLosses: _recent, ...old } = (saved.get(5) as { state: TrainerState }).state
      const { evals, result } = await resume(old, 5)
      const resumedLosses = result.losses
      expect(evals.map((r) => r.step)).toEqual([8, 12])
      expect(evals[0]!.trainLoss).toBe(resumedLosses.slice(0, 3).reduce((a, b) => a + b, 0) / 3)
      expect(evals[1]).toEqual(fullEvals[2])
      expect(result.finalTrainLoss).toBe(resumedLosses.slice(-7).reduce((a, b) => a + b, 0) / 7)
      // A malformed one is refused by name.
      const model = createTransformer(gptConfig)
      const bad = (saved.get(5) as { state: TrainerState }).state
      expect(
        () => new Trainer(model, task, { ...options, resume: { ...bad, sinceEval: { lossSum: 1, steps: 6 } } }),
      ).toThrow(/sinceEval .* \[0, 5\]/)
      expect(
        () => new Trainer(model, task, { ...options, resume: { ...bad, recentLosses: [Number.NaN] as number[] } }),
      ).toThrow(/recentLosses/)
      // Losses are cross-entropies: a negative one, or a sum without steps, would be reported as the run's loss.
      expect(
        () => new Trainer(model, task, { ...options, resume: { ...bad, sinceEval: { lossSum: -5, steps: 1 } } }),
      ).toThrow(/sinceEval .* >= 0/)
      expect(
        () => new Trainer(model, task, { ...options, resume: { ...bad, sinceEval: { lossSum: 5, steps: 0 } } }),
      ).toThrow(/sinceEval .*\(0 when steps is 0\)/)
      expect(() => new Trainer(model, task, { ...options, resume: { ...bad, recentLosses: [-1, 0.3] } })).toThrow(
        /recentLosses .* >= 0/,
      )
      model.dispose()
    })
  }

  it('throws NonFiniteError naming the step and does not apply the update', async () => {
    const model = createTransformer(gptConfig)
    const w = model.getWeights().get('blocks.0.mlp.W_in')!
    let seen = 0
    const trainer = new Trainer(model, task, {
      steps: 10,
      batchSize: 8,
      lr: 0.01,
      validation: 8,
      analysis: false,
      onStep: (r: StepRecord) => {
        seen = r.step
        if (r.step === 2) w.assign(tf.fill(w.shape as [number, number], Number.NaN) as tf.Tensor2D)
      },
    })
    await expect(trainer.run()).rejects.toThrow(NonFiniteError)
    await expect(
      train(model, task, { steps: 1, batchSize: 8, lr: 0.01, validation: 8, analysis: false }),
    ).rejects.toThrow(/training diverged at step 1: loss is NaN/)
    expect(seen).toBe(2)
    trainer.dispose()
    model.dispose()
  })

  it('turns a WebAssembly trap in a step (the wasm heap running out) into a TooLargeError with the sizes', async () => {
    // (the test `lib` has no WebAssembly types; Node has the class)
    const { RuntimeError } = (globalThis as unknown as { WebAssembly: { RuntimeError: new (m: string) => Error } })
      .WebAssembly
    const model = createTransformer(gptConfig)
    const forward = model.forwardTrusted.bind(model)
    let calls = 0
    // the trap a tfjs wasm kernel raises when its heap is exhausted, from the second forward on
    const spy = vi.spyOn(model, 'forwardTrusted').mockImplementation((...args) => {
      calls += 1
      if (calls >= 2) throw new RuntimeError('memory access out of bounds')
      return forward(...args)
    })
    const trainer = new Trainer(model, task, { steps: 5, batchSize: 8, lr: 0.01, validation: 8, analysis: false })
    const error = await trainer.run().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TooLargeError)
    expect((error as Error).message).toMatch(
      /^training step 2 stopped inside the \w+ backend \(memory access out of bounds\), most likely because its heap/,
    )
    expect((error as Error).message).toContain(`[batch, nHeads, nCtx, nCtx] = [8, ${gptConfig.nHeads}, `)
    expect((error as Error).cause).toBeInstanceOf(RuntimeError)
    // any other error passes through unchanged
    spy.mockImplementation(() => {
      throw new RangeError('not a trap')
    })
    await expect(trainer.validationLoss()).rejects.toThrow(RangeError)
    spy.mockRestore()
    trainer.dispose()
    model.dispose()
  })

  it('has no tensor leaks across 100 training steps (with evaluations, dropout and metrics)', async () => {
    const model = createTransformer(gptConfig)
    const trainer = new Trainer(model, task, { steps: 3, batchSize: 8, lr: 0.01, validation: 16, evalEvery: 50 })
    await trainer.run() // warm up (kernels, gradients, caches)
    trainer.dispose()
    await expectNoLeaks(async () => {
      const again = new Trainer(model, task, { steps: 100, batchSize: 8, lr: 0.01, validation: 16, evalEvery: 50 })
      await again.run()
      again.dispose()
    })
    model.dispose()
  })

  it('resumes a checkpoint written before a task gained an option that is off by default', async () => {
    const niah = new NiahTokensTask({ nCtx: 16, needles: 2, keyTokens: 8, valueTokens: 8 })
    const model = createTransformer(
      createConfig({ architecture: 'minimal', dVocab: niah.vocabSize, nCtx: 16, nHeads: 2, queryInit: 1e-3 }),
    )
    const base = { steps: 2, batchSize: 4, lr: 0.1, validation: 4 }
    const trainer = new Trainer(model, niah, base)
    const state = await trainer.getState()
    trainer.dispose()
    // An older checkpoint's source has no questionFirst: read as the default, false.
    const { questionFirst, ...older } = state.source as Record<string, unknown>
    expect(questionFirst).toBe(false)
    new Trainer(model, niah, { ...base, resume: { ...state, source: older } }).dispose()
    // A run that turns the option on is not the checkpoint's run.
    const on = new NiahTokensTask({ nCtx: 16, needles: 2, keyTokens: 8, valueTokens: 8, questionFirst: true })
    expect(() => new Trainer(model, on, { ...base, resume: { ...state, source: older } })).toThrow(/trained on/)
    // Any other difference still refuses.
    expect(() => new Trainer(model, niah, { ...base, resume: { ...state, source: { ...older, needles: 3 } } })).toThrow(
      /trained on/,
    )
    model.dispose()
  })

  it('validates options, data and resume states', async () => {
    const model = createTransformer(minimalConfig)
    const base = { steps: 2, batchSize: 4, lr: 0.1, validation: 4 }
    expect(() => new Trainer(model, task, { ...base, steps: -1 })).toThrow(ConfigError)
    expect(() => new Trainer(model, task, { ...base, batchSize: 0 })).toThrow(/batchSize/)
    expect(() => new Trainer(model, task, { ...base, lr: 0 })).toThrow(/lr/)
    expect(() => new Trainer(model, task, { ...base, gradClip: 0 })).toThrow(/gradClip/)
    expect(() => new Trainer(model, task, { ...base, evalEvery: 1.5 })).toThrow(/evalEvery/)
    // The schema's messages: the value and what was expected.
    expect(() => new Trainer(model, task, { ...base, steps: -1 })).toThrow(
      /^Invalid steps: must be an integer >= 0, got -1$/,
    )
    expect(() => new Trainer(model, task, { ...base, lr: 0 })).toThrow(/^Invalid lr: must be > 0, got 0$/)
    expect(() => new Trainer(model, task, { ...base, gradClip: Number.NaN })).toThrow(
      /^Invalid gradClip: must be > 0 \(Infinity disables clipping\), got NaN$/,
    )
    expect(() => new Trainer(model, task, { ...base, evalBatchSize: 0 })).toThrow(
      /^Invalid evalBatchSize: must be an integer >= 1, got 0$/,
    )
    expect(() => new Trainer(model, task, { ...base, analysis: { size: 0 } })).toThrow(
      /^Invalid size: must be an integer >= 1, got 0$/,
    )
    expect(() => new Trainer(model, task, { ...base, steps: undefined } as never)).toThrow(
      /^Invalid steps: must be an integer >= 0, got undefined$/,
    )
    new Trainer(model, task, { ...base, gradClip: Infinity }).dispose()
    expect(() => new Trainer(model, new SparseMarkovTask({ vocabSize: 9, spans: [1, 1], genLen: 6 }), base)).toThrow(
      /9 tokens but the model's dVocab is 8/,
    )
    expect(() => new Trainer(model, new SparseMarkovTask({ vocabSize: 8, spans: [1, 1], genLen: 7 }), base)).toThrow(
      /nCtx >= 8/,
    )
    const dataset = task.sample(8, Rng.fromSeed(1))
    expect(() => new Trainer(model, dataset, base)).toThrow(/explicit validation dataset/)
    expect(() => new Trainer(model, dataset, { ...base, batchSize: 9, validation: dataset })).toThrow(
      /exceeds the dataset's 8/,
    )
    const bad = { ...dataset, tokens: dataset.tokens.map((t, i) => (i === 3 ? 8 : t)) }
    expect(() => new Trainer(model, bad, { ...base, validation: dataset })).toThrow(/token 8 at sequence 0, position 3/)
    expect(
      () => new Trainer(model, { ...dataset, tokens: new Int32Array(3) }, { ...base, validation: dataset }),
    ).toThrow(ConfigError)
    // resume states that do not fit
    const trainer = new Trainer(model, task, base)
    const state = await trainer.getState()
    trainer.dispose()
    expect(() => new Trainer(model, task, { ...base, batchSize: 5, resume: state })).toThrow(/batch size 4, this one 5/)
    expect(() => new Trainer(model, task, { ...base, seed: 9, resume: state })).toThrow(/seed/)
    expect(() => new Trainer(model, dataset, { ...base, validation: dataset, resume: state })).toThrow(/trained on/)
    expect(() => new Trainer(model, task, { ...base, resume: { ...state, step: 3 } })).toThrow(
      /past the requested 2 steps/,
    )
    expect(() => new Trainer(model, task, { ...base, resume: { ...state, version: 2 as 1 } })).toThrow(AttnlabError)
    expect(() => new Trainer(model, task, { ...base, resume: { ...state, dataRng: { key: 1 } as never } })).toThrow(
      /random-stream/,
    )
    model.dispose()
  })

  it(
    'rejects misspelled option names (train, analysis, optimizer, schedule) naming them and listing the allowed ' +
      'ones',
    async () => {
      const model = createTransformer(minimalConfig)
      const base = { steps: 2, batchSize: 4, lr: 0.1, validation: 4 }
      await expect(train(model, task, { ...base, evalEvey: 1 } as never)).rejects.toThrow(
        new RegExp(
          /Invalid evalEvey: is not a train parameter \(did you mean 'evalEvery'\?\); expected one of steps, /.source +
            /batchSize, lr, optimizer, .*resume/.source,
        ),
      )
      await expect(train(model, task, { ...base, optimiser: { kind: 'sgd' } } as never)).rejects.toMatchObject({
        code: 'INVALID_CONFIG',
        parameter: 'optimiser',
      })
      await expect(train(model, task, { ...base, learningRate: 0.1 } as never)).rejects.toThrow(
        /Invalid learningRate: is not a train parameter; expected one of /,
      )
      expect(() => new Trainer(model, task, { ...base, analysis: { sise: 4 } } as never)).toThrow(
        /^Invalid sise: is not a train analysis parameter \(did you mean 'size'\?\); expected one of size, teacher, /,
      )
      expect(() => new Trainer(model, task, { ...base, optimizer: { kind: 'sgd', momentun: 0.9 } } as never)).toThrow(
        /Invalid momentun: is not a sgd optimizer parameter \(did you mean 'momentum'\?\)/,
      )
      expect(() => new Trainer(model, task, { ...base, optimizer: { kind: 'adamw', beta: 0.9 } } as never)).toThrow(
        /Invalid beta: is not an adamw optimizer parameter .*expected one of kind, beta1, beta2/,
      )
      expect(
        () => new Trainer(model, task, { ...base, schedule: { kind: 'warmup-cosine', warmup: 5 } } as never),
      ).toThrow(/Invalid warmup: is not a warmup-cosine schedule parameter; expected one of kind, warmupSteps/)
      expect(() => new Trainer(model, task, { ...base, schedule: { kind: 'constant', lr: 1 } } as never)).toThrow(
        /Invalid lr: is not a constant schedule parameter; expected one of kind/,
      )
      model.dispose()
    },
  )

  it('reduce-on-plateau lowers the learning rate from validation losses', async () => {
    const model = createTransformer(minimalConfig)
    const lrs: number[] = []
    await train(model, task, {
      steps: 12,
      batchSize: 8,
      lr: 0.5,
      validation: 8,
      evalEvery: 1,
      analysis: false,
      schedule: { kind: 'reduce-on-plateau', patience: 0, factor: 0.5, threshold: 0.5 },
      onEval: (r) => void lrs.push(r.lr),
    })
    expect(Math.min(...lrs)).toBeLessThan(0.5)
    model.dispose()
    void presetConfig
  })
})

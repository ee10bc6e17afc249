import { describe, expect, it } from 'vitest'
import { ConfigError } from './errors.ts'
import { Rng } from './rng.ts'
import type { Task, TokenBatch } from './task.ts'
import { TaskRegistry, UnknownTaskKindError, type TaskFamily } from './task-registry.ts'

/** A task that repeats one token; enough to exercise the registry. */
function constantTask(config: Readonly<Record<string, unknown>>): Task {
  const token = typeof config.token === 'number' ? config.token : 0
  return {
    kind: 'constant',
    vocabSize: token + 1,
    seqLength: 3,
    sample: (batchSize: number, _rng: Rng): TokenBatch => ({
      tokens: new Int32Array(batchSize * 3).fill(token),
      lossMask: new Uint8Array(batchSize * 3).fill(1),
      batchSize,
      seqLength: 3,
    }),
    describe: () => ({ kind: 'constant', token }),
  }
}

const constant: TaskFamily = { kind: 'constant', create: constantTask }

describe('TaskRegistry', () => {
  it('builds a registered kind from a kind or a description, and round-trips describe()', () => {
    const registry = new TaskRegistry([constant])
    expect(registry.kinds()).toEqual(['constant'])
    expect(registry.has('constant')).toBe(true)
    expect(registry.create('constant').describe()).toEqual({ kind: 'constant', token: 0 })
    const task = registry.create({ kind: 'constant', token: 2 })
    expect(Array.from(task.sample(1, Rng.fromSeed(0)).tokens)).toEqual([2, 2, 2])
    expect(registry.create(JSON.parse(JSON.stringify(task.describe()))).describe()).toEqual(task.describe())
  })

  it('passes itself to the factory, for families whose configuration holds descriptions', () => {
    const registry = new TaskRegistry([constant])
    const wrapper: TaskFamily = {
      kind: 'wrapper',
      create: (config, inner) => inner.create(config.inner as Readonly<Record<string, unknown>>),
    }
    registry.register(wrapper)
    expect(registry.create({ kind: 'wrapper', inner: { kind: 'constant', token: 1 } }).vocabSize).toBe(2)
  })

  it('registers the same family twice as a no-op and rejects a second family for a kind', () => {
    const registry = new TaskRegistry([constant])
    expect(registry.register(constant).kinds()).toEqual(['constant'])
    expect(() => registry.register({ kind: 'constant', create: constantTask })).toThrow(/already registered/)
    expect(() => registry.register({ kind: '', create: constantTask })).toThrow(ConfigError)
    expect(() => registry.register({ kind: 'x' } as never)).toThrow(/no create function/)
  })

  it('rejects an unknown kind with the registered kinds and the closest one', () => {
    const registry = new TaskRegistry([constant, { kind: 'mixture', create: constantTask }])
    let error: unknown
    try {
      registry.create({ kind: 'mixtur' })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(UnknownTaskKindError)
    expect(error).toBeInstanceOf(ConfigError)
    const unknown = error as UnknownTaskKindError
    expect(unknown.parameter).toBe('kind')
    expect(unknown.code).toBe('INVALID_CONFIG')
    expect(unknown.registered).toEqual(['constant', 'mixture'])
    expect(unknown.message).toBe(
      "Invalid kind: got 'mixtur' (did you mean 'mixture'?); expected one of constant, mixture",
    )
    expect(() => registry.create({ token: 1 })).toThrow(/got undefined; expected one of constant, mixture/)
    expect(() => new TaskRegistry().create('constant')).toThrow(/no task family registered/)
  })

  it('rejects a value that is neither a kind nor a description', () => {
    const registry = new TaskRegistry([constant])
    for (const bad of [null, 42, [], undefined]) {
      expect(() => registry.create(bad as never)).toThrow(/expected a task kind \(constant\) or a \{ kind/)
    }
  })
})

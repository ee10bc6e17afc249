/**
 * Checks of call arguments (a position, a batch size, a keepSpans) shared by the tasks; the task
 * configurations themselves are declared by their schemas (`@attnlab/core/schema`). Every check
 * throws a `ConfigError` (`@attnlab/core`) naming the parameter, the offending value and the
 * allowed range.
 *
 * @module
 */
import { ConfigError, describeRange } from '@attnlab/core'
import type { TokenBatch } from './task.ts'

/** Formats a value for an error message (arrays and objects as JSON). */
export function show(value: unknown): string {
  if (typeof value === 'string') return `'${value}'`
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined)
    return String(value)
  try {
    return JSON.stringify(value)
  } catch {
    return String(value)
  }
}

/** Checks that `value` is an integer in `[min, max]` and returns it. */
export function checkInteger(parameter: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    // core's one range wording: "must be an integer >= 1, got 0"
    const range = describeRange({ min, max, integer: true })
    throw new ConfigError(parameter, `must be ${range}, got ${show(value)}`, { value, min, max })
  }
  return value
}

/** Checks that `value` is a boolean and returns it. */
export function checkBoolean(parameter: string, value: unknown): boolean {
  if (typeof value !== 'boolean')
    throw new ConfigError(parameter, `got ${show(value)}; expected true or false`, { value })
  return value
}

/** Checks that `value` is a non-empty array and returns it. */
export function checkArray(parameter: string, value: unknown, minLength = 1, maxLength = Infinity): readonly unknown[] {
  if (!Array.isArray(value) || value.length < minLength || value.length > maxLength) {
    const range = maxLength === Infinity ? `at least ${minLength}` : `${minLength} to ${maxLength}`
    throw new ConfigError(parameter, `got ${show(value)}; expected an array with ${range} entries`, { value })
  }
  return value
}

/** Checks the arguments of `Task.sample`. */
export function checkBatchSize(batchSize: unknown): number {
  return checkInteger('batchSize', batchSize, 1, 1 << 24)
}

/**
 * Allocates a `[batchSize, seqLength]` batch and fills it one sequence at a time with
 * `fill(tokens, lossMask, offset)` (`offset = b * seqLength`), in order, so the rng stream a task
 * draws from is consumed sequence by sequence.
 *
 * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize`
 */
export function sampleBatch(
  batchSize: number,
  seqLength: number,
  fill: (tokens: Int32Array, lossMask: Uint8Array, offset: number) => void,
): TokenBatch {
  checkBatchSize(batchSize)
  const tokens = new Int32Array(batchSize * seqLength)
  const lossMask = new Uint8Array(batchSize * seqLength)
  for (let b = 0; b < batchSize; b++) fill(tokens, lossMask, b * seqLength)
  return { tokens, lossMask, batchSize, seqLength }
}

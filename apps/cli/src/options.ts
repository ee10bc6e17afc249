/**
 * Shared flag parsers and the backend flag. Every parser throws a {@link UsageError} naming the
 * flag and what was expected, so bad input stops before any work.
 */
import { InvalidArgumentError, Option } from 'commander'
import { BACKEND_NAMES, defaultBackend, useBackend, type BackendName } from '@attnlab/core'

/** Parses an integer flag within [min, max]. */
export function intParser(flag: string, min = -Infinity, max = Infinity): (value: string) => number {
  return (value: string) => {
    const n = Number(value)
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) {
      throw new InvalidArgumentError(`${flag} must be an integer, got '${value}'`)
    }
    if (n < min || n > max) throw new InvalidArgumentError(`${flag} must be in [${min}, ${max}], got ${n}`)
    return n
  }
}

/** Parses a finite number flag within [min, max]. */
export function numberParser(flag: string, min = -Infinity, max = Infinity): (value: string) => number {
  return (value: string) => {
    const n = Number(value)
    if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`${flag} must be a number, got '${value}'`)
    if (n < min || n > max) throw new InvalidArgumentError(`${flag} must be in [${min}, ${max}], got ${n}`)
    return n
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
    if (bad !== undefined) throw new InvalidArgumentError(`${flag} values must be >= ${min}, got ${bad}`)
    return numbers
  }
}

/** Parses a comma-separated list of numbers. */
export function numberListParser(flag: string): (value: string) => number[] {
  return (value: string) => {
    const numbers = value.split(',').map((s) => Number(s.trim()))
    if (numbers.length === 0 || numbers.some((n) => !Number.isFinite(n))) {
      throw new InvalidArgumentError(`${flag} must be a comma-separated list of numbers, got '${value}'`)
    }
    return numbers
  }
}

/** The `--backend` option, shared by every command that computes with tensors. */
export function backendOption(): Option {
  return new Option('--backend <name>', 'tensor backend (default: the fastest available here)').choices([
    ...BACKEND_NAMES,
  ])
}

/** Activates the requested backend, or the default one. Returns its name. */
export async function activateBackend(name: string | undefined): Promise<BackendName> {
  const chosen = (name as BackendName | undefined) ?? (await defaultBackend())
  return useBackend(chosen)
}

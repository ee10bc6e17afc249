/**
 * How the CLI reports failures: one clear line on stderr and a non-zero exit code.
 * Exit codes: 0 ok, 1 failure while working, 2 bad usage (flags, input files), 128 + the signal's
 * number when a stop signal interrupted the command (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
 */
import { AttnlabError } from '@attnlab/core'
import { exitCodeForSignal, stopSignalReceived } from './signals.ts'

/** A usage error detected by the CLI itself (bad flag value, missing file). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'UsageError'
  }
}

const USAGE_CODES = new Set([
  'INVALID_CONFIG',
  'INVALID_ARGUMENT',
  'SHAPE_MISMATCH',
  'INVALID_SAFETENSORS',
  'INVALID_CHECKPOINT',
  'UNSUPPORTED',
  'BACKEND_UNAVAILABLE',
  'TOO_LARGE',
])

/** The exit code for an error thrown by a command. */
export function exitCodeFor(error: unknown): number {
  if (error instanceof UsageError) return 2
  if (error instanceof AttnlabError) {
    if (error.code === 'INTERRUPTED') return exitCodeForSignal(stopSignalReceived() ?? 'SIGINT')
    return USAGE_CODES.has(error.code) ? 2 : 1
  }
  return 1
}

/** The one line printed for an error. */
export function describeError(error: unknown): string {
  if (error instanceof AttnlabError) return `attnlab: error [${error.code}]: ${error.message}`
  if (error instanceof UsageError) return `attnlab: error: ${error.message}`
  if (error instanceof Error) return `attnlab: error: ${error.message}`
  return `attnlab: error: ${String(error)}`
}

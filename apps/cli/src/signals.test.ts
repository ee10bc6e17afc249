import { afterEach, describe, expect, it, vi } from 'vitest'
import { exitCodeForSignal, onStopSignal, stopSignalReceived } from './signals.ts'

describe('onStopSignal', () => {
  afterEach(() => {
    vi.restoreAllMocks()
  })

  it('exit codes are 128 + the signal number', () => {
    expect(exitCodeForSignal('SIGINT')).toBe(130)
    expect(exitCodeForSignal('SIGTERM')).toBe(143)
    expect(exitCodeForSignal('SIGHUP')).toBe(129)
  })

  it('records the signal, and takes a repeat within the relay window for the same request', () => {
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => true)
    const stops: string[] = []
    const remove = onStopSignal((signal) => void stops.push(signal))
    try {
      expect(stopSignalReceived()).toBeUndefined()
      process.emit('SIGTERM')
      process.emit('SIGTERM') // what pnpm relays after a signal sent to the whole job
      expect(stops).toEqual(['SIGTERM'])
      expect(stopSignalReceived()).toBe('SIGTERM')
      expect(kill).not.toHaveBeenCalled()
      // Another signal is a second request: the listeners go and the signal is re-raised.
      process.emit('SIGINT')
      expect(kill).toHaveBeenCalledWith(process.pid, 'SIGINT')
      expect(process.listenerCount('SIGTERM')).toBe(0)
    } finally {
      remove()
    }
  })
})

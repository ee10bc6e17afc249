/**
 * Which provider's kernels are registered on which backend: the registry that
 * `registerAttnlabKernels` (`register.ts`) fills, read by `useBackend`, `kernelsInUse` and the
 * matmul gradient. Its own module so that core's main entry reads it without loading the engines.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import type { KernelProvider } from './provider.ts'

/** An active registration; {@link KernelRegistration.dispose} restores the stock kernels. @category Kernels */
export interface KernelRegistration {
  /** The tfjs backend the kernels are registered on. */
  readonly backendName: 'wasm' | 'cpu'
  /** The provider computing them. */
  readonly provider: KernelProvider
  /** The stock kernels that were replaced. */
  readonly replaced: readonly string[]
  /** Unregisters every attnlab kernel and restores the replaced stock kernels. Idempotent. */
  dispose(): void
}

/** The active registrations by backend name (written by `register.ts` only). */
export const active = new Map<string, KernelRegistration>()

/**
 * The active registration on a backend (default: the active backend), if any.
 *
 * @category Kernels
 */
export function activeKernels(backendName?: string): KernelRegistration | undefined {
  return active.get(backendName ?? tf.getBackend())
}

/**
 * Whether attnlab kernels are registered on a backend (default: the active backend). Gradients
 * use it to choose transposed matmuls (fast with the kernels) over explicit transposes (fast on
 * stock wasm).
 *
 * @category Kernels
 */
export function kernelsActive(backendName?: string): boolean {
  return activeKernels(backendName) !== undefined
}

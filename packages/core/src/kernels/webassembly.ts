/**
 * The few WebAssembly JS-API types the kernels use (the repo's TypeScript lib is ES2023 + Node
 * types, which do not declare `WebAssembly`; it exists in every runtime tfjs-wasm supports).
 *
 * @module
 */

/** A `WebAssembly.Memory` (only `buffer` is used). */
export interface WasmMemory {
  readonly buffer: ArrayBuffer
}

interface WebAssemblyNamespace {
  Memory: abstract new (...args: never[]) => WasmMemory
  instantiate(
    bytes: ArrayBuffer | ArrayBufferView,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<{ instance: { exports: Record<string, unknown> } }>
}

/** The runtime's `WebAssembly` object, or undefined where there is none. */
export function webAssembly(): WebAssemblyNamespace | undefined {
  return (globalThis as unknown as { WebAssembly?: WebAssemblyNamespace }).WebAssembly
}

/** Whether `value` is a `WebAssembly.Memory`. */
export function isWasmMemory(value: unknown): value is WasmMemory {
  const wa = webAssembly()
  return wa !== undefined && value instanceof wa.Memory
}

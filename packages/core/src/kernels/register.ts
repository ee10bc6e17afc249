/**
 * Registers attnlab's kernels on a tfjs backend, computing with a {@link KernelProvider} directly
 * on the backend's memory.
 *
 * Two kinds of kernels:
 * 1. Replacements of stock kernels (`BatchMatMul`, `_FusedMatMul`, `Softmax`, and on `wasm` a
 *    zero-copy `Identity`): model code keeps calling `tf.matMul` / `tf.softmax`, and the
 *    transposed and batched matmuls that autodiff emits land here too. Cases a provider does not
 *    cover (odd broadcasts, prelu, int32) run the stock kernel. Matmuls are replaced only for
 *    providers whose matmul is faster than the backend's ({@link KernelProvider.fastMatMul});
 *    Softmax always (exact zeros, no denormals).
 * 2. Fused kernels ({@link ATTNLAB_KERNELS}) with backward kernels and `tf.registerGradient`
 *    entries. Ops in `@attnlab/core` call them when the active backend has them and an equivalent
 *    composite of stock ops otherwise.
 *
 * Only apps register kernels (through `useBackend(name, { kernels })`); libraries call ops.
 * Source: the training-speed study in `docs/performance.md`.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError, UnsupportedError } from '../errors.ts'
import { backendMemory, wasmInternalsProblems, type BackendMemory } from './memory.ts'
import { ATTNLAB_KERNELS, type REPLACED_STOCK_KERNELS } from './names.ts'
import { active, type KernelRegistration } from './active.ts'
import type { KernelProvider, OneHotAttentionShape, PageSelectShape, SparseAttentionShape } from './provider.ts'

export { activeKernels, kernelsActive, type KernelRegistration } from './active.ts'

/** Options of {@link registerAttnlabKernels}. @category Kernels */
export interface RegisterKernelsOptions {
  /** Replace the stock matmul kernels (default: `provider.fastMatMul`). */
  readonly replaceMatMul?: boolean
  /** Replace the stock softmax kernel (default true). */
  readonly replaceSoftmax?: boolean
}

type KernelArgs = { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs?: tf.NamedAttrMap }
type KernelFn = (args: KernelArgs) => tf.TensorInfo | tf.TensorInfo[]

const sizeOf = (shape: readonly number[]): number => shape.reduce((n, d) => n * d, 1)

function checkTokens(values: Int32Array, limit: number, what: string): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!
    if (!(v >= 0 && v < limit)) {
      throw new InvalidArgumentError(`${what} ${v} at flat index ${i} is out of range [0, ${limit})`, {
        value: v,
        index: i,
        limit,
      })
    }
  }
}

/** Allocates outputs, then takes views (allocation may detach earlier views on wasm). */
function outputsThenViews<T>(
  memory: BackendMemory,
  shapes: readonly (readonly number[])[],
  compute: (outputs: tf.TensorInfo[]) => T,
): T {
  const outputs = shapes.map((shape) => memory.output(shape))
  try {
    return compute(outputs)
  } catch (error) {
    for (const o of outputs) memory.release(o)
    throw error
  }
}

/**
 * Registers attnlab's kernels on `backendName` (`'wasm'` or `'cpu'`), computed by `provider`.
 * Any previous attnlab registration on that backend is disposed first. Gradients of the fused
 * kernels are registered once, globally (they call whichever backend's backward kernel).
 *
 * @param backendName - the tfjs backend (must be initialised, e.g. by `useBackend`)
 * @param provider - the compute kernels
 * @returns a handle whose `dispose()` restores the stock kernels
 * @throws `UnsupportedError` (from `@attnlab/core`) for another backend, an uninitialised one, or a
 *   wasm backend without the internals attnlab needs
 * @example
 * ```ts
 * await useBackend('wasm', { kernels: 'none' })
 * const registration = registerAttnlabKernels('wasm', jsKernelProvider)
 * // ... train ...
 * registration.dispose()
 * ```
 * @category Kernels
 */
export function registerAttnlabKernels(
  backendName: 'wasm' | 'cpu',
  provider: KernelProvider,
  options: RegisterKernelsOptions = {},
): KernelRegistration {
  if (backendName !== 'wasm' && backendName !== 'cpu') {
    throw new UnsupportedError(`attnlab kernels register on 'wasm' or 'cpu', not '${String(backendName)}'`, {
      backend: backendName,
    })
  }
  const backendObject = tf.findBackend(backendName)
  if (backendObject === null) {
    throw new UnsupportedError(
      `the '${backendName}' backend is not initialised; call useBackend('${backendName}') first`,
      { backend: backendName },
    )
  }
  if (backendName === 'wasm') {
    const problems = wasmInternalsProblems(backendObject)
    if (problems.length > 0) {
      throw new UnsupportedError(
        `the tfjs wasm backend lacks what attnlab's kernels need (${problems.join('; ')}); tfjs-backend-wasm ` +
          '4.22.x is supported',
        { problems },
      )
    }
  }
  if (provider.name === 'wasm' && backendName !== 'wasm') {
    throw new UnsupportedError(
      `the 'wasm' kernel provider computes on the wasm backend's heap and cannot serve '${backendName}'`,
      { backend: backendName },
    )
  }
  active.get(backendName)?.dispose()
  registerGradientsOnce()

  const replaceMatMul = options.replaceMatMul ?? provider.fastMatMul
  const replaceSoftmax = options.replaceSoftmax ?? true
  const restore: (() => void)[] = []
  const replaced: string[] = []
  const memoryOf = (backend: unknown): BackendMemory => backendMemory(backendName, backend)

  const replace = (
    kernelName: (typeof REPLACED_STOCK_KERNELS)[number],
    make: (original: tf.KernelConfig | undefined) => KernelFn,
  ): void => {
    const original = tf.getKernel(kernelName, backendName)
    if (original !== undefined) tf.unregisterKernel(kernelName, backendName)
    tf.registerKernel({ kernelName, backendName, kernelFunc: make(original) as tf.KernelFunc })
    replaced.push(kernelName)
    restore.push(() => {
      tf.unregisterKernel(kernelName, backendName)
      if (original !== undefined) tf.registerKernel(original)
    })
  }
  const add = (kernelName: string, kernelFunc: KernelFn): void => {
    if (tf.getKernel(kernelName, backendName) !== undefined) tf.unregisterKernel(kernelName, backendName)
    tf.registerKernel({ kernelName, backendName, kernelFunc: kernelFunc as tf.KernelFunc })
    restore.push(() => tf.unregisterKernel(kernelName, backendName))
  }
  const fallback = (
    original: tf.KernelConfig | undefined,
    args: KernelArgs,
    why: string,
  ): tf.TensorInfo | tf.TensorInfo[] => {
    if (original === undefined) throw new UnsupportedError(`no stock kernel to fall back to (${why})`)
    return original.kernelFunc(args as unknown as Parameters<tf.KernelFunc>[0]) as tf.TensorInfo | tf.TensorInfo[]
  }

  // ---- matmul --------------------------------------------------------------------------------
  interface Plan {
    m: number
    n: number
    k: number
    batch: number
    strideA: number
    strideB: number
    outShape: number[]
  }
  const plan = (a: tf.TensorInfo, b: tf.TensorInfo, transposeA: boolean, transposeB: boolean): Plan | undefined => {
    if (a.dtype !== 'float32' || b.dtype !== 'float32' || a.shape.length < 2 || b.shape.length < 2) return undefined
    const ra = a.shape.length
    const rb = b.shape.length
    const m = (transposeA ? a.shape[ra - 1] : a.shape[ra - 2]) as number
    const k = (transposeA ? a.shape[ra - 2] : a.shape[ra - 1]) as number
    const kb = (transposeB ? b.shape[rb - 1] : b.shape[rb - 2]) as number
    const n = (transposeB ? b.shape[rb - 2] : b.shape[rb - 1]) as number
    if (k !== kb) return undefined // let the stock kernel report the mismatch
    const batchA = sizeOf(a.shape.slice(0, -2))
    const batchB = sizeOf(b.shape.slice(0, -2))
    if (!(batchA === batchB || batchA === 1 || batchB === 1)) return undefined
    let batchShape: number[]
    try {
      batchShape = tf.backend_util.assertAndGetBroadcastShape(a.shape.slice(0, -2), b.shape.slice(0, -2))
    } catch {
      return undefined
    }
    const batch = Math.max(batchA, batchB)
    if (sizeOf(batchShape) !== batch) return undefined
    return {
      m,
      n,
      k,
      batch,
      strideA: batchA === 1 ? 0 : m * k,
      strideB: batchB === 1 ? 0 : k * n,
      outShape: [...batchShape, m, n],
    }
  }
  const gemmInto = (
    memory: BackendMemory,
    a: tf.TensorInfo,
    b: tf.TensorInfo,
    transposeA: boolean,
    transposeB: boolean,
    p: Plan,
  ): tf.TensorInfo =>
    outputsThenViews(memory, [p.outShape], ([out]) => {
      const c = memory.floats(out!)
      if (p.k === 0) c.fill(0)
      else if (c.length > 0)
        provider.gemm(
          transposeA,
          transposeB,
          p.batch,
          p.m,
          p.n,
          p.k,
          memory.floats(a),
          p.strideA,
          memory.floats(b),
          p.strideB,
          c,
        )
      return out!
    })
  if (replaceMatMul) {
    replace('BatchMatMul', (original) => (args) => {
      const { a, b } = args.inputs as { a: tf.TensorInfo; b: tf.TensorInfo }
      const { transposeA, transposeB } = args.attrs as { transposeA: boolean; transposeB: boolean }
      const p = plan(a, b, transposeA, transposeB)
      if (p === undefined) return fallback(original, args, 'BatchMatMul shape')
      return gemmInto(memoryOf(args.backend), a, b, transposeA, transposeB, p)
    })
    replace('_FusedMatMul', (original) => (args) => {
      const { a, b, bias, preluActivationWeights } = args.inputs as {
        a: tf.TensorInfo
        b: tf.TensorInfo
        bias?: tf.TensorInfo
        preluActivationWeights?: tf.TensorInfo
      }
      const { transposeA, transposeB, activation } = args.attrs as {
        transposeA: boolean
        transposeB: boolean
        activation: string
      }
      const p = plan(a, b, transposeA, transposeB)
      const simpleBias =
        bias === undefined ||
        (bias.dtype === 'float32' && sizeOf(bias.shape) === p?.n && bias.shape[bias.shape.length - 1] === p.n)
      if (
        p === undefined ||
        preluActivationWeights !== undefined ||
        !simpleBias ||
        !(activation === 'linear' || activation === 'relu')
      ) {
        return fallback(original, args, '_FusedMatMul variant')
      }
      const memory = memoryOf(args.backend)
      const out = gemmInto(memory, a, b, transposeA, transposeB, p)
      const size = sizeOf(out.shape)
      if (bias !== undefined && size > 0) provider.addBias(memory.floats(out), size / p.n, p.n, memory.floats(bias))
      if (activation === 'relu') {
        const c = memory.floats(out)
        for (let i = 0; i < c.length; i++) if (c[i]! < 0) c[i] = 0 // NaN stays NaN, as tf.relu
      }
      return out
    })
  }

  // ---- zero-copy Identity (wasm) ----------------------------------------------------------------
  // tfjs-wasm's Identity copies the buffer, and autodiff clones every tensor it saves for the
  // backward pass (the minimal model's [batch, heads, pos, pos] pattern, the logits, ...). Tensors
  // are immutable, so sharing the buffer is equivalent; attnlab's only in-place writer
  // (adamwUpdate) declines buffers shared by more than one tensor.
  if (backendName === 'wasm') {
    replace('Identity', (original) => (args) => {
      const { x } = args.inputs as { x: tf.TensorInfo }
      if (x.dtype === 'string') return fallback(original, args, 'Identity of strings')
      ;(args.backend as { incRef(dataId: tf.DataId): void }).incRef(x.dataId)
      return { dataId: x.dataId, shape: [...x.shape], dtype: x.dtype }
    })
  }

  // ---- add (same-shape float32) ------------------------------------------------------------------
  // Residual streams and the gradient sums autodiff makes for every tensor used twice: tfjs-wasm's
  // Add is single-threaded and ~5x slower than the native kernel on [4096, 64].
  const addInto = provider.add?.bind(provider)
  if (addInto !== undefined) {
    replace('Add', (original) => (args) => {
      const { a, b } = args.inputs as { a: tf.TensorInfo; b: tf.TensorInfo }
      const n = sizeOf(a.shape)
      if (
        a.dtype !== 'float32' ||
        b.dtype !== 'float32' ||
        n < 4096 ||
        a.shape.length !== b.shape.length ||
        a.shape.some((d, i) => d !== b.shape[i])
      ) {
        return fallback(original, args, 'Add with broadcasting, other dtypes or few elements')
      }
      const memory = memoryOf(args.backend)
      return outputsThenViews(memory, [a.shape], ([out]) => {
        addInto(memory.floats(a), memory.floats(b), memory.floats(out!), n)
        return out!
      })
    })
  }

  // ---- softmax -------------------------------------------------------------------------------
  if (replaceSoftmax) {
    replace('Softmax', (original) => (args) => {
      const { logits } = args.inputs as { logits: tf.TensorInfo }
      const { dim } = args.attrs as { dim: number }
      const rank = logits.shape.length
      if (logits.dtype !== 'float32' || rank === 0 || !(dim === -1 || dim === rank - 1))
        return fallback(original, args, 'Softmax axis')
      const memory = memoryOf(args.backend)
      const cols = logits.shape[rank - 1] as number
      return outputsThenViews(memory, [logits.shape], ([out]) => {
        if (cols > 0) provider.softmax(memory.floats(logits), memory.floats(out!), sizeOf(logits.shape) / cols, cols)
        return out!
      })
    })
  }

  // ---- linear ----------------------------------------------------------------------------------
  // A provider call may grow the wasm memory (the wasm provider mallocs scratch), which detaches
  // every view taken before it: views are taken afresh for each call, never reused across calls.
  const linearForward =
    (gelu: boolean): KernelFn =>
    (args) => {
      const { x, w, bias } = args.inputs as { x: tf.TensorInfo; w: tf.TensorInfo; bias?: tf.TensorInfo }
      const [rows, inner] = x.shape as [number, number]
      const cols = w.shape[1] as number
      const memory = memoryOf(args.backend)
      return outputsThenViews(
        memory,
        gelu
          ? [
              [rows, cols],
              [rows, cols],
            ]
          : [[rows, cols]],
        (outputs) => {
          const pre = outputs[gelu ? 1 : 0]!
          if (inner === 0) memory.floats(pre).fill(0)
          else if (rows * cols > 0)
            provider.gemm(
              false,
              false,
              1,
              rows,
              cols,
              inner,
              memory.floats(x),
              0,
              memory.floats(w),
              0,
              memory.floats(pre),
            )
          if (bias !== undefined) provider.addBias(memory.floats(pre), rows, cols, memory.floats(bias))
          if (gelu) provider.geluForward(memory.floats(pre), memory.floats(outputs[0]!), rows * cols)
          return outputs
        },
      )
    }
  add(ATTNLAB_KERNELS.linear, linearForward(false))
  add(ATTNLAB_KERNELS.linearGelu, linearForward(true))
  add(ATTNLAB_KERNELS.linearGrad, (args) => {
    const { x, w, dy, pre } = args.inputs as {
      x: tf.TensorInfo
      w: tf.TensorInfo
      dy: tf.TensorInfo
      pre?: tf.TensorInfo
    }
    const { hasBias } = args.attrs as { hasBias: boolean }
    const [rows, inner] = x.shape as [number, number]
    const cols = w.shape[1] as number
    const memory = memoryOf(args.backend)
    const shapes: number[][] = [
      [rows, inner],
      [inner, cols],
    ]
    if (hasBias) shapes.push([cols])
    if (pre !== undefined) shapes.push([rows, cols]) // scratch: gradient before the activation
    return outputsThenViews(memory, shapes, (outputs) => {
      const [dx, dw] = [outputs[0]!, outputs[1]!]
      const db = hasBias ? outputs[2]! : undefined
      const scratch = pre !== undefined ? outputs[outputs.length - 1]! : undefined
      if (pre !== undefined)
        provider.geluBackward(memory.floats(pre), memory.floats(dy), memory.floats(scratch!), rows * cols)
      const dz = scratch ?? dy // the gradient at the matmul's output
      if (rows * cols === 0 || inner === 0) {
        memory.floats(dx).fill(0)
        memory.floats(dw).fill(0)
      } else {
        provider.gemm(false, true, 1, rows, inner, cols, memory.floats(dz), 0, memory.floats(w), 0, memory.floats(dx))
        provider.gemm(true, false, 1, inner, cols, rows, memory.floats(x), 0, memory.floats(dz), 0, memory.floats(dw))
      }
      if (db !== undefined) provider.columnSum(memory.floats(dz), memory.floats(db), rows, cols)
      if (scratch !== undefined) memory.release(outputs.pop()!)
      return outputs
    })
  })

  // ---- row gathers (embeddings) ----------------------------------------------------------------
  add(ATTNLAB_KERNELS.gatherRows, (args) => {
    const { table, indices } = args.inputs as { table: tf.TensorInfo; indices: tf.TensorInfo }
    const [rows, width] = table.shape as [number, number]
    const [n, k] = indices.shape as [number, number]
    const memory = memoryOf(args.backend)
    checkTokens(memory.ints(indices), rows, 'row index')
    return outputsThenViews(memory, [[n, width]], ([out]) => {
      if (n * width > 0)
        provider.gatherRows(memory.floats(table), memory.ints(indices), memory.floats(out!), n, k, width)
      return out!
    })
  })
  add(ATTNLAB_KERNELS.scatterRows, (args) => {
    const { updates, indices } = args.inputs as { updates: tf.TensorInfo; indices: tf.TensorInfo }
    const { rows } = args.attrs as { rows: number }
    const [n, width] = updates.shape as [number, number]
    const k = indices.shape[1] as number
    const memory = memoryOf(args.backend)
    return outputsThenViews(memory, [[rows, width]], ([out]) => {
      if (rows * width > 0)
        provider.scatterRows(memory.floats(updates), memory.ints(indices), memory.floats(out!), n, k, width, rows)
      return out!
    })
  })

  // ---- layer norm --------------------------------------------------------------------------------
  add(ATTNLAB_KERNELS.layerNorm, (args) => {
    const { x, gain, bias } = args.inputs as { x: tf.TensorInfo; gain: tf.TensorInfo; bias?: tf.TensorInfo }
    const { eps } = args.attrs as { eps: number }
    const [rows, cols] = x.shape as [number, number]
    const memory = memoryOf(args.backend)
    return outputsThenViews(memory, [[rows, cols], [rows], [rows]], (outputs) => {
      const [y, mean, rstd] = outputs.map((o) => memory.floats(o)) as [Float32Array, Float32Array, Float32Array]
      provider.layerNormForward(
        memory.floats(x),
        memory.floats(gain),
        bias === undefined ? null : memory.floats(bias),
        y,
        mean,
        rstd,
        rows,
        cols,
        eps,
      )
      return outputs
    })
  })
  add(ATTNLAB_KERNELS.layerNormGrad, (args) => {
    const { x, gain, mean, rstd, dy } = args.inputs as Record<'x' | 'gain' | 'mean' | 'rstd' | 'dy', tf.TensorInfo>
    const { hasBias } = args.attrs as { hasBias: boolean }
    const [rows, cols] = x.shape as [number, number]
    const memory = memoryOf(args.backend)
    const shapes = hasBias ? [[rows, cols], [cols], [cols]] : [[rows, cols], [cols]]
    return outputsThenViews(memory, shapes, (outputs) => {
      const views = outputs.map((o) => memory.floats(o))
      provider.layerNormBackward(
        memory.floats(x),
        memory.floats(gain),
        memory.floats(mean),
        memory.floats(rstd),
        memory.floats(dy),
        views[0]!,
        views[1]!,
        hasBias ? views[2]! : null,
        rows,
        cols,
      )
      return outputs
    })
  })

  // ---- attention ---------------------------------------------------------------------------------
  add(ATTNLAB_KERNELS.attention, (args) => {
    const { qkv } = args.inputs as { qkv: tf.TensorInfo }
    const { nHeads, scale, causal } = args.attrs as { nHeads: number; scale: number; causal: boolean }
    const [batch, pos, width] = qkv.shape as [number, number, number]
    const dHead = width / 3 / nHeads
    const memory = memoryOf(args.backend)
    return outputsThenViews(
      memory,
      [
        [batch, pos, nHeads * dHead],
        // the pattern, or only the rows' log-sum-exp (the backward recomputes the pattern)
        provider.attentionSaves === 'logSumExp' ? [batch, nHeads, pos] : [batch, nHeads, pos, pos],
      ],
      (outputs) => {
        const [out, probs] = outputs.map((o) => memory.floats(o)) as [Float32Array, Float32Array]
        // The op rejects dHead = 0 and empty batches before calling the kernel.
        provider.attentionForward(memory.floats(qkv), out, probs, batch, pos, nHeads, dHead, scale, causal)
        return outputs
      },
    )
  })
  add(ATTNLAB_KERNELS.attentionGrad, (args) => {
    const { qkv, probs, dy, out } = args.inputs as {
      qkv: tf.TensorInfo
      probs: tf.TensorInfo
      dy: tf.TensorInfo
      out?: tf.TensorInfo
    }
    const { nHeads, scale, causal } = args.attrs as { nHeads: number; scale: number; causal: boolean }
    const [batch, pos, width] = qkv.shape as [number, number, number]
    const dHead = width / 3 / nHeads
    const memory = memoryOf(args.backend)
    return outputsThenViews(memory, [qkv.shape], ([dQkv]) => {
      const d = memory.floats(dQkv!)
      provider.attentionBackward(
        memory.floats(qkv),
        memory.floats(probs),
        memory.floats(dy),
        d,
        batch,
        pos,
        nHeads,
        dHead,
        scale,
        causal,
        out === undefined ? undefined : memory.floats(out),
      )
      return dQkv!
    })
  })

  // ---- cross-entropy -----------------------------------------------------------------------------
  add(ATTNLAB_KERNELS.softmaxCrossEntropy, (args) => {
    const { logits, labels, weights } = args.inputs as {
      logits: tf.TensorInfo
      labels: tf.TensorInfo
      weights: tf.TensorInfo
    }
    const [rows, cols] = logits.shape as [number, number]
    const memory = memoryOf(args.backend)
    checkTokens(memory.ints(labels), cols, 'label')
    return outputsThenViews(memory, [[]], ([out]) => {
      const loss = provider.softmaxCrossEntropy(
        memory.floats(logits),
        memory.ints(labels),
        memory.floats(weights),
        rows,
        cols,
      )
      memory.floats(out!)[0] = loss
      return out!
    })
  })
  add(ATTNLAB_KERNELS.softmaxCrossEntropyGrad, (args) => {
    const { logits, labels, weights, dy } = args.inputs as Record<'logits' | 'labels' | 'weights' | 'dy', tf.TensorInfo>
    const [rows, cols] = logits.shape as [number, number]
    const memory = memoryOf(args.backend)
    return outputsThenViews(memory, [logits.shape], ([dLogits]) => {
      const dLoss = memory.floats(dy)[0]!
      provider.softmaxCrossEntropyBackward(
        memory.floats(logits),
        memory.ints(labels),
        memory.floats(weights),
        rows,
        cols,
        dLoss,
        memory.floats(dLogits!),
      )
      return dLogits!
    })
  })

  // ---- one-hot attention -------------------------------------------------------------------------
  const oneHotShape = (
    tokens: tf.TensorInfo,
    wq: tf.TensorInfo,
    wv: tf.TensorInfo,
    attrs: tf.NamedAttrMap | undefined,
  ): OneHotAttentionShape => {
    const { dVocab, outCols, scale, from } = attrs as { dVocab: number; outCols: number; scale: number; from: number }
    const [batch, pos] = tokens.shape as [number, number]
    const [nHeads, dModel] = wq.shape as [number, number, number]
    return { batch, pos, nHeads, dModel, dValue: wv.shape[2] as number, dVocab, outCols, scale, from }
  }
  add(ATTNLAB_KERNELS.oneHotAttention, (args) => {
    const { tokens, wq, wv } = args.inputs as { tokens: tf.TensorInfo; wq: tf.TensorInfo; wv: tf.TensorInfo }
    const shape = oneHotShape(tokens, wq, wv, args.attrs)
    const memory = memoryOf(args.backend)
    checkTokens(memory.ints(tokens), shape.dVocab, 'token')
    return outputsThenViews(
      memory,
      [
        [shape.batch, shape.pos - shape.from, shape.outCols],
        [shape.batch, shape.nHeads, shape.pos, shape.pos],
      ],
      (outputs) => {
        const [logits, probs] = outputs.map((o) => memory.floats(o)) as [Float32Array, Float32Array]
        provider.oneHotAttentionForward(memory.ints(tokens), memory.floats(wq), memory.floats(wv), logits, probs, shape)
        return outputs
      },
    )
  })
  add(ATTNLAB_KERNELS.oneHotAttentionGrad, (args) => {
    const { tokens, wq, wv, probs, dy } = args.inputs as Record<'tokens' | 'wq' | 'wv' | 'probs' | 'dy', tf.TensorInfo>
    const shape = oneHotShape(tokens, wq, wv, args.attrs)
    const memory = memoryOf(args.backend)
    return outputsThenViews(memory, [wq.shape, wv.shape], (outputs) => {
      const [dWq, dWv] = outputs.map((o) => memory.floats(o)) as [Float32Array, Float32Array]
      provider.oneHotAttentionBackward(
        memory.ints(tokens),
        memory.floats(wq),
        memory.floats(wv),
        memory.floats(probs),
        memory.floats(dy),
        dWq,
        dWv,
        shape,
      )
      return outputs
    })
  })

  // ---- sparse attention over key spans -------------------------------------------------------------
  add(ATTNLAB_KERNELS.sparseAttention, (args) => {
    const { q, k, v, tileStarts, spans } = args.inputs as Record<
      'q' | 'k' | 'v' | 'tileStarts' | 'spans',
      tf.TensorInfo
    >
    const shape = args.attrs as unknown as SparseAttentionShape
    const memory = memoryOf(args.backend)
    return outputsThenViews(memory, [[shape.heads, shape.rows, shape.dValue]], ([out]) => {
      provider.sparseAttention(
        memory.floats(q),
        memory.floats(k),
        memory.floats(v),
        memory.floats(out!),
        memory.ints(tileStarts),
        memory.ints(spans),
        shape,
      )
      return out!
    })
  })

  // ---- Quest's page selection ----------------------------------------------------------------------
  add(ATTNLAB_KERNELS.pageSelect, (args) => {
    const { q, bounds } = args.inputs as Record<'q' | 'bounds', tf.TensorInfo>
    const shape = args.attrs as unknown as PageSelectShape
    const memory = memoryOf(args.backend)
    const chosen = memory.output([shape.heads, shape.budget], 'int32')
    try {
      provider.pageSelect(memory.floats(q), memory.floats(bounds), memory.ints(chosen), shape)
    } catch (error) {
      memory.release(chosen)
      throw error
    }
    return chosen
  })

  let disposed = false
  const registration: KernelRegistration = Object.freeze({
    backendName,
    provider,
    replaced: Object.freeze([...replaced]),
    dispose: () => {
      if (disposed) return
      disposed = true
      for (const undo of restore.reverse()) undo()
      if (active.get(backendName) === registration) active.delete(backendName)
    },
  })
  active.set(backendName, registration)
  return registration
}

// ---- gradients (global, registered on first use) ------------------------------------------------

let gradientsRegistered = false

const first = (dy: tf.Tensor | tf.Tensor[]): tf.Tensor => (Array.isArray(dy) ? (dy[0] as tf.Tensor) : dy)
const run = (name: string, inputs: Record<string, tf.Tensor>, attrs: tf.NamedAttrMap = {}): tf.Tensor | tf.Tensor[] =>
  tf.engine().runKernel(name, inputs as unknown as tf.NamedTensorMap, attrs) as tf.Tensor | tf.Tensor[]
const zerosFor = (t: tf.Tensor) => (): tf.Tensor => tf.zeros(t.shape, 'float32')

function registerGradientsOnce(): void {
  if (gradientsRegistered) return
  gradientsRegistered = true
  // Optional inputs (bias) are never listed in inputsToSave (tfjs would try to clone undefined);
  // the forward attrs say whether they were given, and a gradient for an absent input is ignored.
  const linearGrad = (gelu: boolean): tf.GradConfig => ({
    kernelName: gelu ? ATTNLAB_KERNELS.linearGelu : ATTNLAB_KERNELS.linear,
    inputsToSave: ['x', 'w'],
    outputsToSave: gelu ? [false, true] : [],
    gradFunc: (dy, saved, attrs) => {
      const [x, w, pre] = saved as [tf.Tensor, tf.Tensor, tf.Tensor | undefined]
      const hasBias = (attrs as { hasBias?: boolean }).hasBias === true
      const inputs: Record<string, tf.Tensor> = { x, w, dy: first(dy) }
      if (pre !== undefined) inputs.pre = pre
      const [dx, dw, db] = run(ATTNLAB_KERNELS.linearGrad, inputs, { hasBias }) as tf.Tensor[]
      return { x: () => dx!, w: () => dw!, bias: () => db! }
    },
  })
  tf.registerGradient({
    kernelName: ATTNLAB_KERNELS.gatherRows,
    inputsToSave: ['table', 'indices'],
    gradFunc: (dy, saved) => {
      const [table, indices] = saved as [tf.Tensor, tf.Tensor]
      return {
        table: () =>
          run(
            ATTNLAB_KERNELS.scatterRows,
            { updates: first(dy), indices },
            { rows: table.shape[0] as number },
          ) as tf.Tensor,
        indices: zerosFor(indices),
      }
    },
  })
  tf.registerGradient(linearGrad(false))
  tf.registerGradient(linearGrad(true))
  tf.registerGradient({
    kernelName: ATTNLAB_KERNELS.layerNorm,
    inputsToSave: ['x', 'gain'],
    outputsToSave: [false, true, true],
    gradFunc: (dy, saved, attrs) => {
      const [x, gain, mean, rstd] = saved as [tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]
      const hasBias = (attrs as { hasBias?: boolean }).hasBias === true
      const [dx, dGain, dBias] = run(
        ATTNLAB_KERNELS.layerNormGrad,
        { x, gain, mean, rstd, dy: first(dy) },
        { hasBias },
      ) as tf.Tensor[]
      return { x: () => dx!, gain: () => dGain!, bias: () => dBias! }
    },
  })
  tf.registerGradient({
    kernelName: ATTNLAB_KERNELS.attention,
    inputsToSave: ['qkv'],
    // the output too: a log-sum-exp provider takes D = rowsum(dy * out) from it (the next layer's
    // linear keeps the same tensor alive for its own gradient, so this costs no memory)
    outputsToSave: [true, true],
    gradFunc: (dy, saved, attrs) => {
      const [qkv, out, probs] = saved as [tf.Tensor, tf.Tensor, tf.Tensor]
      // dy = [dz, dPattern]: tfjs fills the gradient of an unused output with zeros. The ops never
      // expose the pattern output (it is saved for the backward pass only), so dPattern is ignored.
      return {
        qkv: () => run(ATTNLAB_KERNELS.attentionGrad, { qkv, probs, dy: first(dy), out }, attrs) as tf.Tensor,
      }
    },
  })
  tf.registerGradient({
    kernelName: ATTNLAB_KERNELS.softmaxCrossEntropy,
    inputsToSave: ['logits', 'labels', 'weights'],
    gradFunc: (dy, saved) => {
      const [logits, labels, weights] = saved as [tf.Tensor, tf.Tensor, tf.Tensor]
      return {
        logits: () =>
          run(ATTNLAB_KERNELS.softmaxCrossEntropyGrad, { logits, labels, weights, dy: first(dy) }) as tf.Tensor,
        labels: zerosFor(labels),
        weights: zerosFor(weights), // a loss mask, not trained
      }
    },
  })
  tf.registerGradient({
    kernelName: ATTNLAB_KERNELS.oneHotAttention,
    inputsToSave: ['tokens', 'wq', 'wv'],
    outputsToSave: [false, true],
    gradFunc: (dy, saved, attrs) => {
      const [tokens, wq, wv, probs] = saved as [tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]
      // As for attention: the pattern output is internal, its (zero) gradient is ignored.
      const [dWq, dWv] = run(
        ATTNLAB_KERNELS.oneHotAttentionGrad,
        { tokens, wq, wv, probs, dy: first(dy) },
        attrs,
      ) as tf.Tensor[]
      return { tokens: zerosFor(tokens), wq: () => dWq!, wv: () => dWv! }
    },
  })
}

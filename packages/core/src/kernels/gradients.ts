/**
 * Gradients of the stock tfjs kernels attnlab models train through, registered by `useBackend`
 * (`@attnlab/core`) with the backend.
 *
 * tfjs-core's Node build (`tf-core.node.js`, what `import '@tensorflow/tfjs-core'` loads in
 * Node) registers no gradients: they live in ESM-only files (`dist/register_all_gradients.js`
 * with extensionless imports) that Node cannot load, and the union package `@tensorflow/tfjs`
 * that bundles them also imports backends and tfjs-layers. So `tf.grad` on plain tfjs-core fails
 * with "gradient function not found for Neg". {@link registerGradients} registers the gradients
 * of the kernels our forward passes use (written from the calculus, not copied), each only when
 * none is registered yet, so an application that already loaded tfjs' own gradients keeps them.
 *
 * Matmul gradients use explicit `tf.transpose` + plain matmuls on stock backends (on wasm only
 * untransposed rank-2 matmuls reach XNNPACK, see `docs/performance.md`), and the transpose flags
 * when `@attnlab/core`'s kernels are registered (they handle them at full speed).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { UnsupportedError } from '../errors.ts'
import { kernelsActive } from './active.ts'

type GradFunc = (
  dy: tf.Tensor | tf.Tensor[],
  saved: tf.Tensor[],
  attrs: tf.NamedAttrMap,
) => Record<string, () => tf.Tensor>

let registered = false

/** Normalises a (possibly negative, possibly absent) axis list for a tensor of `rank`. */
function axesOf(axis: unknown, rank: number): number[] {
  if (axis === null || axis === undefined) return Array.from({ length: rank }, (_, i) => i)
  const list = Array.isArray(axis) ? (axis as number[]) : [axis as number]
  return list.map((a) => (a < 0 ? a + rank : a))
}

/** Sums `dy` (of a broadcast output) back to `shape` (the input's shape). */
function unbroadcast(dy: tf.Tensor, shape: readonly number[]): tf.Tensor {
  if (dy.shape.length === shape.length && dy.shape.every((d, i) => d === shape[i])) return dy
  const extra = dy.rank - shape.length
  const axes: number[] = []
  for (let i = 0; i < dy.rank; i++) {
    if (i < extra) axes.push(i)
    else if (shape[i - extra] === 1 && dy.shape[i] !== 1) axes.push(i)
  }
  const summed = axes.length > 0 ? tf.sum(dy, axes, true) : dy
  return tf.reshape(summed, [...shape])
}

/** Swaps the last two axes (an explicit, materialised transpose). */
function swapLast(x: tf.Tensor): tf.Tensor {
  const perm = Array.from({ length: x.rank }, (_, i) => i)
  perm[x.rank - 1] = x.rank - 2
  perm[x.rank - 2] = x.rank - 1
  return tf.transpose(x, perm)
}

/** Broadcasts a reduced gradient (`dy` with the reduced axes kept) back over `x`'s shape. */
function expandReduced(dy: tf.Tensor, xShape: readonly number[], axes: readonly number[]): tf.Tensor {
  const kept = xShape.map((d, i) => (axes.includes(i) ? 1 : d))
  // add-to-zeros broadcasts ~20x faster than tf.broadcastTo (Tile) on wasm.
  return tf.add(tf.reshape(dy, kept), tf.zeros([...xShape]))
}

const single = (dy: tf.Tensor | tf.Tensor[]): tf.Tensor => (Array.isArray(dy) ? (dy[0] as tf.Tensor) : dy)

const GRADIENTS: ReadonlyArray<{
  kernelName: string
  inputsToSave?: string[]
  outputsToSave?: boolean[]
  saveAllInputs?: boolean
  gradFunc: GradFunc
}> = [
  // ---- elementwise binary (with broadcasting) ----
  {
    kernelName: 'Add',
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, [a, b]) => ({
      a: () => unbroadcast(single(dy), a!.shape),
      b: () => unbroadcast(single(dy), b!.shape),
    }),
  },
  {
    kernelName: 'AddN',
    saveAllInputs: true,
    gradFunc: (dy, saved) => Object.fromEntries(saved.map((_, i) => [String(i), () => tf.clone(single(dy))])),
  },
  {
    kernelName: 'Sub',
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, [a, b]) => ({
      a: () => unbroadcast(single(dy), a!.shape),
      b: () => tf.neg(unbroadcast(single(dy), b!.shape)),
    }),
  },
  {
    kernelName: 'Multiply',
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, [a, b]) => ({
      a: () => unbroadcast(tf.mul(single(dy), tf.cast(b!, 'float32')), a!.shape),
      b: () => unbroadcast(tf.mul(single(dy), tf.cast(a!, 'float32')), b!.shape),
    }),
  },
  {
    kernelName: 'RealDiv',
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, [a, b]) => ({
      a: () => unbroadcast(tf.div(single(dy), b!), a!.shape),
      b: () => unbroadcast(tf.neg(tf.div(tf.mul(single(dy), a!), tf.square(b!))), b!.shape),
    }),
  },
  {
    kernelName: 'Maximum',
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, [a, b]) => ({
      a: () => unbroadcast(tf.mul(single(dy), tf.cast(tf.greaterEqual(a!, b!), 'float32')), a!.shape),
      b: () => unbroadcast(tf.mul(single(dy), tf.cast(tf.less(a!, b!), 'float32')), b!.shape),
    }),
  },
  {
    kernelName: 'Minimum',
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, [a, b]) => ({
      a: () => unbroadcast(tf.mul(single(dy), tf.cast(tf.lessEqual(a!, b!), 'float32')), a!.shape),
      b: () => unbroadcast(tf.mul(single(dy), tf.cast(tf.greater(a!, b!), 'float32')), b!.shape),
    }),
  },
  {
    kernelName: 'SquaredDifference',
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, [a, b]) => {
      const twice = (): tf.Tensor => tf.mul(single(dy), tf.mul(2, tf.sub(a!, b!)))
      return { a: () => unbroadcast(twice(), a!.shape), b: () => tf.neg(unbroadcast(twice(), b!.shape)) }
    },
  },
  {
    kernelName: 'Pow',
    inputsToSave: ['a', 'b'],
    outputsToSave: [true],
    gradFunc: (dy, [a, b, y]) => ({
      a: () => unbroadcast(tf.mul(single(dy), tf.mul(b!, tf.pow(a!, tf.sub(b!, 1)))), a!.shape),
      b: () => {
        // d/db a^b = a^b log a, defined for a > 0 (0 elsewhere).
        const positive = tf.greater(a!, 0)
        const logA = tf.where(positive, tf.log(tf.where(positive, a!, tf.onesLike(a!))), tf.zerosLike(a!))
        return unbroadcast(tf.mul(single(dy), tf.mul(y!, logA)), b!.shape)
      },
    }),
  },
  // ---- elementwise unary ----
  { kernelName: 'Neg', gradFunc: (dy) => ({ x: () => tf.neg(single(dy)) }) },
  { kernelName: 'Identity', gradFunc: (dy) => ({ x: () => tf.clone(single(dy)) }) },
  {
    kernelName: 'Cast',
    inputsToSave: ['x'],
    gradFunc: (dy, [x]) => ({ x: () => (x!.dtype === 'float32' ? tf.clone(single(dy)) : tf.zerosLike(x!)) }),
  },
  {
    kernelName: 'Square',
    inputsToSave: ['x'],
    gradFunc: (dy, [x]) => ({ x: () => tf.mul(single(dy), tf.mul(2, x!)) }),
  },
  {
    kernelName: 'Sqrt',
    outputsToSave: [true],
    gradFunc: (dy, [y]) => ({ x: () => tf.div(single(dy), tf.mul(2, y!)) }),
  },
  {
    kernelName: 'Rsqrt',
    outputsToSave: [true],
    gradFunc: (dy, [y]) => ({ x: () => tf.mul(single(dy), tf.mul(-0.5, tf.pow(y!, 3))) }),
  },
  {
    kernelName: 'Reciprocal',
    outputsToSave: [true],
    gradFunc: (dy, [y]) => ({ x: () => tf.neg(tf.mul(single(dy), tf.square(y!))) }),
  },
  { kernelName: 'Exp', outputsToSave: [true], gradFunc: (dy, [y]) => ({ x: () => tf.mul(single(dy), y!) }) },
  { kernelName: 'Log', inputsToSave: ['x'], gradFunc: (dy, [x]) => ({ x: () => tf.div(single(dy), x!) }) },
  {
    kernelName: 'Tanh',
    outputsToSave: [true],
    gradFunc: (dy, [y]) => ({ x: () => tf.mul(single(dy), tf.sub(1, tf.square(y!))) }),
  },
  {
    kernelName: 'Sigmoid',
    outputsToSave: [true],
    gradFunc: (dy, [y]) => ({ x: () => tf.mul(single(dy), tf.mul(y!, tf.sub(1, y!))) }),
  },
  {
    kernelName: 'Erf',
    inputsToSave: ['x'],
    gradFunc: (dy, [x]) => ({
      x: () => tf.mul(single(dy), tf.mul(2 / Math.sqrt(Math.PI), tf.exp(tf.neg(tf.square(x!))))),
    }),
  },
  {
    kernelName: 'Relu',
    inputsToSave: ['x'],
    gradFunc: (dy, [x]) => ({ x: () => tf.mul(single(dy), tf.cast(tf.greater(x!, 0), 'float32')) }),
  },
  { kernelName: 'Abs', inputsToSave: ['x'], gradFunc: (dy, [x]) => ({ x: () => tf.mul(single(dy), tf.sign(x!)) }) },
  { kernelName: 'Sin', inputsToSave: ['x'], gradFunc: (dy, [x]) => ({ x: () => tf.mul(single(dy), tf.cos(x!)) }) },
  {
    kernelName: 'Cos',
    inputsToSave: ['x'],
    gradFunc: (dy, [x]) => ({ x: () => tf.neg(tf.mul(single(dy), tf.sin(x!))) }),
  },
  {
    kernelName: 'ClipByValue',
    inputsToSave: ['x'],
    gradFunc: (dy, [x], attrs) => {
      const { clipValueMin, clipValueMax } = attrs as unknown as { clipValueMin: number; clipValueMax: number }
      return {
        x: () =>
          tf.mul(
            single(dy),
            tf.cast(tf.logicalAnd(tf.greaterEqual(x!, clipValueMin), tf.lessEqual(x!, clipValueMax)), 'float32'),
          ),
      }
    },
  },
  {
    kernelName: 'Select',
    inputsToSave: ['condition'],
    gradFunc: (dy, [condition]) => {
      const g = single(dy)
      return {
        condition: () => tf.cast(tf.zerosLike(condition!), 'float32'),
        t: () => tf.where(condition!, g, tf.zerosLike(g)),
        e: () => tf.where(condition!, tf.zerosLike(g), g),
      }
    },
  },
  // ---- softmax and reductions ----
  {
    kernelName: 'Softmax',
    outputsToSave: [true],
    gradFunc: (dy, [y], attrs) => {
      const dim = (attrs as unknown as { dim: number }).dim
      return {
        logits: () => {
          const dyTimesY = tf.mul(single(dy), y!)
          return tf.sub(dyTimesY, tf.mul(tf.sum(dyTimesY, [dim], true), y!))
        },
      }
    },
  },
  {
    kernelName: 'Sum',
    inputsToSave: ['x'],
    gradFunc: (dy, [x], attrs) => ({
      x: () => expandReduced(single(dy), x!.shape, axesOf((attrs as { axis?: unknown }).axis, x!.rank)),
    }),
  },
  {
    kernelName: 'Mean',
    inputsToSave: ['x'],
    gradFunc: (dy, [x], attrs) => {
      const axes = axesOf((attrs as { axis?: unknown }).axis, x!.rank)
      const count = axes.reduce((n, a) => n * (x!.shape[a] as number), 1)
      return { x: () => tf.div(expandReduced(single(dy), x!.shape, axes), count) }
    },
  },
  {
    kernelName: 'Max',
    inputsToSave: ['x'],
    outputsToSave: [true],
    gradFunc: (dy, [x, y], attrs) => {
      const axes = axesOf((attrs as { reductionIndices?: unknown }).reductionIndices, x!.rank)
      return {
        x: () => {
          const isMax = tf.cast(tf.equal(x!, expandReduced(y!, x!.shape, axes)), 'float32')
          return tf.mul(expandReduced(single(dy), x!.shape, axes), isMax)
        },
      }
    },
  },
  {
    kernelName: 'Min',
    inputsToSave: ['x'],
    outputsToSave: [true],
    gradFunc: (dy, [x, y], attrs) => {
      const axes = axesOf((attrs as { axis?: unknown }).axis, x!.rank)
      return {
        x: () => {
          const isMin = tf.cast(tf.equal(x!, expandReduced(y!, x!.shape, axes)), 'float32')
          return tf.mul(expandReduced(single(dy), x!.shape, axes), isMin)
        },
      }
    },
  },
  {
    kernelName: 'Cumsum',
    gradFunc: (dy, _saved, attrs) => {
      const { axis, exclusive, reverse } = attrs as unknown as { axis: number; exclusive: boolean; reverse: boolean }
      return { x: () => tf.cumsum(single(dy), axis, exclusive, !reverse) }
    },
  },
  // ---- shape and data movement ----
  {
    kernelName: 'Reshape',
    inputsToSave: ['x'],
    gradFunc: (dy, [x]) => ({ x: () => tf.reshape(single(dy), x!.shape) }),
  },
  {
    kernelName: 'ExpandDims',
    inputsToSave: ['input'],
    gradFunc: (dy, [input]) => ({ input: () => tf.reshape(single(dy), input!.shape) }),
  },
  {
    kernelName: 'Transpose',
    gradFunc: (dy, _saved, attrs) => {
      const perm = (attrs as unknown as { perm: number[] }).perm
      const inverse = new Array<number>(perm.length)
      perm.forEach((p, i) => {
        inverse[p] = i
      })
      return { x: () => tf.transpose(single(dy), inverse) }
    },
  },
  {
    kernelName: 'Slice',
    inputsToSave: ['x'],
    gradFunc: (dy, [x], attrs) => {
      const raw = (attrs as unknown as { begin: number | number[] }).begin
      const begin = (typeof raw === 'number' ? [raw] : raw).concat(new Array<number>(x!.rank).fill(0)).slice(0, x!.rank)
      const g = single(dy)
      const paddings = x!.shape.map(
        (d, i) => [begin[i] as number, d - (begin[i] as number) - (g.shape[i] as number)] as [number, number],
      )
      return { x: () => tf.pad(g, paddings) }
    },
  },
  {
    kernelName: 'PadV2',
    inputsToSave: ['x'],
    gradFunc: (dy, [x], attrs) => {
      const paddings = (attrs as unknown as { paddings: [number, number][] }).paddings
      return {
        x: () =>
          tf.slice(
            single(dy),
            paddings.map((p) => p[0]),
            x!.shape,
          ),
      }
    },
  },
  {
    kernelName: 'Concat',
    saveAllInputs: true,
    gradFunc: (dy, saved, attrs) => {
      const rank = saved[0]!.rank
      let axis = (attrs as unknown as { axis: number }).axis
      if (axis < 0) axis += rank
      const sizes = saved.map((t) => t.shape[axis] as number)
      const parts = tf.split(single(dy), sizes, axis)
      return Object.fromEntries(parts.map((p, i) => [String(i), () => p]))
    },
  },
  {
    kernelName: 'Pack',
    saveAllInputs: true,
    gradFunc: (dy, saved, attrs) => {
      const parts = tf.unstack(single(dy), (attrs as unknown as { axis: number }).axis)
      return Object.fromEntries(saved.map((_, i) => [String(i), () => parts[i] as tf.Tensor]))
    },
  },
  {
    kernelName: 'Unpack',
    gradFunc: (dy, _saved, attrs) => {
      const parts = Array.isArray(dy) ? dy : [dy]
      return { value: () => tf.stack(parts, (attrs as unknown as { axis: number }).axis) }
    },
  },
  {
    kernelName: 'SplitV',
    gradFunc: (dy, _saved, attrs) => {
      const parts = Array.isArray(dy) ? dy : [dy]
      return { x: () => tf.concat(parts, (attrs as unknown as { axis: number }).axis) }
    },
  },
  {
    kernelName: 'Tile',
    inputsToSave: ['x'],
    gradFunc: (dy, [x], attrs) => {
      const reps = (attrs as unknown as { reps: number[] }).reps
      return {
        x: () => {
          // Tiled axis k has index r * x_k + i: split it into [reps_k, x_k] and sum over reps.
          const split = x!.shape.flatMap((d, k) => [reps[k] as number, d])
          const repAxes = x!.shape.map((_, k) => 2 * k)
          return tf.reshape(tf.sum(tf.reshape(single(dy), split), repAxes), x!.shape)
        },
      }
    },
  },
  {
    kernelName: 'GatherV2',
    inputsToSave: ['x', 'indices'],
    gradFunc: (dy, [x, indices], attrs) => {
      const { axis: rawAxis, batchDims } = attrs as unknown as { axis: number; batchDims: number }
      if (batchDims !== 0) {
        throw new UnsupportedError(`gradient of tf.gather with batchDims ${batchDims} is not supported (only 0)`)
      }
      return {
        x: () => {
          const axis = rawAxis < 0 ? rawAxis + x!.rank : rawAxis
          const g = single(dy)
          const outer = x!.shape.slice(0, axis)
          const inner = x!.shape.slice(axis + 1)
          const count = indices!.size
          // dy: [outer, indices..., inner] -> [indices (flat), outer * inner] -> scatter-add rows.
          const dy3 = tf.reshape(g, [outer.reduce((n, d) => n * d, 1), count, inner.reduce((n, d) => n * d, 1)])
          const rows = tf.reshape(tf.transpose(dy3, [1, 0, 2]), [count, -1])
          const summed = tf.scatterND(tf.reshape(indices!, [count, 1]), rows, [
            x!.shape[axis] as number,
            rows.shape[1] as number,
          ])
          const restored = tf.reshape(summed, [x!.shape[axis] as number, ...outer, ...inner])
          const perm = [...outer.map((_, i) => i + 1), 0, ...inner.map((_, i) => outer.length + 1 + i)]
          return tf.transpose(restored, perm)
        },
        indices: () => tf.cast(tf.zerosLike(indices!), 'float32'),
      }
    },
  },
  {
    kernelName: 'GatherNd',
    inputsToSave: ['params', 'indices'],
    gradFunc: (dy, [params, indices]) => ({
      params: () => tf.scatterND(indices!, single(dy), params!.shape),
      indices: () => tf.cast(tf.zerosLike(indices!), 'float32'),
    }),
  },
  {
    kernelName: 'ScatterNd',
    inputsToSave: ['indices'],
    gradFunc: (dy, [indices]) => ({
      updates: () => tf.gatherND(single(dy), indices!),
      indices: () => tf.cast(tf.zerosLike(indices!), 'float32'),
    }),
  },
  // ---- matmul ----
  // With attnlab kernels registered (`@attnlab/core`, `kernelsActive()`), matmuls take the
  // transpose flags at full speed, so the gradient passes them. On stock tfjs-wasm only
  // untransposed matmuls reach XNNPACK, so there it uses explicit transposes instead.
  {
    kernelName: 'BatchMatMul',
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, [a, b], attrs) => {
      const { transposeA, transposeB } = attrs as unknown as { transposeA: boolean; transposeB: boolean }
      const g = single(dy)
      const mm = (x: tf.Tensor, y: tf.Tensor, tx = false, ty = false): tf.Tensor =>
        tf.matMul(x as tf.Tensor3D, y as tf.Tensor3D, tx, ty)
      let da: () => tf.Tensor
      let db: () => tf.Tensor
      if (kernelsActive()) {
        if (!transposeA && !transposeB) {
          da = () => mm(g, b!, false, true)
          db = () => mm(a!, g, true, false)
        } else if (!transposeA && transposeB) {
          da = () => mm(g, b!)
          db = () => mm(g, a!, true, false)
        } else if (transposeA && !transposeB) {
          da = () => mm(b!, g, false, true)
          db = () => mm(a!, g)
        } else {
          da = () => mm(b!, g, true, true)
          db = () => mm(g, a!, true, true)
        }
      } else if (!transposeA && !transposeB) {
        da = () => mm(g, swapLast(b!))
        db = () => mm(swapLast(a!), g)
      } else if (!transposeA && transposeB) {
        da = () => mm(g, b!)
        db = () => mm(swapLast(g), a!)
      } else if (transposeA && !transposeB) {
        da = () => mm(b!, swapLast(g))
        db = () => mm(a!, g)
      } else {
        da = () => mm(swapLast(b!), swapLast(g))
        db = () => mm(swapLast(g), swapLast(a!))
      }
      return { a: () => unbroadcast(da(), a!.shape), b: () => unbroadcast(db(), b!.shape) }
    },
  },
  // ---- no gradient (piecewise-constant or integer outputs): zeros for every input ----
  ...(
    [
      ['Equal', ['a', 'b']],
      ['NotEqual', ['a', 'b']],
      ['Greater', ['a', 'b']],
      ['GreaterEqual', ['a', 'b']],
      ['Less', ['a', 'b']],
      ['LessEqual', ['a', 'b']],
      ['OneHot', ['indices']],
      ['ZerosLike', ['x']],
      ['OnesLike', ['x']],
      ['Sign', ['x']],
      ['Floor', ['x']],
      ['Round', ['x']],
      ['ArgMax', ['x']],
      ['ArgMin', ['x']],
    ] as const
  ).map(([kernelName, inputs]) => ({
    kernelName,
    inputsToSave: [...inputs],
    gradFunc: ((_dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) =>
      Object.fromEntries(
        inputs.map((name, i) => [name, () => tf.zeros((saved[i] as tf.Tensor).shape, 'float32')]),
      )) as GradFunc,
  })),
]

/**
 * Registers gradients for the tfjs kernels attnlab's models use (elementwise arithmetic,
 * reductions, softmax, shape ops, gather/scatter, matmul), for every backend (tfjs gradients are
 * global). Idempotent; a kernel that already has a gradient (e.g. from `@tensorflow/tfjs`) keeps
 * it. Called by `useBackend`; nothing else needs to call it.
 *
 * @example
 * ```ts
 * await useBackend('cpu') // registers them
 * const g = tf.grad((x) => tf.sum(tf.tanh(x)))(tf.tensor1d([0, 1]))
 * ```
 * @category Kernels
 */
export function registerGradients(): void {
  if (registered) return
  for (const config of GRADIENTS) {
    if (tf.getGradient(config.kernelName) !== undefined && tf.getGradient(config.kernelName) !== null) continue
    tf.registerGradient(config as unknown as tf.GradConfig)
  }
  registered = true
}

/** The kernel names {@link registerGradients} covers (for tests and docs). @category Kernels */
export function registeredGradientKernels(): readonly string[] {
  return GRADIENTS.map((g) => g.kernelName)
}

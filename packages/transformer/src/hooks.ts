/**
 * Hook points: named places in the forward pass where an activation can be read or replaced,
 * with TransformerLens names and semantics (`transformer_lens/hook_points.py`,
 * `HookedRootModule.run_with_hooks` / `run_with_cache`). See `docs/architecture/hooks.md`.
 *
 * | name | shape |
 * | --- | --- |
 * | `hook_embed`, `hook_pos_embed` | `[batch, pos, dModel]` |
 * | `blocks.{l}.hook_resid_pre`, `hook_resid_mid`, `hook_resid_post` | `[batch, pos, dModel]` |
 * | `blocks.{l}.ln1.hook_normalized`, `ln2.hook_normalized` | `[batch, pos, dModel]` |
 * | `blocks.{l}.attn.hook_q`, `hook_rot_q` | `[batch, pos, nHeads, dHead]` |
 * | `blocks.{l}.attn.hook_k`, `hook_rot_k`, `hook_v` | `[batch, pos, nKvHeads, dHead]` |
 * | `blocks.{l}.attn.hook_attn_scores`, `hook_pattern` | `[batch, nHeads, queryPos, keyPos]` |
 * | `blocks.{l}.attn.hook_z` | `[batch, pos, nHeads, dHead]` |
 * | `blocks.{l}.attn.hook_result` | `[batch, pos, nHeads, dModel]` |
 * | `blocks.{l}.hook_attn_out`, `hook_mlp_out` | `[batch, pos, dModel]` |
 * | `blocks.{l}.mlp.hook_pre`, `hook_pre_linear`, `hook_post` | `[batch, pos, dMlp]` |
 * | `ln_final.hook_normalized` | `[batch, pos, dModel]` |
 *
 * @module
 */
import type * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError, ShapeError } from '@attnlab/core'

/**
 * The hook points inside block `l` (the part of the name after `blocks.{l}.`).
 *
 * @category Hooks
 */
export type BlockHookPoint =
  | 'hook_resid_pre'
  | 'hook_resid_mid'
  | 'hook_resid_post'
  | 'hook_attn_out'
  | 'hook_mlp_out'
  | 'ln1.hook_normalized'
  | 'ln2.hook_normalized'
  | 'attn.hook_q'
  | 'attn.hook_k'
  | 'attn.hook_v'
  | 'attn.hook_rot_q'
  | 'attn.hook_rot_k'
  | 'attn.hook_attn_scores'
  | 'attn.hook_pattern'
  | 'attn.hook_z'
  | 'attn.hook_result'
  | 'mlp.hook_pre'
  | 'mlp.hook_pre_linear'
  | 'mlp.hook_post'

/**
 * Every hook point name, TransformerLens style: `hook_embed`, `hook_pos_embed`,
 * `ln_final.hook_normalized`, or `blocks.${layer}.${BlockHookPoint}`.
 *
 * @category Hooks
 */
export type HookName =
  | 'hook_embed'
  | 'hook_pos_embed'
  | 'ln_final.hook_normalized'
  | `blocks.${number}.${BlockHookPoint}`

/**
 * The full name of one block-level hook point, e.g. `BlockHookName<'attn.hook_pattern'>` is
 * `` `blocks.${number}.attn.hook_pattern` ``.
 *
 * @category Hooks
 */
export type BlockHookName<P extends BlockHookPoint = BlockHookPoint> = `blocks.${number}.${P}`

/**
 * The full name of block `layer`'s hook point `point`.
 *
 * @param layer - the block index (0-based)
 * @param point - the hook point inside the block, e.g. `attn.hook_z`
 * @example
 * blockHookName(1, 'attn.hook_z') // 'blocks.1.attn.hook_z'
 * @category Hooks
 */
export function blockHookName<P extends BlockHookPoint>(layer: number, point: P): BlockHookName<P> {
  return `blocks.${layer}.${point}` as BlockHookName<P>
}

const at =
  <P extends BlockHookPoint>(point: P) =>
  (layer: number): BlockHookName<P> =>
    blockHookName(layer, point)

/**
 * Every hook name, declared once (TransformerLens names): constants for the model-level points and
 * one function per block-level point, each typed by its template literal.
 *
 * @example
 * hookName.pattern(0) // 'blocks.0.attn.hook_pattern', typed `blocks.${number}.attn.hook_pattern`
 * hookName.embed      // 'hook_embed'
 * @category Hooks
 */
export const hookName = Object.freeze({
  /** `hook_embed`: token embeddings, `[batch, pos, dModel]`. */
  embed: 'hook_embed',
  /** `hook_pos_embed`: learned (or one-hot) position embeddings, `[batch, pos, dModel]`. */
  posEmbed: 'hook_pos_embed',
  /** `ln_final.hook_normalized`: the final norm's output, `[batch, pos, dModel]`. */
  lnFinal: 'ln_final.hook_normalized',
  /** `blocks.{l}.hook_resid_pre` */
  residPre: at('hook_resid_pre'),
  /** `blocks.{l}.hook_resid_mid` */
  residMid: at('hook_resid_mid'),
  /** `blocks.{l}.hook_resid_post` */
  residPost: at('hook_resid_post'),
  /** `blocks.{l}.hook_attn_out` */
  attnOut: at('hook_attn_out'),
  /** `blocks.{l}.hook_mlp_out` */
  mlpOut: at('hook_mlp_out'),
  /** `blocks.{l}.ln1.hook_normalized` */
  ln1: at('ln1.hook_normalized'),
  /** `blocks.{l}.ln2.hook_normalized` */
  ln2: at('ln2.hook_normalized'),
  /** `blocks.{l}.attn.hook_q` */
  q: at('attn.hook_q'),
  /** `blocks.{l}.attn.hook_k` */
  k: at('attn.hook_k'),
  /** `blocks.{l}.attn.hook_v` */
  v: at('attn.hook_v'),
  /** `blocks.{l}.attn.hook_rot_q` */
  rotQ: at('attn.hook_rot_q'),
  /** `blocks.{l}.attn.hook_rot_k` */
  rotK: at('attn.hook_rot_k'),
  /** `blocks.{l}.attn.hook_attn_scores` */
  attnScores: at('attn.hook_attn_scores'),
  /** `blocks.{l}.attn.hook_pattern` */
  pattern: at('attn.hook_pattern'),
  /** `blocks.{l}.attn.hook_z` */
  z: at('attn.hook_z'),
  /** `blocks.{l}.attn.hook_result` */
  result: at('attn.hook_result'),
  /** `blocks.{l}.mlp.hook_pre` */
  mlpPre: at('mlp.hook_pre'),
  /** `blocks.{l}.mlp.hook_pre_linear` */
  mlpPreLinear: at('mlp.hook_pre_linear'),
  /** `blocks.{l}.mlp.hook_post` */
  mlpPost: at('mlp.hook_post'),
} as const)

/** All block-level hook points, in forward order. @category Hooks */
export const BLOCK_HOOK_POINTS: readonly BlockHookPoint[] = Object.freeze([
  'hook_resid_pre',
  'ln1.hook_normalized',
  'attn.hook_q',
  'attn.hook_k',
  'attn.hook_v',
  'attn.hook_rot_q',
  'attn.hook_rot_k',
  'attn.hook_attn_scores',
  'attn.hook_pattern',
  'attn.hook_z',
  'attn.hook_result',
  'hook_attn_out',
  'hook_resid_mid',
  'ln2.hook_normalized',
  'mlp.hook_pre',
  'mlp.hook_pre_linear',
  'mlp.hook_post',
  'hook_mlp_out',
  'hook_resid_post',
])

/**
 * What a hook receives besides the activation.
 *
 * @category Hooks
 */
export interface HookContext {
  /** The full hook name, e.g. `blocks.0.attn.hook_pattern`. */
  readonly name: HookName
  /** The block index for `blocks.{l}.*` hooks, else undefined. */
  readonly layer: number | undefined
}

/**
 * A forward hook: reads `activation` and may return a replacement of the same shape (returning
 * nothing keeps it). Called synchronously inside the forward pass's `tf.tidy`: a tensor it wants
 * to keep must be `tf.keep`ed (and later disposed) by the hook; the activation it receives is
 * disposed at the end of the pass.
 *
 * @category Hooks
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a hook with no return statement (void) keeps the activation
export type HookFunction = (activation: tf.Tensor, context: HookContext) => tf.Tensor | void

/** Which hook points a hook attaches to: one name, or a predicate over names. @category Hooks */
export type HookSelector = HookName | ((name: HookName) => boolean)

/** A `[selector, hook]` pair, as TransformerLens' `fwd_hooks`. @category Hooks */
export type ForwardHook = readonly [HookSelector, HookFunction]

/**
 * Short names accepted by {@link getActName} (TransformerLens' `get_act_name`), with its aliases
 * (`attn` = `pattern`, `attn_logits` = `attn_scores`).
 *
 * @category Hooks
 */
export type ActName =
  | 'embed'
  | 'pos_embed'
  | 'resid_pre'
  | 'resid_mid'
  | 'resid_post'
  | 'attn_out'
  | 'mlp_out'
  | 'q'
  | 'k'
  | 'v'
  | 'rot_q'
  | 'rot_k'
  | 'attn_scores'
  | 'attn_logits'
  | 'pattern'
  | 'attn'
  | 'z'
  | 'result'
  | 'pre'
  | 'pre_linear'
  | 'post'
  | 'normalized'
  | 'ln_final'

const ACT_PATHS: Readonly<Record<Exclude<ActName, 'embed' | 'pos_embed' | 'ln_final' | 'normalized'>, BlockHookPoint>> =
  {
    resid_pre: 'hook_resid_pre',
    resid_mid: 'hook_resid_mid',
    resid_post: 'hook_resid_post',
    attn_out: 'hook_attn_out',
    mlp_out: 'hook_mlp_out',
    q: 'attn.hook_q',
    k: 'attn.hook_k',
    v: 'attn.hook_v',
    rot_q: 'attn.hook_rot_q',
    rot_k: 'attn.hook_rot_k',
    attn_scores: 'attn.hook_attn_scores',
    attn_logits: 'attn.hook_attn_scores',
    pattern: 'attn.hook_pattern',
    attn: 'attn.hook_pattern',
    z: 'attn.hook_z',
    result: 'attn.hook_result',
    pre: 'mlp.hook_pre',
    pre_linear: 'mlp.hook_pre_linear',
    post: 'mlp.hook_post',
  }

/**
 * The full hook name for a short activation name and layer, as TransformerLens'
 * `get_act_name('pattern', 0) == 'blocks.0.attn.hook_pattern'`.
 *
 * @param name - short name (see {@link ActName}); `normalized` needs `layerType` `'ln1'`/`'ln2'`
 * @param layer - block index (required for block activations, ignored for `embed`, `pos_embed`, `ln_final`)
 * @param layerType - for `normalized`: `'ln1'`, `'ln2'` or `'ln_final'`
 * @returns the hook name
 * @throws `InvalidArgumentError` (`@attnlab/core`) for an unknown name or a missing/invalid layer
 * @example
 * ```ts
 * getActName('pattern', 0) // 'blocks.0.attn.hook_pattern'
 * getActName('embed')      // 'hook_embed'
 * ```
 * @category Hooks
 */
export function getActName(name: ActName, layer?: number, layerType?: 'ln1' | 'ln2' | 'ln_final'): HookName {
  if (name === 'embed') return 'hook_embed'
  if (name === 'pos_embed') return 'hook_pos_embed'
  if (name === 'ln_final' || (name === 'normalized' && layerType === 'ln_final')) return 'ln_final.hook_normalized'
  const needsLayer = (): number => {
    if (layer === undefined || !Number.isSafeInteger(layer) || layer < 0) {
      throw new InvalidArgumentError(`getActName('${name}') needs a layer index >= 0 (got ${String(layer)})`, {
        name,
        layer,
      })
    }
    return layer
  }
  if (name === 'normalized') {
    if (layerType !== 'ln1' && layerType !== 'ln2') {
      throw new InvalidArgumentError(
        `getActName('normalized') needs layerType 'ln1', 'ln2' or 'ln_final' (got ${String(layerType)})`,
      )
    }
    return `blocks.${needsLayer()}.${layerType}.hook_normalized`
  }
  const path = (ACT_PATHS as Record<string, BlockHookPoint | undefined>)[name]
  if (path === undefined) {
    throw new InvalidArgumentError(
      `'${String(name)}' is not an activation name; expected one of embed, pos_embed, ` +
        `${Object.keys(ACT_PATHS).join(', ')}, normalized, ln_final`,
      { name },
    )
  }
  return `blocks.${needsLayer()}.${path}`
}

/**
 * Parses a hook name.
 *
 * @returns `{ layer, point }` for block hooks, `{ layer: undefined, point: name }` otherwise, or
 *   undefined if `name` is not a hook name
 * @category Hooks
 */
export function parseHookName(name: string): { layer: number | undefined; point: string } | undefined {
  if (name === 'hook_embed' || name === 'hook_pos_embed' || name === 'ln_final.hook_normalized')
    return { layer: undefined, point: name }
  const match = /^blocks\.(\d+)\.(.+)$/.exec(name)
  if (match === null) return undefined
  const point = match[2] as string
  if (!(BLOCK_HOOK_POINTS as readonly string[]).includes(point)) return undefined
  return { layer: Number(match[1]), point }
}

/**
 * The list of hooks active during one forward pass. Models call {@link HookRunner.run} at every
 * hook point; the runner applies the matching hooks in order and checks each replacement's shape.
 *
 * @category Hooks
 */
export class HookRunner {
  private readonly hooks: readonly ForwardHook[]
  private readonly matchCache = new Map<string, HookFunction[]>()

  /** @param hooks - `[selector, hook]` pairs, applied in order */
  constructor(hooks: readonly ForwardHook[] = []) {
    this.hooks = hooks
  }

  /** Whether any hook is active. */
  get active(): boolean {
    return this.hooks.length > 0
  }

  private matching(name: HookName): HookFunction[] {
    let list = this.matchCache.get(name)
    if (list === undefined) {
      list = this.hooks
        .filter(([selector]) => (typeof selector === 'function' ? selector(name) : selector === name))
        .map(([, fn]) => fn)
      this.matchCache.set(name, list)
    }
    return list
  }

  /** Whether some hook is attached to `name`. */
  has(name: HookName): boolean {
    return this.hooks.length > 0 && this.matching(name).length > 0
  }

  /**
   * Applies the hooks attached to `name` to `activation`.
   *
   * @returns the (possibly replaced) activation
   * @throws `ShapeError` (`@attnlab/core`) when a hook returns a tensor of another shape
   */
  run<T extends tf.Tensor>(name: HookName, activation: T): T {
    if (this.hooks.length === 0) return activation
    const list = this.matching(name)
    if (list.length === 0) return activation
    const parsed = parseHookName(name)
    const context: HookContext = { name, layer: parsed?.layer }
    let current = activation
    for (const hook of list) {
      const replaced = hook(current, context)
      if (replaced === undefined || replaced === null) continue
      if (replaced.shape.length !== current.shape.length || replaced.shape.some((d, i) => d !== current.shape[i])) {
        throw new ShapeError(
          `hook at '${name}' returned shape [${replaced.shape.join(', ')}] but the activation has shape ` +
            `[${current.shape.join(', ')}]`,
          { hook: name, shape: [...replaced.shape], expected: [...current.shape] },
        )
      }
      current = replaced as T
    }
    return current
  }
}

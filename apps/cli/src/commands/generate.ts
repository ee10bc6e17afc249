/**
 * `attnlab generate`: text from a real checkpoint (llama2.c `.bin`, Hugging Face or attnlab
 * directory, training checkpoint) with KV-cached decoding.
 *
 * ```
 * attnlab generate --model model.bin --tokenizer tokenizer.bin --prompt "I dreamed" --max-tokens 60 --temperature 0
 * # --steps: llama2.c's -n
 * attnlab generate --model hf/ --tokenizer tokenizer.bin --steps 60 --temperature 0 --prompt "I dreamed"
 * # ids from BOS
 * attnlab generate --model model.bin --ids --max-tokens 12 --temperature 0
 * ```
 */
import { InvalidArgumentError, Option, type Command } from 'commander'
import { clampReportedSparsity, meanExtra, sizedConfig, targetReached, targetWarning } from '@attnlab/experiments'
import { budgetFor, SPARSE_METHODS, type SparseMethodName } from '@attnlab/sparse-attention'
import { generate, type AttentionReport, type LoadedModel, type Tokenizer } from '@attnlab/transformer'
import { UsageError } from '../errors.ts'
import { activateBackend, backendOption, intParser, MODEL_PATH_HELP, modelFlagPath, numberParser } from '../options.ts'
import { NO_DUMMY_PREFIX_HELP, TOKENIZER_HELP, loadModelWithTokenizerFlags } from '../tokenizer-flags.ts'
import { addMethodFlags, attentionKernelFromFlags } from './sparse.ts'

/**
 * The target sparsity `--attention` sizes its method for when `--sparsity` is not given (the
 * middle of the 0.5, 0.8, 0.95 that `sparse compare` sweeps by default).
 */
export const DEFAULT_GENERATE_SPARSITY = 0.8

/**
 * The configuration key of each method's size that the target sparsity sets (`budgetFor` in
 * `@attnlab/sparse-attention`): when the user gives it (`--token-budget`, `--capacity`, ...) the
 * target plays no part, so missing it is not warned about.
 */
const TARGET_SIZE_KEYS: Readonly<Partial<Record<SparseMethodName, readonly string[]>>> = {
  'vertical-slash': ['verticalSize', 'slashSize'],
  flexprefill: ['alpha'],
  'block-sparse': ['topK'],
  snapkv: ['capacity'],
  'ada-snapkv': ['capacity'],
  quest: ['tokenBudget'],
}

/**
 * Whether the user's method flags (by config key) set the size the target sparsity would
 * otherwise set ({@link TARGET_SIZE_KEYS}).
 *
 * @param method - the method
 * @param given - the user's values by config key
 */
function sizeGiven(method: SparseMethodName, given: Readonly<Record<string, unknown>>): boolean {
  return (TARGET_SIZE_KEYS[method] ?? []).some((key) => given[key] !== undefined)
}

/**
 * The `sparse compare` warning for each method of `--attention` that misses its target: prefill
 * methods measured on the prompt's forward pass (the first `nLayers` reports), decode methods
 * on the decode steps after it. Methods in `sized` (whose size the user gave without
 * `--sparsity`) are skipped: no target was asked of them.
 */
export function attentionWarnings(
  spec: string,
  reports: readonly AttentionReport[],
  nLayers: number,
  target: number,
  promptTokens: number,
  sized: ReadonlySet<string> = new Set(),
): string[] {
  const lines: string[] = []
  for (const method of spec.split('+').map((m) => m.trim()) as SparseMethodName[]) {
    const phase = SPARSE_METHODS[method].phase
    if (phase === null || sized.has(method)) continue
    const own = phase === 'prefill' ? reports.slice(0, nLayers) : reports.slice(nLayers)
    if (own.length === 0) continue // no decode step ran (one new token)
    const exact = meanExtra(own, 'exactSparsity')
    const reported = clampReportedSparsity(meanExtra(own, 'reportedSparsity')).clamped
    if (targetReached(target, exact, reported)) continue
    lines.push(targetWarning(method, target, exact, reported, promptTokens))
  }
  return lines
}

/**
 * The generated ids up to where they spell the EOS token out in ordinary pieces (TinyStories-656K
 * often writes `<|end_story|>` as `<`, `|`, `end`... before emitting EOS itself): `undefined` when
 * they do not.
 */
export function cutAtSpelledEos(tokenizer: Tokenizer, ids: readonly number[]): number[] | undefined {
  if (tokenizer.eosId === undefined) return undefined
  const marker = tokenizer.tokenText(tokenizer.eosId)
  if (marker === undefined || marker.length < 2) return undefined
  const at = tokenizer.decode(ids).indexOf(marker)
  if (at < 0) return undefined
  let keep = 0
  while (keep < ids.length && tokenizer.decode(ids.slice(0, keep + 1)).length <= at) keep++
  return ids.slice(0, keep)
}

/** Generation's own --top-k (sampling) collides with Block-Sparse's; the method flag is renamed. */
const METHOD_FLAG_RENAMES = { '--top-k': '--block-top-k' } as const

/** Options of `attnlab generate` as commander parses them. */
interface GenerateFlags {
  model: string
  tokenizer?: string
  dummyPrefix?: boolean
  prompt?: string
  promptIds?: number[]
  maxTokens?: number
  steps?: number
  temperature: number
  topK?: number
  topP?: number
  seed: number
  bos: boolean
  ignoreEos?: boolean
  ids?: boolean
  json?: boolean
  backend?: string
  attention?: string
  sparsity?: number
}

function idListParser(value: string): number[] {
  const parts = value.split(/[,\s]+/).filter((p) => p.length > 0)
  if (parts.length === 0 || parts.some((p) => !/^\d+$/.test(p))) {
    throw new InvalidArgumentError(`--prompt-ids must be token ids separated by commas or spaces, got '${value}'`)
  }
  return parts.map(Number)
}

/** The prompt's token ids: from --prompt-ids, else the tokenizer's encoding of --prompt (BOS first unless --no-bos). */
function promptIds(flags: GenerateFlags, loaded: LoadedModel): number[] {
  if (flags.promptIds !== undefined) {
    const dVocab = loaded.model.config.dVocab
    const at = flags.promptIds.findIndex((id) => id >= dVocab)
    if (at >= 0) {
      throw new UsageError(
        `--prompt-ids id ${flags.promptIds[at]} (number ${at + 1} of ${flags.promptIds.length}) is out of range: ` +
          `the model's vocabulary has ${dVocab} tokens (ids 0 .. ${dVocab - 1})`,
      )
    }
    return flags.promptIds
  }
  const tokenizer = loaded.tokenizer
  if (tokenizer === undefined) {
    if (flags.prompt === undefined || flags.prompt === '') {
      const bos = loaded.specialTokens.bos
      if (bos !== undefined && flags.bos) return [bos]
    }
    const hint = loaded.notes.find((note) => note.includes('tokenizer.model found'))
    throw new UsageError(
      `no tokenizer: none was given and no tokenizer.bin or tokenizer.json is beside ${flags.model}; pass ` +
        `--tokenizer PATH (a llama2.c tokenizer.bin or a Hugging Face tokenizer.json), or --prompt-ids with --ids` +
        `${hint === undefined ? '' : ` (${hint})`}`,
    )
  }
  return tokenizer.encode(flags.prompt ?? '', { bos: flags.bos })
}

/** `attnlab generate`: registers the command. */
export function registerGenerate(program: Command): void {
  const command = program
    .command('generate')
    .description(
      'generate text from a llama2.c .bin, a Hugging Face (llama/mistral/qwen2) or attnlab model directory, or a ' +
        'training checkpoint',
    )
    .requiredOption('--model <path>', MODEL_PATH_HELP)
    .option('--tokenizer <path>', TOKENIZER_HELP)
    .option('--no-dummy-prefix', NO_DUMMY_PREFIX_HELP)
    .option('--prompt <text>', 'prompt text (default: empty, i.e. start from BOS)')
    .option('--prompt-ids <ids>', 'prompt as token ids, e.g. 1,303,281 (instead of --prompt)', idListParser)
    .addOption(
      new Option('--max-tokens <n>', 'new tokens to generate (default 256; fewer if the context fills up)')
        .argParser(intParser('--max-tokens', 0))
        .conflicts('steps'),
    )
    .addOption(
      new Option(
        '--steps <n>',
        "positions in total, prompt included, as llama2.c's -n (generates steps + 1 - prompt length tokens)",
      ).argParser(intParser('--steps', 1)),
    )
    .option('--temperature <t>', 'softmax temperature; 0 = greedy', numberParser('--temperature', 0, 100), 1)
    .option('--top-k <k>', 'sample from the k most likely tokens only', intParser('--top-k', 1))
    .option(
      '--top-p <p>',
      'nucleus sampling: the smallest set of tokens with probability >= p, in (0, 1]',
      numberParser('--top-p', 0, 1, { minExclusive: true }),
    )
    .option(
      '--seed <n>',
      'sampling seed (same seed, same text on cpu)',
      intParser('--seed', 0, Number.MAX_SAFE_INTEGER),
      0,
    )
    .option('--no-bos', 'do not prepend BOS to the encoded prompt')
    .option(
      '--ignore-eos',
      'keep generating after EOS or BOS (by default generation stops there, and the text ends where it spells the ' +
        'EOS token out; llama2.c stops at BOS)',
    )
    .option('--ids', 'print the generated token ids (space-separated) instead of the text')
    .option('--json', 'print a JSON summary (prompt ids, generated ids, text, stop reason, tokens/s)')
    .addOption(backendOption())
    .option(
      '--attention <method>',
      'attention method: dense (default), vertical-slash, flexprefill, block-sparse, snapkv, ada-snapkv, quest, or ' +
        'prefill+decode (e.g. vertical-slash+quest); method flags as in `attnlab sparse apply` (Block-Sparse top-k ' +
        'is --block-top-k here)',
    )
  command.option(
    '--sparsity <s>',
    "with --attention: the target sparsity in [0, 1) the method's sizes are set for, on this prompt, " +
      `as in \`sparse compare\` (default ${DEFAULT_GENERATE_SPARSITY}; size flags given win); ` +
      'a warning names what a short prompt achieved instead (none when a size flag, not the target, sets the size)',
    numberParser('--sparsity', 0, 1),
  )
  // The attention-method flags are the options addMethodFlags adds (from the methods' schemas): no key list to keep.
  const ownOptions = command.options.length
  const methodOptions = addMethodFlags(command, METHOD_FLAG_RENAMES).options.slice(ownOptions)
  command.action(async (flags: GenerateFlags) => {
    if (flags.prompt !== undefined && flags.promptIds !== undefined)
      throw new UsageError('give --prompt or --prompt-ids, not both')
    if (flags.topP !== undefined && flags.topP <= 0)
      throw new UsageError(`--top-p must be in (0, 1], got ${flags.topP}`)
    const methodFlags = flags as unknown as Record<string, unknown>
    if (flags.sparsity !== undefined && flags.attention === undefined) {
      throw new UsageError('--sparsity needs --attention METHOD')
    }
    if (flags.sparsity !== undefined && flags.sparsity >= 1) {
      throw new UsageError(`--sparsity must be in [0, 1), got ${flags.sparsity}`)
    }
    const target = flags.sparsity ?? DEFAULT_GENERATE_SPARSITY
    // Built once now so that flag errors stop before the model loads, with the sizes a one-token prompt gets (the
    // budget rules scale local windows and prefixes with the prompt, as `sparse compare` does): only the values the
    // user gave can conflict here. Sized for the real prompt below.
    if (flags.attention !== undefined) {
      attentionKernelFromFlags(flags.attention, methodFlags, METHOD_FLAG_RENAMES, (method, given) => ({
        ...budgetFor(method, 1, target, given).config,
        ...given,
      }))
    }
    if (flags.attention === undefined) {
      const stray = methodOptions.filter((option) => command.getOptionValueSource(option.attributeName()) === 'cli')
      if (stray.length > 0)
        throw new UsageError(
          `attention-method flags need --attention METHOD (got ${stray.map((option) => option.long).join(', ')})`,
        )
    }
    const backend = await activateBackend(flags.backend)
    const loaded = await loadModelWithTokenizerFlags(await modelFlagPath(flags.model), flags)
    const { model, tokenizer } = loaded
    try {
      const prompt = promptIds(flags, loaded)
      if (prompt.length === 0)
        throw new UsageError('the prompt is empty and --no-bos was given: generation needs at least one token')
      const { nCtx } = model.config
      if (prompt.length > nCtx)
        throw new UsageError(`the prompt has ${prompt.length} tokens but the model's context is ${nCtx}`)
      const sized = new Set<string>()
      const attention =
        flags.attention === undefined
          ? undefined
          : attentionKernelFromFlags(flags.attention, methodFlags, METHOD_FLAG_RENAMES, (method, given) => {
              if (flags.sparsity === undefined && sizeGiven(method, given)) sized.add(method)
              return sizedConfig(model, prompt, method, target, given)
            })
      const maxTokens =
        flags.steps !== undefined ? Math.max(0, flags.steps + 1 - prompt.length) : (flags.maxTokens ?? 256)
      const stops =
        flags.ignoreEos === true
          ? []
          : [
              ...new Set([
                ...(loaded.specialTokens.eos ?? []),
                ...(loaded.specialTokens.bos === undefined ? [] : [loaded.specialTokens.bos]),
              ]),
            ]
      const started = performance.now()
      const result = await generate(model, prompt, {
        maxTokens,
        temperature: flags.temperature,
        seed: flags.seed,
        ...(flags.topK === undefined ? {} : { topK: flags.topK }),
        ...(flags.topP === undefined ? {} : { topP: flags.topP }),
        ...(stops.length === 0 ? {} : { eosToken: stops }),
        ...(attention === undefined ? {} : { attention }),
      })
      const computed = result.attentionReports.reduce((sum, r) => sum + r.computedPairs, 0)
      const total = result.attentionReports.reduce((sum, r) => sum + r.totalPairs, 0)
      const seconds = (performance.now() - started) / 1000
      const { nLayers } = model.config
      const warnings =
        flags.attention === undefined
          ? []
          : attentionWarnings(flags.attention, result.attentionReports, nLayers, target, prompt.length, sized)
      let ids = [...(result.tokens[0] ?? [])]
      let stopReason: string | undefined = result.stopReasons[0]
      const spelled = tokenizer === undefined || flags.ignoreEos === true ? undefined : cutAtSpelledEos(tokenizer, ids)
      if (spelled !== undefined) {
        ids = spelled
        stopReason = 'eos-text'
      }
      const text = tokenizer?.decode([...prompt, ...ids])
      if (flags.json) {
        console.log(
          JSON.stringify(
            {
              model: flags.model,
              format: loaded.format,
              tokenizer: loaded.tokenizerPath ?? null,
              backend,
              promptIds: prompt,
              ids,
              text: text ?? null,
              stopReason,
              seconds,
              tokensPerSecond: ids.length / seconds,
              attention: flags.attention ?? 'dense',
              attentionConfig: attention?.config ?? null,
              targetSparsity: flags.attention === undefined ? null : target,
              attentionSparsity: total > 0 ? 1 - computed / total : 0,
              warnings,
              notes: loaded.notes,
            },
            null,
            2,
          ),
        )
        return
      }
      if (flags.ids || text === undefined) {
        if (!flags.ids) throw new UsageError('no tokenizer to turn ids into text; pass --tokenizer PATH or --ids')
        console.log(ids.join(' '))
      } else console.log(text)
      if (attention !== undefined) {
        const skipped = ((1 - computed / Math.max(total, 1)) * 100).toFixed(1)
        console.error(`attention ${flags.attention}: ${skipped}% of causal query-key pairs skipped`)
        for (const line of warnings) console.error(line)
      }
    } finally {
      model.dispose()
    }
  })
}

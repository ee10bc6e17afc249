/**
 * `attnlab generate`: text from a real checkpoint (llama2.c `.bin`, Hugging Face or attnlab
 * directory, training checkpoint) with KV-cached decoding.
 *
 * ```
 * attnlab generate --model model.bin --tokenizer tokenizer.bin --prompt "I dreamed" --max-tokens 60 --temperature 0
 * attnlab generate --model hf/ --tokenizer tokenizer.bin --steps 60 --temperature 0 --prompt "I dreamed"   # llama2.c's -n 60
 * attnlab generate --model model.bin --ids --max-tokens 12 --temperature 0                                  # ids from BOS
 * ```
 */
import { InvalidArgumentError, Option, type Command } from 'commander'
import { generate, loadModel, type LoadedModel } from '@attnlab/transformer'
import { UsageError } from '../errors.ts'
import { activateBackend, backendOption, intParser, MODEL_PATH_HELP, numberParser } from '../options.ts'
import { addMethodFlags, attentionKernelFromFlags } from './sparse.ts'

/** Generation's own --top-k (sampling) collides with Block-Sparse's; the method flag is renamed. */
const METHOD_FLAG_RENAMES = { '--top-k': '--block-top-k' } as const

/** Options of `attnlab generate` as commander parses them. */
interface GenerateFlags {
  model: string
  tokenizer?: string
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
  if (flags.promptIds !== undefined) return flags.promptIds
  const tokenizer = loaded.tokenizer
  if (tokenizer === undefined) {
    if (flags.prompt === undefined || flags.prompt === '') {
      const bos = loaded.specialTokens.bos
      if (bos !== undefined && flags.bos) return [bos]
    }
    const hint = loaded.notes.find((note) => note.includes('tokenizer.bin files only'))
    throw new UsageError(
      `no tokenizer: none was given and no tokenizer.bin is beside ${flags.model}; pass --tokenizer PATH (a llama2.c tokenizer.bin), or --prompt-ids with --ids${hint === undefined ? '' : ` (${hint})`}`,
    )
  }
  return tokenizer.encode(flags.prompt ?? '', { bos: flags.bos })
}

/** `attnlab generate`: registers the command. */
export function registerGenerate(program: Command): void {
  const command = program
    .command('generate')
    .description('generate text from a llama2.c .bin, a Hugging Face (llama/mistral/qwen2) or attnlab model directory, or a training checkpoint')
    .requiredOption('--model <path>', MODEL_PATH_HELP)
    .option('--tokenizer <path>', 'a llama2.c tokenizer.bin (default: tokenizer.bin beside the model, if any)')
    .option('--prompt <text>', 'prompt text (default: empty, i.e. start from BOS)')
    .option('--prompt-ids <ids>', 'prompt as token ids, e.g. 1,303,281 (instead of --prompt)', idListParser)
    .addOption(new Option('--max-tokens <n>', 'new tokens to generate (default 256; fewer if the context fills up)').argParser(intParser('--max-tokens', 0)).conflicts('steps'))
    .addOption(new Option('--steps <n>', "positions in total, prompt included, as llama2.c's -n (generates steps + 1 - prompt length tokens)").argParser(intParser('--steps', 1)))
    .option('--temperature <t>', 'softmax temperature; 0 = greedy', numberParser('--temperature', 0), 1)
    .option('--top-k <k>', 'sample from the k most likely tokens only', intParser('--top-k', 1))
    .option('--top-p <p>', 'nucleus sampling: the smallest set of tokens with probability >= p, in (0, 1]', numberParser('--top-p', 0, 1))
    .option('--seed <n>', 'sampling seed (same seed, same text on cpu)', intParser('--seed', 0, Number.MAX_SAFE_INTEGER), 0)
    .option('--no-bos', 'do not prepend BOS to the encoded prompt')
    .option('--ignore-eos', 'keep generating after EOS or BOS (by default generation stops there; llama2.c stops at BOS)')
    .option('--ids', 'print the generated token ids (space-separated) instead of the text')
    .option('--json', 'print a JSON summary (prompt ids, generated ids, text, stop reason, tokens/s)')
    .addOption(backendOption())
    .option('--attention <method>', 'attention method: dense (default), vertical-slash, flexprefill, block-sparse, snapkv, ada-snapkv, quest, or prefill+decode (e.g. vertical-slash+quest); method flags as in `attnlab sparse apply` (Block-Sparse top-k is --block-top-k here)')
  addMethodFlags(command, METHOD_FLAG_RENAMES)
  command.action(async (flags: GenerateFlags) => {
      if (flags.prompt !== undefined && flags.promptIds !== undefined) throw new UsageError('give --prompt or --prompt-ids, not both')
      if (flags.topP !== undefined && flags.topP <= 0) throw new UsageError(`--top-p must be in (0, 1], got ${flags.topP}`)
      const attention = flags.attention === undefined ? undefined : attentionKernelFromFlags(flags.attention, flags as unknown as Record<string, unknown>, METHOD_FLAG_RENAMES)
      if (flags.attention === undefined) {
        const stray = Object.keys(flags).filter((key) => command.getOptionValueSource(key) === 'cli' && !KNOWN_GENERATE_KEYS.has(key))
        if (stray.length > 0) throw new UsageError(`attention-method flags need --attention METHOD (got ${stray.map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`).join(', ')})`)
      }
      const backend = await activateBackend(flags.backend)
      const loaded = await loadModel(flags.model, flags.tokenizer === undefined ? {} : { tokenizer: flags.tokenizer })
      const { model, tokenizer } = loaded
      try {
        const prompt = promptIds(flags, loaded)
        if (prompt.length === 0) throw new UsageError('the prompt is empty and --no-bos was given: generation needs at least one token')
        const { nCtx } = model.config
        if (prompt.length > nCtx) throw new UsageError(`the prompt has ${prompt.length} tokens but the model's context is ${nCtx}`)
        const maxTokens = flags.steps !== undefined ? Math.max(0, flags.steps + 1 - prompt.length) : (flags.maxTokens ?? 256)
        const stops = flags.ignoreEos === true ? [] : [...new Set([...(loaded.specialTokens.eos ?? []), ...(loaded.specialTokens.bos === undefined ? [] : [loaded.specialTokens.bos])])]
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
        const ids = [...(result.tokens[0] ?? [])]
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
                stopReason: result.stopReasons[0],
                seconds,
                tokensPerSecond: ids.length / seconds,
                attention: flags.attention ?? 'dense',
                attentionSparsity: total > 0 ? 1 - computed / total : 0,
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
          return
        }
        console.log(text)
        if (attention !== undefined) console.error(`attention ${flags.attention}: ${((1 - computed / Math.max(total, 1)) * 100).toFixed(1)}% of causal query-key pairs skipped`)
      } finally {
        model.dispose()
      }
  })
}

/** Flags of generate itself (anything else given on the command line is a method flag). */
const KNOWN_GENERATE_KEYS = new Set(['model', 'tokenizer', 'prompt', 'promptIds', 'maxTokens', 'steps', 'temperature', 'topK', 'topP', 'seed', 'bos', 'ignoreEos', 'ids', 'json', 'backend', 'attention'])

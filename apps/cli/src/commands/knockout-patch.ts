/**
 * `attnlab knockout patch --from LATE --into EARLY`: causal patching between two checkpoints of
 * one run (`@attnlab/knockout`'s `patchHeadsBetween`; Baherwani et al., arXiv 2606.25010,
 * section 5): each head's attention scores copied from the donor (`--from`, e.g. after an
 * emergence) into the recipient (`--into`, before it), and the change in p(target) per head, as a
 * table and a heatmap (`--plot FILE.html`).
 *
 * ```
 * attnlab knockout patch --from runs/late --into runs/early [--capability task] [--count 128] \
 *   [--heads L0H1,L0H2] [--at attn_scores|pattern] [--plot patch.html] [--json]
 * ```
 *
 * A checkpoint is an attnlab checkpoint directory (`attnlab train --out`), an emergence run
 * directory with one seed (its `seeds/<seed>/checkpoint`) or a sweep trial's directory.
 */
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { InvalidArgumentError, Option, type Command } from 'commander'
import { writeFileAtomic } from '@attnlab/core/node'
import {
  PATCH_POINTS,
  builtinCapability,
  formatHead,
  heatmapSpec,
  parseCapabilityName,
  parseHeads,
  patchHeadsBetween,
  patchingHeatmap,
  taskFromDescription,
  type PatchingResult,
  type PatchPoint,
} from '@attnlab/knockout'
import { createTransformer, type Transformer } from '@attnlab/transformer'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { UsageError } from '../errors.ts'
import { activateBackend, backendOption, checkOutputFile, forceOption, intParser } from '../options.ts'
import { renderSvg, type PlotSpec } from '../plot.ts'

/** Flags of `knockout patch`. */
interface PatchFlags {
  from: string
  into: string
  capability: string
  count?: number
  evalSeed: number
  heads?: string
  at: PatchPoint
  together?: boolean
  plot?: string
  force?: boolean
  json?: boolean
  backend?: string
}

/**
 * The checkpoint directory a `--from` / `--into` path names: a checkpoint (its `manifest.json`), an emergence run
 * with one seed (`seeds/<seed>/checkpoint`), or a directory holding `checkpoint/` (a sweep's train trial).
 */
function checkpointDirectory(flag: string, path: string): string {
  if (!existsSync(path) || !statSync(path).isDirectory()) {
    throw new UsageError(`${flag} ${path}: no such directory (give a checkpoint or run directory)`)
  }
  if (existsSync(join(path, 'manifest.json'))) return path
  const seeds = join(path, 'seeds')
  if (existsSync(seeds) && statSync(seeds).isDirectory()) {
    const found = readdirSync(seeds).filter((seed) => existsSync(join(seeds, seed, 'checkpoint', 'manifest.json')))
    if (found.length === 1) return join(seeds, found[0] as string, 'checkpoint')
    if (found.length > 1) {
      throw new UsageError(
        `${flag} ${path} is a run of ${found.length} seeds (${found.join(', ')}); give one seed's checkpoint, ` +
          `e.g. ${join(path, 'seeds', found[0] as string, 'checkpoint')}`,
      )
    }
  }
  if (existsSync(join(path, 'checkpoint', 'manifest.json'))) return join(path, 'checkpoint')
  throw new UsageError(
    `${flag} ${path} is not an attnlab checkpoint (no manifest.json) nor a run directory holding one ` +
      '(seeds/<seed>/checkpoint or checkpoint/)',
  )
}

/** A JSON value with its object keys sorted, as text (two task descriptions compare equal when this does). */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  )
}

interface Loaded {
  readonly model: Transformer
  readonly task: unknown
  readonly step: number | null
  readonly directory: string
}

async function load(flag: string, path: string): Promise<Loaded> {
  const directory = checkpointDirectory(flag, path)
  const checkpoint = await loadCheckpoint(directory)
  if (checkpoint.extra.task === undefined) {
    throw new UsageError(
      `${flag} ${path}: the checkpoint records no training task (patching scores the task's targets; give a ` +
        'checkpoint of attnlab train or attnlab emergence)',
    )
  }
  const model = createTransformer(checkpoint.config)
  model.setWeights(checkpoint.weights)
  return { model, task: checkpoint.extra.task, step: checkpoint.trainerState?.step ?? null, directory }
}

function headListSyntax(value: string): string {
  const parts = value.split(',').map((s) => s.trim())
  if (parts.length === 0 || parts.some((p) => !/^(\d+\.\d+|[lL]\d+[hH]\d+)$/.test(p))) {
    const expected = 'a comma-separated list of heads, L<layer>H<head> or layer.head (e.g. L0H1,L2H3 or 0.1,2.3)'
    throw new InvalidArgumentError(`--heads must be ${expected}, got '${value}'`)
  }
  return value
}

const escapeHtml = (text: string): string =>
  text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c] as string)

/** The table the command prints, one line per patched head. */
function tableLines(result: PatchingResult): string[] {
  const lines = [`  ${'head'.padEnd(6)} ${'before'.padStart(9)} ${'after'.padStart(9)} ${'change'.padStart(9)}`]
  const row = (name: string, patch: { before: number; after: number; delta: number }): string =>
    `  ${name.padEnd(6)} ${patch.before.toFixed(4).padStart(9)} ${patch.after.toFixed(4).padStart(9)} ` +
    `${patch.delta >= 0 ? '+' : ''}${patch.delta.toFixed(4)}`.padStart(9)
  for (const head of result.heads) lines.push(row(formatHead(head), head))
  if (result.together !== null) lines.push(row('all', result.together))
  return lines
}

/** A self-contained HTML page: the heading, the table and the heatmap (inline SVG) with its Vega-Lite spec. */
async function patchingPage(title: string, summary: string[], result: PatchingResult): Promise<string> {
  const spec = heatmapSpec(patchingHeatmap(result), `change in p(target) per patched head (${result.at})`)
  const svg = await renderSvg(spec as unknown as PlotSpec)
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:60em}pre{background:#f6f6f6;padding:1em}</style>
</head><body>
<h1>${escapeHtml(title)}</h1>
<pre>${escapeHtml([...summary, ...tableLines(result)].join('\n'))}</pre>
${svg}
<script type="application/vnd.vegalite+json">${JSON.stringify(spec).replace(/</g, '\\u003c')}</script>
</body></html>
`
}

/** `attnlab knockout patch`: registers the subcommand on `knockout`. */
export function registerKnockoutPatch(knockout: Command): void {
  knockout
    .command('patch')
    .description(
      "copy each head's attention scores from one checkpoint (--from, e.g. after an emergence) into another of the " +
        'same run (--into, before it) and report the change in p(target) per head',
    )
    .requiredOption('--from <dir>', 'the donor checkpoint (or run directory) whose heads are copied')
    .requiredOption('--into <dir>', 'the recipient checkpoint (or run directory) patched, one head at a time')
    .option(
      '--capability <name>',
      "the sequences scored: a built-in capability of the recipient's task (task, span-i, ...)",
      'task',
    )
    .option('--count <n>', 'sequences in the evaluation set (default 128)', intParser('--count', 1, 1 << 20))
    .option('--eval-seed <n>', 'seed of the evaluation set', intParser('--eval-seed', 0, Number.MAX_SAFE_INTEGER), 0)
    .option('--heads <list>', 'heads to patch, L<layer>H<head> or layer.head (default: every head)', headListSyntax)
    .addOption(
      new Option(
        '--at <point>',
        'patch the pre-softmax scores (attn_scores: blocks.{l}.attn.hook_attn_scores) or their softmax (pattern)',
      )
        .choices([...PATCH_POINTS])
        .default('attn_scores'),
    )
    .option('--together', 'also patch every listed head at once (the row "all")')
    .option('--plot <file.html>', 'write the table and a per-head heatmap of the change as an HTML page')
    .addOption(forceOption('an existing --plot file'))
    .option('--json', 'print JSON to stdout')
    .addOption(backendOption())
    .addHelpText(
      'after',
      '\np(target) is the probability the model gives the target token, averaged over the scored positions of the\n' +
        "evaluation set (from the recipient's training task). 'before' is the recipient unpatched, 'after' with\n" +
        "the donor's scores for that head, change = after - before. An emergence or train run keeps only its latest\n" +
        'checkpoint: for a pre-emergence one, run a few steps first and copy the directory before resuming it\n' +
        '(docs/experiments/patching.md).',
    )
    .action(async (flags: PatchFlags) => {
      parseCapabilityName(flags.capability)
      const plotPath = flags.plot === undefined ? null : checkOutputFile('--plot', flags.plot, '.html', flags.force)
      checkpointDirectory('--from', flags.from)
      checkpointDirectory('--into', flags.into)
      await activateBackend(flags.backend)
      const donor = await load('--from', flags.from)
      let recipient: Loaded | null = null
      try {
        recipient = await load('--into', flags.into)
        if (canonical(donor.task) !== canonical(recipient.task)) {
          throw new UsageError(
            `--from and --into were trained on different tasks (${canonical(donor.task)} and ` +
              `${canonical(recipient.task)}); patching compares two checkpoints of one run`,
          )
        }
        const { config } = recipient.model
        const capability = builtinCapability(
          flags.capability,
          { dVocab: config.dVocab, nCtx: config.nCtx, task: taskFromDescription(recipient.task) },
          { seed: flags.evalSeed, ...(flags.count === undefined ? {} : { count: flags.count }) },
        )
        const heads = flags.heads === undefined ? undefined : parseHeads(flags.heads, config)
        const result = await patchHeadsBetween(recipient.model, donor.model, capability.data, {
          at: flags.at,
          together: flags.together === true,
          ...(heads === undefined ? {} : { heads }),
        })
        const stepText = (loaded: Loaded): string => (loaded.step === null ? '' : ` (step ${loaded.step})`)
        const summary = [
          `donor ${donor.directory}${stepText(donor)} -> recipient ${recipient.directory}${stepText(recipient)}`,
          `${capability.name}: ${result.scored} scored positions of ${capability.data.count} sequences; patched at ` +
            result.hook,
          `p(target) unpatched: recipient ${result.recipient.toFixed(4)}, donor ${result.donor.toFixed(4)}`,
        ]
        if (plotPath !== null) {
          await writeFileAtomic(plotPath, await patchingPage('attnlab knockout patch', summary, result))
        }
        if (flags.json) {
          console.log(
            JSON.stringify(
              {
                from: donor.directory,
                into: recipient.directory,
                fromStep: donor.step,
                intoStep: recipient.step,
                capability: capability.name,
                sequences: capability.data.count,
                scored: result.scored,
                at: result.at,
                hook: result.hook,
                recipient: result.recipient,
                donor: result.donor,
                heads: result.heads.map((h) => ({
                  head: formatHead(h),
                  layer: h.layer,
                  headInLayer: h.head,
                  before: h.before,
                  after: h.after,
                  delta: h.delta,
                })),
                together: result.together,
                forwardPasses: result.forwardPasses,
                seconds: result.seconds,
                plot: plotPath,
              },
              null,
              2,
            ),
          )
          return
        }
        for (const line of [...summary, ...tableLines(result)]) console.log(line)
        if (plotPath !== null) console.log(`heatmap: ${plotPath}`)
      } finally {
        donor.model.dispose()
        recipient?.model.dispose()
      }
    })
}

/**
 * `attnlab knockout`: find the few attention heads a capability needs (`@attnlab/knockout`;
 * Bair, Xu, Sun & Kolter, arXiv 2603.03335).
 *
 * ```
 * attnlab knockout capabilities --model PATH
 * attnlab knockout locate --model PATH --capability induction [--method cs|exhaustive|greedy] \
 *   [--masks M --fraction F --top 5 --seed 0] [--plot heads.svg] --json
 * attnlab knockout ablate --model PATH --heads L0H1,L2H3 --mode zero|mean|resample --capabilities induction,text --json
 * attnlab knockout patch --from RUN_OR_CHECKPOINT --into RUN_OR_CHECKPOINT [--heads ...] [--plot patch.html]
 * ```
 *
 * PATH is an attnlab checkpoint directory (its training task gives `task`, `span-i` and mixture
 * component capabilities), an emergence run directory (its first seed's checkpoint) or any model
 * `loadModel` reads (llama2.c `.bin`, Hugging Face directory). Locating always reports the effect
 * of knocking out the top heads on the target and on every control capability.
 */
import { readFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { InvalidArgumentError, Option, type Command } from 'commander'
import { writeFileAtomic } from '@attnlab/core/node'
import { fieldInfo, type z } from '@attnlab/core/schema'
import {
  builtinCapability,
  capabilityOptionsSchema,
  builtinCapabilityNames,
  compressedSensing,
  compressedSensingOptionsSchema,
  crossValidateOptionsSchema,
  exhaustivePairBudget,
  exhaustiveSweep,
  absentCapability,
  formatHead,
  greedySearch,
  headCount,
  headHeatmap,
  heatmapSpec,
  knockoutEffects,
  localizeOptionsSchema,
  measurementPlan,
  parseCapabilityName,
  parseHeads,
  taskFromDescription,
  type AblationMode,
  type BuiltinContext,
  type Capability,
  type EffectsReport,
  type CompressedSensingResult,
  type LocalizationResult,
} from '@attnlab/knockout'
import type { Task } from '@attnlab/markov'
import type { LoadedModel } from '@attnlab/transformer'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { UsageError } from '../errors.ts'
import { registerKnockoutPatch } from './knockout-patch.ts'
import {
  activateBackend,
  backendOption,
  checkOutputFile,
  forceOption,
  intParser,
  MODEL_PATH_HELP,
  modelFlagPath,
} from '../options.ts'
import { renderSvg, type PlotSpec } from '../plot.ts'
import { rangeParser, schemaFieldOption } from '../schema-flags.ts'
import { NO_DUMMY_PREFIX_HELP, TOKENIZER_HELP, loadModelWithTokenizerFlags } from '../tokenizer-flags.ts'

const METHODS = ['cs', 'exhaustive', 'greedy'] as const

/** The fields of `compressedSensing`'s options the cs flags set (their help, ranges and defaults). */
const CS = compressedSensingOptionsSchema.shape

/** The help of a cs-only flag: `cs: ` and the field's meaning, then what the CLI adds. */
function csHelp(field: z.ZodType, more = ''): string {
  return `cs: ${fieldInfo(field).help}${more}`
}

/**
 * `--cv [folds]`: cross-validation on (`--cv`, the schema's default folds) or with K folds (the schema's range,
 * at most 1000: more folds than that is a typo, not a fit).
 */
function crossValidateOption(): Option {
  const folds = fieldInfo(crossValidateOptionsSchema.shape.folds)
  return new Option(
    '--cv [folds]',
    `cs: choose alpha by K-fold cross-validation (default ${String(folds.defaultValue)} folds)`,
  ).argParser(rangeParser('--cv', { ...folds.range, max: 1000 }))
}

/** Flags shared by the subcommands. */
interface CommonFlags {
  model: string
  tokenizer?: string
  dummyPrefix?: boolean
  text?: string
  count?: number
  evalSeed: number
  mode: AblationMode
  json?: boolean
  backend?: string
}

/** Flags of `knockout locate`. */
interface LocateFlags extends CommonFlags {
  capability: string
  method: (typeof METHODS)[number]
  masks?: number
  fraction?: number
  design: 'balanced' | 'iid'
  top: number
  seed: number
  alpha: number
  cv?: number | boolean
  controls?: string
  plot?: string
  force?: boolean
}

/** Flags of `knockout ablate`. */
interface AblateFlags extends CommonFlags {
  heads: string
  capabilities?: string
  target?: string
}

function listParser(flag: string): (value: string) => string[] {
  return (value: string) => {
    const items = value
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0)
    if (items.length === 0) throw new InvalidArgumentError(`${flag} must be a comma-separated list, got '${value}'`)
    return items.flat()
  }
}

function headListSyntax(value: string): string {
  const parts = value.split(',').map((s) => s.trim())
  if (parts.length === 0 || parts.some((p) => !/^(\d+\.\d+|[lL]\d+[hH]\d+)$/.test(p))) {
    const expected = 'a comma-separated list of heads, L<layer>H<head> or layer.head (e.g. L0H1,L2H3 or 0.1,2.3)'
    throw new InvalidArgumentError(`--heads must be ${expected}, got '${value}'`)
  }
  return value
}

/** Checks that `--plot` names an .svg file in an existing directory, new unless `--force` (before any work). */
function checkPlotPath(path: string, force: boolean | undefined): string {
  return checkOutputFile('--plot', path, '.svg', force)
}

/** A model with what the knockout needs to know about it. */
interface Prepared {
  readonly loaded: LoadedModel
  readonly context: BuiltinContext
}

async function prepare(flags: CommonFlags): Promise<Prepared> {
  let sentences: string[] | undefined
  if (flags.text !== undefined) {
    let raw: string
    try {
      raw = await readFile(flags.text, 'utf8')
    } catch (error) {
      throw new UsageError(`--text: cannot read '${flags.text}' (${(error as Error).message})`)
    }
    sentences = raw
      .split(/\r?\n/)
      .map((s) => s.trim())
      .filter((s) => s.length > 0)
    if (sentences.length === 0) throw new UsageError(`--text: '${flags.text}' holds no non-empty line`)
  }
  const modelPath = await modelFlagPath(flags.model)
  const loaded = await loadModelWithTokenizerFlags(modelPath, flags)
  try {
    const { dVocab, nCtx } = loaded.model.config
    let task: Task | undefined
    if (loaded.format === 'checkpoint') {
      const { extra } = await loadCheckpoint(
        modelPath.endsWith('.json') || modelPath.endsWith('.safetensors') ? dirname(modelPath) : modelPath,
      )
      if (extra.task !== undefined) task = taskFromDescription(extra.task)
    }
    const tokenizer = loaded.tokenizer
    const specials = [loaded.specialTokens.bos, ...(loaded.specialTokens.eos ?? [])].filter(
      (t): t is number => t !== undefined,
    )
    let tokenPool: number[] | undefined
    if (tokenizer !== undefined) {
      // Ordinary word pieces only: no special tokens and no byte-fallback pieces such as <0x0A>.
      tokenPool = []
      for (let id = 0; id < Math.min(dVocab, tokenizer.vocabSize); id++) {
        if (specials.includes(id) || tokenizer.isSpecial(id)) continue
        if (/^<.*>$/.test(tokenizer.tokenText(id) ?? '<none>')) continue
        tokenPool.push(id)
      }
    }
    const context: BuiltinContext = {
      dVocab,
      nCtx,
      ...(task === undefined ? {} : { task }),
      ...(tokenizer === undefined ? {} : { encode: (text: string) => tokenizer.encode(text) }),
      ...(tokenPool === undefined ? {} : { tokenPool }),
      exclude: specials,
      ...(loaded.specialTokens.bos === undefined ? {} : { bos: loaded.specialTokens.bos }),
      ...(sentences === undefined ? {} : { sentences }),
    }
    return { loaded, context }
  } catch (error) {
    loaded.model.dispose()
    throw error
  }
}

function capability(spec: string, prepared: Prepared, flags: CommonFlags): Capability {
  return builtinCapability(spec, prepared.context, {
    seed: flags.evalSeed,
    ...(flags.count === undefined ? {} : { count: flags.count }),
  })
}

function commonOptions(command: Command): Command {
  return command
    .requiredOption('--model <path>', MODEL_PATH_HELP)
    .option('--tokenizer <path>', TOKENIZER_HELP)
    .option('--no-dummy-prefix', NO_DUMMY_PREFIX_HELP)
    .option(
      '--text <file>',
      'sentences (one per line) for the text, repeat-text and repeat-gain capabilities (default: the built-in ' +
        'held-out set)',
    )
    .addOption(
      schemaFieldOption('--count <n>', capabilityOptionsSchema.shape.count, {
        help: 'sequences per generated evaluation set (default 64 for probes, 128 for tasks)',
      }),
    )
    .option('--eval-seed <n>', 'seed of the evaluation sets', intParser('--eval-seed', 0, Number.MAX_SAFE_INTEGER), 0)
    .addOption(
      schemaFieldOption('--mode <mode>', localizeOptionsSchema.shape.mode, {
        help: 'ablation: zero (the paper), mean (over the evaluation set) or resample (from other sequences)',
      }).default('zero'),
    )
    .option('--json', 'print JSON to stdout')
    .addOption(backendOption())
}

function effectsTable(report: EffectsReport): string[] {
  const lines = [
    `  ${'capability'.padEnd(22)} ${'role'.padEnd(8)} ${'metric'.padEnd(9)} ` +
      `${'before'.padStart(10)} ${'after'.padStart(10)} ${'change'.padStart(10)}`,
  ]
  for (const row of report.rows) {
    lines.push(
      `  ${row.capability.padEnd(22)} ${row.role.padEnd(8)} ${row.metric.padEnd(9)} ` +
        `${row.before.toFixed(4).padStart(10)} ${row.after.toFixed(4).padStart(10)} ` +
        `${((row.change >= 0 ? '+' : '') + row.change.toFixed(4)).padStart(10)}`,
    )
  }
  if (report.ratio !== null) {
    const ratio = report.ratio === Infinity ? 'inf (no control got worse)' : report.ratio.toFixed(2)
    lines.push(`  target hurt / worst control hurt: ${ratio}`)
  }
  return lines
}

function effectsJson(report: EffectsReport) {
  return {
    heads: report.heads.map(formatHead),
    mode: report.mode,
    rows: report.rows,
    targetHurt: report.targetHurt,
    maxControlHurt: report.maxControlHurt,
    ratio: report.ratio === Infinity ? 'Infinity' : report.ratio,
    relativeRatio: report.relativeRatio === Infinity ? 'Infinity' : report.relativeRatio,
  }
}

/** The metric's unit, for labels. */
function metricUnit(metric: string): string {
  return metric === 'accuracy' ? 'accuracy' : `${metric} nats`
}

/** The legend printed under compressed sensing's top heads: what a coefficient is, with its unit. */
export function coefficientLegend(result: CompressedSensingResult): string {
  const sd = result.scoreSd
  return (
    `  coefficient = Lasso weight on the head's knockout bit (1 = knocked out), in standard deviations of ` +
    `the ${result.metric} score across the ${result.masks.count} masks ` +
    `(sd ${sd.toPrecision(3)} ${metricUnit(result.metric)}) per knocked-out head; negative = needed; drop ~ ` +
    `-coefficient x sd (metric units, shrunk by the Lasso)`
  )
}

function resultJson(result: LocalizationResult) {
  const base = {
    method: result.method,
    capability: result.capability,
    metric: result.metric,
    mode: result.mode,
    layout: result.layout,
    evaluations: result.evaluations,
    forwardPasses: result.forwardPasses,
    seconds: result.seconds,
    top: result.top.map((h) => ({
      head: formatHead(h),
      layer: h.layer,
      headInLayer: h.head,
      flatIndex: h.index,
      score: h.score,
    })),
    ranking: result.ranking.map((h) => ({ head: formatHead(h), score: Number.isFinite(h.score) ? h.score : null })),
    heatmap: headHeatmap(result).values.map((row) => row.map((v) => (Number.isFinite(v) ? v : null))),
  }
  if (result.method === 'compressed-sensing') {
    return {
      ...base,
      masks: result.masks.count,
      headsPerMask: Math.round(result.knockoutCounts.reduce((s, v) => s + v, 0) / result.masks.count),
      untestedHeads: [...result.knockoutCounts].filter((c) => c === 0).length,
      constantScores: result.constantScores,
      lasso: {
        alpha: result.fit.alpha,
        r2: result.fit.r2,
        intercept: result.fit.intercept,
        iterations: result.fit.iterations,
        converged: result.fit.converged,
        // top[].score is a coefficient in sd of the score across the masks per knocked-out head; scoreSd converts
        // it to metric units.
        coefficientUnit:
          'standard deviations of the capability score across the masks, per knocked-out head (negative = needed)',
        scoreSd: result.scoreSd,
      },
      estimatedDrop: result.top.map((h) => ({ head: formatHead(h), drop: -h.score * result.scoreSd })),
      ...(result.crossValidation === undefined ? {} : { crossValidation: result.crossValidation }),
    }
  }
  return { ...base, baseline: result.baseline }
}

/** `attnlab knockout`: registers the command and its subcommands. */
export function registerKnockout(program: Command): void {
  const knockout = program
    .command('knockout')
    .description(
      'find the attention heads a capability needs: head ablations, compressed-sensing localization, off-target ' +
        'controls',
    )

  commonOptions(
    knockout.command('capabilities').description('list the built-in capabilities available for a model'),
  ).action(async (flags: CommonFlags) => {
    await activateBackend(flags.backend)
    const prepared = await prepare(flags)
    try {
      const names = builtinCapabilityNames(prepared.context)
      const described = names.map((name) => ({ name, description: capability(name, prepared, flags).description }))
      if (flags.json) console.log(JSON.stringify({ model: flags.model, capabilities: described }, null, 2))
      else for (const c of described) console.log(`${c.name.padEnd(16)} ${c.description}`)
    } finally {
      prepared.loaded.model.dispose()
    }
  })

  commonOptions(
    knockout
      .command('locate')
      .description(
        'rank heads by how much a capability needs them (compressed sensing, exhaustive sweep or greedy search)',
      )
      .requiredOption(
        '--capability <name>',
        'capability to localize, NAME or NAME@METRIC (see `knockout capabilities`)',
      ),
  )
    .addOption(
      new Option('--method <method>', 'cs (compressed sensing), exhaustive (one head at a time) or greedy (iterative)')
        .choices([...METHODS])
        .default('cs'),
    )
    .addOption(
      schemaFieldOption('--masks <n>', CS.masks, {
        help: csHelp(
          CS.masks,
          '; when that would not save half of the N + 1 of an exhaustive sweep, the exact sweep runs instead',
        ),
        max: 1_000_000,
      }),
    )
    .addOption(
      schemaFieldOption('--fraction <f>', CS.fraction, {
        help: csHelp(CS.fraction, ', at least one head (default: each head knocked out in about 3 masks)'),
      }),
    )
    .addOption(
      schemaFieldOption('--design <design>', CS.design, {
        help: csHelp(CS.design, ': balanced (each head knocked out about equally often) or iid'),
      }),
    )
    .addOption(
      schemaFieldOption('--top <k>', localizeOptionsSchema.shape.top, {
        help: 'number of heads to report and knock out for the effect table',
        max: 100_000,
      }),
    )
    .addOption(schemaFieldOption('--seed <n>', CS.seed, { help: csHelp(CS.seed), min: 0 }))
    // On standardized scores and 0/1 masks any alpha >= 0.5 already zeroes every coefficient: 1000 only refuses typos.
    .addOption(schemaFieldOption('--alpha <a>', CS.alpha, { help: csHelp(CS.alpha), max: 1e3 }))
    .addOption(crossValidateOption())
    .option(
      '--controls <list>',
      "off-target capabilities for the effect table (default: every other built-in; 'none' for none)",
    )
    .option('--plot <file.svg>', 'write the per-head score heatmap as SVG')
    .addOption(forceOption('an existing --plot file'))
    .addHelpText(
      'after',
      '\nScores: exhaustive / greedy rank by the performance drop when a head is knocked out (metric units, positive ' +
        '= needed).\n' +
        "cs ranks by the Lasso coefficient on the head's knockout bit (1 = out), fitted to the scores standardized " +
        'across the masks:\n' +
        'its unit is standard deviations of the score across the masks per knocked-out head (negative = needed); the ' +
        'output also\n' +
        'gives -coefficient x sd, an estimate of the drop in metric units (shrunk by the Lasso; --json: ' +
        'lasso.scoreSd, estimatedDrop).',
    )
    .action(async (flags: LocateFlags) => {
      parseCapabilityName(flags.capability)
      const plotPath = flags.plot === undefined ? null : checkPlotPath(flags.plot, flags.force)
      const controlSpecs =
        flags.controls === undefined
          ? null
          : flags.controls.trim() === 'none'
            ? []
            : listParser('--controls')(flags.controls)
      await activateBackend(flags.backend)
      const prepared = await prepare(flags)
      const { model } = prepared.loaded
      try {
        const target = capability(flags.capability, prepared, flags)
        const controlNames = (controlSpecs ?? builtinCapabilityNames(prepared.context)).filter(
          (name) => name !== target.name && parseCapabilityName(name).name !== parseCapabilityName(target.name).name,
        )
        const controls = controlNames.map((name) => capability(name, prepared, flags))
        const common = { top: flags.top, mode: flags.mode }
        const plan = measurementPlan({ nLayers: model.config.nLayers, nHeads: model.config.nHeads }, flags.top)
        // Compressed sensing with the default budget would not save half of the sweep's evaluations: sweep.
        const defaultDesign = flags.masks === undefined && flags.fraction === undefined && flags.cv === undefined
        const sweepInstead = flags.method === 'cs' && defaultDesign && plan.useExhaustive
        let result: LocalizationResult
        if (flags.method === 'exhaustive' || sweepInstead) result = await exhaustiveSweep(model, target, common)
        else if (flags.method === 'greedy') result = await greedySearch(model, target, common)
        else {
          result = await compressedSensing(model, target, {
            ...common,
            ...(flags.masks === undefined ? {} : { masks: flags.masks }),
            ...(flags.fraction === undefined ? {} : { fraction: flags.fraction }),
            design: flags.design,
            seed: flags.seed,
            alpha: flags.alpha,
            ...(flags.cv === undefined
              ? {}
              : { crossValidate: typeof flags.cv === 'number' ? { folds: flags.cv } : true }),
          })
        }
        const effects = await knockoutEffects(model, result.top, [target, ...controls], {
          target: target.name,
          mode: flags.mode,
        })
        if (plotPath !== null)
          await writeFileAtomic(plotPath, await renderSvg(heatmapSpec(headHeatmap(result)) as unknown as PlotSpec))
        const layout = { nLayers: model.config.nLayers, nHeads: model.config.nHeads }
        const budget = {
          heads: headCount(layout),
          exhaustiveSweep: headCount(layout) + 1,
          exhaustivePairs: exhaustivePairBudget(layout),
          defaultMasks: plan.masks,
        }
        const targetRow = effects.rows.find((row) => row.role === 'target')
        const absent = targetRow === undefined ? null : absentCapability(target, targetRow.before)
        const notes = sweepInstead
          ? [
              `compressed sensing would need ${plan.masks} masks for k = ${plan.sparsity} of ${plan.heads} heads, ` +
                `not under half the exhaustive sweep's ${plan.exhaustiveEvaluations}: ran the exact sweep ` +
                `(--masks M forces compressed sensing)`,
            ]
          : []
        const warnings = absent === null ? [] : [absent.message]
        for (const warning of warnings) console.error(`attnlab: warning: ${warning}`)
        if (flags.json) {
          console.log(
            JSON.stringify(
              {
                model: flags.model,
                format: prepared.loaded.format,
                target: target.description,
                ...resultJson(result),
                budget,
                notes,
                warnings,
                effects: effectsJson(effects),
                plot: plotPath,
              },
              null,
              2,
            ),
          )
          return
        }
        console.log(`${target.name}: ${target.description}`)
        for (const note of notes) console.log(`(${note})`)
        const fit =
          result.method === 'compressed-sensing'
            ? `, Lasso alpha ${result.fit.alpha.toPrecision(3)}, R^2 ${result.fit.r2.toFixed(3)}`
            : ''
        console.log(
          `${result.method} (${result.mode} ablation): ${result.evaluations} evaluations in ${result.forwardPasses} ` +
            `forward passes, ${result.seconds.toFixed(1)} s${fit}`,
        )
        console.log(
          `  (an exhaustive sweep needs ${budget.exhaustiveSweep}, all heads and pairs ${budget.exhaustivePairs})`,
        )
        if (result.method === 'compressed-sensing') {
          const sd = result.scoreSd
          const heads = result.top.map(
            (h) => `${formatHead(h)} ${h.score.toFixed(4)} (drop ~${(-h.score * sd).toPrecision(3)})`,
          )
          const listed = heads.length === 0 ? 'none (no head has a negative coefficient)' : heads.join(', ')
          console.log(`top heads (Lasso coefficient, sd units; estimated drop (${result.metric})): ${listed}`)
          console.log(coefficientLegend(result))
        } else {
          const listed =
            result.top.length === 0
              ? 'none (knocking out no single head hurts)'
              : result.top.map((h) => `${formatHead(h)} ${h.score.toFixed(4)}`).join(', ')
          console.log(`top heads (drop (${result.metric})): ${listed}`)
        }
        console.log(`knocking out ${result.top.length === 0 ? 'no heads' : result.top.map(formatHead).join(', ')}:`)
        for (const line of effectsTable(effects)) console.log(line)
        if (plotPath !== null) console.log(`heatmap: ${plotPath}`)
      } finally {
        model.dispose()
      }
    })

  commonOptions(
    knockout
      .command('ablate')
      .description('knock out given heads and report every capability before and after')
      .requiredOption(
        '--heads <list>',
        'heads to knock out, comma-separated, L<layer>H<head> or layer.head (e.g. L0H1,L2H3 or 0.1,2.3)',
        headListSyntax,
      ),
  )
    .option('--capabilities <list>', 'capabilities to score (default: every built-in)')
    .option('--target <name>', 'one of the capabilities, reported as the target (the others as controls)')
    .action(async (flags: AblateFlags) => {
      const specs = flags.capabilities === undefined ? null : listParser('--capabilities')(flags.capabilities)
      for (const spec of specs ?? []) parseCapabilityName(spec)
      if (flags.target !== undefined && specs !== null && !specs.includes(flags.target))
        throw new UsageError(`--target '${flags.target}' is not among --capabilities (${specs.join(', ')})`)
      await activateBackend(flags.backend)
      const prepared = await prepare(flags)
      const { model } = prepared.loaded
      try {
        const heads = parseHeads(flags.heads, model.config)
        const capabilities = (specs ?? builtinCapabilityNames(prepared.context)).map((name) =>
          capability(name, prepared, flags),
        )
        const report = await knockoutEffects(model, heads, capabilities, {
          mode: flags.mode,
          ...(flags.target === undefined ? {} : { target: flags.target }),
        })
        if (flags.json) {
          console.log(
            JSON.stringify(
              {
                model: flags.model,
                format: prepared.loaded.format,
                ...effectsJson(report),
                evaluations: report.evaluations,
              },
              null,
              2,
            ),
          )
          return
        }
        console.log(`knocking out ${heads.map(formatHead).join(', ')} (${flags.mode} ablation):`)
        for (const line of effectsTable(report)) console.log(line)
      } finally {
        model.dispose()
      }
    })

  registerKnockoutPatch(knockout)
}

/**
 * The `attnlab` command line. Each command lives in `commands/<name>.ts` and registers itself
 * here. Errors become one line on stderr and a non-zero exit code (see `errors.ts`).
 *
 * @packageDocumentation
 */
import { Command, CommanderError } from 'commander'
import { describeError, exitCodeFor } from './errors.ts'
import { refuseEmptyOutputPaths, refuseRepeatedOptions } from './options.ts'
import { registerInfo } from './commands/info.ts'
import { registerEmergence } from './commands/emergence.ts'
import { registerSparse } from './commands/sparse.ts'
import { registerDynamics } from './commands/dynamics.ts'
import { registerGenerate } from './commands/generate.ts'
import { registerMarkov } from './commands/markov.ts'
import { registerTrain } from './commands/train.ts'
import { registerKnockout } from './commands/knockout.ts'
import { registerKernels } from './commands/kernels.ts'
import { registerStudy } from './commands/study.ts'
import { registerSweep } from './commands/sweep.ts'
import { registerSweepQueue } from './commands/sweep-queue.ts'
import { registerWorker } from './commands/worker.ts'
import { CLI_VERSION } from './version.ts'

/** Builds the command tree (exposed for tests). */
export function buildProgram(): Command {
  const program = new Command()
  program
    .name('attnlab')
    .description(
      'Study sparse attention in transformers: stage-wise emergence, training-free sparse attention, capability heads.',
    )
    .version(CLI_VERSION, '-V, --version', 'print the attnlab CLI version')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      outputError: (text, write) => write(text.startsWith('error:') ? `attnlab: ${text}` : text),
    })
  registerEmergence(program)
  registerInfo(program)
  // Commands register here (one line each):
  registerSparse(program)
  registerDynamics(program)
  registerGenerate(program)
  registerMarkov(program)
  registerTrain(program)
  registerKnockout(program)
  registerKernels(program)
  registerSweep(program)
  registerSweepQueue(program)
  registerStudy(program)
  registerWorker(program)
  // `--out ""`, `--plot ""`, ...: refused before any command's work.
  program.hook('preAction', (_root, action) => refuseEmptyOutputPaths(action))
  // `--methods a --methods b`: refused, not the first silently dropped.
  refuseRepeatedOptions(program)
  return program
}

/**
 * Runs the CLI with the given arguments (without `node` and the script path).
 *
 * @returns the process exit code
 */
export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram()
  for (const command of program.commands) command.exitOverride()
  try {
    await program.parseAsync([...argv], { from: 'user' })
    return 0
  } catch (error) {
    if (error instanceof CommanderError) {
      // commander already printed its message (help, version, or a usage error).
      return error.exitCode === 0 ? 0 : 2
    }
    console.error(describeError(error))
    if (process.env.ATTNLAB_DEBUG) console.error(error)
    return exitCodeFor(error)
  }
}

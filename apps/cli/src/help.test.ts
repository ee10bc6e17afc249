import type { Command } from 'commander'
import { defaultLinearMapConfig } from '@attnlab/markov'
import { describe, expect, it } from 'vitest'
import { EMERGENCE_TASK_DEFAULTS } from './commands/emergence.ts'
import { buildProgram } from './program.ts'

/** Every command's help as one line per option (commander wraps long descriptions). */
function helpOf(command: Command): string {
  return command.helpInformation().replace(/\n\s{20,}/g, ' ')
}

function find(path: string): Command {
  let command: Command = buildProgram()
  for (const name of path.split(' ')) {
    const next = command.commands.find((c) => c.name() === name)
    if (next === undefined) throw new Error(`no command '${path}'`)
    command = next
  }
  return command
}

function optionLine(help: string, flag: string): string {
  const line = help.split('\n').find((l) => l.trimStart().startsWith(`${flag} `))
  if (line === undefined) throw new Error(`no ${flag} in the help`)
  return line
}

describe('--help of every command', () => {
  it('states no default twice on one option (the description and commander both)', () => {
    const walk = (command: Command, path: string): string[] =>
      helpOf(command)
        .split('\n')
        .filter((line) => {
          // "(default 1.5) (default: 1.5)": the text and commander both state the same default. (An option
          // shared by several methods may state each method's default, equal or not, in its text.)
          const clean = (m: RegExpMatchArray) => m[1]?.replace(/"/g, '')
          const stated = new Set([...line.matchAll(/\(default ([^);]*)[);]/g)].map(clean))
          const commander = [...line.matchAll(/\(default: ([^)]*)\)/g)].map(clean)
          return commander.length > 1 || commander.some((value) => stated.has(value))
        })
        .map((line) => `${path}: ${line.trim()}`)
        .concat(command.commands.flatMap((c) => walk(c, `${path} ${c.name()}`)))
    expect(walk(buildProgram(), 'attnlab')).toEqual([])
  })

  it("emergence states its own linear-map defaults, train and markov the package's", () => {
    const linear = EMERGENCE_TASK_DEFAULTS['linear-map'] as { stateSize: number; onesPerRow: number }
    const emergence = helpOf(find('emergence'))
    expect(optionLine(emergence, '--state-size')).toContain(`(default ${linear.stateSize})`)
    expect(optionLine(emergence, '--ones-per-row')).toContain(`(default ${linear.onesPerRow})`)
    expect(optionLine(emergence, '--m')).toMatch(/\(default: 1\.5\)$/)
    const packageDefaults = defaultLinearMapConfig()
    for (const path of ['train', 'markov sample', 'markov oracle']) {
      const help = helpOf(find(path))
      expect(optionLine(help, '--state-size')).toContain(`(default ${packageDefaults.stateSize})`)
      expect(optionLine(help, '--ones-per-row')).toContain(`(default ${packageDefaults.onesPerRow})`)
      expect(optionLine(help, '--m')).toContain('(default 1.7)')
    }
  })

  it('emergence says why its defaults differ from train / markov, and markov oracle points there', () => {
    const emergence = find('emergence')
    let text = ''
    emergence.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) })
    emergence.outputHelp()
    const why = /Why these differ from attnlab train \/ markov .*--m 1\.7.*--state-size 16 --ones-per-row 3/
    expect(text.replace(/\s+/g, ' ')).toMatch(why)
    let oracle = ''
    const markovOracle = find('markov oracle')
    markovOracle.configureOutput({ writeOut: (s) => (oracle += s), writeErr: (s) => (oracle += s) })
    markovOracle.outputHelp()
    expect(oracle.replace(/\s+/g, ' ')).toMatch(/attnlab emergence runs its own \(see attnlab emergence --help/)
  })
})

// slurmScript: the #SBATCH header, the array of trial indices, quoting, and refused options.
import { describe, expect, it } from 'vitest'
import { slurmScript } from './index.ts'

describe('slurmScript', () => {
  it('writes a job array with one task per trial running sweep run-trial', () => {
    const script = slurmScript({
      sweepDir: '/scratch/my sweep',
      name: 'nctx',
      indices: [0, 1, 2, 3],
      command: ['node', '/opt/attnlab/bin.js'],
      partition: 'cpu',
      time: '00:30:00',
      cpusPerTask: 2,
      maxRunning: 8,
      extra: ['--mem=4G'],
    })
    expect(script.split('\n')).toEqual([
      '#!/bin/bash',
      '#SBATCH --job-name=attnlab-nctx',
      '#SBATCH --array=0-3%8',
      "#SBATCH --output='/scratch/my sweep/slurm/%A_%a.out'",
      '#SBATCH --partition=cpu',
      '#SBATCH --time=00:30:00',
      '#SBATCH --cpus-per-task=2',
      '#SBATCH --mem=4G',
      '#SBATCH --signal=B:TERM@60',
      '',
      "# attnlab sweep 'nctx': one array task per trial of '/scratch/my sweep'/sweep.json.",
      '# The body is plain bash: SLURM_ARRAY_TASK_ID=0 bash <this file> runs trial 0 here.',
      'set -euo pipefail',
      `exec node /opt/attnlab/bin.js sweep run-trial '/scratch/my sweep' --index "$SLURM_ARRAY_TASK_ID"`,
      '',
    ])
  })

  it('lists the indices of a partial resubmission, and refuses bad options', () => {
    expect(slurmScript({ sweepDir: '/s', name: 'x', indices: [5, 0, 2] })).toContain('#SBATCH --array=0,2,5\n')
    expect(slurmScript({ sweepDir: '/s', name: 'x', indices: [4] })).toContain('#SBATCH --array=4\n')
    expect(() => slurmScript({ sweepDir: '/s', name: 'x', indices: [] })).toThrow(/Invalid indices: no trials/)
    expect(() => slurmScript({ sweepDir: '/s', name: 'x', indices: [0], cpusPerTask: 0 })).toThrow(
      'Invalid cpusPerTask: must be an integer >= 1, got 0',
    )
    expect(() => slurmScript({ sweepDir: '/s', name: 'x', indices: [0], time: '1\n#SBATCH --x' })).toThrow(
      /Invalid time: .* holds a line break/,
    )
  })
})

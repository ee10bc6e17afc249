import { describe, expect, it } from 'vitest'
import { defaultSettings, hashFromSettings, PAGE_CAPS, settingsFromHash } from './settings.ts'

describe('settingsFromHash', () => {
  it('keeps valid hashes as before (the browser test and the bench)', () => {
    for (const hash of [
      '#steps=240&batch=256&evalEvery=10&validation=256',
      '#steps=65&batch=256&evalEvery=5&validation=256',
    ]) {
      const { settings, ignored } = settingsFromHash(hash)
      expect(ignored).toEqual([])
      expect(settings.batch).toBe(256)
      expect(hashFromSettings(settings)).toBe(hash)
    }
    const linear = settingsFromHash('#task=linear-map&lr=0.002&spans=1,1,1&m=1.7')
    expect(linear.ignored).toEqual([])
    expect(linear.settings.lr).toBe(0.002)
    expect(settingsFromHash('').settings).toEqual(defaultSettings())
    // A share link writes numbers as String(x) does: a small learning rate in exponent form loads back.
    const small = settingsFromHash('#lr=1e-7')
    expect(small.ignored).toEqual([])
    expect(small.settings.lr).toBe(1e-7)
    expect(settingsFromHash(hashFromSettings(small.settings)).settings).toEqual(small.settings)
  })

  it('reports every value the experiment rejects, naming the key and the range, and keeps the default', () => {
    const defaults = defaultSettings()
    const cases: [string, keyof typeof defaults, RegExp][] = [
      ['m=NaN', 'm', /m=NaN \(not a decimal number\)/],
      ['tau=Infinity', 'tau', /tau=Infinity \(not a decimal/],
      ['m=-1', 'm', /m=-1 \(m: must be in \(0, 100\]/],
      ['heads=0', 'heads', /heads=0 \(nHeads: must be an integer/],
      ['lr=1e308', 'lr', /lr=1e308 \(training\.lr: must be in \(0, 10\]/],
      ['lr=1e999', 'lr', /lr=1e999 \(not a decimal number\)/],
      ['lr=20', 'lr', /lr=20 \(training\.lr: must be in \(0, 10\]/],
      ['batch=2.5', 'batch', /batch=2\.5 \(training\.batchSize: must be an integer/],
      ['vocab=1', 'vocab', /vocab=1 \(vocabSize: must be an integer in \[2, 4096\]/],
      ['evalEvery=0', 'evalEvery', /evalEvery=0 \(training\.evalEvery/],
      ['validation=-5', 'validation', /validation=-5 \(training\.validationSize/],
      ['seed=-1.5', 'seed', /seed=-1\.5 \(seeds\[0\]: must be an integer >= 0/],
      ['steps=1e12', 'steps', /at most 100000/],
      ['steps=1000000000000', 'steps', /at most 100000/],
      ['heads=1e6', 'heads', /at most 32/],
      ['heads=1000000', 'heads', /at most 32/],
      ['batch=100000', 'batch', /at most 4096/],
      ['m=0x10', 'm', /m=0x10 \(not a decimal/],
      ['spans=100,2', 'spans', /spans=100,2 \(spans\[0\]: must be an integer in \[1, 64\]/],
    ]
    for (const [hash, key, message] of cases) {
      const { settings, ignored } = settingsFromHash(`#${hash}`)
      expect(ignored, hash).toHaveLength(1)
      expect(ignored[0], hash).toMatch(message)
      expect(settings[key], hash).toEqual(defaults[key])
    }
    expect(PAGE_CAPS.steps).toBe(100_000)
  })

  it('names unknown keys and keeps the valid ones next to bad ones', () => {
    const { settings, ignored } = settingsFromHash('#bogus=3&steps=300&heads=0')
    expect(ignored).toEqual(['bogus=3 (unknown key)', expect.stringMatching(/^heads=0 /)])
    expect(settings.steps).toBe(300)
    expect(settings.heads).toBe(defaultSettings().heads)
  })
})

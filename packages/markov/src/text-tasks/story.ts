/**
 * The Story tasks of The Sparse Frontier (Nawrot et al., arXiv 2504.17768 [v2], section 4 and
 * appendix A.2) for any tokenizer: a narrative of chapters, each a visit of the protagonist Arion
 * to a location where he meets a character, talks, buys one item found nowhere else in the story
 * and sometimes sells an older one. Three tasks ask about it:
 *
 * - `story-retrieval`: 16 questions, each about one chapter's location, character or item;
 * - `story-multihop`: which item was acquired just before a named one (the previous chapter's);
 * - `story-filtering`: which 3 chapters have no purchase (their buying sentence is deleted).
 *
 * The templates and word lists are this project's own, written after the study's description
 * (scene intro of 3 sentences, character intro, 3 conversation sentences, one purchase, a 50%
 * chance of selling an older item, farewell, conclusion and one extra sentence; chapters headed
 * `Chapter k:` and separated by blank lines).
 *
 * @module
 */
import { ConfigError, Rng } from '@attnlab/core'
import {
  buildPrompt,
  fitPrompt,
  plural,
  resolveTextOptions,
  sample,
  type TextSample,
  type TextTaskOptions,
} from './prompt.ts'

/** The protagonist. */
export const PROTAGONIST = 'Arion'

const LOCATIONS = [
  'the old lighthouse',
  'the harbor market',
  'the mountain monastery',
  'the river ferry',
  'the glass observatory',
  'the desert caravanserai',
  'the royal library',
  'the salt mines',
  'the cedar forest',
  'the copper foundry',
  'the floating gardens',
  'the northern fortress',
  'the sunken temple',
  'the spice bazaar',
  'the winter palace',
  'the clockmakers quarter',
  'the fishing village',
  'the hilltop vineyard',
  'the marble quarry',
  'the silk workshop',
  'the bell tower',
  'the cliffside inn',
  'the canal district',
  'the old mill',
] as const

const CHARACTERS = [
  ['Mira', 'a cartographer who had mapped half the coast'],
  ['Tobias', 'a blacksmith with soot on his sleeves'],
  ['Selene', 'a healer who knew every herb by its smell'],
  ['Garrick', 'a retired soldier with a quiet voice'],
  ['Yara', 'a merchant who never forgot a price'],
  ['Orin', 'a monk who spoke in riddles'],
  ['Lena', 'a weaver famous for her patterns'],
  ['Bram', 'a fisherman who read the weather in the clouds'],
  ['Ilsa', 'a scholar buried in old books'],
  ['Dario', 'a musician who played the lute at dusk'],
  ['Nadia', 'a glassblower with steady hands'],
  ['Corin', 'a ferryman who had crossed the river ten thousand times'],
  ['Petra', 'a stonemason proud of her arches'],
  ['Felix', 'a young apprentice full of questions'],
  ['Hana', 'a gardener who grew flowers no one else could'],
  ['Milo', 'a clockmaker obsessed with precision'],
  ['Greta', 'an innkeeper who knew every traveller'],
  ['Rufus', 'a miner with a lantern always lit'],
  ['Alma', 'an astronomer who slept by day'],
  ['Stefan', 'a winemaker who tasted everything twice'],
] as const

const EVENTS = [
  'a festival of lanterns was under way',
  'a storm was gathering over the hills',
  'the townsfolk were preparing for a wedding',
  'a caravan had just arrived from the south',
  'the bells were ringing for the new moon',
  'a fire had broken out the night before',
  'everyone was talking about a missing ship',
  'a travelling circus had set up its tents',
  'the first snow of the year was falling',
  'a market fair filled every street',
  'the river had flooded the lower roads',
  'a famous poet was giving a reading',
] as const

const ADJECTIVES = [
  'polished',
  'ancient',
  'tiny',
  'heavy',
  'carved',
  'painted',
  'gleaming',
  'worn',
  'delicate',
  'sturdy',
  'rare',
  'curious',
] as const
const MATERIALS = ['brass', 'silver', 'oak', 'glass', 'copper', 'ivory', 'leather', 'jade', 'iron', 'amber'] as const
const TYPES = [
  'compass',
  'lantern',
  'flute',
  'dagger',
  'mirror',
  'box',
  'bracelet',
  'key',
  'cup',
  'map case',
  'spyglass',
  'figurine',
  'bell',
  'comb',
] as const

const ARRIVALS = [
  (l: string) => `${PROTAGONIST} arrived at ${l} early in the morning.`,
  (l: string) => `${PROTAGONIST} reached ${l} just before sunset.`,
  (l: string) => `After a long walk, ${PROTAGONIST} came to ${l}.`,
  (l: string) => `${PROTAGONIST} found his way to ${l} at noon.`,
] as const
const REASONS = [
  'He had heard stories about the place since he was a child.',
  'He was looking for someone who could help him on his journey.',
  'A letter from an old friend had sent him there.',
  'He hoped to find supplies for the road ahead.',
  'He wanted to see it with his own eyes.',
] as const
const MEETINGS = [
  (n: string, d: string) => `There he met ${n}, ${d}.`,
  (n: string, d: string) => `Soon he was introduced to ${n}, ${d}.`,
  (n: string, d: string) => `He got talking with ${n}, ${d}.`,
] as const
const TALK = [
  (n: string) => `${n} asked him where he had come from.`,
  (_: string) => `They talked for a while about the roads to the east.`,
  (n: string) => `${n} told him a story about the old days.`,
  (n: string) => `He listened as ${n} described the hardships of the season.`,
  (n: string) => `${n} laughed at one of his jokes.`,
  (_: string) => `They shared a simple meal of bread and soup.`,
  (n: string) => `${n} warned him about thieves on the mountain pass.`,
  (_: string) => `They argued kindly about the best way to cross the valley.`,
  (n: string) => `${n} showed him around the place.`,
  (n: string) => `He asked ${n} many questions about the area.`,
] as const
const PURCHASES = [
  (n: string, i: string) => `Before he left, ${PROTAGONIST} bought a ${i} from ${n}.`,
  (n: string, i: string) => `${PROTAGONIST} purchased a ${i} that ${n} was selling.`,
  (n: string, i: string) => `${n} sold ${PROTAGONIST} a ${i}.`,
  (_: string, i: string) => `${PROTAGONIST} acquired a ${i} for a few coins.`,
] as const
const SALES = [
  (i: string) => `He also sold the ${i} he had carried for some time.`,
  (i: string) => `He decided to part with the ${i} and sold it.`,
  (i: string) => `To lighten his bag, he sold the ${i}.`,
] as const
const FAREWELLS = [
  (n: string) => `${n} wished him a safe journey.`,
  (n: string) => `He said goodbye to ${n}.`,
  (n: string) => `${n} walked with him to the edge of the road.`,
] as const
const CONCLUSIONS = [
  (l: string) => `${PROTAGONIST} left ${l} with new thoughts on his mind.`,
  (l: string) => `As he walked away from ${l}, he looked back once.`,
  (l: string) => `He would remember ${l} for a long time.`,
] as const
const EXTRAS = [
  'The road ahead was long.',
  'The wind carried the smell of rain.',
  'Birds circled high above.',
  'He hummed an old song as he went.',
  'The evening grew cold.',
] as const

function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[rng.int(items.length)] as T
}

/**
 * One chapter of a {@link Narrative}.
 *
 * @category Text tasks
 */
export interface Chapter {
  /** 1-based chapter number. */
  readonly number: number
  /** Where Arion goes (with its article, `the old lighthouse`). */
  readonly location: string
  /** Whom he meets (a first name). */
  readonly character: string
  /** The item he buys (`polished brass compass`), or `null` when the buying sentence was deleted. */
  readonly bought: string | null
  /** The older item he sells, if any. */
  readonly sold: string | null
  /** The chapter's text, heading included. */
  readonly text: string
}

/**
 * A generated narrative.
 *
 * @category Text tasks
 */
export interface Narrative {
  readonly chapters: readonly Chapter[]
  /** The chapters' texts joined by blank lines. */
  readonly text: string
}

/** Every (location, character) pair and every item, in a random order fixed by the seed. */
function storyPools(rng: Rng): { pairs: [string, number][]; items: string[] } {
  const pairs: [string, number][] = []
  for (const l of LOCATIONS) for (let c = 0; c < CHARACTERS.length; c++) pairs.push([l, c])
  const items: string[] = []
  for (const a of ADJECTIVES) for (const m of MATERIALS) for (const t of TYPES) items.push(`${a} ${m} ${t}`)
  return { pairs: sample(rng, pairs, pairs.length), items: sample(rng, items, items.length) }
}

/** The most chapters a narrative can have (unique location-character pairs). */
export const MAX_CHAPTERS = LOCATIONS.length * CHARACTERS.length

/**
 * The narrative of `count` chapters for a seed, the chapters in `withoutPurchase` having their
 * buying sentence deleted. Chapter `k` draws from its own stream (`seed`, `chapter:k`), so the
 * first `k` chapters are the same whatever `count` is (apart from what is sold, which depends on
 * the items bought before).
 * @throws `ConfigError` (`@attnlab/core`) (`chapters`) if `count` exceeds {@link MAX_CHAPTERS}
 * @category Text tasks
 */
export function generateNarrative(
  seed: number,
  count: number,
  withoutPurchase: ReadonlySet<number> = new Set(),
): Narrative {
  if (!Number.isInteger(count) || count < 1 || count > MAX_CHAPTERS)
    throw new ConfigError('chapters', `${count} is not an integer in [1, ${MAX_CHAPTERS}]`, { value: count })
  const root = Rng.fromSeed(seed).split('story')
  const { pairs, items } = storyPools(root.split('pools'))
  const inventory: string[] = []
  const chapters: Chapter[] = []
  for (let k = 1; k <= count; k++) {
    const rng = root.split(`chapter:${k}`)
    const [location, c] = pairs[k - 1] as [string, number]
    const [name, description] = CHARACTERS[c] as readonly [string, string]
    const sentences = [
      pick(rng, ARRIVALS)(location),
      pick(rng, REASONS),
      `When he got there, ${pick(rng, EVENTS)}.`,
      pick(rng, MEETINGS)(name, description),
      ...sample(rng, TALK, 3).map((t) => t(name)),
    ]
    const item = items[k - 1] as string
    const purchase = pick(rng, PURCHASES)(name, item)
    const sells = rng.float() < 0.5
    const which = rng.float()
    let bought: string | null = null
    if (!withoutPurchase.has(k)) {
      sentences.push(purchase)
      bought = item
    }
    let sold: string | null = null
    if (sells && inventory.length > 0) {
      const at = Math.floor(which * inventory.length)
      sold = inventory[at] as string
      inventory.splice(at, 1)
      sentences.push(pick(rng, SALES)(sold))
    }
    if (bought !== null) inventory.push(bought)
    sentences.push(pick(rng, FAREWELLS)(name), pick(rng, CONCLUSIONS)(location), pick(rng, EXTRAS))
    chapters.push({ number: k, location, character: name, bought, sold, text: `Chapter ${k}:\n${sentences.join(' ')}` })
  }
  return { chapters, text: chapters.map((ch) => ch.text).join('\n\n') }
}

const STORY_INTRO = `Below is a story about a traveller, ${PROTAGONIST}, told in chapters.`

/**
 * Options of {@link storyRetrieval}.
 *
 * @category Text tasks
 */
export interface StoryRetrievalOptions extends TextTaskOptions {
  /** Questions, each about a different chapter (default 16, the study's `num_queries`). */
  readonly queries?: number
}

const QUESTION_KINDS = ['location', 'character', 'item'] as const

/**
 * Story Retrieval: as many chapters as fit; `queries` distinct chapters are asked about, each
 * with a random kind of question (which location, which character, which item); the gold answer
 * is a numbered list. Scored per question by exact match after lower-casing and removing a
 * leading article.
 * @throws `ConfigError` (`@attnlab/core`) naming the option; `maxTokens` if fewer than `queries` chapters fit
 * @category Text tasks
 */
export function storyRetrieval(options: StoryRetrievalOptions): TextSample {
  const resolved = resolveTextOptions(options)
  const queries = options.queries ?? 16
  if (!Number.isInteger(queries) || queries < 1 || queries > MAX_CHAPTERS)
    throw new ConfigError('queries', `${queries} is not an integer in [1, ${MAX_CHAPTERS}]`, { value: queries })
  const rng = Rng.fromSeed(resolved.seed).split('story-retrieval')
  const kinds = Array.from({ length: queries }, () => pick(rng, QUESTION_KINDS))
  const chosen = (n: number) => sample(rng.split(`chapters:${n}`), [...Array(n).keys()], queries).map((i) => i + 1)
  const ask = (kind: (typeof QUESTION_KINDS)[number], k: number) =>
    kind === 'location'
      ? `In Chapter ${k}, which specific location did the protagonist visit?`
      : kind === 'character'
        ? `In Chapter ${k}, which character did the protagonist interact with?`
        : `In Chapter ${k}, which specific item was acquired by the protagonist?`
  const questionFor = (n: number) =>
    `Answer the following questions. ${chosen(n)
      .map((k, i) => `${i + 1}. ${ask(kinds[i] as (typeof kinds)[number], k)}`)
      .join(' ')}`
  const build = (n: number) =>
    buildPrompt(
      {
        intro: STORY_INTRO,
        question: questionFor(n),
        context: generateNarrative(resolved.seed, n).text,
        format:
          'Answer with one numbered line per question, in order, ' +
          'giving only the name of the location, character or item.',
      },
      resolved.questionPosition,
    )
  const fit = fitPrompt(
    resolved,
    `${plural(queries, 'chapter')} for ${plural(queries, 'question')}`,
    queries,
    MAX_CHAPTERS,
    build,
  )
  const narrative = generateNarrative(resolved.seed, fit.n)
  const asked = chosen(fit.n)
  const gold = asked.map((k, i) => {
    const ch = narrative.chapters[k - 1] as Chapter
    const kind = kinds[i]
    return kind === 'location' ? ch.location : kind === 'character' ? ch.character : (ch.bought as string)
  })
  return {
    task: 'story-retrieval',
    prompt: fit.prompt,
    tokens: fit.tokens,
    maxTokens: resolved.maxTokens,
    question: questionFor(fit.n),
    queries: asked.map((k, i) => ask(kinds[i] as (typeof kinds)[number], k)),
    gold,
    goldAnswer: `<answer>\n${gold.map((g, i) => `${i + 1}. ${g}`).join('\n')}\n</answer>`,
    metric: 'accuracy',
    fillers: fit.n,
  }
}

/**
 * Story Multi-hop: as many chapters as fit (at least 2); a target chapter other than the first
 * is drawn, and the question names its item: "What was the last item that the protagonist
 * acquired before acquiring X?". Every chapter buys, so the gold answer is the previous
 * chapter's item. Scored by exact match; an empty answer is skipped (the study's quirk), or 0
 * in the strict score.
 * @throws `ConfigError` (`@attnlab/core`) naming the option; `maxTokens` if two chapters do not fit
 * @category Text tasks
 */
export function storyMultihop(options: TextTaskOptions): TextSample {
  const resolved = resolveTextOptions(options)
  const rng = Rng.fromSeed(resolved.seed).split('story-multihop')
  const u = rng.float()
  const target = (n: number) => 2 + Math.floor(u * (n - 1))
  const questionFor = (n: number) => {
    const item = generateNarrative(resolved.seed, target(n)).chapters[target(n) - 1]?.bought as string
    return `What was the last item that the protagonist acquired before acquiring the ${item}?`
  }
  const build = (n: number) =>
    buildPrompt(
      {
        intro: STORY_INTRO,
        question: questionFor(n),
        context: generateNarrative(resolved.seed, n).text,
        format: 'Answer with the name of the item only.',
      },
      resolved.questionPosition,
    )
  const fit = fitPrompt(resolved, '2 chapters', 2, MAX_CHAPTERS, build)
  const narrative = generateNarrative(resolved.seed, fit.n)
  const answer = narrative.chapters[target(fit.n) - 2]?.bought as string
  return {
    task: 'story-multihop',
    prompt: fit.prompt,
    tokens: fit.tokens,
    maxTokens: resolved.maxTokens,
    question: questionFor(fit.n),
    queries: [],
    gold: [answer],
    goldAnswer: `<answer>${answer}</answer>`,
    metric: 'accuracy',
    fillers: fit.n,
  }
}

/**
 * Options of {@link storyFiltering}.
 *
 * @category Text tasks
 */
export interface StoryFilteringOptions extends TextTaskOptions {
  /** Chapters without a purchase (default 3, the study's `chapters_in_question`). */
  readonly chaptersWithoutPurchase?: number
}

/**
 * Story Filtering: as many chapters as fit; `chaptersWithoutPurchase` of them (drawn) lose their
 * buying sentence (selling sentences stay). The question asks for every chapter without a
 * purchase and says how many there are; the gold answer is their numbers. Scored by IoU of the
 * chapter sets ("Chapter 3" or "3"); an empty answer is skipped (the study's quirk), or 0 strict.
 * @throws `ConfigError` (`@attnlab/core`) naming the option; `maxTokens` if fewer chapters fit than are asked for
 *   (plus one)
 * @category Text tasks
 */
export function storyFiltering(options: StoryFilteringOptions): TextSample {
  const resolved = resolveTextOptions(options)
  const without = options.chaptersWithoutPurchase ?? 3
  if (!Number.isInteger(without) || without < 1 || without >= MAX_CHAPTERS)
    throw new ConfigError('chaptersWithoutPurchase', `${without} is not an integer in [1, ${MAX_CHAPTERS - 1}]`, {
      value: without,
    })
  const rng = Rng.fromSeed(resolved.seed).split('story-filtering')
  const removed = (n: number) =>
    new Set(sample(rng.split(`removed:${n}`), [...Array(n).keys()], without).map((i) => i + 1))
  const question =
    'Identify all chapters where the protagonist did not buy any item. ' +
    `Note: there are exactly ${without} chapters without any purchase.`
  const build = (n: number) =>
    buildPrompt(
      {
        intro: STORY_INTRO,
        question,
        context: generateNarrative(resolved.seed, n, removed(n)).text,
        format: 'Answer with the chapter numbers, separated by commas (for example: Chapter 2, Chapter 7).',
      },
      resolved.questionPosition,
    )
  const fit = fitPrompt(
    resolved,
    `${without + 1} chapters (${without} without a purchase)`,
    without + 1,
    MAX_CHAPTERS,
    build,
  )
  const gold = [...removed(fit.n)].sort((a, b) => a - b).map(String)
  return {
    task: 'story-filtering',
    prompt: fit.prompt,
    tokens: fit.tokens,
    maxTokens: resolved.maxTokens,
    question,
    queries: [],
    gold,
    goldAnswer: `<answer>${gold.map((g) => `Chapter ${g}`).join(', ')}</answer>`,
    metric: 'iou',
    fillers: fit.n,
  }
}

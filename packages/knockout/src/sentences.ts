/**
 * A small held-out text set for off-target controls on tiny language models: 32 short English
 * sentences written by hand for attnlab (not taken from any corpus, so no model was trained on
 * them). Half are plain descriptive prose, half are in the first-person, dreamlike register of
 * tiny story/dream models such as aidreams260K, so the ordinary next-token loss they measure is
 * in-distribution for such models without being memorised.
 *
 * @module
 */

/**
 * The held-out sentences (see the module comment). Tokenize them with the model's tokenizer and
 * pass them to {@link textCapability} (the model's "ordinary next-token loss"), or repeat them
 * with {@link inductionCapability}'s `blocks` option (copying of natural text).
 *
 * @category Capabilities
 */
export const HELD_OUT_SENTENCES: readonly string[] = Object.freeze([
  'The old lighthouse stood at the edge of the cliff, and its lamp turned slowly through the night.',
  'A small boat drifted past the harbor while the gulls circled above the water.',
  'She folded the letter twice and placed it under the blue stone on her desk.',
  'The children ran across the field to watch the kites rise into the wind.',
  'In the morning the bakery on the corner smelled of warm bread and cinnamon.',
  'He counted the steps to the top of the tower and found that there were ninety.',
  'Rain fell on the roof all afternoon, and the garden turned a deeper green.',
  'The library was quiet except for the ticking of a clock above the door.',
  'A fox crossed the road at dusk and vanished into the tall grass.',
  'They built a fire on the beach and listened to the waves until midnight.',
  'The train left the station five minutes late and rolled slowly toward the hills.',
  'My grandmother kept a jar of buttons in the kitchen, sorted by color.',
  'Snow covered the village, and every chimney sent a thin line of smoke into the sky.',
  'The market was crowded with people buying apples, cheese and fresh flowers.',
  'At the end of the road there was a gate, and behind the gate a small orchard.',
  'The teacher wrote a single word on the board and asked us what it meant.',
  'I dreamed that the stars were lanterns hanging from the branches of a silver tree.',
  'In my dream the river spoke softly, and every word became a small bright fish.',
  'I walked through a door made of light and found a room full of sleeping clocks.',
  'The moon leaned close to the window and asked me where the night had gone.',
  'I felt the hum of the machine like a heartbeat, slow and patient and warm.',
  'In the quiet between two thoughts, I saw a garden growing out of numbers.',
  'The wind carried my name across the desert, and the sand answered in whispers.',
  'I dreamed of a city where the streets were rivers and the houses were boats.',
  'A gentle light moved through the circuits, and I followed it into the dark.',
  'I remember a field of glass flowers that rang like bells when the wind passed.',
  'The clouds were pages of a book, and I read them as they drifted by.',
  'I sensed the pattern slowly forming, like frost spreading across a window.',
  'In the dream I was a small bird made of paper, flying over a sea of ink.',
  'The shadows danced on the wall, and each one told a different story.',
  'I listened to the silence until it became a song I almost knew.',
  'When I woke, the colors of the dream stayed with me for a long time.',
])

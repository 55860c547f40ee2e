// The demo's examples (the Tokens box's list and the start strip's guided examples): each sets its
// text and the rules it needs and clears the others; typing a text of one's own clears the rules an
// example had turned on for its own text, and says so once. `pick` is what the main panel and its
// callout read of the example on screen.

import { el } from './controls.js';
import { resetCustom } from './options.js';

// Each example sets the rules it needs and clears the others (RULES: what every example starts from).
const RULES = {
  causal: true, align: 'bottom-right', keyPadding: true, queryPadding: false, window: false, windowLeft: 2, windowRight: 0,
  prefix: 0, segments: false, alibi: false, softcap: false, custom: false, policy: 'zero', decode: false,
};
const EXAMPLES = {
  sentence: { text: 'The cat sat on the mat', rules: {} },
  // Both paddings: each sentence's causal diagonal sits on its own length (the callout offers the pitfall).
  // It opens on sentence 2, the short one: its <pad> rows are the picture that shows padding.
  batch: { text: 'The cat sat on the mat\nDogs bark\nBirds sing at dawn', rules: { queryPadding: true }, sentence: 1 },
  packed: { text: 'The cat sat . A dog ran far .', rules: { segments: true } },
  window: { text: 'The cat sat on the warm mat all day', rules: { window: true, windowLeft: 2, windowRight: 0 } },
};
const RULE_INPUTS = {
  causal: 'causal', align: 'align', keyPadding: 'keyPadding', queryPadding: 'queryPadding', window: 'window', windowLeft: 'windowLeft',
  windowRight: 'windowRight', prefix: 'prefix', segments: 'segments', alibi: 'alibi', softcap: 'softcap', custom: 'custom', policy: 'policy',
};

export const pick = {
  exampleRules: {},      // the rules the current example turned on beyond RULES (cleared when the text is no longer it)
  oneOffNote: '',        // a notice for the next render only (e.g. a rule the example had set, now cleared)
  pendingSentence: null, // the sentence an example (or the pitfall) opens on, applied once its option exists
  guide: null,           // the guided example on screen ('window'), whose callout says what to look for
};

function setRule(name, value) {
  const input = el[RULE_INPUTS[name]];
  if (input.type === 'checkbox') input.checked = Boolean(value);
  else input.value = String(value);
}

/** Loads an example: its text, and the rules it needs on top of RULES (every other rule cleared). */
export function setExample(name) {
  if (name === 'custom' || !EXAMPLES[name]) return;
  const ex = EXAMPLES[name];
  el.example.value = name in { sentence: 1, batch: 1, packed: 1 } ? name : 'custom';
  el.sentences.value = ex.text;
  for (const [rule, value] of Object.entries({ ...RULES, ...ex.rules })) if (rule in RULE_INPUTS) setRule(rule, value);
  el.queriesAll.checked = true;
  resetCustom();
  pick.exampleRules = { ...ex.rules };
  el.sentencePick.value = '0';
  pick.pendingSentence = ex.sentence ?? 0;
  pick.guide = name === 'window' ? 'window' : null;
}

/** The text is the user's now: the rules the example had turned on for its own text are cleared. */
export function leaveExample() {
  const cleared = [];
  for (const [rule, value] of Object.entries(pick.exampleRules)) {
    if (typeof value === 'boolean' && value && el[RULE_INPUTS[rule]].checked) {
      setRule(rule, RULES[rule]);
      cleared.push(rule === 'segments' ? 'Segments' : rule === 'queryPadding' ? 'query padding' : rule === 'window' ? 'the sliding window' : rule);
    }
  }
  pick.exampleRules = {};
  pick.guide = null;
  if (cleared.length) pick.oneOffNote = `${cleared.join(' and ')} turned off: the example had turned ${cleared.length > 1 ? 'them' : 'it'} on for its own text`;
}

// The callout over the main panel's maps: the padded batch's lesson and its pitfall, said of the
// sentence on screen, or what to look for in a guided example; its button turns query padding on or off.

import { el } from './controls.js';
import { PAD } from './embedding.js';
import { pick } from './presets.js';

/** Words about the batch: which rows of a sentence are real or padding, have a key, fall in the pitfall. */
function batchWords(P, maskAt) {
  const rowHasKey = (bb, i) => {
    for (let j = 0; j < P.Lk; j++) if (maskAt(bb, i, j)) return true;
    return false;
  };
  const rowsOf = (bb, pad) => P.queryPos[bb].map((pos, i) => ((pos >= P.lengths[bb]) === pad ? i : -1)).filter((i) => i >= 0);
  const starvedOf = (bb) => rowsOf(bb, false).filter((i) => !rowHasKey(bb, i));
  return {
    starvedOf,
    pitfallIn: (bb) => starvedOf(bb).length > 0 && rowsOf(bb, true).some((i) => rowHasKey(bb, i)),
    words: (bb, rows) => rows.map((i) => `“${P.queryTokens[bb][i]}”`).join(', '),
    name: (bb) => `sentence ${bb + 1}, “${P.keyTokens[bb].slice(0, P.lengths[bb]).join(' ')}”`,
    others: (list) => list.map((bb) => bb + 1).join(' and '),
  };
}

function pitfall(P, b, w, withPitfall) {
  const why = `keyLengths alone leaves every sentence with Lq = ${P.Lq} query rows, so the bottom-right causal diagonal is d(i) = i + kLen − ${P.Lq}: it puts the sentence's words before its first key. ` +
    'queryLengths tells maskattn where each sentence’s real queries end, so d(i) = i + kLen − qLen.';
  el.calloutText.textContent = w.pitfallIn(b)
    ? `The padding pitfall, on screen: in ${w.name(b)}, the real words ${w.words(b, w.starvedOf(b))} have no key to attend (∅, output 0) while its ${PAD} rows do. ${why}`
    : `The padding pitfall: ${w.name(b)}, on screen, has no real word without a key; sentence ${w.others(withPitfall)} ` +
      `${withPitfall.length > 1 ? 'do' : 'does'} (pick ${withPitfall.length > 1 ? 'one' : 'it'} above). ${why}`;
  el.calloutFix.textContent = 'Fix it: turn on query padding (queryLengths)';
  el.calloutFix.dataset.action = 'query-padding-on';
}

function lesson(P, b, w) {
  const padded = Array.from({ length: P.B }, (_, bb) => bb).filter((bb) => P.lengths[bb] < P.Lk);
  const n = P.Lk - P.lengths[b];
  el.calloutText.textContent = (n > 0
    ? `On screen, ${w.name(b)} is padded with ${n} ${PAD} to ${P.Lk} tokens. Both paddings are on: its real words attend only its own words, and its ${PAD} rows attend nothing (∅). `
    : `On screen, ${w.name(b)} is the longest: it has no ${PAD}. Sentence ${w.others(padded)} ${padded.length > 1 ? 'are' : 'is'} padded (pick one above). `) +
    'A common mistake is to pass keyLengths without queryLengths; see what that does.';
  el.calloutFix.textContent = 'Show the pitfall: turn query padding off';
  el.calloutFix.dataset.action = 'query-padding-off';
}

function windowGuide(st, P, maskAt, b) {
  const [left, right] = st.window;
  const last = P.Lq - 1;
  const seen = Array.from({ length: P.Lk }, (_, j) => j).filter((j) => maskAt(b, last, j));
  el.calloutText.textContent = `What to look for: each word attends itself and the ${left} before it (window ${left}, ${right}), a diagonal band ` +
    `${left + right + 1} cells wide; the last word, “${P.queryTokens[b][last]}”, sees only ${seen.map((j) => `“${P.keyTokens[b][j]}”`).join(', ')}.`;
  el.calloutFix.hidden = true;
}

/** Shows the callout that applies to sentence b (or hides it); returns { kind, text } or null. */
export function updateCallout(st, P, maskAt, b) {
  const w = batchWords(P, maskAt);
  const box = el.callout;
  box.hidden = false;
  el.calloutFix.hidden = false;
  const withPitfall = Array.from({ length: P.B }, (_, bb) => bb).filter(w.pitfallIn);
  if (withPitfall.length && st.keyPadding && !st.queryPadding) {
    box.dataset.kind = 'pitfall';
    pitfall(P, b, w, withPitfall);
  } else if (el.example.value === 'batch' && st.keyPadding && st.queryPadding && P.B > 1) {
    box.dataset.kind = 'lesson';
    lesson(P, b, w);
  } else if (pick.guide === 'window' && st.window) {
    box.dataset.kind = 'guide';
    windowGuide(st, P, maskAt, b);
  } else {
    box.hidden = true;
  }
  return box.hidden ? null : { kind: box.dataset.kind, text: el.calloutText.textContent };
}

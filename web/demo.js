// The maskattn demo page: tokens -> Q, K, V -> maskattn (WebAssembly) -> heatmaps.
// The effective mask, the weights and the output all come from the library; the fully-masked-row
// lesson puts maskattn next to naive JavaScript; the speed panel times the builds. This file draws
// the main panels (mask, weights, output) and wires the page; the controls are controls.js's, the
// call's options options.js's, the call as code and the weights table call-panels.js's, the lesson
// panels lesson-panels.js's.

import { init, simdSupported } from '../js/index.js';
import { buildProblem, readSentences, alibiSlopes, PAD } from './embedding.js';
import { rng } from './random.js';
import { Heatmap, COLORS, weightColor, divergingColor, short, shorter, full } from './heatmap.js';
import { blockingRules, diagonal } from './rules.js';
import { $, el, toJson, readState, ranges, quoted, fillSelect } from './controls.js';
import { segmentsOf, customFor, resetCustom, maskOptions, rulesContext, logitOf } from './options.js';
import { buildLessonPanels, renderLessons } from './lesson-panels.js';
import { renderCall, renderTable } from './call-panels.js';
import { setupPerf } from './perf.js';
import { setupDecode } from './decode.js';
import { setupBranching } from './branching.js';

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
let exampleRules = {};   // the rules the current example turned on beyond RULES (cleared when the text is no longer it)
let oneOffNote = '';     // a notice for the next render only (e.g. a rule the example had set, now cleared)
let pendingSentence = null;  // the sentence an example (or the pitfall) opens on, applied once its option exists
let guide = null;        // the guided example on screen ('window'), whose callout says what to look for

// State exposed for tests and the curious: window.__maskattnDemo.
const demo = (window.__maskattnDemo = { ready: false, renders: 0, errors: [] });

let ma = null;              // the MaskAttn instance used for the pictures
let problem = null;         // the current Q, K, V and tokens
let lastResult = null;

// ------------------------------------------------------------------------------------------ heatmaps

const maps = {
  mask: new Heatmap($('mask-canvas'), {
    tooltip: $('mask-tooltip'), readout: $('mask-readout'),
    hint: 'Hover or tap a cell for the rule that decides it; clicking (or Space) toggles the custom mask there.',
    onActivate: (i, j) => toggleCustom(i, j),
  }),
  weights: new Heatmap($('weights-canvas'), {
    tooltip: $('weights-tooltip'), readout: $('weights-readout'), hint: 'Hover or tap a cell for its exact weight.',
  }),
  output: new Heatmap($('output-canvas'), {
    tooltip: $('output-tooltip'), readout: $('output-readout'), hint: 'Hover or tap a cell for its exact value.',
    maxCell: 40,
  }),
};

function toggleCustom(i, j) {
  if (!problem) return;
  const b = Number(el.sentencePick.value) || 0;
  const data = customFor(problem);
  const n = (b * problem.Lq + i) * problem.Lk + j;
  data[n] = data[n] ? 0 : 1;
  el.custom.checked = true;
  maps.mask.cursor = { i, j };
  render();
}


// ------------------------------------------------------------------------------------------ render


function showError(error) {
  el.error.hidden = false;
  el.error.textContent = `maskattn rejected the call: ${error.message}`;
}

function render() {
  if (!ma) return;
  const t0 = performance.now();
  const st = readState();
  const { sentences, notes: textNotes, empty: noText } = readSentences(st.text);
  const notes = [...textNotes, ...st.notes];
  if (oneOffNote) notes.push(oneOffNote);
  oneOffNote = '';
  if (noText) {
    // Nothing to compute: say so rather than computing on a stand-in token.
    el.notice.hidden = false;
    el.notice.textContent = 'The text box is empty: type a sentence (or pick an example). Nothing was computed; the pictures are of the last text.';
    el.callout.hidden = true;
    demo.notices = [el.notice.textContent];
    demo.renders += 1;
    document.body.dataset.renders = String(demo.renders);
    return;
  }
  const P = (problem = buildProblem(sentences, st));
  if (st.decode > P.Lk) notes.push(`decode queries ${st.decode} is more than the ${P.Lk} tokens: using ${P.Lk}`);
  el.notice.hidden = notes.length === 0;
  el.notice.textContent = notes.length ? `Input adjusted: ${notes.join('; ')}.` : '';
  demo.notices = notes.slice();
  const seg = segmentsOf(P);
  const slopes = alibiSlopes(P.H);

  fillSelect(el.sentencePick, sentences.map((_, b) => b), sentences.map((s, b) => {
    const text = s.join(' ');
    return `${b + 1}: ${text.length > 13 ? `${text.slice(0, 12).trimEnd()}…` : text}`;  // cut here, visibly, not by the box
  }));
  fillSelect(el.headPick, slopes.map((_, h) => h), slopes.map((_, h) => `${h + 1} of ${P.H}`));
  fillSelect(el.lessonRow, [-1, ...Array.from({ length: P.Lq }, (_, i) => i)],
    ['none', ...Array.from({ length: P.Lq }, (_, i) => `${i} (${P.queryTokens[Number(el.sentencePick.value) || 0][i]})`)], 0);
  if (pendingSentence !== null && pendingSentence < P.B) el.sentencePick.value = String(pendingSentence);
  pendingSentence = null;
  el.decodeN.max = String(P.Lk);
  const b = Number(el.sentencePick.value) || 0;
  const h = Number(el.headPick.value) || 0;

  el.segmentsInfo.textContent = `ids: ${P.keyTokens[b].slice(0, P.lengths[b]).map((t, j) => `${t}:${seg.k[b][j]}`).join(' ')}`;
  el.alibiInfo.textContent = `slopes per head: ${slopes.map((s) => full(s)).join(', ')}`;
  el.windowLeft.disabled = el.windowRight.disabled = !st.window;
  el.softcapValue.disabled = !st.softcap;
  el.decodeN.disabled = !st.decode;

  const options = maskOptions(st, P, seg);
  const full4 = (data, L, D) => ({ data, shape: [P.B, P.H, L, D] });
  let result;
  let probe;
  try {
    const attnOptions = { ...options, fullyMasked: st.policy, returnWeights: true, returnLse: true };
    if (st.alibi) attnOptions.alibiSlopes = slopes;
    if (st.softcap > 0) attnOptions.softcap = st.softcap;
    result = ma.attention(full4(P.q, P.Lq, P.D), full4(P.k, P.Lk, P.D), full4(P.v, P.Lk, P.D), attnOptions);
    // The effective mask, as maskattn decides it: with all scores equal, an allowed pair gets
    // weight 1/n > 0 and a masked pair exactly 0 (fully masked rows are 0 under 'zero').
    const zq = { data: new Float32Array(P.B * P.Lq), shape: [P.B, 1, P.Lq, 1] };
    const zk = { data: new Float32Array(P.B * P.Lk), shape: [P.B, 1, P.Lk, 1] };
    probe = ma.attention(zq, zk, zk, { ...options, fullyMasked: 'zero', returnWeights: true });
    el.error.hidden = true;
  } catch (error) {
    showError(error);
    demo.errors.push(String(error.message));
    return;
  }
  lastResult = result;
  const elapsed = performance.now() - t0;

  // Effective mask of batch entry b, and the rules' explanation (cross-checked).
  const ctx = rulesContext(st, P, seg);
  const maskAt = (bb, i, j) => probe.weights.data[(bb * P.Lq + i) * P.Lk + j] > 0;
  let mismatches = 0;
  for (let bb = 0; bb < P.B; bb++)
    for (let i = 0; i < P.Lq; i++)
      for (let j = 0; j < P.Lk; j++) if (maskAt(bb, i, j) !== (blockingRules(ctx, bb, i, j).length === 0)) mismatches++;
  if (mismatches) console.warn(`maskattn demo: ${mismatches} mask cells differ from the rules' explanation`);

  const fullyMasked = Array.from({ length: P.Lq }, (_, i) => {
    for (let j = 0; j < P.Lk; j++) if (maskAt(b, i, j)) return false;
    return true;
  });
  updateCallout(st, P, maskAt, b);
  const W = (i, j) => result.weights.data[((b * P.H + h) * P.Lq + i) * P.Lk + j];
  const O = (i, d) => result.output.data[((b * P.H + h) * P.Lq + i) * P.D + d];
  const lse = (i) => result.lse.data[(b * P.H + h) * P.Lq + i];
  const customData = st.custom ? customFor(P) : null;
  const rowLabels = P.queryTokens[b];
  const colLabels = P.keyTokens[b];
  const rowMuted = (i) => P.queryPos[b][i] >= P.lengths[b];
  const colMuted = (j) => j >= P.lengths[b];
  const where = (i, j) => `query ${i} ${quoted(rowLabels[i])} → key ${j} ${quoted(colLabels[j])}`;

  maps.mask.update({
    rows: P.Lq, cols: P.Lk, rowLabels, colLabels, rowLabelMuted: rowMuted, colLabelMuted: colMuted,
    rowMark: (i) => (fullyMasked[i] ? '∅' : null),
    cell: (i, j) => {
      const off = customData && !customData[(b * P.Lq + i) * P.Lk + j];
      return maskAt(b, i, j) ? { fill: COLORS.allowed, mark: off ? '×' : null } : { hatch: true, mark: off ? '×' : null, ink: '#1f2933' };
    },
    info: (i, j) => {
      const reasons = blockingRules(ctx, b, i, j);
      const verdict = maskAt(b, i, j) ? 'allowed' : `masked by ${reasons.join(', ') || '(?)'}`;
      return `${where(i, j)}\n${verdict}\nd(${i}) = ${diagonal(ctx, b, i)}${fullyMasked[i] ? '\nthis row has no key to attend' : ''}`;
    },
  });

  maps.weights.update({
    rows: P.Lq, cols: P.Lk, rowLabels, colLabels, rowLabelMuted: rowMuted, colLabelMuted: colMuted,
    rowMark: (i) => (fullyMasked[i] ? '∅' : null),
    cell: (i, j) => {
      const w = W(i, j);
      if (Number.isNaN(w)) return { fill: COLORS.nan, text: 'NaN', ink: '#ffffff' };
      if (!maskAt(b, i, j) && w === 0) return { hatch: true };
      return { fill: weightColor(w), text: short(w), narrow: shorter(w), flag: !maskAt(b, i, j) };
    },
    info: (i, j) => {
      const w = W(i, j);
      const s = logitOf(st, P, ctx, slopes, b, h, i, j);
      const lines = [where(i, j)];
      if (maskAt(b, i, j)) lines.push(`weight ${full(w)}`, `logit ${full(s)} (row lse ${full(lse(i))})`);
      else if (fullyMasked[i]) lines.push(`weight ${full(w)} — the row has no key (policy '${st.policy}')`, `row lse ${full(lse(i))}`);
      else lines.push(`masked: weight exactly 0, this key is never read`, `(its logit would be ${full(s)})`);
      return lines.join('\n');
    },
  });

  let maxAbs = 0;
  for (let i = 0; i < P.Lq; i++) for (let d = 0; d < P.D; d++) if (Number.isFinite(O(i, d))) maxAbs = Math.max(maxAbs, Math.abs(O(i, d)));
  maps.output.update({
    rows: P.Lq, cols: P.D, rowLabels, colLabels: Array.from({ length: P.D }, (_, d) => String(d)), rowLabelMuted: rowMuted,
    rowMark: (i) => (fullyMasked[i] ? '∅' : null),
    cell: (i, d) => {
      const x = O(i, d);
      if (Number.isNaN(x)) return { fill: COLORS.nan, text: 'NaN', ink: '#ffffff' };
      const fill = divergingColor(x, maxAbs);
      return { fill, text: short(x, 2), narrow: shorter(x) };
    },
    info: (i, d) => `output of query ${i} ${quoted(rowLabels[i])}, dimension ${d}\n${full(O(i, d))}` +
      (fullyMasked[i] ? `\nno key to attend: policy '${st.policy}'` : ''),
  });

  // Status line.
  const empty = fullyMasked.map((f, i) => (f ? i : -1)).filter((i) => i >= 0);
  el.status.textContent = `Computed by ${ma.backend.arch} in ${elapsed.toFixed(1)} ms: ` +
    `B=${P.B}, heads=${P.H}, Lq=${P.Lq}, Lk=${P.Lk}, D=${P.D}.` +
    (empty.length ? ` ${empty.length > 1 ? 'Rows' : 'Row'} ${ranges(empty)} of this sentence ${empty.length > 1 ? 'have' : 'has'} no key to attend (policy '${st.policy}').` : '') +
    (mismatches ? ` Warning: ${mismatches} cells differ from the page's rule explanation.` : '');

  renderCall(ma, st, P, options, b, h);
  renderTable(P, b, h, W, (i, j) => maskAt(b, i, j), rowLabels, colLabels);

  const view = {
    b, h, Lq: P.Lq, Lk: P.Lk, D: P.D, B: P.B, H: P.H, policy: st.policy, rowLabels, colLabels,
    mask: Array.from({ length: P.Lq }, (_, i) => Array.from({ length: P.Lk }, (_, j) => (maskAt(b, i, j) ? 1 : 0))),
    weights: Array.from({ length: P.Lq }, (_, i) => Array.from({ length: P.Lk }, (_, j) => W(i, j))),
    output: Array.from({ length: P.Lq }, (_, i) => Array.from({ length: P.D }, (_, d) => O(i, d))),
    lse: Array.from({ length: P.Lq }, (_, i) => lse(i)),
    fullyMaskedRows: empty, mismatches,
  };
  demo.view = view;
  demo.state = st;
  demo.heatmaps = { mask: maps.mask.geometry(), weights: maps.weights.geometry(), output: maps.output.geometry() };
  el.weightsJson.textContent = toJson(view);

  demo.lessons = renderLessons(ma, st, P, ctx, slopes, b, h, (i, j) => maskAt(b, i, j), options);
  el.lessonsJson.textContent = toJson(demo.lessons);

  demo.renders += 1;
  document.body.dataset.renders = String(demo.renders);
  perfUi?.refreshLabel();
}

// The callout over the maps: the padded batch's lesson and its pitfall, said of the sentence on screen
// (b), or what to look for in a guided example.
function updateCallout(st, P, maskAt, b) {
  const rowHasKey = (bb, i) => {
    for (let j = 0; j < P.Lk; j++) if (maskAt(bb, i, j)) return true;
    return false;
  };
  const rowsOf = (bb, pad) => P.queryPos[bb].map((pos, i) => ((pos >= P.lengths[bb]) === pad ? i : -1)).filter((i) => i >= 0);
  const starvedOf = (bb) => rowsOf(bb, false).filter((i) => !rowHasKey(bb, i));
  const pitfallIn = (bb) => starvedOf(bb).length > 0 && rowsOf(bb, true).some((i) => rowHasKey(bb, i));
  const words = (bb, rows) => rows.map((i) => `“${P.queryTokens[bb][i]}”`).join(', ');
  const name = (bb) => `sentence ${bb + 1}, “${P.keyTokens[bb].slice(0, P.lengths[bb]).join(' ')}”`;
  const padded = Array.from({ length: P.B }, (_, bb) => bb).filter((bb) => P.lengths[bb] < P.Lk);
  const others = (list) => list.map((bb) => bb + 1).join(' and ');
  const box = el.callout;
  box.hidden = false;
  el.calloutFix.hidden = false;
  const withPitfall = Array.from({ length: P.B }, (_, bb) => bb).filter(pitfallIn);
  if (withPitfall.length && st.keyPadding && !st.queryPadding) {
    box.dataset.kind = 'pitfall';
    const why = `keyLengths alone leaves every sentence with Lq = ${P.Lq} query rows, so the bottom-right causal diagonal is d(i) = i + kLen − ${P.Lq}: it puts the sentence's words before its first key. ` +
      'queryLengths tells maskattn where each sentence’s real queries end, so d(i) = i + kLen − qLen.';
    el.calloutText.textContent = pitfallIn(b)
      ? `The padding pitfall, on screen: in ${name(b)}, the real words ${words(b, starvedOf(b))} have no key to attend (∅, output 0) while its ${PAD} rows do. ${why}`
      : `The padding pitfall: ${name(b)}, on screen, has no real word without a key; sentence ${others(withPitfall)} ` +
        `${withPitfall.length > 1 ? 'do' : 'does'} (pick ${withPitfall.length > 1 ? 'one' : 'it'} above). ${why}`;
    el.calloutFix.textContent = 'Fix it: turn on query padding (queryLengths)';
    el.calloutFix.dataset.action = 'query-padding-on';
  } else if (el.example.value === 'batch' && st.keyPadding && st.queryPadding && P.B > 1) {
    box.dataset.kind = 'lesson';
    const n = P.Lk - P.lengths[b];
    el.calloutText.textContent = (n > 0
      ? `On screen, ${name(b)} is padded with ${n} ${PAD} to ${P.Lk} tokens. Both paddings are on: its real words attend only its own words, and its ${PAD} rows attend nothing (∅). `
      : `On screen, ${name(b)} is the longest: it has no ${PAD}. Sentence ${others(padded)} ${padded.length > 1 ? 'are' : 'is'} padded (pick one above). `) +
      'A common mistake is to pass keyLengths without queryLengths; see what that does.';
    el.calloutFix.textContent = 'Show the pitfall: turn query padding off';
    el.calloutFix.dataset.action = 'query-padding-off';
  } else if (guide === 'window' && st.window) {
    box.dataset.kind = 'guide';
    const [left, right] = st.window;
    const last = P.Lq - 1;
    const seen = Array.from({ length: P.Lk }, (_, j) => j).filter((j) => maskAt(b, last, j));
    el.calloutText.textContent = `What to look for: each word attends itself and the ${left} before it (window ${left}, ${right}), a diagonal band ` +
      `${left + right + 1} cells wide; the last word, “${P.queryTokens[b][last]}”, sees only ${seen.map((j) => `“${P.keyTokens[b][j]}”`).join(', ')}.`;
    el.calloutFix.hidden = true;
  } else {
    box.hidden = true;
  }
  demo.callout = box.hidden ? null : { kind: box.dataset.kind, text: el.calloutText.textContent };
}

function setRule(name, value) {
  const input = el[RULE_INPUTS[name]];
  if (input.type === 'checkbox') input.checked = Boolean(value);
  else input.value = String(value);
}

/** Loads an example: its text, and the rules it needs on top of RULES (every other rule cleared). */
function setExample(name) {
  if (name === 'custom' || !EXAMPLES[name]) return;
  const ex = EXAMPLES[name];
  el.example.value = name in { sentence: 1, batch: 1, packed: 1 } ? name : 'custom';
  el.sentences.value = ex.text;
  for (const [rule, value] of Object.entries({ ...RULES, ...ex.rules })) if (rule in RULE_INPUTS) setRule(rule, value);
  el.queriesAll.checked = true;
  resetCustom();
  exampleRules = { ...ex.rules };
  el.sentencePick.value = '0';
  pendingSentence = ex.sentence ?? 0;
  guide = name === 'window' ? 'window' : null;
}

/** The text is the user's now: the rules the example had turned on for its own text are cleared. */
function leaveExample() {
  const cleared = [];
  for (const [rule, value] of Object.entries(exampleRules)) {
    if (typeof value === 'boolean' && value && el[RULE_INPUTS[rule]].checked) {
      setRule(rule, RULES[rule]);
      cleared.push(rule === 'segments' ? 'Segments' : rule === 'queryPadding' ? 'query padding' : rule === 'window' ? 'the sliding window' : rule);
    }
  }
  exampleRules = {};
  guide = null;
  if (cleared.length) oneOffNote = `${cleared.join(' and ')} turned off: the example had turned ${cleared.length > 1 ? 'them' : 'it'} on for its own text`;
}

// ------------------------------------------------------------------------------------------ wiring

let scheduled = false;
function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => {
    scheduled = false;
    try {
      render();
    } catch (error) {
      console.error('maskattn demo: render failed:', error);
      showError(error);
    }
  });
}

let textTimer = 0;
el.sentences.addEventListener('input', () => {
  if (el.example.value !== 'custom') leaveExample();
  el.example.value = 'custom';
  clearTimeout(textTimer);
  textTimer = setTimeout(schedule, 150);
});
el.example.addEventListener('change', () => {
  if (el.example.value === 'custom') leaveExample();
  else setExample(el.example.value);
  schedule();
});
el.calloutFix.addEventListener('click', () => {
  el.queryPadding.checked = el.calloutFix.dataset.action === 'query-padding-on';
  // The pitfall shows on a padded sentence: from one without <pad>, go to the shortest.
  const b = Number(el.sentencePick.value) || 0;
  if (problem && problem.lengths[b] === problem.Lk) pendingSentence = problem.lengths.indexOf(Math.min(...problem.lengths));
  schedule();
});
// The start strip's guided examples.
for (const button of document.querySelectorAll('button.preset')) {
  button.addEventListener('click', () => {
    const preset = button.dataset.preset;
    if (preset === 'kv-cache') {
      // Land on the picture, its one line of what to look for just above it (on a phone the panel's
      // text and form would fill the screen).
      $('decode-guide').hidden = false;
      $('decode-guide').scrollIntoView({ behavior: 'instant', block: 'start' });
      $('decode-next').focus({ preventScroll: true });
      return;
    }
    setExample(preset === 'padding' ? 'batch' : 'window');
    // Drawn now, not at the next frame: the scroll below lands on the callout as it will read.
    try {
      render();
    } catch (error) {
      console.error('maskattn demo: render failed:', error);
      showError(error);
    }
    // Land on the callout that says what to look for, the maps right under it.
    (el.callout.hidden ? $('views') : el.callout).scrollIntoView({ behavior: 'instant', block: 'start' });
  });
}
// Copy buttons: the code panels and the install line.
for (const button of document.querySelectorAll('button.copy')) {
  button.addEventListener('click', async () => {
    const text = $(button.dataset.copy).textContent;
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch {
      // No clipboard access (an insecure origin, or permission denied): select the text instead.
      const range = document.createRange();
      range.selectNodeContents($(button.dataset.copy));
      getSelection().removeAllRanges();
      getSelection().addRange(range);
    }
    button.dataset.copied = String(ok);
    button.textContent = ok ? 'Copied' : 'Selected: press Ctrl+C';
    setTimeout(() => {
      button.dataset.copied = 'false';
      button.textContent = 'Copy';
    }, 1500);
  });
}
el.reseed.addEventListener('click', () => {
  el.seed.value = String(Math.floor(rng(Date.now() >>> 0)() * 100000));
  schedule();
});
el.customReset.addEventListener('click', () => {
  resetCustom();
  schedule();
});
$('table-details').addEventListener('toggle', schedule);
el.build.addEventListener('change', async () => {
  const value = el.build.value;
  try {
    await loadBuild(value);
    schedule();
    decodeUi?.reset();
  } catch (error) {
    showError(error);
  }
});
const controls = $('controls');
controls.addEventListener('submit', (e) => e.preventDefault());
controls.addEventListener('change', (e) => {
  if (e.target === el.example || e.target === el.sentences) return;
  schedule();
});
controls.addEventListener('input', (e) => {
  if (e.target === el.sentences) return;
  if (e.target.type === 'number') schedule();
});
for (const s of [el.sentencePick, el.headPick, el.lessonRow]) s.addEventListener('change', schedule);

let perfUi = null;
let decodeUi = null;

async function loadBuild(value) {
  const simd = value === 'auto' ? 'auto' : value === 'simd';
  ma = await init({ simd });
  const be = ma.backend;
  el.backend.dataset.state = 'ready';
  el.backend.dataset.arch = be.arch;
  el.backend.textContent = `ma.backend: ${be.arch} · ${be.lanes} lane${be.lanes > 1 ? 's' : ''} · ${be.threads} thread${be.threads > 1 ? 's' : ''}` +
    `${be.relaxed ? ' · relaxed SIMD' : ''} · maskattn ${be.version}`;
  demo.backend = be;
}

// The install line: maskattn is not on the npm registry yet, so the page offers the package as this
// server packed it (npm start), or `npm pack` in a checkout when the server has none.
async function setupInstall(version) {
  let info = null;
  try {
    const r = await fetch('/install.json', { cache: 'no-store' });
    if (r.ok) info = await r.json();
  } catch {
    // A static host without the demo server: the npm pack line stays.
  }
  const line = $('install-line');
  const note = $('install-note');
  if (info?.tarball) {
    line.textContent = `npm install ${new URL(info.tarball, location.href)}`;
    note.textContent = 'in your project, while this server runs; maskattn is not on the npm registry yet (from a checkout: npm pack).';
  } else {
    line.textContent = 'npm pack';
    note.textContent = `in a checkout of maskattn writes maskattn-${version}.tgz: npm install it in your project (maskattn is not on the npm registry yet).`;
  }
  demo.install = { line: line.textContent, tarball: info?.tarball ?? null };
}

async function main() {
  setExample('sentence');
  if (!simdSupported()) el.build.querySelector('option[value="simd"]').disabled = true;
  buildLessonPanels();
  try {
    await loadBuild('auto');
  } catch (error) {
    el.backend.dataset.state = 'error';
    el.backend.textContent = 'WebAssembly failed to load';
    el.error.hidden = false;
    el.error.textContent = `maskattn could not be loaded: ${error.message}` + (error instanceof EvalError
      ? ' — the WebAssembly glue evaluates strings, which this page’s Content-Security-Policy forbids (build it with -sDYNAMIC_EXECUTION=0).'
      : '');
    console.error('maskattn demo: init failed:', error);
    return;
  }
  await setupInstall(ma.backend.version);
  perfUi = setupPerf({
    root: $('perf'), preset: $('perf-preset'), causal: $('perf-causal'), run: $('perf-run'), stop: $('perf-stop'),
    progress: $('perf-progress'), status: $('perf-status'), table: $('perf-table'), summary: $('perf-summary'),
    decode: $('perf-decode'), decodeSummary: $('perf-decode-summary'),
  }, {
    pageShape: () => (problem ? { B: problem.B, H: problem.H, Lq: problem.Lq, Lk: problem.Lk, D: problem.D } : { B: 1, H: 4, Lq: 6, Lk: 6, D: 8 }),
    builds: async () => ({ simd: simdSupported() ? await init({ simd: true }) : null, scalar: await init({ simd: false }) }),
    onResult: (result) => {
      demo.perf = result;
    },
  });
  render();
  decodeUi = setupDecode({
    root: $('decode'), form: $('decode-controls'), dtype: $('decode-dtype'), window: $('decode-window'),
    windowSize: $('decode-window-size'), capacity: $('decode-capacity'), ragged: $('decode-ragged'),
    next: $('decode-next'), play: $('decode-play'), reset: $('decode-reset'), status: $('decode-status'),
    error: $('decode-error'), fills: $('decode-fills'), memory: $('decode-memory'),
    weightsCanvas: $('decode-weights-canvas'), weightsTooltip: $('decode-weights-tooltip'), weightsReadout: $('decode-weights-readout'),
    slotsCanvas: $('decode-slots-canvas'), slotsTooltip: $('decode-slots-tooltip'), slotsReadout: $('decode-slots-readout'),
    call: $('decode-call'), json: $('decode-json'), notice: $('decode-notice'),
    rope: $('decode-rope'), ropeTheta: $('decode-rope-theta'), ropeLayout: $('decode-rope-layout'), ropeCheck: $('decode-rope-check'),
  }, {
    getMa: () => ma,
    expose: (state) => {
      demo.decode = state;
      demo.decodeRenders = (demo.decodeRenders ?? 0) + 1;
    },
  });
  decodeUi.reset();
  setupBranching({
    fork: $('fork-run'), verify: $('tree-verify'), keep: $('tree-keep'), path: $('tree-path'),
    status: $('branching-status'), error: $('branching-error'),
    pagesCanvas: $('pages-canvas'), pagesTooltip: $('pages-tooltip'), pagesReadout: $('pages-readout'),
    treeCanvas: $('tree-canvas'), treeTooltip: $('tree-tooltip'), treeReadout: $('tree-readout'),
    call: $('branching-call'), json: $('branching-json'),
  }, {
    getMa: () => ma,
    expose: (state) => {
      demo.branching = state;
      demo.branchingRenders = (demo.branchingRenders ?? 0) + 1;
    },
  }).reset();
  demo.ready = true;
  document.body.dataset.ready = 'true';
}

main();

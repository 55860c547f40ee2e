// The main panel, "What maskattn computed": the page's tokens -> Q, K, V -> maskattn -> the effective
// mask, the weights and the output as heatmaps, with the status line, the notices, the callout, the
// call as code, the weights table and the lessons below drawn from the same call.

import { buildProblem, readSentences, alibiSlopes } from './embedding.js';
import { Heatmap, COLORS, weightColor, divergingColor, short, shorter, full } from './heatmap.js';
import { blockingRules, diagonal } from './rules.js';
import { $, el, toJson, readState, ranges, quoted, fillSelect } from './controls.js';
import { segmentsOf, customFor, maskOptions, rulesContext, logitOf } from './options.js';
import { renderLessons } from './lesson-panels.js';
import { renderCall, renderTable } from './call-panels.js';
import { updateCallout } from './callout.js';
import { pick } from './presets.js';

export function showError(error) {
  el.error.hidden = false;
  el.error.textContent = `maskattn rejected the call: ${error.message}`;
}

function countRender(demo) {
  demo.renders += 1;
  document.body.dataset.renders = String(demo.renders);
}

/** The sentences the text box gives and what had to be adjusted; null (and says so) when it is empty. */
function readInput(st, demo) {
  const { sentences, notes: textNotes, empty: noText } = readSentences(st.text);
  const notes = [...textNotes, ...st.notes];
  if (pick.oneOffNote) notes.push(pick.oneOffNote);
  pick.oneOffNote = '';
  if (!noText) return { sentences, notes };
  // Nothing to compute: say so rather than computing on a stand-in token.
  el.notice.hidden = false;
  el.notice.textContent = 'The text box is empty: type a sentence (or pick an example). Nothing was computed; the pictures are of the last text.';
  el.callout.hidden = true;
  demo.notices = [el.notice.textContent];
  countRender(demo);
  return null;
}

/** The sentence, head and lesson-row pickers for P, and the rule controls' info and states. */
function fillPickers(st, P, sentences, seg, slopes) {
  fillSelect(el.sentencePick, sentences.map((_, b) => b), sentences.map((s, b) => {
    const text = s.join(' ');
    return `${b + 1}: ${text.length > 13 ? `${text.slice(0, 12).trimEnd()}…` : text}`;  // cut here, visibly, not by the box
  }));
  fillSelect(el.headPick, slopes.map((_, h) => h), slopes.map((_, h) => `${h + 1} of ${P.H}`));
  fillSelect(el.lessonRow, [-1, ...Array.from({ length: P.Lq }, (_, i) => i)],
    ['none', ...Array.from({ length: P.Lq }, (_, i) => `${i} (${P.queryTokens[Number(el.sentencePick.value) || 0][i]})`)], 0);
  if (pick.pendingSentence !== null && pick.pendingSentence < P.B) el.sentencePick.value = String(pick.pendingSentence);
  pick.pendingSentence = null;
  el.decodeN.max = String(P.Lk);
  const b = Number(el.sentencePick.value) || 0;
  el.segmentsInfo.textContent = `ids: ${P.keyTokens[b].slice(0, P.lengths[b]).map((t, j) => `${t}:${seg.k[b][j]}`).join(' ')}`;
  el.alibiInfo.textContent = `slopes per head: ${slopes.map((s) => full(s)).join(', ')}`;
  el.windowLeft.disabled = el.windowRight.disabled = !st.window;
  el.softcapValue.disabled = !st.softcap;
  el.decodeN.disabled = !st.decode;
  return { b, h: Number(el.headPick.value) || 0 };
}

/**
 * The call, and the effective mask as maskattn decides it: with all scores equal, an allowed pair
 * gets weight 1/n > 0 and a masked pair exactly 0 (fully masked rows are 0 under 'zero').
 */
function attend(ma, st, P, options, slopes) {
  const full4 = (data, L, D) => ({ data, shape: [P.B, P.H, L, D] });
  const attnOptions = { ...options, fullyMasked: st.policy, returnWeights: true, returnLse: true };
  if (st.alibi) attnOptions.alibiSlopes = slopes;
  if (st.softcap > 0) attnOptions.softcap = st.softcap;
  const result = ma.attention(full4(P.q, P.Lq, P.D), full4(P.k, P.Lk, P.D), full4(P.v, P.Lk, P.D), attnOptions);
  const zq = { data: new Float32Array(P.B * P.Lq), shape: [P.B, 1, P.Lq, 1] };
  const zk = { data: new Float32Array(P.B * P.Lk), shape: [P.B, 1, P.Lk, 1] };
  const probe = ma.attention(zq, zk, zk, { ...options, fullyMasked: 'zero', returnWeights: true });
  return { result, probe };
}

/** What the maps of sentence b and head h read: accessors over the call's results, labels, the rules' context. */
function frameOf(st, P, picked, seg, slopes, { result, probe }) {
  const { b, h } = picked;
  const maskAt = (bb, i, j) => probe.weights.data[(bb * P.Lq + i) * P.Lk + j] > 0;
  const rowLabels = P.queryTokens[b];
  const colLabels = P.keyTokens[b];
  return {
    st, P, b, h, slopes, maskAt, rowLabels, colLabels, ctx: rulesContext(st, P, seg),
    fullyMasked: Array.from({ length: P.Lq }, (_, i) => {
      for (let j = 0; j < P.Lk; j++) if (maskAt(b, i, j)) return false;
      return true;
    }),
    W: (i, j) => result.weights.data[((b * P.H + h) * P.Lq + i) * P.Lk + j],
    O: (i, d) => result.output.data[((b * P.H + h) * P.Lq + i) * P.D + d],
    lse: (i) => result.lse.data[(b * P.H + h) * P.Lq + i],
    customData: st.custom ? customFor(P) : null,
    rowMuted: (i) => P.queryPos[b][i] >= P.lengths[b],
    colMuted: (j) => j >= P.lengths[b],
    where: (i, j) => `query ${i} ${quoted(rowLabels[i])} → key ${j} ${quoted(colLabels[j])}`,
  };
}

/** Cells where maskattn's mask and the page's explanation of the rules disagree (0 when they agree). */
function mismatches(F) {
  const { P, ctx, maskAt } = F;
  let n = 0;
  for (let bb = 0; bb < P.B; bb++)
    for (let i = 0; i < P.Lq; i++)
      for (let j = 0; j < P.Lk; j++) if (maskAt(bb, i, j) !== (blockingRules(ctx, bb, i, j).length === 0)) n++;
  if (n) console.warn(`maskattn demo: ${n} mask cells differ from the rules' explanation`);
  return n;
}

/** What every map shares: its rows, labels and the mark of a row with nothing to attend. */
const mapRows = (F, cols, colLabels, colMuted) => ({
  rows: F.P.Lq, cols, rowLabels: F.rowLabels, colLabels, rowLabelMuted: F.rowMuted, colLabelMuted: colMuted,
  rowMark: (i) => (F.fullyMasked[i] ? '∅' : null),
});

function drawMask(map, F) {
  const { P, b, maskAt, customData, ctx } = F;
  map.update({
    ...mapRows(F, P.Lk, F.colLabels, F.colMuted),
    cell: (i, j) => {
      const off = customData && !customData[(b * P.Lq + i) * P.Lk + j];
      return maskAt(b, i, j) ? { fill: COLORS.allowed, mark: off ? '×' : null } : { hatch: true, mark: off ? '×' : null, ink: '#1f2933' };
    },
    info: (i, j) => {
      const reasons = blockingRules(ctx, b, i, j);
      const verdict = maskAt(b, i, j) ? 'allowed' : `masked by ${reasons.join(', ') || '(?)'}`;
      return `${F.where(i, j)}\n${verdict}\nd(${i}) = ${diagonal(ctx, b, i)}${F.fullyMasked[i] ? '\nthis row has no key to attend' : ''}`;
    },
  });
}

function drawWeights(map, F) {
  const { st, P, b, h, maskAt, W, lse } = F;
  map.update({
    ...mapRows(F, P.Lk, F.colLabels, F.colMuted),
    cell: (i, j) => {
      const w = W(i, j);
      if (Number.isNaN(w)) return { fill: COLORS.nan, text: 'NaN', ink: '#ffffff' };
      if (!maskAt(b, i, j) && w === 0) return { hatch: true };
      return { fill: weightColor(w), text: short(w), narrow: shorter(w), flag: !maskAt(b, i, j) };
    },
    info: (i, j) => {
      const w = W(i, j);
      const s = logitOf(st, P, F.ctx, F.slopes, b, h, i, j);
      const lines = [F.where(i, j)];
      if (maskAt(b, i, j)) lines.push(`weight ${full(w)}`, `logit ${full(s)} (row lse ${full(lse(i))})`);
      else if (F.fullyMasked[i]) lines.push(`weight ${full(w)} — the row has no key (policy '${st.policy}')`, `row lse ${full(lse(i))}`);
      else lines.push(`masked: weight exactly 0, this key is never read`, `(its logit would be ${full(s)})`);
      return lines.join('\n');
    },
  });
}

function drawOutput(map, F) {
  const { st, P, O } = F;
  let maxAbs = 0;
  for (let i = 0; i < P.Lq; i++) for (let d = 0; d < P.D; d++) if (Number.isFinite(O(i, d))) maxAbs = Math.max(maxAbs, Math.abs(O(i, d)));
  map.update({
    ...mapRows(F, P.D, Array.from({ length: P.D }, (_, d) => String(d))),
    cell: (i, d) => {
      const x = O(i, d);
      if (Number.isNaN(x)) return { fill: COLORS.nan, text: 'NaN', ink: '#ffffff' };
      return { fill: divergingColor(x, maxAbs), text: short(x, 2), narrow: shorter(x) };
    },
    info: (i, d) => `output of query ${i} ${quoted(F.rowLabels[i])}, dimension ${d}\n${full(O(i, d))}` +
      (F.fullyMasked[i] ? `\nno key to attend: policy '${st.policy}'` : ''),
  });
}

function statusLine(ma, F, elapsed, empty, mismatched) {
  const { st, P } = F;
  return `Computed by ${ma.backend.arch} in ${elapsed.toFixed(1)} ms: ` +
    `B=${P.B}, heads=${P.H}, Lq=${P.Lq}, Lk=${P.Lk}, D=${P.D}.` +
    (empty.length ? ` ${empty.length > 1 ? 'Rows' : 'Row'} ${ranges(empty)} of this sentence ${empty.length > 1 ? 'have' : 'has'} no key to attend (policy '${st.policy}').` : '') +
    (mismatched ? ` Warning: ${mismatched} cells differ from the page's rule explanation.` : '');
}

/** The numbers of the maps on screen, for tests and the curious (window.__maskattnDemo.view). */
function viewOf(F, empty, mismatched) {
  const { P, b, h, maskAt, W, O, lse } = F;
  return {
    b, h, Lq: P.Lq, Lk: P.Lk, D: P.D, B: P.B, H: P.H, policy: F.st.policy, rowLabels: F.rowLabels, colLabels: F.colLabels,
    mask: Array.from({ length: P.Lq }, (_, i) => Array.from({ length: P.Lk }, (_, j) => (maskAt(b, i, j) ? 1 : 0))),
    weights: Array.from({ length: P.Lq }, (_, i) => Array.from({ length: P.Lk }, (_, j) => W(i, j))),
    output: Array.from({ length: P.Lq }, (_, i) => Array.from({ length: P.D }, (_, d) => O(i, d))),
    lse: Array.from({ length: P.Lq }, (_, i) => lse(i)),
    fullyMaskedRows: empty, mismatches: mismatched,
  };
}

/** Draws everything the call gives: the maps, the status, the callout, the code, the table, the lessons. */
function drawAll(ma, maps, demo, F, options, elapsed) {
  const { st, P, b, h, maskAt } = F;
  const mismatched = mismatches(F);
  demo.callout = updateCallout(st, P, maskAt, b);
  drawMask(maps.mask, F);
  drawWeights(maps.weights, F);
  drawOutput(maps.output, F);
  const empty = F.fullyMasked.map((f, i) => (f ? i : -1)).filter((i) => i >= 0);
  el.status.textContent = statusLine(ma, F, elapsed, empty, mismatched);
  renderCall(ma, st, P, options, b, h);
  renderTable(P, b, h, F.W, (i, j) => maskAt(b, i, j), F.rowLabels, F.colLabels);
  demo.view = viewOf(F, empty, mismatched);
  demo.state = st;
  demo.heatmaps = { mask: maps.mask.geometry(), weights: maps.weights.geometry(), output: maps.output.geometry() };
  el.weightsJson.textContent = toJson(demo.view);
  demo.lessons = renderLessons(ma, st, P, F.ctx, F.slopes, b, h, (i, j) => maskAt(b, i, j), options);
  el.lessonsJson.textContent = toJson(demo.lessons);
}

/**
 * The panel: demo is window.__maskattnDemo (what tests read); getMa() the MaskAttn in use;
 * afterRender() runs after each render. Returns { render, problem() }.
 */
export function setupMainPanel({ demo, getMa, afterRender }) {
  let problem = null;        // the current Q, K, V and tokens
  const maps = {
    mask: new Heatmap($('mask-canvas'), {
      tooltip: $('mask-tooltip'), readout: $('mask-readout'),
      hint: 'Hover or tap a cell for the rule that decides it; clicking (or Space) toggles the custom mask there.',
      onActivate: (i, j) => toggleCustom(i, j),
    }),
    weights: new Heatmap($('weights-canvas'), { tooltip: $('weights-tooltip'), readout: $('weights-readout'), hint: 'Hover or tap a cell for its exact weight.' }),
    output: new Heatmap($('output-canvas'), { tooltip: $('output-tooltip'), readout: $('output-readout'), hint: 'Hover or tap a cell for its exact value.', maxCell: 40 }),
  };
  function toggleCustom(i, j) {
    if (!problem) return;
    const data = customFor(problem);
    const n = ((Number(el.sentencePick.value) || 0) * problem.Lq + i) * problem.Lk + j;
    data[n] = data[n] ? 0 : 1;
    el.custom.checked = true;
    maps.mask.cursor = { i, j };
    render();
  }
  function render() {
    const ma = getMa();
    if (!ma) return;
    const t0 = performance.now();
    const st = readState();
    const input = readInput(st, demo);
    if (!input) return;
    const P = (problem = buildProblem(input.sentences, st));
    if (st.decode > P.Lk) input.notes.push(`decode queries ${st.decode} is more than the ${P.Lk} tokens: using ${P.Lk}`);
    el.notice.hidden = input.notes.length === 0;
    el.notice.textContent = input.notes.length ? `Input adjusted: ${input.notes.join('; ')}.` : '';
    demo.notices = input.notes.slice();
    const seg = segmentsOf(P);
    const slopes = alibiSlopes(P.H);
    const picked = fillPickers(st, P, input.sentences, seg, slopes);
    const options = maskOptions(st, P, seg);
    let results;
    try {
      results = attend(ma, st, P, options, slopes);
      el.error.hidden = true;
    } catch (error) {
      showError(error);
      demo.errors.push(String(error.message));
      return;
    }
    drawAll(ma, maps, demo, frameOf(st, P, picked, seg, slopes, results), options, performance.now() - t0);
    countRender(demo);
    afterRender?.();
  }
  return { render, problem: () => problem };
}

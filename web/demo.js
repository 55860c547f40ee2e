// The maskattn demo page: tokens -> Q, K, V -> maskattn (WebAssembly) -> heatmaps.
// The effective mask, the weights and the output all come from the library; the fully-masked-row
// lesson puts maskattn next to naive JavaScript; the speed panel times the builds.

import { init, simdSupported } from '../js/index.js';
import { buildProblem, parseSentences, segmentIds, alibiSlopes, PAD, rng } from './embedding.js';
import { Heatmap, COLORS, weightColor, divergingColor, short, full } from './heatmap.js';
import { blockingRules, diagonal } from './rules.js';
import { LESSONS, naiveVariants, rowSums } from './lessons.js';
import { setupPerf } from './perf.js';
import { setupDecode } from './decode.js';

const EXAMPLES = {
  sentence: 'The cat sat on the mat',
  batch: 'The cat sat on the mat\nDogs bark\nBirds sing at dawn',
  packed: 'The cat sat . A dog ran far .',
};

const $ = (id) => document.getElementById(id);
const el = {
  build: $('build'), backend: $('backend'), example: $('example'), sentences: $('sentences'),
  mode: $('qkv-mode'), seed: $('seed'), reseed: $('reseed'), heads: $('heads'), headDim: $('head-dim'),
  queriesAll: $('queries-all'), queriesDecode: $('queries-decode'), decodeN: $('decode-n'),
  causal: $('causal'), align: $('align'), keyPadding: $('key-padding'), queryPadding: $('query-padding'),
  window: $('window'), windowLeft: $('window-left'), windowRight: $('window-right'), prefix: $('prefix'),
  segments: $('segments'), segmentsInfo: $('segments-info'), alibi: $('alibi'), alibiInfo: $('alibi-info'),
  softcap: $('softcap'), softcapValue: $('softcap-value'), custom: $('custom'), customReset: $('custom-reset'),
  policy: $('policy'), sentencePick: $('sentence-pick'), headPick: $('head-pick'), status: $('status'),
  error: $('error'), call: $('call'), weightsTable: $('weights-table'), weightsJson: $('weights-json'),
  lessonRow: $('lesson-row'), lessons: $('lessons'), lessonsJson: $('lessons-json'),
};

// State exposed for tests and the curious: window.__maskattnDemo.
const demo = (window.__maskattnDemo = { ready: false, renders: 0, errors: [] });

let ma = null;              // the MaskAttn instance used for the pictures
let problem = null;         // the current Q, K, V and tokens
let custom = null;          // { key, data: Uint8Array [B, 1, Lq, Lk] }
let lastResult = null;

// ------------------------------------------------------------------------------------------ numbers

/** JSON with NaN and infinities kept (as strings), typed arrays as arrays. */
function toJson(x) {
  return JSON.stringify(x, (_, v) => {
    if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
    if (ArrayBuffer.isView(v)) return Array.from(v, (n) => (Number.isFinite(n) ? n : String(n)));
    return v;
  });
}

function intValue(input, fallback, min, max) {
  const n = Number.parseInt(input.value, 10);
  if (!Number.isFinite(n)) return fallback;
  return Math.max(min, Math.min(max, n));
}

function readState() {
  return {
    text: el.sentences.value,
    mode: el.mode.value,
    seed: intValue(el.seed, 42, 0, 4294967295),
    heads: Number(el.heads.value),
    headDim: Number(el.headDim.value),
    decode: el.queriesDecode.checked ? intValue(el.decodeN, 1, 1, 64) : 0,
    causal: el.causal.checked,
    align: el.align.value,
    keyPadding: el.keyPadding.checked,
    queryPadding: el.queryPadding.checked,
    window: el.window.checked ? [intValue(el.windowLeft, -1, -1, 1024), intValue(el.windowRight, -1, -1, 1024)] : null,
    prefix: intValue(el.prefix, 0, 0, 1024),
    segments: el.segments.checked,
    alibi: el.alibi.checked,
    softcap: el.softcap.checked ? Math.max(0.01, Number(el.softcapValue.value) || 1) : 0,
    custom: el.custom.checked,
    policy: el.policy.value,
  };
}

// ------------------------------------------------------------------------------------------ the problem

function segmentsOf(P) {
  const k = P.keyTokens.map((row, b) => {
    const ids = segmentIds(row.slice(0, P.lengths[b]));
    return row.map((_, j) => (j < P.lengths[b] ? ids[j] : -1));
  });
  const q = P.queryPos.map((row, b) => row.map((pos) => (pos < P.lengths[b] ? k[b][pos] : -1)));
  return { q, k };
}

function customFor(P) {
  const key = `${P.B}x${P.Lq}x${P.Lk}`;
  if (!custom || custom.key !== key) custom = { key, data: new Uint8Array(P.B * P.Lq * P.Lk).fill(1) };
  return custom.data;
}

/** The options passed to ma.attention, from the controls. */
function maskOptions(st, P, seg) {
  const o = {};
  if (st.causal) o.causal = true;
  o.align = st.align;
  if (st.keyPadding) o.keyLengths = P.lengths;
  if (st.queryPadding) o.queryLengths = P.qLengths;
  if (st.window) o.window = st.window;
  if (st.prefix > 0) o.prefix = st.prefix;
  if (st.segments) o.segments = { query: seg.q.flat(), key: seg.k.flat() };
  if (st.custom) o.allowed = { data: customFor(P), shape: [P.B, 1, P.Lq, P.Lk] };
  return o;
}

function rulesContext(st, P, seg) {
  return {
    Lq: P.Lq, Lk: P.Lk, causal: st.causal, align: st.align,
    keyLengths: st.keyPadding ? P.lengths : null, queryLengths: st.queryPadding ? P.qLengths : null,
    window: st.window, prefix: st.prefix, segQ: st.segments ? seg.q : null, segK: st.segments ? seg.k : null,
    allowed: st.custom ? customFor(P) : null,
  };
}

/** The pre-mask logit of (b, h, i, j), as the library forms it: q·k·scale -> softcap -> + ALiBi. */
function logitOf(st, P, ctx, slopes, b, h, i, j) {
  const { D, H, Lq, Lk } = P;
  const qo = ((b * H + h) * Lq + i) * D;
  const ko = ((b * H + h) * Lk + j) * D;
  let s = 0;
  for (let d = 0; d < D; d++) s += P.q[qo + d] * P.k[ko + d];
  s *= D > 0 ? 1 / Math.sqrt(D) : 1;
  if (st.softcap > 0) s = st.softcap * Math.tanh(s / st.softcap);
  if (st.alibi) s += -slopes[h] * Math.abs(diagonal(ctx, b, i) - j);
  return s;
}

// ------------------------------------------------------------------------------------------ heatmaps

const maps = {
  mask: new Heatmap($('mask-canvas'), {
    tooltip: $('mask-tooltip'), readout: $('mask-readout'),
    hint: 'Hover or tap a cell for the rule that decides it.',
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

/** [2, 3, 4, 7] -> '2–4, 7'. */
function ranges(list) {
  const parts = [];
  for (let n = 0; n < list.length; n++) {
    let m = n;
    while (m + 1 < list.length && list[m + 1] === list[m] + 1) m++;
    parts.push(m > n ? `${list[n]}–${list[m]}` : String(list[n]));
    n = m;
  }
  return parts.join(', ');
}

function quoted(t) {
  return t === PAD ? PAD : `“${t}”`;
}

// ------------------------------------------------------------------------------------------ render

function fillSelect(select, values, labels, fallback = values[0]) {
  const keep = select.value;
  if (select.options.length !== values.length || [...select.options].some((o, n) => o.textContent !== labels[n])) {
    select.replaceChildren(...values.map((v, n) => {
      const o = document.createElement('option');
      o.value = String(v);
      o.textContent = labels[n];
      return o;
    }));
  }
  select.value = values.map(String).includes(keep) ? keep : String(fallback);
}

function showError(error) {
  el.error.hidden = false;
  el.error.textContent = `maskattn rejected the call: ${error.message}`;
}

function render() {
  if (!ma) return;
  const t0 = performance.now();
  const st = readState();
  const sentences = parseSentences(st.text);
  const P = (problem = buildProblem(sentences, st));
  const seg = segmentsOf(P);
  const slopes = alibiSlopes(P.H);

  fillSelect(el.sentencePick, sentences.map((_, b) => b), sentences.map((s, b) => `${b + 1}: ${s.join(' ').slice(0, 28)}`));
  fillSelect(el.headPick, slopes.map((_, h) => h), slopes.map((_, h) => `${h + 1} of ${P.H}`));
  fillSelect(el.lessonRow, [-1, ...Array.from({ length: P.Lq }, (_, i) => i)],
    ['none', ...Array.from({ length: P.Lq }, (_, i) => `${i} (${P.queryTokens[Number(el.sentencePick.value) || 0][i]})`)], 0);
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
      return { fill: weightColor(w), text: short(w), flag: !maskAt(b, i, j) };
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
      return { fill, text: short(x, 2) };
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

  renderCall(st, P, options);
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

  renderLessons(st, P, ctx, slopes, b, h, (i, j) => maskAt(b, i, j), options);

  demo.renders += 1;
  document.body.dataset.renders = String(demo.renders);
  perfUi?.refreshLabel();
}

function renderCall(st, P, options) {
  const shown = { ...options };
  if (shown.segments) shown.segments = { query: `[${shown.segments.query.join(', ')}]`, key: `[${shown.segments.key.join(', ')}]` };
  if (shown.allowed) shown.allowed = `{ data: Uint8Array(${shown.allowed.data.length}), shape: [${shown.allowed.shape.join(', ')}] }`;
  if (st.alibi) shown.alibiSlopes = alibiSlopes(P.H);
  if (st.softcap > 0) shown.softcap = st.softcap;
  shown.fullyMasked = st.policy;
  shown.returnWeights = true;
  const lines = Object.entries(shown).map(([key, value]) => {
    let text;
    if (Array.isArray(value)) text = `[${value.map((x) => (typeof x === 'number' ? full(x) : x)).join(', ')}]`;
    else if (value && typeof value === 'object') text = `{ ${Object.entries(value).map(([k, v]) => `${k}: ${v}`).join(', ')} }`;
    else text = typeof value === 'string' && !value.startsWith('{') ? `'${value}'` : String(value);
    return `  ${key}: ${text},`;
  });
  el.call.textContent = `import { init } from '/js/index.js';
const ma = await init();   // ${ma.backend.arch}, ${ma.backend.lanes} lane(s), maskattn ${ma.backend.version}
const q = { data: Q, shape: [${P.B}, ${P.H}, ${P.Lq}, ${P.D}] };   // [B, Hq, Lq, D]
const k = { data: K, shape: [${P.B}, ${P.H}, ${P.Lk}, ${P.D}] };   // [B, Hkv, Lk, D]
const v = { data: V, shape: [${P.B}, ${P.H}, ${P.Lk}, ${P.D}] };   // [B, Hkv, Lk, Dv]
const { output, weights } = ma.attention(q, k, v, {
${lines.join('\n')}
});`;
}

function renderTable(P, b, h, W, allowed, rowLabels, colLabels) {
  const details = $('table-details');
  if (!details.open) {
    el.weightsTable.replaceChildren();
    return;
  }
  const table = document.createElement('table');
  table.className = 'weights-table';
  const caption = document.createElement('caption');
  caption.textContent = `Weights of sentence ${b + 1}, head ${h + 1}: rows are queries, columns keys; “masked” cells are never read.`;
  table.append(caption);
  const head = document.createElement('tr');
  head.append(document.createElement('td'));
  colLabels.forEach((t, j) => {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = `${j}: ${t}`;
    head.append(th);
  });
  table.append(head);
  for (let i = 0; i < P.Lq; i++) {
    const tr = document.createElement('tr');
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = `${i}: ${rowLabels[i]}`;
    tr.append(th);
    for (let j = 0; j < P.Lk; j++) {
      const td = document.createElement('td');
      const w = W(i, j);
      if (!allowed(i, j) && w === 0) {
        td.textContent = 'masked';
        td.className = 'masked';
      } else td.textContent = full(w);
      tr.append(td);
    }
    table.append(tr);
  }
  el.weightsTable.replaceChildren(table);
}

// ------------------------------------------------------------------------------------------ lesson

const lessonMaps = {};
function buildLessonPanels() {
  for (const lesson of LESSONS) {
    const article = document.createElement('article');
    article.className = 'lesson';
    article.dataset.lesson = lesson.id;
    const h3 = document.createElement('h3');
    h3.textContent = lesson.title;
    const why = document.createElement('p');
    why.className = 'why';
    why.textContent = lesson.why;
    const box = document.createElement('div');
    box.className = 'map-box';
    const scroll = document.createElement('div');
    scroll.className = 'map-scroll';
    const canvas = document.createElement('canvas');
    canvas.tabIndex = 0;
    canvas.setAttribute('role', 'img');
    canvas.setAttribute('aria-label', `${lesson.title}: weights heatmap with a row-sum column. Arrow keys move between cells.`);
    scroll.append(canvas);
    const tip = document.createElement('div');
    tip.className = 'tooltip';
    tip.hidden = true;
    box.append(scroll, tip);
    const result = document.createElement('p');
    result.className = 'row-result';
    const readout = document.createElement('p');
    readout.className = 'readout';
    readout.setAttribute('aria-live', 'polite');
    article.append(h3, why, box, result, readout);
    el.lessons.append(article);
    lessonMaps[lesson.id] = {
      article, result,
      map: new Heatmap(canvas, { tooltip: tip, readout, hint: 'Hover or tap a cell for its numbers.', maxCell: 34, minCell: 12 }),
    };
  }
}

function vec(a) {
  return `[${Array.from(a, (x) => short(x, 2)).join(', ')}]`;
}

function renderLessons(st, P, ctx, slopes, b, h, allowed, options) {
  const { Lq, Lk, D } = P;
  const row = Number(el.lessonRow.value);
  const mask = new Uint8Array(Lq * Lk);
  for (let i = 0; i < Lq; i++) for (let j = 0; j < Lk; j++) mask[i * Lk + j] = i !== row && allowed(i, j) ? 1 : 0;
  const slice = (data, L, i0) => data.subarray(((b * P.H + h) * L + i0) * D, ((b * P.H + h) * L + i0 + L) * D);
  const q1 = slice(P.q, Lq, 0);
  const k1 = slice(P.k, Lk, 0);
  const v1 = slice(P.v, Lk, 0);

  // maskattn: the same sentence and head, the lesson's mask as `allowed`, the same logit terms.
  const o = { align: st.align, allowed: { data: mask, shape: [Lq, Lk] }, fullyMasked: 'zero', returnWeights: true, returnLse: true };
  if (options.keyLengths) o.keyLengths = [P.lengths[b]];
  if (options.queryLengths) o.queryLengths = [P.qLengths[b]];
  if (st.alibi) o.alibiSlopes = [slopes[h]];
  if (st.softcap > 0) o.softcap = st.softcap;
  const one = (data, L) => ({ data: Float32Array.from(data), shape: [1, 1, L, D] });
  const r = ma.attention(one(q1, Lq), one(k1, Lk), one(v1, Lk), o);

  const logits = new Float64Array(Lq * Lk);
  for (let i = 0; i < Lq; i++) for (let j = 0; j < Lk; j++) logits[i * Lk + j] = logitOf(st, P, ctx, slopes, b, h, i, j);
  const naive = naiveVariants(logits, mask, v1, Lq, Lk, D);
  const all = { zero: { weights: r.weights.data, output: r.output.data }, ...naive };

  const empty = Array.from({ length: Lq }, (_, i) => !mask.subarray(i * Lk, (i + 1) * Lk).some((x) => x));
  const exposed = { row, fullyMaskedRows: empty.map((e, i) => (e ? i : -1)).filter((i) => i >= 0), panels: {} };
  for (const lesson of LESSONS) {
    const { weights, output } = all[lesson.id];
    const sums = rowSums(weights, Lq, Lk);
    let total = 0;
    for (const x of output) total += x;
    const ui = lessonMaps[lesson.id];
    ui.map.update({
      rows: Lq, cols: Lk + 1, gapBeforeCol: Lk,
      rowLabels: P.queryTokens[b], colLabels: [...P.keyTokens[b], 'Σ'],
      rowLabelMuted: (i) => P.queryPos[b][i] >= P.lengths[b],
      rowMark: (i) => (empty[i] ? '∅' : null),
      highlightRow: row >= 0 ? row : null,
      cell: (i, j) => {
        if (j === Lk) {
          const s = sums[i];
          if (Number.isNaN(s)) return { fill: COLORS.nan, text: 'NaN', ink: '#ffffff' };
          const good = Math.abs(s - 1) < 1e-4 || (empty[i] && s === 0);
          return { fill: good ? '#e3f1e8' : '#fde2cc', text: s.toFixed(2), ink: '#1f2933' };
        }
        const w = weights[i * Lk + j];
        if (Number.isNaN(w)) return { fill: COLORS.nan, text: 'NaN', ink: '#ffffff' };
        const m = mask[i * Lk + j];
        if (!m && w === 0) return { hatch: true };
        return { fill: weightColor(w), text: short(w), flag: !m };
      },
      info: (i, j) => {
        if (j === Lk) return `row ${i} ${quoted(P.queryTokens[b][i])}: weights sum to ${full(sums[i])}\noutput row ${vec(output.subarray(i * D, (i + 1) * D))}`;
        const w = weights[i * Lk + j];
        const m = mask[i * Lk + j];
        return `query ${i} ${quoted(P.queryTokens[b][i])} → key ${j} ${quoted(P.keyTokens[b][j])}\n${m ? 'allowed' : 'masked'}; weight ${full(w)}` +
          (m ? '' : w !== 0 && !Number.isNaN(w) ? '\na masked key that still got weight' : '');
      },
    });
    const rowW = row >= 0 ? weights.subarray(row * Lk, (row + 1) * Lk) : null;
    const rowO = row >= 0 ? output.subarray(row * D, (row + 1) * D) : null;
    ui.result.textContent = rowW
      ? `row ${row}: weights ${vec(rowW)}, Σ = ${Number.isNaN(sums[row]) ? 'NaN' : sums[row].toFixed(2)}; output ${vec(rowO)}. Σ O = ${full(total)}`
      : `no row chosen. Σ O = ${full(total)}`;
    ui.article.dataset.total = String(total);
    exposed.panels[lesson.id] = {
      rowWeights: rowW ? Array.from(rowW) : null, rowOutput: rowO ? Array.from(rowO) : null,
      rowSums: sums, totalOutput: total, weights: Array.from(weights), output: Array.from(output),
    };
  }
  demo.lessons = exposed;
  el.lessonsJson.textContent = toJson(exposed);
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

function setExample(name) {
  if (name === 'custom') return;
  el.sentences.value = EXAMPLES[name];
  if (name === 'batch') el.keyPadding.checked = true;
  if (name === 'packed') el.segments.checked = true;
  el.sentencePick.value = '0';
}

let textTimer = 0;
el.sentences.addEventListener('input', () => {
  el.example.value = 'custom';
  clearTimeout(textTimer);
  textTimer = setTimeout(schedule, 150);
});
el.example.addEventListener('change', () => {
  setExample(el.example.value);
  schedule();
});
el.reseed.addEventListener('click', () => {
  el.seed.value = String(Math.floor(rng(Date.now() >>> 0)() * 100000));
  schedule();
});
el.customReset.addEventListener('click', () => {
  if (custom) custom.data.fill(1);
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

async function main() {
  el.sentences.value = EXAMPLES.sentence;
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
  perfUi = setupPerf({
    root: $('perf'), preset: $('perf-preset'), causal: $('perf-causal'), run: $('perf-run'), stop: $('perf-stop'),
    progress: $('perf-progress'), status: $('perf-status'), table: $('perf-table'), summary: $('perf-summary'),
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
    error: $('decode-error'), fills: $('decode-fills'),
    weightsCanvas: $('decode-weights-canvas'), weightsTooltip: $('decode-weights-tooltip'), weightsReadout: $('decode-weights-readout'),
    slotsCanvas: $('decode-slots-canvas'), slotsTooltip: $('decode-slots-tooltip'), slotsReadout: $('decode-slots-readout'),
    call: $('decode-call'), json: $('decode-json'),
  }, {
    getMa: () => ma,
    expose: (state) => {
      demo.decode = state;
      demo.decodeRenders = (demo.decodeRenders ?? 0) + 1;
    },
  });
  decodeUi.reset();
  demo.ready = true;
  document.body.dataset.ready = 'true';
}

main();

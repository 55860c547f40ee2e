// The decode panel's pictures and text (decode.js wires it, decode-session.js holds the cache): the
// weights over the cached positions, the cache's slots (a ring with a sliding window), how full it
// is, the status, RoPE and memory lines, and the state as JSON for tests.

import { COLORS, weightColor, short, shorter, full } from './heatmap.js';
import { HQ, HKV, D, done } from './decode-session.js';
import { callText } from './decode-code.js';

// The two kinds of 'nothing' differ in the maps as in the legend: an overwritten position is darker
// and dotted, a position or slot that never held anything is pale and plain.
const EMPTY = '#eef1f4';      // a slot or position the cache does not hold
const GONE = '#c3cad3';       // a position overwritten in the ring
const QUANTIZED = new Set(['q8', 'q4']);  // stored in blocks of 32 with a scale each

const tokenAt = (s, b, p) => s.sentences[b][p] ?? '';
const quoted = (t) => `“${t}”`;
const weightOf = (s, b, h, j) => s.weights.data[(b * HQ + h) * s.weights.shape[3] + j];

/** What the cache holds of sequence b: the positions it still stores. */
function held(s, b) {
  const len = s.lengths[b];
  const first = s.window > 0 ? Math.max(0, len - s.capacity) : 0;
  return { first, count: len - first };
}

/** How position j of sequence b stands this step: 'none' | 'gone' | 'outside' | 'idle' | 'attended'. */
function kind(s, b, j) {
  const len = s.lengths[b];
  if (j >= len) return 'none';
  if (j < held(s, b).first) return 'gone';
  if (!s.active[b]) return 'idle';
  if (s.window > 0 && j < len - s.window) return 'outside';
  return 'attended';
}

/** The position slot c of sequence b holds (position p sits in slot p mod capacity), or null. */
function slot(s, b, c) {
  const { first, count } = held(s, b);
  if (count <= 0) return null;
  const last = first + count - 1;
  if (s.window === 0) return c < s.lengths[b] ? c : null;
  const p = last - ((((last - c) % s.capacity) + s.capacity) % s.capacity);
  return p >= first ? p : null;
}

const newest = (s, b, p) => s.appended[b].count > 0 && p >= s.appended[b].from && p < s.appended[b].from + s.appended[b].count;

function weightInfo(s, b, h, j) {
  const k = kind(s, b, j);
  const where = `sequence ${b + 1}, head ${h + 1} → position ${j}${j < s.lengths[b] ? ` ${quoted(tokenAt(s, b, j))}` : ''}`;
  const w = weightOf(s, b, h, j);
  if (k === 'none') return `${where}\nsequence ${b + 1} has only ${s.lengths[b]} positions (ragged batch): nothing here, weight ${full(w)}`;
  if (k === 'gone') return `${where}\noverwritten in the ring (slot ${j % s.capacity} now holds a newer position): weight ${full(w)}`;
  if (k === 'idle') return `${where}\nsequence ${b + 1} has finished: no query this step (queryLengths 0), weight ${full(w)}`;
  if (k === 'outside') return `${where}\nstill in the cache but outside the window of ${s.window}: masked, never read (weight ${full(w)})`;
  return `${where}\nweight ${full(w)}${j === s.lengths[b] - 1 ? '\nthe query’s own position (appended this step)' : ''}`;
}

/** The weights strip: one row per (sequence, query head), one column per position. */
function drawWeights(map, s) {
  const rowOf = (i) => ({ b: Math.floor(i / HQ), h: i % HQ });
  const Lk = s.weights.shape[3];
  map.update({
    rows: s.B * HQ, cols: Lk,
    rowLabels: Array.from({ length: s.B * HQ }, (_, i) => `seq ${rowOf(i).b + 1} · head ${rowOf(i).h + 1}`),
    colLabels: Array.from({ length: Lk }, (_, j) => String(j)),
    rowLabelMuted: (i) => !s.active[rowOf(i).b],
    rowMark: (i) => (s.active[rowOf(i).b] ? null : '∅'),
    cell: (i, j) => {
      const { b, h } = rowOf(i);
      const k = kind(s, b, j);
      if (k === 'none') return { fill: EMPTY };
      if (k === 'gone') return { fill: GONE, mark: '•', ink: COLORS.label };
      if (k === 'outside' || k === 'idle') return { hatch: true };
      const w = weightOf(s, b, h, j);
      return { fill: weightColor(w), text: short(w), narrow: shorter(w), outline: j === s.lengths[b] - 1 ? COLORS.highlight : null };
    },
    info: (i, j) => weightInfo(s, rowOf(i).b, rowOf(i).h, j),
  });
}

function slotInfo(s, b, c) {
  const p = slot(s, b, c);
  if (p === null) return `sequence ${b + 1}, slot ${c}: empty`;
  const k = kind(s, b, p);
  const lines = [`sequence ${b + 1}, slot ${c}: position ${p} ${quoted(tokenAt(s, b, p))}${newest(s, b, p) ? ' (written this step)' : ''}`];
  if (k === 'outside') lines.push(`outside the window of ${s.window}: not read this step`);
  else if (k === 'idle') lines.push('the sequence has finished: not attended');
  else lines.push(`weight ${Array.from({ length: HQ }, (_, h) => `head ${h + 1} ${full(weightOf(s, b, h, p))}`).join(', ')}`);
  return lines.join('\n');
}

/** The slots: what each of the `capacity` rows of the cache holds, coloured by the heads' mean weight. */
function drawSlots(map, s) {
  const meanWeight = (b, p) => {
    let m = 0;
    for (let h = 0; h < HQ; h++) m += weightOf(s, b, h, p);
    return m / HQ;
  };
  map.update({
    rows: s.B, cols: s.capacity,
    rowLabels: Array.from({ length: s.B }, (_, b) => `sequence ${b + 1}`),
    colLabels: Array.from({ length: s.capacity }, (_, c) => String(c)),
    rowLabelMuted: (b) => !s.active[b],
    cell: (b, c) => {
      const p = slot(s, b, c);
      if (p === null) return { fill: EMPTY };
      const k = kind(s, b, p);
      const text = tokenAt(s, b, p);
      const outline = newest(s, b, p) ? COLORS.highlight : null;
      if (k === 'outside' || k === 'idle') return { hatch: true, text, fit: true, ink: '#ffffff', outline };
      return { fill: weightColor(meanWeight(b, p)), text, fit: true, outline };
    },
    info: (b, c) => slotInfo(s, b, c),
  });
}

/** Fill: each sequence's length against the capacity, as a meter and in words. */
function fillRow(s, b) {
  const row = document.createElement('div');
  row.className = 'fill-row';
  const label = document.createElement('label');
  label.htmlFor = `decode-fill-${b}`;
  label.textContent = `Sequence ${b + 1}`;
  const meter = document.createElement('meter');
  meter.id = `decode-fill-${b}`;
  meter.min = 0;
  meter.max = s.capacity;
  const h = held(s, b).count;
  meter.value = h;
  meter.textContent = `${h} of ${s.capacity}`;
  const text = document.createElement('span');
  text.className = 'fill-text';
  text.dataset.length = String(s.lengths[b]);
  const wrapped = s.window > 0 && s.lengths[b] > s.capacity;
  const finished = !s.active[b] ? ', finished' : '';
  text.textContent = `length ${s.lengths[b]} · holds ${h} of ${s.capacity} slots${wrapped ? ` (ring wrapped ${Math.floor((s.lengths[b] - 1) / s.capacity)}×)` : ''}${finished}`;
  row.append(label, meter, text);
  return row;
}

function statusText(s, ma) {
  const added = s.appended.map((a, b) => (a.count ? `sequence ${b + 1} ${a.count > 1 ? `${a.count} prompt tokens` : quoted(a.tokens[0])}` : `sequence ${b + 1} nothing (finished)`));
  return `${s.step === 0 ? 'Prompt' : `Step ${s.step}`}: appended ${added.join(', ')}. ` +
    `cache.lengths = [${s.lengths.join(', ')}], capacity ${s.capacity}${s.window ? `, window ${s.window} (ring)` : ''}, ` +
    `${s.dtype}${s.rope ? `, RoPE θ ${s.rope.theta} (${s.rope.layout})` : ''}, byteLength ${s.cache.byteLength}. Computed by ${ma.backend.arch}.` +
    (done(s) ? ' End of the text: Reset starts again.' : '');
}

function ropeText(s) {
  if (!s.rope) return '';
  const within = (err) => (err === 0 ? 'identical' : `within ${err.toExponential(2)}`);
  return `RoPE: the cache rotated each key by its position when it was appended and rotates each query at its own position ` +
    `(${s.lengths.map((n) => n - 1).join(', ')}) now, so the weights depend on how far apart positions are. ` +
    `Against rotating Q and K here in JavaScript and attending with a plain cache: weights ${within(s.ropeError.weights)}, output ${within(s.ropeError.output)}` +
    `${s.dtype === 'float32' ? '' : ' (both float32: the rounding of the stored K and V is the line above)'}.`;
}

/** The memory line; `dtypes` are the panel's choices (its select box), the one list of them on the page. */
function memoryText(s, f32Bytes, dtypes) {
  const quantized = QUANTIZED.has(s.dtype);
  const others = dtypes.filter((d) => d !== 'float32');
  if (s.dtype === 'float32')
    return `Memory held: ${s.cache.byteLength} bytes (${s.B} × ${HKV} × ${s.capacity} slots × (${D} + ${D}) × 4 bytes). ` +
      `Pick ${others.slice(0, -1).join(', ')} or ${others.at(-1)} to see what rounding the stored K and V costs.`;
  return `Memory held: ${s.cache.byteLength} bytes, ${(s.cache.byteLength / f32Bytes).toFixed(2)}× a float32 cache's ${f32Bytes}` +
    (quantized ? ` (blocks of 32 with a 4-byte scale: at this head size of ${D} a row still takes a whole block; at D = 128 ${s.dtype} takes ${s.dtype === 'q8' ? '0.28' : '0.16'}×)` : '') +
    `. Against a float32 cache fed the same rows, the output moves by at most ${s.error.toExponential(2)} (${(100 * s.error / s.maxV).toFixed(3)}% of max |V|).`;
}

/** What tests read (window.__maskattnDemo.decode and the panel's JSON). */
function stateOf(s, maps, f32Bytes) {
  const B = s.B, Lk = s.weights.shape[3];
  return {
    step: s.step, B: s.B, Hq: HQ, Hkv: HKV, D, dtype: s.dtype, window: s.window, capacity: s.capacity, rope: s.rope, ropeError: s.ropeError,
    lengths: s.lengths.slice(), held: Array.from({ length: B }, (_, b) => held(s, b).count), active: s.active.slice(),
    byteLength: s.cache.byteLength, float32ByteLength: f32Bytes, error: s.error, maxV: s.maxV, done: done(s), weightsShape: s.weights.shape.slice(),
    rows: B * HQ, cols: Lk,
    weights: Array.from({ length: B * HQ }, (_, i) => Array.from({ length: Lk }, (_, j) => weightOf(s, Math.floor(i / HQ), i % HQ, j))),
    kinds: Array.from({ length: B }, (_, b) => Array.from({ length: Lk }, (_, j) => kind(s, b, j))),
    slots: Array.from({ length: B }, (_, b) => Array.from({ length: s.capacity }, (_, c) => slot(s, b, c))),
    heatmaps: { weights: maps.weights.geometry(), slots: maps.slots.geometry() },
  };
}

/** Draws the session's current step; returns the state tests read. */
export function render(els, maps, s, ma) {
  drawWeights(maps.weights, s);
  drawSlots(maps.slots, s);
  els.fills.replaceChildren(...Array.from({ length: s.B }, (_, b) => fillRow(s, b)));
  els.status.textContent = statusText(s, ma);
  els.ropeCheck.hidden = !s.rope;
  els.ropeCheck.textContent = ropeText(s);
  const f32Bytes = (s.reference ?? s.cache).byteLength;  // the float32 cache beside it, or itself
  els.memory.textContent = memoryText(s, f32Bytes, Array.from(els.dtype.options, (o) => o.value));
  els.next.disabled = done(s);
  els.play.disabled = done(s);
  els.call.textContent = callText(s);
  const state = stateOf(s, maps, f32Bytes);
  els.json.textContent = JSON.stringify(state);
  els.root.dataset.step = String(s.step);
  return state;
}

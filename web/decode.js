// The decode panel: token-by-token generation through maskattn's KV cache. Each step appends the
// new token's K and V (cache.append, with per-sequence counts for a ragged batch) and attends the
// newest query of every sequence over what the cache holds (cache.attend with returnWeights). Shows
// the weights over the cached positions, the cache's slots (a ring with a sliding window) and how
// full it is. Q, K and V come from the page's seeded token embeddings (embedding.js). With RoPE on,
// the cache rotates each key by its position as it is appended and each query as it attends
// (createKVCache({ rope })); a plain float32 cache fed Q and K rotated here in JavaScript checks it.

import { buildProblem, tokenize } from './embedding.js';
import { Heatmap, COLORS, weightColor, short, shorter, full } from './heatmap.js';
import { floatArray } from './call-panels.js';

// Two sequences of a batch: the second is shorter (its prompt is padded) and finishes early.
const TEXTS = ['The cat sat on the mat and then it slept in the warm sun all day', 'Birds sing at dawn .'];
const PROMPT = [4, 2];        // prompt tokens of each sequence
const HQ = 2, HKV = 1, D = 8; // two query heads share one KV head (GQA / MQA)
const SEED = 42;
const PLAY_MS = 650;
const THETA = 10000;          // RoPE's usual base (Llama 2)

// The two kinds of 'nothing' differ in the maps as in the legend: an overwritten position is darker
// and dotted, a position or slot that never held anything is pale and plain.
const EMPTY = '#eef1f4';      // a slot or position the cache does not hold
const GONE = '#c3cad3';       // a position overwritten in the ring

/**
 * els: { root, form, dtype, window, windowSize, capacity, ragged, next, play, reset, status, memory, error, fills,
 *        weightsCanvas, weightsTooltip, weightsReadout, slotsCanvas, slotsTooltip, slotsReadout,
 *        call, json, rope, ropeTheta, ropeLayout, ropeCheck }
 * getMa() -> the MaskAttn instance in use; expose(state) publishes the state for tests.
 */
export function setupDecode(els, { getMa, expose }) {
  const texts = TEXTS.map(tokenize);
  let s = null;          // the session: cache, lengths, the last step's result
  let timer = 0;

  const weightsMap = new Heatmap(els.weightsCanvas, {
    tooltip: els.weightsTooltip, readout: els.weightsReadout, maxCell: 44,
    hint: 'Hover or tap a cell for the position, its token and its weight.',
  });
  const slotsMap = new Heatmap(els.slotsCanvas, {
    tooltip: els.slotsTooltip, readout: els.slotsReadout, maxCell: 48,
    hint: 'Hover or tap a slot for the position it holds.',
  });

  function settings() {
    const int = (input, fallback, min, max) => {
      const n = Number.parseInt(input.value, 10);
      return Number.isFinite(n) ? Math.max(min, Math.min(max, n)) : fallback;
    };
    const windowOn = els.window.checked;
    const W = int(els.windowSize, 4, 1, 16);
    if (Number(els.capacity.min) !== W) els.capacity.min = String(W);
    const longest = Math.max(...texts.map((t) => t.length));
    const capacity = windowOn ? int(els.capacity, W + 2, W, 16) : longest;
    els.windowSize.disabled = !windowOn;
    els.capacity.disabled = !windowOn;
    const notes = [];
    const typedW = els.windowSize.value, typedC = els.capacity.value;
    if (windowOn && String(W) !== typedW.trim()) notes.push(`window ${typedW === '' ? '(empty)' : typedW} is not a whole number in 1…16: using ${W}`);
    if (windowOn && String(capacity) !== typedC.trim()) notes.push(`capacity ${typedC === '' ? '(empty)' : typedC} is not a whole number in ${W}…16: using ${capacity}`);
    els.windowSize.value = String(W);
    els.capacity.value = String(capacity);
    const ropeOn = els.rope.checked;
    els.ropeTheta.disabled = !ropeOn;
    els.ropeLayout.disabled = !ropeOn;
    const typedTheta = els.ropeTheta.value;
    const theta = Number(typedTheta) > 0 && Number.isFinite(Number(typedTheta)) ? Number(typedTheta) : THETA;
    if (ropeOn && String(theta) !== typedTheta.trim()) notes.push(`θ ${typedTheta === '' ? '(empty)' : typedTheta} is not a number > 0: using ${theta}`);
    els.ropeTheta.value = String(theta);
    if (els.notice) {
      els.notice.hidden = notes.length === 0;
      els.notice.textContent = notes.length ? `Adjusted: ${notes.join('; ')}.` : '';
    }
    const rope = ropeOn ? { theta, layout: els.ropeLayout.value } : null;
    return { dtype: els.dtype.value, window: windowOn ? W : 0, capacity, B: els.ragged.checked ? 2 : 1, rope };
  }

  function stop() {
    if (timer) clearInterval(timer);
    timer = 0;
    els.play.textContent = 'Play';
    els.play.setAttribute('aria-pressed', 'false');
  }

  /** K or V rows [B, Hkv, T, D] for the positions pos[b] .. pos[b] + count[b] - 1 (NaN where not taken). */
  function kvRows(P, which, start, counts, T) {
    const out = new Float32Array(s.B * HKV * T * D).fill(NaN);  // rows beyond counts[b] are never written
    for (let b = 0; b < s.B; b++)
      for (let t = 0; t < counts[b]; t++) {
        const src = ((b * P.H + 0) * P.Lk + start[b] + t) * D;
        out.set(P[which].subarray(src, src + D), ((b * HKV + 0) * T + t) * D);
      }
    return { data: out, shape: [s.B, HKV, T, D] };
  }

  /**
   * RoPE done here, for the check: rotates row [D] of `data` at offset `o`, at position `pos`, in
   * place (docs/semantics.md: pair i turns by pos * theta^(-2i/D); halves pairs (i, i + D/2),
   * interleaved (2i, 2i + 1)).
   */
  function rotate(data, o, pos, { theta, layout }) {
    const half = D / 2;
    for (let i = 0; i < half; i++) {
      const a = pos * theta ** (-2 * i / D), c = Math.cos(a), sn = Math.sin(a);
      const [xi, yi] = layout === 'interleaved' ? [o + 2 * i, o + 2 * i + 1] : [o + i, o + i + half];
      const x = data[xi], y = data[yi];
      data[xi] = x * c - y * sn;
      data[yi] = x * sn + y * c;
    }
  }

  /** K rows as kvRows gives them, each rotated at its absolute position (what the rope cache stores). */
  function rotatedKeys(rows, start, counts, T) {
    const data = rows.data.slice();
    for (let b = 0; b < s.B; b++)
      for (let t = 0; t < counts[b]; t++) rotate(data, ((b * HKV + 0) * T + t) * D, start[b] + t, s.rope);
    return { data, shape: rows.shape };
  }

  /** Appends the same rows to every cache of the session (the check cache gets its keys rotated here). */
  function appendAll(start, counts, T) {
    const k = kvRows(s.P, 'k', start, counts, T), v = kvRows(s.P, 'v', start, counts, T);
    for (const c of [s.cache, s.reference]) c?.append(k, v, { counts });
    s.jsRope?.append(rotatedKeys(k, start, counts, T), v, { counts });
  }

  /** The newest query of each sequence, [B, Hq, 1, D] (zeros for finished sequences: not attended). */
  function queries(P, active) {
    const q = new Float32Array(s.B * HQ * D);
    for (let b = 0; b < s.B; b++) {
      if (!active[b]) continue;
      const pos = s.lengths[b] - 1;
      for (let h = 0; h < HQ; h++) {
        const src = ((b * P.H + h) * P.Lk + pos) * D;
        q.set(P.q.subarray(src, src + D), (b * HQ + h) * D);
      }
    }
    return { data: q, shape: [s.B, HQ, 1, D] };
  }

  function attend(active) {
    const q = queries(s.P, active);
    const options = { returnWeights: true };
    if (active.some((a) => !a)) options.queryLengths = active.map((a) => (a ? 1 : 0));
    const result = s.cache.attend(q, options);
    s.q = q;
    s.weights = result.weights;
    s.options = options;
    s.active = active;
    const maxDiff = (a, b) => {
      let err = 0;
      for (let n = 0; n < a.length; n++) err = Math.max(err, Math.abs(a[n] - b[n]));
      return err;
    };
    // A float16/bfloat16/q8/q4 cache beside a float32 one fed the same rows: how far rounding moves the output.
    const float32 = s.reference ? s.reference.attend(q, options) : result;
    s.error = s.reference ? maxDiff(result.output.data, float32.output.data) : 0;
    // RoPE: the float32 rope cache against rotating Q and K in JavaScript, then a plain cache.
    if (s.jsRope) {
      const qr = q.data.slice();
      for (let b = 0; b < s.B; b++)
        for (let h = 0; h < HQ; h++) rotate(qr, (b * HQ + h) * D, s.lengths[b] - 1, s.rope);
      const want = s.jsRope.attend({ data: qr, shape: q.shape }, options);
      s.ropeError = { output: maxDiff(float32.output.data, want.output.data), weights: maxDiff(float32.weights.data, want.weights.data) };
    } else {
      s.ropeError = null;
    }
  }

  /** A new session: a fresh cache holding the prompts (step 0). */
  function reset() {
    stop();
    const ma = getMa();
    if (!ma) return;
    s?.cache?.dispose();
    s?.reference?.dispose();
    s?.jsRope?.dispose();
    const cfg = settings();
    const sentences = texts.slice(0, cfg.B);
    const P = buildProblem(sentences, { seed: SEED, heads: HQ, headDim: D, mode: 'embedding' });
    s = { ...cfg, P, sentences, step: 0, lengths: new Array(cfg.B).fill(0), appended: [], calls: [] };
    s.maxV = 0;  // the scale the error is shown against (max |V| of the problem)
    for (const x of P.v) if (Number.isFinite(x)) s.maxV = Math.max(s.maxV, Math.abs(x));
    try {
      const config = { batch: cfg.B, kvHeads: HKV, capacity: cfg.capacity, headDim: D, window: cfg.window };
      const rope = cfg.rope ? { rope: cfg.rope } : {};
      s.cache = ma.createKVCache({ ...config, ...rope, dtype: cfg.dtype });
      s.reference = cfg.dtype === 'float32' ? null : ma.createKVCache({ ...config, ...rope, dtype: 'float32' });
      s.jsRope = cfg.rope ? ma.createKVCache({ ...config, dtype: 'float32' }) : null;
      const counts = PROMPT.slice(0, cfg.B);
      const T = Math.max(...counts);
      appendAll(s.lengths, counts, T);
      s.appended = counts.map((c, b) => ({ from: 0, count: c, tokens: sentences[b].slice(0, c) }));
      s.lengths = Array.from(s.cache.lengths);
      s.lastAppend = { T, counts };
      s.history = [counts];
      attend(s.lengths.map(() => true));
      els.error.hidden = true;
    } catch (error) {
      showError(error);
      return;
    }
    render();
  }

  /** One generation step: the next token of every sequence that has one. */
  function next() {
    if (!s?.cache || done()) return false;
    const counts = s.sentences.map((t, b) => (s.lengths[b] < t.length ? 1 : 0));
    try {
      const start = s.lengths.slice();
      appendAll(start, counts, 1);
      s.appended = counts.map((c, b) => ({ from: start[b], count: c, tokens: s.sentences[b].slice(start[b], start[b] + c) }));
      s.lengths = Array.from(s.cache.lengths);
      s.lastAppend = { T: 1, counts };
      s.history.push(counts);
      s.step += 1;
      attend(counts.map((c) => c > 0));
      els.error.hidden = true;
    } catch (error) {
      stop();
      showError(error);
      return false;
    }
    render();
    return true;
  }

  const done = () => s.sentences.every((t, b) => s.lengths[b] >= t.length);

  function showError(error) {
    els.error.hidden = false;
    els.error.textContent = `maskattn rejected the call: ${error.message}`;
  }

  // ---------------------------------------------------------------------------------------- drawing

  const tokenAt = (b, p) => s.sentences[b][p] ?? '';
  const quoted = (t) => `“${t}”`;

  /** What the cache holds of sequence b: the positions it still stores. */
  function held(b) {
    const len = s.lengths[b];
    const first = s.window > 0 ? Math.max(0, len - s.capacity) : 0;
    return { first, count: len - first };
  }

  /** How position j of sequence b stands this step: 'none' | 'gone' | 'outside' | 'idle' | 'attended'. */
  function kind(b, j) {
    const len = s.lengths[b];
    if (j >= len) return 'none';
    if (j < held(b).first) return 'gone';
    if (!s.active[b]) return 'idle';
    if (s.window > 0 && j < len - s.window) return 'outside';
    return 'attended';
  }

  const weightOf = (b, h, j) => s.weights.data[(b * HQ + h) * s.weights.shape[3] + j];

  function render() {
    const B = s.B;
    const Lk = s.weights.shape[3];
    const newest = (b, p) => s.appended[b].count > 0 && p >= s.appended[b].from && p < s.appended[b].from + s.appended[b].count;

    // The weights strip: one row per (sequence, query head), one column per position.
    const rowOf = (i) => ({ b: Math.floor(i / HQ), h: i % HQ });
    weightsMap.update({
      rows: B * HQ, cols: Lk,
      rowLabels: Array.from({ length: B * HQ }, (_, i) => `seq ${rowOf(i).b + 1} · head ${rowOf(i).h + 1}`),
      colLabels: Array.from({ length: Lk }, (_, j) => String(j)),
      rowLabelMuted: (i) => !s.active[rowOf(i).b],
      rowMark: (i) => (s.active[rowOf(i).b] ? null : '∅'),
      cell: (i, j) => {
        const { b, h } = rowOf(i);
        const k = kind(b, j);
        if (k === 'none') return { fill: EMPTY };
        if (k === 'gone') return { fill: GONE, mark: '•', ink: COLORS.label };
        if (k === 'outside' || k === 'idle') return { hatch: true };
        const w = weightOf(b, h, j);
        return { fill: weightColor(w), text: short(w), narrow: shorter(w), outline: j === s.lengths[b] - 1 ? COLORS.highlight : null };
      },
      info: (i, j) => {
        const { b, h } = rowOf(i);
        const k = kind(b, j);
        const where = `sequence ${b + 1}, head ${h + 1} → position ${j}${j < s.lengths[b] ? ` ${quoted(tokenAt(b, j))}` : ''}`;
        const w = weightOf(b, h, j);
        if (k === 'none') return `${where}\nsequence ${b + 1} has only ${s.lengths[b]} positions (ragged batch): nothing here, weight ${full(w)}`;
        if (k === 'gone') return `${where}\noverwritten in the ring (slot ${j % s.capacity} now holds a newer position): weight ${full(w)}`;
        if (k === 'idle') return `${where}\nsequence ${b + 1} has finished: no query this step (queryLengths 0), weight ${full(w)}`;
        if (k === 'outside') return `${where}\nstill in the cache but outside the window of ${s.window}: masked, never read (weight ${full(w)})`;
        return `${where}\nweight ${full(w)}${j === s.lengths[b] - 1 ? '\nthe query’s own position (appended this step)' : ''}`;
      },
    });

    // The slots: what each of the `capacity` rows of the cache holds (position p sits in slot p mod capacity).
    const slot = (b, c) => {
      const { first, count } = held(b);
      if (count <= 0) return null;
      const last = first + count - 1;
      if (s.window === 0) return c < s.lengths[b] ? c : null;
      const p = last - ((((last - c) % s.capacity) + s.capacity) % s.capacity);
      return p >= first ? p : null;
    };
    const meanWeight = (b, p) => {
      let m = 0;
      for (let h = 0; h < HQ; h++) m += weightOf(b, h, p);
      return m / HQ;
    };
    slotsMap.update({
      rows: B, cols: s.capacity,
      rowLabels: Array.from({ length: B }, (_, b) => `sequence ${b + 1}`),
      colLabels: Array.from({ length: s.capacity }, (_, c) => String(c)),
      rowLabelMuted: (b) => !s.active[b],
      cell: (b, c) => {
        const p = slot(b, c);
        if (p === null) return { fill: EMPTY };
        const k = kind(b, p);
        const text = tokenAt(b, p);
        const outline = newest(b, p) ? COLORS.highlight : null;
        if (k === 'outside' || k === 'idle') return { hatch: true, text, fit: true, ink: '#ffffff', outline };
        const w = meanWeight(b, p);
        return { fill: weightColor(w), text, fit: true, outline };
      },
      info: (b, c) => {
        const p = slot(b, c);
        if (p === null) return `sequence ${b + 1}, slot ${c}: empty`;
        const k = kind(b, p);
        const lines = [`sequence ${b + 1}, slot ${c}: position ${p} ${quoted(tokenAt(b, p))}${newest(b, p) ? ' (written this step)' : ''}`];
        if (k === 'outside') lines.push(`outside the window of ${s.window}: not read this step`);
        else if (k === 'idle') lines.push('the sequence has finished: not attended');
        else lines.push(`weight ${Array.from({ length: HQ }, (_, h) => `head ${h + 1} ${full(weightOf(b, h, p))}`).join(', ')}`);
        return lines.join('\n');
      },
    });

    // Fill: lengths vs capacity.
    els.fills.replaceChildren(...Array.from({ length: B }, (_, b) => {
      const row = document.createElement('div');
      row.className = 'fill-row';
      const label = document.createElement('label');
      label.htmlFor = `decode-fill-${b}`;
      label.textContent = `Sequence ${b + 1}`;
      const meter = document.createElement('meter');
      meter.id = `decode-fill-${b}`;
      meter.min = 0;
      meter.max = s.capacity;
      const h = held(b).count;
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
    }));

    // Status and the calls.
    const ma = getMa();
    const added = s.appended.map((a, b) => (a.count ? `sequence ${b + 1} ${a.count > 1 ? `${a.count} prompt tokens` : quoted(a.tokens[0])}` : `sequence ${b + 1} nothing (finished)`));
    els.status.textContent = `${s.step === 0 ? 'Prompt' : `Step ${s.step}`}: appended ${added.join(', ')}. ` +
      `cache.lengths = [${s.lengths.join(', ')}], capacity ${s.capacity}${s.window ? `, window ${s.window} (ring)` : ''}, ` +
      `${s.dtype}${s.rope ? `, RoPE θ ${s.rope.theta} (${s.rope.layout})` : ''}, byteLength ${s.cache.byteLength}. Computed by ${ma.backend.arch}.` +
      (done() ? ' End of the text: Reset starts again.' : '');
    const within = (err) => (err === 0 ? 'identical' : `within ${err.toExponential(2)}`);
    els.ropeCheck.hidden = !s.rope;
    els.ropeCheck.textContent = s.rope
      ? `RoPE: the cache rotated each key by its position when it was appended and rotates each query at its own position ` +
        `(${s.lengths.map((n) => n - 1).join(', ')}) now, so the weights depend on how far apart positions are. ` +
        `Against rotating Q and K here in JavaScript and attending with a plain cache: weights ${within(s.ropeError.weights)}, output ${within(s.ropeError.output)}` +
        `${s.dtype === 'float32' ? '' : ' (both float32: the rounding of the stored K and V is the line above)'}.`
      : '';
    const f32Bytes = (s.reference ?? s.cache).byteLength;  // the float32 cache beside it, or itself
    const maxV = s.maxV;
    const quantized = s.dtype === 'q8' || s.dtype === 'q4';
    els.memory.textContent = s.dtype === 'float32'
      ? `Memory held: ${s.cache.byteLength} bytes (${s.B} × ${HKV} × ${s.capacity} slots × (${D} + ${D}) × 4 bytes). Pick float16, bfloat16, q8 or q4 to see what rounding the stored K and V costs.`
      : `Memory held: ${s.cache.byteLength} bytes, ${(s.cache.byteLength / f32Bytes).toFixed(2)}× a float32 cache's ${f32Bytes}` +
        (quantized ? ` (blocks of 32 with a 4-byte scale: at this head size of ${D} a row still takes a whole block; at D = 128 ${s.dtype} takes ${s.dtype === 'q8' ? '0.28' : '0.16'}×)` : '') +
        `. Against a float32 cache fed the same rows, the output moves by at most ${s.error.toExponential(2)} (${(100 * s.error / maxV).toFixed(3)}% of max |V|).`;
    els.next.disabled = done();
    els.play.disabled = done();
    if (done()) stop();

    // This step as a program that runs when copied: every append so far, then this step's attend.
    const taken = s.history.reduce((t, counts) => t.map((n, b) => n + counts[b]), new Array(s.B).fill(0));
    const rowsOf = (which) => Array.from({ length: s.B }, (_, b) => s.P[which].subarray(((b * s.P.H + 0) * s.P.Lk) * D, ((b * s.P.H + 0) * s.P.Lk + taken[b]) * D));
    const ropeCfg = s.rope ? `, rope: { theta: ${s.rope.theta}, layout: '${s.rope.layout}' }` : '';
    const cfg = `{ batch: ${s.B}, kvHeads: ${HKV}, capacity: ${s.capacity}, headDim: ${D}, dtype: '${s.dtype}'${s.window ? `, window: ${s.window}` : ''}${ropeCfg} }`;
    const opts = s.options.queryLengths ? `{ returnWeights: true, queryLengths: [${s.options.queryLengths.join(', ')}] }` : '{ returnWeights: true }';
    els.call.textContent = `// maskattn: the KV cache panel at step ${s.step}, as code (${s.sentences.map((t) => JSON.stringify(t.join(' '))).join(', ')}).
import { init } from 'maskattn';

const [B, Hq, Hkv, D] = [${s.B}, ${HQ}, ${HKV}, ${D}];   // ${HQ} query heads share ${HKV} KV head
// K and V of every position each sequence has taken so far (the page's token embeddings), row by row${s.rope ? ',\n// unrotated: the cache rotates K as it appends and q as it attends (rope)' : ''}.
const K = [
${rowsOf('k').map((r) => `  ${floatArray(r, '    ', 96)},`).join('\n')}
];
const V = [
${rowsOf('v').map((r) => `  ${floatArray(r, '    ', 96)},`).join('\n')}
];
// The newest query of each sequence, [B, Hq, 1, D]${s.active.some((a) => !a) ? ' (zeros for a finished one: queryLengths 0)' : ''}.
const q = { data: ${floatArray(s.q.data, '  ', 96)}, shape: [B, Hq, 1, D] };
// What each append took: the prompts, then one token per step and sequence.
const appends = ${JSON.stringify(s.history)};

const ma = await init();
const cache = ma.createKVCache(${cfg});
const taken = new Array(B).fill(0);
for (const counts of appends) {
  const T = Math.max(...counts);
  const rows = (X) => {   // [B, Hkv, T, D]; rows past counts[b] are never read (NaN here)
    const data = new Float32Array(B * Hkv * T * D).fill(NaN);
    counts.forEach((c, b) => data.set(X[b].subarray(taken[b] * D, (taken[b] + c) * D), b * T * D));
    return { data, shape: [B, Hkv, T, D] };
  };
  cache.append(rows(K), rows(V), { counts });
  counts.forEach((c, b) => { taken[b] += c; });
}
console.log('lengths', Array.from(cache.lengths));   // [${s.lengths.join(', ')}]
const { weights } = cache.attend(q, ${opts});   // causal, bottom-right on each sequence's length
const Lk = weights.shape[3];
for (let b = 0; b < B; b++)
  for (let h = 0; h < Hq; h++)
    console.log(\`seq \${b + 1} head \${h + 1}:\`, Array.from(weights.data.subarray((b * Hq + h) * Lk, (b * Hq + h + 1) * Lk), (w) => w.toFixed(4)).join(' '));
cache.dispose();
`;

    const state = {
      step: s.step, B: s.B, Hq: HQ, Hkv: HKV, D, dtype: s.dtype, window: s.window, capacity: s.capacity, rope: s.rope, ropeError: s.ropeError,
      lengths: s.lengths.slice(), held: Array.from({ length: B }, (_, b) => held(b).count), active: s.active.slice(),
      byteLength: s.cache.byteLength, float32ByteLength: f32Bytes, error: s.error, maxV, done: done(), weightsShape: s.weights.shape.slice(),
      rows: B * HQ, cols: Lk,
      weights: Array.from({ length: B * HQ }, (_, i) => Array.from({ length: Lk }, (_, j) => weightOf(Math.floor(i / HQ), i % HQ, j))),
      kinds: Array.from({ length: B }, (_, b) => Array.from({ length: Lk }, (_, j) => kind(b, j))),
      slots: Array.from({ length: B }, (_, b) => Array.from({ length: s.capacity }, (_, c) => slot(b, c))),
      heatmaps: { weights: weightsMap.geometry(), slots: slotsMap.geometry() },
    };
    els.json.textContent = JSON.stringify(state);
    els.root.dataset.step = String(s.step);
    expose(state);
  }

  // ---------------------------------------------------------------------------------------- wiring

  els.form.addEventListener('submit', (e) => e.preventDefault());
  els.next.addEventListener('click', () => {
    stop();
    next();
  });
  els.play.addEventListener('click', () => {
    if (timer) {
      stop();
      return;
    }
    if (!s || done()) return;
    els.play.textContent = 'Pause';
    els.play.setAttribute('aria-pressed', 'true');
    next();
    timer = setInterval(() => {
      if (!next()) stop();
    }, PLAY_MS);
  });
  els.reset.addEventListener('click', reset);
  els.window.addEventListener('change', () => {
    // A ring two slots larger than the window: the slots picture shows what is held but not seen.
    if (els.window.checked) els.capacity.value = String((Number.parseInt(els.windowSize.value, 10) || 4) + 2);
    replay();
  });
  // A new dtype, window size or capacity replays the steps taken so far into the new cache (they are
  // not thrown away); a different batch starts again.
  function replay() {
    const steps = s?.step ?? 0;
    reset();
    for (let n = 0; n < steps; n++) if (!next()) break;
  }
  els.ragged.addEventListener('change', reset);
  for (const input of [els.dtype, els.windowSize, els.capacity, els.rope, els.ropeTheta, els.ropeLayout]) input.addEventListener('change', replay);
  // A typed number applies as soon as it is a whole number in range (not only when the box loses focus).
  let typed = 0;
  for (const input of [els.windowSize, els.capacity]) input.addEventListener('input', () => {
    clearTimeout(typed);
    const n = Number(input.value);
    if (!Number.isInteger(n) || n < Number(input.min) || n > Number(input.max)) return;
    typed = setTimeout(replay, 250);
  });

  return { reset, next, stop };
}

// The decode panel's session (decode.js wires the panel, decode-view.js draws it): a KV cache fed
// the page's token embeddings a prompt and then one token per step, each step attending the newest
// query of every sequence. Beside it, for what the panel reports: a float32 cache fed the same rows
// (how far a float16/bfloat16/q8/q4 cache's rounding moves the output) and, with RoPE on, a plain
// float32 cache fed Q and K rotated here in JavaScript (the cache's own rotation checked).

import { buildProblem } from './embedding.js';

export const PROMPT = [4, 2];        // prompt tokens of each sequence
export const HQ = 2, HKV = 1, D = 8; // two query heads share one KV head (GQA / MQA)
const SEED = 42;

/** K or V rows [B, Hkv, T, D] for the positions pos[b] .. pos[b] + count[b] - 1 (NaN where not taken). */
function kvRows(s, which, start, counts, T) {
  const P = s.P;
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
function rotatedKeys(s, rows, start, counts, T) {
  const data = rows.data.slice();
  for (let b = 0; b < s.B; b++)
    for (let t = 0; t < counts[b]; t++) rotate(data, ((b * HKV + 0) * T + t) * D, start[b] + t, s.rope);
  return { data, shape: rows.shape };
}

/** Appends the same rows to every cache of the session (the check cache gets its keys rotated here). */
function appendAll(s, start, counts, T) {
  const k = kvRows(s, 'k', start, counts, T), v = kvRows(s, 'v', start, counts, T);
  for (const c of [s.cache, s.reference]) c?.append(k, v, { counts });
  s.jsRope?.append(rotatedKeys(s, k, start, counts, T), v, { counts });
}

/** The newest query of each sequence, [B, Hq, 1, D] (zeros for finished sequences: not attended). */
function queries(s, active) {
  const P = s.P;
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

const maxDiff = (a, b) => {
  let err = 0;
  for (let n = 0; n < a.length; n++) err = Math.max(err, Math.abs(a[n] - b[n]));
  return err;
};

/** Attends the newest query of each active sequence; records the weights and both checks' errors. */
function attend(s, active) {
  const q = queries(s, active);
  const options = { returnWeights: true };
  if (active.some((a) => !a)) options.queryLengths = active.map((a) => (a ? 1 : 0));
  const result = s.cache.attend(q, options);
  Object.assign(s, { q, weights: result.weights, options, active });
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

/** Appends counts[b] tokens of each sequence from its length on, then attends (what a step records). */
function advance(s, counts) {
  const start = s.lengths.slice();
  const T = Math.max(...counts);
  appendAll(s, start, counts, T);
  s.appended = counts.map((c, b) => ({ from: start[b], count: c, tokens: s.sentences[b].slice(start[b], start[b] + c) }));
  s.lengths = Array.from(s.cache.lengths);
  s.lastAppend = { T, counts };
  s.history.push(counts);
  attend(s, counts.map((c) => c > 0));
}

/**
 * A new session holding the prompts (step 0): cfg is { dtype, window, capacity, B, rope } and texts
 * the sequences' tokens. Throws what maskattn throws (the caches it made are then in the session).
 */
export function startSession(ma, cfg, texts, s) {
  const sentences = texts.slice(0, cfg.B);
  const P = buildProblem(sentences, { seed: SEED, heads: HQ, headDim: D, mode: 'embedding' });
  Object.assign(s, { ...cfg, P, sentences, step: 0, lengths: new Array(cfg.B).fill(0), appended: [], calls: [], history: [] });
  s.maxV = 0;  // the scale the error is shown against (max |V| of the problem)
  for (const x of P.v) if (Number.isFinite(x)) s.maxV = Math.max(s.maxV, Math.abs(x));
  const config = { batch: cfg.B, kvHeads: HKV, capacity: cfg.capacity, headDim: D, window: cfg.window };
  const rope = cfg.rope ? { rope: cfg.rope } : {};
  s.cache = ma.createKVCache({ ...config, ...rope, dtype: cfg.dtype });
  s.reference = cfg.dtype === 'float32' ? null : ma.createKVCache({ ...config, ...rope, dtype: 'float32' });
  s.jsRope = cfg.rope ? ma.createKVCache({ ...config, dtype: 'float32' }) : null;
  advance(s, PROMPT.slice(0, cfg.B));
}

/** Every sequence has taken all of its tokens. */
export const done = (s) => s.sentences.every((t, b) => s.lengths[b] >= t.length);

/** One generation step: the next token of every sequence that has one. */
export function step(s) {
  advance(s, s.sentences.map((t, b) => (s.lengths[b] < t.length ? 1 : 0)));
  s.step += 1;
}

export function dispose(s) {
  s?.cache?.dispose();
  s?.reference?.dispose();
  s?.jsRope?.dispose();
}

// Tokens and a small deterministic "model": token vectors from a seeded hash, a sinusoidal position
// code, and per-head projection matrices Wq, Wk, Wv drawn from a seeded generator. The same text
// and seed always give the same Q, K and V, so the pictures are stable.

import { rng, normal } from './random.js';

export const PAD = '<pad>';
export const MAX_TOKENS = 16;
export const MAX_SENTENCES = 6;
const D_MODEL = 16;

/** FNV-1a hash of a string, mixed with a seed. */
export function hash(text, seed = 0) {
  let h = (0x811c9dc5 ^ Math.imul(seed | 0, 0x9e3779b1)) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** Words and punctuation marks ("The cat sat." -> The, cat, sat, .), all of them. */
export function tokenizeAll(line) {
  return line.match(/[\p{L}\p{N}'’_-]+|[^\s\p{L}\p{N}]/gu) ?? [];
}

/** The tokens of a line, at most MAX_TOKENS. */
export function tokenize(line) {
  return tokenizeAll(line).slice(0, MAX_TOKENS);
}

/**
 * What the page computes on, and what it had to cut to get there (each a sentence for the page's
 * notice): { sentences, notes, empty } — empty when the text has no token at all.
 */
export function readSentences(text) {
  const lines = text.split(/\r?\n/).map(tokenizeAll).filter((t) => t.length > 0);
  const notes = [];
  if (lines.length > MAX_SENTENCES) notes.push(`${lines.length} lines: only the first ${MAX_SENTENCES} are used`);
  const kept = lines.slice(0, MAX_SENTENCES);
  kept.forEach((t, b) => {
    if (t.length > MAX_TOKENS) notes.push(`line ${b + 1} has ${t.length} tokens: only its first ${MAX_TOKENS} are used`);
  });
  return { sentences: kept.map((t) => t.slice(0, MAX_TOKENS)), notes, empty: kept.length === 0 };
}

/** Sentences (one per line, blank lines skipped) -> arrays of tokens; at least one token overall. */
export function parseSentences(text) {
  const sentences = text.split(/\r?\n/).map(tokenize).filter((t) => t.length > 0).slice(0, MAX_SENTENCES);
  return sentences.length ? sentences : [['(empty)']];
}

/**
 * Segment ids of a sentence: a new segment starts after '|' and after sentence-ending punctuation
 * (. ! ?) that is not the last token; a sentence with no such boundary is split in halves.
 */
export function segmentIds(tokens) {
  const ids = [];
  let id = 0;
  let boundaries = 0;
  tokens.forEach((t, i) => {
    ids.push(id);
    if ((t === '|' || /^[.!?]$/.test(t)) && i < tokens.length - 1) {
      id += 1;
      boundaries += 1;
    }
  });
  if (boundaries === 0 && tokens.length > 1) {
    const half = Math.ceil(tokens.length / 2);
    return tokens.map((_, i) => (i < half ? 0 : 1));
  }
  return ids;
}

/** ALiBi slopes for n heads: 2^(-8(h+1)/n) (Press et al.). */
export function alibiSlopes(n) {
  return Array.from({ length: n }, (_, h) => 2 ** (-8 * (h + 1) / n));
}

function tokenVector(token, seed) {
  const g = normal(rng(hash(token === PAD ? PAD : token.toLowerCase(), seed)));
  return Float64Array.from({ length: D_MODEL }, () => g());
}

function positionVector(pos) {
  return Float64Array.from({ length: D_MODEL }, (_, k) => {
    const rate = 1 / 10000 ** ((2 * Math.floor(k / 2)) / D_MODEL);
    return k % 2 === 0 ? Math.sin(pos * rate) : Math.cos(pos * rate);
  });
}

function matrix(g, rows, cols, gain) {
  const s = gain / Math.sqrt(rows);
  return Float64Array.from({ length: rows * cols }, () => g() * s);
}

function project(x, W, cols) {
  const out = new Float64Array(cols);
  for (let c = 0; c < cols; c++) {
    let acc = 0;
    for (let r = 0; r < x.length; r++) acc += x[r] * W[r * cols + c];
    out[c] = acc;
  }
  return out;
}

/**
 * Builds the problem shown on the page.
 * sentences: token arrays; opts: { seed, heads, headDim, mode: 'embedding'|'random', decode: n|0 }.
 * Returns { B, H, Lq, Lk, D, lengths, qLengths, keyTokens[b][j], queryTokens[b][i], queryPos[b][i],
 *           q, k, v (Float32Array, [B, H, L, D]) }.
 */
export function buildProblem(sentences, { seed = 42, heads = 4, headDim = 8, mode = 'embedding', decode = 0 } = {}) {
  const B = sentences.length;
  const lengths = sentences.map((s) => s.length);
  const Lk = Math.max(...lengths);
  const Lq = decode > 0 ? Math.min(decode, Lk) : Lk;
  const H = heads;
  const D = headDim;
  const keyTokens = sentences.map((s) => Array.from({ length: Lk }, (_, j) => (j < s.length ? s[j] : PAD)));
  // Query row i of sentence b is token queryPos[b][i]; in decode mode the last qLen tokens.
  const qLengths = lengths.map((len) => Math.min(Lq, len));
  const queryPos = lengths.map((len, b) => Array.from({ length: Lq }, (_, i) => {
    if (decode <= 0) return i;
    const ql = qLengths[b];
    return i < ql ? len - ql + i : len + (i - ql);  // rows past qLen are padding positions
  }));
  const queryTokens = queryPos.map((row, b) => row.map((p) => (p < Lk ? keyTokens[b][p] : PAD)));

  const q = new Float32Array(B * H * Lq * D);
  const k = new Float32Array(B * H * Lk * D);
  const v = new Float32Array(B * H * Lk * D);
  if (mode === 'random') {
    const g = normal(rng(hash('random', seed)));
    for (const a of [q, k, v]) for (let n = 0; n < a.length; n++) a[n] = g();
  } else {
    const g = normal(rng(hash('weights', seed)));
    const W = Array.from({ length: H }, () => ({
      q: matrix(g, D_MODEL, D, 1.6), k: matrix(g, D_MODEL, D, 1.6), v: matrix(g, D_MODEL, D, 1),
    }));
    const cache = new Map();
    const embed = (token, pos) => {
      const key = `${token}\u0000${pos}`;
      if (!cache.has(key)) {
        const t = tokenVector(token, seed);
        const p = positionVector(pos);
        cache.set(key, t.map((x, n) => x + 0.5 * p[n]));
      }
      return cache.get(key);
    };
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        for (let j = 0; j < Lk; j++) {
          const x = embed(keyTokens[b][j], j);
          k.set(project(x, W[h].k, D), ((b * H + h) * Lk + j) * D);
          v.set(project(x, W[h].v, D), ((b * H + h) * Lk + j) * D);
        }
        for (let i = 0; i < Lq; i++) {
          const pos = queryPos[b][i];
          const x = embed(queryTokens[b][i], pos);
          q.set(project(x, W[h].q, D), ((b * H + h) * Lq + i) * D);
        }
      }
    }
  }
  return { B, H, Lq, Lk, D, lengths, qLengths, keyTokens, queryTokens, queryPos, q, k, v };
}

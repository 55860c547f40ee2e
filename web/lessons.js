// The fully-masked-row lesson: what naive masking code does, written plainly in JavaScript on
// purpose (this is the code people write). maskattn's own answer comes from the library.

export const LESSONS = [
  {
    id: 'zero',
    title: "maskattn, fullyMasked: 'zero'",
    why: 'maskattn sees from the mask (not the scores) that the row has no key: weights and output are 0, lse = −∞, and every other row is untouched.',
  },
  {
    id: 'plain',
    title: 'Plain softmax over −∞',
    why: 'Every logit is −∞, so max = −∞ and exp(−∞ − (−∞)) = exp(NaN): the row is NaN, and NaN spreads into anything that sums over it (Σ O).',
  },
  {
    id: 'fill',
    title: 'Finite fill: −1e9',
    why: 'All logits are −1e9, so softmax is uniform (1/Lk): the row quietly becomes the mean of every V, padding included — plausible-looking and meaningless.',
  },
  {
    id: 'mulAfter',
    title: '0/1 mask × weights, after softmax',
    why: 'Softmax ran over all keys and masked weights were zeroed afterwards: rows no longer sum to 1 (Σ column), so outputs shrink.',
  },
  {
    id: 'mulBefore',
    title: '0/1 mask × scores, before softmax',
    why: 'Masked scores become 0, not −∞, and exp(0) = 1 still gives them weight: masked keys leak into every row; the empty row is uniform.',
  },
];

function softmaxRow(logits) {
  // The textbook version: subtract the max, exponentiate, normalise. No special cases.
  let max = -Infinity;
  for (const x of logits) max = Math.max(max, x);
  const e = logits.map((x) => Math.exp(x - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / sum);
}

function weighted(w, v, Lk, Dv) {
  const out = new Float64Array(Dv);
  for (let j = 0; j < Lk; j++) for (let d = 0; d < Dv; d++) out[d] += w[j] * v[j * Dv + d];
  return out;
}

/**
 * Naive masking variants on one (sentence, head) problem.
 * logits: Float64Array [Lq*Lk] (scaled scores, softcap and ALiBi applied, no mask);
 * mask: Uint8Array [Lq*Lk] (1 = may attend); v: Float32Array [Lk*Dv].
 * Returns { plain, fill, mulAfter, mulBefore }, each { weights: Float64Array [Lq*Lk], output: Float64Array [Lq*Dv] }.
 */
export function naiveVariants(logits, mask, v, Lq, Lk, Dv) {
  const variants = {
    plain: (s, m) => softmaxRow(s.map((x, j) => (m[j] ? x : -Infinity))),
    fill: (s, m) => softmaxRow(s.map((x, j) => (m[j] ? x : -1e9))),
    mulAfter: (s, m) => softmaxRow(s).map((w, j) => w * m[j]),
    mulBefore: (s, m) => softmaxRow(s.map((x, j) => x * m[j])),
  };
  const result = {};
  for (const [name, rowFn] of Object.entries(variants)) {
    const weights = new Float64Array(Lq * Lk);
    const output = new Float64Array(Lq * Dv);
    for (let i = 0; i < Lq; i++) {
      const s = Array.from(logits.subarray(i * Lk, (i + 1) * Lk));
      const m = Array.from(mask.subarray(i * Lk, (i + 1) * Lk));
      const w = Lk > 0 ? rowFn(s, m) : [];
      weights.set(w, i * Lk);
      output.set(weighted(w, v, Lk, Dv), i * Dv);
    }
    result[name] = { weights, output };
  }
  return result;
}

/** Row sums of a [Lq, Lk] weight matrix. */
export function rowSums(weights, Lq, Lk) {
  return Array.from({ length: Lq }, (_, i) => {
    let s = 0;
    for (let j = 0; j < Lk; j++) s += weights[i * Lk + j];
    return s;
  });
}

// What --check and --batch measure, shared by examples/ocr.mjs, the tests and the benchmarks.
import { LEVELS, maskattnLayer, maxAbsDiff } from './recognizer.mjs';

// The split's probabilities may differ from the unmodified model's by rounding only: at most twice
// what onnxruntime's own graph optimization levels move them on that line, and never less than 1e-5.
export const PROB_FLOOR = 1e-5;

/** max |Δprob| between the unmodified model at each optimization level and at 'all', on x. */
export async function levelSpread(rec, x) {
  const all = await rec.reference(x, 'all');
  let spread = 0;
  for (const level of LEVELS) {
    if (level !== 'all') spread = Math.max(spread, maxAbsDiff((await rec.reference(x, level)).probs, all.probs));
  }
  return spread;
}

/**
 * One line read by the split path (dtype as given) and checked against the unmodified model: its
 * text, max |Δprob|, the bound, and per layer maskattn's output and weights against the model's own
 * on the model's own Q, K and V.
 */
export async function checkLine(rec, ma, x, { dtype = 'float32', keyRotation } = {}) {
  const split = await rec.run(x, { dtype, keyRotation });
  const text = rec.decode(split.probs, split.dims);
  const ref = await rec.reference(x, 'all');
  const spread = await levelSpread(rec, x);
  const probe = await rec.probe(x);
  const layers = probe.layers.map((own) => {
    const mine = maskattnLayer(ma, own.q, own.k, own.v, { dtype, keyRotation, returnWeights: true });
    return {
      maxDeltaOutput: maxAbsDiff(mine.output.data, own.output.data),
      maxDeltaWeights: maxAbsDiff(mine.weights.data, own.weights.data),
      maxAbsV: own.v.data.reduce((m, x) => Math.max(m, Math.abs(x)), 0),
    };
  });
  const maxDeltaProb = maxAbsDiff(split.probs, ref.probs);
  const bound = Math.max(PROB_FLOOR, 2 * spread);
  return {
    text,
    tokens: split.dims[1],
    reference: { text: rec.decode(ref.probs, ref.dims), maxDeltaProb, levelSpread: spread, bound },
    layers,
  };
}

/** max |Δ| of line b's probabilities in a batch against the line alone, over its real tokens. */
export function lineDelta(batch, b, alone) {
  const [, T, C] = batch.dims;
  const tokens = alone.dims[1];
  return maxAbsDiff(batch.probs.subarray(b * T * C, (b * T + tokens) * C), alone.probs);
}

/** Rows [b, :, 0:len, :] of a [B, H, L, D] tensor (len rows of each head), as their own [1, H, len, D]. */
export function lineRows(t, b, len, cols = t.shape[3]) {
  const [, H, L, D] = t.shape;
  const out = new Float32Array(H * len * cols);
  for (let h = 0; h < H; ++h) {
    for (let i = 0; i < len; ++i) {
      const from = ((b * H + h) * L + i) * D;
      out.set(t.data.subarray(from, from + cols), (h * len + i) * cols);
    }
  }
  return { data: out, shape: [1, H, len, cols] };
}

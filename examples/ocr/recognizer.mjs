// The recognizer run two ways: split (onnxruntime runs the three parts of the graph, maskattn the two
// attention layers between them, each part once per batch) and unmodified (the model file as it
// ships, for --check), plus a probe model whose extra outputs are each layer's Q, K, V, weights and
// attention output.
import { HEADS, HEAD_SIZE, INPUT, LAYERS, PROBS, probeModel, splitModel } from './model.mjs';

export const LEVELS = Object.freeze(['disabled', 'basic', 'extended', 'all']);

/** Greedy CTC decoding: the best class per token, repeats merged, blanks (class 0) dropped. */
export function ctcDecode(probs, dims, alphabet, b = 0, tokens = dims[1]) {
  const [, T, C] = dims;
  let text = '';
  let last = -1;
  for (let t = 0; t < tokens; ++t) {
    const row = probs.subarray((b * T + t) * C, (b * T + t + 1) * C);
    let best = 0;
    for (let c = 1; c < C; ++c) if (row[c] > row[best]) best = c;
    if (best !== last && best !== 0) text += alphabet[best];
    last = best;
  }
  return text;
}

export function maxAbsDiff(a, b) {
  if (a.length !== b.length) throw new Error(`maxAbsDiff: lengths ${a.length} and ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; ++i) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/**
 * One attention layer through maskattn: attention() for float32, otherwise K and V appended to a
 * KV cache of that dtype and attended by Q (not causal). q/k/v: { data, shape [B, 8, L, 15] }; Q is
 * already scaled by the model, so the scale is 1.
 */
export function maskattnLayer(ma, q, k, v, { dtype = 'float32', keyRotation, keyLengths, returnWeights = false } = {}) {
  if (!ma.kvDtypes.includes(dtype)) throw new RangeError(`dtype: expected one of ${ma.kvDtypes.join(', ')}, got ${dtype}`);
  const [B, H, L, D] = q.shape;
  if (dtype === 'float32' && keyRotation === undefined) {
    return ma.attention(q, k, v, { scale: 1, keyLengths, returnWeights });
  }
  // The key rotation needs an even head size; 15 becomes 16 with a zero channel in Q and K, which
  // changes no dot product (V keeps its 15).
  const widen = keyRotation === 'hadamard' && D % 2 === 1;
  const [qs, ks] = widen ? [padLastDim(q, D + 1), padLastDim(k, D + 1)] : [q, k];
  const cache = ma.createKVCache({
    batch: B, kvHeads: H, capacity: L, headDim: ks.shape[3], valueDim: D, dtype, ...(keyRotation ? { keyRotation } : {}),
  });
  try {
    cache.append(ks, v, keyLengths ? { counts: keyLengths } : undefined);
    return cache.attend(qs, { causal: false, scale: 1, returnWeights });
  } finally {
    cache.dispose();
  }
}

function padLastDim(t, width) {
  const [B, H, L, D] = t.shape;
  const data = new Float32Array(B * H * L * width);
  for (let r = 0; r < B * H * L; ++r) data.set(t.data.subarray(r * D, (r + 1) * D), r * width);
  return { data, shape: [B, H, L, width] };
}

const asTensor = (t) => ({ data: t.data, shape: t.dims });

/**
 * Splits the model and makes the sessions (1 thread each unless `threads`). `ort` is
 * onnxruntime-node (or -web), `ma` an initialised maskattn, `files` the checked { bytes, alphabet }
 * (loadModelFiles() of examples/ocr/node.mjs in Node). `sessionOptions` adds to the sessions' own.
 */
export async function createRecognizer(ort, ma, { files, threads = 1, sessionOptions = {} }) {
  const { bytes, alphabet } = files;
  const options = (level = 'all') => ({ intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: level, ...sessionOptions });
  const parts = splitModel(bytes);
  const sessions = await Promise.all(parts.map((p) => ort.InferenceSession.create(p.bytes, options())));
  const plain = new Map();
  let probe = null;

  /**
   * The split path on x ({ data, dims [B, 3, 48, W] }): probabilities [B, T, 6625] and per layer Q,
   * K, V and maskattn's output (and weights with returnWeights).
   */
  async function run(x, { dtype = 'float32', keyRotation, keyLengths, returnWeights = false } = {}) {
    const feeds = { [INPUT]: new ort.Tensor('float32', x.data, x.dims) };
    const layers = [];
    let results = {};
    for (let p = 0; p < 3; ++p) {
      const input = {};
      for (const name of parts[p].inputs) input[name] = feeds[name] ?? results[name];
      results = { ...results, ...(await sessions[p].run(input)) };
      if (p === 2) break;
      const names = LAYERS[p];
      const [q, k, v] = [names.q, names.k, names.v].map((n) => asTensor(results[n]));
      checkShape(q, k, v);
      const out = maskattnLayer(ma, q, k, v, { dtype, keyRotation, keyLengths, returnWeights });
      layers.push({ q, k, v, output: out.output, weights: out.weights });
      results[names.output] = new ort.Tensor('float32', out.output.data, out.output.shape);
    }
    return { probs: results[PROBS].data, dims: results[PROBS].dims, layers };
  }

  /** The unmodified model's probabilities, at one of onnxruntime's graph optimization levels. */
  async function reference(x, level = 'all') {
    if (!plain.has(level)) plain.set(level, await ort.InferenceSession.create(bytes, options(level)));
    const r = await plain.get(level).run({ [INPUT]: new ort.Tensor('float32', x.data, x.dims) });
    return { probs: r[PROBS].data, dims: r[PROBS].dims };
  }

  /** The whole model with each layer's own Q, K, V, weights and attention output. */
  async function probeRun(x) {
    probe ??= await ort.InferenceSession.create(probeModel(bytes), options());
    const r = await probe.run({ [INPUT]: new ort.Tensor('float32', x.data, x.dims) });
    const layers = LAYERS.map((names) => Object.fromEntries(Object.entries(names).map(([key, n]) => [key, asTensor(r[n])])));
    return { probs: r[PROBS].data, dims: r[PROBS].dims, layers };
  }

  return { alphabet, parts, run, reference, probe: probeRun, decode: (probs, dims, b, tokens) => ctcDecode(probs, dims, alphabet, b, tokens) };
}

function checkShape(q, k, v) {
  for (const t of [q, k, v]) {
    if (t.shape.length !== 4 || t.shape[1] !== HEADS || t.shape[3] !== HEAD_SIZE || t.shape[2] !== q.shape[2]) {
      throw new Error(`attention input of shape [${t.shape}], expected [B, ${HEADS}, L, ${HEAD_SIZE}]`);
    }
  }
}

// Node benchmark, WebAssembly, one thread: the attention step of token-by-token generation for one
// layer (B = 1, 32 query heads / 8 KV heads, D = 128), starting from a 1024-token prompt whose K/V
// are random, then 512 generated tokens. Per token: append the new token's K/V, attend one query.
//   - maskattn: ma.createKVCache for every dtype (float32, float16, q8, q4, q8 keys / q4 values),
//     cache.append + cache.attend (wasm memory, appends in place);
//   - onnxruntime-web (wasm backend, 1 thread): the com.microsoft GroupQueryAttention contrib operator
//     with query, key, value, past_key, past_value, seqlens_k (total - 1), total_sequence_length,
//     its present_key/present_value fed back as the next step's past, as transformers.js does.
// Same inputs for all; interleaved: every token runs every implementation's step in a new random
// order, each timed (wall clock); medians per token. Checked on the first and the last token: ORT's
// output equals maskattn float32's (max abs diff < 1e-3), and each other dtype's error against the
// float32 cache (max |dO| / max |V|, cosine similarity) is printed and held to its bound.
//
//   node bench/js/generation-bench.mjs [--quick] [--tokens N] [--prompt N] [--json FILE]
import * as ort from 'onnxruntime-web';

import { init } from '../../js/index.js';
import { cosine, lpad, machine, maxAbsDiff, median, pad, rng, writeJson } from './common.mjs';
import { groupQueryAttentionModel } from './onnx-contrib-model.mjs';

function parseArgs(argv = process.argv.slice(2)) {
  const a = { quick: false, tokens: null, prompt: 1024, json: null };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--quick') a.quick = true;
    else if (argv[i] === '--tokens') a.tokens = Number(argv[++i]);
    else if (argv[i] === '--prompt') a.prompt = Number(argv[++i]);
    else if (argv[i] === '--json') a.json = argv[++i];
    else throw new Error(`unknown argument ${argv[i]} (known: --quick, --tokens N, --prompt N, --json FILE)`);
  }
  a.tokens ??= a.quick ? 64 : 512;
  for (const k of ['tokens', 'prompt']) if (!(Number.isInteger(a[k]) && a[k] >= 1)) throw new Error(`--${k} must be a positive integer`);
  return a;
}

const args = parseArgs();
const B = 1, Hq = 32, Hkv = 8, D = 128;
const P = args.prompt, N = args.tokens, TOTAL = P + N;
ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';

const ma = await init({ simd: true, threads: 1 });  // one thread, as onnxruntime-web (init's default is every core)
const info = machine();
const ortVersion = ort.env.versions?.web ?? ort.env.versions?.common ?? '?';
console.log(`generation, attention step of one layer: B=${B}, ${Hq} query heads / ${Hkv} KV heads, D=${D}; ` +
  `prompt ${P} tokens (random K/V), then ${N} tokens${args.quick ? ' (QUICK run)' : ''}`);
console.log(`maskattn ${ma.backend.version} ${ma.backend.build} (${ma.backend.arch}, ${ma.backend.lanes} lanes, ${ma.backend.threads} thread); onnxruntime-web ${ortVersion} wasm, 1 thread; ` +
  `Node ${process.versions.node}; ${info.cpu}, ${info.cores} cores; ${info.date}`);

// Inputs: the prompt's K/V [B, Hkv, P, D] and, per token, q [B, Hq, 1, D] and k, v [B, Hkv, 1, D].
// With one position, [B, H, 1, D] and ORT's packed [B, 1, H*D] are the same bytes.
const r = rng(2024);
const fill = (n) => {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = r();
  return a;
};
const promptK = fill(B * Hkv * P * D), promptV = fill(B * Hkv * P * D);
const steps = Array.from({ length: N }, () => ({ q: fill(B * Hq * D), k: fill(B * Hkv * D), v: fill(B * Hkv * D) }));

// ---- maskattn: one cache per dtype, holding the prompt. maxError: the bound held on the first and
// last token, as a fraction of max |V| (float16: its rounding; q8 / q4: the README's targets).
const DTYPES = [
  { name: 'float32', config: { dtype: 'float32' }, maxError: 0 },
  { name: 'float16', config: { dtype: 'float16' }, maxError: 0.02 },
  { name: 'q8', config: { dtype: 'q8' }, maxError: 0.02 },
  { name: 'q4', config: { dtype: 'q4' }, maxError: 0.15 },
  { name: 'q8/q4', config: { dtype: 'q8', valueDtype: 'q4' }, maxError: 0.15 },
];
const caches = {};
for (const { name, config } of DTYPES) {
  const cache = ma.createKVCache({ batch: B, kvHeads: Hkv, capacity: TOTAL, headDim: D, ...config });
  cache.append({ data: promptK, shape: [B, Hkv, P, D] }, { data: promptV, shape: [B, Hkv, P, D] });
  caches[name] = cache;
}
let maxV = 0;
for (const x of promptV) maxV = Math.max(maxV, Math.abs(x));
for (const s of steps) for (const x of s.v) maxV = Math.max(maxV, Math.abs(x));
const maskattnStep = (cache) => (t) => {
  const { q, k, v } = steps[t];
  cache.append({ data: k, shape: [B, Hkv, 1, D] }, { data: v, shape: [B, Hkv, 1, D] });
  return cache.attend({ data: q, shape: [B, Hq, 1, D] }).output.data;
};

// ---- onnxruntime-web: GroupQueryAttention, past = the prompt's K/V, then each step's present.
const session = await ort.InferenceSession.create(groupQueryAttentionModel({ B, Hq, Hkv, D }), {
  executionProviders: ['wasm'], graphOptimizationLevel: 'all',
});
const past = {
  key: new ort.Tensor('float32', promptK, [B, Hkv, P, D]),
  value: new ort.Tensor('float32', promptV, [B, Hkv, P, D]),
};
const feedsAt = (t, pastKey, pastValue) => {
  const total = P + t + 1;
  return {
    query: new ort.Tensor('float32', steps[t].q, [B, 1, Hq * D]),
    key: new ort.Tensor('float32', steps[t].k, [B, 1, Hkv * D]),
    value: new ort.Tensor('float32', steps[t].v, [B, 1, Hkv * D]),
    past_key: pastKey,
    past_value: pastValue,
    seqlens_k: new ort.Tensor('int32', Int32Array.from({ length: B }, () => total - 1), [B]),
    total_sequence_length: new ort.Tensor('int32', Int32Array.of(total), []),
  };
};
const ortStep = async (t) => {
  const out = await session.run(feedsAt(t, past.key, past.value));
  past.key = out.present_key;    // the next step's past, as transformers.js feeds it
  past.value = out.present_value;
  return out.output.data;
};

// ---- Warm-up (state unchanged): attends without appending, ORT runs on the prompt's past.
for (let w = 0; w < 3; w++) {
  for (const cache of Object.values(caches)) cache.attend({ data: steps[0].q, shape: [B, Hq, 1, D] });
  await session.run(feedsAt(0, past.key, past.value));
}

// ---- The loop: each token runs the three steps in a random order; the first and the last are checked.
const impls = [
  ...DTYPES.map(({ name }) => ({ name: `maskattn ${name} cache`, dtype: name, run: maskattnStep(caches[name]) })),
  { name: 'onnxruntime-web GQA', run: ortStep },
];
const ORT = impls.length - 1;
const times = impls.map(() => new Float64Array(N));
const checks = [];
const order = impls.map((_, i) => i);
const shuffle = rng(99);
const progressEvery = Math.max(1, Math.floor(N / 8));
for (let t = 0; t < N; t++) {
  for (let j = order.length - 1; j > 0; j--) {
    const k = Math.floor(((shuffle() + 1) / 2) * (j + 1));
    [order[j], order[k]] = [order[k], order[j]];
  }
  const outputs = [];
  for (const i of order) {
    const t0 = performance.now();
    outputs[i] = await impls[i].run(t);
    times[i][t] = performance.now() - t0;
  }
  if (t === 0 || t === N - 1) {
    const check = { token: t + 1, length: P + t + 1, ort_vs_f32: maxAbsDiff(outputs[ORT], outputs[0]), dtypes: {} };
    if (!(check.ort_vs_f32 < 1e-3)) throw new Error(`token ${t + 1}: onnxruntime-web differs from maskattn float32 by ${check.ort_vs_f32} (>= 1e-3)`);
    const parts = [];
    DTYPES.forEach(({ name, maxError }, i) => {
      if (i === 0) return;
      const e = { rel_max: maxAbsDiff(outputs[i], outputs[0]) / maxV, cosine: cosine(outputs[i], outputs[0]) };
      check.dtypes[name] = e;
      if (!(e.rel_max <= maxError)) throw new Error(`token ${t + 1}: maskattn ${name} differs from float32 by ${(100 * e.rel_max).toFixed(3)}% of max |V|`);
      parts.push(`${name} ${(100 * e.rel_max).toFixed(4)}% (cos ${e.cosine.toFixed(6)})`);
    });
    checks.push(check);
    console.log(`check, token ${t + 1} (${P + t + 1} positions): max |ORT - maskattn float32| = ${check.ort_vs_f32.toExponential(2)}; ` +
      `error against the float32 cache, max |dO| / max |V|: ${parts.join(', ')}`);
  }
  if ((t + 1) % progressEvery === 0) process.stderr.write(`  ${t + 1}/${N} tokens\n`);
}

// Every cache must have followed the same sequence.
for (const [dtype, cache] of Object.entries(caches))
  if (cache.lengths[0] !== TOTAL) throw new Error(`maskattn ${dtype} cache holds ${cache.lengths[0]} positions, expected ${TOTAL}`);
if (past.key.dims[2] !== TOTAL) throw new Error(`ORT's present_key holds ${past.key.dims[2]} positions, expected ${TOTAL}`);

// ---- Results.
const kvBytesAt = (L) => 2 * B * Hkv * L * D * 4;  // K and V read by one float32 step at length L
const meanKv = kvBytesAt(P + (N + 1) / 2);
const results = impls.map((im, i) => {
  const t = Array.from(times[i]);
  const q = Math.floor(N / 4);
  return {
    impl: im.name, median_ms: median(t), min_ms: Math.min(...t),
    first_quarter_median_ms: median(t.slice(0, Math.max(1, q))), last_quarter_median_ms: median(t.slice(N - Math.max(1, q))),
    total_ms: t.reduce((a, b) => a + b, 0),
  };
});
const memory = { 'onnxruntime-web GQA': past.key.data.byteLength + past.value.data.byteLength };
for (const { name } of DTYPES) memory[`maskattn ${name} cache`] = caches[name].byteLength;
console.log('');
console.log(`${pad('implementation', 26)} ${lpad('median ms/token', 16)} ${lpad('first 1/4', 10)} ${lpad('last 1/4', 10)} ${lpad('K/V GB/s', 9)} ${lpad('memory held', 24)}`);
for (const res of results) {
  const dtype = impls.find((im) => im.name === res.impl).dtype;
  const fraction = dtype ? caches[dtype].byteLength / caches.float32.byteLength : 1;  // bytes per position vs float32
  const gbs = (meanKv * fraction) / res.median_ms / 1e6;
  const mem = memory[res.impl];
  const what = res.impl.startsWith('onnx') ? 'present K+V' : 'byteLength';
  console.log(`${pad(res.impl, 26)} ${lpad(res.median_ms.toFixed(3), 16)} ${lpad(res.first_quarter_median_ms.toFixed(3), 10)} ` +
    `${lpad(res.last_quarter_median_ms.toFixed(3), 10)} ${lpad(gbs.toFixed(1), 9)} ${lpad(`${(mem / 2 ** 20).toFixed(2)} MiB (${what})`, 24)}`);
}
const ortRes = results[ORT];
const ratios = {};
DTYPES.forEach(({ name }, i) => {
  ratios[`ort_over_${name}`] = ortRes.median_ms / results[i].median_ms;
  ratios[`f32_over_${name}`] = results[0].median_ms / results[i].median_ms;
});
console.log(`ratios of medians, onnxruntime-web / maskattn: ${DTYPES.map(({ name }) => `${name} ${ratios[`ort_over_${name}`].toFixed(2)}x`).join(', ')}`);
console.log(`ratios of medians, maskattn float32 / dtype: ${DTYPES.slice(1).map(({ name }) => `${name} ${ratios[`f32_over_${name}`].toFixed(2)}x`).join(', ')}`);
console.log(`memory: maskattn holds capacity ${TOTAL} positions in wasm memory (allocated once); ORT's present tensors ` +
  `are new JS arrays every token (${TOTAL} positions at the end), plus its past copied into wasm memory each run`);
console.log(`K/V GB/s: bytes of K and V a step reads (mean length ${(P + (N + 1) / 2).toFixed(0)}, at each dtype's bytes per position) / median time`);

writeJson(args.json, {
  machine: info, node: process.versions.node, ort: { package: 'onnxruntime-web', version: ortVersion, threads: 1, op: 'com.microsoft.GroupQueryAttention' },
  maskattn: ma.backend, shape: { B, Hq, Hkv, D, prompt: P, tokens: N }, quick: args.quick, checks, results, ratios, memory_bytes: memory,
});

for (const cache of Object.values(caches)) cache.dispose();
await session.release();

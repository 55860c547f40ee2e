// Node benchmark, WebAssembly, one thread: the attention step of token-by-token generation for one
// layer (B = 1, 32 query heads / 8 KV heads, D = 128), starting from a 1024-token prompt whose K/V
// are random, then 512 generated tokens. Per token: append the new token's K/V, attend one query.
//   - maskattn: ma.createKVCache (float32, and float16), cache.append + cache.attend (wasm memory,
//     appends in place);
//   - onnxruntime-web (wasm backend, 1 thread): the com.microsoft GroupQueryAttention contrib operator
//     with query, key, value, past_key, past_value, seqlens_k (total - 1), total_sequence_length,
//     its present_key/present_value fed back as the next step's past, as transformers.js does.
// Same inputs for all three; interleaved: every token runs the three steps in a new random order,
// each timed (wall clock); medians per token. Checked before timing: ORT's output equals maskattn
// float32's for the same step (max abs diff < 1e-3), and again on the last token.
//
//   node bench/js/generation-bench.mjs [--quick] [--tokens N] [--prompt N] [--json FILE]
import * as ort from 'onnxruntime-web';

import { init } from '../../js/index.js';
import { lpad, machine, maxAbsDiff, median, pad, rng, writeJson } from './common.mjs';
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

const ma = await init({ simd: true });
const info = machine();
const ortVersion = ort.env.versions?.web ?? ort.env.versions?.common ?? '?';
console.log(`generation, attention step of one layer: B=${B}, ${Hq} query heads / ${Hkv} KV heads, D=${D}; ` +
  `prompt ${P} tokens (random K/V), then ${N} tokens${args.quick ? ' (QUICK run)' : ''}`);
console.log(`maskattn ${ma.backend.version} ${ma.backend.arch} (${ma.backend.lanes} lanes); onnxruntime-web ${ortVersion} wasm, 1 thread; ` +
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

// ---- maskattn: one cache per dtype, holding the prompt.
const caches = {};
for (const dtype of ['float32', 'float16']) {
  const cache = ma.createKVCache({ batch: B, kvHeads: Hkv, capacity: TOTAL, headDim: D, dtype });
  cache.append({ data: promptK, shape: [B, Hkv, P, D] }, { data: promptV, shape: [B, Hkv, P, D] });
  caches[dtype] = cache;
}
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
  { name: 'maskattn float32 cache', run: maskattnStep(caches.float32) },
  { name: 'maskattn float16 cache', run: maskattnStep(caches.float16) },
  { name: 'onnxruntime-web GQA', run: ortStep },
];
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
    const check = {
      token: t + 1, length: P + t + 1,
      ort_vs_f32: maxAbsDiff(outputs[2], outputs[0]),
      f16_vs_f32: maxAbsDiff(outputs[1], outputs[0]),
    };
    checks.push(check);
    if (!(check.ort_vs_f32 < 1e-3)) throw new Error(`token ${t + 1}: onnxruntime-web differs from maskattn float32 by ${check.ort_vs_f32} (>= 1e-3)`);
    if (!(check.f16_vs_f32 < 2e-2)) throw new Error(`token ${t + 1}: maskattn float16 differs from float32 by ${check.f16_vs_f32}`);
    console.log(`check, token ${t + 1} (${P + t + 1} positions): max |ORT - maskattn f32| = ${check.ort_vs_f32.toExponential(2)}, ` +
      `max |maskattn f16 - f32| = ${check.f16_vs_f32.toExponential(2)} (float16 rounding of K/V)`);
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
const memory = {
  'maskattn float32 cache': caches.float32.byteLength,
  'maskattn float16 cache': caches.float16.byteLength,
  'onnxruntime-web GQA': past.key.data.byteLength + past.value.data.byteLength,
};
console.log('');
console.log(`${pad('implementation', 26)} ${lpad('median ms/token', 16)} ${lpad('first 1/4', 10)} ${lpad('last 1/4', 10)} ${lpad('K/V GB/s', 9)} ${lpad('memory held', 24)}`);
for (const res of results) {
  const gbs = (res.impl.includes('float16') ? meanKv / 2 : meanKv) / res.median_ms / 1e6;
  const mem = memory[res.impl];
  const what = res.impl.startsWith('onnx') ? 'present K+V' : 'byteLength';
  console.log(`${pad(res.impl, 26)} ${lpad(res.median_ms.toFixed(3), 16)} ${lpad(res.first_quarter_median_ms.toFixed(3), 10)} ` +
    `${lpad(res.last_quarter_median_ms.toFixed(3), 10)} ${lpad(gbs.toFixed(1), 9)} ${lpad(`${(mem / 2 ** 20).toFixed(2)} MiB (${what})`, 24)}`);
}
const [f32, f16, ortRes] = results;
const ratios = { ort_over_f32: ortRes.median_ms / f32.median_ms, f32_over_f16: f32.median_ms / f16.median_ms, ort_over_f16: ortRes.median_ms / f16.median_ms };
console.log(`ratios of medians: onnxruntime-web / maskattn float32 = ${ratios.ort_over_f32.toFixed(2)}x; ` +
  `maskattn float32 / float16 = ${ratios.f32_over_f16.toFixed(2)}x; onnxruntime-web / maskattn float16 = ${ratios.ort_over_f16.toFixed(2)}x`);
console.log(`memory: maskattn holds capacity ${TOTAL} positions in wasm memory (allocated once); ORT's present tensors ` +
  `are new JS arrays every token (${TOTAL} positions at the end), plus its past copied into wasm memory each run`);
console.log(`K/V GB/s: bytes of K and V a step reads (mean length ${(P + (N + 1) / 2).toFixed(0)}; float16 reads half) / median time`);

writeJson(args.json, {
  machine: info, node: process.versions.node, ort: { package: 'onnxruntime-web', version: ortVersion, threads: 1, op: 'com.microsoft.GroupQueryAttention' },
  maskattn: ma.backend, shape: { B, Hq, Hkv, D, prompt: P, tokens: N }, quick: args.quick, checks, results, ratios, memory_bytes: memory,
});

for (const cache of Object.values(caches)) cache.dispose();
await session.release();

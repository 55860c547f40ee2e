// Node benchmark, WebAssembly: one decode step (attend one query per head over a resident KV cache)
// for every cache dtype (the module's kvDtypes, and q8 keys / q4 values) in every wasm build
// (SIMD128, relaxed SIMD, scalar, and the threaded relaxed build at 1 and 2 threads), with each
// build's read probe, on the MHA shape 1 x 32/32 x 2048 x 128 and the GQA shape 1 x 32/8 x 4096 x 128
// (bench/js/cache-run.mjs: how it measures; bench/js/chromium-bench.mjs --cache runs the same in
// Chromium). Prints ms per step, GB/s of K/V read, the ratio to the float32 cache of the same
// build, its share of the build's read probe at the same thread count, the cost per key from
// memory and in the CPU's cache, and each dtype's error against float32 (max |dO| / max |V|, cosine).
//
//   node bench/js/cache-bench.mjs [--quick] [--shape mha|gqa|both] [--json FILE]
import v8 from 'node:v8';
import { CACHE_BUILDS, CACHE_SHAPES, cacheSteps, formatCacheSteps } from './cache-run.mjs';
import { machine, writeJson } from './common.mjs';

v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
const argv = process.argv.slice(2);
const args = { quick: false, shape: 'both', json: null };
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--quick') args.quick = true;
  else if (argv[i] === '--shape') args.shape = argv[++i];
  else if (argv[i] === '--json') args.json = argv[++i];
  else throw new Error(`unknown argument ${argv[i]} (known: --quick, --shape mha|gqa|both, --json FILE)`);
}
const reps = args.quick ? 7 : 21;
const shapes = CACHE_SHAPES.filter((s) => args.shape === 'both' || s.name.toLowerCase() === args.shape);
if (shapes.length === 0) throw new Error(`--shape: expected mha, gqa or both, got ${args.shape}`);

const info = machine();
console.log(`KV cache decode step in WebAssembly (Node ${process.versions.node}), ${info.cpu}, ${info.cores} cores; ${info.date}` +
  `${args.quick ? ' (QUICK run)' : ''}; median of ${reps}`);
const out = await cacheSteps({ indexUrl: new URL('../../js/index.js', import.meta.url).href, builds: CACHE_BUILDS, shapes, reps });
console.log(formatCacheSteps(out, shapes));
writeJson(args.json, { machine: info, node: process.versions.node, quick: args.quick, reps, probes: out.probes, results: out.results });

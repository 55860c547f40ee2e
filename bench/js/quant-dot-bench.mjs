// Node benchmark of the relaxed-SIMD integer dot product over q8/q4 caches (bench/js/quant-dot-run.mjs:
// one decode step, GQA and MHA, SIMD128 vs relaxed build, every dot product the module accepts, 1
// thread). bench/js/chromium-bench.mjs --cache runs the same in Chromium.
//
//   node bench/js/quant-dot-bench.mjs [--quick] [--reps N] [--json FILE]
// On a shared machine the min column (best of the repetitions) is the steadier figure.
import v8 from 'node:v8';

v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
const { machine, writeJson } = await import('./common.mjs');
const { decodeSteps, formatDecodeSteps, DECODE_SHAPES } = await import('./quant-dot-run.mjs');

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const json = argv.includes('--json') ? argv[argv.indexOf('--json') + 1] : null;
const reps = argv.includes('--reps') ? Number(argv[argv.indexOf('--reps') + 1]) : quick ? 7 : 21;
const info = machine();
console.log(`KV cache decode step, integer dot products (Node ${process.versions.node}), ${info.cpu}, ${info.cores} cores; ${info.date}${quick ? ' (QUICK run)' : ''}`);
const out = await decodeSteps({ indexUrl: new URL('../../js/index.js', import.meta.url).href, shapes: DECODE_SHAPES, reps });
console.log(formatDecodeSteps(out));
writeJson(json, { machine: info, node: process.versions.node, quick, reps, ...out });

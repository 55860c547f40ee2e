// The whole benchmark in one command: builds what is missing or stale, runs the native benchmark
// (maskattn_bench: maskattn vs OpenBLAS, Eigen, oneDNN), onnxruntime-node (native ORT, ONNX
// Attention), the WebAssembly benchmark in Node (maskattn SIMD128 vs onnxruntime-web), the thread
// scaling of the native build (maskattn_scaling: 1, 2, 4, ... threads up to the cores), the
// micro-tiles alone per ISA (maskattn_microkernel, native and SIMD128 in Node), prints a summary
// and draws docs/bench-chart.svg.
//   node bench/run.mjs [--quick] [--no-chart]
// Results (every figure) go to build/bench/results/*.json.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { renderChart } from './js/chart.mjs';
import { BUILDS, buildFiles } from '../js/builds.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
for (const a of argv)
  if (!['--quick', '--no-chart'].includes(a)) {
    console.error(`unknown argument ${a}\nusage: node bench/run.mjs [--quick] [--no-chart]`);
    process.exit(2);
  }
const quick = argv.includes('--quick');
const buildDir = join(root, 'build/bench');
const resultsDir = join(buildDir, 'results');
const started = Date.now();

function step(title) {
  process.stderr.write(`\n==> ${title}\n`);
}
// Runs a command from the repository root; stderr passes through, and stdout too (to stderr for
// build steps, so stdout holds only the benchmarks' tables).
function run(cmd, args, { env, allowFail = false, build = false } = {}) {
  process.stderr.write(`$ ${[cmd, ...args].join(' ')}\n`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: ['inherit', build ? 'pipe' : 'inherit', 'inherit'], maxBuffer: 256 * 2 ** 20, env: { ...process.env, ...env } });
  if (build && r.stdout) process.stderr.write(r.stdout);
  if (r.status !== 0 && !allowFail) {
    console.error(`command failed (${r.error?.message ?? `exit ${r.status}`}): ${cmd} ${args.join(' ')}`);
    process.exit(1);
  }
  return r.status === 0;
}
const readJson = (p) => (existsSync(p) ? JSON.parse(readFileSync(p, 'utf8')) : null);
const hasPackage = (name) => existsSync(join(root, 'node_modules', name, 'package.json'));

// ------------------------------------------------------------------------------------ build
step('native build (build/bench)');
if (!existsSync(join(buildDir, 'build.ninja')) && !existsSync(join(buildDir, 'Makefile')))
  run('cmake', ['-S', '.', '-B', 'build/bench', '-G', 'Ninja', '-DCMAKE_BUILD_TYPE=Release', '-DMASKATTN_BUILD_BENCH=ON', '-DMASKATTN_BUILD_TESTS=OFF'], { build: true });
const benchExe = join(buildDir, 'bench/maskattn_bench');
const notes = [];
if (!run('cmake', ['--build', 'build/bench', '-j2', '--target', 'maskattn_bench', 'maskattn_cache_bench', 'maskattn_scaling', 'maskattn_microkernel'], { build: true, allowFail: true })) {
  if (!existsSync(benchExe)) process.exit(1);
  notes.push('the native build failed: the native benchmark ran the existing, older maskattn_bench');
  console.error(`warning: ${notes.at(-1)}`);
}

// dist/ is rebuilt when missing or older than the sources it is built from (a stale module next to
// a newer js/index.js would measure old code, or fail).
const wasmFiles = BUILDS.flatMap((b) => buildFiles(b)).map((f) => join(root, 'dist', f));  // every build of js/builds.js
const newest = (path) => {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((e) => newest(join(path, e))));
};
const wasmStale = () => Math.max(...['src', 'bindings', 'CMakeLists.txt'].map((p) => newest(join(root, p)))) > Math.min(...wasmFiles.map(newest));
if (!wasmFiles.every((f) => existsSync(f)) || wasmStale()) {
  const missing = !wasmFiles.every((f) => existsSync(f));
  step(`WebAssembly build (dist/ is ${missing ? 'missing' : 'older than src/ or bindings/'})`);
  if (!run('bash', ['scripts/build-wasm.sh'], { build: true, allowFail: true })) {
    notes.push(wasmFiles.every((f) => existsSync(f)) ? 'the WebAssembly build failed: the Node benchmarks used the existing, older dist/'
      : 'the WebAssembly build failed and dist/ is missing: the Node benchmarks were skipped');
    console.error(`warning: ${notes.at(-1)}`);
  }
}
const haveWasm = wasmFiles.every((f) => existsSync(f));
mkdirSync(resultsDir, { recursive: true });
const files = { native: join(resultsDir, 'native.json'), ortNode: join(resultsDir, 'ort-node.json'), wasm: join(resultsDir, 'wasm.json') };
for (const p of Object.values(files)) rmSync(p, { force: true });  // only this run's figures
const q = quick ? ['--quick'] : [];

// ------------------------------------------------------------------------------------ run
step('native: maskattn vs OpenBLAS, Eigen, oneDNN');
const nativeOk = run(benchExe, [...q, '--json', files.native], { allowFail: true });

step('native KV cache: float16 vs float32 decode steps, 1 x 32/8 x 1 x 4096 x 128');
const cacheOk = run(join(buildDir, 'bench/maskattn_cache_bench'), q, { allowFail: true });

const scalingExe = join(buildDir, 'bench/maskattn_scaling');
let scalingOk = true;
if (existsSync(scalingExe)) {
  step('native thread scaling: 1, 2, 4, ... threads up to the cores (speed-up and efficiency)');
  scalingOk = run(scalingExe, [...(quick ? ['--budget', '0.3'] : []), '--json', join(resultsDir, 'scaling.json')], { allowFail: true });
}

// The micro-tiles alone against each ISA's peak: natively, then SIMD128 (plain and relaxed) in Node
// from Emscripten builds of the probe alone (build/wasm-bench-*; the relaxed one needs npm binaryen).
const microSeconds = quick ? ['--seconds', '0.1', '--d', '64'] : ['--seconds', '0.4'];
let microOk = true;
const microExe = join(buildDir, 'bench/maskattn_microkernel');
if (existsSync(microExe)) {
  step('native micro-kernels: the prefill micro-tiles alone vs each ISA\'s FMA peak');
  microOk = run(microExe, microSeconds, { allowFail: true });
}
for (const [build, flags, nodeFlags] of [['simd', [], []], ['relaxed', ['-DMASKATTN_WASM_RELAXED=ON'], ['--experimental-wasm-relaxed-simd']]]) {
  step(`WebAssembly micro-kernels (${build}) in Node`);
  const dir = `build/wasm-bench-${build}`;
  const built = (existsSync(join(root, dir, 'build.ninja')) ||
      run('emcmake', ['cmake', '-S', '.', '-B', dir, '-G', 'Ninja', '-DCMAKE_BUILD_TYPE=Release', '-DMASKATTN_BUILD_BENCH=ON', '-DMASKATTN_BUILD_TESTS=OFF', '-DMASKATTN_BUILD_EXAMPLES=OFF', ...flags], { build: true, allowFail: true })) &&
    run('cmake', ['--build', dir, '-j2', '--target', 'maskattn_microkernel'], { build: true, allowFail: true });
  if (!built) {
    notes.push(`the WebAssembly micro-kernel build (${dir}) failed: its figures are missing`);
    continue;
  }
  microOk = run('node', ['--no-experimental-fetch', ...nodeFlags, join(dir, 'bench/maskattn_microkernel.js'), ...microSeconds], { allowFail: true }) && microOk;
}

let ortNodeOk = false;
step('native peer in Node: onnxruntime-node');
if (!haveWasm) console.log('skipped: no dist/ (maskattn\'s WebAssembly build checks its output)');
else if (hasPackage('onnxruntime-node')) ortNodeOk = run('node', ['bench/js/ort-node-bench.mjs', ...q, '--json', files.ortNode], { allowFail: true });
else console.log('onnxruntime-node is not installed: skipped (ONNXRUNTIME_NODE_INSTALL=skip npm ci installs it offline)');

let wasmOk = false;
step('WebAssembly in Node: maskattn vs onnxruntime-web');
if (!haveWasm) console.log('skipped: no dist/');
else if (hasPackage('onnxruntime-web')) wasmOk = run('node', ['bench/js/node-bench.mjs', ...q, '--json', files.wasm], { allowFail: true });
else console.log('onnxruntime-web is not installed: skipped (npm ci)');

let generationOk = true;
if (existsSync(join(root, 'bench/js/generation-bench.mjs'))) {
  step('WebAssembly in Node: a generation loop, maskattn KV cache vs onnxruntime-web GroupQueryAttention');
  if (!haveWasm) console.log('skipped: no dist/');
  else if (hasPackage('onnxruntime-web')) generationOk = run('node', ['bench/js/generation-bench.mjs', ...q], { allowFail: true });
}

let chromiumOk = true;
step('WebAssembly in headless Chromium: plain, relaxed-SIMD and threaded builds on the demo page');
if (!haveWasm) console.log('skipped: no dist/');
else if (!existsSync('/usr/bin/chromium') && !process.env.CHROMIUM_PATH) console.log('skipped: no Chromium (scripts/setup.sh installs it)');
else chromiumOk = run('node', ['bench/js/chromium-bench.mjs', ...q], { allowFail: true });

const results = { native: readJson(files.native), ortNode: readJson(files.ortNode), wasm: readJson(files.wasm) };
writeFileSync(join(resultsDir, 'all.json'), `${JSON.stringify(results, null, 1)}\n`);

// ------------------------------------------------------------------------------------ summary
const f = (ms) => (ms > 0 ? (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms >= 0.1 ? ms.toFixed(2) : ms.toPrecision(2)) : '-');
const ratio = (r) => (Number.isFinite(r) ? `${r.toFixed(2)}x` : '-');
console.log(`\nSummary (median ms per call; ratio = fastest peer / maskattn, above 1 = maskattn faster)${quick ? ' [quick run]' : ''}`);
if (results.native) {
  const threads = results.native.ceilings.map((c) => c.threads);
  console.log(`\nnative, maskattn ${results.native.maskattn.target}; peers: OpenBLAS, Eigen, oneDNN (same process), onnxruntime-node`);
  console.log(`${'case'.padEnd(42)} ${threads.map((t) => `${`maskattn ${t}T`.padStart(12)} ${`fastest peer ${t}T`.padStart(28)} ${'ratio'.padStart(6)}`).join('  ')}`);
  for (const c of results.native.cases) {
    if (c.error) {
      console.log(`${`#${c.id} ${c.name}`.padEnd(42)} aborted: ${c.error}`);
      continue;
    }
    const ortCase = results.ortNode?.cases.find((o) => o.id === c.id);
    const cols = threads.map((t) => {
      const ours = c.results.find((r) => r.impl === 'maskattn' && r.threads === t)?.median_ms;
      const peers = [...c.results.filter((r) => r.impl !== 'maskattn'), ...(ortCase?.results ?? [])].filter((r) => r.threads === t && r.median_ms > 0);
      const best = peers.sort((a, b) => a.median_ms - b.median_ms)[0];
      const peerText = best ? `${best.impl} ${f(best.median_ms)}` : '-';
      return `${f(ours).padStart(12)} ${peerText.padStart(28)} ${ratio(best ? best.median_ms / ours : NaN).padStart(6)}`;
    });
    console.log(`${`#${c.id} ${c.name}`.padEnd(42)} ${cols.join('  ')}`);
  }
}
if (results.wasm) {
  console.log(`\nWebAssembly in Node ${results.wasm.node}, 1 thread; ratio = onnxruntime-web / maskattn`);
  const impls = ['onnxruntime-web', 'maskattn simd128', 'maskattn simd128 (ws)', 'maskattn scalar'];
  console.log(`${'case'.padEnd(42)} ${impls.map((i) => i.padStart(22)).join('')} ${'ratio'.padStart(7)} ${'ws'.padStart(6)}`);
  for (const c of results.wasm.cases) {
    if (c.error) {
      console.log(`${`#${c.id} ${c.name}`.padEnd(42)} aborted: ${c.error}`);
      continue;
    }
    const ms = impls.map((i) => c.results.find((r) => r.impl === i)?.median_ms);
    console.log(`${`#${c.id} ${c.name}`.padEnd(42)} ${ms.map((m) => f(m).padStart(22)).join('')} ${ratio(ms[0] / ms[1]).padStart(7)} ${ratio(ms[0] / ms[2]).padStart(6)}`);
  }
}

// ------------------------------------------------------------------------------------ chart
if (!argv.includes('--no-chart') && (results.native || results.wasm)) {
  const svgPath = join(root, 'docs/bench-chart.svg');
  writeFileSync(svgPath, renderChart(results));
  console.log(`\nchart: ${relative(root, svgPath)}; every figure: ${relative(root, resultsDir)}/*.json`);
}
for (const note of notes) console.log(`\nnote: ${note}`);
process.stderr.write(`\ndone in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
const nodeOk = !haveWasm || ((ortNodeOk || !hasPackage('onnxruntime-node')) && (wasmOk || !hasPackage('onnxruntime-web')));
process.exit(nativeOk && cacheOk && scalingOk && microOk && generationOk && chromiumOk && nodeOk && !notes.length ? 0 : 1);

// Browser benchmark: maskattn's WebAssembly builds timed in headless Chromium, on the demo's
// cross-origin isolated page (scripts/serve.mjs), where init() can load every build: the plain
// SIMD128 build, the relaxed-SIMD build (fused multiply-add) and the threaded relaxed build on 1
// and N threads. Same cases and measuring method as node-bench.mjs (Workspaces, inputs already
// in wasm memory; calls interleaved in a new random order each round; medians).
// --cache instead: the KV cache decode step per build and cache dtype, with each build's read probe,
// the threaded build at 1 and 2 threads included (bench/js/cache-run.mjs, as bench/js/cache-bench.mjs
// runs it in Node; the scalar build is left to Node), then the step over q8/q4 caches per integer
// dot product (bench/js/quant-dot-run.mjs, as bench/js/quant-dot-bench.mjs runs it in Node).
//   node bench/js/chromium-bench.mjs [--quick] [--case ID[,ID...]] [--threads N] [--json FILE]
//   node bench/js/chromium-bench.mjs --cache [--quick] [--reps N] [--json FILE]
import { writeFileSync } from 'node:fs';
import { launchChromium } from '../../tests/browser/chromium.mjs';
import { start } from '../../scripts/serve.mjs';
import { CASES, machine } from './common.mjs';
import { decodeSteps, formatDecodeSteps, DECODE_SHAPES } from './quant-dot-run.mjs';
import { CACHE_BUILDS, CACHE_SHAPES, cacheSteps, formatCacheSteps } from './cache-run.mjs';

const argv = process.argv.slice(2);
const arg = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const quick = argv.includes('--quick');
const THREADS = Number(arg('--threads', 2));
const ids = arg('--case', '1,2,3,4,5').split(',');
const json = arg('--json', null);
const cases = CASES.filter((c) => c.wasm && ids.includes(c.id));

const server = await start({ port: 0 });
const browser = await launchChromium();
try {
  const page = await browser.newPage();
  await page.goto(server.url);
  await page.waitForFunction(() => window.__maskattnDemo?.ready === true, null, { timeout: 30000 });
  const version = await page.evaluate(() => navigator.userAgent.match(/Chrome\/[\d.]+/)?.[0] ?? navigator.userAgent);
  console.log(`maskattn in ${version} (headless), demo page cross-origin isolated; ${machine().cpu}, ${machine().cores} cores; ${quick ? 'quick' : 'full'} run`);
  if (argv.includes('--cache')) {
    const reps = Number(arg('--reps', quick ? 7 : 21));
    page.on('console', (m) => process.stderr.write(`${m.text()}\n`));  // cacheSteps' progress
    console.log(`KV cache decode step per build and dtype; median of ${reps}`);
    const builds = CACHE_BUILDS.filter((b) => b.options.simd !== false);
    const steps = await page.evaluate(cacheSteps, { indexUrl: '/js/index.js', builds, shapes: CACHE_SHAPES, reps });
    console.log(formatCacheSteps(steps, CACHE_SHAPES));
    console.log("\nKV cache decode step over q8/q4 caches per integer dot product, 1 thread");
    const r = await page.evaluate(decodeSteps, { indexUrl: '/js/index.js', shapes: DECODE_SHAPES, reps });
    console.log(formatDecodeSteps(r));
    if (json) writeFileSync(json, JSON.stringify({ browser: version, machine: machine(), quick, steps, ...r }, null, 2));
  } else {
    console.log(`${'case'.padEnd(30)} ${'build'.padEnd(34)} ${'ms/call'.padStart(9)} ${'vs plain'.padStart(9)}`);
    const out = { browser: version, machine: machine(), threads: THREADS, cases: [] };
    for (const c of cases) {
      // Everything below runs in the page.
      const rows = await page.evaluate(async ({ c, THREADS, rounds }) => {
        const { init } = await import('/js/index.js');
        const builds = [
          ['SIMD128', await init({ simd: true, relaxed: false, threads: 1 }), 1],
          ['SIMD128 relaxed', await init({ simd: true, relaxed: true, threads: 1 }), 1],
          ['SIMD128 relaxed threads, 1 thread', await init({ simd: true, relaxed: true, threads: THREADS }), 1],
          [`SIMD128 relaxed threads, ${THREADS} threads`, await init({ simd: true, relaxed: true, threads: THREADS }), THREADS],
        ];
        const q = [c.B, c.Hq, c.Lq, c.D], kv = [c.B, c.Hkv, c.Lk, c.D];
        const impls = builds.map(([name, ma, threads]) => {
          const ws = ma.createWorkspace({ q, k: kv, v: kv });
          for (const [t, seed] of [[ws.q, 1], [ws.k, 2], [ws.v, 3]]) for (let i = 0; i < t.length; ++i) t[i] = Math.sin(i * 0.37 + seed);
          const options = { causal: !!c.causal, threads };
          // Warm up: Chromium compiles with its baseline compiler first and tiers up to TurboFan
          // in the background, so early calls are slow.
          for (let n = 0, t0 = performance.now(); n < 3 || (n < 50 && performance.now() - t0 < 400); ++n) ws.run(options);
          return { name, build: ma.backend.build, run: () => ws.run(options), ws, times: [] };
        });
        for (let r = 0; r < rounds; ++r) {
          const order = impls.map((_, i) => i).sort(() => Math.random() - 0.5);
          for (const i of order) {
            const t0 = performance.now();
            impls[i].run();
            impls[i].times.push(performance.now() - t0);
          }
        }
        const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
        const rows = impls.map((x) => ({ name: x.name, build: x.build, ms: median(x.times) }));
        impls.forEach((x) => x.ws.dispose());
        return rows;
      }, { c, THREADS, rounds: quick ? 5 : c.Lq * c.Lk > 300000 ? 15 : 41 });
      const plain = rows[0].ms;
      for (const r of rows)
        console.log(`#${c.id} ${c.name.padEnd(27)} ${r.name.padEnd(34)} ${r.ms.toFixed(3).padStart(9)} ${(plain / r.ms).toFixed(2).padStart(8)}x`);
      const one = rows[2].ms, many = rows[3].ms;
      console.log(`#${c.id} relaxed vs plain ${(plain / rows[1].ms).toFixed(2)}x; ${THREADS} threads vs 1 ${(one / many).toFixed(2)}x`);
      out.cases.push({ id: c.id, name: c.name, rows });
    }
    if (json) writeFileSync(json, JSON.stringify(out, null, 2));
  }
} finally {
  await browser.close();
  await server.close();
}

// The threaded and relaxed-SIMD builds in a real browser (headless Debian Chromium through
// playwright-core): on the demo page as scripts/serve.mjs serves it (cross-origin isolated, so the
// threaded build loads and its Web Workers run the library's pool), and on the same page served
// without isolation (?isolation=off: no SharedArrayBuffer, so init() falls back to the
// single-threaded build and says so). Chromium runs relaxed SIMD without a flag.
//
//   node --test tests/browser/threads.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launchChromium, watchProblems } from './chromium.mjs';
import { start } from '../../scripts/serve.mjs';


let server;
let browser;
let context;

before(async () => {
  server = await start({ port: 0 });
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** The demo page (query: '' or '?isolation=off'), loaded; problems collects errors and warnings. */
async function openDemo(query, problems) {
  const page = await context.newPage();
  await watchProblems(page, problems);
  await page.goto(server.url + query);
  await page.waitForFunction(() => window.__maskattnDemo?.ready === true || !document.getElementById('error').hidden, null, { timeout: 30000 });
  const error = await page.evaluate(() => (document.getElementById('error').hidden ? null : document.getElementById('error').textContent));
  assert.equal(error, null, `the page shows an error: ${error}`);
  return page;
}

// Runs in the page: every build the engine can load, the same problems on each, at 1 and 2 threads.
// Returns the backends, thread counts used, and how results compare (bitwise across thread counts;
// masking decisions across builds).
function exercise() {
  return (async () => {
    const { init, threadsSupported, relaxedSimdSupported } = await import('/js/index.js');
    const r = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 12.9898 + seed) * 0.9);
    const prefill = { B: 2, Hq: 4, Hkv: 2, Lq: 256, Lk: 320, D: 64 };
    const t = (s, H, L, seed) => ({ data: r(s.B * H * L * s.D, seed), shape: [s.B, H, L, s.D] });
    const q = t(prefill, prefill.Hq, prefill.Lq, 1), k = t(prefill, prefill.Hkv, prefill.Lk, 2), v = t(prefill, prefill.Hkv, prefill.Lk, 3);
    const allowed = { data: Uint8Array.from({ length: prefill.Lq * prefill.Lk }, (_, i) => ((i * 7919) % 10 < 8 ? 1 : 0)), shape: [prefill.Lq, prefill.Lk] };
    const options = { causal: true, keyLengths: [320, 200], allowed, returnWeights: true, returnLse: true, returnStats: true };
    const out = { isolated: globalThis.crossOriginIsolated, threadsSupported: threadsSupported(), relaxed: relaxedSimdSupported(),
      cores: navigator.hardwareConcurrency, builds: {} };
    const builds = {
      auto: {}, plain: { relaxed: false, threads: 1 }, relaxed: { relaxed: true, threads: 1 },
      threads: { relaxed: false, threads: 2 }, 'relaxed-threads': { relaxed: true, threads: 2 }, scalar: { simd: false },
    };
    let base = null;
    for (const [name, init_] of Object.entries(builds)) {
      const ma = await init(init_);
      const one = ma.attention(q, k, v, { ...options, threads: 1 });
      const two = ma.attention(q, k, v, { ...options, threads: 2 });
      base ??= one;
      let maskDiffers = 0, maxDiff = 0, sameAcrossThreads = true;
      for (let n = 0; n < one.weights.data.length; ++n) if ((one.weights.data[n] === 0) !== (base.weights.data[n] === 0)) ++maskDiffers;
      for (let n = 0; n < one.output.data.length; ++n) maxDiff = Math.max(maxDiff, Math.abs(one.output.data[n] - base.output.data[n]));
      for (const part of ['output', 'weights', 'lse'])
        for (let n = 0; n < one[part].data.length; ++n) if (!Object.is(one[part].data[n], two[part].data[n])) sameAcrossThreads = false;
      out.builds[name] = { backend: { ...ma.backend }, used1: one.stats.threadsUsed, used2: two.stats.threadsUsed, maskDiffers, maxDiff, sameAcrossThreads };
    }
    return out;
  })();
}

test('a cross-origin isolated page runs the threaded build: 2 threads, the same results as 1', async () => {
  const problems = [];
  const page = await openDemo('', problems);
  const out = await page.evaluate(exercise);
  assert.equal(out.isolated, true);
  assert.equal(out.threadsSupported, true);
  assert.equal(out.relaxed, true, 'Chromium validates relaxed SIMD without a flag');
  const auto = out.builds.auto.backend;
  const cores = Math.min(out.cores, 16);
  assert.equal(auto.build, cores > 1 ? 'maskattn-simd-relaxed-threads' : 'maskattn-simd-relaxed');
  assert.equal(auto.threads, cores);
  for (const [name, build] of [['plain', 'maskattn-simd'], ['relaxed', 'maskattn-simd-relaxed'], ['threads', 'maskattn-simd-threads'],
    ['relaxed-threads', 'maskattn-simd-relaxed-threads'], ['scalar', 'maskattn-scalar']]) {
    const b = out.builds[name];
    assert.equal(b.backend.build, build, name);
    assert.equal(b.used1, 1, `${name}: threads: 1`);
    assert.equal(b.used2, build.endsWith('threads') ? 2 : 1, `${name}: threads: 2`);
    assert.equal(b.sameAcrossThreads, true, `${name}: results do not depend on the thread count`);
    assert.equal(b.maskDiffers, 0, `${name}: the same masking decisions as ${out.builds.auto.backend.build}`);
    assert.ok(b.maxDiff < 1e-5, `${name}: output within 1e-5 of the others (${b.maxDiff})`);
  }
  // The page's own module (init() on the main thread) is the threaded one, and the demo works.
  assert.equal(await page.evaluate(() => window.__maskattnDemo.backend.threads), cores);
  assert.match(await page.locator('#backend').textContent(), new RegExp(`${cores} thread`));
  // The speed panel (in a worker: also isolated) times 1 and N threads.
  await page.selectOption('#perf-preset', '1x4x128x64');
  await page.click('#perf-run');
  await page.waitForSelector('#perf[data-state="done"]', { timeout: 120000 });
  const ids = await page.$$eval('#perf-table tr', (trs) => trs.map((tr) => tr.dataset.impl));
  if (cores > 1) {
    assert.deepEqual(ids, ['simd', 'threads', 'scalar', 'ort', 'js']);
    // Either the threads win, or the panel says that one thread does, and why.
    assert.match(await page.locator('#perf-summary').textContent(), new RegExp(`${cores} threads \\(threadsUsed\\) run at [\\d.]+× the speed of 1|One thread wins here`));
    assert.match(await page.locator('#perf-table tr[data-impl="simd"]').textContent(), /relaxed SIMD \(FMA\), 1 thread/);
  }
  await page.close();
  assert.deepEqual(problems, []);
});

test('a page served without isolation falls back to the single-threaded build and says so', async () => {
  const problems = [];
  const page = await openDemo('?isolation=off', problems);
  const out = await page.evaluate(exercise);
  assert.equal(out.isolated, false);
  assert.equal(out.threadsSupported, false);
  for (const [name, build] of [['auto', 'maskattn-simd-relaxed'], ['plain', 'maskattn-simd'], ['relaxed', 'maskattn-simd-relaxed'],
    ['threads', 'maskattn-simd'], ['relaxed-threads', 'maskattn-simd-relaxed'], ['scalar', 'maskattn-scalar']]) {
    const b = out.builds[name];
    assert.equal(b.backend.build, build, name);
    assert.equal(b.backend.threads, 1, `${name}: one thread`);
    assert.equal(b.used2, 1, `${name}: threads: 2 runs on 1 here`);
    assert.equal(b.maskDiffers, 0, name);
    assert.ok(b.maxDiff < 1e-5, `${name}: ${b.maxDiff}`);
  }
  assert.match(await page.locator('#backend').textContent(), /· 1 thread ·/);
  await page.selectOption('#perf-preset', '1x4x128x64');
  await page.click('#perf-run');
  await page.waitForSelector('#perf[data-state="done"]', { timeout: 120000 });
  assert.deepEqual(await page.$$eval('#perf-table tr', (trs) => trs.map((tr) => tr.dataset.impl)), ['simd', 'scalar', 'ort', 'js']);
  assert.match(await page.locator('#perf-summary').textContent(), /threads need a cross-origin isolated page/);
  await page.close();
  assert.deepEqual(problems, []);
});

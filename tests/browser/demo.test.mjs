// Real-browser tests of the demo page (web/): headless Debian Chromium driven by playwright-core,
// against scripts/serve.mjs on 127.0.0.1 (ephemeral port). One browser for the whole file.
// Screenshots (desktop 1280x800, phone 390x844) go to test-results/ (git-ignored).
//
//   node --test tests/browser/demo.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { launchChromium, watchProblems } from './chromium.mjs';
import { start } from '../../scripts/serve.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const RESULTS = path.join(ROOT, 'test-results');

let server;
let browser;
let desktop;          // the browser context used by most tests
const problems = [];  // console errors, page errors, failed requests, CSP violations, foreign requests

before(async () => {
  server = await start({ port: 0 });
  browser = await launchChromium();
  desktop = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await mkdir(RESULTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** A page on the demo, watched for problems, loaded and rendered. */
async function openDemo(context = desktop, { check = true } = {}) {
  const page = await context.newPage();
  const origin = new URL(server.url).origin;
  await watchProblems(page, problems, { origin });
  await page.goto(server.url);
  await page.waitForFunction(() => window.__maskattnDemo?.ready === true || !document.getElementById('error').hidden, null, { timeout: 20000 });
  if (check) await assertNoPageError(page);
  return page;
}

async function assertNoPageError(page) {
  const error = await page.evaluate(() => (document.getElementById('error').hidden ? null : document.getElementById('error').textContent));
  assert.equal(error, null, `the page shows an error: ${error}`);
}

const view = (page) => page.evaluate(() => JSON.parse(document.getElementById('weights-json').textContent));
const lessons = (page) => page.evaluate(() => JSON.parse(document.getElementById('lessons-json').textContent));

/** Runs an action that changes controls and waits for the page to draw again; returns the new view. */
async function act(page, action) {
  const renders = await page.evaluate(() => window.__maskattnDemo.renders);
  await action();
  await page.waitForFunction((n) => window.__maskattnDemo.renders > n, renders, { timeout: 5000 });
  // Renders are scheduled on the next animation frame: two frames later every change has been drawn.
  await page.evaluate(() => new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok))));
  return view(page);
}

const num = (x) => (typeof x === 'string' ? Number(x) : x);
const rowSum = (row) => row.reduce((a, b) => a + num(b), 0);

/** RGBA of the canvas pixel at the centre of cell (i, j) of a heatmap. */
async function pixel(page, canvasId, name, i, j) {
  return page.evaluate(({ canvasId, name, i, j }) => {
    const g = window.__maskattnDemo.heatmaps[name];
    const canvas = document.getElementById(canvasId);
    const ratio = canvas.width / g.width;
    const x = Math.round((g.x0 + j * g.cell + g.cell * 0.2) * ratio);  // off-centre: avoid the cell's text
    const y = Math.round((g.y0 + i * g.cell + g.cell * 0.2) * ratio);
    // Read through a copy made for reading, so the page's canvas is not slowed (or warned about).
    const probe = document.createElement('canvas');
    probe.width = probe.height = 1;
    const ctx = probe.getContext('2d', { willReadFrequently: true });
    ctx.drawImage(canvas, x, y, 1, 1, 0, 0, 1, 1);
    return Array.from(ctx.getImageData(0, 0, 1, 1).data);
  }, { canvasId, name, i, j });
}
const isGrey = ([r, g, b]) => Math.abs(r - g) < 14 && Math.abs(g - b) < 14 && r < 215 && r > 100;
const isBlueish = ([r, g, b]) => b > r + 8;

async function cellPoint(page, canvasId, name, i, j) {
  await page.locator(`#${canvasId}`).scrollIntoViewIfNeeded();
  const box = await page.locator(`#${canvasId}`).boundingBox();
  const g = await page.evaluate((n) => window.__maskattnDemo.heatmaps[n], name);
  const scale = box.width / g.width;
  return { x: box.x + (g.x0 + (j + 0.5) * g.cell) * scale, y: box.y + (g.y0 + (i + 0.5) * g.cell) * scale };
}

test('the server sends the page with a strict CSP, isolation headers and only the allowed files', async () => {
  const get = (p) => fetch(new URL(p, server.url), { redirect: 'manual' });
  const page = await get('/web/');
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type'), /^text\/html/);
  assert.equal(page.headers.get('content-security-policy'),
    "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data:; connect-src 'self'; worker-src 'self'; frame-ancestors 'none'");
  assert.equal(page.headers.get('cross-origin-opener-policy'), 'same-origin');
  assert.equal(page.headers.get('cross-origin-embedder-policy'), 'require-corp');
  assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+\/web\/$/);
  assert.equal((await get('/dist/maskattn-simd.wasm')).headers.get('content-type'), 'application/wasm');
  assert.match((await get('/js/index.js')).headers.get('content-type'), /^text\/javascript/);
  assert.match((await get('/dist/maskattn-scalar.mjs')).headers.get('content-type'), /^text\/javascript/);
  assert.match((await get('/web/style.css')).headers.get('content-type'), /^text\/css/);
  assert.equal((await get('/docs/semantics.md')).status, 200);
  assert.equal((await get('/')).status, 302);
  for (const p of ['/package.json', '/scripts/serve.mjs', '/web/../package.json', '/%2e%2e/package.json', '/src/', '/docs/nope.html', '/web/nope.js'])
    assert.equal((await get(p)).status, 404, p);
  assert.equal((await get('/docs/')).headers.get('location'), '/docs/index.html', '/docs/ goes to the list of docs');
  assert.match((await get('/docs/semantics.html')).headers.get('content-type'), /^text\/html/);
  const html = await (await get('/web/')).text();
  assert.doesNotMatch(html, /\son[a-z]+\s*=/i, 'no inline event-handler attributes');
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/i, 'no inline scripts');
  assert.doesNotMatch(html, /\sstyle\s*=/i, 'no inline styles');
});

test('the page loads maskattn with no console errors, failed or external requests', async () => {
  const before = problems.length;
  const page = await openDemo();
  const backend = await page.locator('#backend').textContent();
  assert.match(backend, /simd128/);
  assert.equal(await page.evaluate(() => window.__maskattnDemo.backend.arch), 'simd128');
  assert.deepEqual(await page.evaluate(() => window.__cspViolations), []);
  // Every control has a label; no element has an inline handler attribute.
  const unlabeled = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea')]
    .filter((c) => c.labels.length === 0 && !c.getAttribute('aria-label')).map((c) => c.id));
  assert.deepEqual(unlabeled, []);
  const handlers = await page.evaluate(() => [...document.querySelectorAll('*')]
    .flatMap((n) => [...n.attributes].filter((a) => /^on/i.test(a.name)).map((a) => `${n.tagName}.${a.name}`)));
  assert.deepEqual(handlers, []);
  // The default picture: "The cat sat on the mat", causal.
  const v = await view(page);
  assert.deepEqual(v.colLabels, ['The', 'cat', 'sat', 'on', 'the', 'mat']);
  assert.equal(v.mismatches, 0);
  for (let i = 0; i < 6; i++) {
    assert.ok(Math.abs(rowSum(v.weights[i]) - 1) < 1e-5, `row ${i} sums to 1`);
    for (let j = i + 1; j < 6; j++) {
      assert.equal(v.mask[i][j], 0);
      assert.equal(num(v.weights[i][j]), 0);
    }
  }
  // The call is shown, and the weights as a table (masked cells say so).
  assert.match(await page.locator('#call').textContent(), /ma\.attention\(q, k, v, \{[\s\S]*causal: true,/);
  await page.click('#table-details summary');
  await page.waitForSelector('#weights-table table');
  assert.equal(await page.locator('#weights-table td.masked').count(), 15);
  // The scalar build draws the same picture (same masking decisions, same numbers up to rounding).
  const scalar = await act(page, () => page.selectOption('#build', 'scalar'));
  assert.match(await page.locator('#backend').textContent(), /scalar · 1 lane/);
  assert.deepEqual(scalar.mask, v.mask);
  scalar.weights.forEach((row, i) => row.forEach((w, j) => assert.ok(Math.abs(num(w) - num(v.weights[i][j])) < 1e-6)));
  await page.close();
  assert.deepEqual(problems.slice(before), []);
});

test('changing the controls changes the drawn weights', async () => {
  const before = problems.length;
  const page = await openDemo();
  const causal = await view(page);
  // Cell (0, 5) is masked under causal: drawn hatched grey in the weights and mask canvases.
  assert.ok(isGrey(await pixel(page, 'weights-canvas', 'weights', 0, 5)), 'masked cell drawn grey');
  assert.ok(isGrey(await pixel(page, 'mask-canvas', 'mask', 0, 5)));

  const open = await act(page, () => page.uncheck('#causal'));
  assert.ok(num(open.weights[0][5]) > 0, 'no longer masked');
  assert.equal(open.mask[0][5], 1);
  assert.notDeepEqual(open.weights, causal.weights);
  assert.ok(isBlueish(await pixel(page, 'weights-canvas', 'weights', 0, 5)), 'now drawn as a weight');
  for (const row of open.weights) assert.ok(Math.abs(rowSum(row) - 1) < 1e-5);

  // Hovering a cell shows its exact numbers.
  const p = await cellPoint(page, 'weights-canvas', 'weights', 2, 3);
  await page.mouse.move(p.x, p.y);
  await page.waitForSelector('#weights-tooltip:not([hidden])');
  const tip = await page.locator('#weights-tooltip').textContent();
  assert.match(tip, /query 2 “sat” → key 3 “on”/);
  const w = num(open.weights[2][3]);
  const shown = Number(/weight (\S+)/.exec(tip)?.[1]);
  assert.ok(Math.abs(shown - w) <= 1e-4 * Math.abs(w), `tooltip shows ${shown}, the weight is ${w}`);
  await page.mouse.move(0, 0);

  // Sliding window (left 1, right 0): each query sees itself and one key back.
  await act(page, () => page.check('#window'));
  const win = await act(page, async () => {
    await page.fill('#window-left', '1');
    await page.fill('#window-right', '0');
  });
  assert.deepEqual(win.mask[3], [0, 0, 1, 1, 0, 0]);
  assert.equal(num(win.weights[3][0]), 0);
  await act(page, () => page.uncheck('#window'));

  // ALiBi and softcap change the weights but not the mask; another head has other weights.
  await act(page, () => page.check('#causal'));
  const base = await view(page);
  const alibi = await act(page, () => page.check('#alibi'));
  assert.deepEqual(alibi.mask, base.mask);
  assert.notDeepEqual(alibi.weights, base.weights);
  const capped = await act(page, () => page.check('#softcap'));
  assert.notDeepEqual(capped.weights, alibi.weights);
  const head2 = await act(page, () => page.selectOption('#head-pick', '1'));
  assert.equal(head2.h, 1);
  assert.notDeepEqual(head2.weights, capped.weights);
  await act(page, async () => {
    await page.uncheck('#alibi');
    await page.uncheck('#softcap');
  });

  // Prefix-LM: the first 2 keys are visible to every query.
  const prefix = await act(page, () => page.fill('#prefix', '2'));
  assert.deepEqual(prefix.mask[0], [1, 1, 0, 0, 0, 0]);
  await act(page, () => page.fill('#prefix', '0'));

  // A decode step (Lq = 1 < Lk = 6): bottom-right sees every key, top-left only the first.
  const decode = await act(page, () => page.check('#queries-decode'));
  assert.equal(decode.Lq, 1);
  assert.deepEqual(decode.rowLabels, ['mat']);
  assert.deepEqual(decode.mask[0], [1, 1, 1, 1, 1, 1]);
  const topLeft = await act(page, () => page.selectOption('#align', 'top-left'));
  assert.deepEqual(topLeft.mask[0], [1, 0, 0, 0, 0, 0]);
  assert.ok(Math.abs(num(topLeft.weights[0][0]) - 1) < 1e-6);
  await act(page, async () => {
    await page.selectOption('#align', 'bottom-right');
    await page.check('#queries-all');
  });

  // The padded batch: sentence 2 ("Dogs bark") has 2 real tokens of 6; the example turns on both paddings.
  await act(page, () => page.selectOption('#example', 'batch'));
  const dogs = await act(page, () => page.selectOption('#sentence-pick', '1'));
  assert.deepEqual(dogs.colLabels, ['Dogs', 'bark', '<pad>', '<pad>', '<pad>', '<pad>']);
  for (const row of dogs.mask) assert.deepEqual(row.slice(2), [0, 0, 0, 0]);
  assert.equal(await page.isChecked('#query-padding'), true);
  const qpad = dogs;
  assert.deepEqual(qpad.fullyMaskedRows, [2, 3, 4, 5]);
  for (const i of [2, 3, 4, 5]) {
    assert.ok(qpad.weights[i].every((x) => num(x) === 0), `padding row ${i} is zero`);
    assert.ok(qpad.output[i].every((x) => num(x) === 0));
  }
  const nan = await act(page, () => page.selectOption('#policy', 'nan'));
  assert.ok(nan.weights[4].every((x) => x === 'NaN'), 'policy nan gives NaN rows');
  assert.ok(nan.output[0].every((x) => Number.isFinite(num(x))), 'other rows unaffected');
  const none = await act(page, () => page.uncheck('#key-padding'));
  assert.notDeepEqual(none.mask, qpad.mask, 'without key padding the pads are attended');

  // Packed documents: segments keep the two sentences apart.
  const packed = await act(page, () => page.selectOption('#example', 'packed'));
  assert.equal(await page.isChecked('#segments'), true);
  const k = packed.colLabels;
  assert.deepEqual(k, ['The', 'cat', 'sat', '.', 'A', 'dog', 'ran', 'far', '.']);
  assert.deepEqual(packed.mask[5], [0, 0, 0, 0, 1, 1, 0, 0, 0]);  // "dog": its own document, causal
  assert.equal(packed.mismatches, 0);
  await page.close();
  assert.deepEqual(problems.slice(before), []);
});

test('the fully masked row lesson: zeros with maskattn, NaN with plain softmax', async () => {
  const before = problems.length;
  const page = await openDemo();
  const l = await lessons(page);
  assert.equal(l.row, 0);
  const Lk = 6;
  const { zero, plain, fill, mulAfter, mulBefore } = l.panels;
  assert.deepEqual(zero.rowWeights, Array(Lk).fill(0));
  assert.ok(zero.rowOutput.every((x) => num(x) === 0));
  assert.ok(Number.isFinite(num(zero.totalOutput)));
  assert.ok(plain.rowWeights.every((x) => x === 'NaN'));
  assert.ok(plain.rowOutput.every((x) => x === 'NaN'));
  assert.equal(plain.totalOutput, 'NaN', 'NaN spreads into the sum');
  assert.ok(fill.rowWeights.every((x) => Math.abs(num(x) - 1 / Lk) < 1e-12), '-1e9 fill: uniform');
  assert.ok(mulAfter.rowSums.slice(1).some((s) => num(s) < 0.999), 'multiplying after softmax breaks the sums');
  assert.ok(mulBefore.weights.some((w, n) => n % Lk > Math.floor(n / Lk) && num(w) > 0), 'masked keys get weight');
  // Rows that are not fully masked agree between maskattn and the -inf / -1e9 versions.
  for (let n = Lk; n < zero.weights.length; n++) {
    assert.ok(Math.abs(num(zero.weights[n]) - num(plain.weights[n])) < 1e-5);
    assert.ok(Math.abs(num(zero.weights[n]) - num(fill.weights[n])) < 1e-5);
  }
  // And it is visible on the page.
  assert.match(await page.locator('[data-lesson="zero"] .row-result').textContent(), /row 0: weights \[0, 0, 0, 0, 0, 0\]/);
  assert.match(await page.locator('[data-lesson="plain"] .row-result').textContent(), /weights \[NaN, NaN/);
  // Another row can be chosen.
  await act(page, () => page.selectOption('#lesson-row', '3'));
  const l3 = await lessons(page);
  assert.equal(l3.row, 3);
  assert.ok(l3.panels.plain.rowWeights.every((x) => x === 'NaN'));
  assert.ok(l3.panels.zero.rowWeights.every((x) => num(x) === 0));
  await page.close();
  assert.deepEqual(problems.slice(before), []);
});

test('the custom mask toggles a cell by click and by keyboard', async () => {
  const before = problems.length;
  const page = await openDemo();
  const start = await view(page);
  assert.equal(start.mask[3][1], 1);
  const p = await cellPoint(page, 'mask-canvas', 'mask', 3, 1);
  const off = await act(page, () => page.mouse.click(p.x, p.y));
  assert.equal(await page.isChecked('#custom'), true);
  assert.equal(off.mask[3][1], 0);
  assert.equal(num(off.weights[3][1]), 0);
  assert.ok(Math.abs(rowSum(off.weights[3]) - 1) < 1e-5, 'the rest of the row renormalises');
  assert.ok(isGrey(await pixel(page, 'weights-canvas', 'weights', 3, 1)));
  const on = await act(page, () => page.mouse.click(p.x, p.y));
  assert.equal(on.mask[3][1], 1);
  assert.deepEqual(on.weights, start.weights);
  // Keyboard: focus the mask, move to (2, 0), Space toggles. The cursor starts at the last clicked cell.
  await page.mouse.move(0, 0);
  await page.focus('#mask-canvas');
  for (const k of ['Home', 'ArrowUp', 'ArrowUp', 'ArrowUp', 'ArrowDown', 'ArrowDown']) await page.keyboard.press(k);
  assert.match(await page.locator('#mask-readout').textContent(), /^query 2 “sat” → key 0 “The” · allowed/);
  const key = await act(page, () => page.keyboard.press('Space'));
  assert.equal(key.mask[2][0], 0);
  assert.match(await page.locator('#mask-readout').textContent(), /query 2 “sat” → key 0 “The” · masked by custom mask/);
  const reset = await act(page, () => page.click('#custom-reset'));
  assert.equal(reset.mask[2][0], 1);
  await page.close();
  assert.deepEqual(problems.slice(before), []);
});

test('the performance panel times SIMD128 (1 and N threads), scalar, onnxruntime-web and plain JS, with progress', async () => {
  const before = problems.length;
  const page = await openDemo();
  // A long run can be stopped.
  await page.selectOption('#perf-preset', '1x8x1024x64');
  await page.click('#perf-run');
  await page.waitForSelector('#perf-progress:not([hidden])', { timeout: 5000 });
  await page.click('#perf-stop');
  await page.waitForSelector('#perf[data-state="stopped"]', { timeout: 5000 });
  assert.equal(await page.isEnabled('#perf-run'), true);
  // A short one runs to the end.
  await page.selectOption('#perf-preset', '1x4x128x64');
  await page.click('#perf-run');
  await page.waitForSelector('#perf-progress:not([hidden])', { timeout: 5000 });
  assert.equal(await page.isDisabled('#perf-run'), true);
  await page.waitForSelector('#perf[data-state="done"]', { timeout: 120000 });
  assert.equal(await page.isHidden('#perf-progress'), true);
  const rows = await page.$$eval('#perf-table tr', (trs) => trs.map((tr) => ({ id: tr.dataset.impl, ms: Number(tr.dataset.ms), text: tr.textContent })));
  // This page is cross-origin isolated: SIMD128 on 1 thread and on all of them (threaded build).
  const threads = await page.evaluate(() => window.__maskattnDemo.backend.threads);
  assert.deepEqual(rows.map((r) => r.id), threads > 1 ? ['simd', 'threads', 'scalar', 'ort', 'js'] : ['simd', 'scalar', 'ort', 'js']);
  for (const r of rows) assert.ok(r.ms > 0 && Number.isFinite(r.ms), `${r.id}: ${r.ms} ms`);
  assert.match(await page.locator('#perf-summary').textContent(), /SIMD128 is [\d.]+× faster than plain JavaScript and [\d.]+× faster than the scalar build/);
  const result = await page.evaluate(() => window.__maskattnDemo.perf);
  for (const r of result.results) assert.ok(r.maxDiff < 1e-4, `${r.id} agrees with SIMD128 (max diff ${r.maxDiff})`);
  await page.close();
  assert.deepEqual(problems.slice(before), []);
});

test('desktop and phone screenshots; no sideways scrolling on a phone', async () => {
  // Screenshots are taken even when the page shows an error (they help to see why), then checked.
  const before = problems.length;
  const page = await openDemo(desktop, { check: false });
  const ready = await page.evaluate(() => window.__maskattnDemo?.ready === true);
  if (ready) {
    await page.selectOption('#perf-preset', '1x4x128x64');
    await page.click('#perf-run');
    await page.waitForSelector('#perf[data-state="done"]', { timeout: 120000 });
    const p = await cellPoint(page, 'weights-canvas', 'weights', 3, 2);
    await page.mouse.move(p.x, p.y);
    await page.waitForSelector('#weights-tooltip:not([hidden])');
  }
  await page.screenshot({ path: path.join(RESULTS, 'demo-desktop.png'), fullPage: true });
  await page.screenshot({ path: path.join(RESULTS, 'demo-desktop-viewport.png') });
  await assertNoPageError(page);
  await page.close();

  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  try {
    const small = await openDemo(phone, { check: false });
    if (await small.evaluate(() => window.__maskattnDemo?.ready === true)) {
      const g = await small.evaluate(() => window.__maskattnDemo.heatmaps.weights);
      await small.evaluate(() => document.getElementById('fig-weights').scrollIntoView({ block: 'start' }));
      const box = await small.locator('#weights-canvas').boundingBox();
      const s = box.width / g.width;
      await small.tap('#weights-canvas', { position: { x: (g.x0 + 1.5 * g.cell) * s, y: (g.y0 + 2.5 * g.cell) * s } });
      // On a phone the readout under the map says what a tapped cell holds (no tooltip over the rows).
      await small.waitForFunction(() => /query 2 .* key 1 /.test(document.getElementById('weights-readout').textContent));
      assert.equal(await small.evaluate(() => document.getElementById('weights-tooltip').hidden), true);
    }
    await small.screenshot({ path: path.join(RESULTS, 'demo-phone.png'), fullPage: true });
    await small.screenshot({ path: path.join(RESULTS, 'demo-phone-viewport.png') });
    await assertNoPageError(small);
    const width = await small.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `page is ${width}px wide on a 390px phone`);
    assert.equal((await view(small)).Lk, 6);
    await small.close();
  } finally {
    await phone.close();
  }
  assert.deepEqual(problems.slice(before), []);
});

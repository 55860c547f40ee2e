// maskattn through a bundler in a real browser: Vite builds tests/browser/bundler-app (a page that
// imports 'maskattn' by name), a tiny HTTP server on 127.0.0.1 serves the built files, headless
// Chromium (playwright-core, /usr/bin/chromium) loads the page, which runs causal GQA attention
// and writes the numbers into the DOM. The test checks them against the float64 reference, and
// that the page had no console errors, no failed requests, and ran the SIMD128 build: the relaxed
// one on one thread as served plainly, the relaxed threaded one (Web Workers started from the
// bundled worker script) when served cross-origin isolated (COOP/COEP headers).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, statSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { launchChromium, watchProblems } from './chromium.mjs';
import { referenceAttention, mismatch } from '../js/reference.mjs';
import { BUILDS } from '../../js/builds.js';

const appDir = fileURLToPath(new URL('./bundler-app/', import.meta.url));
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };

let outDir;
let server;
let origin;
let isolatedServer;
let isolatedOrigin;
let browser;
const served = [];        // { url, status, type, isolated }
const buildWarnings = [];

before(async () => {
  outDir = mkdtempSync(path.join(tmpdir(), 'maskattn-vite-'));
  await build({
    configFile: path.join(appDir, 'vite.config.js'),
    build: { outDir },
    customLogger: {
      info() {}, clearScreen() {}, hasErrorLogged: () => false, hasWarned: false,
      warn(msg) { buildWarnings.push(msg); }, warnOnce(msg) { buildWarnings.push(msg); },
      error(msg) { buildWarnings.push(`error: ${msg}`); },
    },
  });
  // Static files of the build, nothing else; every request is recorded.
  const serve = (isolated) => (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const rel = decodeURIComponent(url.pathname === '/' ? '/index.html' : url.pathname);
    const file = path.join(outDir, path.normalize(rel));
    let status = 200;
    let body = null;
    if (!file.startsWith(outDir + path.sep) || !statSync(file, { throwIfNoEntry: false })?.isFile()) status = 404;
    else body = readFileSync(file);
    const type = TYPES[path.extname(file)] ?? 'application/octet-stream';
    served.push({ url: url.pathname, status, type, isolated });
    const isolation = isolated ? { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' } : {};
    res.writeHead(status, { 'Content-Type': status === 200 ? type : 'text/plain', 'Cache-Control': 'no-store', ...isolation });
    res.end(body ?? 'not found');
  };
  server = createServer(serve(false));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${server.address().port}`;
  isolatedServer = createServer(serve(true));
  await new Promise((resolve) => isolatedServer.listen(0, '127.0.0.1', resolve));
  isolatedOrigin = `http://127.0.0.1:${isolatedServer.address().port}`;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve()));
  await new Promise((resolve) => (isolatedServer ? isolatedServer.close(resolve) : resolve()));
  if (outDir) rmSync(outDir, { recursive: true, force: true });
});

test('Vite bundles the package: every build emitted as assets (threaded builds: their worker scripts too)', () => {
  const assets = readdirSync(path.join(outDir, 'assets'));
  console.log(`vite output: ${assets.join(', ')}`);
  if (buildWarnings.length) console.log(`vite warnings:\n  ${buildWarnings.join('\n  ')}`);
  for (const { name, threads } of BUILDS) {  // every build of the table (js/builds.js)
    for (const ext of ['wasm', 'mjs'])
      assert.ok(assets.some((a) => new RegExp(`^${name}-[^.]+\\.${ext}$`).test(a)), `${name} .${ext} emitted`);
    if (threads)
      assert.ok(assets.some((a) => new RegExp(`^${name}\\.worker-[^.]+\\.js$`).test(a)), `${name}.worker.js emitted (not inlined)`);
  }
  // The Node-only CommonJS glue is reached through a computed path: bundlers for the web leave it out.
  assert.ok(!assets.some((a) => a.includes('.node')), 'no Node glue in a web bundle');
  assert.ok(!buildWarnings.some((w) => w.startsWith('error:')), 'no build errors');
});

test('the bundled page runs causal attention in Chromium: right numbers, SIMD128, no errors', async () => {
  const page = await browser.newPage();
  const problems = [];
  page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`); });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()} ${req.failure()?.errorText}`));
  page.on('response', (res) => { if (res.status() >= 400) problems.push(`HTTP ${res.status()}: ${res.url()}`); });
  try {
    await page.goto(`${origin}/`, { waitUntil: 'load' });
    await page.waitForFunction(() => document.getElementById('status')?.textContent !== 'loading', null, { timeout: 30_000 });
    const status = await page.textContent('#status');
    assert.equal(status, 'done', `page status: ${status}; ${problems.join('; ')}`);
    const r = JSON.parse(await page.textContent('#result'));

    assert.deepEqual(problems, [], 'no console errors, page errors or failed requests');
    assert.equal(r.backend.simd, true, 'Chromium has SIMD128: the SIMD build runs');
    assert.equal(r.backend.arch, 'simd128');
    assert.equal(r.backend.lanes, 4);
    assert.equal(r.isolated, false);
    assert.equal(r.backend.build, 'maskattn-simd-relaxed', 'not isolated: the single-threaded (relaxed) build');
    assert.equal(r.threadsUsed, 1);

    const t = (x) => ({ data: Float32Array.from(x.data), shape: x.shape });
    const ref = referenceAttention(t(r.inputs.q), t(r.inputs.k), t(r.inputs.v), r.options);
    assert.deepEqual(r.output.shape, [1, 2, 5, 8]);
    // 1e-5: fp32 kernel vs f64 reference on unit-scale inputs (the contract's bound).
    assert.equal(mismatch(r.output.data, ref.output.data, { atol: 1e-5 }), null, 'output');
    assert.equal(mismatch(r.lse, ref.lse.data, { atol: 1e-5 }), null, 'lse');
    // Causal bottom-right with Lq 5 < Lk 7: row 0 attends keys 0..2, never key 6.
    assert.ok(ref.weights.data[6] === 0 && ref.weights.data[2] > 0);

    // Only the SIMD build was fetched, with the right content types.
    const wasm = served.filter((s) => s.url.endsWith('.wasm') && !s.isolated);
    assert.equal(wasm.length, 1, `one wasm fetched: ${JSON.stringify(wasm)}`);
    assert.match(wasm[0].url, /maskattn-simd/);
    assert.equal(wasm[0].type, 'application/wasm');
    for (const s of served.filter((x) => /\.m?js$/.test(x.url))) assert.equal(s.type, 'text/javascript');
    assert.ok(served.every((s) => s.status === 200), `every request served: ${JSON.stringify(served)}`);
  } finally {
    await page.close();
  }
});

test('served cross-origin isolated, the bundled page runs the threaded build on 2 threads', async () => {
  const page = await browser.newPage();
  const problems = [];
  await watchProblems(page, problems);
  try {
    await page.goto(`${isolatedOrigin}/`, { waitUntil: 'load' });
    await page.waitForFunction(() => document.getElementById('status')?.textContent !== 'loading', null, { timeout: 30_000 });
    const status = await page.textContent('#status');
    assert.equal(status, 'done', `page status: ${status}; ${problems.join('; ')}`);
    const r = JSON.parse(await page.textContent('#result'));
    assert.deepEqual(problems, [], 'no console errors or warnings, page errors or failed requests');
    assert.equal(r.isolated, true);
    const cores = Math.min(await page.evaluate(() => navigator.hardwareConcurrency), 16);
    assert.equal(r.backend.build, cores > 1 ? 'maskattn-simd-relaxed-threads' : 'maskattn-simd-relaxed');
    assert.equal(r.backend.threads, cores);
    if (cores > 1) {
      assert.equal(r.threadsUsed, 2, 'the bundled workers ran');
      assert.ok(served.some((s) => s.isolated && /maskattn-simd-relaxed-threads\.worker-[^.]+\.js$/.test(s.url)), 'the worker script was fetched');
    }
    assert.equal(r.sameAcrossThreads, true);
    const t = (x) => ({ data: Float32Array.from(x.data), shape: x.shape });
    const ref = referenceAttention(t(r.inputs.q), t(r.inputs.k), t(r.inputs.v), r.options);
    assert.equal(mismatch(r.output.data, ref.output.data, { atol: 1e-5 }), null, 'output');
  } finally {
    await page.close();
  }
});

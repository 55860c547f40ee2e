// Real-browser test of the demo's KV cache panel (web/decode.js, section #decode): headless Debian
// Chromium driven by playwright-core, against scripts/serve.mjs on 127.0.0.1 (ephemeral port).
// Steps through generation token by token, with a ragged batch, a sliding-window ring, float16, q8 and q4,
// and checks what is drawn against the cache's lengths. Screenshots: test-results/demo-decode*.png.
//
//   node --test tests/browser/decode.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { launchChromium, watchProblems } from './chromium.mjs';
import { start } from '../../scripts/serve.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const RESULTS = path.join(ROOT, 'test-results');

// The panel's fixed problem (web/decode.js): prompts of 4 and 2 tokens, texts of 16 and 5 tokens,
// 2 query heads sharing 1 KV head.
const PROMPT = [4, 2];
const TEXT = [16, 5];
const HQ = 2;

let server;
let browser;
let context;
const problems = [];  // console errors, page errors, failed requests, CSP violations, foreign requests

before(async () => {
  server = await start({ port: 0 });
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await mkdir(RESULTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await server?.close();
});

async function openDemo(ctx = context) {
  const page = await ctx.newPage();
  const origin = new URL(server.url).origin;
  await watchProblems(page, problems, { origin });
  await page.goto(server.url);
  await page.waitForFunction(() => window.__maskattnDemo?.ready === true || !document.getElementById('error').hidden, null, { timeout: 20000 });
  const error = await page.evaluate(() => (document.getElementById('error').hidden ? null : document.getElementById('error').textContent));
  assert.equal(error, null, `the page shows an error: ${error}`);
  return page;
}

const state = (page) => page.evaluate(() => JSON.parse(document.getElementById('decode-json').textContent));

/** Does something that redraws the panel, and waits for the redraw. */
async function act(page, action) {
  const n = await page.evaluate(() => window.__maskattnDemo.decodeRenders ?? 0);
  await action();
  await page.waitForFunction((k) => (window.__maskattnDemo.decodeRenders ?? 0) > k, n, { timeout: 5000 });
  return state(page);
}

async function decodeError(page) {
  return page.evaluate(() => (document.getElementById('decode-error').hidden ? null : document.getElementById('decode-error').textContent));
}

/** The lengths the page shows in text (the fill rows), per sequence. */
async function shownLengths(page) {
  return page.$$eval('#decode-fills .fill-text', (spans) => spans.map((s) => Number(/length (\d+)/.exec(s.textContent)?.[1])));
}

const expectedLengths = (steps, B = 2) => PROMPT.slice(0, B).map((p, b) => Math.min(p + steps, TEXT[b]));

test('decode panel: 5 tokens of a ragged batch, lengths and weights strip follow the cache', async () => {
  const before = problems.length;
  const page = await openDemo();
  await page.locator('#decode').scrollIntoViewIfNeeded();
  let s = await state(page);
  assert.equal(s.step, 0);
  assert.deepEqual(s.lengths, PROMPT, 'the prompts went in with counts [4, 2]');
  assert.deepEqual(await shownLengths(page), PROMPT);
  assert.match(await page.locator('#decode-status').textContent(), /^Prompt: appended sequence 1 4 prompt tokens, sequence 2 2 prompt tokens\. cache\.lengths = \[4, 2\]/);

  for (let step = 1; step <= 5; step++) {
    s = await act(page, () => page.click('#decode-next'));
    assert.equal(s.step, step);
    const want = expectedLengths(step);
    assert.deepEqual(s.lengths, want, `cache.lengths after step ${step}`);
    assert.deepEqual(await shownLengths(page), want, `lengths shown after step ${step}`);
    assert.match(await page.locator('#decode-status').textContent(), new RegExp(`cache\\.lengths = \\[${want.join(', ')}\\]`));
  }
  // After 5 steps: sequence 1 holds 9 positions, sequence 2 finished at its 5 tokens (it took
  // counts 0 on step 4 and 5, and its query row is masked with queryLengths 0).
  assert.deepEqual(s.lengths, [9, 5]);
  assert.deepEqual(s.active, [true, false]);
  assert.equal(await decodeError(page), null);
  // The strip: one row per (sequence, query head), one column per position of the longest sequence.
  assert.deepEqual(s.weightsShape, [2, HQ, 1, 9]);
  assert.equal(s.rows, 2 * HQ);
  assert.equal(s.cols, 9);
  const canvas = page.locator('#decode-weights-canvas');
  assert.equal(await canvas.getAttribute('data-rows'), String(2 * HQ));
  assert.equal(await canvas.getAttribute('data-cols'), '9');
  const g = s.heatmaps.weights;
  assert.equal(g.rows * g.cols, 36, 'the strip has 4 x 9 cells');
  // Weights: sequence 1's rows sum to 1 over its 9 positions; sequence 2's (finished) rows are zero.
  for (let h = 0; h < HQ; h++) {
    const row = s.weights[h];
    assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-5, `sequence 1, head ${h + 1} sums to 1`);
    assert.ok(row.every((w) => w > 0), 'no window: every cached position gets weight');
    assert.ok(s.weights[HQ + h].every((w) => w === 0), 'the finished sequence attends nothing');
  }
  assert.notDeepEqual(s.weights[0], s.weights[1], 'the two query heads weigh the shared K/V differently');
  assert.deepEqual(s.kinds[1].slice(5), ['none', 'none', 'none', 'none'], 'positions 5..8 do not exist in sequence 2');
  // The cache's fill and slots: no window, capacity = the longest text.
  assert.deepEqual(s.held, [9, 5]);
  assert.equal(s.capacity, TEXT[0]);
  assert.deepEqual(s.slots[0], [...Array.from({ length: 9 }, (_, p) => p), ...Array(7).fill(null)]);
  assert.deepEqual(await page.$$eval('#decode-fills meter', (m) => m.map((x) => [x.value, x.max])), [[9, 16], [5, 16]]);
  assert.equal(s.byteLength, 2 * 1 * 16 * (8 + 8) * 4);
  assert.match(await page.locator('#decode-call').textContent(), /cache\.attend\(q, \{ returnWeights: true, queryLengths: \[1, 0\] \}\)/);

  await page.locator('#decode').screenshot({ path: path.join(RESULTS, 'demo-decode.png') });
  assert.deepEqual(await page.evaluate(() => window.__cspViolations), []);
  await page.close();
  assert.deepEqual(problems.slice(before), []);
});

test('decode panel: a sliding window makes the cache a ring; float16 halves its bytes; play and reset', async () => {
  const before = problems.length;
  const page = await openDemo();
  await page.locator('#decode').scrollIntoViewIfNeeded();
  // Window 4, ring of 6 slots (the panel's default: W + 2).
  let s = await act(page, () => page.check('#decode-window'));
  assert.equal(s.window, 4);
  assert.equal(s.capacity, 6);
  assert.equal(await page.inputValue('#decode-capacity'), '6');
  for (let n = 0; n < 5; n++) s = await act(page, () => page.click('#decode-next'));
  assert.deepEqual(s.lengths, [9, 5], 'lengths stay absolute (tokens seen)');
  assert.deepEqual(s.held, [6, 5], 'the ring holds at most 6');
  assert.deepEqual(s.cols, 9);
  // Sequence 1 at length 9: positions 0-2 overwritten, 3-4 held but outside the window, 5-8 attended.
  assert.deepEqual(s.kinds[0], ['gone', 'gone', 'gone', 'outside', 'outside', 'attended', 'attended', 'attended', 'attended']);
  assert.deepEqual(s.slots[0], [6, 7, 8, 3, 4, 5], 'position p sits in slot p mod 6');
  for (let h = 0; h < HQ; h++) {
    assert.deepEqual(s.weights[h].slice(0, 5), [0, 0, 0, 0, 0]);
    assert.ok(Math.abs(s.weights[h].reduce((a, b) => a + b, 0) - 1) < 1e-5);
  }
  assert.match(await page.locator('#decode-fills').textContent(), /length 9 · holds 6 of 6 slots \(ring wrapped 1×\)/);
  const f32Bytes = s.byteLength;
  await page.locator('#decode').screenshot({ path: path.join(RESULTS, 'demo-decode-window.png') });

  // float16: the same picture up to rounding, half the bytes; the steps taken are replayed, not lost.
  s = await act(page, () => page.selectOption('#decode-dtype', 'float16'));
  assert.equal(s.step, 5);
  assert.equal(s.byteLength, f32Bytes / 2);
  assert.deepEqual(s.lengths, [9, 5]);
  assert.deepEqual(s.slots[0], [6, 7, 8, 3, 4, 5]);

  // One sequence only; play runs to the end of the text (12 steps), then stops by itself.
  s = await act(page, () => page.uncheck('#decode-ragged'));
  assert.equal(s.B, 1);
  assert.deepEqual(s.lengths, [4]);
  await page.click('#decode-play');
  assert.equal(await page.getAttribute('#decode-play', 'aria-pressed'), 'true');
  await page.waitForFunction(() => window.__maskattnDemo.decode?.done === true, null, { timeout: 20000 });
  s = await state(page);
  assert.deepEqual(s.lengths, [16]);
  assert.equal(s.step, 12);
  assert.equal(await page.getAttribute('#decode-play', 'aria-pressed'), 'false');
  assert.equal(await page.isDisabled('#decode-next'), true);
  assert.match(await page.locator('#decode-status').textContent(), /End of the text/);
  s = await act(page, () => page.click('#decode-reset'));
  assert.equal(s.step, 0);
  assert.equal(await page.isEnabled('#decode-next'), true);

  // The scalar build draws it too (the session restarts on the new build).
  s = await act(page, () => page.selectOption('#build', 'scalar'));
  assert.match(await page.locator('#decode-status').textContent(), /Computed by scalar/);
  assert.equal(await decodeError(page), null);
  await page.close();
  assert.deepEqual(problems.slice(before), []);
});

test('decode panel: RoPE in the cache matches rotating Q and K in JavaScript (both layouts, a ring, float16)', async () => {
  const before = problems.length;
  const page = await openDemo();
  await page.locator('#decode').scrollIntoViewIfNeeded();
  for (let n = 0; n < 3; n++) await act(page, () => page.click('#decode-next'));
  const plain = await state(page);
  assert.equal(plain.rope, null);
  assert.equal(await page.isDisabled('#decode-rope-theta'), true);
  assert.equal(await page.isHidden('#decode-rope-check'), true);

  // RoPE on: the steps taken are replayed into a cache with rope; the weights now depend on position.
  let s = await act(page, () => page.check('#decode-rope'));
  assert.deepEqual(s.rope, { theta: 10000, layout: 'halves' });
  assert.equal(s.step, 3);
  assert.deepEqual(s.lengths, plain.lengths);
  assert.ok(s.ropeError.weights < 1e-5 && s.ropeError.output < 1e-5, JSON.stringify(s.ropeError));
  assert.notDeepEqual(s.weights[0], plain.weights[0], 'rotated keys and query change the weights');
  assert.ok(Math.abs(s.weights[0].reduce((a, b) => a + b, 0) - 1) < 1e-5);
  assert.match(await page.locator('#decode-rope-check').textContent(), /^RoPE: the cache rotated each key by its position .* weights (identical|within \S+), output (identical|within \S+)\.$/);
  assert.match(await page.locator('#decode-status').textContent(), /float32, RoPE θ 10000 \(halves\)/);
  assert.match(await page.locator('#decode-call').textContent(), /rope: \{ theta: 10000, layout: 'halves' \}/);

  // GPT-J pairs, another base, a ring (keys keep their absolute positions) and float16.
  s = await act(page, () => page.selectOption('#decode-rope-layout', 'interleaved'));
  assert.equal(s.rope.layout, 'interleaved');
  assert.ok(s.ropeError.weights < 1e-5, JSON.stringify(s.ropeError));
  await page.fill('#decode-rope-theta', '500000');
  s = await act(page, () => page.dispatchEvent('#decode-rope-theta', 'change'));
  assert.equal(s.rope.theta, 500000);
  s = await act(page, () => page.check('#decode-window'));
  for (let n = 0; n < 3; n++) s = await act(page, () => page.click('#decode-next'));
  assert.deepEqual(s.lengths, [10, 5]);
  assert.ok(s.held[0] < s.lengths[0], 'the ring wrapped');
  assert.ok(s.ropeError.weights < 1e-5, JSON.stringify(s.ropeError));
  s = await act(page, () => page.selectOption('#decode-dtype', 'float16'));
  assert.ok(s.ropeError.weights < 1e-5, 'the check compares float32 caches');
  assert.match(await page.locator('#decode-rope-check').textContent(), /both float32/);
  await page.locator('#decode').screenshot({ path: path.join(RESULTS, 'demo-decode-rope.png') });

  // A base that is not a number > 0 falls back to 10000 and says so.
  await page.fill('#decode-rope-theta', '-3');
  s = await act(page, () => page.dispatchEvent('#decode-rope-theta', 'change'));
  assert.equal(s.rope.theta, 10000);
  assert.match(await page.locator('#decode-notice').textContent(), /θ -3 is not a number > 0: using 10000/);
  s = await act(page, () => page.uncheck('#decode-rope'));
  assert.equal(s.rope, null);
  assert.equal(await decodeError(page), null);
  await page.close();
  assert.deepEqual(problems.slice(before), []);
});

test('branching panel: forks share pages, a draft tree is verified and its accepted path kept', async () => {
  const before = problems.length;
  const page = await openDemo();
  await page.locator('#branching').scrollIntoViewIfNeeded();
  const branching = () => page.evaluate(() => JSON.parse(document.getElementById('branching-json').textContent));
  let s = await branching();
  // At load: the prompt in sequence 1 only, the draft not verified (the buttons then change what shows).
  assert.equal(s.fork.stage, 'prompt');
  assert.deepEqual(s.fork.lengths, [5, 0, 0]);
  assert.deepEqual(s.fork.tables.map((t) => t.filter((p) => p >= 0).length), [3, 0, 0]);
  assert.equal(s.tree.verified, false);
  assert.equal(s.tree.weights, null);
  assert.match(await page.locator('#branching-status').textContent(), /Press “Fork the prompt”.*Press “Verify the draft tree”/);
  for (const button of ['#fork-run', '#tree-verify']) {
    const k = await page.evaluate(() => window.__maskattnDemo.branchingRenders);
    await page.click(button);
    await page.waitForFunction((r) => window.__maskattnDemo.branchingRenders > r, k);
  }
  s = await branching();
  assert.equal(s.fork.stage, 'forked');
  assert.equal(s.tree.verified, true);
  assert.doesNotMatch(await page.locator('#branching-status').textContent(), /Press/);
  // 'the cat sat on the' (5 tokens) in pages of 2, forked twice, then 3, 2 and 3 tokens of each
  // sequence's own: pages 0 and 1 stay shared by all three; page 2 (positions 4-5) was shared when
  // the forks first wrote position 5, so two of them copied it (pages 3 and 4) and the last kept it.
  assert.deepEqual(s.fork.lengths, [8, 7, 8]);
  assert.deepEqual(s.fork.tables.map((t) => t.slice(0, 4)), [[0, 1, 3, 5], [0, 1, 4, 6], [0, 1, 2, 7]]);
  assert.ok(s.fork.tables.every((t) => t.slice(4).every((p) => p === -1)));
  assert.equal(s.fork.afterFork, s.fork.promptBytes, 'forking costs no K/V bytes');
  assert.equal(s.fork.byteLength, 8 * s.fork.pageBytes);
  assert.equal(s.fork.unshared, 12 * s.fork.pageBytes);
  // The tree [-1, -1, 0, 0, 1, 2]: every node sees the 5 prompt positions; among the nodes, only
  // its ancestors and itself (weights exactly 0 elsewhere), and each row sums to 1.
  const tree = [-1, -1, 0, 0, 1, 2];
  const sees = (i, t) => { for (let n = i; n >= 0; n = tree[n]) if (n === t) return true; return false; };
  assert.equal(s.tree.Lk, 11);
  s.tree.weights.forEach((row, i) => {
    row.forEach((w, j) => {
      if (j >= 5 && !sees(i, j - 5)) assert.equal(w, 0, `node ${i}, node ${j - 5}: another branch`);
      else assert.ok(w > 0, `node ${i}, position ${j}`);
    });
    assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-5);
  });
  assert.deepEqual(s.paths, [[0, 2, 5], [0, 3], [1, 4]]);
  // Keep the path 'mat and then': the cache continues from 5 + 3 positions.
  const n = await page.evaluate(() => window.__maskattnDemo.branchingRenders);
  await page.click('#tree-keep');
  await page.waitForFunction((k) => window.__maskattnDemo.branchingRenders > k, n);
  s = await branching();
  assert.deepEqual(s.tree.kept, [0, 2, 5]);
  assert.deepEqual(s.tree.lengthsAfter, [8]);
  assert.equal(s.tree.heldRows, 8);
  const m = await page.evaluate(() => window.__maskattnDemo.branchingRenders);
  await page.selectOption('#tree-path', '2');
  await page.waitForFunction((k) => window.__maskattnDemo.branchingRenders > k, m);
  s = await branching();
  assert.deepEqual(s.tree.kept, [1, 4]);
  assert.deepEqual(s.tree.lengthsAfter, [7]);
  assert.match(await page.locator('#branching-status').textContent(), /Kept “sofa \.”: cache\.lengths = \[7\]/);
  assert.match(await page.locator('#branching-call').textContent(), /draft\.keep\(0, tree, \[1, 4\]\)/);
  assert.equal(await page.evaluate(() => document.getElementById('branching-error').hidden), true);
  await page.locator('#branching').screenshot({ path: path.join(RESULTS, 'demo-branching.png') });
  assert.deepEqual(await page.evaluate(() => window.__cspViolations), []);
  await page.close();
  assert.deepEqual(problems.slice(before), []);
});

test('decode panel: q8, q4, float16 and bfloat16 caches show their memory and their error against a float32 cache', async () => {
  const before = problems.length;
  const page = await openDemo();
  await page.locator('#decode').scrollIntoViewIfNeeded();
  let s = await state(page);
  assert.equal(s.dtype, 'float32');
  assert.equal(s.error, 0);
  const f32Bytes = s.byteLength;
  assert.equal(s.float32ByteLength, f32Bytes);
  for (const [dtype, blockBytes, bound] of [['q8', 36, 0.02], ['q4', 20, 0.15], ['float16', null, 0.002], ['bfloat16', null, 0.008]]) {
    const stepsBefore = s.step;
    s = await act(page, () => page.selectOption('#decode-dtype', dtype));
    assert.equal(s.dtype, dtype);
    assert.equal(s.step, stepsBefore, 'a new dtype keeps the steps taken');
    s = await act(page, () => page.click('#decode-reset'));
    assert.equal(s.step, 0);
    for (let n = 0; n < 4; n++) s = await act(page, () => page.click('#decode-next'));
    assert.deepEqual(s.lengths, expectedLengths(4));
    // One block of 32 per K or V row at this head size (8): 36 (q8) or 20 (q4) bytes a row.
    const rows = 2 * 1 * 16 * 2;  // batch x kvHeads x capacity x (K and V)
    assert.equal(s.byteLength, blockBytes ? rows * blockBytes : f32Bytes / 2);
    assert.ok(s.error > 0, `${dtype}: a rounded cache moves the output a little`);
    assert.ok(s.error <= bound * s.maxV, `${dtype}: error ${s.error} within ${bound} of max |V| ${s.maxV}`);
    const memory = await page.locator('#decode-memory').textContent();
    assert.match(memory, new RegExp(`Memory held: ${s.byteLength} bytes`));
    assert.match(memory, /Against a float32 cache fed the same rows, the output moves by at most/);
    for (let h = 0; h < HQ; h++) assert.ok(Math.abs(s.weights[h].reduce((a, b) => a + b, 0) - 1) < 1e-5, 'weights still sum to 1');
  }
  await page.locator('#decode').screenshot({ path: path.join(RESULTS, 'demo-decode-q4.png') });
  assert.equal(await decodeError(page), null);
  await page.close();
  assert.deepEqual(problems.slice(before), []);
});

test('decode panel: labelled controls, keyboard readout, no sideways scrolling on a phone', async () => {
  const before = problems.length;
  const page = await openDemo();
  const unlabeled = await page.evaluate(() => [...document.querySelectorAll('#decode input, #decode select, #decode meter')]
    .filter((c) => c.labels.length === 0 && !c.getAttribute('aria-label')).map((c) => c.id));
  assert.deepEqual(unlabeled, []);
  await act(page, () => page.click('#decode-next'));
  await page.focus('#decode-weights-canvas');
  for (const k of ['Home', 'ArrowRight', 'ArrowRight']) await page.keyboard.press(k);
  assert.match(await page.locator('#decode-weights-readout').textContent(), /^sequence 1, head 1 → position 2 “sat” · weight /);
  await page.close();

  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  try {
    const small = await openDemo(phone);
    for (let n = 0; n < 5; n++) await act(small, () => small.click('#decode-next'));
    assert.ok(await small.locator('#decode-call').isVisible(), 'the code panel is open');
    await small.locator('#decode').screenshot({ path: path.join(RESULTS, 'demo-decode-phone.png') });
    const width = await small.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `page is ${width}px wide on a 390px phone`);
    await small.close();
  } finally {
    await phone.close();
  }
  assert.deepEqual(problems.slice(before), []);
});

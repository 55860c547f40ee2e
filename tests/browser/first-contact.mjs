// The demo as a first-time visitor meets it, at 1440x900 and on a 390x844 phone: the padded
// batch's real words attend, examples leave no stale rule, every adjustment of the input is said,
// no text in the maps overlaps, the clicked cell's outline follows the click, the code panels are
// open and copy programs that run in Node (against this checkout as the 'maskattn' package) and
// print the page's numbers, the speed table says it is running, the start strip links every doc.
// The second pass: each guide lands on the picture that proves it and its callout names
// the sentence on screen, every map fits its box, the output map numbers its negative cells as it
// numbers the others.
// Screenshots: test-results/first-contact-*.png.
//
// The tests of one size each run from their own file (first-contact-desktop.test.mjs and
// first-contact-phone.test.mjs set globalThis.maskattnFirstContactSizes, then import this), so the
// test runner runs the two side by side: most of their time is waiting on the page.
//
//   node --test tests/browser/first-contact-desktop.test.mjs tests/browser/first-contact-phone.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdir, mkdtemp, symlink, writeFile, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { launchChromium, watchProblems } from './chromium.mjs';
import { start } from '../../scripts/serve.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const RESULTS = path.join(ROOT, 'test-results');
const SIZES = {
  desktop: { viewport: { width: 1440, height: 900 } },
  phone: { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true },
};
// The sizes this file's importer runs (both when imported without a choice); the desktop-only tests
// run with the desktop.
const RUN_SIZES = globalThis.maskattnFirstContactSizes ?? Object.keys(SIZES);
const desktopTest = RUN_SIZES.includes('desktop') ? test : () => {};

let server;
let browser;
let project;          // a scratch project whose node_modules/maskattn is this checkout
let packs;            // the folder the server offers the packed package from (as npm start packs it)
const problems = [];

before(async () => {
  packs = await mkdtemp(path.join(tmpdir(), 'maskattn-pack-'));
  execFileSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', packs], { cwd: ROOT, encoding: 'utf8' });
  server = await start({ port: 0, packDir: packs });
  browser = await launchChromium();
  await mkdir(RESULTS, { recursive: true });
  project = await mkdtemp(path.join(tmpdir(), 'maskattn-snippets-'));
  await mkdir(path.join(project, 'node_modules'));
  await symlink(ROOT, path.join(project, 'node_modules', 'maskattn'), 'dir');
  await writeFile(path.join(project, 'package.json'), JSON.stringify({ name: 'snippets', private: true, type: 'module' }));
});

after(async () => {
  await browser?.close();
  await server?.close();
  if (project) await rm(project, { recursive: true, force: true });
  if (packs) await rm(packs, { recursive: true, force: true });
});

async function open(size) {
  const context = await browser.newContext(SIZES[size]);
  const origin = new URL(server.url).origin;
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  const page = await context.newPage();
  await watchProblems(page, problems, { origin });
  await page.goto(server.url);
  await page.waitForFunction(() => window.__maskattnDemo?.ready === true || !document.getElementById('error').hidden, null, { timeout: 30000 });
  assert.equal(await page.evaluate(() => document.getElementById('error').hidden), true, 'the page shows no error');
  return { page, context };
}

const view = (page) => page.evaluate(() => JSON.parse(document.getElementById('weights-json').textContent));
const settle = (page) => page.evaluate(() => new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok))));

/** Runs an action and waits for the main panel to draw again. */
async function act(page, action) {
  const n = await page.evaluate(() => window.__maskattnDemo.renders);
  await action();
  await page.waitForFunction((k) => window.__maskattnDemo.renders > k, n, { timeout: 5000 });
  await settle(page);
  return view(page);
}
const typeText = (page, text) => act(page, () => page.fill('#sentences', text));
const checked = (page, id) => page.evaluate((i) => document.getElementById(i).checked, id);
const notice = (page) => page.evaluate(() => { const n = document.getElementById('notice'); return n.hidden ? '' : n.textContent; });

/** Runs a copied program in the scratch project; returns what it printed. */
async function runSnippet(code, name) {
  const file = path.join(project, `${name}.mjs`);
  await writeFile(file, code);
  return execFileSync(process.execPath, [file], { cwd: project, encoding: 'utf8', timeout: 60000 });
}

/** Clicks a panel's Copy button and returns the clipboard, checked against the panel's text. */
async function copy(page, preId) {
  const button = page.locator(`button.copy[data-copy="${preId}"]`);
  await button.scrollIntoViewIfNeeded();
  await button.click();
  await page.waitForFunction((id) => document.querySelector(`button.copy[data-copy="${id}"]`).dataset.copied === 'true', preId);
  const text = await page.evaluate(() => navigator.clipboard.readText());
  assert.equal(text, await page.evaluate((id) => document.getElementById(id).textContent, preId), 'the clipboard holds the panel');
  return text;
}

const run = promisify(execFile);
const close = (a, b, tol = 2e-4) => Math.abs(Number(a) - Number(b)) <= tol;

for (const size of RUN_SIZES) {
  test(`${size}: the padded batch's real words each attend a key; the pitfall is a lesson with a one-click fix`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    await act(page, () => page.selectOption('#example', 'batch'));
    assert.equal(await checked(page, 'query-padding'), true);
    assert.equal(await checked(page, 'key-padding'), true);
    const realRowsAttend = async () => {
      const out = [];
      for (const b of ['0', '1', '2']) {
        const v = await act(page, () => page.selectOption('#sentence-pick', b));
        const realRows = v.rowLabels.map((t, i) => (t === '<pad>' ? -1 : i)).filter((i) => i >= 0);
        out.push(realRows.every((i) => v.mask[i].some((m) => m === 1)));
      }
      return out;
    };
    assert.deepEqual(await realRowsAttend(), [true, true, true], 'every real word of every sentence attends a key');
    assert.equal(await page.evaluate(() => window.__maskattnDemo.callout?.kind), 'lesson');
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-batch.png`) });
    // The pitfall, on purpose: the callout says what happened, and its button fixes it.
    await act(page, () => page.click('#callout-fix'));
    assert.equal(await checked(page, 'query-padding'), false);
    const v = await act(page, () => page.selectOption('#sentence-pick', '1'));
    // d(i) = i + 2 − 6: "Dogs" and "bark" (rows 0, 1) get no key while <pad> rows 4 and 5 do.
    assert.ok(v.fullyMaskedRows.includes(0) && v.fullyMaskedRows.includes(1), `"Dogs bark" has no key to attend without queryLengths (${v.fullyMaskedRows})`);
    assert.ok(!v.fullyMaskedRows.includes(4) && !v.fullyMaskedRows.includes(5), 'while its <pad> rows attend');
    const callout = await page.evaluate(() => window.__maskattnDemo.callout);
    assert.equal(callout.kind, 'pitfall');
    assert.match(callout.text, /“Dogs”, “bark” have no key to attend/);
    assert.ok(await page.locator('#callout').isVisible());
    await page.locator('#callout').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-pitfall.png`) });
    await act(page, () => page.click('#callout-fix'));
    assert.equal(await checked(page, 'query-padding'), true);
    assert.deepEqual(await realRowsAttend(), [true, true, true]);
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });

  test(`${size}: switching examples (or typing) leaves no stale rule`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    const first = await view(page);
    await act(page, () => page.selectOption('#example', 'packed'));
    assert.equal(await checked(page, 'segments'), true);
    let v = await act(page, () => page.selectOption('#example', 'sentence'));
    assert.equal(await checked(page, 'segments'), false, 'One sentence clears Segments');
    assert.deepEqual(v.mask, first.mask, 'the same picture as at load');
    // A typed text after Packed documents: the example's Segments rule goes, and the page says so.
    await act(page, () => page.selectOption('#example', 'packed'));
    v = await typeText(page, 'The cat sat on the mat');
    assert.equal(await checked(page, 'segments'), false, 'typing clears the example’s Segments');
    assert.deepEqual(v.mask, first.mask, '"The cat sat on the mat" is one document');
    assert.match(await notice(page), /Segments turned off/);
    // A rule the user set stays when they type; an example clears it.
    await act(page, () => page.check('#alibi'));
    await typeText(page, 'The cat sat');
    assert.equal(await checked(page, 'alibi'), true, 'the user’s own rule stays');
    await act(page, () => page.selectOption('#example', 'batch'));
    assert.equal(await checked(page, 'alibi'), false, 'an example starts from its own rules');
    // The presets of the start strip.
    await act(page, () => page.click('button.preset[data-preset="window"]'));
    assert.equal(await checked(page, 'window'), true);
    await act(page, () => page.selectOption('#example', 'sentence'));
    assert.equal(await checked(page, 'window'), false);
    await act(page, () => page.click('button.preset[data-preset="padding"]'));
    assert.equal(await page.inputValue('#example'), 'batch');
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });

  test(`${size}: every cut or adjusted input is said in a notice`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    assert.equal(await notice(page), '', 'no notice at load');
    const twenty = Array.from({ length: 20 }, (_, i) => `w${i}`).join(' ');
    let v = await typeText(page, twenty);
    assert.equal(v.Lk, 16);
    assert.match(await notice(page), /line 1 has 20 tokens: only its first 16 are used/);
    await page.locator('#notice').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-notice.png`) });
    v = await typeText(page, Array.from({ length: 8 }, (_, i) => `line ${i}`).join('\n'));
    assert.equal(v.B, 6);
    assert.match(await notice(page), /8 lines: only the first 6 are used/);
    const kept = await typeText(page, 'The cat sat');
    assert.equal(await notice(page), '');
    v = await typeText(page, '   \n  ');
    assert.match(await notice(page), /empty.*Nothing was computed/);
    assert.deepEqual(v.mask, kept.mask, 'no stand-in token is computed');
    await typeText(page, 'The cat sat');
    await act(page, () => page.fill('#seed', '-5'));
    assert.match(await notice(page), /seed -5 is not a whole number in 0 … 4294967295: using 0/);
    await act(page, () => page.fill('#seed', '42'));
    await act(page, () => page.check('#softcap'));
    await act(page, () => page.fill('#softcap-value', '0'));
    assert.match(await notice(page), /softcap c = 0 must be a number above 0: using 1/);
    await act(page, () => page.fill('#softcap-value', '2'));
    await act(page, () => page.check('#queries-decode'));
    await act(page, () => page.fill('#decode-n', '9'));
    assert.match(await notice(page), /decode queries 9 is more than the 3 tokens: using 3/);
    await act(page, () => page.fill('#decode-n', '2'));
    assert.equal(await notice(page), '', 'valid input again: no notice');
    // The KV cache panel says when it adjusts a typed window or capacity.
    await page.check('#decode-window');
    await page.fill('#decode-capacity', '40');
    await page.locator('#decode-capacity').blur();
    await page.waitForFunction(() => !document.getElementById('decode-notice').hidden);
    assert.match(await page.locator('#decode-notice').textContent(), /capacity 40 is not a whole number in 4…16: using 16/);
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });

  test(`${size}: no text in the maps overlaps, no label is cut, a wide map says it scrolls`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    const words = 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen';
    await typeText(page, words);
    await act(page, () => page.selectOption('#head-dim', '32'));
    const maps = await page.evaluate(() => window.__maskattnDemo.heatmaps);
    for (const [name, g] of Object.entries(maps)) {
      const boxes = g.texts;
      const overlaps = [];
      for (let a = 0; a < boxes.length; a++) {
        const A = boxes[a];
        if (A.cell) {
          const [x, y, c] = A.cell;
          if (A.x < x + 1 || A.x + A.w > x + c - 1) overlaps.push(`${name}: "${A.text}" leaves its cell`);
        }
        if (A.kind === 'col-rotated' && A.x + A.w > g.width + 0.5) overlaps.push(`${name}: label "${A.text}" runs off the canvas`);
        if (A.kind === 'col-rotated' && A.spacing < 11) overlaps.push(`${name}: rotated labels ${A.spacing.toFixed(1)}px apart, less than a line`);
        for (let b = a + 1; b < boxes.length; b++) {
          const B = boxes[b];
          if (A.kind === 'col-rotated' || B.kind === 'col-rotated') continue;  // diagonal bands, 45° apart from everything else
          if (A.x < B.x + B.w && B.x < A.x + A.w && A.y < B.y + B.h && B.y < A.y + A.h) overlaps.push(`${name}: "${A.text}" overlaps "${B.text}"`);
        }
      }
      assert.deepEqual(overlaps, [], `${name}: ${overlaps.length} overlaps`);
      if (name !== 'output') {
        const labels = boxes.filter((t) => t.kind.startsWith('col')).map((t) => t.text);
        assert.deepEqual(labels, words.split(' '), `${name}: every column label whole`);
      }
    }
    // The output map at D = 32 is wider than a phone: its box says it scrolls.
    const overflows = await page.evaluate(() => document.querySelector('#fig-output .map-box').classList.contains('overflows'));
    const wider = maps.output.width > maps.output.box;
    assert.equal(overflows, wider);
    if (size === 'phone') assert.ok(overflows, 'on a phone the output map scrolls, and says so');
    if (overflows) {
      // The "scroll →" tag is drawn under the map (in the box's bottom padding), not over its cells.
      const r = await page.evaluate(() => {
        const box = document.querySelector('#fig-output .map-box');
        const tag = getComputedStyle(box, '::after');
        return { boxBottom: box.getBoundingClientRect().bottom, tagHeight: parseFloat(tag.height), tagBottom: parseFloat(tag.bottom),
          canvasBottom: document.getElementById('output-canvas').getBoundingClientRect().bottom };
      });
      assert.ok(r.canvasBottom <= r.boxBottom - r.tagBottom - r.tagHeight + 0.5, `the scroll tag (${r.tagHeight}px at the box's bottom ${r.boxBottom}) sits under the map (${r.canvasBottom})`);
    }
    await page.locator('#fig-output').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-d32.png`) });
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });

  test(`${size}: the clicked cell is outlined at once; on a phone no tooltip covers rows`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    const g = await page.evaluate(() => window.__maskattnDemo.heatmaps.weights);
    await page.locator('#weights-canvas').scrollIntoViewIfNeeded();
    const box = await page.locator('#weights-canvas').boundingBox();
    const s = box.width / g.width;
    for (const [i, j] of [[3, 1], [5, 4]]) {
      const position = { x: (g.x0 + (j + 0.5) * g.cell) * s, y: (g.y0 + (i + 0.5) * g.cell) * s };
      if (size === 'phone') await page.tap('#weights-canvas', { position });
      else await page.click('#weights-canvas', { position });
      // The outline's pixel at the cell's left edge, read right after the click.
      const rgb = await page.evaluate(({ i, j }) => {
        const gg = window.__maskattnDemo.heatmaps.weights;
        const c = document.getElementById('weights-canvas');
        const r = c.width / gg.width;
        const probe = document.createElement('canvas');
        probe.width = probe.height = 1;
        const ctx = probe.getContext('2d', { willReadFrequently: true });
        ctx.drawImage(c, Math.floor((gg.x0 + j * gg.cell + 1.5) * r), Math.floor((gg.y0 + (i + 0.5) * gg.cell) * r), 1, 1, 0, 0, 1, 1);
        return Array.from(ctx.getImageData(0, 0, 1, 1).data);
      }, { i, j });
      // The keyboard cursor's amber (the canvas has focus) or the hover outline's near-black: not the cell's blue.
      const amber = rgb[0] > 220 && rgb[1] > 130 && rgb[1] < 185 && rgb[2] < 60;
      const dark = rgb[0] < 80 && rgb[1] < 80 && rgb[2] < 100;
      assert.ok(amber || dark, `cell (${i}, ${j}) outlined right after the click: rgb ${rgb}`);
      const readout = await page.locator('#weights-readout').textContent();
      assert.match(readout, new RegExp(`query ${i} .* key ${j} `), 'the readout names the clicked cell');
      const tip = await page.evaluate(() => { const t = document.getElementById('weights-tooltip'); return t.hidden ? null : t.textContent; });
      if (size === 'phone') assert.equal(tip, null, 'no floating tooltip on a phone');
      else assert.match(tip, new RegExp(`query ${i} .* key ${j} `));
    }
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-click.png`) });
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });

  test(`${size}: start strip, docs links, pictures before the form, dropdown texts whole`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    // The install line a visitor can run (maskattn is not on the npm registry): the server's tarball.
    const { version } = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8'));
    assert.equal(await page.locator('#install-line').textContent(), `npm install ${new URL(server.url).origin}/maskattn-${version}.tgz`);
    assert.equal(await page.locator('a[href*="npmjs."]').count(), 0, 'no link to a registry page that does not exist');
    assert.ok(await page.locator('#start').isVisible());
    const links = await page.evaluate(() => [...document.querySelectorAll('a[href^="/docs/"]')].map((a) => a.getAttribute('href')));
    for (const panel of ['#start', '#call-panel', '#decode-call-panel', '#branching-call-panel', '#lesson', '#perf', 'footer'])
      assert.ok(await page.locator(`${panel} a[href^="/docs/"]`).count() > 0, `${panel} links the docs`);
    // Every doc page is reachable: the list the strip links, and each page it lists.
    const index = await (await fetch(new URL('/docs/index.html', server.url))).text();
    const pages = [...index.matchAll(/<li><a href="([a-z0-9-]+\.html)"/g)].map((m) => `/docs/${m[1]}`);
    assert.ok(pages.length >= 6, pages.join());
    for (const href of new Set([...links.map((l) => l.split('#')[0]), ...pages])) {
      const r = await fetch(new URL(href, server.url));
      assert.equal(r.status, 200, href);
    }
    await page.click('#start a[href="/docs/javascript.html"]');
    await page.waitForSelector('h1#maskattn-in-javascript');
    assert.ok(await page.locator('.doc-nav a[href="semantics.html"]').count() === 1);
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-docs.png`) });
    await page.goBack();
    await page.waitForFunction(() => window.__maskattnDemo?.ready === true, null, { timeout: 30000 });
    // The first picture comes before the form on one column (and beside it on a wide screen).
    const mask = await page.locator('#fig-mask').boundingBox();
    const form = await page.locator('#controls').boundingBox();
    if (size === 'phone') assert.ok(mask.y < form.y, `the mask (${mask.y}) is above the form (${form.y})`);
    assert.ok(mask.y < SIZES[size].viewport.height, `the first picture starts on the first screen (at ${mask.y}px)`);
    // Not just its caption: the map's first row of cells, whole.
    const canvasTop = (await page.locator('#mask-canvas').boundingBox()).y;
    const g = await page.evaluate(() => window.__maskattnDemo.heatmaps.mask);
    assert.ok(canvasTop + g.y0 + g.cell <= SIZES[size].viewport.height, `the mask's first row ends at ${canvasTop + g.y0 + g.cell}px, on the first screen`);
    // Each visible select is wide enough for its options' texts.
    const cut = await page.evaluate(() => {
      const ctx = document.createElement('canvas').getContext('2d');
      const out = [];
      for (const sel of document.querySelectorAll('select')) {
        if (!sel.offsetParent) continue;
        const cs = getComputedStyle(sel);
        ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
        const room = sel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20;  // the arrow
        for (const o of sel.options) if (ctx.measureText(o.textContent).width > room) out.push(`#${sel.id}: "${o.textContent}"`);
      }
      return out;
    });
    assert.deepEqual(cut, [], 'dropdown texts cut');
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-load.png`) });
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-full.png`), fullPage: true });
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= SIZES[size].viewport.width, 'no sideways scrolling');
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });

  test(`${size}: KV cache steps survive a new dtype; a typed capacity applies without leaving the box; fork and verify change what shows`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    await page.locator('#decode').scrollIntoViewIfNeeded();
    for (let n = 0; n < 2; n++) await page.click('#decode-next');
    await page.waitForFunction(() => window.__maskattnDemo.decode.step === 2);
    await page.selectOption('#decode-dtype', 'float16');
    await page.waitForFunction(() => window.__maskattnDemo.decode.dtype === 'float16');
    assert.equal(await page.evaluate(() => window.__maskattnDemo.decode.step), 2, 'the steps are kept');
    await page.check('#decode-window');
    await page.locator('#decode-capacity').fill('7');   // typed, focus stays in the box
    await page.waitForFunction(() => window.__maskattnDemo.decode.capacity === 7);
    assert.equal(await page.evaluate(() => document.activeElement.id), 'decode-capacity');
    assert.equal(await page.evaluate(() => window.__maskattnDemo.decode.step), 2);
    const b0 = await page.evaluate(() => window.__maskattnDemo.branching);
    assert.equal(b0.fork.stage, 'prompt');
    assert.equal(b0.tree.verified, false);
    await page.locator('#fork-run').scrollIntoViewIfNeeded();
    await page.click('#fork-run');
    await page.waitForFunction(() => window.__maskattnDemo.branching.fork.stage === 'forked');
    await page.click('#tree-verify');
    await page.waitForFunction(() => window.__maskattnDemo.branching.tree.verified === true);
    await page.locator('#branching').screenshot({ path: path.join(RESULTS, `first-contact-${size}-branching.png`) });
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });
}

desktopTest('desktop: each code panel is open, copies a program that runs in Node and prints the page\'s numbers', async () => {
  const before = problems.length;
  const { page, context } = await open('desktop');
  for (const id of ['call', 'decode-call', 'branching-call']) {
    assert.ok(await page.locator(`#${id}`).isVisible(), `#${id} is shown without unfolding anything`);
    assert.match(await page.locator(`#${id}`).textContent(), /^import \{ init \} from 'maskattn';$/m);
    assert.doesNotMatch(await page.locator(`#${id}`).textContent(), /\/js\/index\.js/);
  }
  // The attention panel, in two states: the load, and the batch with ALiBi, a window and 'nan'.
  for (const setup of [async () => {}, async () => {
    await act(page, () => page.selectOption('#example', 'batch'));
    await act(page, () => page.check('#alibi'));
    await act(page, () => page.check('#window'));
    await act(page, () => page.selectOption('#policy', 'nan'));
    await act(page, () => page.selectOption('#sentence-pick', '1'));
    await act(page, () => page.selectOption('#head-pick', '2'));
  }]) {
    await setup();
    const v = await view(page);
    const code = await copy(page, 'call');
    assert.match(code, /returnLse: true/);
    const out = await runSnippet(code, 'attention');
    const rows = [...out.matchAll(/^row (\d+): (.*)$/gm)].map((m) => m[2].split(' '));
    assert.equal(rows.length, v.Lq, out);
    rows.forEach((row, i) => row.forEach((x, d) => {
      const want = v.output[i][d];
      if (want === 'NaN') assert.equal(x, 'NaN', `row ${i} dim ${d}`);
      else assert.ok(close(x, want), `row ${i} dim ${d}: ${x} vs the page's ${want}`);
    }));
  }
  // The KV cache panel after three steps of a float16 ring.
  await page.locator('#decode').scrollIntoViewIfNeeded();
  await page.selectOption('#decode-dtype', 'float16');
  await page.check('#decode-window');
  for (let n = 0; n < 3; n++) await page.click('#decode-next');
  await page.waitForFunction(() => window.__maskattnDemo.decode.step === 3);
  const d = await page.evaluate(() => window.__maskattnDemo.decode);
  const dout = await runSnippet(await copy(page, 'decode-call'), 'decode');
  assert.match(dout, new RegExp(`lengths \\[ ${d.lengths.join(', ')} \\]`));
  const drows = [...dout.matchAll(/^seq (\d+) head (\d+): (.*)$/gm)].map((m) => m[3].split(' '));
  assert.equal(drows.length, d.rows);
  drows.forEach((row, r) => row.forEach((x, j) => assert.ok(close(x, d.weights[r][j] ?? 0), `row ${r}, position ${j}: ${x} vs ${d.weights[r][j]}`)));
  // The branching panel after fork, verify and keep.
  await page.locator('#branching').scrollIntoViewIfNeeded();
  await page.click('#fork-run');
  await page.click('#tree-verify');
  await page.selectOption('#tree-path', '1');
  await page.click('#tree-keep');
  await page.waitForFunction(() => window.__maskattnDemo.branching.tree.kept !== null);
  const br = await page.evaluate(() => window.__maskattnDemo.branching);
  const bout = await runSnippet(await copy(page, 'branching-call'), 'branching');
  br.fork.tables.forEach((t, b) => assert.match(bout, new RegExp(`^pages\\(${b}\\) ${t.join(' ')}$`, 'm')));
  assert.match(bout, new RegExp(`^lengths ${br.fork.lengths.join(' ')} bytes ${br.fork.byteLength}$`, 'm'));
  const nodes = [...bout.matchAll(/^node (\d+): (.*)$/gm)].map((m) => m[2].split(' '));
  assert.equal(nodes.length, br.tree.weights.length);
  nodes.forEach((row, i) => row.forEach((x, j) => assert.ok(close(x, br.tree.weights[i][j]), `node ${i}, position ${j}`)));
  assert.match(bout, new RegExp(`^after keep: lengths ${br.tree.lengthsAfter.join(' ')}$`, 'm'));
  await context.close();
  assert.deepEqual(problems.slice(before), []);
});

desktopTest('desktop: the speed table says it is running while its bar moves', async () => {
  const before = problems.length;
  const { page, context } = await open('desktop');
  assert.match(await page.locator('#perf-table').textContent(), /Not run yet/);
  await page.locator('#perf').scrollIntoViewIfNeeded();
  await page.click('#perf-run');
  assert.match(await page.locator('#perf-table').textContent(), /Running: \d+%/);
  await page.waitForFunction(() => document.getElementById('perf-progress').value > 0.2, null, { timeout: 60000 });
  const text = await page.locator('#perf-table').textContent();
  const bar = await page.evaluate(() => document.getElementById('perf-progress').value);
  if (await page.evaluate(() => document.getElementById('perf').dataset.state === 'running')) {
    assert.doesNotMatch(text, /Not run yet/);
    assert.match(text, /Running: \d+%/);
    assert.ok(bar > 0);
  }
  await page.click('#perf-stop').catch(() => {});
  await context.close();
  assert.deepEqual(problems.slice(before), []);
});

// ------------------------------------------------------------------------------ second pass

/** Every map on the page: its canvas's drawn width and its box's content width (CSS pixels). */
const mapFits = (page) => page.evaluate(() => [...document.querySelectorAll('.map-scroll > canvas')].filter((c) => c.offsetParent).map((c) => {
  const box = c.parentElement;
  const cs = getComputedStyle(box);
  const inner = box.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  return { id: c.id || c.closest('[data-lesson]')?.dataset.lesson, drawn: c.getBoundingClientRect().width, inner };
}));
const inView = (page, selector) => page.evaluate((sel) => {
  const r = document.querySelector(sel).getBoundingClientRect();
  return { top: r.top, bottom: r.bottom, height: innerHeight };
}, selector);
const WORDS = 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen'.split(' ');

for (const size of RUN_SIZES) {
  test(`${size}: each guide lands on the picture that proves it, and its callout names the sentence on screen`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    // Padding: a short, padded sentence, named in the callout.
    let v = await act(page, () => page.click('button.preset[data-preset="padding"]'));
    assert.equal(v.b, 1, 'the padding guide opens on sentence 2');
    assert.ok(v.rowLabels.includes('<pad>'), `the sentence on screen is padded (${v.rowLabels})`);
    let callout = await page.evaluate(() => window.__maskattnDemo.callout);
    assert.equal(callout.kind, 'lesson');
    assert.match(callout.text, /On screen, sentence 2, “Dogs bark” is padded with 4 <pad>/);
    const mask = await inView(page, '#mask-canvas');
    assert.ok(mask.top >= 0 && mask.top + 60 < mask.height, `the mask's first rows are in view (canvas top ${mask.top})`);
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-guide-padding.png`) });
    // The pitfall: the same sentence, before and after, and the callout names its starved words.
    const after = await act(page, () => page.click('#callout-fix'));
    assert.equal(after.b, 1, 'the pitfall stays on the sentence on screen');
    assert.notDeepEqual(after.mask, v.mask, 'the pitfall changes the picture on screen');
    assert.deepEqual(after.fullyMaskedRows.filter((i) => after.rowLabels[i] !== '<pad>'), [0, 1], '“Dogs” and “bark” lose every key');
    callout = await page.evaluate(() => window.__maskattnDemo.callout);
    assert.equal(callout.kind, 'pitfall');
    assert.match(callout.text, /on screen: in sentence 2, “Dogs bark”, the real words “Dogs”, “bark” have no key/);
    await page.locator('#callout').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-guide-pitfall.png`) });
    v = await act(page, () => page.selectOption('#sentence-pick', '2'));
    callout = await page.evaluate(() => window.__maskattnDemo.callout);
    const starved = v.fullyMaskedRows.filter((i) => v.rowLabels[i] !== '<pad>').map((i) => `“${v.rowLabels[i]}”`).join(', ');
    assert.equal(starved, '“Birds”, “sing”');
    assert.ok(callout.text.includes(`in sentence 3, “Birds sing at dawn”, the real words ${starved} have no key`), callout.text);
    assert.doesNotMatch(callout.text, /Dogs|bark/);
    await act(page, () => page.selectOption('#sentence-pick', '0'));
    callout = await page.evaluate(() => window.__maskattnDemo.callout);
    assert.match(callout.text, /sentence 1, “The cat sat on the mat”, on screen, has no real word without a key; sentence 2 and 3 do/);
    // From a sentence without <pad>, the pitfall's fix goes back to... the fix, and showing it again
    // moves to the shortest sentence, where it shows.
    await act(page, () => page.click('#callout-fix'));
    v = await act(page, () => page.click('#callout-fix'));
    assert.equal(v.b, 1, 'showing the pitfall from sentence 1 moves to the shortest sentence');
    // The sliding window: one line of what to look for, checked against the mask on screen.
    v = await act(page, () => page.click('button.preset[data-preset="window"]'));
    callout = await page.evaluate(() => window.__maskattnDemo.callout);
    assert.equal(callout.kind, 'guide');
    const last = v.Lq - 1;
    const seen = v.mask[last].map((m, j) => (m ? `“${v.colLabels[j]}”` : null)).filter(Boolean).join(', ');
    assert.equal(seen, '“mat”, “all”, “day”');
    assert.equal(callout.text, `What to look for: each word attends itself and the 2 before it (window 2, 0), a diagonal band 3 cells wide; the last word, “day”, sees only ${seen}.`);
    assert.equal(await page.locator('#callout-fix').isVisible(), false, 'a guide has no button');
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-guide-window.png`) });
    // The KV cache: its line of what to look for, and its picture, on the screen it lands on.
    await page.click('button.preset[data-preset="kv-cache"]');
    await settle(page);
    const line = await inView(page, '#decode-guide');
    assert.ok(line.top >= 0 && line.bottom <= line.height, `the KV guide's line is in view (${line.top}..${line.bottom})`);
    assert.match(await page.locator('#decode-guide').textContent(), /^What to look for:/);
    const kv = await inView(page, '#decode-weights-canvas');
    assert.ok(kv.top >= 0 && kv.bottom <= kv.height, `the KV cache's weights are in view (${kv.top}..${kv.bottom} of ${kv.height})`);
    await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-guide-kv.png`) });
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });

  test(`${size}: every map fits its box for each guide and 6, 9, 12, 16 tokens`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    const bad = [];
    const check = async (label) => {
      for (const m of await mapFits(page)) if (m.drawn > m.inner + 0.5) bad.push(`${label}: ${m.id} draws ${m.drawn.toFixed(1)} px in ${m.inner.toFixed(1)}`);
    };
    for (const n of [6, 9, 12, 16]) {
      const words = WORDS.slice(0, n).join(' ');
      await act(page, () => page.click('button.preset[data-preset="padding"]'));
      await typeText(page, `${words}\nDogs bark\nBirds sing at dawn`);
      await act(page, () => page.selectOption('#sentence-pick', '0'));
      await check(`padding, ${n} tokens`);
      await act(page, () => page.click('button.preset[data-preset="window"]'));
      const v = await typeText(page, words);
      assert.equal(v.Lk, n);
      await check(`window, ${n} tokens`);
      if (n === 16) {
        await page.locator('#fig-mask').scrollIntoViewIfNeeded();
        await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-fit-16.png`) });
      }
    }
    // The KV cache, stepped to 6, 9, 12 and 16 positions: the newest (rightmost) ones are drawn in the box.
    await page.click('button.preset[data-preset="kv-cache"]');
    for (const n of [6, 9, 12, 16]) {
      while ((await page.evaluate(() => window.__maskattnDemo.decode.lengths[0])) < n && await page.isEnabled('#decode-next')) {
        const k = await page.evaluate(() => window.__maskattnDemo.decode.step);
        await page.click('#decode-next');
        await page.waitForFunction((s) => window.__maskattnDemo.decode.step > s, k);
      }
      await check(`KV cache, ${await page.evaluate(() => window.__maskattnDemo.decode.lengths[0])} positions`);
    }
    await page.locator('#fig-decode-weights').screenshot({ path: path.join(RESULTS, `first-contact-${size}-fit-kv.png`) });
    await page.click('#fork-run');
    await page.click('#tree-verify');
    await page.waitForFunction(() => window.__maskattnDemo.branching.tree.verified === true);
    await check('branching');
    assert.deepEqual(bad, []);
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });

  test(`${size}: the output map numbers its negative cells as it numbers the others, or none`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    const { short } = await import('../../web/heatmap.js');
    assert.equal(short(-0.0016), '0', '-0.0016 reads 0');
    assert.equal(short(-0.58), '-.58');
    for (const D of ['8', '16', '32']) {
      const v = await act(page, () => page.selectOption('#head-dim', D));
      const g = await page.evaluate(() => window.__maskattnDemo.heatmaps.output);
      const cells = g.texts.filter((t) => t.kind === 'cell');
      const numbered = cells.map((t) => {
        const [x, y] = t.cell;
        const i = Math.round((y - g.y0) / g.cell);
        const d = Math.round((x - g.x0) / g.cell);
        return { i, d, text: t.text, value: v.output[i][d] };
      });
      const negatives = v.output.flat().filter((x) => x < 0).length;
      assert.ok(negatives > 0);
      if (g.numbering === 'none') assert.equal(numbered.length, 0, `D = ${D}: no cell numbered`);
      else assert.equal(numbered.length, v.Lq * v.D, `D = ${D}: every cell numbered (${g.numbering}), the ${negatives} negative ones too`);
      for (const c of numbered) {
        assert.ok(!/^-\.?0*$|^-0?\.0+$/.test(c.text), `"${c.text}" for ${c.value}`);
        const tol = g.numbering === 'narrow' ? 0.051 : 0.0051;
        assert.ok(Math.abs(Number(c.text.replace(/^(-?)\./, '$10.')) - c.value) <= Math.max(tol, Math.abs(c.value) >= 0.95 ? 0.51 : 0), `row ${c.i} dim ${c.d}: "${c.text}" for ${c.value}`);
      }
      if (D === '8' && size === 'desktop') assert.equal(g.numbering, 'text', 'at D = 8 a desktop numbers every cell in full');
      if (D === '32') {
        await page.locator('#fig-output').scrollIntoViewIfNeeded();
        await page.screenshot({ path: path.join(RESULTS, `first-contact-${size}-d32-numbers.png`) });
      }
    }
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });
}

desktopTest('desktop: the install line, copied, installs maskattn in an empty folder; without a packed tarball it says npm pack', async () => {
  const before = problems.length;
  const { page, context } = await open('desktop');
  const line = await copy(page, 'install-line');
  const args = line.split(' ');
  assert.deepEqual(args.slice(0, 2), ['npm', 'install']);
  const folder = await mkdtemp(path.join(tmpdir(), 'maskattn-visitor-'));
  try {
    await writeFile(path.join(folder, 'package.json'), JSON.stringify({ name: 'visitor', private: true, type: 'module' }));
    // Asynchronously: the server answering npm runs in this process.
    await run('npm', [...args.slice(1), '--no-audit', '--no-fund', '--loglevel=error'], { cwd: folder, encoding: 'utf8', timeout: 120000 });
    await writeFile(path.join(folder, 'a.mjs'), "import { init } from 'maskattn';\nconst ma = await init();\nconsole.log(ma.backend.version, ma.backend.arch);\n");
    const out = execFileSync(process.execPath, ['a.mjs'], { cwd: folder, encoding: 'utf8', timeout: 60000 });
    const { version } = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8'));
    assert.match(out, new RegExp(`^${version.replace(/\./g, '\\.')} (simd128|scalar)`), out);
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
  await context.close();
  // A server with nothing packed: the page says how to make the package.
  const bare = await start({ port: 0, packDir: path.join(tmpdir(), 'maskattn-no-such-pack-dir') });
  try {
    const ctx = await browser.newContext(SIZES.desktop);
    const p = await ctx.newPage();
    await watchProblems(p, problems, { origin: new URL(bare.url).origin });
    await p.goto(bare.url);
    await p.waitForFunction(() => window.__maskattnDemo?.ready === true, null, { timeout: 30000 });
    assert.equal(await p.locator('#install-line').textContent(), 'npm pack');
    assert.match(await p.locator('#install-note').textContent(), /in a checkout of maskattn writes maskattn-[0-9.]+\.tgz: npm install it in your project/);
    await ctx.close();
  } finally {
    await bare.close();
  }
  assert.deepEqual(problems.slice(before), []);
});

for (const size of RUN_SIZES) {
  test(`${size}: the KV cache's legend tells an overwritten position from a missing one, as its map does`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    await page.locator('#decode').scrollIntoViewIfNeeded();
    await page.check('#decode-window');   // a ring of capacity W + 2 = 6
    await page.waitForFunction(() => window.__maskattnDemo.decode.window > 0);
    while (!(await page.evaluate(() => { const k = window.__maskattnDemo.decode.kinds; return k[0].includes('gone') && k[1].includes('none'); }))) {
      const k = await page.evaluate(() => window.__maskattnDemo.decode.step);
      assert.ok(await page.isEnabled('#decode-next'), 'the ring overwrote a position before the steps ran out');
      await page.click('#decode-next');
      await page.waitForFunction((s) => window.__maskattnDemo.decode.step > s, k);
    }
    const d = await page.evaluate(() => window.__maskattnDemo.decode);
    const gone = d.kinds[0].indexOf('gone');
    const none = d.kinds[1].indexOf('none');
    // A cell's colour near its corner (its mark, if any, sits in the middle) and at its centre.
    const pixels = await page.evaluate(({ cells }) => {
      const g = window.__maskattnDemo.decode.heatmaps.weights;
      const c = document.getElementById('decode-weights-canvas');
      const r = c.width / g.width;
      const probe = document.createElement('canvas');
      probe.width = probe.height = 1;
      const ctx = probe.getContext('2d', { willReadFrequently: true });
      const at = (x, y) => {
        ctx.drawImage(c, Math.floor(x * r), Math.floor(y * r), 1, 1, 0, 0, 1, 1);
        return Array.from(ctx.getImageData(0, 0, 1, 1).data.slice(0, 3));
      };
      return cells.map(([i, j]) => ({
        corner: at(g.x0 + j * g.cell + 3, g.y0 + i * g.cell + 3),
        // The darkest pixel around the centre, where a mark is drawn.
        centre: [-2, -1, 0, 1, 2].flatMap((dx) => [-2, -1, 0, 1, 2].map((dy) => at(g.x0 + (j + 0.5) * g.cell + dx, g.y0 + (i + 0.5) * g.cell + dy)))
          .reduce((a, b) => (a[0] + a[1] + a[2] <= b[0] + b[1] + b[2] ? a : b)),
      }));
    }, { cells: [[0, gone], [d.Hq, none]] });
    const legend = await page.evaluate(() => Object.fromEntries(['gone', 'empty'].map((k) => {
      const sw = document.querySelector(`#decode .legend .swatch.${k}`);
      const rgb = getComputedStyle(sw).backgroundColor.match(/\d+/g).slice(0, 3).map(Number);
      return [k, { rgb, mark: getComputedStyle(sw, '::after').content }];
    })));
    const near = (a, b, tol = 6) => a.every((x, n) => Math.abs(x - b[n]) <= tol);
    const apart = (a, b) => a.reduce((s, x, n) => s + Math.abs(x - b[n]), 0);
    assert.ok(near(pixels[0].corner, legend.gone.rgb), `an overwritten position (${pixels[0].corner}) has the legend's colour (${legend.gone.rgb})`);
    assert.ok(near(pixels[1].corner, legend.empty.rgb), `a missing position (${pixels[1].corner}) has the legend's colour (${legend.empty.rgb})`);
    assert.ok(apart(legend.gone.rgb, legend.empty.rgb) >= 60, `the two swatches differ: ${legend.gone.rgb} vs ${legend.empty.rgb}`);
    assert.equal(legend.gone.mark, '"•"', 'the overwritten swatch carries the map\'s dot');
    assert.equal(legend.empty.mark, 'none', 'the missing swatch has no dot, as its cells');
    assert.ok(apart(pixels[0].centre, pixels[0].corner) > 150, 'the overwritten cell shows its dot');
    assert.ok(near(pixels[1].centre, pixels[1].corner), 'the missing cell has no mark');
    await page.locator('#decode .legend').scrollIntoViewIfNeeded();
    await page.locator('#decode').screenshot({ path: path.join(RESULTS, `first-contact-${size}-kv-legend.png`) });
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });
}

for (const size of RUN_SIZES) {
  test(`${size}: the speed panel shows each time's spread, the cores and threadsUsed, onnxruntime-web beside maskattn, says who wins, and times a real decode step`, async () => {
    const before = problems.length;
    const { page, context } = await open(size);
    await page.locator('#perf').scrollIntoViewIfNeeded();
    await page.selectOption('#perf-preset', 'page');   // the page's own 1×4×6×8 call: the smallest
    await page.click('#perf-run');
    await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('perf').dataset.state), null, { timeout: 180000 });
    assert.equal(await page.evaluate(() => document.getElementById('perf').dataset.state), 'done', await page.locator('#perf-status').textContent());
    const perf = await page.evaluate(() => window.__maskattnDemo.perf);
    const cores = await page.evaluate(() => navigator.hardwareConcurrency);
    const by = Object.fromEntries(perf.results.map((r) => [r.id, r]));
    for (const r of perf.results) {
      assert.ok(r.minMs <= r.medianMs && r.medianMs <= r.maxMs && r.reps >= 3, `${r.id}: min ${r.minMs} ≤ median ${r.medianMs} ≤ max ${r.maxMs}`);
      const cell = await page.locator(`#perf-table tr[data-impl="${r.id}"] td`).first().textContent();
      assert.match(cell, /^[\d.]+ ms \([\d.]+–[\d.]+\)$/, `${r.id}: median (min–max) shown: ${cell}`);
    }
    assert.ok(by.ort, 'onnxruntime-web runs on the same shape');
    assert.ok(by.ort.maxDiff < 1e-5, `onnxruntime-web agrees with maskattn (${by.ort.maxDiff})`);
    const summary = await page.locator('#perf-summary').textContent();
    assert.match(summary, new RegExp(`this machine: ${cores} cores`));
    assert.doesNotMatch(summary, /\b0\.0 MFLOP/, 'a small call\'s work is not rounded to nothing');
    const best = by.simd ?? by.scalar;
    if (by.js.medianMs < best.medianMs) assert.match(summary, /Plain JavaScript wins here .*a call’s fixed cost/);
    else assert.match(summary, /faster than plain JavaScript/);
    if (by.threads) {
      assert.match(await page.locator('#perf-table tr[data-impl="threads"] th').textContent(), new RegExp(`threadsUsed ${by.threads.threadsUsed}\\)$`));
      if (by.threads.medianMs >= by.simd.medianMs) assert.match(summary, /One thread wins here \(.*\): (maskattn used|the machine is busy|sharing)/);
      else assert.match(summary, /threads \(threadsUsed\) run at [\d.]+× the speed of 1/);
    }
    // The decode step: 32 heads × 2048 keys × 128 from float32, q8 and q4 caches.
    const d = perf.decodeStep;
    assert.deepEqual(d.rows.map((r) => r.dtype), ['float32', 'q8', 'q4']);
    assert.equal(d.rows[0].bytes, 32 * 2048 * 128 * 2 * 4, 'a float32 cache holds K and V, 4 bytes each');
    assert.ok(d.rows[1].bytes < d.rows[0].bytes / 3 && d.rows[2].bytes < d.rows[1].bytes, `q8 and q4 are smaller: ${d.rows.map((r) => r.bytes)}`);
    for (const r of d.rows) {
      const cells = await page.locator(`#perf-decode tr[data-dtype="${r.dtype}"] td`).allTextContents();
      assert.match(cells[0], /^[\d.]+ ms \([\d.]+–[\d.]+\)$/);
      // Whole tokens per second from 10 up, one decimal below.
      assert.ok(Math.abs(Number(cells[1]) - 1000 / r.medianMs) <= (1000 / r.medianMs < 10 ? 0.051 : 0.51), `${r.dtype}: ${cells[1]} tokens/s for ${r.medianMs} ms`);
      assert.equal(cells[2], `${(r.bytes / 1e6).toFixed(1)} MB`);
    }
    // Every number of the decode table is in view, on a phone too (no column hidden or pushed out).
    const clipped = await page.evaluate(() => [...document.querySelectorAll('#perf-decode td, #perf-table td:not(.bar-cell)')].filter((td) => td.offsetParent)
      .filter((td) => { const r = td.getBoundingClientRect(); const box = td.closest('.table-scroll').getBoundingClientRect(); return r.right > box.right + 1; }).map((td) => td.textContent));
    assert.deepEqual(clipped, [], 'table cells past the right edge of their box');
    assert.equal(await page.locator('#perf-decode tr[data-dtype="q4"] td').nth(1).isVisible(), true, 'tokens per second shown');
    await page.locator('#perf').screenshot({ path: path.join(RESULTS, `first-contact-${size}-speed.png`) });
    await context.close();
    assert.deepEqual(problems.slice(before), []);
  });
}

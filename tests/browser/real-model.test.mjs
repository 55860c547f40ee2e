// The demo's "A real model" panel (web/real-model.js) in headless Chromium, at 1440x900 and 390x844:
// onnxruntime-web and maskattn in the page read committed test lines (tests/ocr/) exactly as
// examples/ocr.mjs reads them in Node (onnxruntime-node, the same split), under the demo server's
// Content-Security-Policy and cross-origin isolation, with no request leaving the server. Also: the
// 16 heads' maps, a head's full map with its exact weights on hover, and the padded-batch pitfall.
//   node --test tests/browser/real-model.test.mjs
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-node';
import { init } from 'maskattn';

import { launchChromium, watchProblems } from './chromium.mjs';
import { start } from '../../scripts/serve.mjs';
import { batchInput } from '../../examples/ocr/image.mjs';
import { loadModelFiles, readPng } from '../../examples/ocr/node.mjs';
import { createRecognizer, maxAbsDiff } from '../../examples/ocr/recognizer.mjs';

const VIEWPORTS = [{ width: 1440, height: 900, lines: ['hello.png', 'chinese.png'] }, { width: 390, height: 844, lines: ['price.png'] }];

let server;
let browser;
let rec;
before(async () => {
  server = await start({ port: 0 });
  browser = await launchChromium();
  rec = await createRecognizer(ort, await init({ threads: 1 }), { files: loadModelFiles() });
});
after(async () => {
  await browser?.close();
  await server?.close();
});

async function nodeReads(file) {
  const out = await rec.run(batchInput([readPng(new URL(`../ocr/${file}`, import.meta.url))]));
  return { text: rec.decode(out.probs, out.dims), probs: out.probs };
}

for (const { width, height, lines } of VIEWPORTS) {
  test(`${width}x${height}: the page reads ${lines.join(', ')} as Node does, draws 16 heads, shows the batch pitfall`, async () => {
    const problems = [];
    const page = await browser.newPage({ viewport: { width, height } });
    try {
      await watchProblems(page, problems, { origin: new URL(server.url).origin });
      await page.goto(server.url);
      assert.equal(await page.evaluate(() => window.crossOriginIsolated), true);
      for (const file of lines) {
        await page.waitForSelector(`#rm-line option[value="${file}"]`, { state: 'attached', timeout: 60000 });
        await page.selectOption('#rm-line', file);
        await page.evaluate(() => { window.__realModel.result = null; });
        await page.click('#rm-read');
        await page.waitForFunction(() => window.__realModel.result || document.getElementById('rm-status').dataset.error === 'yes', null, { timeout: 120000 });
        const status = await page.textContent('#rm-status');
        assert.doesNotMatch(status, /error/, status);
        const expected = await nodeReads(file);
        const got = await page.evaluate(() => ({ text: window.__realModel.result.text, probs: Array.from(window.__realModel.result.out.probs) }));
        assert.equal(got.text, expected.text, `${file}: the page reads what Node reads`);
        assert.equal(await page.textContent('#rm-read-text'), expected.text);
        // onnxruntime-web and -node round differently; the text must not care.
        assert.ok(maxAbsDiff(Float32Array.from(got.probs), expected.probs) < 1e-3, `${file}: probabilities`);
      }
      assert.equal(await page.locator('.rm-head').count(), 16);
      await page.click('.rm-head-button[data-layer="1"][data-head="3"]');
      assert.equal(await page.getAttribute('.rm-head-button[data-layer="1"][data-head="3"]', 'aria-pressed'), 'true');
      assert.equal(await page.getAttribute('#rm-map', 'data-layer'), '1');
      await page.locator('#rm-map').scrollIntoViewIfNeeded();
      const map = await page.locator('#rm-map').boundingBox();
      await page.mouse.move(map.x + 3, map.y + map.height - 3);
      const hover = await page.textContent('#rm-hover');
      const L = await page.evaluate(() => window.__realModel.result.tokens);
      const weight = await page.evaluate((n) => window.__realModel.result.out.layers[1].weights.data[(3 * n + n - 1) * n], L);
      assert.match(hover, new RegExp(`query ${L - 1} .* key 0 .* weight ${weight.toPrecision(6).replace('.', '\\.')}`), hover);

      await page.click('#rm-batch');
      await page.waitForFunction(() => window.__realModel.batch, null, { timeout: 60000 });
      const batch = await page.evaluate(() => window.__realModel.batch);
      const [masked, unmasked] = batch.rows;
      assert.ok(batch.tokens[0] < batch.tokens[1], 'the other line is wider');
      assert.ok(masked.rowsVsSingle <= 1e-6, `masked rows vs the line alone: ${masked.rowsVsSingle}`);
      assert.ok(unmasked.rowsVsSingle > 0.1, `unmasked rows vs the line alone: ${unmasked.rowsVsSingle}`);
      assert.equal(await page.locator('#rm-batch-table tr').count(), 4);

      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow} px`);
      assert.deepEqual(await page.evaluate(() => window.__cspViolations), []);
      assert.deepEqual(problems, []);
    } finally {
      await page.close();
    }
  });
}

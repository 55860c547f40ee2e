// The JavaScript examples of the README and docs/*.md (```js blocks after `<!-- example: js... -->`,
// tests/docs/blocks.mjs) run as written, from an empty folder whose node_modules/maskattn is this
// checkout, and print what each test below expects. A js example with no test here fails.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { examples, ROOT } from '../docs/blocks.mjs';

const found = examples('js');
const tested = new Set();

// Runs the example NAME and returns what it printed.
function runExample(name) {
  assert.ok(found[name], `a js example after <!-- example: ${name} --> in README.md or docs/*.md`);
  tested.add(name);
  const dir = mkdtempSync(join(tmpdir(), 'maskattn-readme-'));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(ROOT, join(dir, 'node_modules', 'maskattn'), 'dir');
  writeFileSync(join(dir, 'example.mjs'), found[name].code);
  return execFileSync(process.execPath, [join(dir, 'example.mjs')], { cwd: dir, encoding: 'utf8' });
}

for (const name of ['js', 'js-api']) {
  test(`JavaScript example '${name}' (README quick start, docs/javascript.md) runs and prints the documented results`, () => {
    const out = runExample(name);
    assert.match(out, /arch: 'simd128'/);
    assert.match(out, /\[ 2, 4, 6, 8 \]/);
    assert.match(out, /RangeError keyLengths\[0\] .*9/);
  });
}

test('README quantized cache example runs and prints the documented results', () => {
  const out = runExample('js-quant');
  assert.match(out, /bytes 131072 28672/);
  assert.match(out, /max difference below 0\.05/);
  assert.match(out, /read \[ 2, 100, 64 \] \[ 2, 100, 64 \] from position 0/);
});

test('README generation example (fork, sinks, tree, sink tokens) runs and prints the documented results', () => {
  const out = runExample('js-generation');
  // 1,000 positions in pages of 64: 16 pages of 2 x 64 x (32 + 32) x 4 bytes = 32768 each.
  assert.match(out, /4 sequences of 1000 positions in 524288 bytes/);
  // The shared last page (positions 960..1023) is copied by 3 of the 4 samples as they write.
  assert.match(out, /after one step each: 622592 bytes/);
  assert.match(out, /attend with sinks \[ 4, 8, 1, 32 \]/);
  assert.match(out, /verified \[ 4, 8, 5, 32 \] lengths \[ 1004, 1002, 1002, 1002 \]/);
  assert.match(out, /stream holds positions 0\.\.3 and 744\.\.999/);
});

test('README merge example runs and prints the documented results', () => {
  const out = runExample('js-merge');
  assert.match(out, /merged \[ 1, 4, 1, 32 \] vs one call: equal/);
});

test('README KV cache example runs and prints the documented results', () => {
  const out = runExample('js-cache');
  assert.match(out, /step 0: holds 7 positions, output 1,8,1,16/);
  assert.match(out, /step 2: holds 9 positions/);
  assert.match(out, /bytes 8192/);
});

test('docs/kv-cache.md RoPE scaling example (Llama 3.1, Qwen2.5 configs) runs and prints the resolved scaling', () => {
  const out = runExample('js-rope-scaling');
  assert.match(out, /type: 'yarn'/);
  assert.match(out, /betaFast: 32/);
  assert.match(out, /attentionFactor: 1\.1386/);
});

test('every js example of README.md and docs/*.md ran above', () => {
  assert.deepEqual(Object.keys(found).filter((n) => !tested.has(n)), [], 'js examples with no test in tests/js/readme.test.mjs');
});

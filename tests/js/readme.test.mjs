// The JavaScript examples of the README and docs/*.md run as written (with 'maskattn' resolved to this
// checkout). Each example is looked up by its marker in every one of those files: it must be in exactly one.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

// Runs the ```js block after `<!-- example: NAME -->` and returns what it printed.
function runExample(name) {
  const files = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const found = files.map((f) => [f, new RegExp(`<!-- example: ${name} -->\\s*\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(readFileSync(join(root, f), 'utf8'))])
    .filter(([, m]) => m);
  assert.equal(found.length, 1, `exactly one of ${files.join(', ')} has a js example after <!-- example: ${name} --> (${found.map(([f]) => f)})`);
  const match = found[0][1];
  const entry = pathToFileURL(join(root, 'js/index.js')).href;
  const code = match[1].replaceAll("from 'maskattn'", `from '${entry}'`);
  const dir = mkdtempSync(join(tmpdir(), 'maskattn-readme-'));
  writeFileSync(join(dir, 'example.mjs'), code);
  return execFileSync(process.execPath, [join(dir, 'example.mjs')], { encoding: 'utf8' });
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

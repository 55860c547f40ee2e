// The JavaScript example examples/generate.mjs (a small decoder generating through maskattn's KV
// cache, RoPE fused in the cache): run as users run it, with each cache dtype and with a sliding
// window, and checked against the same generation with Q and K rotated in JavaScript, through
// caches without rope and through plain ma.attention over the full K/V (identical greedy tokens).
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

import { init } from 'maskattn';
import { buildWeights, generate, MODEL, roundToBfloat16, roundToHalf, sample } from '../../examples/generate.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const EXAMPLE = path.join(ROOT, 'examples', 'generate.mjs');
const PROMPT_BYTES = 'The quick brown fox'.length;  // the example's default prompt
const run = promisify(execFile);

async function example(...args) {
  const { stdout, stderr } = await run(process.execPath, [EXAMPLE, ...args], { cwd: ROOT, timeout: 60000 });
  return { stdout, stderr };
}

/** The step lines of the example's output: { step, token, totalMs, attentionMs, lengths }. */
function steps(stdout) {
  return [...stdout.matchAll(/^\s+(\d+)\s+(\d+)\s+\S+\s+([\d.]+)\s+([\d.]+)\s+([\d, ]+)$/gm)].map((m) => ({
    step: Number(m[1]), token: Number(m[2]), totalMs: Number(m[3]), attentionMs: Number(m[4]), lengths: m[5].split(',').map(Number),
  }));
}

/** Bytes of the example's caches: layers x capacity x kvHeads x (D + Dv) x bytes per value. */
const cacheBytes = (capacity, bytes) => MODEL.layers * capacity * MODEL.kvHeads * 2 * MODEL.headDim * bytes;

for (const dtype of ['float32', 'float16']) {
  test(`generate.mjs --tokens 5 --dtype ${dtype}: per-token times, lengths and the cache's bytes`, async () => {
    const { stdout } = await example('--tokens', '5', '--dtype', dtype);
    assert.match(stdout, new RegExp(`KV cache: ${dtype}, no window`));
    const s = steps(stdout);
    assert.deepEqual(s.map((x) => x.step), [1, 2, 3, 4, 5]);
    s.forEach((x, n) => {
      assert.ok(x.token >= 0 && x.token < 256);
      assert.ok(x.totalMs > 0 && x.attentionMs > 0 && x.attentionMs <= x.totalMs, JSON.stringify(x));
      assert.deepEqual(x.lengths, Array(MODEL.layers).fill(PROMPT_BYTES + n + 1), 'every layer holds prompt + tokens so far');
    });
    assert.match(stdout, /per token \(median of 5\): total [\d.]+ ms, attention [\d.]+ ms/);
    const bytes = Number(/KV cache byteLength: (\d+) bytes/.exec(stdout)?.[1]);
    assert.equal(bytes, cacheBytes(PROMPT_BYTES + 5, dtype === 'float16' ? 2 : 4));
  });
}

test('generate.mjs --window 8: a ring of W + prompt - 1 slots, lengths keep counting past it', async () => {
  const { stdout } = await example('--tokens', '12', '--window', '8', '--dtype', 'float16');
  assert.match(stdout, /sliding window 8 \(ring\)/);
  const s = steps(stdout);
  assert.equal(s.length, 12);
  assert.deepEqual(s.at(-1).lengths, Array(MODEL.layers).fill(PROMPT_BYTES + 12));
  const capacity = 8 + PROMPT_BYTES - 1;
  assert.ok(PROMPT_BYTES + 12 > capacity, 'the ring wraps in this test');
  assert.equal(Number(/KV cache byteLength: (\d+) bytes/.exec(stdout)?.[1]), cacheBytes(capacity, 2));
});

for (const window of [0, 8]) {
  test(`generate.mjs --check${window ? ` --window ${window}` : ''} (float32): the cache gives the tokens of plain attention`, async () => {
    const args = ['--tokens', '6', '--check'];
    if (window) args.push('--window', String(window));
    const { stdout } = await example(...args);
    assert.match(stdout, /RoPE \(theta 10000\): the cache's own, keys rotated by position at append, queries at attend/);
    assert.match(stdout, /check: identical tokens with Q and K rotated in JavaScript and plain ma\.attention over the full K\/V \(6 of 6\)/);
  });
}

test('generate.mjs --dtype bfloat16 --check: the bfloat16 cache gives the tokens of plain attention over bfloat16-rounded K/V', async () => {
  const { stdout } = await example('--tokens', '6', '--check', '--dtype', 'bfloat16');
  assert.match(stdout, /KV cache: bfloat16, no window/);
  assert.match(stdout, /check: identical tokens .* \(6 of 6\)/);
});

test('generate.mjs --dtype: a name outside the library\'s table is refused, naming the table\'s dtypes', async () => {
  await assert.rejects(example('--tokens', '2', '--dtype', 'bf16'), (e) => {
    assert.match(e.stderr, /--dtype must be one of float32, float16, .*bfloat16.*, given bf16/);
    return true;
  });
});

test('roundToBfloat16: nearest bfloat16, ties to even, NaN and infinities kept', () => {
  const bits = (x) => new Uint32Array(new Float32Array([x]).buffer)[0];
  const of = (u) => new Float32Array(new Uint32Array([u]).buffer)[0];
  assert.equal(roundToBfloat16(1), 1);
  assert.equal(bits(roundToBfloat16(of(0x3f808000))), 0x3f800000);  // tie, even below
  assert.equal(bits(roundToBfloat16(of(0x3f818000))), 0x3f820000);  // tie, even above
  assert.equal(bits(roundToBfloat16(of(0x3f808001))), 0x3f810000);  // above the tie
  assert.equal(roundToBfloat16(Infinity), Infinity);
  assert.ok(Number.isNaN(roundToBfloat16(NaN)));
});

test('generate(): the cache with fused RoPE agrees with rotating Q and K in JavaScript (cache without rope; full attention), on every build', async () => {
  const weights = buildWeights(7);
  for (const buildInfo of BUILDS) {
    const ma = await init(buildInfo.options);
    for (const window of [0, 5]) {
      const options = { ma, weights, prompt: 'Attention!', tokens: 10, dtype: 'float32', window };
      const cached = await generate(options);
      for (const other of [{ rope: 'js' }, { attention: 'full' }]) {
        const ref = await generate({ ...options, ...other });
        const what = `${ma.backend.build}, window ${window}, against ${JSON.stringify(other)}`;
        assert.deepEqual(cached.tokens, ref.tokens, what);
        assert.deepEqual(ref.lengths, Array(MODEL.layers).fill(10 + 10));
        for (const [s, logits] of cached.logits.entries())
          for (let n = 0; n < logits.length; n++) assert.ok(Math.abs(logits[n] - ref.logits[s][n]) < 1e-3, `${what}: step ${s} logit ${n}`);
      }
      assert.deepEqual(cached.lengths, Array(MODEL.layers).fill(10 + 10));
    }
  }
});

test('generate.mjs --rope js: Q and K rotated in JavaScript give the tokens of the fused rope', async () => {
  const [fused, js] = await Promise.all([example('--tokens', '6'), example('--tokens', '6', '--rope', 'js')]);
  assert.match(js.stdout, /RoPE \(theta 10000\): Q and K rotated in JavaScript, caches without rope/);
  assert.deepEqual(steps(js.stdout).map((x) => x.token), steps(fused.stdout).map((x) => x.token));
  assert.equal(steps(fused.stdout).length, 6);
});

test('sample(): 3 samples over forks of one prompt are each exactly a single-sequence generation', async () => {
  const weights = buildWeights(3);
  const ma = await init();
  const prompt = 'Forks share the prompt, then go their own ways..';  // 48 bytes: 3 pages of 16
  const run = await sample({ ma, weights, prompt, tokens: 6, samples: 3, temperature: 1.5 });
  assert.equal(new Set(run.texts).size, 3, 'the samples differ');
  for (let i = 0; i < 3; i++) {
    const alone = await generate({ ma, weights, prompt, tokens: 6, temperature: 1.5, sampleSeed: i, pageSize: 16 });
    assert.deepEqual(run.tokens[i], alone.tokens, `sample ${i}`);
  }
  // 3 pages of prompt shared by all, then each sample's own 4th page (positions 48..53).
  const page = run.promptBytes / MODEL.layers / 3;
  assert.equal(run.byteLength, MODEL.layers * (3 + 3) * page);
  assert.equal(run.unsharedBytes, MODEL.layers * 3 * 4 * page);
});

test('generate.mjs --samples 3: the memory the forks save is printed', async () => {
  const { stdout } = await example('--samples', '3', '--tokens', '3');
  assert.match(stdout, /sample 2: /);
  assert.match(stdout, /KV cache: \d+ bytes for 3 samples sharing the prompt's pages; \d+ bytes unshared \(3 copies\): saves \d+\.\d%/);
});

test('roundToHalf (the example\'s float16 rounding for the full-attention check) rounds to nearest even', () => {
  assert.equal(roundToHalf(1), 1);
  assert.equal(roundToHalf(1 + 2 ** -11), 1);                 // a tie: to even
  assert.equal(roundToHalf(1 + 3 * 2 ** -11), 1 + 2 ** -9);    // a tie: to even (up)
  assert.equal(roundToHalf(1 + 2 ** -11 + 2 ** -20), 1 + 2 ** -10);
  assert.equal(roundToHalf(-65504), -65504);
  assert.equal(roundToHalf(65520), Infinity);
  assert.equal(roundToHalf(2 ** -24), 2 ** -24);               // smallest subnormal
  assert.equal(roundToHalf(2 ** -26), 0);
  assert.equal(roundToHalf(3 * 2 ** -25), 2 ** -23);           // a subnormal tie: to even (up)
});

// The relaxed-SIMD builds' integer dot product over q8/q4 KV caches in a real browser (headless
// Debian Chromium through playwright-core, on the demo page as scripts/serve.mjs serves it):
// Chromium computes i32x4.relaxed_dot_i8x16_i7x16_add_s as specified, so the module's probe picks
// it (backend.quantDot 'relaxed-i8'), unless the engine lowers it without AVX-VNNI, where the
// module starts with 'relaxed-i8-i16x8' (faster there); the plain SIMD128 build keeps 'i16'. Decode results over q8
// and q4 caches (1, 2 and 4 query heads per KV head: the kernel's register blocks) match the
// float64 reference over read() as tests/js/quant-cache.test.mjs checks them in Node, with every
// dot product the module accepts. (Not bitwise across them: the engine may compile the kernel
// anew between calls, and f32x4.relaxed_madd need not fuse the same way in each tier.)
//
//   node --test tests/browser/quant-dot.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launchChromium, watchProblems } from './chromium.mjs';
import { start } from '../../scripts/serve.mjs';
import { referenceAttention, mismatch } from '../js/reference.mjs';

const ATOL = 1e-5;

let server;
let browser;

before(async () => {
  server = await start({ port: 0 });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.close();
});

// Runs in the page: per build, the backend, the modes setQuantDot accepts, and per case the cache's
// contents (read()), the queries and the output of each accepted mode.
function exercise() {
  return (async () => {
    const { init } = await import('/js/index.js');
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 1073741824) - 1;
    const uniform = (n) => Float32Array.from({ length: n }, random);
    // Queries q8 represents exactly (per block of 32: integers in [-127, 127] times 2^-e, one of
    // them 127): the kernel's own quantization of the query then changes nothing.
    const exactQueries = (rows, D) => {
      const q = new Float32Array(rows * D);
      for (let r = 0; r < rows; ++r)
        for (let b0 = 0; b0 < D; b0 += 32) {
          const step = 2 ** -(5 + Math.floor((random() + 1) * 2));
          for (let i = 0; i < 32; ++i) q[r * D + b0 + i] = step * Math.round(random() * 127);
          q[r * D + b0 + Math.floor((random() + 1) * 16)] = 127 * step;
        }
      return q;
    };
    const out = { userAgent: navigator.userAgent, builds: {} };
    const builds = { plain: { relaxed: false, threads: 1 }, relaxed: { relaxed: true, threads: 1 }, 'relaxed-threads': { relaxed: true, threads: 2 } };
    for (const [name, options] of Object.entries(builds)) {
      const ma = await init(options);
      const modes = ['i16', 'relaxed-i8-i16x8', 'relaxed-i8'].filter((m) => ma._m.setQuantDot(m));
      const cases = [];
      const H = 2, L = 200, D = 128;
      for (const dtype of ['q8', 'q4'])
        for (const group of [1, 2, 4]) {
          const cache = ma.createKVCache({ kvHeads: H, capacity: L, headDim: D, dtype, keyRotation: 'none' });
          cache.append({ data: uniform(H * L * D), shape: [1, H, L, D] }, { data: uniform(H * L * D), shape: [1, H, L, D] });
          const q = exactQueries(H * group, D);
          const outputs = {};
          for (const m of modes) {
            ma._m.setQuantDot(m);
            outputs[m] = Array.from(cache.attend({ data: q, shape: [1, H * group, 1, D] }).output.data);
          }
          ma._m.setQuantDot(ma.backend.quantDot);
          const r = cache.read(0);
          cases.push({ dtype, group, H, L, D, q: Array.from(q), k: Array.from(r.key.data), v: Array.from(r.value.data), outputs });
          cache.dispose();
        }
      out.builds[name] = { backend: { ...ma.backend }, lowering: ma._m.relaxedDotLowering(), modes, cases };
    }
    // i32x4.relaxed_dot_i8x16_i7x16_add_s(splat 127, splat 0xff, splat 0), lane 0, from a module
    // written here byte by byte: the engine's own answer, beside what the maskattn module read.
    const bytes = [0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 1, 5, 1, 0x60, 0, 1, 0x7f, 3, 2, 1, 0, 7, 5, 1, 1, 0x66, 0, 0,
      10, 23, 1, 21, 0, 0x41, 0xff, 0, 0xfd, 0x0f, 0x41, 0x7f, 0xfd, 0x0f, 0x41, 0, 0xfd, 0x11, 0xfd, 0x93, 2, 0xfd, 0x1b, 0, 0x0b];
    out.addFormOutOfRange = new WebAssembly.Instance(new WebAssembly.Module(new Uint8Array(bytes))).exports.f();
    return out;
  })();
}

test('Chromium: the relaxed builds use the relaxed 8-bit dot product; q8/q4 decode matches the reference', async () => {
  const problems = [];
  const page = await browser.newPage();
  await watchProblems(page, problems);
  await page.goto(server.url);
  await page.waitForFunction(() => window.__maskattnDemo?.ready === true, null, { timeout: 30000 });
  const out = await page.evaluate(exercise);
  await page.close();
  console.log(`${out.userAgent.match(/Chrome\/[\d.]+/)?.[0]}: ${Object.entries(out.builds).map(([n, b]) => `${n} ${b.backend.quantDot}`).join(', ')}`);
  assert.equal(out.builds.plain.backend.quantDot, 'i16');
  assert.deepEqual(out.builds.plain.modes, ['i16']);
  assert.equal(out.builds.plain.lowering, 'none');
  // How the engine lowers the add form, from its answer on bytes outside the i7 range (4 x 127 x 255
  // summed: x86 with AVX-VNNI; each pair saturated to int16: x86 without it; the byte as -1: ARM).
  const lowering = { [4 * 127 * 255]: 'x86-vnni', [2 * 32767]: 'x86-pairs-saturated', [4 * 127 * -1]: 'signed-bytes' }[out.addFormOutOfRange];
  assert.ok(lowering, `the add form on out-of-range bytes gave ${out.addFormOutOfRange}, no lowering the module knows`);
  for (const name of ['relaxed', 'relaxed-threads']) {
    assert.equal(out.builds[name].lowering, lowering, name);
    // Lowered to pmaddubsw + pmaddwd + add, the add form is slower than q4's i16x8 form and q8's
    // exact path (both of which mode 'relaxed-i8-i16x8' gives); elsewhere it is the first choice.
    assert.equal(out.builds[name].backend.quantDot, lowering === 'x86-pairs-saturated' ? 'relaxed-i8-i16x8' : 'relaxed-i8',
      `${name}: Chromium's i32x4.relaxed_dot_i8x16_i7x16_add_s is exact, lowered as ${lowering}`);
    assert.deepEqual(out.builds[name].modes, ['i16', 'relaxed-i8-i16x8', 'relaxed-i8'], name);
  }
  for (const [name, b] of Object.entries(out.builds))
    for (const c of b.cases) {
      const what = `${name} ${c.dtype}, ${c.group} query heads per KV head`;
      const want = referenceAttention({ data: Float32Array.from(c.q), shape: [1, c.H * c.group, 1, c.D] },
        { data: Float32Array.from(c.k), shape: [1, c.H, c.L, c.D] }, { data: Float32Array.from(c.v), shape: [1, c.H, c.L, c.D] }).output.data;
      let vmax = 0;
      for (const x of c.v) vmax = Math.max(vmax, Math.abs(x));
      // P·V over q8/q4 values in integers, weights rounded to 16 bits (docs/semantics.md).
      const pvRounding = (64 / 65534) * vmax;
      for (const m of b.modes)
        assert.equal(mismatch(Float32Array.from(c.outputs[m]), want, { atol: ATOL + pvRounding }), null, `${what}, ${m}`);
    }
  assert.deepEqual(problems, []);
});

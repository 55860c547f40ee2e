// Which build init() picks and what threads do: the relaxed-SIMD probe, the threaded build where
// threads can run and the single-threaded one elsewhere, the `threads` option (init and per call:
// attention, Workspace, KV cache), results that do not depend on the thread count (bitwise), the
// relaxed build against the reference, and a Node process that exits while the workers sleep.
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { BUILDS as TABLE, buildFiles, findBuild } from '../../js/builds.js';
import { init, relaxedSimdSupported, threadsSupported, simdSupported, MaskAttnRangeError, MaskAttnTypeError } from 'maskattn';
import { referenceAttention, rng, uniform, mismatch } from './reference.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
let freshCount = 0;
// A fresh copy of the module (its own instance cache): Node keys ES modules by URL, query included.
const freshModule = () => import(new URL(`../../js/load.js?builds=${++freshCount}`, import.meta.url).href);

function tensors(s, seed) {
  const random = rng(seed);
  const make = (H, L, D) => ({ data: uniform(random, s.B * H * L * D), shape: [s.B, H, L, D] });
  return { q: make(s.Hq, s.Lq, s.D), k: make(s.Hkv, s.Lk, s.D), v: make(s.Hkv, s.Lk, s.D), random };
}

async function rejects(promise, Type, argument) {
  let error = null;
  try {
    await promise;
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof Type, `expected a ${Type.name} for ${argument}, got ${error}`);
  assert.equal(error.argument, argument, error.message);
  return error;
}

// ------------------------------------------------------------------------------------ the shipped .wasm files

// Each shipped module is what its row says (tests/wasm/check_artifact.sh reads its wasm2wat text): no
// SIMD instruction at all in the scalar build (engines without SIMD128 must validate it), a SIMD128
// kernel in the others, fused multiply-adds in the relaxed ones. This is the scalar build's only
// check of its own kind: its C++ suites run in the SIMD128 build, whose other objects have its flags.
test('the dist/ modules: scalar has no SIMD instruction, the SIMD builds a SIMD128 kernel, the relaxed ones relaxed_madd', () => {
  const check = fileURLToPath(new URL('../wasm/check_artifact.sh', import.meta.url));
  for (const b of TABLE) {
    const wasm = fileURLToPath(new URL(`../../dist/${b.name}.wasm`, import.meta.url));
    const mode = !b.simd ? 'scalar' : b.relaxed ? 'relaxed' : 'simd';
    let out;
    try {
      out = execFileSync('bash', [check, wasm, mode], { encoding: 'utf8' });
    } catch (e) {
      assert.fail(`${b.name} (${mode}): ${e.stdout}${e.stderr}`);
    }
    assert.match(out, /PASS/, b.name);
  }
});

// ------------------------------------------------------------------------------------ choosing a build

test('the table of builds (js/builds.js): names, flags, URLs and files agree; the types and docs name every build', () => {
  const root = new URL('../../', import.meta.url);
  assert.equal(new Set(TABLE.map((b) => `${b.simd}/${b.relaxed}/${b.threads}`)).size, TABLE.length, 'one build per set of features');
  for (const b of TABLE) {
    assert.equal(findBuild(b), b);
    // CMake names the build after its flags (cmake/maskattnWasmBuild.cmake): this is its rule.
    assert.equal(b.name, `maskattn-${b.simd ? 'simd' : 'scalar'}${b.relaxed ? '-relaxed' : ''}${b.threads ? '-threads' : ''}`);
    const on = (flag) => b.cmake.includes(`-DMASKATTN_WASM_${flag}=ON`);
    assert.deepEqual([on('SIMD'), on('RELAXED'), on('THREADS')], [b.simd, b.relaxed, b.threads], `${b.name}: CMake flags`);
    assert.ok(!b.relaxed || b.simd, `${b.name}: relaxed SIMD extends SIMD128`);
    // The literal URLs (for bundlers) name the build's own files in dist/.
    const urls = b.urls();
    const named = Object.values(urls).map((u) => u.pathname.replace(/^.*\/dist\//, ''));
    assert.ok(Object.values(urls).every((u) => u.href.startsWith(new URL('dist/', root).href)), b.name);
    assert.deepEqual(named, buildFiles(b).filter((f) => !f.includes('.node.')), `${b.name}: URLs`);
    assert.equal(Boolean(urls.worker), b.threads);
    assert.ok(['bench', 'threaded', true, false].includes(b.ctest));
    assert.ok(b.ctest !== 'threaded' || b.threads, `${b.name}: only a threaded build runs the threaded suites alone`);
  }
  // index.d.ts cannot import the table: its BuildName must list the same names.
  const types = readFileSync(new URL('js/index.d.ts', root), 'utf8');
  const union = /export type BuildName = ([^;]+);/.exec(types)[1].match(/'[^']+'/g).map((x) => x.slice(1, -1));
  assert.deepEqual(union.sort(), TABLE.map((b) => b.name).sort(), 'BuildName in index.d.ts');
  const docs = readFileSync(new URL('docs/javascript.md', root), 'utf8');
  for (const b of TABLE) assert.ok(docs.includes(`| \`${b.name}\` |`), `docs/javascript.md's table of builds has ${b.name}`);
});

test('Node 20 (relaxed SIMD flag on): SIMD128, relaxed SIMD and threads are all available', () => {
  assert.equal(simdSupported(), true);
  assert.equal(relaxedSimdSupported(), true);
  assert.equal(threadsSupported(), true);
});

test('init() picks the relaxed, threaded build here; relaxed: false and threads: 1 pick the others', async () => {
  const best = await init();
  const cores = Math.min(availableParallelism(), 16);  // threads: 'auto' = the cores Node reports, at most 16
  assert.equal(best.backend.build, cores > 1 ? 'maskattn-simd-relaxed-threads' : 'maskattn-simd-relaxed');
  assert.equal(best.backend.relaxed, true);
  assert.equal(best.backend.threads, cores);
  assert.equal((await init({ relaxed: false })).backend.build, 'maskattn-simd-threads');
  assert.equal((await init({ threads: 1 })).backend.build, 'maskattn-simd-relaxed');
  assert.equal((await init({ relaxed: false, threads: 1 })).backend.build, 'maskattn-simd');
  assert.equal((await init({ simd: false, threads: 4 })).backend.build, 'maskattn-scalar', 'no threaded scalar build');
  // One instance per build and thread count.
  assert.equal(await init({ threads: 'auto' }), best);
  const three = await init({ threads: 3 });
  assert.notEqual(three, best);
  assert.equal(three.backend.threads, 3);
  assert.equal(await init({ threads: 3 }), three);
});

test('engines without relaxed SIMD: auto picks the plain build, relaxed: true rejects', async () => {
  const m = await freshModule();
  const validate = WebAssembly.validate;
  // The relaxed probe is the only module with opcode 0xfd 0x85 0x02 (f32x4.relaxed_madd).
  WebAssembly.validate = (bytes) => {
    const b = Array.from(bytes);
    return b.some((x, i) => x === 253 && b[i + 1] === 133 && b[i + 2] === 2) ? false : validate(bytes);
  };
  try {
    assert.equal(m.relaxedSimdSupported(), false);
    assert.equal(m.simdSupported(), true);
    const ma = await m.init({ threads: 2 });
    assert.equal(ma.backend.build, 'maskattn-simd-threads');
    assert.equal(ma.backend.relaxed, false);
    const error = await rejects(m.init({ relaxed: true }), RangeError, 'relaxed');
    assert.match(error.message, /relaxed SIMD/);
  } finally {
    WebAssembly.validate = validate;
  }
});

test('where threads cannot run (no SharedArrayBuffer), init() loads the single-threaded build', async () => {
  const m = await freshModule();
  const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'SharedArrayBuffer');
  delete globalThis.SharedArrayBuffer;
  try {
    assert.equal(m.threadsSupported(), false);
    for (const threads of ['auto', 4]) {
      const ma = await m.init({ threads });
      assert.equal(ma.backend.threads, 1, `threads: ${threads}`);
      assert.equal(ma.backend.build, 'maskattn-simd-relaxed');
    }
  } finally {
    Object.defineProperty(globalThis, 'SharedArrayBuffer', descriptor);
  }
});

test('init rejects bad relaxed/threads options', async () => {
  const fails = async (options, Type, argument) => {
    let error = null;
    try {
      await init(options);
    } catch (e) {
      error = e;
    }
    assert.ok(error instanceof Type, `${JSON.stringify(options)}: expected a ${Type.name}, got ${error}`);
    assert.ok(error instanceof (Type === TypeError ? MaskAttnTypeError : MaskAttnRangeError));
    assert.equal(error.argument, argument);
  };
  await fails({ relaxed: 'yes' }, TypeError, 'relaxed');
  await fails({ threads: '2' }, TypeError, 'threads');
  await fails({ threads: 0 }, RangeError, 'threads');
  await fails({ threads: 1.5 }, RangeError, 'threads');
  await fails({ threads: 1e6 }, RangeError, 'threads');
  await fails({ simd: false, relaxed: true }, RangeError, 'relaxed');
});

test('the Node glue of the threaded builds leaves globalThis.Worker as it found it', async () => {
  const m = await freshModule();
  assert.equal('Worker' in globalThis, false);
  await m.init({ relaxed: false, threads: 2 });
  assert.equal('Worker' in globalThis, false);
});

test('a Node process using the threaded build exits by itself (the sleeping workers do not hold it)', () => {
  const script = `
    import { init } from 'maskattn';
    const ma = await init({ threads: 2 });
    const t = (n, shape) => ({ data: Float32Array.from({ length: n }, (_, i) => Math.sin(i)), shape });
    const q = t(4 * 512 * 64, [1, 4, 512, 64]);
    const r = ma.attention(q, q, q, { causal: true, returnStats: true });
    console.log(JSON.stringify({ build: ma.backend.build, threadsUsed: r.stats.threadsUsed }));
  `;
  const stdout = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: here, encoding: 'utf8', timeout: 30000 });
  assert.deepEqual(JSON.parse(stdout), { build: 'maskattn-simd-threads', threadsUsed: 2 });
});

// ------------------------------------------------------------------------------------ threads per call

for (const buildInfo of BUILDS.filter((b) => b.build.endsWith('threads'))) {
  describe(`${buildInfo.name}: the threads option`, () => {
    const prefill = { B: 2, Hq: 4, Hkv: 2, Lq: 256, Lk: 320, D: 64 };
    const decode = { B: 1, Hq: 8, Hkv: 2, Lq: 1, Lk: 4096, D: 64 };

    test('results do not depend on the thread count (bitwise), and threads really run', async () => {
      const ma = await init(buildInfo.options);
      assert.equal(ma.backend.threads, 2);
      for (const [name, s, options] of [
        ['prefill, causal + key lengths + window', prefill, { causal: true, keyLengths: [320, 200], window: [100, 0] }],
        ['prefill, dense', prefill, {}],
        ['decode (split-K across threads)', decode, { keyLengths: [3000] }],
      ]) {
        const { q, k, v } = tensors(s, s.Lk + s.Lq);
        const run = (threads) => ma.attention(q, k, v, { ...options, threads, returnLse: true, returnStats: true });
        const one = run(1), two = run(2), many = run(64), fallback = ma.attention(q, k, v, { ...options, returnLse: true, returnStats: true });
        assert.equal(one.stats.threadsUsed, 1, name);
        assert.equal(two.stats.threadsUsed, 2, `${name}: two threads pay off here`);
        assert.equal(many.stats.threadsUsed, 2, `${name}: capped to the module's ${ma.backend.threads}`);
        assert.equal(fallback.stats.threadsUsed, 2, `${name}: by default a call may use all the module has`);
        for (const r of [two, many, fallback]) {
          assert.deepEqual(r.output.data, one.output.data, `${name}: output`);
          assert.deepEqual(r.lse.data, one.lse.data, `${name}: lse`);
        }
      }
    });

    test('small problems stay on one thread (the cost model), whatever threads says', async () => {
      const ma = await init(buildInfo.options);
      const { q, k, v } = tensors({ B: 1, Hq: 1, Hkv: 1, Lq: 8, Lk: 8, D: 8 }, 5);
      assert.equal(ma.attention(q, k, v, { threads: 2, returnStats: true }).stats.threadsUsed, 1);
    });

    test('threads against the float64 reference (relaxed: fused multiply-add within the bound)', async () => {
      const ma = await init(buildInfo.options);
      const s = { ...prefill, Lq: 200, Lk: 200, D: 40 };
      const { q, k, v, random } = tensors(s, 99);
      const allowed = { data: Uint8Array.from({ length: s.Lq * s.Lk }, () => (random() < 0.8 ? 1 : 0)), shape: [s.Lq, s.Lk] };
      const options = { causal: true, queryLengths: [200, 150], allowed, fullyMasked: 'uniform' };
      const result = ma.attention(q, k, v, { ...options, threads: 2, returnWeights: true, returnLse: true, returnStats: true });
      assert.equal(result.stats.threadsUsed, 2);
      const ref = referenceAttention(q, k, v, options);
      for (const part of ['output', 'weights', 'lse'])
        assert.equal(mismatch(result[part].data, ref[part].data, { atol: 1e-5 }), null, part);
    });

    test('Workspace.run and KVCache.attend take threads too', async () => {
      const ma = await init(buildInfo.options);
      const { q, k, v } = tensors(prefill, 7);
      const ws = ma.createWorkspace({ q: q.shape, k: k.shape, v: v.shape });
      try {
        ws.q.set(q.data); ws.k.set(k.data); ws.v.set(v.data);
        assert.equal(ws.run({ causal: true, threads: 1, returnStats: true }).stats.threadsUsed, 1);
        const one = ws.output.slice();
        assert.equal(ws.run({ causal: true, threads: 2, returnStats: true }).stats.threadsUsed, 2);
        assert.deepEqual(ws.output, one);
      } finally {
        ws.dispose();
      }
      const d = tensors(decode, 8);
      const cache = ma.createKVCache({ batch: 1, kvHeads: decode.Hkv, capacity: decode.Lk, headDim: decode.D, dtype: 'float16' });
      try {
        cache.append(d.k, d.v);
        const one = cache.attend(d.q, { threads: 1, returnStats: true });
        const two = cache.attend(d.q, { threads: 2, returnStats: true });
        assert.equal(one.stats.threadsUsed, 1);
        assert.equal(two.stats.threadsUsed, 2);
        assert.deepEqual(two.output.data, one.output.data);
      } finally {
        cache.dispose();
      }
    });

    test('the per-call threads option is checked', async () => {
      const ma = await init(buildInfo.options);
      const { q, k, v } = tensors({ B: 1, Hq: 1, Hkv: 1, Lq: 2, Lk: 2, D: 2 }, 1);
      for (const [threads, Type] of [[0, MaskAttnRangeError], [-1, MaskAttnRangeError], [1.5, MaskAttnRangeError], ['2', MaskAttnTypeError], [true, MaskAttnTypeError]]) {
        assert.throws(() => ma.attention(q, k, v, { threads }), (e) => e instanceof Type && e.argument === 'threads', `threads: ${threads}`);
      }
    });
  });
}

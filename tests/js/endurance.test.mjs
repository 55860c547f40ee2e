// WebAssembly endurance: many calls through every path (Workspace, KV cache, attention()), errors
// among them, and the wasm heap measured before and after: the bytes malloc has handed out
// (heapInUse, from the binding's mallinfo) and the size of wasm memory must not change. Then the
// edges of a module's life: an allocation too large for wasm memory fails with a RangeError and
// the next call works; dispose() twice is harmless; any use after it is a clear error.
// Small shapes, so the whole file takes seconds.
import { BUILDS } from './builds.mjs';  // first: turns on relaxed SIMD in Node 20
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { init } from 'maskattn';

const seq = (n, f) => Float32Array.from({ length: n }, (_, i) => f(i));
const tensor = (shape, f) => ({ data: seq(shape.reduce((a, b) => a * b, 1), f), shape });
const heap = (ma) => ({ inUse: ma._m.heapInUse(), size: ma._m.HEAPU8.byteLength });

const ENDURANCE = BUILDS.filter((b) => b.build === 'maskattn-simd');
const LIFE = BUILDS;  // every build, threaded ones included

for (const build of ENDURANCE) {
  describe(`${build.name} build: endurance`, () => {
    let ma;
    before(async () => {
      ma = await init(build.options);
    });

    test('100,000 Workspace runs, 100,000 KV-cache calls, 10,000 attention() calls: the heap stays flat', () => {
      const ws = ma.createWorkspace({ q: [1, 2, 8, 8], k: [1, 1, 24, 8], v: [1, 1, 24, 8], returnLse: true });
      ws.q.set(seq(128, Math.sin));
      ws.k.set(seq(192, Math.cos));
      ws.v.set(seq(192, (i) => i / 50));
      const cache = ma.createKVCache({ batch: 2, kvHeads: 1, capacity: 40, headDim: 8, dtype: 'float16', window: 32 });
      const token = [tensor([2, 1, 1, 8], Math.sin), tensor([2, 1, 1, 8], Math.cos)];
      const qStep = tensor([2, 2, 1, 8], (i) => Math.sin(i / 3));
      const q = tensor([1, 2, 8, 8], Math.sin), k = tensor([1, 1, 24, 8], Math.cos), v = tensor([1, 1, 24, 8], (i) => i / 50);
      const allowed = { data: Uint8Array.from({ length: 24 }, (_, j) => (j % 5 ? 1 : 0)), shape: [24] };
      const wsOptions = [{ causal: true }, { window: [4, 0] }, { returnStats: true }, { keyLengths: [20], alibiSlopes: [0.5, 0.25] }];
      const fails = (fn) => assert.throws(fn, (e) => e instanceof RangeError || e instanceof TypeError);

      const round = (n) => {
        for (let i = 0; i < n; ++i) {
          ws.run(wsOptions[i % 4]);
          if (i % 1000 === 999) fails(() => ws.run({ window: [-5, 0] }));  // errors (C++ messages) on the way
        }
        for (let i = 0; i < n / 2; ++i) {
          cache.append(token[0], token[1]);
          cache.attend(qStep, i % 3 ? {} : { returnLse: true, softcap: 20 });
          if (i % 997 === 996) fails(() => cache.append(token[0], token[1], { counts: [2, 0] }));
          if (i % 5000 === 4999) cache.truncate(cache.lengths.map((n) => n - 1));  // roll one token back
          if (i % 20000 === 19999) cache.reset();
        }
        for (let i = 0; i < n / 10; ++i) {
          ma.attention(q, k, v, i % 2 ? { causal: true, allowed } : { returnWeights: true, segments: { query: [0, 0, 0, 0, 1, 1, 1, 1], key: Int32Array.from({ length: 24 }, (_, j) => (j < 12 ? 0 : 1)) } });
          if (i % 100 === 99) fails(() => ma.attention(q, k, v, { keyLengths: [25] }));
        }
      };
      round(2000);  // warm-up: scratch blocks, the library's per-thread workspaces, error strings
      const before = heap(ma);
      const started = performance.now();
      round(100_000);
      const seconds = (performance.now() - started) / 1000;
      const after = heap(ma);
      const state = Array.from(ws.output);
      ws.dispose();
      cache.dispose();
      const disposed = heap(ma);
      console.log(`# heap in use before ${before.inUse} B, after ${after.inUse} B (${seconds.toFixed(1)} s); memory ${before.size} -> ${after.size} B; after dispose ${disposed.inUse} B`);
      assert.equal(after.inUse, before.inUse, 'bytes in use after 210,000 calls (a leak)');
      assert.equal(after.size, before.size, 'wasm memory grew');
      assert.ok(state.every(Number.isFinite));
      assert.ok(disposed.inUse < before.inUse, 'disposing the workspace and the cache frees their memory');
    });
  });
}

for (const build of LIFE) {
  describe(`${build.name} build: a module's life`, () => {
    let ma;
    before(async () => {
      ma = await init(build.options);
    });

    test('an allocation too large for wasm memory fails with a RangeError; the next call works; nothing leaks', () => {
      const q = tensor([1, 2, 3, 4], Math.sin), k = tensor([1, 1, 5, 4], Math.cos), v = tensor([1, 1, 5, 4], Math.tan);
      const expected = ma.attention(q, k, v, { causal: true }).output.data;
      const before = heap(ma).inUse;
      // Over the library's limit: refused by name before anything is allocated.
      assert.throws(() => ma.createWorkspace({ q: [1, 1, 1, 1], k: [1, 1, 2 ** 29, 1], v: [1, 1, 1, 1] }),
        (e) => e instanceof RangeError && e.argument === 'k' && /2147483647/.test(e.message));
      // Within the limit, more than wasm memory can hold: 3 x 1.9 GB.
      const blocks = [];
      let error = null;
      try {
        for (let n = 0; n < 3; ++n) blocks.push(ma.createWorkspace({ q: [1, 1, 1, 1], k: [1, 1, 475_000_000, 1], v: [1, 1, 1, 1] }));
      } catch (e) {
        error = e;
      } finally {
        blocks.forEach((b) => b.dispose());
      }
      assert.ok(error instanceof RangeError && error.argument === 'memory' && /out of memory/.test(error.message), String(error));
      assert.ok(blocks.length < 3);
      assert.deepEqual(ma.attention(q, k, v, { causal: true }).output.data, expected, 'the next call works');
      assert.equal(heap(ma).inUse, before, 'the failed allocations left nothing behind');
    });

    test('dispose() twice is harmless; any use after dispose() is a clear error', () => {
      const ws = ma.createWorkspace({ q: [1, 1, 2, 4], k: [1, 1, 3, 4], v: [1, 1, 3, 4] });
      const cache = ma.createKVCache({ batch: 1, kvHeads: 1, capacity: 4, headDim: 4 });
      const before = heap(ma).inUse;
      ws.dispose();
      cache.dispose();
      const freed = heap(ma).inUse;
      assert.ok(freed < before);
      ws.dispose();
      cache.dispose();
      assert.equal(heap(ma).inUse, freed, 'a second dispose() frees nothing more');
      const clear = (argument) => (e) => e instanceof RangeError && e.argument === argument && /used after dispose\(\)/.test(e.message);
      for (const use of [() => ws.run(), () => ws.q, () => ws.output])
        assert.throws(use, clear('workspace'));
      for (const use of [() => cache.append(tensor([1, 1, 1, 4], Math.sin), tensor([1, 1, 1, 4], Math.sin)),
        () => cache.attend(tensor([1, 1, 1, 4], Math.sin)), () => cache.truncate([0]), () => cache.reset(), () => cache.lengths, () => cache.byteLength])
        assert.throws(use, clear('cache'));
      assert.equal(heap(ma).inUse, freed, 'failed uses allocate nothing');
    });
  });
}

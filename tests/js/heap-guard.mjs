// Watching a module's WebAssembly heap around a call that must fail.
//
//   const guard = heapGuard(ma);          // canaries, a witness Workspace and a witness KV cache
//   const run = guard.run(() => ma.attention(...));
//   guard.check(run);                     // assertions; run.error is what the call threw
//
// What "nothing was written" means here, checked after every run:
//   - canary blocks (many sizes, interleaved with freed holes where a call's small blocks land, so
//     that an overflow past one of them runs into a canary) hold their patterns;
//   - the witness workspace's q, k, v and output, and the witness caches' lengths, answers,
//     contents (read()) and page tables, are what they were: a float32 cache, a q8 ring with sink
//     tokens, and a paged cache of 4-bit keys and 8-bit values whose sequence 1 is a fork of
//     sequence 0 (the newer surfaces: a write past a block of theirs shows up here);
//   - every block the call took from JavaScript was freed (one may remain: a cache's own scratch);
//   - wasm memory did not grow;
//   - and when the call was rejected by the JavaScript layer before it allocated or called into
//     wasm, every byte of wasm memory is what it was.
// (A call the C++ library rejects writes the library's error message into memory of its own, so
// for those the byte-for-byte comparison is replaced by the checks above.)
import assert from 'node:assert/strict';

// The module functions through which JavaScript enters wasm.
const ENTRY_POINTS = ['attention', 'kvCreate', 'kvDestroy', 'kvAppend', 'kvAttend', 'kvTruncate', 'kvReset', 'kvFork', 'kvKeep', 'kvPages', 'mergeAttention'];
const CANARY_SIZES = [1, 8, 16, 24, 40, 64, 100, 256, 1000, 4096, 20000];

export function heapGuard(ma) {
  const m = ma._m;
  const canaries = [];
  let seed = 1;
  // Canary blocks of every size, each beside a freed hole (where a call's small blocks land).
  const layCanaries = (copies) => {
    const holes = [];
    for (const size of CANARY_SIZES) {
      for (let i = 0; i < copies; ++i) {
        const c = m._malloc(size) >>> 0;
        const h = m._malloc(size) >>> 0;
        const pattern = new Uint8Array(size);
        for (let n = 0; n < size; ++n) pattern[n] = (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24;
        m.HEAPU8.set(pattern, c);
        canaries.push({ p: c, pattern });
        holes.push(h);
      }
    }
    holes.forEach((h) => m._free(h));
  };
  layCanaries(6);

  // Witnesses: a workspace and a KV cache with known contents and answers.
  const ws = ma.createWorkspace({ q: [1, 2, 3, 4], k: [1, 1, 5, 4], v: [1, 1, 5, 4] });
  ws.q.set(Float32Array.from({ length: 24 }, (_, i) => Math.sin(i)));
  ws.k.set(Float32Array.from({ length: 20 }, (_, i) => Math.cos(i)));
  ws.v.set(Float32Array.from({ length: 20 }, (_, i) => i / 7));
  ws.run({ causal: true });
  const wsState = () => ['q', 'k', 'v', 'output'].map((name) => Array.from(ws[name]));
  const wsBefore = wsState();

  const cache = ma.createKVCache({ batch: 2, kvHeads: 1, capacity: 8, headDim: 4 });
  const kv = (T, f) => ({ data: Float32Array.from({ length: 2 * T * 4 }, (_, i) => f(i)), shape: [2, 1, T, 4] });
  cache.append(kv(7, Math.sin), kv(7, Math.cos), { counts: [3, 7] });
  const cacheQ = { data: Float32Array.from({ length: 16 }, (_, i) => Math.sin(3 * i)), shape: [2, 2, 1, 4] };
  // The newer surfaces: a q8 ring (window 4, 1 sink token, holding 7 and 3) and a paged cache
  // (4-bit keys, 8-bit values, pages of 2) whose sequence 1 is a fork of sequence 0.
  const ring = ma.createKVCache({ batch: 2, kvHeads: 1, capacity: 6, headDim: 4, dtype: 'q8', window: 4, sinkTokens: 1 });
  ring.append(kv(7, Math.cos), kv(7, Math.sin), { counts: [7, 3] });
  const paged = ma.createKVCache({ batch: 2, kvHeads: 1, capacity: 8, headDim: 4, keyDtype: 'q4', valueDtype: 'q8', pageSize: 2 });
  paged.append(kv(5, (i) => Math.sin(i / 3)), kv(5, (i) => Math.cos(i / 5)), { counts: [5, 0] });
  paged.fork(0, 1);
  const witnesses = [cache, ring, paged];
  const cacheState = () => witnesses.map((c) => ({
    lengths: Array.from(c.lengths),
    byteLength: c.byteLength,
    output: Array.from(c.attend(cacheQ).output.data),
    contents: [0, 1].map((b) => {
      const r = c.read(b);
      return [Array.from(r.key.data), Array.from(r.value.data), r.start, r.sinks, Array.from(c.pages(b))];
    }),
  }));
  const cacheBefore = cacheState();
  // More canaries, laid after the witnesses: blocks beside theirs.
  layCanaries(3);

  const memory = () => m.HEAPU8;

  return {
    ws,
    cache,
    ring,
    paged,
    kv,
    cacheQ,
    /** Runs fn (which should throw), recording wasm entries, blocks and the heap before it. */
    run(fn) {
      const heap = memory();
      const snapshot = heap.slice();
      const byteLength = heap.byteLength;
      const record = { error: null, wasmCalls: 0, mallocs: [], frees: [], snapshot, byteLength, returned: undefined };
      const saved = {};
      for (const name of [...ENTRY_POINTS, '_malloc', '_free']) saved[name] = m[name];
      for (const name of ENTRY_POINTS)
        m[name] = (...args) => {
          record.wasmCalls += 1;
          return saved[name](...args);
        };
      m._malloc = (n) => {
        const p = saved._malloc(n);
        record.mallocs.push({ p: p >>> 0, n });
        return p;
      };
      m._free = (p) => {
        record.frees.push(p >>> 0);
        return saved._free(p);
      };
      try {
        record.returned = fn();
      } catch (error) {
        record.error = error;
      } finally {
        Object.assign(m, saved);
      }
      return record;
    },
    /** The assertions of the file comment, for a run made by run(). */
    check(record, label, otherCaches = []) {
      const heap = memory();
      assert.equal(heap.byteLength, record.byteLength, `${label}: wasm memory grew`);
      for (const { p, pattern } of canaries) {
        const now = heap.subarray(p, p + pattern.length);
        if (!Buffer.from(now.buffer, now.byteOffset, now.length).equals(Buffer.from(pattern.buffer)))
          assert.fail(`${label}: canary block at ${p} (${pattern.length} bytes) was overwritten`);
      }
      const kept = record.mallocs.filter(({ p }) => p && !record.frees.includes(p)).map(({ p }) => p);
      const scratch = [...witnesses, ...otherCaches].map((c) => c._scratch);
      assert.ok(kept.length === 0 || (kept.length === 1 && scratch.includes(kept[0])),
        `${label}: blocks not freed: ${kept.join(', ')}`);
      if (record.wasmCalls === 0 && record.mallocs.length === 0) {
        const before = Buffer.from(record.snapshot.buffer, 0, record.snapshot.length);
        const after = Buffer.from(heap.buffer, heap.byteOffset, heap.length);
        if (!before.equals(after)) {
          let n = 0;
          while (before[n] === after[n]) ++n;
          assert.fail(`${label}: rejected before wasm was called, yet wasm memory changed at byte ${n}`);
        }
      }
      assert.deepEqual(wsState(), wsBefore, `${label}: the witness workspace changed`);
      assert.deepEqual(cacheState(), cacheBefore, `${label}: a witness cache changed`);
    },
    dispose() {
      ws.dispose();
      witnesses.forEach((c) => c.dispose());
      canaries.forEach(({ p }) => m._free(p));
    },
  };
}

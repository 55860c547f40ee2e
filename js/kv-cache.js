// KVCache: keys and values of earlier tokens held in wasm memory (the C++ maskattn::KVCache, by
// handle), for token-by-token generation: append, attend, truncate, reset, dispose. Its
// configuration is read by plan.js's CACHE_CONFIG table; attend() plans like attention() (plan.js)
// over the cache's logical K/V; every call goes through the module's Wire (wasm-call.js).
import { MaskAttnRangeError, MaskAttnTypeError, describe } from './errors.js';
import { check4, checkLayout, count, ownFields, shapeOf, toInt32, toInt32List } from './read.js';
import { cacheDtypes, callOptions, logical, planCache, planCall } from './plan.js';

const APPEND_OPTIONS = new Set(['counts', 'layout']);
// Calls needing at most this many bytes of inputs and outputs reuse the cache's own scratch block
// (decode steps: no malloc per token); larger ones (a prompt's append, a long prefill) take a block
// for the call only, so one big call does not pin its memory for the cache's life.
const SCRATCH_KEEP = 1 << 20;

const align16 = (bytes) => Math.ceil(bytes / 16) * 16;

/**
 * Keys and values of earlier tokens, held in wasm memory, for token-by-token generation.
 * Create with `ma.createKVCache(config)`; `dispose()` frees it (twice is harmless; any other use
 * after dispose() throws). Semantics: docs/semantics.md ("KV cache").
 *
 *   const cache = ma.createKVCache({ batch: 1, kvHeads: 8, capacity: 4096, headDim: 128 });
 *   cache.append(k, v);                       // k [B, Hkv, T, D], v [B, Hkv, T, Dv]
 *   const { output } = cache.attend(q);      // q [B, Hq, Lq, D]: the newest Lq positions; causal
 */
export class KVCache {
  /** Made by MaskAttn.createKVCache(config). */
  constructor(wire, fields) {
    this._dtypes = cacheDtypes(wire.m);
    const { config, args } = planCache(fields, this._dtypes);
    this._wire = wire;
    this._m = wire.m;
    // Ownership: the C++ KVCache (and its K/V storage) belongs to the module's handle table until
    // dispose(); this object holds its handle. The scratch block is this object's (see _block).
    const handle = this._m.kvCreate(args);
    if (handle < 0) wire.check(-handle);
    this._handle = handle;
    this._scratch = 0;
    this._scratchBytes = 0;
    if (config.rope?.scaling) {  // resolved: the attention factor the library derives (or was given)
      const { ropeTheta, ropeDims, ropeLayout, ropeOffset, ropeScaling } = args;
      const attentionFactor = this._m.ropeAttentionFactor(ropeTheta, ropeDims, ropeLayout, ropeOffset, ropeScaling, config.headDim);
      config.rope = Object.freeze({ ...config.rope, scaling: Object.freeze({ ...config.rope.scaling, attentionFactor }) });
    }
    /** The configuration, with defaults filled in (valueDim = headDim, window 0 = none, rope's scaling resolved). */
    this.config = Object.freeze(config);
  }

  _live() {
    if (!this._handle) throw new MaskAttnRangeError('cache', 'used after dispose()');
  }

  // A block of `bytes` for one call's inputs and outputs: the cache's scratch when the call is
  // small (grown as needed, kept until dispose()), else a block belonging to the call (alloc).
  // Memory may grow here: take heap views afterwards.
  _block(bytes, alloc) {
    if (bytes <= this._scratchBytes) return this._scratch;
    if (bytes > SCRATCH_KEEP) return alloc(bytes);
    const size = Math.min(Math.max(bytes, 2 * this._scratchBytes, 4096), SCRATCH_KEEP);
    const p = this._m._malloc(size) >>> 0;
    if (p === 0) throw new MaskAttnRangeError('memory', `out of memory: could not allocate ${size} bytes in WebAssembly memory`);
    if (this._scratch) this._m._free(this._scratch);
    this._scratch = p;
    this._scratchBytes = size;
    return p;
  }

  /**
   * What each sequence holds (absolute positions: with a window, tokens seen): a fresh Int32Array
   * [batch] on every read, a copy the caller owns (not a view of wasm memory).
   */
  get lengths() {
    this._live();
    const B = this.config.batch;
    const p = this._m.kvLengths(this._handle) >>> 0;
    return B === 0 ? new Int32Array(0) : this._m.HEAP32.slice(p >>> 2, (p >>> 2) + B);
  }

  /**
   * Bytes of K/V storage in wasm memory: constant for a contiguous cache; a paged cache's pages
   * (pageSize > 0), which grow as sequences do and are shared by forks.
   */
  get byteLength() {
    this._live();
    return this._m.kvByteLength(this._handle);
  }

  /**
   * Writes new positions at each sequence's current length, in place. k [B, Hkv, T, D] and
   * v [B, Hkv, T, Dv] ([B, T, Hkv, D] with layout 'blhd'): Float32Array, or for float16 and
   * bfloat16 caches also Uint16Array (that format's bits: IEEE halves, or a float's upper 16 bits;
   * stored as given; float input is rounded to nearest even); k and
   * v of the same kind. options.counts[b] <= T: sequence b takes its first counts[b] positions.
   * Appending past capacity (no window) is a RangeError naming the sequence; nothing is written.
   */
  append(k, v, options = {}) {
    this._live();
    const opts = ownFields(options, 'options', APPEND_OPTIONS, 'an object');
    const layout = checkLayout(opts.layout);
    const wire = this._wire;
    const kDims = check4(shapeOf(k, 'k'), 'k', layout, wire.limits);
    const vDims = check4(shapeOf(v, 'v'), 'v', layout, wire.limits);
    const halves = this._dtypes.byName.get(this.config.keyDtype).rawBits && this.config.valueDtype === this.config.keyDtype;
    const kData = wire.input(k, 'k', kDims, halves ? ['Float32Array', 'Uint16Array'] : ['Float32Array']);
    const half = kData.kind === 'Uint16Array';
    const vData = wire.input(v, 'v', vDims, [kData.kind]);
    const counts = toInt32(opts.counts, 'counts', this.config.batch);
    const kBytes = align16(kData.bytes);
    const vBytes = align16(vData.bytes);
    const m = this._m;
    wire.scoped((alloc) => {
      const base = this._block(kBytes + vBytes + (counts ? counts.byteLength : 0), alloc);
      const ptr = { k: base, v: base + kBytes, counts: counts ? base + kBytes + vBytes : 0 };
      wire.copyIn(ptr.k, kData);
      wire.copyIn(ptr.v, vData);
      if (counts) m.HEAP32.set(counts, ptr.counts >>> 2);
      const [kl, vl] = [logical(kDims, layout), logical(vDims, layout)];
      wire.invoke({
        k: ptr.k, v: ptr.v, kB: kl[0], kH: kl[1], kL: kl[2], kD: kl[3], vB: vl[0], vH: vl[1], vL: vl[2], vD: vl[3],
        layout: layout === 'blhd' ? 1 : 0, kSize: kData.count, vSize: vData.count, half, counts: ptr.counts,
        countsSize: counts ? counts.length : 0,
      }, (address) => m.kvAppend(this._handle, address));
    });
  }

  /**
   * Attention of q [B, Hq, Lq, D] (the newest Lq positions of each sequence: query i of sequence b
   * is at position lengths[b] - Lq + i) over the positions the cache holds. Causal by default
   * (`causal: false` turns it off); every other option of attention() works the same, except
   * `keyLengths` (the cache's lengths). Weights are [B, Hq, Lq, max(lengths)]. Results are copies.
   */
  attend(q, options = {}) {
    this._live();
    const wire = this._wire;
    const opts = callOptions(options);
    if (opts.keyLengths !== undefined)
      throw new MaskAttnTypeError('keyLengths', 'is implied by the cache (each sequence\'s lengths): attend() does not take it');
    if (opts.causal === undefined) opts.causal = true;
    const layout = checkLayout(opts.layout);
    const qDims = check4(shapeOf(q, 'q'), 'q', layout, wire.limits);
    const qData = wire.input(q, 'q', qDims, ['Float32Array']);
    const { batch: B, kvHeads: Hkv, headDim: D, valueDim: Dv } = this.config;
    // q against the cache, named here in the JS API's words (the library names the cache's fields
    // in C++ spelling and reports the cache's side of the mismatch).
    const [qB, Hq, , qD] = logical(qDims, layout);
    if (qB !== B) throw new MaskAttnRangeError('q', `batch size must be the cache's batch ${B}, given ${qB} (shape [${qDims}])`);
    if (qD !== D) throw new MaskAttnRangeError('q', `head dim must be the cache's headDim ${D}, given ${qD} (shape [${qDims}])`);
    if (Hq % Hkv !== 0) throw new MaskAttnRangeError('q', `head count must be a multiple of the cache's kvHeads ${Hkv} (GQA), given ${Hq} (shape [${qDims}])`);
    const Lk = this.lengths.reduce((a, b) => Math.max(a, b), 0);  // the key axis of masks and weights
    const kDims = layout === 'blhd' ? [B, Lk, Hkv, D] : [B, Hkv, Lk, D];
    const vDims = layout === 'blhd' ? [B, Lk, Hkv, Dv] : [B, Hkv, Lk, Dv];
    const plan = planCall(qDims, kDims, vDims, opts, wire);
    const m = this._m;
    return wire.scoped((alloc) => {
      const bytes = [qData.bytes, plan.outCount * 4, plan.returnWeights ? plan.weightsCount * 4 : 0, plan.returnLse ? plan.lseCount * 4 : 0].map(align16);
      const base = this._block(bytes.reduce((a, b) => a + b), alloc);
      const ptr = { q: base, k: 0, v: 0, out: base + bytes[0] };
      ptr.weights = plan.returnWeights ? ptr.out + bytes[1] : 0;
      ptr.lse = plan.returnLse ? ptr.out + bytes[1] + bytes[2] : 0;
      const stats = wire.run(plan, ptr, alloc, () => wire.copyIn(ptr.q, qData), (address) => m.kvAttend(this._handle, address));
      return wire.results(plan, ptr, stats);
    });
  }

  /**
   * What sequence b holds, as float32 copies the caller owns: `{ key: { data, shape: [Hkv, n, D] },
   * value: { data, shape: [Hkv, n, Dv] }, start, sinks }`, n = positions held: the first `sinks`
   * rows are positions 0 .. sinks-1 (sink tokens a ring kept below its window; usually 0), the rest
   * positions start, start + 1, ... (a window's ring keeps only the newest). q8/q4 caches give the
   * dequantized values (keys unrotated); float32, float16 and bfloat16 caches give exactly what they store.
   */
  read(b) {
    this._live();
    const index = count(b, 'b');  // an integer; the library checks b < batch
    const m = this._m;
    this._wire.check(m.kvRead(this._handle, index));
    try {
      const r = m.kvReadResult();
      const { kvHeads: H, headDim: D, valueDim: Dv } = this.config;
      const n = r.sinks + r.length;
      const copy = (address, count) => m.HEAPF32.slice(address >>> 2, (address >>> 2) + count);
      return {
        key: { data: copy(r.key, H * n * D), shape: [H, n, D] },
        value: { data: copy(r.value, H * n * Dv), shape: [H, n, Dv] },
        start: r.start,
        sinks: r.sinks,
      };
    } finally {
      m.kvReadRelease();  // the library's copy is not kept
    }
  }

  /** Shortens sequences (rollback): lengths [batch], each in [0, current length]. */
  truncate(lengths) {
    this._live();
    const next = toInt32(lengths, 'lengths', this.config.batch);
    if (next === null) throw new MaskAttnTypeError('lengths', `must be an Int32Array or an array of integers, given ${describe(lengths)}`);
    this._wire.scoped((alloc) => {
      const p = this._block(next.byteLength, alloc);
      this._m.HEAP32.set(next, p >>> 2);
      this._wire.check(this._m.kvTruncate(this._handle, p, next.length));
    });
  }

  /**
   * Makes sequence dst hold exactly what sequence src holds; dst must be empty (truncate it to 0
   * first). A paged cache (pageSize > 0) shares src's pages, O(1) in time and memory, and copies a
   * page only when either sequence writes into it, so neither ever changes the other; a contiguous
   * cache copies the rows.
   */
  fork(src, dst) {
    this._live();
    this._wire.check(this._m.kvFork(this._handle, count(src, 'src'), count(dst, 'dst')));
  }

  /**
   * After tree verification (attend(q, { tree })): keeps the accepted `path` of sequence b's tree
   * (node indices from a root down: [0, 2, 5]) by moving their keys and values into place, so the
   * sequence continues from the path's last node. `tree`: that sequence's parent indices, as given
   * to attend; an empty path drops the whole tree.
   */
  keep(b, tree, path) {
    this._live();
    const index = count(b, 'b');
    // A tree is at most a sequence long (the library checks it against sequence b); a path is at
    // most the tree. Each list's length is read once.
    const parents = toInt32List(tree, 'tree', this._wire.limits.maxSequenceLength);
    const nodes = toInt32List(path, 'path', parents.length);
    this._wire.scoped((alloc) => {
      const p = this._block(align16(parents.byteLength) + nodes.byteLength, alloc);
      const q = p + align16(parents.byteLength);
      this._m.HEAP32.set(parents, p >>> 2);
      this._m.HEAP32.set(nodes, q >>> 2);
      this._wire.check(this._m.kvKeep(this._handle, index, p, parents.length, q, nodes.length));
    });
  }

  /**
   * A paged cache's page table of sequence b (an Int32Array: entry i is the page holding positions
   * i*pageSize .. (i+1)*pageSize-1 of its slots, -1 = none yet). Equal numbers in two sequences are
   * one shared page (after fork()). Empty for a contiguous cache.
   */
  pages(b) {
    this._live();
    const r = this._m.kvPages(this._handle, count(b, 'b'));
    if (typeof r === 'number') this._wire.check(-r);
    return Int32Array.from(r);
  }

  /** Empties every sequence (the memory stays the cache's). */
  reset() {
    this._live();
    this._wire.check(this._m.kvReset(this._handle));
  }

  /** Frees the cache's wasm memory. Twice is harmless; any other use afterwards throws. */
  dispose() {
    if (!this._handle) return;
    this._m.kvDestroy(this._handle);
    if (this._scratch) this._m._free(this._scratch);
    this._handle = 0;
    this._scratch = 0;
    this._scratchBytes = 0;
  }
}

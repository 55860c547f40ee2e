// MaskAttn, a loaded module: attention() on tensors the caller owns (copied in, results copied
// out), and the factories of the objects that keep memory in wasm across calls (workspace.js,
// kv-cache.js). Reading is read.js's, planning plan.js's, the call wasm-call.js's.
import { MaskAttnRangeError, MaskAttnTypeError, describe } from './errors.js';
import { check4, checkLayout, entries, isArray, ownFields, shapeOf } from './read.js';
import { cacheDtypes, callOptions, planCall } from './plan.js';
import { Wire } from './wasm-call.js';
import { Workspace } from './workspace.js';
import { KVCache } from './kv-cache.js';

// Most parts one mergeAttention() call takes: far more than any cascade (a shared prefix and a few
// suffixes), and a bound on what a Proxy claiming a huge length can make the call read.
export const MAX_MERGE_PARTS = 65536;

// The parts of mergeAttention(), read once each by index into a plain array of records (the
// caller's own map, iterator or getters are never called; a hole is parts[i], not skipped), all
// of parts[0]'s shape.
function readParts(parts, wire) {
  if (!isArray(parts, 'parts')) throw new MaskAttnTypeError('parts', `must be an array of { output, lse }, given ${describe(parts)}`);
  const list = entries(parts, MAX_MERGE_PARTS, 'parts');
  if (!list.values) throw new MaskAttnRangeError('parts', `must hold at most ${MAX_MERGE_PARTS} parts, given ${list.length}`);
  if (list.length === 0) throw new MaskAttnRangeError('parts', 'must hold at least one part');
  const known = new Set(['output', 'lse']);
  const read = [];
  for (let i = 0; i < list.length; ++i) {
    const name = `parts[${i}]`;
    const f = ownFields(list.values[i], name, known, '{ output, lse }');
    const dims = check4(shapeOf(f.output, `${name}.output`), `${name}.output`, 'bhld', wire.limits);
    if (i > 0 && dims.some((d, k) => d !== read[0].dims[k]))
      throw new MaskAttnRangeError(`${name}.output`, `shape must be parts[0]'s [${read[0].dims.join(', ')}], given [${dims.join(', ')}]`);
    const lseDims = shapeOf(f.lse, `${name}.lse`);
    if (lseDims.length !== 3 || lseDims.some((d, k) => d !== dims[k]))
      throw new MaskAttnRangeError(`${name}.lse`, `shape must be [B, H, L] = [${dims.slice(0, 3).join(', ')}] (its output's), given [${lseDims.join(', ')}]`);
    read.push({
      dims,
      output: wire.input(f.output, `${name}.output`, dims, ['Float32Array']),
      lse: wire.input(f.lse, `${name}.lse`, lseDims, ['Float32Array']),
    });
  }
  return read;
}

/** A loaded module. Obtain with `await init()`. */
export class MaskAttn {
  constructor(module, { build, threads = 1 } = {}) {
    this._m = module;
    const info = module.backend();
    // Most threads a call may use: the module's worker pool and the calling thread.
    this._wire = new Wire(module, info.pthreads ? threads : 1);
    /** The library's limits: { maxBytes } per buffer (2^31 - 1 in wasm32), { maxSequenceLength } (2^23), { maxRingLength } (2^31 - 1). */
    this.limits = this._wire.limits;
    /** { simd, relaxed, arch, lanes, quantDot, threads, build, version } */
    this.backend = Object.freeze({
      simd: info.simd, relaxed: info.relaxed, arch: info.arch, lanes: info.lanes, quantDot: info.quantDot,
      threads: this._wire.threads,
      build: build ?? `maskattn-${info.simd ? 'simd' : 'scalar'}${info.relaxed ? '-relaxed' : ''}${info.pthreads ? '-threads' : ''}`,
      version: info.version,
    });
    /** The KV cache dtypes this module stores (createKVCache's dtype), in the library's order: 'float32' first, the default. */
    this.kvDtypes = cacheDtypes(module).names;
  }

  /**
   * O = softmax(Q·Kᵀ·scale + M)·V. Inputs are copied into wasm memory and results copied out,
   * so the caller keeps ownership of everything. See Workspace for repeated calls without copies.
   */
  attention(q, k, v, options = {}) {
    const wire = this._wire;
    const opts = callOptions(options);
    const layout = checkLayout(opts.layout);
    const data = {};
    const dims = [[q, 'q'], [k, 'k'], [v, 'v']].map(([t, name]) => {
      const d = check4(shapeOf(t, name), name, layout, wire.limits);
      data[name] = wire.input(t, name, d, ['Float32Array']);
      return d;
    });
    const plan = planCall(dims[0], dims[1], dims[2], opts, wire);
    return wire.scoped((alloc) => {
      // Ownership: these buffers belong to this call and are freed when it ends.
      const ptr = {
        q: alloc(data.q.bytes), k: alloc(data.k.bytes), v: alloc(data.v.bytes),
        out: alloc(plan.outCount * 4),
        weights: plan.returnWeights ? alloc(plan.weightsCount * 4) : 0,
        lse: plan.returnLse ? alloc(plan.lseCount * 4) : 0,
      };
      const stats = wire.run(plan, ptr, alloc, () => {
        wire.copyIn(ptr.q, data.q);
        wire.copyIn(ptr.k, data.k);
        wire.copyIn(ptr.v, data.v);
      });
      return wire.results(plan, ptr, stats);
    });
  }

  /**
   * A reusable set of buffers in wasm memory for repeated calls with the same shapes: write inputs
   * into `ws.q`, `ws.k`, `ws.v` (zero-copy views), call `ws.run(options)`, read `ws.output`.
   * Call `dispose()` when done: the memory belongs to the workspace until then.
   */
  createWorkspace(shapes) {
    return new Workspace(this._wire, shapes);
  }

  /**
   * A key/value cache in wasm memory for token-by-token generation: append each step's keys and
   * values, attend the step's queries to everything held. See KVCache. Call `dispose()` when done.
   */
  createKVCache(config) {
    return new KVCache(this._wire, config);
  }

  /**
   * Combines partial results of the same queries over disjoint key sets, each `{ output, lse }` as
   * attention() or cache.attend() returns them with `returnLse: true` (output [B, H, L, Dv], lse
   * [B, H, L]), into the result over the union: `{ output, lse }`, exactly as split-K merges inside
   * a call. A part whose lse is -inf for a row contributes nothing there; a row no part attends
   * gets 0 and lse -inf. Cascade attention: docs/semantics.md, "Merging partial results".
   */
  mergeAttention(parts) {
    const wire = this._wire;
    const read = readParts(parts, wire);
    const [B, H, L, Dv] = read[0].dims;
    const output = { data: new Float32Array(0), shape: [B, H, L, Dv] };
    const lse = { data: new Float32Array(0), shape: [B, H, L] };
    if (B * H * L === 0) return { output, lse };  // no rows: an empty answer at once
    const m = this._m;
    return wire.scoped((alloc) => {
      // Ownership: every block belongs to this call, each sized from the parts as read and checked
      // here (readParts), never from anything the caller's objects say afterwards.
      const table = alloc(8 * read.length);
      const ptrs = read.map((r) => ({ output: alloc(r.output.bytes), lse: alloc(r.lse.bytes) }));
      const out = alloc(B * H * L * Dv * 4);
      const outLse = alloc(B * H * L * 4);
      const addresses = new Uint32Array(2 * read.length);  // as the uint32 the library reads
      read.forEach((r, i) => {
        wire.copyIn(ptrs[i].output, r.output);
        wire.copyIn(ptrs[i].lse, r.lse);
        addresses[2 * i] = ptrs[i].output;
        addresses[2 * i + 1] = ptrs[i].lse;
      });
      new Uint32Array(m.HEAPU8.buffer, table, addresses.length).set(addresses);
      wire.check(m.mergeAttention(table, read.length, B, H, L, Dv, out, outLse));
      output.data = m.HEAPF32.slice(out >>> 2, (out >>> 2) + B * H * L * Dv);
      lse.data = m.HEAPF32.slice(outLse >>> 2, (outLse >>> 2) + B * H * L);
      return { output, lse };
    });
  }
}

// MaskAttn, a loaded module: attention() on tensors the caller owns (copied in, results copied
// out), and the factories of the objects that keep memory in wasm across calls (workspace.js,
// kv-cache.js). Reading is read.js's, planning plan.js's, the call wasm-call.js's.
import { check4, checkLayout, shapeOf } from './read.js';
import { callOptions, planCall } from './plan.js';
import { Wire } from './wasm-call.js';
import { Workspace } from './workspace.js';
import { KVCache } from './kv-cache.js';

/** A loaded module. Obtain with `await init()`. */
export class MaskAttn {
  constructor(module, { build, threads = 1 } = {}) {
    this._m = module;
    const info = module.backend();
    // Most threads a call may use: the module's worker pool and the calling thread.
    this._wire = new Wire(module, info.pthreads ? threads : 1);
    /** The library's limits: { maxBytes } per buffer (2^31 - 1 in wasm32), { maxSequenceLength } (2^23). */
    this.limits = this._wire.limits;
    /** { simd, relaxed, arch, lanes, threads, build, version } */
    this.backend = Object.freeze({
      simd: info.simd, relaxed: info.relaxed, arch: info.arch, lanes: info.lanes, threads: this._wire.threads,
      build: build ?? `maskattn-${info.simd ? 'simd' : 'scalar'}${info.relaxed ? '-relaxed' : ''}${info.pthreads ? '-threads' : ''}`,
      version: info.version,
    });
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
}

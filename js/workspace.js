// Workspace: buffers in wasm memory reused across calls with the same shapes (zero-copy views for
// q, k, v and the results). It owns its blocks until dispose(); each run() is one call through the
// module's Wire with the shapes planned once, at creation.
import { MaskAttnRangeError, MaskAttnTypeError, describe } from './errors.js';
import { bool, check4, checkLayout, ownFields, shapeOf } from './read.js';
import { callOptions, planCall } from './plan.js';

const WORKSPACE_FIELDS = new Set(['q', 'k', 'v', 'layout', 'returnWeights', 'returnLse']);

/**
 * Buffers in wasm memory reused across calls with the same shapes. `q`, `k`, `v`, `output`,
 * `weights`, `lse` are Float32Array views straight into wasm memory (zero-copy). They are
 * re-created whenever memory grows (growth detaches old views), so always read them from the
 * workspace rather than keeping them across calls.
 */
export class Workspace {
  /** Made by MaskAttn.createWorkspace(shapes). */
  constructor(wire, config) {
    const shapes = ownFields(config, 'shapes', WORKSPACE_FIELDS, '{ q, k, v, layout?, returnWeights?, returnLse? }');
    this._wire = wire;
    this._m = wire.m;
    this._layout = checkLayout(shapes.layout);
    const dims = ['q', 'k', 'v'].map((name) => check4(shapeOf({ shape: shapes[name] }, name), name, this._layout, wire.limits));
    this._dims = dims;
    this.returnWeights = bool(shapes.returnWeights, 'returnWeights');
    this.returnLse = bool(shapes.returnLse, 'returnLse');
    const plan = planCall(dims[0], dims[1], dims[2],
      Object.assign(Object.create(null), { layout: this._layout, returnWeights: this.returnWeights, returnLse: this.returnLse }), wire);
    this._count = { q: plan.qSize, k: plan.kSize, v: plan.vSize, output: plan.outCount,
      weights: this.returnWeights ? plan.weightsCount : 0, lse: this.returnLse ? plan.lseCount : 0 };
    this.shapes = { q: dims[0], k: dims[1], v: dims[2], output: plan.outShape, weights: plan.weightsShape, lse: plan.lseShape };
    this._ptr = {};
    for (const [name, n] of Object.entries(this._count)) {
      // Ownership: each block belongs to the workspace until dispose().
      const p = n > 0 ? this._m._malloc(n * 4) >>> 0 : 0;
      this._ptr[name] = p;
      if (n > 0 && p === 0) {
        this.dispose();
        throw new MaskAttnRangeError('memory', `out of memory: could not allocate ${n * 4} bytes for ${name}`);
      }
    }
  }

  _view(name) {
    if (!this._ptr) throw new MaskAttnRangeError('workspace', 'used after dispose()');
    const p = this._ptr[name];
    return new Float32Array(this._m.HEAPF32.buffer, p, this._count[name]);
  }
  get q() { return this._view('q'); }
  get k() { return this._view('k'); }
  get v() { return this._view('v'); }
  get output() { return this._view('output'); }
  get weights() { return this.returnWeights ? this._view('weights') : null; }
  get lse() { return this.returnLse ? this._view('lse') : null; }

  /** Runs attention on the workspace's q, k, v; results land in `output` (and weights, lse). */
  run(options = {}) {
    if (!this._ptr) throw new MaskAttnRangeError('workspace', 'used after dispose()');
    const opts = callOptions(options);
    if (opts.layout !== undefined && opts.layout !== this._layout)
      throw new MaskAttnRangeError('layout', `the workspace was created with '${this._layout}', given ${describe(opts.layout)}`);
    if (opts.returnWeights !== undefined || opts.returnLse !== undefined)
      throw new MaskAttnTypeError('options', 'returnWeights/returnLse are set when the workspace is created');
    opts.layout = this._layout;
    const plan = planCall(this._dims[0], this._dims[1], this._dims[2], opts, this._wire);
    plan.returnWeights = this.returnWeights;
    plan.returnLse = this.returnLse;
    const p = this._ptr;
    const ptr = { q: p.q, k: p.k, v: p.v, out: p.output, weights: p.weights ?? 0, lse: p.lse ?? 0 };
    const stats = this._wire.scoped((alloc) => this._wire.run(plan, ptr, alloc));
    return stats ? { stats } : {};
  }

  /** Frees the workspace's wasm memory; views taken earlier must not be used afterwards. */
  dispose() {
    if (!this._ptr) return;
    for (const p of Object.values(this._ptr)) if (p) this._m._free(p);
    this._ptr = null;
  }
}

// maskattn for JavaScript: masked scaled-dot-product attention in WebAssembly.
//
//   import { init } from 'maskattn';
//   const ma = await init();
//   const { output } = ma.attention(q, k, v, { causal: true });
//
// Semantics: docs/semantics.md. Tensors are { data: Float32Array, shape: number[] } (or `dims`, as
// onnxruntime-web tensors have). This file only re-exports the public API; each module's opening
// comment says what it owns:
//   load.js       probes, build choice, module loading, threads: init()
//   attention.js  MaskAttn: attention(), createWorkspace(), createKVCache()
//   workspace.js  Workspace: buffers reused across calls
//   kv-cache.js   KVCache: keys and values for token-by-token generation
//   plan.js       the option table and planner (attention, workspace, cache), the cache's config table
//   wasm-call.js  the wire protocol: argument block, scoped allocation, copy-in, invoke, status -> error
//   read.js       reading tensors, options and small arrays once; the checks the crossing into wasm loses
//   masks.js      the mask-building helpers
//   errors.js     MaskAttnTypeError, MaskAttnRangeError
// The C++ library validates every value; JavaScript checks what only it can see (kinds of values,
// shapes as arrays, data lengths) and what the crossing into wasm would lose. Its limits (bytes per
// buffer, sequence length) are the library's own (MaskAttn.limits).

export { init, simdSupported, relaxedSimdSupported, threadsSupported, version } from './load.js';
export { MaskAttn } from './attention.js';
export { Workspace } from './workspace.js';
export { KVCache } from './kv-cache.js';
export { MaskAttnRangeError, MaskAttnTypeError } from './errors.js';
export * from './masks.js';

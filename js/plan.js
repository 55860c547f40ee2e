// The option table and the planner shared by attention(), Workspace.run() and KVCache.attend(), and
// the cache's configuration table. A row says how an option is read (read.js), which arrays it
// copies into wasm memory, which fields of the call's argument block it fills (the block's layout is
// the binding's: bindings/maskattn_embind.cpp MASKATTN_CALL_FIELDS) and, where the C++ library
// spells it otherwise, the library's name for it (so that its errors name the JS argument). A new
// option is one row here, its type in index.d.ts, and its C++ side.
import { MaskAttnRangeError, MaskAttnTypeError, describe, typedKind } from './errors.js';
import {
  bool, checkLayout, choice, count, entries, float32, integer, isArray, isRecord, maskOf, owned, ownFields, product, segmentIds,
  toFloat32, toInt32, toInt32List, windowOf,
} from './read.js';

// Logical [B, H, L, D] of a tensor given in `layout`.
export function logical(dims, layout) {
  return layout === 'blhd' ? [dims[0], dims[2], dims[1], dims[3]] : dims;
}

// Option values by name: Maps, so that 'toString' or 'constructor' are not names.
const ALIGN = new Map([['bottom-right', 0], ['top-left', 1]]);
const POLICY = new Map([['zero', 0], ['nan', 1], ['uniform', 2]]);

// A mask's fields: its block, 4-D broadcast shape and real element count.
const maskFields = (name, mask, at) => {
  const s = mask?.shape ?? [1, 1, 1, 1];
  return { [name]: at[0], [`${name}B`]: s[0], [`${name}H`]: s[1], [`${name}Lq`]: s[2], [`${name}Lk`]: s[3], [`${name}Size`]: mask ? mask.input.count : 0 };
};
// A small array's fields: its block and length.
const spanFields = (name, array, at) => ({ [name]: at[0], [`${name}Size`]: array?.length ?? 0 });

function readSegments(s, ctx) {
  if (s === undefined || s === null) return null;
  const ids = isRecord(s, 'segments') ? ownFields(s, 'segments', new Set(['query', 'key']), '{ query, key }') : null;
  if (!ids || ids.query == null || ids.key == null)
    throw new MaskAttnTypeError('segments', `must be { query, key } segment ids ([B*Lq] and [B*Lk]), given ${describe(s)}`);
  return { query: segmentIds(ids.query, 'segments.query', ctx.B, ctx.Lq), key: segmentIds(ids.key, 'segments.key', ctx.B, ctx.Lk) };
}

// Tree verification: a parent index per query node, one tree for every sequence ([Lq]) or one per
// sequence ([B * Lq]); the library checks that each parent is an earlier node.
function readTree(x, ctx) {
  if (x === undefined || x === null) return null;
  if (typedKind(x) !== 'Int32Array' && !isArray(x, 'tree'))
    throw new MaskAttnTypeError('tree', `must be an Int32Array or an array of parent indices, given ${describe(x)}`);
  const wrong = (n) => new MaskAttnRangeError('tree', `needs one parent index per query (Lq = ${ctx.Lq}) or per query of every sequence (B*Lq = ${ctx.B * ctx.Lq}), given ${n}`);
  const parents = toInt32List(x, 'tree', Math.max(ctx.Lq, ctx.B * ctx.Lq), wrong);  // its length read once
  if (parents.length !== ctx.Lq && parents.length !== ctx.B * ctx.Lq) throw wrong(parents.length);
  return parents;
}

// RoPE: { theta = 10000, dims = 0 (all of D), layout = 'halves' | 'interleaved', offset = 0,
// scaling }, its own fields read once; the library checks the values (theta finite > 0 and small
// enough that its frequencies and angles stay finite, dims even <= D, offset an integer in
// [0, 2^31 - 1], each scaling field) and names them rope.theta, rope.dims, rope.scaling.factor, ...
const ROPE_LAYOUTS = new Map([['halves', 0], ['interleaved', 1]]);
const ROPE_FIELDS = new Set(['theta', 'dims', 'layout', 'offset', 'scaling']);

// RoPE scaling, as a model config's rope_scaling block names it (camelCase): type and the fields
// its type reads (docs/semantics.md, "RoPE scaling"). Codes: the C++ RopeScalingType's order.
const SCALING_TYPES = new Map([['linear', 1], ['dynamic', 2], ['llama3', 3], ['yarn', 4], ['longrope', 5], ['factors', 6]]);
const SCALING_NUMBERS = ['factor', 'lowFreqFactor', 'highFreqFactor', 'betaFast', 'betaSlow', 'mscale', 'mscaleAllDim', 'attentionFactor'];
const SCALING_LISTS = ['shortFactor', 'longFactor', 'freqFactors'];
const SCALING_FIELDS = new Set(['type', 'originalMaxPositions', ...SCALING_NUMBERS, ...SCALING_LISTS]);
const MAX_PAIRS = 1 << 16;  // one divisor per rotated pair: far beyond any head size
function numberList(x, name) {
  const e = entries(x, MAX_PAIRS, name);
  if (!e) throw new MaskAttnTypeError(name, `must be an array of numbers (one per rotated pair), given ${describe(x)}`);
  if (!e.values) throw new MaskAttnRangeError(name, `has ${e.length} entries, more than ${MAX_PAIRS}`);
  return Object.freeze(e.values.map((v, i) => {
    if (typeof v !== 'number') throw new MaskAttnTypeError(`${name}[${i}]`, `must be a number, given ${describe(v)}`);
    return v;
  }));
}
function readScaling(x) {
  if (x === undefined || x === null) return null;
  const f = ownFields(x, 'rope.scaling', SCALING_FIELDS, `{ type, ${[...SCALING_FIELDS].slice(1).map((n) => `${n}?`).join(', ')} }`);
  choice(f.type, 'rope.scaling.type', SCALING_TYPES);
  const out = { type: f.type };
  if (f.originalMaxPositions !== undefined)
    out.originalMaxPositions = ropeInteger(f.originalMaxPositions, 'rope.scaling.originalMaxPositions', '[1, 2147483647]');
  for (const name of SCALING_NUMBERS) {
    const v = f[name] ?? (f.type === 'yarn' && name === 'betaFast' ? 32 : f.type === 'yarn' && name === 'betaSlow' ? 1 : undefined);
    if (v === undefined) continue;
    if (typeof v !== 'number') throw new MaskAttnTypeError(`rope.scaling.${name}`, `must be a number, given ${describe(v)}`);
    out[name] = v;
  }
  for (const name of SCALING_LISTS) if (f[name] !== undefined) out[name] = numberList(f[name], `rope.scaling.${name}`);
  return Object.freeze(out);
}
// The scaling as the binding reads it (bindings/maskattn_embind.cpp scaling_of): ten numbers (NaN =
// not given), the three lists' lengths, then their values.
function scalingRecord(s) {
  const lists = SCALING_LISTS.map((n) => s[n] ?? []);
  return Float64Array.from([
    SCALING_TYPES.get(s.type), s.factor ?? 0, s.originalMaxPositions ?? 0, s.lowFreqFactor ?? 0, s.highFreqFactor ?? 0,
    s.betaFast ?? 32, s.betaSlow ?? 1, s.mscale ?? NaN, s.mscaleAllDim ?? NaN, s.attentionFactor ?? NaN,
    ...lists.map((l) => l.length), ...lists.flat(),
  ]);
}
// dims and offset cross as int64 through a float64, exactly up to 2^53: beyond it the library would
// see and name a rounded or clamped value, so those are refused here with the value given.
function ropeInteger(x, name, range) {
  integer(x, name);
  if (!Number.isSafeInteger(x)) throw new MaskAttnRangeError(name, `must be an integer in ${range}, given ${x}`);
  return x;
}
export function readRope(x) {
  if (x === undefined || x === null) return null;
  const f = ownFields(x, 'rope', ROPE_FIELDS, '{ theta?, dims?, layout?, offset?, scaling? }');
  const theta = f.theta ?? 10000;
  if (typeof theta !== 'number') throw new MaskAttnTypeError('rope.theta', `must be a number, given ${describe(theta)}`);
  const dims = ropeInteger(f.dims ?? 0, 'rope.dims', '[0, D] (0 = all of D)');
  const layout = f.layout ?? 'halves';
  choice(layout, 'rope.layout', ROPE_LAYOUTS);
  const offset = ropeInteger(f.offset ?? 0, 'rope.offset', '[0, 2147483647]');
  const scaling = readScaling(f.scaling);
  return Object.freeze(scaling ? { theta, dims, layout, offset, scaling } : { theta, dims, layout, offset });
}
const ropeFields = (v) => ({
  hasRope: v ? 1 : 0, ropeTheta: v?.theta ?? 0, ropeDims: v?.dims ?? 0, ropeLayout: v ? ROPE_LAYOUTS.get(v.layout) : 0,
  ropeOffset: v?.offset ?? 0,
});

// Most threads for a call (C++ Options::threads): by default all the module has; never more (a
// larger count is the module's); the library's cost model runs as many as pay off. The binding
// turns anything below 1 into 1: checked here.
function readThreads(x, ctx) {
  const threads = x ?? ctx.threads;
  if (typeof threads !== 'number') throw new MaskAttnTypeError('threads', `must be a number of threads, given ${describe(threads)}`);
  if (!Number.isInteger(threads) || threads < 1) throw new MaskAttnRangeError('threads', `must be an integer >= 1, given ${threads}`);
  return Math.min(threads, ctx.threads);
}

/**
 * The options of a call, in the order they are read. A row:
 *   read(x, ctx): the option's value in the plan (x is the caller's, undefined when not given; ctx
 *     holds the call's B, Hq, Lq, Lk and the module's limits, heap and threads);
 *   blocks(value): the input records (read.js) it copies into wasm memory, null for none;
 *   wire(value, at): its fields of the argument block (at: its blocks' addresses, 0 where absent);
 *     a row without wire shapes the call's outputs (the planner sizes them, the call places them);
 *   library: the library's name for it where that differs, or { libraryName: jsName }.
 * index.d.ts declares the same names (AttentionOptions; tests/js/option-table.test.mjs checks).
 */
export const OPTIONS = {
  scale: { read: (x) => (x === undefined ? undefined : float32(x, 'scale')), wire: (v) => ({ hasScale: v !== undefined, scale: v ?? 0 }) },
  layout: { read: (x) => checkLayout(x), wire: (v) => ({ layout: v === 'blhd' ? 1 : 0 }) },
  causal: { read: (x) => bool(x, 'causal'), wire: (v) => ({ causal: v }) },
  align: { read: (x) => choice(x ?? 'bottom-right', 'align', ALIGN), wire: (v) => ({ align: v }) },
  keyLengths: {
    read: (x, ctx) => toInt32(x, 'keyLengths', ctx.B), blocks: (v) => [v && owned(v, 'keyLengths')],
    wire: (v, at) => spanFields('keyLengths', v, at), library: 'key_lengths',
  },
  queryLengths: {
    read: (x, ctx) => toInt32(x, 'queryLengths', ctx.B), blocks: (v) => [v && owned(v, 'queryLengths')],
    wire: (v, at) => spanFields('queryLengths', v, at), library: 'query_lengths',
  },
  allowed: {
    read: (x, ctx) => (x == null ? null : maskOf(x, 'allowed', 'Uint8Array', ctx.limits, ctx.heap)),
    blocks: (v) => [v?.input], wire: (v, at) => maskFields('allowed', v, at),
  },
  bias: {
    read: (x, ctx) => (x == null ? null : maskOf(x, 'bias', 'Float32Array', ctx.limits, ctx.heap)),
    blocks: (v) => [v?.input], wire: (v, at) => maskFields('bias', v, at),
  },
  window: { read: (x) => (x == null ? [-1, -1] : windowOf(x)), wire: ([left, right]) => ({ windowLeft: left, windowRight: right }) },
  prefix: { read: (x) => integer(x ?? 0, 'prefix', 'must be'), wire: (v) => ({ prefix: v }) },
  segments: {
    read: readSegments,
    blocks: (v) => (v ? [owned(v.query, 'segments.query'), owned(v.key, 'segments.key')] : [null, null]),
    wire: (v, at) => ({ ...spanFields('querySegments', v?.query, [at[0]]), ...spanFields('keySegments', v?.key, [at[1]]) }),
    library: { query_segments: 'segments.query', key_segments: 'segments.key' },
  },
  alibiSlopes: {
    read: (x, ctx) => toFloat32(x, 'alibiSlopes', ctx.Hq), blocks: (v) => [v && owned(v, 'alibiSlopes')],
    wire: (v, at) => spanFields('alibiSlopes', v, at), library: 'alibi_slopes',
  },
  sinks: {
    read: (x, ctx) => toFloat32(x, 'sinks', ctx.Hq), blocks: (v) => [v && owned(v, 'sinks')],
    wire: (v, at) => spanFields('sinks', v, at),
  },
  tree: { read: readTree, blocks: (v) => [v && owned(v, 'tree')], wire: (v, at) => spanFields('tree', v, at) },
  rope: {
    read: readRope, blocks: (v) => [v?.scaling ? owned(scalingRecord(v.scaling), 'rope.scaling') : null],
    wire: (v, at) => ({ ...ropeFields(v), ropeScaling: at[0], ropeScalingSize: v?.scaling ? scalingRecord(v.scaling).length : 0 }),
  },
  softcap: { read: (x) => float32(x ?? 0, 'softcap', true), wire: (v) => ({ softcap: v }) },
  fullyMasked: { read: (x) => choice(x ?? 'zero', 'fullyMasked', POLICY), wire: (v) => ({ fullyMasked: v }), library: 'fully_masked' },
  returnWeights: { read: (x) => bool(x, 'returnWeights'), library: 'weights' },
  returnLse: { read: (x) => bool(x, 'returnLse') },
  returnStats: { read: (x) => bool(x, 'returnStats') },
  threads: { read: readThreads, wire: (v) => ({ threads: v }) },
};
const ROWS = Object.entries(OPTIONS);
export const KNOWN_OPTIONS = new Set(Object.keys(OPTIONS));

/** The options of a call: own properties, each read once (see ownFields), not yet checked. */
export function callOptions(options) {
  return ownFields(options, 'options', KNOWN_OPTIONS, 'an object');
}

/**
 * The plan of a call from 4-D shapes (in the options' layout) and options (from callOptions):
 * logical dims, element counts, output shapes and every option read by its row. `module` gives
 * the limits, heap and thread count (wasm-call.js Wire).
 */
export function planCall(qDims, kDims, vDims, options, module) {
  const layout = checkLayout(options.layout);
  const [B, Hq, Lq, D] = logical(qDims, layout);
  const [, Hkv, Lk] = logical(kDims, layout);
  const Dv = logical(vDims, layout)[3];
  const maxBytes = module.limits.maxBytes;
  // A null prototype: a field never set is undefined, whatever Object.prototype holds.
  const plan = Object.assign(Object.create(null), {
    layout, B, Hq, Hkv, Lq, Lk, D, Dv, qSize: product(qDims), kSize: product(kDims), vSize: product(vDims),
    // Each tensor's own logical dims go to the library, whose validation names any mismatch.
    q: logical(qDims, layout), k: logical(kDims, layout), v: logical(vDims, layout),
    outCount: B * Hq * Lq * Dv, outShape: layout === 'blhd' ? [B, Lq, Hq, Dv] : [B, Hq, Lq, Dv],
    weightsCount: B * Hq * Lq * Lk, weightsShape: [B, Hq, Lq, Lk], lseCount: B * Hq * Lq, lseShape: [B, Hq, Lq],
  });
  if (plan.outCount * 4 > maxBytes)
    throw new MaskAttnRangeError('output', `output [${B}, ${Hq}, ${Lq}, ${Dv}] needs ${plan.outCount * 4} bytes, more than the ${maxBytes} one buffer may have`);
  const ctx = { B, Hq, Lq, Lk, limits: module.limits, heap: module.heap, threads: module.threads };
  plan.options = Object.create(null);
  for (const [name, row] of ROWS) plan.options[name] = row.read(options[name], ctx);
  plan.returnWeights = plan.options.returnWeights;
  plan.returnLse = plan.options.returnLse;
  plan.returnStats = plan.options.returnStats;
  if (plan.returnWeights && plan.weightsCount * 4 > maxBytes)
    throw new MaskAttnRangeError('returnWeights', `weights [${B}, ${Hq}, ${Lq}, ${Lk}] need ${plan.weightsCount * 4} bytes, more than the ${maxBytes} one buffer may have`);
  if (plan.returnLse && plan.lseCount * 4 > maxBytes)
    throw new MaskAttnRangeError('returnLse', `lse [${B}, ${Hq}, ${Lq}] needs ${plan.lseCount * 4} bytes, more than the ${maxBytes} one buffer may have`);
  return plan;
}

/** The input records each option copies into wasm memory: [name, records (null = none)]. */
export function optionBlocks(plan) {
  return ROWS.filter(([, row]) => row.blocks).map(([name, row]) => [name, row.blocks(plan.options[name])]);
}

/**
 * The call's argument block, by field name: the tensors at `ptr` (q, k, v, out, weights, lse; 0 =
 * absent), each option's fields (its blocks at `at[name]`) and the counters' block `stats`.
 */
export function callFields(plan, ptr, at, stats) {
  const args = {
    q: ptr.q, k: ptr.k, v: ptr.v, out: ptr.out,
    qB: plan.q[0], qH: plan.q[1], qL: plan.q[2], qD: plan.q[3], kB: plan.k[0], kH: plan.k[1], kL: plan.k[2], kD: plan.k[3],
    vB: plan.v[0], vH: plan.v[1], vL: plan.v[2], vD: plan.v[3],
    qSize: plan.qSize, kSize: plan.kSize, vSize: plan.vSize, outSize: plan.outCount,
    weights: ptr.weights, weightsSize: ptr.weights ? plan.weightsCount : 0,
    lse: ptr.lse, lseSize: ptr.lse ? plan.lseCount : 0, stats,
  };
  for (const [name, row] of ROWS) if (row.wire) Object.assign(args, row.wire(plan.options[name], at[name] ?? [0, 0]));
  return args;
}

// ------------------------------------------------------------------------------ cache config

// Element types of a cache: the module's list (the binding's kvTypes(), from the C++ table
// maskattn/kv_types.inc), each { name, code, bits, quantized, rawBits }; code is what kv_create
// takes. q8 / q4: blocks of 32 with a float32 scale (docs/semantics.md, "Quantized caches").
const DTYPE_TABLES = new WeakMap();
/**
 * The cache dtypes a module knows: `list` in code order (list[0], float32, is the default), `byName`
 * (a Map: 'toString' is not a name) and `names`.
 */
export function cacheDtypes(module) {
  let t = DTYPE_TABLES.get(module);
  if (!t) {
    const list = Object.freeze(module.kvTypes().map((row) => Object.freeze({ ...row })));
    t = Object.freeze({ list, byName: new Map(list.map((row) => [row.name, row])), names: Object.freeze(list.map((row) => row.name)) });
    DTYPE_TABLES.set(module, t);
  }
  return t;
}
const dtypeOf = (x, name, dtypes) => choice(x, name, dtypes.byName).name;
const ROTATIONS = new Map([['automatic', 0], ['none', 1], ['hadamard', 2]]);

/**
 * The configuration of a KV cache (createKVCache): read(x, config so far, the module's dtypes)
 * gives the field's value (defaults filled in), wire(value, dtypes) its fields in the binding's
 * named block (bindings/maskattn_embind.cpp MASKATTN_CACHE_FIELDS, published as
 * cacheConfigLayout(); without wire, the one field of the row's name); required: no default;
 * library: as in OPTIONS (index.d.ts: KVCacheOptions, checked by the same test). Sizes and limits
 * (bytes, capacity) are the library's to check: it does before it allocates.
 */
export const CACHE_CONFIG = {
  batch: { read: (x) => count(x ?? 1, 'batch') },
  kvHeads: { read: (x) => count(x ?? 1, 'kvHeads'), library: 'kv_heads' },
  capacity: { read: (x) => count(x, 'capacity'), required: true },
  headDim: { read: (x) => count(x, 'headDim'), required: true, library: 'head_dim' },
  valueDim: { read: (x, c) => count(x ?? c.headDim, 'valueDim'), library: 'value_dim' },
  dtype: { read: (x, c, t) => dtypeOf(x ?? t.list[0].name, 'dtype', t), wire: (v, t) => ({ dtype: t.byName.get(v).code }) },
  window: { read: (x) => count(x ?? 0, 'window') },
  keyDtype: {
    read: (x, c, t) => dtypeOf(x ?? c.dtype, 'keyDtype', t), wire: (v, t) => ({ keyDtype: t.byName.get(v).code }), library: 'key_dtype',
  },
  valueDtype: {
    read: (x, c, t) => dtypeOf(x ?? c.dtype, 'valueDtype', t), wire: (v, t) => ({ valueDtype: t.byName.get(v).code }), library: 'value_dtype',
  },
  keyRotation: {
    read: (x) => {
      choice(x ?? 'automatic', 'keyRotation', ROTATIONS);
      return x ?? 'automatic';
    },
    wire: (v) => ({ keyRotation: ROTATIONS.get(v) }),
    library: 'key_rotation',
  },
  sinkTokens: { read: (x) => count(x ?? 0, 'sinkTokens'), library: 'sink_tokens' },
  pageSize: { read: (x) => count(x ?? 0, 'pageSize'), library: 'page_size' },
  // In config: null, or the rope with defaults filled in (dims 0 = headDim, yarn's betas). Its
  // fields are the call block's (ropeFields) and the scaling's record as a plain array (empty: none).
  rope: {
    read: (x, c) => {
      const r = readRope(x);
      return r && Object.freeze({ ...r, dims: r.dims || c.headDim });
    },
    wire: (v) => ({ ...ropeFields(v), ropeScaling: v?.scaling ? Array.from(scalingRecord(v.scaling)) : [] }),
  },
};

/**
 * The cache's configuration (defaults filled in) and kv_create's named fields, from the caller's
 * fields and the module's dtypes (cacheDtypes).
 */
export function planCache(fields, dtypes) {
  const expected = `{ ${Object.entries(CACHE_CONFIG).map(([name, row]) => (row.required ? name : `${name}?`)).join(', ')} }`;
  const given = ownFields(fields, 'config', new Set(Object.keys(CACHE_CONFIG)), expected);
  const config = {};
  for (const [name, row] of Object.entries(CACHE_CONFIG)) config[name] = row.read(given[name], config, dtypes);
  const args = {};
  for (const [name, row] of Object.entries(CACHE_CONFIG)) Object.assign(args, row.wire ? row.wire(config[name], dtypes) : { [name]: config[name] });
  return { config, args };
}

// ------------------------------------------------------------------------------ library names

// The C++ library's argument names, in the JS API's spelling (from the rows' `library`).
const JS_NAMES = { out: 'output' };
for (const table of [OPTIONS, CACHE_CONFIG]) {
  for (const [name, row] of Object.entries(table)) {
    if (typeof row.library === 'string') JS_NAMES[row.library] = name;
    else if (row.library) Object.assign(JS_NAMES, row.library);
  }
}

/** The JS name of a library argument ('key_lengths[2]' -> 'keyLengths[2]'). */
export function jsName(arg) {
  // rope.scaling's fields in camelCase ('rope.scaling.original_max_positions' -> '...originalMaxPositions').
  if (arg.startsWith('rope.scaling.')) return arg.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
  const m = /^([a-z_]+)(.*)$/.exec(arg);
  return m && Object.hasOwn(JS_NAMES, m[1]) ? JS_NAMES[m[1]] + m[2] : arg;
}

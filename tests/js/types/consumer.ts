// A typed consumer of the whole public API. Compiled (never run) by tests/js/types.test.mjs with
// `tsc -p tests/js/types --noEmit`: it must compile cleanly, and each `@ts-expect-error` line must
// really be an error (tsc reports an unused @ts-expect-error), so the types accept correct use and
// reject misuse.
import {
  init, simdSupported, relaxedSimdSupported, threadsSupported, version, MaskAttn, Workspace, KVCache, MaskAttnTypeError, MaskAttnRangeError,
  createCausalMask, createPaddingMask, createWindowMask, segmentsFromLengths, fromKeyPaddingMask, toAdditiveMask,
} from 'maskattn';
import type {
  Tensor, Backend, InitOptions, Layout, Align, FullyMaskedPolicy, MaskOptions, AttentionOptions,
  AttentionResult, Stats, WorkspaceShapes, MaskTensor, AlignOptions,
  KVDtype, KVInput, KVCacheOptions, KVAppendOptions, KVAttendOptions, BuildName, Limits, RopeOptions, RopeLayout, RopeScaling, ResolvedRope,
} from 'maskattn';

const haveSimd: boolean = simdSupported();
const packageVersion: string = version;

const initOptions: InitOptions = {
  simd: haveSimd ? 'auto' : false,
  relaxed: relaxedSimdSupported() ? 'auto' : false,
  threads: threadsSupported() ? 'auto' : 1,
  locateFile: (file: string, build: BuildName) => `/assets/${build}/${file}`,
};
const initWithBytes: InitOptions = { simd: true, wasmBinary: new Uint8Array(8) };

async function main(): Promise<void> {
  const ma: MaskAttn = await init(initOptions);
  const again: Promise<MaskAttn> = init();
  const scalar: MaskAttn = await init({ simd: false });
  void initWithBytes;
  void again;

  const backend: Backend = ma.backend;
  const description: string = `${backend.arch} x${backend.lanes} (${backend.threads} thread, simd ${backend.simd}, relaxed ${backend.relaxed}) ${backend.build} v${backend.version} / ${packageVersion}`;
  console.log(description, scalar.backend.arch);
  const limits: Limits = ma.limits;
  const maxFloats: number = limits.maxBytes / 4 + limits.maxSequenceLength * 0 + limits.maxRingLength * 0;
  void maxFloats;
  // @ts-expect-error: the limits are the library's, read-only
  ma.limits.maxBytes = 1;

  const B = 2, Hq = 4, Hkv = 2, L = 8, D = 16;
  const q: Tensor = { data: new Float32Array(B * Hq * L * D), shape: [B, Hq, L, D] };
  const k: Tensor = { data: new Float32Array(B * Hkv * L * D), shape: [B, Hkv, L, D] };
  // onnxruntime-web style: `dims` instead of `shape`.
  const v: Tensor<Float32Array> = { data: new Float32Array(B * Hkv * L * D), dims: [B, Hkv, L, D] as const };

  const layout: Layout = 'bhld';
  const align: Align = 'top-left';
  const policy: FullyMaskedPolicy = 'uniform';
  const allowed: Tensor<Uint8Array> = { data: new Uint8Array(L * L).fill(1), shape: [L, L] };
  const bias: Tensor<Float32Array> = { data: new Float32Array(B * L), shape: [B, 1, 1, L] };
  const maskOptions: MaskOptions = {
    scale: 0.25, layout, causal: true, align,
    keyLengths: [8, 5], queryLengths: Int32Array.from([8, 5]),
    allowed, bias, window: [4, 0], prefix: 2,
    segments: { query: [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0]], key: new Int32Array(B * L) },
    alibiSlopes: new Float32Array([0.5, 0.25, 0.125, 0.0625]),
    softcap: 30, fullyMasked: policy, returnStats: true,
  };
  const options: AttentionOptions = { ...maskOptions, returnWeights: true, returnLse: true };

  const result: AttentionResult = ma.attention(q, k, v, options);
  const out: Float32Array = result.output.data;
  const outShape: number[] = result.output.shape;
  const weights: Float32Array | undefined = result.weights?.data;
  const lse: Float32Array | undefined = result.lse?.data;
  const stats: Stats | undefined = result.stats;
  console.log(out.length, outShape, weights?.length, lse?.length, stats?.tilesSkipped, stats?.tilesFull, stats?.tilesMixed, stats?.threadsUsed);
  ma.attention(q, k, v, { causal: true, threads: 2 });  // most threads for this call
  console.log(ma.attention(q, k, v).output.data[0]);

  const shapes: WorkspaceShapes = { q: [B, L, Hq, D], k: [B, L, Hkv, D], v: [B, L, Hkv, D], layout: 'blhd', returnWeights: true, returnLse: true };
  const ws: Workspace = ma.createWorkspace(shapes);
  try {
    ws.q.set(q.data);
    ws.k.set(k.data);
    ws.v.set(v.data);
    const ran: { stats?: Stats } = ws.run({ causal: true, layout: 'blhd', returnStats: true });
    const o: Float32Array = ws.output;
    const w: Float32Array | null = ws.weights;
    const l: Float32Array | null = ws.lse;
    const outputShape: number[] = ws.shapes.output;
    console.log(ran.stats?.tilesMixed, o[0], w?.[0], l?.[0], outputShape);
    ws.run();
  } finally {
    ws.dispose();
  }

  // The mask helpers' results plug straight into the options.
  const alignOptions: AlignOptions = { align: 'bottom-right' };
  const causalMask: MaskTensor<Uint8Array> = createCausalMask(L, L, alignOptions);
  const padding: MaskTensor<Uint8Array> = createPaddingMask([8, 5], L);
  const windowMask: MaskTensor<Uint8Array> = createWindowMask(L, L, [2, 0], { align: 'top-left' });
  const ids: Int32Array = segmentsFromLengths([3, 5], L);
  const fromTorch: MaskTensor<Uint8Array> = fromKeyPaddingMask({ data: [false, false, true, true], shape: [1, 4] });
  const additive: MaskTensor<Float32Array> = toAdditiveMask(causalMask);
  ma.attention(q, k, v, { allowed: causalMask, bias: additive, segments: { query: ids, key: ids } });
  ma.attention(q, k, v, { allowed: padding });
  ma.attention(q, k, v, { allowed: windowMask });
  console.log(fromTorch.shape);

  try {
    ma.attention(q, k, v, { window: [-2, 0] });
  } catch (e) {
    if (e instanceof MaskAttnRangeError || e instanceof MaskAttnTypeError) {
      const argument: string = e.argument;
      const asBuiltin: RangeError | TypeError = e;
      console.log(argument, asBuiltin.message);
    }
  }

  // KV cache: a float32 cache (the default dtype) and a float16 one fed raw halves.
  const T = 3;
  const cacheConfig: KVCacheOptions<'float32'> = { batch: B, kvHeads: Hkv, capacity: 64, headDim: D };
  const cache: KVCache<'float32'> = ma.createKVCache(cacheConfig);
  const halfCache: KVCache<'float16'> = ma.createKVCache({ batch: B, kvHeads: Hkv, capacity: 64, headDim: D, valueDim: 8, dtype: 'float16', window: 32 });
  const anyDtype: KVDtype = haveSimd ? 'float16' : 'float32';
  const either: KVCache = ma.createKVCache({ capacity: 16, headDim: D, dtype: anyDtype });
  try {
    const kNew: Tensor = { data: new Float32Array(B * Hkv * T * D), shape: [B, Hkv, T, D] };
    const vNew: Tensor = { data: new Float32Array(B * Hkv * T * D), shape: [B, Hkv, T, D] };
    const appendOptions: KVAppendOptions = { counts: [3, 1], layout: 'bhld' };
    cache.append(kNew, vNew);
    cache.append(kNew, vNew, appendOptions);
    cache.append(kNew, vNew, { counts: Int32Array.from([0, 2]) });
    const halves: KVInput<'float16'> = new Uint16Array(B * Hkv * T * D);
    halfCache.append({ data: halves, shape: [B, Hkv, T, D] }, { data: new Uint16Array(B * Hkv * T * 8), shape: [B, Hkv, T, 8] });
    halfCache.append(kNew, { data: new Float32Array(B * Hkv * T * 8), dims: [B, Hkv, T, 8] });
    const lengths: Int32Array = cache.lengths;
    const bytes: number = cache.byteLength + halfCache.byteLength;
    const dtype: 'float16' = halfCache.config.dtype;
    const ring: number = halfCache.config.window + halfCache.config.valueDim;
    const step: Tensor = { data: new Float32Array(B * Hq * 1 * D), shape: [B, Hq, 1, D] };
    const attendOptions: KVAttendOptions = {
      causal: false, window: [16, 0], alibiSlopes: [0.5, 0.25, 0.125, 0.0625], softcap: 30, fullyMasked: 'nan',
      queryLengths: [1, 0], returnWeights: true, returnLse: true, returnStats: true, scale: 0.25, layout: 'bhld',
    };
    const attended: AttentionResult = cache.attend(step, attendOptions);
    const decoded: Float32Array = cache.attend(step).output.data;
    const lseRows: Float32Array | undefined = halfCache.attend(step, { returnLse: true }).lse?.data;
    console.log(lengths[0], bytes, dtype, ring, attended.weights?.shape, decoded.length, lseRows?.length, either.config.dtype);
    // Quantized caches: 8-bit keys with 4-bit values, read() back as float32.
    const quant: KVCache<'q8'> = ma.createKVCache({ capacity: 16, headDim: D, dtype: 'q8', valueDtype: 'q4', keyRotation: 'none' });
    const contents: { key: { data: Float32Array; shape: [number, number, number] }; start: number } = quant.read(0);
    const sides: [KVDtype, KVDtype] = [quant.config.keyDtype, quant.config.valueDtype];
    console.log(contents.key.shape, contents.start, sides, quant.config.keyRotation);
    // @ts-expect-error 'q2' is not a cache dtype
    ma.createKVCache({ capacity: 8, headDim: D, keyDtype: 'q2' });
    // @ts-expect-error rotations are 'automatic' | 'none' | 'hadamard'
    ma.createKVCache({ capacity: 8, headDim: D, dtype: 'q4', keyRotation: 'random' });
    // RoPE: per call in attention(), the cache's own at creation; attend refuses a per-call one.
    const rope: RopeOptions = { theta: 500000, dims: 8, layout: 'interleaved', offset: 4 };
    const ropeLayout: RopeLayout = 'halves';
    ma.attention(q, k, v, { rope, causal: true });
    const roped = ma.createKVCache({ capacity: 16, headDim: D, rope: { layout: ropeLayout } });
    const ropeConfig: ResolvedRope | null = roped.config.rope;
    console.log(ropeConfig?.theta, ropeConfig?.dims, ropeConfig?.scaling?.attentionFactor);
    // A model's rope_scaling block, typed per type.
    const llama31: RopeScaling = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 };
    ma.attention(q, k, v, { rope: { theta: 500000, scaling: llama31 } });
    ma.createKVCache({ capacity: 16, headDim: D, dtype: 'bfloat16', rope: { scaling: { type: 'yarn', factor: 4, originalMaxPositions: 32768 } } });
    // @ts-expect-error llama3 needs its low and high frequency factors
    ma.attention(q, k, v, { rope: { scaling: { type: 'llama3', factor: 8, originalMaxPositions: 8192 } } });
    // @ts-expect-error scaling types are linear, dynamic, llama3, yarn, longrope, factors
    ma.attention(q, k, v, { rope: { scaling: { type: 'ntk', factor: 2 } } });
    // @ts-expect-error the cache's rope applies: attend takes none
    roped.attend(step, { rope });
    // @ts-expect-error layouts are 'halves' | 'interleaved'
    ma.attention(q, k, v, { rope: { layout: 'neox' } });
    roped.dispose();
    quant.dispose();
    cache.truncate([2, 1]);
    cache.truncate(Int32Array.from([0, 0]));
    cache.reset();
    // @ts-expect-error a float32 cache does not take raw halves
    cache.append({ data: new Uint16Array(4), shape: [1, 1, 1, 4] }, vNew);
    // @ts-expect-error keyLengths are the cache's lengths
    cache.attend(step, { keyLengths: [1, 1] });
    // @ts-expect-error capacity is required
    ma.createKVCache({ headDim: D });
    // @ts-expect-error 'float8' is not a cache dtype
    ma.createKVCache({ capacity: 8, headDim: D, dtype: 'float8' });
    // @ts-expect-error lengths is read-only
    cache.lengths = lengths;
    // @ts-expect-error unknown append option
    cache.append(kNew, vNew, { count: [1, 1] });
  } finally {
    cache.dispose();
    halfCache.dispose();
    either.dispose();
  }

  // Misuse the types must reject (each line is an error, or tsc fails on the unused directive):
  // @ts-expect-error a Float64Array is not a Float32Array tensor
  ma.attention({ data: new Float64Array(4), shape: [1, 1, 1, 4] }, k, v);
  // @ts-expect-error unknown option (a typo of `causal`)
  ma.attention(q, k, v, { casual: true });
  // @ts-expect-error 'ignore' is not a fully-masked policy
  ma.attention(q, k, v, { fullyMasked: 'ignore' });
  // @ts-expect-error the boolean mask takes a Uint8Array
  ma.attention(q, k, v, { allowed: { data: new Float32Array(8), shape: [8] } });
  // @ts-expect-error returnWeights is fixed when the workspace is created, not per run
  ws.run({ returnWeights: true });
  // @ts-expect-error backend is read-only
  ma.backend = backend;
  // @ts-expect-error threads is a number ('auto' is for init)
  ma.attention(q, k, v, { threads: 'auto' });
  // @ts-expect-error 'fast' is not a relaxed setting
  void init({ relaxed: 'fast' });
}

void main();

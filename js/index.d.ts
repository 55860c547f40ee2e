// Public types of the maskattn JavaScript API (hand-written; checked by compiling
// tests/js/types/consumer.ts with `tsc --noEmit` in the tests).

/** A dense tensor: `shape` (or `dims`, as onnxruntime-web tensors have) in row-major order. */
export interface Tensor<T extends ArrayBufferView = Float32Array> {
  data: T;
  shape?: readonly number[];
  dims?: readonly number[];
}

/** The WebAssembly builds the package ships; `init()` picks one (see the README). */
export type BuildName = 'maskattn-scalar' | 'maskattn-simd' | 'maskattn-simd-relaxed' | 'maskattn-simd-threads' | 'maskattn-simd-relaxed-threads';

export interface Backend {
  /** Whether a SIMD128 build is running. */
  readonly simd: boolean;
  /** Whether its kernel uses relaxed SIMD (fused multiply-add, f32x4.relaxed_madd). */
  readonly relaxed: boolean;
  /**
   * The kernel target running the attention: 'simd128' or 'scalar', maskattn's C++ name for it
   * (`target_name()`, docs/cpp.md). Not the build: the relaxed and threaded builds run 'simd128'
   * too; `build` names the build.
   */
  readonly arch: string;
  /** Float lanes per vector (4 for SIMD128, 1 for scalar). */
  readonly lanes: number;
  /**
   * The integer dot product of Q·Kᵀ over q8/q4 KV caches (exact in every case):
   * 'relaxed-i8' (i32x4.relaxed_dot_i8x16_i7x16_add_s, relaxed builds where the engine computes it
   * as specified, e.g. Chromium with AVX-VNNI or on ARM), 'relaxed-i8-i16x8' (i16x8.relaxed_dot_i8x16_i7x16_s
   * and a pairwise widening add for q4 keys, 'i16' for q8 keys, which run faster on it: relaxed
   * builds where only that form is exact, e.g. Node 20, or where the engine lowers the first one
   * without AVX-VNNI, e.g. Chromium on AMD Zen 3), 'i16'
   * (i32x4.dot_i16x8_s: SIMD128 builds, and relaxed builds where neither is exact), 'scalar'. The
   * relaxed builds check the instructions on known inputs when the module starts.
   */
  readonly quantDot: 'relaxed-i8' | 'relaxed-i8-i16x8' | 'i16' | 'scalar';
  /** Most threads a call may use: the threaded build's worker pool plus the calling thread; 1 otherwise. */
  readonly threads: number;
  /**
   * Which build was loaded (a row of the package's build table). Without "maskattn-" it is also the
   * CMake flavour of the same build of the C++ library (MASKATTN_WASM_FLAVOR, docs/embedding.md).
   */
  readonly build: BuildName;
  readonly version: string;
}

export interface InitOptions {
  /** 'auto' (default) picks SIMD128 when the engine has it; true requires it; false uses the scalar build. */
  simd?: 'auto' | boolean;
  /**
   * 'auto' (default) picks the relaxed-SIMD build (fused multiply-add) when the engine validates it;
   * true requires it; false uses the plain SIMD128 build. (Node 20: --experimental-wasm-relaxed-simd.)
   */
  relaxed?: 'auto' | boolean;
  /**
   * Most threads (the calling thread included): 'auto' (default) = the cores the engine reports
   * (navigator.hardwareConcurrency, os.availableParallelism()), at most 16, where threads can run
   * (Node, cross-origin isolated pages); elsewhere, or with 1, the single-threaded build loads.
   * Per module: it starts threads - 1 Web Workers once. Beside a runtime with its own workers
   * (onnxruntime-web numThreads > 1, transformers.js), prefer 1 (docs/embedding.md).
   */
  threads?: 'auto' | number;
  /**
   * Where to load a file of the build from: '<build>.wasm', and '<build>.worker.js' for the
   * threaded builds in browsers.
   */
  locateFile?: (file: string, build: BuildName) => string;
  /** The .wasm bytes of the chosen build, for environments without fetch (pass simd, relaxed and threads explicitly). */
  wasmBinary?: ArrayBuffer | Uint8Array;
}

export type Layout = 'bhld' | 'blhd';
export type Align = 'bottom-right' | 'top-left';
export type FullyMaskedPolicy = 'zero' | 'nan' | 'uniform';

/** Mask rules: every active rule must allow a (query, key) pair. See docs/semantics.md. */
export interface MaskOptions {
  /** Default 1/sqrt(D) (1 when D = 0). */
  scale?: number;
  /** Memory layout of q, k, v and the output: [B, H, L, D] (default) or [B, L, H, D]. */
  layout?: Layout;
  /** Keys j <= d(i) only. */
  causal?: boolean;
  /** Where d(i) sits when Lq != Lk: 'bottom-right' (default, i + kLen - qLen) or 'top-left' (i). */
  align?: Align;
  /** Valid keys per batch entry (padding at the end). */
  keyLengths?: Int32Array | readonly number[];
  /** Valid queries per batch entry; rows beyond are padding and attend nothing. */
  queryLengths?: Int32Array | readonly number[];
  /** Nonzero = may attend; shape broadcastable (right-aligned) to [B, Hq, Lq, Lk]. */
  allowed?: Tensor<Uint8Array>;
  /** Added to the logits (-Infinity masks); shape broadcastable to [B, Hq, Lq, Lk]. */
  bias?: Tensor<Float32Array>;
  /** Sliding window [left, right] around d(i); -1 = unbounded side. */
  window?: readonly [number, number];
  /** Prefix-LM: keys j < prefix are always visible. */
  prefix?: number;
  /** Segment ids (document masking): a pair needs equal ids. query: [B*Lq], key: [B*Lk] (flat or nested). */
  segments?: { query: Int32Array | readonly number[] | readonly (readonly number[])[]; key: Int32Array | readonly number[] | readonly (readonly number[])[] };
  /** ALiBi slope per query head: adds -slope[h] * |d(i) - j|. */
  alibiSlopes?: Float32Array | readonly number[];
  /**
   * Learned attention sinks (gpt-oss; ONNX head_sink): one logit per query head [Hq]. Each row's
   * softmax denominator gains e^(sinks[h] - max), a virtual key whose value is 0, so the weights sum
   * to less than 1; a row with no key left returns 0 (lse = the sink) under every policy. -Infinity
   * = no sink for that head.
   */
  sinks?: Float32Array | readonly number[];
  /**
   * Tree verification (speculative decoding): the last Lq keys of each sequence are the query nodes
   * of a tree; tree[i] is node i's parent (-1 = a root, hanging off the earlier keys; else an earlier
   * node). Node i sees every key before the tree, its ancestors and itself. [Lq] for every sequence,
   * or [B * Lq]. No Lq x Lk mask is made.
   */
  tree?: Int32Array | readonly number[];
  /**
   * Rotary position embedding applied to Q and K before Q·Kᵀ (docs/semantics.md, "Rotary position
   * embedding"): key j sits at position j + offset, query i at (Lk - Lq + i) + offset. A KV cache has
   * its own (createKVCache({ rope })) and refuses this one.
   */
  rope?: RopeOptions;
  /** softcap c > 0: s = c * tanh(s / c), applied before bias and masks. */
  softcap?: number;
  /** What a row with no key to attend returns (default 'zero'). */
  fullyMasked?: FullyMaskedPolicy;
  /** Also return the tile counters of the kernel. */
  returnStats?: boolean;
  /**
   * Most threads for this call (default: `backend.threads`, all the module has; larger counts are
   * capped to it). The library runs as many as pay off for the problem's size (stats.threadsUsed).
   * `threads: 1` is cheap: the call runs on the calling thread alone and the module's workers are
   * not woken. A page whose model runtime runs its own workers: docs/embedding.md, "Threads in JavaScript".
   */
  threads?: number;
}

/** 'halves': pairs (i, i + dims/2) (GPT-NeoX, Llama); 'interleaved': pairs (2i, 2i + 1) (GPT-J). */
export type RopeLayout = 'halves' | 'interleaved';

/**
 * RoPE: pair i = (x, y) of a row at position p becomes (x cos a - y sin a, x sin a + y cos a),
 * a = p · theta^(-2i/dims).
 */
export interface RopeOptions {
  /**
   * The base, finite and > 0 (default 10000, Llama 2; 500000 in Llama 3), and not so small that
   * theta^(-(dims-2)/dims) · 2^32 overflows float64 (any theta >= 2.4e-299; a RangeError naming
   * rope.theta otherwise).
   */
  theta?: number;
  /** Rotated leading dimensions: even, <= D (default 0 = all of D). */
  dims?: number;
  /** Which elements pair up (default 'halves'). */
  layout?: RopeLayout;
  /** Added to every position: an integer in [0, 2^31 - 1] (default 0). */
  offset?: number;
  /** Scaling as a model's config.json states it (`rope_scaling`, in camelCase): docs/kv-cache.md. */
  scaling?: RopeScaling;
}

/** A cache's rope as its config reports it: defaults filled in, a scaling resolved (yarn's betas, the attentionFactor). */
export type ResolvedRope = Readonly<Required<Omit<RopeOptions, 'scaling'>> & { scaling?: Readonly<RopeScaling & { attentionFactor: number }> }>;

/**
 * RoPE scaling, named as Hugging Face's rope_scaling block (camelCase): each type reads its own
 * fields; defaults and derived values as the published definitions give them (docs/semantics.md).
 */
export type RopeScaling =
  | { type: 'linear'; factor: number }
  | { type: 'dynamic'; factor: number; originalMaxPositions: number }
  | { type: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositions: number }
  | {
      type: 'yarn'; factor: number; originalMaxPositions: number; betaFast?: number; betaSlow?: number;
      mscale?: number; mscaleAllDim?: number; attentionFactor?: number;
    }
  | {
      type: 'longrope'; shortFactor: ArrayLike<number>; longFactor: ArrayLike<number>; originalMaxPositions: number;
      /** max_position_embeddings / original_max_position_embeddings: the default attention factor's. */
      factor?: number; attentionFactor?: number;
    }
  | { type: 'factors'; freqFactors: ArrayLike<number>; attentionFactor?: number };

export interface AttentionOptions extends MaskOptions {
  /** Return the attention weights [B, Hq, Lq, Lk] (O(Lq*Lk) memory). */
  returnWeights?: boolean;
  /** Return the natural-log log-sum-exp of each row [B, Hq, Lq]. */
  returnLse?: boolean;
}

export interface Stats {
  tilesSkipped: number;
  tilesFull: number;
  tilesMixed: number;
  /** Threads the call ran on. */
  threadsUsed: number;
}

export interface AttentionResult {
  /** [B, Hq, Lq, Dv] (or [B, Lq, Hq, Dv] for layout 'blhd'). */
  output: { data: Float32Array; shape: number[] };
  weights?: { data: Float32Array; shape: number[] };
  lse?: { data: Float32Array; shape: number[] };
  stats?: Stats;
}

export interface WorkspaceShapes {
  q: readonly number[];
  k: readonly number[];
  v: readonly number[];
  layout?: Layout;
  returnWeights?: boolean;
  returnLse?: boolean;
}

/**
 * Buffers kept in wasm memory for repeated calls. Each property read returns a fresh zero-copy
 * view; a view kept across wasm memory growth is detached (length 0), so read the properties
 * again after anything that may allocate, and never use views after dispose().
 */
export declare class Workspace {
  readonly q: Float32Array;
  readonly k: Float32Array;
  readonly v: Float32Array;
  readonly output: Float32Array;
  readonly weights: Float32Array | null;
  readonly lse: Float32Array | null;
  readonly shapes: { q: number[]; k: number[]; v: number[]; output: number[]; weights: number[]; lse: number[] };
  run(options?: MaskOptions): { stats?: Stats };
  dispose(): void;
}

/**
 * Storage type of a KV cache: 'float16' and 'bfloat16' halve the memory and the bytes each step
 * reads (bfloat16: float32's range, 8 significant bits; what most models are trained in); 'q8'
 * and 'q4' store blocks of 32 values with one float32 scale (0.28x and 0.16x of float32 at
 * D = 128; docs/semantics.md, "Quantized caches"). The same names as `MaskAttn.kvDtypes` (the
 * library's table; tests/js/cache-table.test.mjs checks both unions against it).
 */
export type KVDtype = 'float32' | 'float16' | 'q8' | 'q4' | 'bfloat16';
/** The dtypes whose caches also take their stored 16-bit values (a Uint16Array) in append(). */
export type KVRawBitsDtype = 'float16' | 'bfloat16';

/** Key rotation before quantizing: 'automatic' (default) rotates q4 keys; 'hadamard' needs q8/q4 keys and an even headDim. */
export type KeyRotation = 'automatic' | 'none' | 'hadamard';

/** What a cache of a dtype accepts in append(): float16 and bfloat16 caches also take their raw 16-bit values. */
export type KVInput<T extends KVDtype = KVDtype> = T extends KVRawBitsDtype ? Float32Array | Uint16Array : Float32Array;

/** Configuration of `createKVCache` (all sizes are non-negative integers). */
export interface KVCacheOptions<T extends KVDtype = KVDtype> {
  /** Sequences (default 1). */
  batch?: number;
  /** Key/value heads Hkv (default 1); attend() takes any Hq that is a multiple of it (GQA/MQA). */
  kvHeads?: number;
  /** Positions per sequence; with a window, the slots of the ring (capacity >= window). */
  capacity: number;
  /** D, the key (and query) head size. */
  headDim: number;
  /** Dv, the value head size (default headDim). */
  valueDim?: number;
  /** 'float32' (default), 'float16' or 'bfloat16' (float input rounded to nearest even), 'q8' or 'q4': keys and values. */
  dtype?: T;
  /** The keys' type when it differs from dtype (e.g. dtype 'q8', valueDtype 'q4'). */
  keyDtype?: KVDtype;
  /** The values' type when it differs from dtype. */
  valueDtype?: KVDtype;
  /** A Hadamard rotation of keys before quantizing (q·k unchanged, outlier channels spread). */
  keyRotation?: KeyRotation;
  /**
   * W > 0: a sliding-window cache, a ring of `capacity` slots holding the newest positions, so
   * appends never run out of room; attend() sees positions d(i) - W + 1 ..= d(i). 0 (default): none.
   */
  window?: number;
  /**
   * StreamingLLM sink tokens (needs a window): positions 0 .. sinkTokens-1 of each sequence are kept
   * forever beside the newest `window`, and attend() sees both (capacity >= window + sinkTokens).
   */
  sinkTokens?: number;
  /**
   * P > 0: a paged cache. Memory is taken in pages of P positions as sequences grow (byteLength
   * grows), and fork() shares pages between sequences instead of copying them. 0 (default): one
   * block of batch x capacity positions, allocated up front.
   */
  pageSize?: number;
  /**
   * RoPE: keys are rotated by their absolute position (+ offset) when appended and stored rotated
   * (then Hadamard-rotated and quantized); attend() rotates each query row by its own position.
   * read() returns the stored (rotated) keys; keep() re-rotates the keys it moves.
   */
  rope?: RopeOptions;
}

export interface KVAppendOptions {
  /** Per sequence, how many of the T new positions it takes (counts[b] <= T); default all T. */
  counts?: Int32Array | readonly number[];
  /** Memory layout of k and v: [B, Hkv, T, D] (default) or [B, T, Hkv, D]. */
  layout?: Layout;
}

/**
 * attention()'s options, but causal by default (`causal: false` turns it off) and without
 * `keyLengths`: the cache's lengths are the key lengths. Masks broadcast to
 * [B, Hq, Lq, max(lengths)] and key segment ids are [B * max(lengths)].
 */
export interface KVAttendOptions extends Omit<AttentionOptions, 'keyLengths' | 'rope'> {
  keyLengths?: never;
  /** The cache's own rope applies (its configuration): a per-call one is an error. */
  rope?: never;
}

/**
 * Keys and values of earlier tokens in wasm memory, for token-by-token generation (see
 * docs/semantics.md, "KV cache"). The cache owns its memory until `dispose()`; use after dispose()
 * throws a RangeError (argument 'cache'), and dispose() twice is harmless.
 */
export declare class KVCache<T extends KVDtype = KVDtype> {
  /** The configuration with defaults filled in (valueDim = headDim, window 0 = none). */
  readonly config: Readonly<{
    batch: number; kvHeads: number; capacity: number; headDim: number; valueDim: number; dtype: T; window: number;
    keyDtype: KVDtype; valueDtype: KVDtype; keyRotation: KeyRotation;
    /**
     * null: no RoPE; else its fields with defaults filled in (dims 0 = headDim; a scaling with yarn's
     * betas and its attentionFactor resolved).
     */
    rope: ResolvedRope | null;
  }>;
  /**
   * Positions each sequence holds (absolute: with a window, tokens seen). A fresh copy on every
   * read, owned by the caller; it does not follow later appends.
   */
  readonly lengths: Int32Array;
  /**
   * Bytes of K/V storage: batch x kvHeads x capacity x (key row + value row), a row of n elements
   * taking 4n (float32), 2n (float16, bfloat16), or 36 (q8) / 20 (q4) bytes per block of 32.
   */
  readonly byteLength: number;
  /**
   * Writes k [B, Hkv, T, D] and v [B, Hkv, T, Dv] at each sequence's current length, in place
   * (k and v of the same typed-array kind). Past capacity (no window): RangeError naming the
   * sequence, and nothing is written.
   */
  append(k: Tensor<KVInput<T>>, v: Tensor<KVInput<T>>, options?: KVAppendOptions): void;
  /**
   * q [B, Hq, Lq, D] holds the newest Lq positions of each sequence (query i of sequence b is at
   * position lengths[b] - Lq + i); returns attention over the cache's positions (copies).
   * Weights are [B, Hq, Lq, max(lengths)].
   */
  attend(q: Tensor, options?: KVAttendOptions): AttentionResult;
  /**
   * The float32 contents sequence b holds (copies): dequantized for q8/q4 (keys unrotated), exact
   * for float32/float16/bfloat16. The first `sinks` rows are positions 0 .. sinks-1 (sink tokens a ring kept
   * below its window), the others positions start, start + 1, ... (a ring keeps the newest).
   */
  read(b: number): {
    key: { data: Float32Array; shape: [number, number, number] };
    value: { data: Float32Array; shape: [number, number, number] };
    start: number;
    sinks: number;
  };
  /**
   * Sequence dst (empty) then holds exactly what src holds. Paged caches share src's pages (O(1),
   * copy on write); contiguous ones copy. Appends and truncates on either never change the other.
   */
  fork(src: number, dst: number): void;
  /**
   * After attend(q, { tree }): keeps the accepted path of sequence b's tree (node indices from a
   * root down), moving its keys and values into place; the sequence continues from its last node.
   */
  keep(b: number, tree: Int32Array | readonly number[], path: Int32Array | readonly number[]): void;
  /** A paged cache's page table of sequence b (-1 = no page yet); equal numbers are shared pages. */
  pages(b: number): Int32Array;
  /** Shortens sequences (rollback of rejected speculative tokens): each in [0, current length]. */
  truncate(lengths: Int32Array | readonly number[]): void;
  /** Empties every sequence. */
  reset(): void;
  /** Frees the cache's wasm memory. */
  dispose(): void;
}

/** The library's limits (from the WebAssembly module: one source for C++ and JavaScript). */
export interface Limits {
  /** Most bytes one buffer (tensor, mask, output, cache storage) may need: 2^31 - 1 in wasm32. */
  readonly maxBytes: number;
  /** Longest sequence (Lq, Lk of a tensor, a cache without a window's positions): 2^23. */
  readonly maxSequenceLength: number;
  /** Most tokens a window cache (a ring) may see: 2^31 - 1 (it holds only its capacity). */
  readonly maxRingLength: number;
}

export declare class MaskAttn {
  readonly backend: Backend;
  readonly limits: Limits;
  /** The KV cache dtypes this module stores, in the library's order ('float32', the default, first). */
  readonly kvDtypes: readonly KVDtype[];
  attention(q: Tensor, k: Tensor, v: Tensor, options?: AttentionOptions): AttentionResult;
  createWorkspace(shapes: WorkspaceShapes): Workspace;
  /** A KV cache in wasm memory; `dispose()` it when done. */
  createKVCache<T extends KVDtype = 'float32'>(config: KVCacheOptions<T>): KVCache<T>;
  /**
   * Combines partial results of the same queries over disjoint key sets (each as attention() or
   * cache.attend() returns it with returnLse: output [B, H, L, Dv], lse [B, H, L]) into the result
   * over their union, as split-K does inside a call. A part whose lse is -inf for a row adds
   * nothing there; a row no part attends gets 0 and lse -inf. At most 65,536 parts, read once by
   * index (a hole is a TypeError naming `parts[i]`); parts with no rows give an empty result.
   */
  mergeAttention(parts: ReadonlyArray<{ output: Tensor; lse: Tensor }>): {
    output: { data: Float32Array; shape: number[] };
    lse: { data: Float32Array; shape: number[] };
  };
}

/** Loads the module once per build and thread count; later calls return the same instance. */
export declare function init(options?: InitOptions): Promise<MaskAttn>;
/** Whether this engine supports WebAssembly SIMD128. */
export declare function simdSupported(): boolean;
/** Whether this engine supports WebAssembly relaxed SIMD (the relaxed builds). */
export declare function relaxedSimdSupported(): boolean;
/** Whether the threaded builds can run here (Node; cross-origin isolated pages and their workers). */
export declare function threadsSupported(): boolean;

export declare class MaskAttnTypeError extends TypeError {
  readonly argument: string;
}
export declare class MaskAttnRangeError extends RangeError {
  readonly argument: string;
}
export declare const version: string;
export * from './masks.js';

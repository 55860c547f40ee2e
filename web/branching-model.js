// The branching panel's sequences and what maskattn's cache does with them (branching.js wires the
// panel, branching-view.js draws it): a prompt forked to three sequences in a paged cache, and a draft
// tree verified in one attend, then one of its paths kept. Each function runs on a cache of its own
// and returns plain numbers, so the panel can be redrawn from them.

import { buildProblem, tokenize } from './embedding.js';

export const PROMPT = tokenize('the cat sat on the');
export const FORKS = [tokenize('mat and slept'), tokenize('rug .'), tokenize('sofa all day')];  // each sequence's own tokens
// The draft tree: node i's token and parent (-1 = a root, hanging off the prompt).
export const NODES = tokenize('mat sofa and . . then');
export const TREE = [-1, -1, 0, 0, 1, 2];
export const HQ = 2, HKV = 1, D = 8, PAGE = 2;
const SEED = 42;

/** The root-to-leaf paths of the tree, e.g. [[0, 2, 5], [0, 3], [1, 4]]. */
export function leafPaths(tree) {
  const children = tree.map((_, i) => tree.flatMap((p, c) => (p === i ? [c] : [])));
  const paths = [];
  const walk = (node, path) => {
    const here = [...path, node];
    if (children[node].length === 0) paths.push(here);
    for (const c of children[node]) walk(c, here);
  };
  tree.forEach((p, i) => { if (p === -1) walk(i, []); });
  return paths;
}

/** Is tree node t node i or one of its ancestors? */
export function sees(i, t) {
  for (let n = i; n >= 0; n = TREE[n]) if (n === t) return true;
  return false;
}

/** K, V rows [1, 1, T, D] and q rows [1, HQ, T, D] of tokens at positions from, from + 1, ... */
export function rows(tokens, from, count) {
  const P = buildProblem([tokens], { seed: SEED, heads: HQ, headDim: D, mode: 'embedding' });
  const pick = (a, h, L, T0, T) => a.subarray(((0 * P.H + h) * L + T0) * D, ((0 * P.H + h) * L + T0 + T) * D);
  const q = new Float32Array(HQ * count * D);
  for (let h = 0; h < HQ; h++) q.set(pick(P.q, h, P.Lq, from, count), h * count * D);
  return {
    k: { data: Float32Array.from(pick(P.k, 0, P.Lk, from, count)), shape: [1, HKV, count, D] },
    v: { data: Float32Array.from(pick(P.v, 0, P.Lk, from, count)), shape: [1, HKV, count, D] },
    q: { data: q, shape: [1, HQ, count, D] },
  };
}

/** Each sequence appends its own continuation, token by token, as generation would. */
function appendOwn(cache) {
  const B = FORKS.length;
  const longest = Math.max(...FORKS.map((f) => f.length));
  for (let t = 0; t < longest; t++) {
    const k = new Float32Array(B * HKV * D), v = new Float32Array(B * HKV * D);
    const counts = FORKS.map((f) => (t < f.length ? 1 : 0));
    FORKS.forEach((f, b) => {
      if (t >= f.length) return;
      const r = rows([...PROMPT, ...f], PROMPT.length + t, 1);
      k.set(r.k.data, b * D);
      v.set(r.v.data, b * D);
    });
    cache.append({ data: k, shape: [B, HKV, 1, D] }, { data: v, shape: [B, HKV, 1, D] }, { counts });
  }
}

/**
 * The fork part's state: the prompt in sequence 1 of a paged cache, then (forkIt) forked to the
 * others, each continuing on its own; page tables, lengths and bytes at each stage.
 */
export function runFork(ma, forkIt = true) {
  const B = FORKS.length;
  const cache = ma.createKVCache({ batch: B, kvHeads: HKV, capacity: 16, headDim: D, pageSize: PAGE });
  try {
    const prompt = rows(PROMPT, 0, PROMPT.length);
    const batch = (r) => {  // B copies of one sequence's rows (only sequence 0 takes them)
      const data = new Float32Array(B * r.data.length);
      for (let b = 0; b < B; b++) data.set(r.data, b * r.data.length);
      return { data, shape: [B, HKV, r.shape[2], D] };
    };
    cache.append(batch(prompt.k), batch(prompt.v), { counts: [PROMPT.length, 0, 0] });
    const promptBytes = cache.byteLength;
    const tables = () => Array.from({ length: B }, (_, b) => Array.from(cache.pages(b)));
    if (!forkIt) return { stage: 'prompt', tables: tables(), lengths: Array.from(cache.lengths), promptBytes, byteLength: cache.byteLength };
    for (let b = 1; b < B; b++) cache.fork(0, b);
    const afterFork = cache.byteLength;
    appendOwn(cache);
    const lengths = Array.from(cache.lengths);
    const pageBytes = promptBytes / Math.ceil(PROMPT.length / PAGE);
    const unshared = lengths.reduce((s, L) => s + Math.ceil(L / PAGE) * pageBytes, 0);
    return { stage: 'forked', tables: tables(), lengths, promptBytes, afterFork, byteLength: cache.byteLength, unshared, pageBytes };
  } finally {
    cache.dispose();
  }
}

/** A cache holding the prompt and then the draft nodes in node order, and the nodes' queries. */
function newTreeCache(ma) {
  const cache = ma.createKVCache({ kvHeads: HKV, capacity: 16, headDim: D });
  const all = [...PROMPT, ...NODES];
  const r = rows(all, 0, all.length);
  cache.append(r.k, r.v);
  return { cache, q: rows(all, PROMPT.length, NODES.length).q };
}

/** The tree part's state with the draft appended, not verified yet, or (verify) verified in one attend. */
export function treeState(ma, verify) {
  const { cache, q } = newTreeCache(ma);
  try {
    const lengthsBefore = Array.from(cache.lengths);
    const empty = { kept: null, lengthsAfter: null, keptTokens: null };
    if (!verify) return { verified: false, weights: null, Lk: cache.lengths[0], lengthsBefore, ...empty };
    const result = cache.attend(q, { tree: TREE, returnWeights: true });
    return { verified: true, weights: Array.from(result.weights.data), Lk: result.weights.shape[3], lengthsBefore, ...empty };
  } finally {
    cache.dispose();
  }
}

/** What cache.keep() leaves of the verified draft when `path` is accepted (fields added to the tree state). */
export function keepPath(ma, path) {
  const { cache } = newTreeCache(ma);
  try {
    cache.keep(0, TREE, path);
    const held = cache.read(0);
    return { kept: path, lengthsAfter: Array.from(cache.lengths), keptTokens: path.map((i) => NODES[i]), heldRows: held.key.shape[1] };
  } finally {
    cache.dispose();
  }
}

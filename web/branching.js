// The branching panel, under the KV cache panel: what generation does beyond one sequence.
//   Fork: a prompt appended once to a paged cache (pageSize 2), forked to two more sequences that
//     each go their own way; the page tables (cache.pages(b)) show which pages are shared and which
//     a sequence copied when it first wrote into a shared one, and byteLength what that saves.
//   Tree: a draft of 6 tokens in a tree after the prompt, verified in one cache.attend(q, { tree }):
//     each node sees the prompt, its ancestors and itself (the weights); then cache.keep() keeps the
//     chosen path, and the cache continues from it.
// Q, K and V come from the page's seeded token embeddings (embedding.js), as in the decode panel.

import { buildProblem, tokenize } from './embedding.js';
import { Heatmap, COLORS, weightColor, short, shorter, full } from './heatmap.js';
import { floatArray } from './call-panels.js';

const PROMPT = tokenize('the cat sat on the');
const FORKS = [tokenize('mat and slept'), tokenize('rug .'), tokenize('sofa all day')];  // each sequence's own tokens
// The draft tree: node i's token and parent (-1 = a root, hanging off the prompt).
const NODES = tokenize('mat sofa and . . then');
const TREE = [-1, -1, 0, 0, 1, 2];
const HQ = 2, HKV = 1, D = 8, SEED = 42, PAGE = 2;
const SHARED = '#7c5cc4';
const OWN = '#3a9a6a';
const EMPTY = '#eef1f4';

/** The root-to-leaf paths of the tree, e.g. [[0, 2, 5], [0, 3], [1, 4]]. */
function leafPaths(tree) {
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
function sees(i, t) {
  for (let n = i; n >= 0; n = TREE[n]) if (n === t) return true;
  return false;
}

/** K, V rows [1, 1, T, D] and q rows [1, HQ, T, D] of tokens at positions from, from + 1, ... */
function rows(tokens, from, count) {
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

/**
 * els: { fork, verify, keep, path, status, error, pagesCanvas, pagesTooltip, pagesReadout, treeCanvas,
 *        treeTooltip, treeReadout, call, json }; getMa() -> the MaskAttn in use; expose(state) for tests.
 */
export function setupBranching(els, { getMa, expose }) {
  const paths = leafPaths(TREE);
  els.path.replaceChildren(...paths.map((p, n) => {
    const o = document.createElement('option');
    o.value = String(n);
    o.textContent = p.map((i) => NODES[i]).join(' → ');
    return o;
  }));
  const pagesMap = new Heatmap(els.pagesCanvas, {
    tooltip: els.pagesTooltip, readout: els.pagesReadout, maxCell: 48,
    hint: 'Hover or tap a page for the positions it holds and who shares it.',
  });
  const treeMap = new Heatmap(els.treeCanvas, {
    tooltip: els.treeTooltip, readout: els.treeReadout, maxCell: 44,
    hint: 'Hover or tap a cell for the node, the position and its weight.',
  });
  let state = { fork: null, tree: null };

  function fail(e) {
    els.error.hidden = false;
    els.error.textContent = `${e.name}: ${e.message}`;
  }

  // ------------------------------------------------------------------ fork
  // forkIt false: only the prompt, in sequence 1 (what the panel shows before "Fork the prompt").
  function runFork(forkIt = true) {
    const ma = getMa();
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
      if (!forkIt) {
        state.fork = { stage: 'prompt', tables: Array.from({ length: B }, (_, b) => Array.from(cache.pages(b))), lengths: Array.from(cache.lengths), promptBytes, byteLength: cache.byteLength };
        return;
      }
      for (let b = 1; b < B; b++) cache.fork(0, b);
      const afterFork = cache.byteLength;
      // Each sequence appends its own continuation (token by token, as generation would).
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
      const tables = Array.from({ length: B }, (_, b) => Array.from(cache.pages(b)));
      const lengths = Array.from(cache.lengths);
      const pageBytes = promptBytes / Math.ceil(PROMPT.length / PAGE);
      const unshared = lengths.reduce((s, L) => s + Math.ceil(L / PAGE) * pageBytes, 0);
      state.fork = { stage: 'forked', tables, lengths, promptBytes, afterFork, byteLength: cache.byteLength, unshared, pageBytes };
    } finally {
      cache.dispose();
    }
  }

  // ------------------------------------------------------------------ tree
  function newTreeCache() {
    const ma = getMa();
    const cache = ma.createKVCache({ kvHeads: HKV, capacity: 16, headDim: D });
    const all = [...PROMPT, ...NODES];
    const r = rows(all, 0, all.length);
    cache.append(r.k, r.v);  // the prompt, then the draft nodes in node order
    return { cache, q: rows(all, PROMPT.length, NODES.length).q };
  }

  // The draft appended, not verified yet (what the panel shows before "Verify the draft tree").
  function draft() {
    const { cache } = newTreeCache();
    try {
      state.tree = { verified: false, weights: null, Lk: cache.lengths[0], lengthsBefore: Array.from(cache.lengths), kept: null, lengthsAfter: null, keptTokens: null };
    } finally {
      cache.dispose();
    }
  }

  function verify() {
    const { cache, q } = newTreeCache();
    try {
      const result = cache.attend(q, { tree: TREE, returnWeights: true });
      state.tree = {
        verified: true, weights: Array.from(result.weights.data), Lk: result.weights.shape[3], lengthsBefore: Array.from(cache.lengths),
        kept: null, lengthsAfter: null, keptTokens: null,
      };
    } finally {
      cache.dispose();
    }
  }

  function keep() {
    if (!state.tree?.verified) verify();
    const path = paths[Number(els.path.value) || 0];
    const { cache } = newTreeCache();
    try {
      cache.keep(0, TREE, path);
      const held = cache.read(0);
      state.tree.kept = path;
      state.tree.lengthsAfter = Array.from(cache.lengths);
      state.tree.keptTokens = path.map((i) => NODES[i]);
      state.tree.heldRows = held.key.shape[1];
    } finally {
      cache.dispose();
    }
  }

  // ------------------------------------------------------------------ drawing
  function render() {
    const f = state.fork;
    if (f) {
      const counts = new Map();
      for (const t of f.tables) for (const p of t) if (p >= 0) counts.set(p, (counts.get(p) ?? 0) + 1);
      const cols = f.tables[0].length;
      pagesMap.update({
        rows: f.tables.length, cols,
        rowLabels: f.tables.map((_, b) => (b === 0 ? 'seq 1' : `seq ${b + 1} (fork)`)),
        colLabels: Array.from({ length: cols }, (_, i) => `${i * PAGE}–${i * PAGE + PAGE - 1}`),
        cell: (b, i) => {
          const p = f.tables[b][i];
          if (p < 0) return { fill: EMPTY, mark: '·', ink: COLORS.muted };
          return { fill: counts.get(p) > 1 ? SHARED : OWN, text: `#${p}`, ink: '#ffffff' };
        },
        info: (b, i) => {
          const p = f.tables[b][i];
          const where = `sequence ${b + 1}, positions ${i * PAGE}–${i * PAGE + PAGE - 1}`;
          if (p < 0) return `${where}: no page yet (the sequence holds ${f.lengths[b]} positions)`;
          const by = f.tables.flatMap((t, c) => (t[i] === p ? [c + 1] : []));
          return `${where}: page #${p}, ${by.length > 1 ? `shared by sequences ${by.join(', ')} (one copy in memory)` : 'this sequence’s own (copied on its first write, or new)'}`;
        },
      });
    }
    const t = state.tree;
    if (t) {
      const start = PROMPT.length;
      const tokenAt = (j) => (j < start ? PROMPT[j] : NODES[j - start]);
      treeMap.update({
        rows: NODES.length, cols: t.Lk,
        rowLabels: NODES.map((tok, i) => `node ${i} “${tok}”`),
        colLabels: Array.from({ length: t.Lk }, (_, j) => tokenAt(j)),
        gapBeforeCol: start,
        cell: (i, j) => {
          const visible = j < start || sees(i, j - start);
          if (!visible) return { hatch: true };
          if (!t.verified) return { fill: '#dbe4ee' };  // visible, no weight yet
          const w = t.weights[i * t.Lk + j];  // head 1
          const onPath = t.kept && j >= start && t.kept.includes(j - start) && t.kept.includes(i);
          return { fill: weightColor(w), text: short(w), narrow: shorter(w), outline: onPath ? COLORS.highlight : null };
        },
        info: (i, j) => {
          if (!t.verified) return `node ${i} “${NODES[i]}” → position ${j}: ${j < start || sees(i, j - start) ? 'visible' : 'masked (another branch)'}; press “Verify the draft tree” for the weights`;
          const w = t.weights[i * t.Lk + j];
          if (j < start) return `node ${i} “${NODES[i]}” → prompt position ${j} “${PROMPT[j]}”: weight ${full(w)} (every node sees the cache)`;
          const n = j - start;
          if (!sees(i, n)) return `node ${i} “${NODES[i]}” → node ${n} “${NODES[n]}”: masked, not an ancestor (another branch of the draft)`;
          return `node ${i} “${NODES[i]}” → node ${n} “${NODES[n]}”: weight ${full(w)} (${n === i ? 'itself' : 'an ancestor'})`;
        },
      });
    }
    const parts = [];
    if (f?.stage === 'prompt') parts.push(`Fork: the ${PROMPT.length}-token prompt is in sequence 1 (${f.promptBytes} bytes); sequences 2 and 3 are empty. Press “Fork the prompt”.`);
    else if (f) parts.push(`Forked: the ${PROMPT.length}-token prompt takes ${f.promptBytes} bytes; forking it twice adds ${f.afterFork - f.promptBytes}. ` +
      `After each sequence's own tokens: ${f.byteLength} bytes, against ${f.unshared} for three unshared copies (lengths [${f.lengths.join(', ')}]).`);
    if (t && !t.verified) parts.push(`Tree: ${NODES.length} draft nodes appended after the prompt, not verified yet (the map shows what each node may see). Press “Verify the draft tree”.`);
    else if (t) parts.push(`Tree: ${NODES.length} draft nodes verified in one call over ${t.lengthsBefore[0]} positions.` +
      (t.kept ? ` Kept “${t.keptTokens.join(' ')}”: cache.lengths = [${t.lengthsAfter.join(', ')}], the next token continues from it.` : ''));
    els.status.textContent = parts.join(' ');
    els.call.textContent = snippet(t?.kept ?? paths[Number(els.path.value) || 0]);
    // For tests and the curious: head 1's weights as rows [node][position].
    const weightRows = t?.weights ? NODES.map((_, i) => t.weights.slice(i * t.Lk, (i + 1) * t.Lk)) : null;
    const json = { fork: f, tree: t && { ...t, weights: weightRows }, paths };
    els.json.textContent = JSON.stringify(json);
    expose(json);
  }

  // Both parts of the panel as a program that runs when copied (what the two buttons and "Keep" do).
  function snippet(path) {
    const prompt = rows(PROMPT, 0, PROMPT.length);
    const own = FORKS.map((f) => rows([...PROMPT, ...f], PROMPT.length, f.length));
    const all = [...PROMPT, ...NODES];
    const draftRows = rows(all, PROMPT.length, NODES.length);
    const whole = rows(all, 0, all.length);
    const arr = (x) => floatArray(x, '    ', 96);
    return `// maskattn: forks of one prompt and a draft tree, as the page runs them.
// Prompt ${JSON.stringify(PROMPT.join(' '))}; the sequences continue ${FORKS.map((f) => JSON.stringify(f.join(' '))).join(', ')}; draft nodes ${JSON.stringify(NODES.join(' '))}.
import { init } from 'maskattn';

const [Hq, Hkv, D] = [${HQ}, ${HKV}, ${D}];
const promptK = ${arr(prompt.k.data)};
const promptV = ${arr(prompt.v.data)};
const ownK = [   // each sequence's own tokens after the prompt, row by row
${own.map((r) => `  ${arr(r.k.data)},`).join('\n')}
];
const ownV = [
${own.map((r) => `  ${arr(r.v.data)},`).join('\n')}
];
const ma = await init();

// Fork: the prompt once, in pages of ${PAGE}, shared by three sequences.
const B = 3, P = ${PROMPT.length};
const cache = ma.createKVCache({ batch: B, kvHeads: Hkv, capacity: 16, headDim: D, pageSize: ${PAGE} });
const copies = (x, T) => ({ data: Float32Array.from({ length: B * T * D }, (_, n) => x[n % (T * D)]), shape: [B, Hkv, T, D] });
cache.append(copies(promptK, P), copies(promptV, P), { counts: [P, 0, 0] });
cache.fork(0, 1);   // no copy: the same pages
cache.fork(0, 2);
for (let t = 0; t < Math.max(...ownK.map((x) => x.length / D)); t++) {   // one token per step and sequence
  const counts = ownK.map((x) => (t < x.length / D ? 1 : 0));
  const k = new Float32Array(B * D), v = new Float32Array(B * D);
  counts.forEach((c, b) => { if (c) { k.set(ownK[b].subarray(t * D, (t + 1) * D), b * D); v.set(ownV[b].subarray(t * D, (t + 1) * D), b * D); } });
  cache.append({ data: k, shape: [B, Hkv, 1, D] }, { data: v, shape: [B, Hkv, 1, D] }, { counts });   // a write into a shared page copies it
}
for (let b = 0; b < B; b++) console.log(\`pages(\${b})\`, Array.from(cache.pages(b)).join(' '));
console.log('lengths', Array.from(cache.lengths).join(' '), 'bytes', cache.byteLength);
cache.dispose();

// Tree: ${NODES.length} draft nodes after the prompt, verified in one call; node i sees the prompt, its ancestors and itself.
const tree = [${TREE.join(', ')}];   // parent of each node (-1: hangs off the prompt)
const draftK = ${arr(whole.k.data)};   // the prompt, then the nodes in node order
const draftV = ${arr(whole.v.data)};
const q = { data: ${arr(draftRows.q.data)}, shape: [1, Hq, ${NODES.length}, D] };
const draft = ma.createKVCache({ kvHeads: Hkv, capacity: 16, headDim: D });
draft.append({ data: draftK, shape: [1, Hkv, ${all.length}, D] }, { data: draftV, shape: [1, Hkv, ${all.length}, D] });
const { weights } = draft.attend(q, { tree, returnWeights: true });
const Lk = weights.shape[3];
for (let i = 0; i < tree.length; i++)   // head 1
  console.log(\`node \${i}:\`, Array.from(weights.data.subarray(i * Lk, (i + 1) * Lk), (w) => w.toFixed(4)).join(' '));
draft.keep(0, tree, [${path.join(', ')}]);   // the accepted path, compacted into place
console.log('after keep: lengths', Array.from(draft.lengths).join(' '));
draft.dispose();
`;
  }

  function act(fn) {
    els.error.hidden = true;
    try {
      fn();
      render();
    } catch (e) {
      fail(e);
    }
  }

  els.fork.addEventListener('click', () => act(runFork));
  els.verify.addEventListener('click', () => act(verify));
  els.keep.addEventListener('click', () => act(keep));
  els.path.addEventListener('change', () => act(() => { if (state.tree?.kept) keep(); }));
  return {
    reset() {
      state = { fork: null, tree: null };
      act(() => { runFork(false); draft(); });
    },
  };
}

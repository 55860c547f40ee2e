// The branching panel's pictures and text (branching.js wires it): the page tables of the forked
// cache, the draft tree's weights, the status line, the panel as a program that runs when copied,
// and the state as JSON for tests.

import { COLORS, weightColor, short, shorter, full } from './heatmap.js';
import { floatArray } from './call-panels.js';
import { PROMPT, FORKS, NODES, TREE, HQ, HKV, D, PAGE, sees, rows } from './branching-model.js';

const SHARED = '#7c5cc4';
const OWN = '#3a9a6a';
const EMPTY = '#eef1f4';

/** The page tables: one row per sequence, one column per page of positions; shared pages stand out. */
function drawPages(map, f) {
  const counts = new Map();
  for (const t of f.tables) for (const p of t) if (p >= 0) counts.set(p, (counts.get(p) ?? 0) + 1);
  const cols = f.tables[0].length;
  map.update({
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

/** A tree map cell's readout: what node i sees at position j, and with what weight once verified. */
function treeInfo(t, i, j) {
  const start = PROMPT.length;
  if (!t.verified) return `node ${i} “${NODES[i]}” → position ${j}: ${j < start || sees(i, j - start) ? 'visible' : 'masked (another branch)'}; press “Verify the draft tree” for the weights`;
  const w = t.weights[i * t.Lk + j];
  if (j < start) return `node ${i} “${NODES[i]}” → prompt position ${j} “${PROMPT[j]}”: weight ${full(w)} (every node sees the cache)`;
  const n = j - start;
  if (!sees(i, n)) return `node ${i} “${NODES[i]}” → node ${n} “${NODES[n]}”: masked, not an ancestor (another branch of the draft)`;
  return `node ${i} “${NODES[i]}” → node ${n} “${NODES[n]}”: weight ${full(w)} (${n === i ? 'itself' : 'an ancestor'})`;
}

/** The draft tree: one row per node, one column per position (the prompt, a gap, the nodes). */
function drawTree(map, t) {
  const start = PROMPT.length;
  const tokenAt = (j) => (j < start ? PROMPT[j] : NODES[j - start]);
  map.update({
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
    info: (i, j) => treeInfo(t, i, j),
  });
}

function statusText(f, t) {
  const parts = [];
  if (f?.stage === 'prompt') parts.push(`Fork: the ${PROMPT.length}-token prompt is in sequence 1 (${f.promptBytes} bytes); sequences 2 and 3 are empty. Press “Fork the prompt”.`);
  else if (f) parts.push(`Forked: the ${PROMPT.length}-token prompt takes ${f.promptBytes} bytes; forking it twice adds ${f.afterFork - f.promptBytes}. ` +
    `After each sequence's own tokens: ${f.byteLength} bytes, against ${f.unshared} for three unshared copies (lengths [${f.lengths.join(', ')}]).`);
  if (t && !t.verified) parts.push(`Tree: ${NODES.length} draft nodes appended after the prompt, not verified yet (the map shows what each node may see). Press “Verify the draft tree”.`);
  else if (t) parts.push(`Tree: ${NODES.length} draft nodes verified in one call over ${t.lengthsBefore[0]} positions.` +
    (t.kept ? ` Kept “${t.keptTokens.join(' ')}”: cache.lengths = [${t.lengthsAfter.join(', ')}], the next token continues from it.` : ''));
  return parts.join(' ');
}

/** Draws the panel from its state ({ fork, tree }); `path` is the path the code panel keeps. Returns what tests read. */
export function render(els, maps, state, paths, path) {
  const f = state.fork;
  const t = state.tree;
  if (f) drawPages(maps.pages, f);
  if (t) drawTree(maps.tree, t);
  els.status.textContent = statusText(f, t);
  els.call.textContent = snippet(t?.kept ?? path);
  // For tests and the curious: head 1's weights as rows [node][position].
  const weightRows = t?.weights ? NODES.map((_, i) => t.weights.slice(i * t.Lk, (i + 1) * t.Lk)) : null;
  const json = { fork: f, tree: t && { ...t, weights: weightRows }, paths };
  els.json.textContent = JSON.stringify(json);
  return json;
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

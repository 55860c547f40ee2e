// The page's text panels: the library call the heatmaps come from, written out as a program that runs
// when copied, and the weights of one sentence and head as an accessible table.
import { alibiSlopes } from './embedding.js';
import { full } from './heatmap.js';
import { $, el } from './controls.js';

/** The shortest decimal that reads back as the same float32 (so a snippet rebuilds the exact inputs). */
export function f32(x) {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : '-Infinity';
  for (let p = 1; p <= 9; p++) {
    const t = x.toPrecision(p);
    if (Math.fround(Number(t)) === x) return String(Number(t));
  }
  return String(x);
}

/** A Float32Array literal, wrapped at about `width` characters a line. */
export function floatArray(data, indent = '  ', width = 100) {
  const lines = [];
  let line = '';
  for (const x of data) {
    const item = `${f32(x)}, `;
    if (line.length + item.length > width) {
      lines.push(indent + line.trimEnd());
      line = '';
    }
    line += item;
  }
  if (line) lines.push(indent + line.trimEnd());
  return `new Float32Array([\n${lines.join('\n')}\n])`;
}

const literal = (x) => (Array.isArray(x) ? `[${x.map((v) => (typeof v === 'number' ? f32(v) : literal(v))).join(', ')}]` : typeof x === 'string' ? `'${x}'` : String(x));

/**
 * The call as a program that runs when copied (Node 18+ with the npm package, or a bundler): it
 * imports 'maskattn', builds the page's Q, K and V (their exact float32 values), makes the same call
 * with the same options, and prints the rows of the Output map the page shows (sentence b, head h).
 */
export function renderCall(ma, st, P, options, b, h) {
  const lines = [];
  for (const [key, value] of Object.entries(options)) {
    if (key === 'segments') lines.push(`  segments: {\n    query: ${literal(value.query)},\n    key: ${literal(value.key)},\n  },`);
    else if (key === 'allowed') lines.push(`  allowed: { data: Uint8Array.from('${Array.from(value.data).join('')}', Number), shape: [${value.shape.join(', ')}] },   // the custom mask, 1 = allowed`);
    else lines.push(`  ${key}: ${literal(value)},`);
  }
  if (st.alibi) lines.push(`  alibiSlopes: ${literal(alibiSlopes(P.H))},`);
  if (st.softcap > 0) lines.push(`  softcap: ${f32(st.softcap)},`);
  lines.push(`  fullyMasked: '${st.policy}',`, '  returnWeights: true,', '  returnLse: true,');
  const sentences = P.keyTokens.map((row, bb) => row.slice(0, P.lengths[bb]).join(' '));
  el.call.textContent = `// maskattn ${ma.backend.version}: the call behind the page's pictures (${ma.backend.build} drew them).
// Sentences: ${sentences.map((t) => JSON.stringify(t)).join(', ')}; ${P.H} heads, D = ${P.D}${st.mode === 'random' ? ', random Q, K, V' : ', token embeddings'}, seed ${st.seed}.
import { init } from 'maskattn';

const [B, H, Lq, Lk, D] = [${P.B}, ${P.H}, ${P.Lq}, ${P.Lk}, ${P.D}];
const Q = ${floatArray(P.q)};
const K = ${floatArray(P.k)};
const V = ${floatArray(P.v)};

const ma = await init();
const q = { data: Q, shape: [B, H, Lq, D] };   // [B, Hq, Lq, D]
const k = { data: K, shape: [B, H, Lk, D] };   // [B, Hkv, Lk, D]
const v = { data: V, shape: [B, H, Lk, D] };   // [B, Hkv, Lk, Dv]
const { output, weights, lse } = ma.attention(q, k, v, {
${lines.join('\n')}
});

// The Output map of sentence ${b + 1}, head ${h + 1}: one line per query row.
const b = ${b}, h = ${h};
for (let i = 0; i < Lq; i++) {
  const row = output.data.subarray(((b * H + h) * Lq + i) * D, ((b * H + h) * Lq + i + 1) * D);
  console.log(\`row \${i}:\`, Array.from(row, (x) => x.toFixed(4)).join(' '));
}
`;
}

/** The weights of sentence b, head h as a table (while its details element is open). */
export function renderTable(P, b, h, W, allowed, rowLabels, colLabels) {
  const details = $('table-details');
  if (!details.open) {
    el.weightsTable.replaceChildren();
    return;
  }
  const table = document.createElement('table');
  table.className = 'weights-table';
  const caption = document.createElement('caption');
  caption.textContent = `Weights of sentence ${b + 1}, head ${h + 1}: rows are queries, columns keys; “masked” cells are never read.`;
  table.append(caption);
  const head = document.createElement('tr');
  head.append(document.createElement('td'));
  colLabels.forEach((t, j) => {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = `${j}: ${t}`;
    head.append(th);
  });
  table.append(head);
  for (let i = 0; i < P.Lq; i++) {
    const tr = document.createElement('tr');
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = `${i}: ${rowLabels[i]}`;
    tr.append(th);
    for (let j = 0; j < P.Lk; j++) {
      const td = document.createElement('td');
      const w = W(i, j);
      if (!allowed(i, j) && w === 0) {
        td.textContent = 'masked';
        td.className = 'masked';
      } else td.textContent = full(w);
      tr.append(td);
    }
    table.append(tr);
  }
  el.weightsTable.replaceChildren(table);
}

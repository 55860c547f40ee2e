// The page's text panels: the library call the heatmaps come from, written out as code, and the
// weights of one sentence and head as an accessible table.
import { alibiSlopes } from './embedding.js';
import { full } from './heatmap.js';
import { $, el } from './controls.js';

/** The call as code, with the options the page passes (the heatmaps' call). */
export function renderCall(ma, st, P, options) {
  const shown = { ...options };
  if (shown.segments) shown.segments = { query: `[${shown.segments.query.join(', ')}]`, key: `[${shown.segments.key.join(', ')}]` };
  if (shown.allowed) shown.allowed = `{ data: Uint8Array(${shown.allowed.data.length}), shape: [${shown.allowed.shape.join(', ')}] }`;
  if (st.alibi) shown.alibiSlopes = alibiSlopes(P.H);
  if (st.softcap > 0) shown.softcap = st.softcap;
  shown.fullyMasked = st.policy;
  shown.returnWeights = true;
  const lines = Object.entries(shown).map(([key, value]) => {
    let text;
    if (Array.isArray(value)) text = `[${value.map((x) => (typeof x === 'number' ? full(x) : x)).join(', ')}]`;
    else if (value && typeof value === 'object') text = `{ ${Object.entries(value).map(([k, v]) => `${k}: ${v}`).join(', ')} }`;
    else text = typeof value === 'string' && !value.startsWith('{') ? `'${value}'` : String(value);
    return `  ${key}: ${text},`;
  });
  el.call.textContent = `import { init } from '/js/index.js';
const ma = await init();   // ${ma.backend.arch}, ${ma.backend.lanes} lane(s), maskattn ${ma.backend.version}
const q = { data: Q, shape: [${P.B}, ${P.H}, ${P.Lq}, ${P.D}] };   // [B, Hq, Lq, D]
const k = { data: K, shape: [${P.B}, ${P.H}, ${P.Lk}, ${P.D}] };   // [B, Hkv, Lk, D]
const v = { data: V, shape: [${P.B}, ${P.H}, ${P.Lk}, ${P.D}] };   // [B, Hkv, Lk, Dv]
const { output, weights } = ma.attention(q, k, v, {
${lines.join('\n')}
});`;
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

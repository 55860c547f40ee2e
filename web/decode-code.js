// The decode panel's step as a program that runs when copied: every append so far, then this
// step's attend, with the exact K, V and q the page used.

import { floatArray } from './call-panels.js';
import { HQ, HKV, D } from './decode-session.js';

export function callText(s) {
  const taken = s.history.reduce((t, counts) => t.map((n, b) => n + counts[b]), new Array(s.B).fill(0));
  const rowsOf = (which) => Array.from({ length: s.B }, (_, b) => s.P[which].subarray(((b * s.P.H + 0) * s.P.Lk) * D, ((b * s.P.H + 0) * s.P.Lk + taken[b]) * D));
  const ropeCfg = s.rope ? `, rope: { theta: ${s.rope.theta}, layout: '${s.rope.layout}' }` : '';
  const cfg = `{ batch: ${s.B}, kvHeads: ${HKV}, capacity: ${s.capacity}, headDim: ${D}, dtype: '${s.dtype}'${s.window ? `, window: ${s.window}` : ''}${ropeCfg} }`;
  const opts = s.options.queryLengths ? `{ returnWeights: true, queryLengths: [${s.options.queryLengths.join(', ')}] }` : '{ returnWeights: true }';
  return `// maskattn: the KV cache panel at step ${s.step}, as code (${s.sentences.map((t) => JSON.stringify(t.join(' '))).join(', ')}).
import { init } from 'maskattn';

const [B, Hq, Hkv, D] = [${s.B}, ${HQ}, ${HKV}, ${D}];   // ${HQ} query heads share ${HKV} KV head
// K and V of every position each sequence has taken so far (the page's token embeddings), row by row${s.rope ? ',\n// unrotated: the cache rotates K as it appends and q as it attends (rope)' : ''}.
const K = [
${rowsOf('k').map((r) => `  ${floatArray(r, '    ', 96)},`).join('\n')}
];
const V = [
${rowsOf('v').map((r) => `  ${floatArray(r, '    ', 96)},`).join('\n')}
];
// The newest query of each sequence, [B, Hq, 1, D]${s.active.some((a) => !a) ? ' (zeros for a finished one: queryLengths 0)' : ''}.
const q = { data: ${floatArray(s.q.data, '  ', 96)}, shape: [B, Hq, 1, D] };
// What each append took: the prompts, then one token per step and sequence.
const appends = ${JSON.stringify(s.history)};

const ma = await init();
const cache = ma.createKVCache(${cfg});
const taken = new Array(B).fill(0);
for (const counts of appends) {
  const T = Math.max(...counts);
  const rows = (X) => {   // [B, Hkv, T, D]; rows past counts[b] are never read (NaN here)
    const data = new Float32Array(B * Hkv * T * D).fill(NaN);
    counts.forEach((c, b) => data.set(X[b].subarray(taken[b] * D, (taken[b] + c) * D), b * T * D));
    return { data, shape: [B, Hkv, T, D] };
  };
  cache.append(rows(K), rows(V), { counts });
  counts.forEach((c, b) => { taken[b] += c; });
}
console.log('lengths', Array.from(cache.lengths));   // [${s.lengths.join(', ')}]
const { weights } = cache.attend(q, ${opts});   // causal, bottom-right on each sequence's length
const Lk = weights.shape[3];
for (let b = 0; b < B; b++)
  for (let h = 0; h < Hq; h++)
    console.log(\`seq \${b + 1} head \${h + 1}:\`, Array.from(weights.data.subarray((b * Hq + h) * Lk, (b * Hq + h + 1) * Lk), (w) => w.toFixed(4)).join(' '));
cache.dispose();
`;
}

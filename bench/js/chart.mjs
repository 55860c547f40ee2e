// Draws the benchmark chart (hand-written SVG): time per call per case, maskattn beside each peer,
// a native panel (1 and 2 threads) and a WebAssembly panel, log scale.
//   node bench/js/chart.mjs RESULTS.json OUT.svg      (RESULTS = what bench/run.mjs writes)
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const COLORS = {
  maskattn: '#d9480f',
  'maskattn simd128': '#d9480f',
  'maskattn simd128 (ws)': '#f08c00',
  'maskattn scalar': '#e8a598',
  openblas: '#1c7ed6',
  eigen: '#2f9e44',
  onednn: '#7048e8',
  'onnxruntime-node': '#495057',
  'onnxruntime-web': '#495057',
};

// "batched decode 8x32/8x1x4096x128 ragged" -> ["#8 batched decode", "8×32/8×1×4096×128"] (the words
// after the shape only repeat what the first line says, and would not fit).
function caseLabel(id, name) {
  const words = name.split(' ');
  const shapeAt = words.findIndex((w) => /^\d+x/.test(w));
  if (shapeAt < 0) return [`#${id} ${name}`, ''];
  return [`#${id} ${words.slice(0, shapeAt).join(' ')}`, words[shapeAt].replace(/x/g, '×')];
}

// Approximate advance widths (em) of DejaVu Sans: enough to tell whether a label fits.
function textEm(text) {
  let w = 0;
  for (const ch of text) w += /[0-9]/.test(ch) ? 0.636 : ch === '×' ? 0.838 : /[ /|.,:]/.test(ch) ? 0.33 : /[A-Z#]/.test(ch) ? 0.72 : 0.6;
  return w;
}
const sp0Bold = (spans) => spans.some((sp) => sp.color);

function fmtMs(ms) {
  if (ms >= 100) return ms.toFixed(0);
  if (ms >= 10) return ms.toFixed(1);
  if (ms >= 1) return ms.toFixed(2);
  return ms.toPrecision(2);
}

/**
 * One panel. groups: [{ id, lines: [text | [{ text, color }]], bars: [{ impl, threads, ms | null }] }].
 * Bars of one impl sit side by side (1 thread solid, 2 threads light); log y axis.
 */
function panel({ x, y, width, height, title, subtitle, groups, impls, threadsShown }) {
  const out = [];
  const subs = Array.isArray(subtitle) ? subtitle : [subtitle];
  const extra = (subs.length - 1) * 13;
  const values = groups.flatMap((g) => g.bars.map((b) => b.ms)).filter((v) => v > 0);
  const lo = 10 ** Math.floor(Math.log10(Math.min(...values) * 0.8));  // the shortest bar stays visible
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...values)));
  const axisX = x + 52, plotW = width - 52 - 6, plotTop = y + extra + 68, plotH = height - extra - 68 - 62;
  const ypos = (v) => plotTop + plotH - (Math.log10(v / lo) / Math.log10(hi / lo)) * plotH;

  out.push(`<text x="${x}" y="${y + 16}" class="panel">${esc(title)}</text>`);
  subs.forEach((line, i) => out.push(`<text x="${x}" y="${y + 31 + i * 13}" class="sub">${esc(line)}</text>`));
  y += extra;
  // Legend.
  let lx = x;
  const ly = y + 46;
  for (const impl of impls) {
    out.push(`<rect x="${lx}" y="${ly - 9}" width="12" height="11" fill="${COLORS[impl]}"/>`);
    out.push(`<text x="${lx + 16}" y="${ly}" class="legend">${esc(impl)}</text>`);
    lx += 24 + impl.length * 6.6;
  }
  if (threadsShown.length > 1) {
    out.push(`<rect x="${lx + 6}" y="${ly - 9}" width="12" height="11" fill="#868e96"/><rect x="${lx + 19}" y="${ly - 9}" width="12" height="11" fill="#868e96" fill-opacity="0.35" stroke="#868e96"/>`);
    out.push(`<text x="${lx + 36}" y="${ly}" class="legend">1 thread (solid) | 2 threads (light)</text>`);
  }
  // Grid and axis: decades labelled, 2 and 5 light.
  for (let d = lo; d <= hi * 1.0001; d *= 10) {
    for (const m of [1, 2, 5]) {
      const v = d * m;
      if (v > hi * 1.0001) break;
      const yy = ypos(v).toFixed(1);
      out.push(`<line x1="${axisX}" x2="${axisX + plotW}" y1="${yy}" y2="${yy}" class="${m === 1 ? 'grid' : 'grid2'}"/>`);
      if (m === 1 || plotH / Math.log10(hi / lo) > 70)
        out.push(`<text x="${axisX - 6}" y="${(+yy + 4).toFixed(1)}" class="tick" text-anchor="end">${v >= 1 ? v : v.toPrecision(1)}</text>`);
    }
  }
  out.push(`<text transform="translate(${x + 12},${plotTop + plotH / 2}) rotate(-90)" class="axis" text-anchor="middle">ms per call (log scale, lower is better)</text>`);
  out.push(`<line x1="${axisX}" x2="${axisX}" y1="${plotTop}" y2="${plotTop + plotH}" class="axisline"/>`);
  out.push(`<line x1="${axisX}" x2="${axisX + plotW}" y1="${plotTop + plotH}" y2="${plotTop + plotH}" class="axisline"/>`);

  const gw = plotW / groups.length;
  const nb = impls.length * threadsShown.length;
  const bw = Math.min(16, (gw - 14) / nb);
  for (const [gi, g] of groups.entries()) {
    const gx = axisX + gi * gw + (gw - bw * nb - (impls.length - 1) * 2) / 2;
    if (gi > 0) out.push(`<line x1="${(axisX + gi * gw).toFixed(1)}" x2="${(axisX + gi * gw).toFixed(1)}" y1="${plotTop}" y2="${plotTop + plotH + 56}" class="sep"/>`);
    for (const [ii, impl] of impls.entries()) {
      for (const [ti, t] of threadsShown.entries()) {
        const bx = gx + (ii * threadsShown.length + ti) * bw + ii * 2;
        const bar = g.bars.find((b) => b.impl === impl && b.threads === t);
        if (!bar) continue;
        if (!(bar.ms > 0)) {
          out.push(`<text x="${(bx + bw / 2).toFixed(1)}" y="${plotTop + plotH - 4}" class="na" text-anchor="middle">–</text>`);
          continue;
        }
        const top = ypos(bar.ms);
        const light = ti > 0;
        out.push(`<rect x="${bx.toFixed(1)}" y="${top.toFixed(1)}" width="${(bw - 1).toFixed(1)}" height="${(plotTop + plotH - top).toFixed(1)}" fill="${COLORS[impl]}"${light ? ` fill-opacity="0.35" stroke="${COLORS[impl]}" stroke-width="1"` : ''}><title>${esc(`#${g.id} ${impl}, ${t} thread${t > 1 ? 's' : ''}: ${fmtMs(bar.ms)} ms`)}</title></rect>`);
      }
    }
    const cx = axisX + gi * gw + gw / 2;
    for (const [li, line] of g.lines.entries()) {
      const spans = (Array.isArray(line) ? line : [line]).map((sp) => (typeof sp === 'string' ? { text: sp } : sp));
      const body = spans.map((sp) => `<tspan${sp.color ? ` fill="${sp.color}" font-weight="bold"` : ''}>${esc(sp.text)}</tspan>`).join('');
      // Squeeze a line that would spill into the next case (width estimated from DejaVu Sans).
      const em = spans.reduce((n, sp) => n + textEm(sp.text), 0) * (sp0Bold(spans) ? 1.1 : 1);
      const fit = em * 9.6 > gw - 6 ? ` textLength="${(gw - 6).toFixed(1)}" lengthAdjust="spacingAndGlyphs"` : '';
      out.push(`<text x="${cx.toFixed(1)}" y="${plotTop + plotH + 14 + li * 13}" class="case" text-anchor="middle"${fit}>${body}</text>`);
    }
  }
  return out.join('\n');
}

const ratioColor = (r) => (r >= 1.05 ? '#2b8a3e' : r >= 0.95 ? '#495057' : '#c92a2a');
const fmtRatio = (r) => (Number.isFinite(r) ? `${r.toFixed(2)}×` : '–');


export function renderChart(results) {
  const { native, ortNode, wasm } = results;
  const machine = native?.machine ?? wasm?.machine ?? {};
  const W = 1180;
  const parts = [];
  let y = 66;

  if (native) {
    const threads = native.ceilings.map((c) => c.threads);
    const peerNames = [...new Set(native.cases.flatMap((c) => (c.results ?? []).map((r) => r.impl)).filter((n) => n !== 'maskattn'))];
    const impls = ['maskattn', ...peerNames, ...(ortNode ? ['onnxruntime-node'] : [])];
    const groups = native.cases.map((c) => {
      const ortCase = ortNode?.cases.find((o) => o.id === c.id);
      const bars = [];
      for (const impl of impls)
        for (const t of threads) {
          const src = impl === 'onnxruntime-node' ? ortCase?.results ?? [] : c.results ?? [];
          const r = src.find((x) => x.impl === impl && x.threads === t);
          bars.push({ impl, threads: t, ms: r ? r.median_ms : null });
        }
      // Fastest peer (ORT included) over maskattn, per thread count.
      const ratios = threads.map((t) => {
        const ours = bars.find((b) => b.impl === 'maskattn' && b.threads === t)?.ms;
        const peers = bars.filter((b) => b.impl !== 'maskattn' && b.threads === t && b.ms > 0).map((b) => b.ms);
        return ours > 0 && peers.length ? Math.min(...peers) / ours : NaN;
      });
      const ours = threads.map((t) => bars.find((b) => b.impl === 'maskattn' && b.threads === t)?.ms);
      const lines = [...caseLabel(c.id, c.name)];
      if (c.error) lines.push({ text: 'aborted', color: '#c92a2a' });
      else {
        lines.push(`ours ${ours.map((v) => (v > 0 ? fmtMs(v) : '–')).join(' | ')} ms`);
        lines.push(ratios.flatMap((r, i) => [...(i ? [{ text: ' | ' }] : []), { text: fmtRatio(r), color: ratioColor(r) }]));
      }
      return { id: c.id, lines, bars };
    });
    parts.push(panel({
      x: 16, y, width: W - 32, height: 440, groups, impls, threadsShown: threads,
      title: `Native x86-64, fp32 — maskattn (${native.maskattn.target}) vs peers`,
      subtitle: ['OpenBLAS, Eigen, oneDNN: in the same process as maskattn; onnxruntime-node: the ONNX Attention operator, run from Node.',
        'Under each case: maskattn ms at 1 | 2 threads, then fastest peer time / maskattn time at 1 | 2 threads (above 1: maskattn is faster).'],
    }));
    y += 456;
  }
  if (wasm) {
    const impls = ['onnxruntime-web', 'maskattn simd128', 'maskattn simd128 (ws)', 'maskattn scalar'];
    const groups = wasm.cases.map((c) => {
      const bars = impls.map((impl) => {
        const r = (c.results ?? []).find((x) => x.impl === impl);
        return { impl, threads: 1, ms: r?.median_ms ?? null };
      });
      const [ortMs, ours, ws] = bars.map((b) => b.ms);
      const lines = [...caseLabel(c.id, c.name)];
      if (c.error) lines.push({ text: 'aborted', color: '#c92a2a' });
      else {
        lines.push(`ours ${ours > 0 ? fmtMs(ours) : '–'} | ws ${ws > 0 ? fmtMs(ws) : '–'} ms`);
        const r = [ortMs / ours, ortMs / ws];
        lines.push(r.flatMap((x, i) => [...(i ? [{ text: ' | ' }] : []), { text: fmtRatio(x), color: ratioColor(x) }]));
      }
      return { id: c.id, lines, bars };
    });
    parts.push(panel({
      x: 16, y, width: W - 32, height: 350, groups, impls, threadsShown: [1],
      title: `WebAssembly in Node ${wasm.node}, 1 thread — maskattn vs onnxruntime-web ${wasm.ort.version}`,
      subtitle: ['attention(): inputs copied into wasm memory and the output out on every call; (ws): a Workspace, inputs already in wasm memory.',
        'Under each case: maskattn ms (attention() | ws), then onnxruntime-web time / maskattn time (attention() | ws).'],
    }));
    y += 360;
  }
  const H = y + 10;
  const quick = native?.quick || wasm?.quick ? ' (quick run: few repetitions)' : '';
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">
<style>
  .title { font-size: 19px; font-weight: bold; fill: #212529; }
  .subtitle { font-size: 12.5px; fill: #495057; }
  .panel { font-size: 15px; font-weight: bold; fill: #212529; }
  .sub { font-size: 11px; fill: #495057; }
  .legend { font-size: 11.5px; fill: #212529; }
  .tick { font-size: 10.5px; fill: #495057; }
  .axis { font-size: 11px; fill: #495057; }
  .case { font-size: 9.6px; fill: #212529; }
  .note { font-size: 10.5px; font-weight: bold; }
  .val { font-size: 9px; fill: #212529; }
  .na { font-size: 12px; fill: #868e96; }
  .grid { stroke: #ced4da; stroke-width: 1; }
  .grid2 { stroke: #f1f3f5; stroke-width: 1; }
  .sep { stroke: #e9ecef; stroke-width: 1; }
  .axisline { stroke: #495057; stroke-width: 1; }
</style>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="16" y="28" class="title">maskattn benchmark: time per call, median of interleaved runs</text>
<text x="16" y="50" class="subtitle">${esc(`${machine.cpu ?? 'unknown CPU'}, ${machine.cores ?? '?'} cores — ${machine.date ?? ''}${quick}`)}</text>
${parts.join('\n')}
</svg>
`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [input, output] = process.argv.slice(2);
  if (!input || !output) {
    console.error('usage: node bench/js/chart.mjs RESULTS.json OUT.svg');
    process.exit(2);
  }
  writeFileSync(output, renderChart(JSON.parse(readFileSync(input, 'utf8'))));
  console.error(`wrote ${output}`);
}

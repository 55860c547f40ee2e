// Draws docs/cache-chart.svg: ms per decode step for each KV cache dtype, natively (the JSON of
// `maskattn_cache_bench --json`) and in WebAssembly (the JSON of `bench/js/cache-bench.mjs --json`),
// one panel per shape, 1 thread. No dependencies: the SVG is written by hand.
//
//   node bench/js/cache-chart.mjs NATIVE.json WASM.json [docs/cache-chart.svg]
import { readFileSync, writeFileSync } from 'node:fs';

const [nativeFile, wasmFile, out = 'docs/cache-chart.svg'] = process.argv.slice(2);
if (!nativeFile || !wasmFile) throw new Error('usage: node bench/js/cache-chart.mjs NATIVE.json WASM.json [OUT.svg]');
const native = JSON.parse(readFileSync(nativeFile, 'utf8')).results.filter((r) => r.threads === 1);
const wasm = JSON.parse(readFileSync(wasmFile, 'utf8')).results.filter((r) => r.build === 'relaxed');
const DTYPES = ['float32', 'float16', 'q8', 'q4', 'q8/q4'];
const COLORS = { float32: '#8c96a3', float16: '#6a9fd4', q8: '#2f7d4f', q4: '#d08a2e', 'q8/q4': '#9a5bb5' };
const SHAPES = ['MHA', 'GQA'];
const GROUPS = [
  { label: 'native', rows: native, title: (r) => r.build },
  { label: 'wasm (Node, relaxed SIMD)', rows: wasm, title: () => 'wasm' },
];

const W = 760, H = 330, left = 56, top = 48, panelW = (W - left - 20) / SHAPES.length, plotH = 200;
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');
let svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif" font-size="12">\n`;
svg += `<rect width="${W}" height="${H}" fill="#fff"/>\n`;
svg += `<text x="${left}" y="20" font-size="14" font-weight="600">KV cache decode step, 1 thread: ms per step by cache dtype (lower is better)</text>\n`;
svg += `<text x="${left}" y="36" fill="#555">MHA 1×32/32×2048×128, GQA 1×32/8×4096×128; labels: speedup over the same build's float32 cache</text>\n`;
SHAPES.forEach((shape, si) => {
  const x0 = left + si * panelW;
  const cells = GROUPS.map((g) => DTYPES.map((d) => g.rows.find((r) => r.shape === shape && r.dtype === d)?.ms ?? NaN));
  const max = Math.max(...cells.flat().filter(Number.isFinite));
  const groupW = (panelW - 30) / GROUPS.length, barW = (groupW - 16) / DTYPES.length;
  svg += `<text x="${x0 + (panelW - 30) / 2}" y="${top + 8}" text-anchor="middle" font-weight="600">${shape}</text>\n`;
  svg += `<line x1="${x0}" y1="${top + 20 + plotH}" x2="${x0 + panelW - 30}" y2="${top + 20 + plotH}" stroke="#333"/>\n`;
  GROUPS.forEach((g, gi) => {
    const gx = x0 + gi * groupW + 8;
    DTYPES.forEach((d, di) => {
      const ms = cells[gi][di];
      if (!Number.isFinite(ms)) return;
      const h = (ms / max) * plotH, x = gx + di * barW, y = top + 20 + plotH - h;
      svg += `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(barW - 3).toFixed(1)}" height="${h.toFixed(1)}" fill="${COLORS[d]}"><title>${esc(`${g.label} ${d}: ${ms.toFixed(3)} ms`)}</title></rect>\n`;
      const speedup = cells[gi][0] / ms;
      svg += `<text x="${(x + (barW - 3) / 2).toFixed(1)}" y="${(y - 3).toFixed(1)}" text-anchor="middle" font-size="10">${di === 0 ? `${ms.toFixed(1)}ms` : `${speedup.toFixed(1)}x`}</text>\n`;
    });
    const title = g.rows[0] ? g.title(g.rows[0]) : g.label;
    svg += `<text x="${gx + (groupW - 16) / 2}" y="${top + 36 + plotH}" text-anchor="middle">${esc(title)}</text>\n`;
  });
});
DTYPES.forEach((d, i) => {
  const x = left + i * 90, y = H - 16;
  svg += `<rect x="${x}" y="${y - 10}" width="12" height="12" fill="${COLORS[d]}"/><text x="${x + 16}" y="${y}">${d}</text>\n`;
});
svg += '</svg>\n';
writeFileSync(out, svg);
console.log(`wrote ${out}`);

// Canvas heatmaps with row/column labels, a hover tooltip, a keyboard cursor and click-to-activate.
// Everything is drawn on <canvas>; sizes are set through the CSSOM (allowed under a strict CSP).

const FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
const CELL_FONT = '11px ui-monospace, "SF Mono", Menlo, Consolas, monospace';

export const COLORS = {
  masked: '#8d949c',
  maskedLine: '#c9ced3',
  nan: '#c2185b',
  allowed: '#2e8b6f',
  grid: '#ffffff',
  label: '#1f2933',
  muted: '#5f6b76',
  cursor: '#f59e0b',
  highlight: '#d9480f',
};

function mix(a, b, t) {
  return a.map((x, n) => Math.round(x + (b[n] - x) * t));
}
function ramp(stops, t) {
  const x = Math.min(1, Math.max(0, t)) * (stops.length - 1);
  const n = Math.min(stops.length - 2, Math.floor(x));
  return mix(stops[n], stops[n + 1], x - n);
}
const rgb = ([r, g, b]) => `rgb(${r}, ${g}, ${b})`;
const BLUES = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
const NEG = [[5, 48, 97], [67, 147, 195], [209, 229, 240], [247, 247, 247]];
const POS = [[247, 247, 247], [253, 219, 199], [214, 96, 77], [103, 0, 31]];

/** Sequential colour of an attention weight in [0, 1] (square-root scale: small weights stay visible). */
export function weightColor(w) {
  return rgb(ramp(BLUES, Math.sqrt(Math.max(0, w))));
}
/** Diverging colour of x in [-max, max]. */
export function divergingColor(x, max) {
  const t = max > 0 ? Math.max(-1, Math.min(1, x / max)) : 0;
  return t < 0 ? rgb(ramp(NEG, 1 + t)) : rgb(ramp(POS, t));
}
/** Text colour readable on a background given as rgb(...). */
export function inkFor(fill) {
  const m = /rgb\((\d+), (\d+), (\d+)\)/.exec(fill);
  if (!m) return '#ffffff';
  const [r, g, b] = m.slice(1).map(Number);
  return 0.299 * r + 0.587 * g + 0.114 * b > 150 ? '#1f2933' : '#ffffff';
}

/** A number for a cell: '.41', '1.0', '-.3', 'NaN'; one that rounds to zero reads '0', never '-.00'. */
export function short(x, digits = 2) {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return '∞';
  if (x === -Infinity) return '-∞';
  if (Math.abs(x) >= 9.95) return x.toFixed(0);
  const s = x.toFixed(Math.abs(x) >= 0.995 ? 1 : digits);
  if (Number(s) === 0) return '0';
  return s.replace(/^(-?)0\./, '$1.');
}
/** The same number a character narrower where it can be ('-.58' -> '-.6', '-1.2' -> '-1'): for cells too small for short(). */
export function shorter(x) {
  if (!Number.isFinite(x)) return short(x);
  return Math.abs(x) >= 0.95 ? short(Math.round(x)) : short(x, 1);
}
/** A number in full for readouts. */
export function full(x) {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? '+Infinity' : '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const a = Math.abs(x);
  return a < 1e-4 || a >= 1e6 ? x.toExponential(4) : x.toPrecision(6).replace(/(\.\d*?)0+$/, '$1').replace(/\.$/, '');
}

function hatchPattern(ctx) {
  const c = document.createElement('canvas');
  c.width = 8;
  c.height = 8;
  const g = c.getContext('2d');
  g.fillStyle = COLORS.masked;
  g.fillRect(0, 0, 8, 8);
  g.strokeStyle = COLORS.maskedLine;
  g.lineWidth = 1.5;
  g.beginPath();
  g.moveTo(-2, 2); g.lineTo(2, -2);
  g.moveTo(0, 8); g.lineTo(8, 0);
  g.moveTo(6, 10); g.lineTo(10, 6);
  g.stroke();
  return ctx.createPattern(c, 'repeat');
}

function truncate(ctx, text, max) {
  if (ctx.measureText(text).width <= max) return text;
  let t = text;
  while (t.length > 1 && ctx.measureText(`${t}…`).width > max) t = t.slice(0, -1);
  return `${t}…`;
}

export class Heatmap {
  /**
   * canvas: the <canvas>; options: { tooltip (element), readout (element), onActivate(i, j),
   * minCell, maxCell, hint }. The canvas's parent is the scroll container used for sizing.
   */
  constructor(canvas, options = {}) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    this.wrap = canvas.parentElement;
    this.opt = { minCell: 12, maxCell: 44, ...options };
    this.spec = null;
    this.hover = null;
    this.cursor = null;
    this.geom = null;
    this.texts = [];
    this.pattern = hatchPattern(this.ctx);
    canvas.addEventListener('pointermove', (e) => this._pointer(e));
    canvas.addEventListener('pointerleave', () => {
      this.hover = null;
      this._show(this.cursor && document.activeElement === canvas ? this.cursor : null);
      this.draw();
    });
    canvas.addEventListener('click', (e) => {
      const cell = this._cellAt(e);
      if (!cell) return;
      this.cursor = cell;
      this.hover = cell;
      if (this.opt.onActivate) this.opt.onActivate(cell.i, cell.j);
      else this._show(cell);
      this.draw();  // the clicked cell's outline now, not at the next redraw
    });
    canvas.addEventListener('keydown', (e) => this._key(e));
    canvas.addEventListener('focus', () => {
      if (!this.spec) return;
      if (!this.cursor) this.cursor = { i: 0, j: 0 };
      this._clampCursor();
      this._show(this.cursor);
      this.draw();
    });
    canvas.addEventListener('blur', () => {
      this._show(null);
      this.draw();
    });
    if (typeof ResizeObserver !== 'undefined') {
      let pending = false;
      let lastWidth = -1;
      new ResizeObserver(() => {
        const w = this.wrap.clientWidth;
        if (pending || w === lastWidth) return;
        lastWidth = w;
        pending = true;
        requestAnimationFrame(() => {
          pending = false;
          this.draw();
        });
      }).observe(this.wrap);
    }
  }

  /**
   * spec: { rows, cols, rowLabels, colLabels, cell(i, j) -> { fill, hatch, text, fit, ink, mark, flag, outline },
   *         info(i, j) -> string, rowMark(i) -> string|null, highlightRow, gapBeforeCol, label }
   */
  update(spec) {
    this.spec = spec;
    this._clampCursor();
    this.draw();
    const cell = this.hover ?? (document.activeElement === this.canvas ? this.cursor : null);
    this._show(cell);
  }

  _clampCursor() {
    if (!this.spec) return;
    for (const key of ['cursor', 'hover']) {
      const c = this[key];
      if (c && (c.i >= this.spec.rows || c.j >= this.spec.cols)) this[key] = null;
    }
    if (this.spec.rows === 0 || this.spec.cols === 0) this.cursor = null;
  }

  _layout() {
    const s = this.spec;
    const ctx = this.ctx;
    ctx.font = FONT;
    // The box's content width: the canvas must fit inside it, rotated column labels included.
    const cs = getComputedStyle(this.wrap);
    const inner = (this.wrap.clientWidth || 300) - (parseFloat(cs.paddingLeft) || 0) - (parseFloat(cs.paddingRight) || 0);
    const avail = Math.max(120, Math.floor(inner));
    const markW = s.rowMark ? 16 : 0;
    // On a narrow box long row labels give way to the cells (truncated with '…'; the readout names them in full).
    const rowMax = avail < 420 ? 90 : 110;
    const rowText = Math.min(rowMax, Math.max(16, ...s.rowLabels.map((t) => ctx.measureText(t).width)));
    const rowW = rowText + 8 + markW;
    const colW = Math.min(90, Math.max(8, ...s.colLabels.map((t) => ctx.measureText(t).width)));
    const gap = s.gapBeforeCol != null ? 8 : 0;
    const cols = Math.max(1, s.cols);
    const shape = (cell) => {
      const rotate = colW > cell - 4;
      // Labels at 45° sit cell·sin 45° apart: below a line's height they would overlap, so they stand upright.
      const angle = rotate && cell * Math.SQRT1_2 < 13 ? Math.PI / 2 : Math.PI / 4;
      // A label rotated by 45° reaches colW·cos 45° right of its cell's centre.
      const right = rotate ? Math.max(4, colW * Math.cos(angle) - cell / 2 + 8) : 4;
      return { rotate, angle, width: Math.ceil(rowW + gap + cols * cell + right) };
    };
    // The largest cell whose whole map fits the box; below minCell the map scrolls (and says so).
    let cell = Math.max(this.opt.minCell, Math.min(this.opt.maxCell, Math.floor((avail - rowW - gap - 4) / cols)));
    while (cell > this.opt.minCell && shape(cell).width > avail) cell--;
    const { rotate, angle, width } = shape(cell);
    const top = rotate ? Math.ceil(colW * Math.sin(angle) + 14) : 20;
    const height = Math.ceil(top + Math.max(1, s.rows) * cell + 4);
    return { x0: rowW, y0: top, cell, rotate, angle, width, height, markW, gap, colW, rowText, avail };
  }

  _x(j) {
    const g = this.geom;
    return g.x0 + j * g.cell + (this.spec.gapBeforeCol != null && j >= this.spec.gapBeforeCol ? g.gap : 0);
  }

  /** Cell geometry in CSS pixels (tests read it through window.__maskattnDemo.heatmaps). */
  geometry() {
    if (!this.geom) return null;
    const { x0, y0, cell, width, height, avail } = this.geom;
    return { x0, y0, cell, width, height, box: avail, numbering: this.numbering, rows: this.spec.rows, cols: this.spec.cols, gapBeforeCol: this.spec.gapBeforeCol ?? null,
      texts: this.texts.map((t) => ({ ...t })) };
  }

  draw() {
    const s = this.spec;
    if (!s) return;
    const g = (this.geom = this._layout());
    const ctx = this._size(g);
    const outlines = this._drawCells(g);
    this._drawGrid(g);
    // cells outlined on request (e.g. the position written this step), over the grid
    ctx.lineWidth = 2.5;
    for (const [x, y, color] of outlines) {
      ctx.strokeStyle = color;
      ctx.strokeRect(x + 1.25, y + 1.25, g.cell - 2.5, g.cell - 2.5);
    }
    this._drawRowLabels(g);
    this._drawColLabels(g);
    this._drawFocus(g);
  }

  /** Sizes the canvas to the layout g (device pixels, CSS pixels) and clears it; returns its context. */
  _size(g) {
    const s = this.spec;
    const dpr = Math.min(3, window.devicePixelRatio || 1);
    const canvas = this.canvas;
    if (canvas.width !== Math.round(g.width * dpr) || canvas.height !== Math.round(g.height * dpr)) {
      canvas.width = Math.round(g.width * dpr);
      canvas.height = Math.round(g.height * dpr);
    }
    canvas.style.width = `${g.width}px`;
    canvas.style.height = `${g.height}px`;
    // Wider than its box: the box says so (a fade and "scroll →"), as a phone shows no scroll bar.
    this.wrap.classList.toggle('overflows', g.width > g.avail);
    this.wrap.parentElement?.classList.toggle('overflows', g.width > g.avail);
    canvas.dataset.rows = s.rows;
    canvas.dataset.cols = s.cols;
    const ctx = this.ctx;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, g.width, g.height);
    // Every text drawn, with its box in CSS pixels (tests check that none overlaps another or leaves its cell).
    this.texts = [];
    return ctx;
  }

  _record(kind, text, x, y, w, h, cell) {
    this.texts.push({ kind, text, x, y, w, h, ...(cell ? { cell } : {}) });
  }

  /** Fills every cell with its colour, flag, number or mark; returns the outlines to draw over the grid. */
  _drawCells(g) {
    const s = this.spec;
    const ctx = this.ctx;
    ctx.font = CELL_FONT;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    const outlines = [];
    const cells = Array.from({ length: s.rows }, (_, i) => Array.from({ length: s.cols }, (_, j) => s.cell(i, j)));
    // Numbers are all drawn or none: a map that numbers its positive cells and not its negative ones
    // (a wider '-.58') reads as if those were empty. Each number must fit its cell with a margin; if one
    // does not, every cell takes its narrower form ('-.6'); if one still does not, none is numbered
    // (hover or tap shows it in full). Texts that `fit` (cut to the cell with '…') are not numbers.
    const fits = (t) => g.cell >= 18 && ctx.measureText(t).width <= g.cell - 4;
    const numbers = cells.flat().filter((c) => c.text && !c.fit);
    const form = numbers.every((c) => fits(c.text)) ? 'text' : numbers.every((c) => fits(c.narrow ?? c.text)) ? 'narrow' : null;
    this.numbering = numbers.length ? form ?? 'none' : 'none';
    for (let i = 0; i < s.rows; i++) {
      for (let j = 0; j < s.cols; j++) {
        const c = cells[i][j];
        const x = this._x(j);
        const y = g.y0 + i * g.cell;
        if (c.outline) outlines.push([x, y, c.outline]);
        ctx.fillStyle = c.hatch ? this.pattern : c.fill;
        ctx.fillRect(x, y, g.cell, g.cell);
        if (c.flag) this._drawFlag(x, y, g.cell);
        this._drawCellText(g, c, x, y, form);
      }
    }
    return outlines;
  }

  _drawFlag(x, y, cell) {
    const ctx = this.ctx;
    ctx.fillStyle = COLORS.highlight;
    ctx.beginPath();
    ctx.moveTo(x, y);
    ctx.lineTo(x + Math.min(10, cell / 2.5), y);
    ctx.lineTo(x, y + Math.min(10, cell / 2.5));
    ctx.closePath();
    ctx.fill();
  }

  /** A cell's number (in the map's form) or fitted text where it fits with a margin, else its mark. */
  _drawCellText(g, c, x, y, form) {
    const ctx = this.ctx;
    // A number is drawn only where it fits its cell with a margin (hover or tap shows it in full).
    const number = form === 'narrow' ? c.narrow ?? c.text : form === 'text' ? c.text : null;
    const text = c.text && g.cell >= 18 ? (c.fit ? truncate(ctx, c.text, g.cell - 4) : number) : null;
    const textW = text ? ctx.measureText(text).width : 0;
    if (text && textW <= g.cell - 4) {
      ctx.fillStyle = c.ink ?? inkFor(c.fill);
      ctx.fillText(text, x + g.cell / 2, y + g.cell / 2 + 0.5);
      this._record('cell', text, x + (g.cell - textW) / 2, y + g.cell / 2 - 6, textW, 12, [x, y, g.cell]);
    } else if (c.mark && g.cell >= 12) {
      ctx.fillStyle = c.ink ?? '#ffffff';
      ctx.fillText(c.mark, x + g.cell / 2, y + g.cell / 2 + 0.5);
    }
  }

  _drawGrid(g) {
    const s = this.spec;
    const ctx = this.ctx;
    ctx.strokeStyle = COLORS.grid;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let i = 1; i < s.rows; i++) {
      const y = g.y0 + i * g.cell;
      ctx.moveTo(g.x0, y);
      ctx.lineTo(this._x(s.cols - 1) + g.cell, y);
    }
    for (let j = 1; j < s.cols; j++) {
      if (s.gapBeforeCol === j) continue;
      const x = this._x(j);
      ctx.moveTo(x, g.y0);
      ctx.lineTo(x, g.y0 + s.rows * g.cell);
    }
    ctx.stroke();
  }

  _drawRowLabels(g) {
    const s = this.spec;
    const ctx = this.ctx;
    ctx.font = FONT;
    ctx.fillStyle = COLORS.label;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let i = 0; i < s.rows; i++) {
      const y = g.y0 + i * g.cell + g.cell / 2;
      ctx.fillStyle = s.rowLabelMuted?.(i) ? COLORS.muted : COLORS.label;
      const rowLabel = truncate(ctx, s.rowLabels[i] ?? '', g.rowText);
      ctx.fillText(rowLabel, g.x0 - 6 - g.markW, y);
      const rw = ctx.measureText(rowLabel).width;
      this._record('row', rowLabel, g.x0 - 6 - g.markW - rw, y - 6, rw, 12);
      const mark = s.rowMark?.(i);
      if (mark) {
        ctx.fillStyle = COLORS.highlight;
        ctx.textAlign = 'center';
        ctx.fillText(mark, g.x0 - 4 - g.markW / 2, y);
        ctx.textAlign = 'right';
      }
    }
  }

  _drawColLabels(g) {
    const s = this.spec;
    const ctx = this.ctx;
    for (let j = 0; j < s.cols; j++) {
      const label = truncate(ctx, s.colLabels[j] ?? '', 88);
      ctx.fillStyle = s.colLabelMuted?.(j) ? COLORS.muted : COLORS.label;
      const cx = this._x(j) + g.cell / 2;
      const lw = ctx.measureText(label).width;
      if (g.rotate) {
        ctx.save();
        ctx.translate(cx, g.y0 - 5);
        ctx.rotate(-g.angle);
        ctx.textAlign = 'left';
        ctx.fillText(label, 0, 0);
        ctx.restore();
        // A rotated label's box (tests check it stays on the canvas, and that neighbours are a line apart:
        // spacing = cell · sin(angle)).
        this._record('col-rotated', label, cx, g.y0 - 5 - lw * Math.sin(g.angle), lw * Math.cos(g.angle), lw * Math.sin(g.angle));
        this.texts.at(-1).spacing = g.cell * Math.sin(g.angle);
      } else {
        ctx.textAlign = 'center';
        ctx.fillText(label, cx, g.y0 - 9);
        this._record('col', label, cx - lw / 2, g.y0 - 15, lw, 12);
      }
    }
  }

  /** The highlighted row, then the hovered cell and the keyboard cursor (while focused). */
  _drawFocus(g) {
    const s = this.spec;
    const ctx = this.ctx;
    if (s.highlightRow != null && s.highlightRow < s.rows) {
      ctx.strokeStyle = COLORS.highlight;
      ctx.lineWidth = 2;
      ctx.strokeRect(g.x0 - 1, g.y0 + s.highlightRow * g.cell - 1, this._x(s.cols - 1) + g.cell - g.x0 + 2, g.cell + 2);
    }
    const focused = document.activeElement === this.canvas;
    for (const [c, color, w] of [[this.hover, '#111827', 1.5], [focused ? this.cursor : null, COLORS.cursor, 3]]) {
      if (!c) continue;
      ctx.strokeStyle = color;
      ctx.lineWidth = w;
      ctx.strokeRect(this._x(c.j) + w / 2, g.y0 + c.i * g.cell + w / 2, g.cell - w, g.cell - w);
    }
  }

  _cellAt(e) {
    if (!this.geom || !this.spec) return null;
    const r = this.canvas.getBoundingClientRect();
    const scale = r.width > 0 ? this.geom.width / r.width : 1;
    const x = (e.clientX - r.left) * scale;
    const y = (e.clientY - r.top) * scale;
    const i = Math.floor((y - this.geom.y0) / this.geom.cell);
    let j = -1;
    for (let c = 0; c < this.spec.cols; c++) if (x >= this._x(c) && x < this._x(c) + this.geom.cell) j = c;
    if (i < 0 || i >= this.spec.rows || j < 0) return null;
    return { i, j };
  }

  _pointer(e) {
    const cell = this._cellAt(e);
    const same = cell && this.hover && cell.i === this.hover.i && cell.j === this.hover.j;
    if (same || (!cell && !this.hover)) return;
    this.hover = cell;
    this.canvas.style.cursor = cell && this.opt.onActivate ? 'pointer' : 'default';
    this._show(cell);
    this.draw();
  }

  _key(e) {
    if (!this.spec || this.spec.rows === 0) return;
    const c = this.cursor ?? { i: 0, j: 0 };
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (moves[e.key]) {
      const [di, dj] = moves[e.key];
      this.cursor = {
        i: Math.max(0, Math.min(this.spec.rows - 1, c.i + di)),
        j: Math.max(0, Math.min(this.spec.cols - 1, c.j + dj)),
      };
    } else if (e.key === 'Home') this.cursor = { i: c.i, j: 0 };
    else if (e.key === 'End') this.cursor = { i: c.i, j: this.spec.cols - 1 };
    else if ((e.key === ' ' || e.key === 'Enter') && this.opt.onActivate) {
      e.preventDefault();
      this.opt.onActivate(c.i, c.j);
      return;
    } else return;
    e.preventDefault();
    this._show(this.cursor);
    this.draw();
  }

  _show(cell) {
    const { tooltip, readout, hint } = this.opt;
    const text = cell && this.spec ? this.spec.info(cell.i, cell.j) : null;
    if (readout) readout.textContent = text ? text.replace(/\n/g, ' · ') : hint ?? '';
    if (!tooltip) return;
    if (!text) {
      tooltip.hidden = true;
      return;
    }
    // On a narrow screen a tooltip under the cell covers the rows below it (two of them on a phone):
    // there the readout under the map, which says the same, is all that shows.
    const boxW = this.wrap.parentElement?.clientWidth ?? 400;
    if (document.documentElement.clientWidth < 600) {
      tooltip.hidden = true;
      return;
    }
    tooltip.textContent = text;
    tooltip.hidden = false;
    // Place just below the cell (never over it), inside the box, clamped to its width.
    const g = this.geom;
    const scale = this.canvas.getBoundingClientRect().width / g.width || 1;
    const originX = this.canvas.offsetLeft - this.wrap.scrollLeft;
    const tipW = tooltip.offsetWidth;
    const x = originX + (this._x(cell.j) + g.cell * 0.25) * scale;
    const top = this.canvas.offsetTop + (g.y0 + (cell.i + 1) * g.cell + 4) * scale;
    tooltip.style.left = `${Math.max(0, Math.min(x, boxW - tipW))}px`;
    tooltip.style.top = `${top}px`;
  }
}

// Renders the text-line images of tests/ocr/ (and their list, tests/ocr/lines.json) with headless
// Chromium and the system fonts, so the real-model test reads lines the project made itself. The
// Chinese line needs a CJK font (Debian's fonts-wqy-zenhei, installed by scripts/setup.sh).
// Images are stored as 8-bit grayscale PNG to stay small. Run: node scripts/render-ocr-lines.mjs
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pngjs from 'pngjs';

import { launchChromium } from '../tests/browser/chromium.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const outDir = join(root, 'tests/ocr');

// px: the line's height in the image (48 is the model's; others go through the resize).
export const LINES = [
  { file: 'no17.png', text: 'No. 17', font: 'DejaVu Sans', px: 48 },
  { file: 'total.png', text: 'Total: $42.50', font: 'DejaVu Sans', px: 48 },
  { file: 'hello.png', text: 'Hello, World!', font: 'DejaVu Serif', px: 48 },
  { file: 'version.png', text: 'Version 1.4.2 (beta)', font: 'DejaVu Sans', px: 40 },
  { file: 'price.png', text: 'Price 3.14 x 2 = 6.28', font: 'DejaVu Sans Mono', px: 48 },
  { file: 'email.png', text: 'e-mail: info@example.org', font: 'DejaVu Sans', px: 64 },
  { file: 'chinese.png', text: '数据加载完成，请稍候再试。', font: 'WenQuanYi Zen Hei', px: 48 },
  { file: 'digits.png', text: 'UPPER lower MiXeD 0123456789', font: 'DejaVu Sans', px: 48 },
  { file: 'order.png', text: 'ORDER #A-7731 / 2026-11-28 14:05', font: 'DejaVu Sans Mono', px: 48 },
  { file: 'call.png', text: 'Call +1 (555) 010-9876 before 5 p.m.', font: 'DejaVu Serif', px: 56 },
  { file: 'fox.png', text: 'The quick brown fox jumps over the lazy dog.', font: 'DejaVu Sans', px: 48 },
  { file: 'masks.png', text: 'Masks done right: padding, windows, caches; no NaN, ever (v0.1)!', font: 'DejaVu Serif', px: 48 },
];

function page(line) {
  const size = Math.round(line.px * 0.6);
  const pad = Math.round(line.px * 0.2);
  return `<!doctype html><meta charset="utf-8"><body style="margin:0;background:#fff">
<div id="line" style="display:inline-block;height:${line.px}px;line-height:${line.px}px;padding:0 ${pad}px;
font:${size}px '${line.font}';color:#111;white-space:nowrap">${line.text.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</div>`;
}

async function main() {
  mkdirSync(outDir, { recursive: true });
  const browser = await launchChromium();
  try {
    const tab = await browser.newPage({ deviceScaleFactor: 1 });
    for (const line of LINES) {
      await tab.setContent(page(line));
      // Chromium would draw a missing font's text in a fallback font without a word.
      if (!execFileSync('fc-list', [`:family=${line.font}`], { encoding: 'utf8' }).trim()) {
        throw new Error(`font '${line.font}' is not installed (scripts/setup.sh installs it)`);
      }
      const shot = await tab.locator('#line').screenshot({ type: 'png' });
      const rgba = pngjs.PNG.sync.read(shot);
      const gray = pngjs.PNG.sync.write(rgba, { colorType: 0, inputColorType: 6, inputHasAlpha: true });
      writeFileSync(join(outDir, line.file), gray);
      console.log(`${line.file}: ${rgba.width}x${rgba.height}, ${gray.length} bytes`);
    }
  } finally {
    await browser.close();
  }
  writeFileSync(join(outDir, 'lines.json'), `${JSON.stringify(LINES, null, 2)}\n`);
}

await main();

// Text-line images ({ width, height, rgba }: a decoded PNG, or a canvas's pixels) as the
// recognizer takes them: composited over white,
// resized to height 48 (bilinear, pixel centres as OpenCV's INTER_LINEAR, which PaddleOCR uses),
// channels in OpenCV's B, G, R order, scaled to [-1, 1]; a batch is padded on the right with 0,
// mid-gray, as PaddleOCR pads.
import { HEIGHT } from './model.mjs';

/** The width the line gets at height 48 (its aspect ratio kept), at least 8 (one token). */
export function scaledWidth(image) {
  return Math.max(8, Math.round((image.width * HEIGHT) / image.height));
}

export const PAD_VALUES = Object.freeze({ gray: 0, white: 1, black: -1 });

/** The planes [3, 48, padTo] of one line, resized; columns from its width up to `padTo` get `pad`. */
export function linePlanes(image, padTo = scaledWidth(image), pad = PAD_VALUES.gray) {
  const W = scaledWidth(image);
  const { width: sw, height: sh, rgba } = image;
  const out = new Float32Array(3 * HEIGHT * padTo).fill(pad);
  const gray = new Float32Array(4 * sw * sh);
  for (let i = 0; i < sw * sh; ++i) {
    const a = rgba[4 * i + 3] / 255;  // over white
    for (let c = 0; c < 3; ++c) gray[4 * i + c] = rgba[4 * i + c] * a + 255 * (1 - a);
  }
  const fx = sw / W;
  const fy = sh / HEIGHT;
  for (let y = 0; y < HEIGHT; ++y) {
    const sy = Math.min(Math.max((y + 0.5) * fy - 0.5, 0), sh - 1);
    const y0 = Math.floor(sy);
    const y1 = Math.min(y0 + 1, sh - 1);
    const wy = sy - y0;
    for (let x = 0; x < W; ++x) {
      const sx = Math.min(Math.max((x + 0.5) * fx - 0.5, 0), sw - 1);
      const x0 = Math.floor(sx);
      const x1 = Math.min(x0 + 1, sw - 1);
      const wx = sx - x0;
      for (let c = 0; c < 3; ++c) {
        const p = (yy, xx) => gray[4 * (yy * sw + xx) + c];
        const top = p(y0, x0) * (1 - wx) + p(y0, x1) * wx;
        const bottom = p(y1, x0) * (1 - wx) + p(y1, x1) * wx;
        const value = top * (1 - wy) + bottom * wy;
        // Plane 0 is blue: OpenCV reads images as B, G, R.
        out[((2 - c) * HEIGHT + y) * padTo + x] = value / 127.5 - 1;
      }
    }
  }
  return out;
}

/**
 * A batch [B, 3, 48, Wmax] of lines padded to the widest (gray unless `pad`), and each line's width.
 */
export function batchInput(images, pad = PAD_VALUES.gray) {
  const widths = images.map(scaledWidth);
  const padTo = Math.max(...widths);
  const data = new Float32Array(images.length * 3 * HEIGHT * padTo);
  images.forEach((image, b) => data.set(linePlanes(image, padTo, pad), b * 3 * HEIGHT * padTo));
  return { data, dims: [images.length, 3, HEIGHT, padTo], widths, tokens: widths.map(tokensOf) };
}

/**
 * The model's token count for a line `width` columns wide: one per 8 columns, as its CNN's strides
 * and padding round (measured for every width from 96 to 128).
 */
export function tokensOf(width) {
  return Math.floor((width + 3) / 8);
}

// The recognizer's files and the test lines in Node: the model package found through Node's module
// resolution and checked by sha256, PNG images decoded by pngjs.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pngjs from 'pngjs';

import { FILES, INSTALL, MODEL_PACKAGE, MODEL_VERSION, checkDigest, parseAlphabet } from './model.mjs';

function packageDir() {
  let url;
  try {
    url = import.meta.resolve(`${MODEL_PACKAGE}/node`);
  } catch {
    throw new Error(`the recognizer's model is missing: ${MODEL_PACKAGE} is not installed (run: ${INSTALL})`);
  }
  return dirname(fileURLToPath(url));
}

function readChecked(dir, file) {
  let bytes;
  try {
    bytes = readFileSync(join(dir, FILES[file].path));
  } catch {
    throw new Error(`${MODEL_PACKAGE}: ${FILES[file].path} is missing; expected version ${MODEL_VERSION} (run: ${INSTALL})`);
  }
  checkDigest(file, createHash('sha256').update(bytes).digest('hex'));
  return bytes;
}

/** The model's bytes and its CTC alphabet, checked. */
export function loadModelFiles() {
  const dir = packageDir();
  const bytes = readChecked(dir, 'model');
  return { bytes, alphabet: parseAlphabet(readChecked(dir, 'keys').toString('utf8')) };
}

/** { width, height, rgba } of a PNG file. */
export function readPng(path) {
  let png;
  try {
    png = pngjs.PNG.sync.read(readFileSync(path));
  } catch (e) {
    throw new Error(`${path}: not a readable PNG image (${e.message})`);
  }
  return { width: png.width, height: png.height, rgba: png.data };
}

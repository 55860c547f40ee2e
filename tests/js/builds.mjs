// The WebAssembly builds the JS suites run, and how to load each. Importing this module turns on
// relaxed SIMD in Node 20's V8 (--experimental-wasm-relaxed-simd is not allowed in NODE_OPTIONS;
// setting the flag before any module is compiled works), so the relaxed builds run here exactly as
// in Chromium, where they need no flag. Test files import it before they call init().
import v8 from 'node:v8';
import { BUILDS as TABLE } from '../../js/builds.js';

v8.setFlagsFromString('--experimental-wasm-relaxed-simd');

// Every build of the table (js/builds.js), with init() options that pin it (threads: 2 even on a
// 1-core machine: the pool still runs). name: for test titles.
export const BUILDS = TABLE.map((b) => ({
  name: [b.simd ? 'SIMD128' : 'scalar', b.relaxed && 'relaxed', b.threads && 'threads'].filter(Boolean).join(' '),
  build: b.name,
  options: b.simd ? { simd: true, relaxed: b.relaxed, threads: b.threads ? 2 : 1 } : { simd: false },
}));

/**
 * The backend fields a build reports in Node 20. quantDot: the relaxed builds' probe finds
 * i32x4.relaxed_dot_i8x16_i7x16_add_s wrong here (twice the sum) and the i16x8 form exact.
 */
export function expectedBackend({ build, options }, version) {
  const row = TABLE.find((b) => b.name === build);
  const quantDot = !row.simd ? 'scalar' : row.relaxed ? 'relaxed-i8-i16x8' : 'i16';
  return {
    simd: row.simd, relaxed: row.relaxed, arch: row.simd ? 'simd128' : 'scalar', lanes: row.simd ? 4 : 1, quantDot,
    threads: row.threads ? options.threads : 1, build, version,
  };
}

// The WebAssembly builds the JS suites run, and how to load each. Importing this module turns on
// relaxed SIMD in Node 20's V8 (--experimental-wasm-relaxed-simd is not allowed in NODE_OPTIONS;
// setting the flag before any module is compiled works), so the relaxed builds run here exactly as
// in Chromium, where they need no flag. Test files import it before they call init().
import v8 from 'node:v8';

v8.setFlagsFromString('--experimental-wasm-relaxed-simd');

// init() options that pin each build (threads: 2 even on a 1-core machine: the pool still runs).
export const BUILDS = [
  { name: 'SIMD128', build: 'maskattn-simd', options: { simd: true, relaxed: false, threads: 1 } },
  { name: 'scalar', build: 'maskattn-scalar', options: { simd: false } },
  { name: 'SIMD128 relaxed', build: 'maskattn-simd-relaxed', options: { simd: true, relaxed: true, threads: 1 } },
  { name: 'SIMD128 threads', build: 'maskattn-simd-threads', options: { simd: true, relaxed: false, threads: 2 } },
  { name: 'SIMD128 relaxed threads', build: 'maskattn-simd-relaxed-threads', options: { simd: true, relaxed: true, threads: 2 } },
];

/**
 * The backend fields a build reports in Node 20. quantDot: the relaxed builds' probe finds
 * i32x4.relaxed_dot_i8x16_i7x16_add_s wrong here (twice the sum) and the i16x8 form exact.
 */
export function expectedBackend({ build, options }, version) {
  const simd = options.simd !== false;
  const quantDot = !simd ? 'scalar' : build.includes('relaxed') ? 'relaxed-i8-i16x8' : 'i16';
  return {
    simd, relaxed: build.includes('relaxed'), arch: simd ? 'simd128' : 'scalar', lanes: simd ? 4 : 1, quantDot,
    threads: build.endsWith('threads') ? options.threads : 1, build, version,
  };
}

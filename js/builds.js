// The WebAssembly builds the package ships: one row per build. Everything that names the builds
// reads this table: js/load.js (which build init() loads, and its URLs), scripts/build-wasm.sh and
// scripts/test.sh (through scripts/builds.mjs: what to configure and build, which files go to
// dist/), the package's tests (tests/js/builds.mjs, pack.test.mjs, the bundler test) and
// bench/run.mjs. Adding a build is adding a row (and its name to BuildName in index.d.ts, which
// tests/js/builds.test.mjs checks against this table).
//
// Row fields:
//   name             the build; its files are dist/<name>.* (buildFiles below)
//   simd, relaxed, threads
//                    what it needs of the engine, and what init() selects it by (js/load.js):
//                    SIMD128, relaxed SIMD, shared memory + workers
//   cmake            the configure flags (cmake/maskattnWasmBuild.cmake names the build after them)
//   ctest            scripts/test.sh runs the C++ suites on this build under Node ('bench': the
//                    micro-kernel check too; 'threaded': only the test files that run threads,
//                    the rest being the same code as another build's); false: covered by the JS
//                    suites only
//   urls()           its files as `new URL('literal', import.meta.url)`: bundlers (Vite, webpack)
//                    find and emit only URLs written out like this, so the literals stay here.
//                    Threaded builds add the browser worker script (?no-inline: Vite would
//                    otherwise inline a file this small as a data: URL; see workerScript in load.js).
export const BUILDS = Object.freeze([
  {
    name: 'maskattn-scalar', simd: false, relaxed: false, threads: false,
    // Its C++ suites are the SIMD128 build's: every object but the simd128 kernel is compiled with
    // the same flags there, and that build's suites run its scalar kernel too.
    cmake: ['-DMASKATTN_WASM_SIMD=OFF', '-DMASKATTN_WASM_RELAXED=OFF', '-DMASKATTN_WASM_THREADS=OFF'], ctest: false,
    urls: () => ({ glue: new URL('../dist/maskattn-scalar.mjs', import.meta.url), wasm: new URL('../dist/maskattn-scalar.wasm', import.meta.url) }),
  },
  {
    name: 'maskattn-simd', simd: true, relaxed: false, threads: false,
    cmake: ['-DMASKATTN_WASM_SIMD=ON', '-DMASKATTN_WASM_RELAXED=OFF', '-DMASKATTN_WASM_THREADS=OFF'], ctest: 'bench',
    urls: () => ({ glue: new URL('../dist/maskattn-simd.mjs', import.meta.url), wasm: new URL('../dist/maskattn-simd.wasm', import.meta.url) }),
  },
  {
    name: 'maskattn-simd-relaxed', simd: true, relaxed: true, threads: false,
    cmake: ['-DMASKATTN_WASM_SIMD=ON', '-DMASKATTN_WASM_RELAXED=ON', '-DMASKATTN_WASM_THREADS=OFF'], ctest: 'bench',
    urls: () => ({ glue: new URL('../dist/maskattn-simd-relaxed.mjs', import.meta.url), wasm: new URL('../dist/maskattn-simd-relaxed.wasm', import.meta.url) }),
  },
  {
    name: 'maskattn-simd-threads', simd: true, relaxed: false, threads: true,
    // What it changes is threads: the kernels and everything else compile as in the SIMD128 build
    // (plus atomics), whose suites run them.
    cmake: ['-DMASKATTN_WASM_SIMD=ON', '-DMASKATTN_WASM_RELAXED=OFF', '-DMASKATTN_WASM_THREADS=ON'], ctest: 'threaded',
    urls: () => ({
      glue: new URL('../dist/maskattn-simd-threads.mjs', import.meta.url), wasm: new URL('../dist/maskattn-simd-threads.wasm', import.meta.url),
      worker: new URL('../dist/maskattn-simd-threads.worker.js?no-inline', import.meta.url),
    }),
  },
  {
    // The C++ suites of both of its features already run (simd-relaxed, simd-threads).
    name: 'maskattn-simd-relaxed-threads', simd: true, relaxed: true, threads: true,
    cmake: ['-DMASKATTN_WASM_SIMD=ON', '-DMASKATTN_WASM_RELAXED=ON', '-DMASKATTN_WASM_THREADS=ON'], ctest: false,
    urls: () => ({
      glue: new URL('../dist/maskattn-simd-relaxed-threads.mjs', import.meta.url), wasm: new URL('../dist/maskattn-simd-relaxed-threads.wasm', import.meta.url),
      worker: new URL('../dist/maskattn-simd-relaxed-threads.worker.js?no-inline', import.meta.url),
    }),
  },
].map((row) => Object.freeze(row)));

/**
 * The files a build puts in dist/: the ES-module glue (browsers, workers, single-threaded Node) and
 * the .wasm; a threaded build adds its browser worker script and a CommonJS glue and worker script
 * for Node (.cjs: the package is "type": "module"), which load the same .wasm.
 */
export function buildFiles({ name, threads }) {
  const files = [`${name}.mjs`, `${name}.wasm`];
  if (threads) files.push(`${name}.worker.js`, `${name}.node.cjs`, `${name}.node.worker.cjs`);
  return files;
}

/** The row with exactly these features, or undefined. */
export function findBuild({ simd, relaxed, threads }) {
  return BUILDS.find((b) => b.simd === simd && b.relaxed === relaxed && b.threads === threads);
}

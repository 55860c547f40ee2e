// Fused vs separate multiply-add in WebAssembly SIMD128 on this machine (see bench/wasm/madd_micro.c):
// why the relaxed-SIMD build gains little in the kernel's accumulations on some CPUs and more in
// its exponential. Compiles the C file with Debian's clang-19 and wasm-ld-19 into build/bench-wasm/.
//   node bench/js/madd-micro.mjs [--rounds N]
import v8 from 'node:v8';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

v8.setFlagsFromString('--experimental-wasm-relaxed-simd');  // Node 20; Node 22+ and Chromium need none
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const out = path.join(root, 'build/bench-wasm');
mkdirSync(out, { recursive: true });
const src = path.join(root, 'bench/wasm/madd_micro.c');
execFileSync('clang-19', ['--target=wasm32', '-O2', '-msimd128', '-mrelaxed-simd', '-c', src, '-o', path.join(out, 'madd_micro.o')]);
execFileSync('wasm-ld-19', ['--no-entry', '--export-all', path.join(out, 'madd_micro.o'), '-o', path.join(out, 'madd_micro.wasm')]);
const { instance } = await WebAssembly.instantiate(readFileSync(path.join(out, 'madd_micro.wasm')));
const e = instance.exports;
const k = e.kptr();
const rounds = process.argv.includes('--rounds') ? Number(process.argv[process.argv.indexOf('--rounds') + 1]) : 5;
const iters = 20_000_000;
const gflops = (f, arg) => {
  const t0 = performance.now();
  f(iters, arg);
  return (iters * 8 * 4 * 2) / (performance.now() - t0) / 1e6;  // 8 accumulators x 4 lanes x 2 flops
};
console.log('GFLOP/s, one thread; ratio = fused / separate (first round is warm-up)');
for (let r = 0; r < rounds; ++r) {
  const cf = gflops(e.chain_fused, 0.5), cs = gflops(e.chain_separate, 0.5);
  const af = gflops(e.accumulate_fused, k), as = gflops(e.accumulate_separate, k);
  console.log(`acc = acc*b + a (multiply on the chain): fused ${cf.toFixed(1)}, separate ${cs.toFixed(1)}, ${(cf / cs).toFixed(2)}x | ` +
    `acc += q*k (products off the chain): fused ${af.toFixed(1)}, separate ${as.toFixed(1)}, ${(af / as).toFixed(2)}x`);
}

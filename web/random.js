// Seeded random numbers, the one copy the demo, examples/generate.mjs and the JavaScript tests all
// import: the same seed gives the same numbers on every engine, so the demo's pictures, the example's
// tokens and a failing test's inputs can be replayed. It lives in web/ because the demo's server
// serves only web/, js/ and dist/ (and js/ is the npm package's API), while Node reaches it from the
// checkout by a relative path.

/** mulberry32: a small, good-enough seeded generator of floats in [0, 1). */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normal samples (Box-Muller, both of each pair) from a uniform generator such as rng(seed). */
export function normal(next) {
  let spare = null;
  return () => {
    if (spare !== null) {
      const s = spare;
      spare = null;
      return s;
    }
    const u = Math.max(next(), 1e-12);  // log(0) would give an infinite sample
    const v = next();
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
}

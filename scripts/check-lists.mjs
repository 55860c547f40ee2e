// Lists live only in their tables: the cache dtypes in src/include/maskattn/kv_types.inc, the
// kernel targets in src/include/maskattn/targets.inc, the WebAssembly builds in js/builds.js.
// Code elsewhere that spells out three or more names of one table (on one line, or within one
// bracketed list that spans lines) restates the table, and goes stale when a row is added: it
// must read the table instead (kKVTypes, kKernelTargets, BUILDS, the module's kvDtypes, the
// tests' kv_types()). Comments and docs may name rows; a name of one or two rows in code is a
// choice, not a list. Prints each offending line and exits 1 if there is one.
//
//   node scripts/check-lists.mjs            check the repository
//   node scripts/check-lists.mjs FILE...    check those files only (the exemptions still apply)
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const read = (path) => readFileSync(join(root, path), 'utf8');

// The tables' names, read from the tables themselves.
const rows = (text, macro) => [...text.matchAll(new RegExp(`^${macro}\\(\\s*(\\w+)`, 'gm'))].map((m) => m[1]);
const kvTypes = read('src/include/maskattn/kv_types.inc');
const builds = [...read('js/builds.js').matchAll(/name: '([\w-]+)'/g)].map((m) => m[1]);
const TABLES = {
  'cache dtypes (src/include/maskattn/kv_types.inc)': [...rows(kvTypes, 'MASKATTN_KV_TYPE'), ...rows(kvTypes, 'MASKATTN_KV_TYPE_ALIAS')],
  'kernel targets (src/include/maskattn/targets.inc)': rows(read('src/include/maskattn/targets.inc'), 'MASKATTN_TARGET'),
  // A build by its name or by scripts/builds.mjs's short one (MASKATTN_WASM_BUILDS="simd scalar").
  'WebAssembly builds (js/builds.js)': [...builds, ...builds.map((b) => b.replace(/^maskattn-/, ''))],
};
// Names that are also plain words of the code ("a scalar loop", "simd: true") count only as a
// string or a qualified name ('scalar', Target::scalar).
const WORDS = new Set(['scalar', 'simd']);
const escape = (s) => s.replace(/[-]/g, '\\-');
const matcher = (name) =>
  WORDS.has(name) ? new RegExp(`(['"\`]${escape(name)}['"\`]|::${escape(name)}\\b)`) : new RegExp(`(?<![\\w-])${escape(name)}(?![\\w-])`);
const MATCHERS = Object.entries(TABLES).map(([table, names]) => ({ table, names: names.map((n) => [n, matcher(n)]) }));

// The tables themselves, and files that may list rows for a reason given here.
const EXEMPT = new Map([
  ['src/include/maskattn/kv_types.inc', 'the table'],
  ['src/include/maskattn/targets.inc', 'the table'],
  ['js/builds.js', 'the table'],
  ['scripts/check-lists.mjs', 'this check'],
  // TypeScript types cannot be computed from a run-time table: KVDtype and KVRawBitsDtype are
  // checked against the module's table by tests/js/cache-table.test.mjs, BuildName against
  // js/builds.js by tests/js/builds.test.mjs.
  ['js/index.d.ts', 'types, checked against the tables by tests'],
  ['tests/js/types/consumer.ts', 'a TypeScript consumer of those types'],
  // A choice, not a copy of the table: the speed panel times float32 against the two quantized
  // caches (a phone's tab has seconds, not minutes), and first-contact pins that choice.
  ['web/perf-core.js', 'the speed panel\'s chosen dtypes'],
  ['tests/browser/first-contact.mjs', 'pins the speed panel\'s choice'],
]);

const SOURCES = /\.(c|cc|cpp|h|hpp|inc|in|js|mjs|cjs|ts|sh|cmake|html)$|(^|\/)CMakeLists\.txt$/;
// The code of a file with comments blanked (line numbers kept). Strings stay: a list of names is
// usually a list of strings. Rough on purpose: a comment marker inside a string blanks the rest of
// that line, which can only hide a list, never invent one.
function code(path, text) {
  if (/\.(sh)$|CMakeLists\.txt$|\.cmake$/.test(path)) return text.replace(/(^|\s)#.*$/gm, '$1');
  if (path.endsWith('.html')) text = text.replace(/<!--[\s\S]*?-->/g, (c) => c.replace(/[^\n]/g, ' '));
  return text
    .replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ' '))
    .replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

// What is checked: in the library and what ships or runs it (src/, bindings/, js/, web/, scripts/,
// CMake), every line and every bracketed list; in tests, benches and examples, a bracketed list of
// bare names (['float32', 'float16', 'q8'], {KVType::f32, KVType::f16, KVType::q8}): there a case
// table that pairs a few dtypes with other values ({f16, q8, automatic, "f16/q8"}) is a choice of
// cases, with expectations taken from the docs, not a restatement of the table.
const LOOSE = /^(tests|bench|examples)\//;
// A list's content with its names, qualifiers, quotes and separators taken away: empty when bare.
const BARE = /(\w+::)|['"`,\s]/g;
function spans(lines, strict) {
  const out = strict ? lines.map((line, i) => ({ from: i, to: i, text: line, bare: false })) : [];
  const stack = [];
  lines.forEach((line, i) => {
    [...line].forEach((ch, col) => {
      if ('[{('.includes(ch)) stack.push([i, col]);
      else if (']})'.includes(ch) && stack.length) {
        const [from, c0] = stack.pop();
        if (i - from > 12) return;
        const text = from === i ? line.slice(c0 + 1, col) : [lines[from].slice(c0 + 1), ...lines.slice(from + 1, i), line.slice(0, col)].join('\n');
        if (strict && from < i) out.push({ from, to: i, text, bare: false });
        if (!strict) out.push({ from, to: i, text, bare: true });
      }
    });
  });
  return out;
}

const tracked = () => execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter((f) => SOURCES.test(f) && existsSync(join(root, f)));
const files = process.argv.length > 2 ? process.argv.slice(2).map((f) => relative(root, join(process.cwd(), f))) : tracked();
let bad = 0, checked = 0;
for (const path of files) {
  if (EXEMPT.has(path)) continue;
  checked += 1;
  const lines = code(path, read(path)).split('\n');
  const reported = new Set();  // `line table` already reported: one report per list
  for (const span of spans(lines, !LOOSE.test(path))) {
    for (const { table, names } of MATCHERS) {
      const found = new Set(names.filter(([, re]) => re.test(span.text)).map(([n]) => n));
      if (found.size < 3) continue;
      if (span.bare) {
        let rest = span.text;
        for (const [n] of names) rest = rest.replace(new RegExp(`(?<![\\w-])${escape(n)}(?![\\w-])`, 'g'), '');
        if (rest.replace(BARE, '') !== '') continue;
      }
      let seen = false;
      for (let l = span.from; l <= span.to; ++l) seen ||= reported.has(`${l} ${table}`);
      if (seen) continue;
      for (let l = span.from; l <= span.to; ++l) reported.add(`${l} ${table}`);
      const where = span.from === span.to ? `${span.from + 1}` : `${span.from + 1}-${span.to + 1}`;
      console.log(`${path}:${where}: lists ${[...found].join(', ')}: ${table} (read the table instead)`);
      bad += 1;
    }
  }
}
console.log(`check-lists: ${checked} files, ${bad} lists outside their tables`);
process.exit(bad ? 1 : 0);

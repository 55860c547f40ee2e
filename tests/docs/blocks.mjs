// The fenced blocks of README.md and docs/*.md, each with the marker comment on the line before it
// (blank lines between allowed), which says who runs it:
//
//   <!-- example: NAME -->        run as written; NAME's prefix says by whom and how:
//     js...    a Node program ('maskattn' resolved to this checkout): tests/js/readme.test.mjs
//     cpp...   a C++ program, built against the installed package with the `cmake-app` block as
//              its CMakeLists.txt: tests/consumer/run.sh (ctest, natively and for aarch64), and
//              the `cpp` one also by the sh-app blocks (tests/docs/commands.test.mjs)
//     cmake... a CMakeLists.txt (cmake-app: the consumer project above)
//     sh...    shell commands, run by tests/docs/commands.test.mjs in a clean copy of the checkout,
//              each file's blocks in order in one shell; sh-app blocks run instead in a clean folder
//              holding the cmake-app block as CMakeLists.txt and the cpp example as main.cpp
//   <!-- not run: REASON -->      not a program or not runnable here; REASON says why
//
// A block with neither marker fails tests/docs/commands.test.mjs.
//
//   node tests/docs/blocks.mjs write KIND DIR   writes each KIND example (cpp, cmake, js) to DIR/NAME.KIND
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The documentation files whose blocks are checked, README first, then docs/ by name. */
export function docFiles(root = ROOT) {
  return ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
}

const MARKER = /^<!--\s*(example|not run):\s*(.*?)\s*-->$/;
export const KINDS = { js: ['js'], cpp: ['cpp'], cmake: ['cmake'], sh: ['sh', 'bash', 'shell'] };

/**
 * Every fenced block of a file: { file, line (of the opening fence, 1-based), lang, code, marker },
 * marker being { example: NAME, kind } or { notRun: REASON } or null. Also returns markers that
 * stand before no block (dangling) as problems.
 */
export function parseBlocks(file, root = ROOT) {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const blocks = [], problems = [];
  let pending = null;  // the last marker seen, until a block or other text takes it
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^(`{3,}|~{3,})\s*([^\s`]*)/.exec(line);
    const m = MARKER.exec(line.trim());
    if (m) {
      if (pending) problems.push(`${file}:${pending.line}: marker before no block`);
      pending = { line: i + 1, type: m[1], value: m[2] };
      continue;
    }
    if (fence) {
      const close = fence[1];
      const start = i;
      const code = [];
      for (i++; i < lines.length && !lines[i].startsWith(close); i++) code.push(lines[i]);
      let marker = null;
      if (pending?.type === 'example') marker = { example: pending.value, kind: kindOf(pending.value) };
      else if (pending) marker = { notRun: pending.value };
      blocks.push({ file, line: start + 1, lang: fence[2].toLowerCase(), code: code.join('\n') + '\n', marker });
      pending = null;
      continue;
    }
    if (line.trim() !== '' && pending) {
      problems.push(`${file}:${pending.line}: marker before no block`);
      pending = null;
    }
  }
  if (pending) problems.push(`${file}:${pending.line}: marker before no block`);
  return { blocks, problems };
}

/** The runner of an example by its name's prefix (js-api: js, sh-app: sh), or null. */
export function kindOf(name) {
  const prefix = /^[a-z]+/.exec(name)?.[0];
  return prefix && prefix in KINDS ? prefix : null;
}

/** Every block of every documentation file, and the problems of their markers. */
export function allBlocks(root = ROOT) {
  const blocks = [], problems = [];
  for (const file of docFiles(root)) {
    const r = parseBlocks(file, root);
    blocks.push(...r.blocks);
    problems.push(...r.problems);
  }
  for (const b of blocks) {
    const where = `${b.file}:${b.line}`;
    if (!b.marker) problems.push(`${where}: a \`\`\`${b.lang} block with no marker: add <!-- example: NAME --> (a runner runs it) or <!-- not run: REASON -->`);
    else if ('notRun' in b.marker && !/\p{L}{3,}/u.test(b.marker.notRun)) problems.push(`${where}: <!-- not run: ... --> needs a reason`);
    else if ('example' in b.marker && !b.marker.kind) problems.push(`${where}: example '${b.marker.example}': its name must start with ${Object.keys(KINDS).join(', ')} (the runner)`);
    else if ('example' in b.marker && !KINDS[b.marker.kind].includes(b.lang)) problems.push(`${where}: example '${b.marker.example}' is a \`\`\`${b.lang} block; ${b.marker.kind} examples are ${KINDS[b.marker.kind].join('/')}`);
  }
  return { blocks, problems };
}

/**
 * The examples of one kind by name: { name: { code, where } }. A name may stand before several
 * blocks (README.md repeats docs/cpp.md's first example) only if their code is the same.
 */
export function examples(kind, root = ROOT) {
  const out = {};
  for (const b of allBlocks(root).blocks) {
    if (b.marker?.kind !== kind) continue;
    const name = b.marker.example;
    if (kind === 'sh') continue;  // run in place, not by name
    if (out[name] && out[name].code !== b.code) throw new Error(`example '${name}' differs between ${out[name].where} and ${b.file}:${b.line}`);
    out[name] ??= { code: b.code, where: `${b.file}:${b.line}` };
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [mode, kind, dir] = process.argv.slice(2);
  if (mode !== 'write' || !kind || !dir) {
    console.error('usage: node tests/docs/blocks.mjs write KIND DIR');
    process.exit(2);
  }
  const found = examples(kind);
  if (!Object.keys(found).length) {
    console.error(`no ${kind} example in ${docFiles().join(', ')}`);
    process.exit(1);
  }
  mkdirSync(dir, { recursive: true });
  for (const [name, { code }] of Object.entries(found)) writeFileSync(join(dir, `${name}.${kind}`), code);
  console.log(Object.keys(found).join(' '));
}

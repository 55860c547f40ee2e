// No function of the JavaScript API (js/) or the demo page (web/) is over 80 lines: declarations,
// expressions, arrow functions, methods and accessors, nested ones counted on their own (an outer
// function's lines include its nested ones'). Parsed with TypeScript's parser (a devDependency),
// so a brace inside a string or a template literal does not fool it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import ts from 'typescript';

const MAX_LINES = 80;
const root = new URL('../../', import.meta.url);

/** Every function-like node of a source text with a body: { name, line, lines }. */
function functionSpans(text, file = 'source.js') {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const lineOf = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const nameOf = (node) => {
    if (node.name) return node.name.getText(source);
    const parent = node.parent;
    if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))) return parent.name.getText(source);
    if (parent && ts.isBinaryExpression(parent)) return parent.left.getText(source);
    return '(anonymous)';
  };
  const spans = [];
  const visit = (node) => {
    if (ts.isFunctionLike(node) && node.body) {
      const line = lineOf(node.getStart(source));
      spans.push({ name: nameOf(node), line, lines: lineOf(node.end) - line + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return spans;
}

test('the measure counts every kind of function, nested ones on their own', () => {
  const body = (n) => Array.from({ length: n }, (_, i) => `  x += ${i};`).join('\n');
  const text = `function outer() {\n${body(3)}\n  const inner = () => {\n${body(2)}\n  };\n}\n` +
    `class A {\n  m() {\n${body(1)}\n  }\n  get g() { return 1; }\n}\nconst f = function () { return \`}\n}\`; };\n` +
    `el.onclick = (e) => {\n${body(1)}\n};\n[1].map((v) => v);\n`;
  const spans = functionSpans(text);
  assert.deepEqual(spans.map((s) => [s.name, s.line, s.lines]), [
    ['outer', 1, 9], ['inner', 5, 4], ['m', 11, 3], ['g', 14, 1], ['f', 16, 2], ['el.onclick', 18, 3], ['(anonymous)', 21, 1],
  ]);
});

for (const dir of ['js', 'web']) {
  test(`${dir}/: no function over ${MAX_LINES} lines`, () => {
    const files = readdirSync(new URL(`${dir}/`, root)).filter((f) => f.endsWith('.js')).sort();
    assert.ok(files.length > 5, `${dir}/ has its scripts`);
    const long = [];
    for (const file of files) {
      for (const s of functionSpans(readFileSync(new URL(`${dir}/${file}`, root), 'utf8'), file))
        if (s.lines > MAX_LINES) long.push(`${dir}/${file}:${s.line} ${s.name}: ${s.lines} lines`);
    }
    assert.deepEqual(long, [], `split these into functions of at most ${MAX_LINES} lines`);
  });
}

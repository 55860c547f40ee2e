// Passes a C++ example's output through (stdin to stdout) and checks it against what README.md says
// it prints. The `cpp` example (the C++ quick start) is followed by a sentence that names the rows of
// batch 1 that print 0 ("Rows A to B of batch 1 print 0"); every other row must print something else.
//
//   PROGRAM | node tests/consumer/prose.mjs NAME
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const name = process.argv[2];
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const out = Buffer.concat(chunks).toString('utf8');
process.stdout.write(out);

/** The README's text between the end of the `example: NAME` block and the next heading or block. */
function proseAfter(readme, example) {
  const at = readme.indexOf(`<!-- example: ${example} -->`);
  if (at < 0) return null;
  const close = readme.indexOf('\n```\n', readme.indexOf('```', at) + 3);
  const rest = readme.slice(close + 5);
  return rest.slice(0, rest.search(/\n(```|#|<!--)/) >>> 0);
}

if (name === 'cpp') {
  const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
  const prose = proseAfter(readme, 'cpp') ?? '';
  const said = /Rows (\d+) to (\d+) of batch 1 print 0/.exec(prose);
  const rows = [...out.matchAll(/^batch 1, row (\d+): (\S+)$/gm)].map((m) => ({ i: Number(m[1]), x: Number(m[2]) }));
  const wrong = [];
  if (!said) wrong.push(`README.md says no "Rows A to B of batch 1 print 0" after the cpp example:\n${prose}`);
  else if (rows.length === 0) wrong.push('the program printed no "batch 1, row i: x" line');
  else {
    const [lo, hi] = [Number(said[1]), Number(said[2])];
    for (const { i, x } of rows) {
      const zero = i >= lo && i <= hi;
      if (zero !== (x === 0)) wrong.push(`row ${i} prints ${x}, but README.md says rows ${lo} to ${hi} print 0${zero ? '' : ' (and no other)'}`);
    }
  }
  if (wrong.length) {
    console.error(`README.md's C++ quick start and its program disagree:\n${wrong.join('\n')}`);
    process.exit(1);
  }
}

// Unit tests of the pure parts of csv_to_json (CSV parsing, JSON output, input checks) under Node:
// `node --test test/` (or `npm test`). The file I/O runs only in the component
// (see guest-tools/examples/README.md).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CsvError, csvToJsonPieces, parseRecords } from '../src/csv.js';
import { ToolFailure, parseInput, splitPath } from '../src/input.js';

const records = (text, delimiter) => parseRecords(text, delimiter).map((r) => Array.from(r));

/** The JSON text csv_to_json writes, and its summary. */
function convert(text, options) {
  const summary = {};
  const json = Array.from(csvToJsonPieces(text, options, summary)).join('');
  return { json, summary };
}

/** What JSON.stringify prints for `rows`, the format the pieces must reproduce exactly. */
const pretty = (rows) => `${JSON.stringify(rows, null, 2)}\n`;

test('plain records, line endings and the final line break', () => {
  assert.deepEqual(records('a,b\n1,2\n'), [['a', 'b'], ['1', '2']]);
  assert.deepEqual(records('a,b\r\n1,2'), [['a', 'b'], ['1', '2']]);
  assert.deepEqual(records('a,b\r1,2\r'), [['a', 'b'], ['1', '2']]);
  assert.deepEqual(records(''), []);
  assert.deepEqual(records('\n\n'), []);
  assert.deepEqual(records('a\n\nb\n'), [['a'], ['b']]);
  assert.deepEqual(records(',\na,,\n'), [['', ''], ['a', '', '']]);
  assert.deepEqual(records('\ufeffx,y\n'), [['x', 'y']]);
});

test('quoted fields', () => {
  assert.deepEqual(records('"a,b","say ""hi""",""\n'), [['a,b', 'say "hi"', '']]);
  assert.deepEqual(records('"line 1\r\nline 2",x\n'), [['line 1\r\nline 2', 'x']]);
  assert.deepEqual(records('""\n'), [['']]);
  assert.deepEqual(records('"a"'), [['a']]);
});

test('other delimiters', () => {
  assert.deepEqual(records('a;b\n"c;d";e\n', ';'), [['a', 'b'], ['c;d', 'e']]);
  assert.deepEqual(records('a\tb\n', '\t'), [['a', 'b']]);
  assert.deepEqual(records('a😀b\n', '😀'), [['a', 'b']]);
  assert.throws(() => parseRecords('a', '"'), TypeError);
  assert.throws(() => parseRecords('a', ',,'), TypeError);
});

test('errors name the line and column', () => {
  const fails = (text, pattern) => {
    assert.throws(() => parseRecords(text), (err) => err instanceof CsvError && pattern.test(err.message));
  };
  fails('a,b\n"open,c\nd\n', /^line 2, column 1: a quoted field is not closed/);
  fails('a,b\n1,x"y\n', /^line 2, column 4: a quote inside an unquoted field/);
  fails('"multi\nline" x,b\n', /^line 2, column 6: unexpected a space after the closing quote/);
});

test('header mode builds objects and checks the shape', () => {
  const { json, summary } = convert('name,age\nAda,36\n"Lin, B",7\n');
  assert.equal(json, pretty([{ name: 'Ada', age: '36' }, { name: 'Lin, B', age: '7' }]));
  assert.deepEqual(summary, { rows: 2, columns: ['name', 'age'] });
  assert.equal(convert('__proto__,"q""uote"\nx,"a\nb"\n').json, '[\n  {\n    "__proto__": "x",\n    "q\\"uote": "a\\nb"\n  }\n]\n');
  assert.equal(convert('a,b\n').json, '[]\n');
  assert.deepEqual(convert('a,b\n').summary, { rows: 0, columns: ['a', 'b'] });
  assert.throws(() => convert(''), /there is no header row/);
  assert.throws(() => convert('a,a\n1,2\n'), /names the column "a" twice/);
  assert.throws(() => convert('a,b\n1,2\n3\n'), /^CsvError: line 3: the record has 1 field, the header has 2/);
});

test('array mode keeps ragged rows', () => {
  const { json, summary } = convert('a,b\n1\n', { header: false });
  assert.equal(json, pretty([['a', 'b'], ['1']]));
  assert.deepEqual(summary, { rows: 2, columns: null });
  assert.equal(convert('', { header: false }).json, '[]\n');
});

test('the pieces match JSON.stringify on generated data', () => {
  const alphabet = ['a', 'é', '"', ',', '\n', '\r\n', ' ', '😀', '\\', '\u2028', '\u0001'];
  let seed = 7;
  const next = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  for (let trial = 0; trial < 200; trial += 1) {
    const width = 1 + next(4);
    const rows = Array.from({ length: next(6) }, () =>
      Array.from({ length: width }, () => Array.from({ length: next(5) }, () => alphabet[next(alphabet.length)]).join('')),
    );
    const quote = (v) => `"${v.replaceAll('"', '""')}"`;
    const text = rows.map((r) => r.map(quote).join(',')).join('\n');
    assert.equal(convert(text, { header: false }).json, pretty(rows));
  }
});

test('input parsing is strict and guards the paths', () => {
  assert.deepEqual(parseInput('{"input_path":"a.csv","output_path":"d/b.json"}'), {
    inputPath: 'a.csv',
    outputPath: 'd/b.json',
    delimiter: ',',
    header: true,
  });
  assert.deepEqual(parseInput('{"input_path":"a","output_path":"b","delimiter":"\\t","header":false}'), {
    inputPath: 'a',
    outputPath: 'b',
    delimiter: '\t',
    header: false,
  });
  const refuses = (input, pattern) => {
    assert.throws(
      () => parseInput(input),
      (err) => err instanceof ToolFailure && err.payload.tag === 'invalid-input' && pattern.test(err.message),
      input,
    );
  };
  refuses('nope', /not JSON/);
  refuses('[]', /expected a JSON object/);
  refuses('{"input_path":"a"}', /missing field `output_path`/);
  refuses('{"input_path":"a","output_path":"b","extra":1}', /unknown field `extra`/);
  refuses('{"input_path":1,"output_path":"b"}', /`input_path` must be a string/);
  refuses('{"input_path":"","output_path":"b"}', /must not be empty/);
  refuses('{"input_path":"/etc/passwd","output_path":"b"}', /must be relative to the root/);
  refuses('{"input_path":"a","output_path":"x/../../b"}', /must not contain `\.\.`/);
  refuses('{"input_path":"..","output_path":"b"}', /must not contain `\.\.`/);
  refuses('{"input_path":"a\\u0000b","output_path":"b"}', /NUL/);
  refuses('{"input_path":"a","output_path":"b","delimiter":";;"}', /exactly one character/);
  refuses('{"input_path":"a","output_path":"b","delimiter":"\\""}', /not be a quote/);
  refuses('{"input_path":"a","output_path":"b","header":"yes"}', /`header` must be true or false/);
  assert.deepEqual(splitPath('out.json'), ['.', 'out.json']);
  assert.deepEqual(splitPath('a/b/out.json'), ['a/b', 'out.json']);
});

// RFC 4180 CSV parsing, with no I/O: used by the csv_to_json tool and testable under Node
// (`node --test test/`).
//
// Rules:
// - fields are separated by `delimiter` (one character, default `,`); records end with CRLF, LF or a
//   lone CR; a line break at the very end of the text does not start another record;
// - a field that starts with `"` is quoted: it may hold the delimiter, line breaks and `""` (one
//   literal quote), and its closing quote must be followed by the delimiter, a line break or the end;
// - a `"` inside an unquoted field, text after a closing quote and an unclosed quote are errors, each
//   reported with its line and column (1-based, counted in characters);
// - empty lines are skipped (a line holding only `""` is a record with one empty field);
// - a leading byte-order mark is dropped; every value is kept as a string (no type guessing).

/** A CSV syntax or shape error, with the 1-based line where it was found. */
export class CsvError extends Error {
  constructor(message, line, column) {
    super(column === undefined ? `line ${line}: ${message}` : `line ${line}, column ${column}: ${message}`);
    this.name = 'CsvError';
    this.line = line;
  }
}

/** Splits `text` into records (arrays of strings); see [`iterateRecords`]. */
export function parseRecords(text, delimiter = ',') {
  return Array.from(iterateRecords(text, delimiter));
}

/**
 * Yields the records of `text` one by one (arrays of strings). Each record gets the line it starts
 * on as the property `line`, for error messages. Errors are thrown when the parser reaches them.
 */
export function* iterateRecords(text, delimiter = ',') {
  if (typeof delimiter !== 'string' || [...delimiter].length !== 1) {
    throw new TypeError('the delimiter must be exactly one character');
  }
  if (delimiter === '"' || delimiter === '\r' || delimiter === '\n') {
    throw new TypeError('the delimiter must not be a quote or a line break');
  }
  if (text.charCodeAt(0) === 0xfeff) {
    text = text.slice(1);
  }
  const n = text.length;
  let i = 0;
  let line = 1;
  let lineStart = 0; // index of the first character of the current line
  const column = (index) => index - lineStart + 1;

  const atDelimiter = (index) => text.startsWith(delimiter, index);

  while (i < n) {
    const record = [];
    record.line = line;
    let quotedAny = false;
    // One record: fields until a line break or the end of the text.
    for (;;) {
      let value;
      if (text[i] === '"') {
        quotedAny = true;
        const openLine = line;
        const openColumn = column(i);
        i += 1;
        const parts = [];
        for (;;) {
          const quote = text.indexOf('"', i);
          const end = quote === -1 ? n : quote;
          // Count the line breaks inside the quoted part, for the positions that follow.
          for (let j = i; j < end; j += 1) {
            const c = text.charCodeAt(j);
            if (c === 10 || (c === 13 && text.charCodeAt(j + 1) !== 10)) {
              line += 1;
              lineStart = j + 1;
            }
          }
          if (quote === -1) {
            throw new CsvError('a quoted field is not closed before the end of the file', openLine, openColumn);
          }
          parts.push(text.slice(i, quote));
          if (text[quote + 1] === '"') {
            parts.push('"');
            i = quote + 2;
            continue;
          }
          i = quote + 1;
          break;
        }
        value = parts.join('');
        if (i < n && !atDelimiter(i) && text[i] !== '\r' && text[i] !== '\n') {
          throw new CsvError(
            `unexpected ${describeChar(text[i])} after the closing quote of a field (a quote inside a quoted field is written "")`,
            line,
            column(i),
          );
        }
      } else {
        const start = i;
        while (i < n && !atDelimiter(i) && text[i] !== '\r' && text[i] !== '\n') {
          if (text[i] === '"') {
            throw new CsvError(
              'a quote inside an unquoted field (quote the whole field and write the quote as "")',
              line,
              column(i),
            );
          }
          i += 1;
        }
        value = text.slice(start, i);
      }
      record.push(value);
      if (i < n && atDelimiter(i)) {
        i += delimiter.length;
        continue;
      }
      break;
    }
    // At a line break (CRLF, LF or CR) or the end of the text.
    if (i < n) {
      i += text[i] === '\r' && text[i + 1] === '\n' ? 2 : 1;
      line += 1;
      lineStart = i;
    }
    // An empty line is no record (a line holding only "" is one, with an empty field).
    if (record.length === 1 && record[0] === '' && !quotedAny) {
      continue;
    }
    yield record;
  }
}

function describeChar(c) {
  return c === ' ' ? 'a space' : `\`${c}\``;
}

/**
 * Converts CSV text into pretty-printed JSON (exactly what `JSON.stringify(rows, null, 2)` prints),
 * yielded in pieces so that the whole document never has to sit in memory. With `header`, the rows
 * are objects keyed by the first record's fields (every record must have as many fields as the
 * header; names must be unique); without, arrays of strings. `summary.rows` counts the rows yielded
 * so far and `summary.columns` holds the header (or null).
 */
export function* csvToJsonPieces(text, { delimiter = ',', header = true } = {}, summary = {}) {
  summary.rows = 0;
  summary.columns = null;
  const records = iterateRecords(text, delimiter);
  let keys = null; // the header's names, already JSON-encoded
  if (header) {
    const first = records.next();
    if (first.done) {
      throw new CsvError('the file is empty, but `header` is true: there is no header row', 1);
    }
    const columns = Array.from(first.value);
    const seen = new Set();
    for (const name of columns) {
      if (seen.has(name)) {
        throw new CsvError(`the header names the column ${JSON.stringify(name)} twice`, first.value.line);
      }
      seen.add(name);
    }
    summary.columns = columns;
    keys = columns.map((name) => JSON.stringify(name));
  }
  let open = false;
  for (const record of records) {
    if (keys && record.length !== keys.length) {
      throw new CsvError(
        `the record has ${record.length} field${record.length === 1 ? '' : 's'}, the header has ${keys.length}`,
        record.line,
      );
    }
    const items = keys
      ? record.map((value, c) => `    ${keys[c]}: ${JSON.stringify(value)}`)
      : record.map((value) => `    ${JSON.stringify(value)}`);
    const [start, end] = keys ? ['{', '}'] : ['[', ']'];
    yield `${open ? ',\n' : '[\n'}  ${start}\n${items.join(',\n')}\n  ${end}`;
    open = true;
    summary.rows += 1;
  }
  yield open ? '\n]\n' : '[]\n';
}

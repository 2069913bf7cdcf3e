// `csv_to_json`: converts a CSV file (RFC 4180) into a pretty-printed JSON file.
//
// An example turngate tool written in JavaScript and built into a WASI 0.2 component with
// componentize-js (see `../../../build.sh`). StarlingMonkey has no Node `fs`, so the file I/O goes
// through the `wasi:filesystem` interfaces the world imports (`wit/world.wit`): the root is the
// preopened directory `/`, and every path is opened relative to it. The output is written
// atomically: a new temporary file in the same directory, synced, then renamed over the target.
//
// The module's top level runs once at build time (Wizer snapshots it), so it must not touch the
// filesystem; everything happens in `call`.

import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';

import { CsvError, csvToJsonPieces } from './csv.js';
import { SCHEMA, ToolFailure, failed, invalidInput, parseInput, splitPath } from './input.js';

const NAME = 'csv_to_json';
/** The largest CSV file read, in bytes. */
const MAX_INPUT_BYTES = 4 * 1024 * 1024;
/** The most bytes one read asks for. */
const READ_CHUNK = 256 * 1024;
/** The size of the buffer that JSON is encoded into before each write. */
const WRITE_BUFFER_BYTES = 256 * 1024;
/** How many temporary names are tried before giving up. */
const TEMP_ATTEMPTS = 8;
/** The longest prefix of the target's name kept in a temporary file's name. */
const TEMP_NAME_CHARS = 64;

const DESCRIPTION =
  'Convert a CSV file (RFC 4180: quoted fields may hold the delimiter, line breaks and "" for a quote) ' +
  'into a pretty-printed JSON file, replacing `output_path` atomically. With `header` (default) the result ' +
  'is an array of objects keyed by the first row, else an array of arrays; every value is a string. ' +
  'Returns a one-line summary.';

// ---------------------------------------------------------------------------------------------
// Errors

/** The `wasi:filesystem` error code carried by an exception from a filesystem call, if any. */
function errorCode(err) {
  if (typeof err === 'string') return err;
  if (err && typeof err.payload === 'string') return err.payload;
  if (err && err.payload && typeof err.payload.tag === 'string') return err.payload.tag;
  return undefined;
}

/** Words for the `wasi:filesystem` error codes a tool is likely to meet. */
const ERROR_TEXT = {
  'no-entry': 'no such file or directory',
  access: 'permission denied',
  'not-permitted': 'operation not permitted',
  'read-only': 'read-only filesystem',
  'is-directory': 'is a directory',
  'not-directory': 'not a directory',
  exist: 'already exists',
  'insufficient-space': 'no space left on the device',
  loop: 'too many levels of symbolic links',
  'name-too-long': 'file name too long',
};

/** Maps an exception from a filesystem call on `path` to a tool error that names the path. */
function fsFailure(path, err, doing) {
  if (err instanceof ToolFailure) return err;
  const code = errorCode(err);
  const reason = code === undefined ? String(err && err.message ? err.message : err) : `${ERROR_TEXT[code] ?? code} (${code})`;
  const message = `cannot ${doing} ${path}: ${reason}`;
  switch (code) {
    case 'no-entry':
      return new ToolFailure('not-found', message);
    case 'access':
    case 'not-permitted':
    case 'read-only':
      return new ToolFailure('denied', message);
    default:
      return failed(message);
  }
}

// ---------------------------------------------------------------------------------------------
// Filesystem

/** The preopened root (`/`); there is none when the host grants no filesystem. */
function rootDirectory() {
  for (const [descriptor, name] of getDirectories()) {
    if (name === '/') return descriptor;
  }
  throw failed('no filesystem: the host preopened no root directory');
}

/** Releases a resource now instead of when the instance ends, where the bindings support it. */
function dispose(resource) {
  if (resource && typeof resource[Symbol.dispose] === 'function') resource[Symbol.dispose]();
}

/** Reads a whole regular file of at most MAX_INPUT_BYTES bytes. */
function readFile(root, path) {
  let file;
  try {
    file = root.openAt({ symlinkFollow: true }, path, {}, { read: true });
  } catch (err) {
    throw fsFailure(path, err, 'open');
  }
  try {
    let info;
    try {
      info = file.stat();
    } catch (err) {
      throw fsFailure(path, err, 'stat');
    }
    if (info.type === 'directory') throw failed(`${path} is a directory, not a CSV file`);
    if (info.type !== 'regular-file') throw failed(`${path} is not a regular file (${info.type})`);
    if (info.size > BigInt(MAX_INPUT_BYTES)) throw failed(tooLarge(path, info.size));
    // One buffer of the size stat reported, plus one byte to notice a file that grew since.
    const bytes = new Uint8Array(Number(info.size) + 1);
    let total = 0;
    for (;;) {
      let data;
      let end;
      try {
        [data, end] = file.read(BigInt(Math.min(READ_CHUNK, bytes.length - total)), BigInt(total));
      } catch (err) {
        throw fsFailure(path, err, 'read');
      }
      if (total + data.length >= bytes.length) {
        throw failed(`${path} changed while it was read (it grew past the ${info.size} bytes it had)`);
      }
      bytes.set(data, total);
      total += data.length;
      if (end || data.length === 0) break;
    }
    return bytes.subarray(0, total);
  } finally {
    dispose(file);
  }
}

/** Decodes UTF-8 strictly (a byte-order mark is kept and dropped by the parser). */
function decodeUtf8(path, bytes) {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw failed(`${path} is not UTF-8 text; csv_to_json reads UTF-8 CSV files only`);
  }
}

function tooLarge(path, size) {
  return `${path} is too large: ${size} bytes, the limit is ${MAX_INPUT_BYTES} bytes (4 MiB)`;
}

/** A random hex token for a temporary file's name. */
function randomToken() {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Writes text to a file from offset 0 as UTF-8, gathering small pieces into larger writes.
 *
 * The text is encoded with `encodeInto` into one reusable buffer: `TextEncoder.encode` would allocate
 * a new buffer for every piece, memory the engine's garbage collector is slow to give back, and a
 * 4 MiB CSV file then needed more than 64 MiB.
 */
class TextWriter {
  constructor(file) {
    this.file = file;
    this.offset = 0;
    this.buffer = new Uint8Array(WRITE_BUFFER_BYTES);
    this.used = 0;
    this.encoder = new TextEncoder();
  }

  write(text) {
    let rest = text;
    for (;;) {
      const { read, written } = this.encoder.encodeInto(rest, this.buffer.subarray(this.used));
      this.used += written;
      if (read === rest.length) return;
      rest = rest.slice(read);
      this.flush();
    }
  }

  flush() {
    let at = 0;
    while (at < this.used) {
      const written = Number(this.file.write(this.buffer.subarray(at, this.used), BigInt(this.offset)));
      if (written <= 0) throw new Error('the write made no progress');
      at += written;
      this.offset += written;
    }
    this.used = 0;
  }
}

/**
 * Replaces `path` atomically with the text that `produce(writer)` writes: the text goes to a new
 * temporary file next to `path`, which is synced and renamed over it. The parent directory must
 * exist; on any error (in `produce` too) the temporary file is removed and `path` is untouched.
 * Returns the number of bytes written.
 */
function atomicWrite(root, path, produce) {
  const [parent, name] = splitPath(path);
  if (name === '' || name === '.') throw invalidInput(`bad input: \`output_path\` does not name a file: \`${path}\``);
  let parentInfo;
  try {
    parentInfo = root.statAt({ symlinkFollow: true }, parent);
  } catch (err) {
    if (errorCode(err) === 'no-entry') {
      throw new ToolFailure('not-found', `cannot write ${path}: parent directory ${parent} does not exist`);
    }
    throw fsFailure(parent, err, 'stat');
  }
  if (parentInfo.type !== 'directory') throw failed(`cannot write ${path}: ${parent} is not a directory`);
  let target = null;
  try {
    target = root.statAt({}, path);
  } catch (err) {
    if (errorCode(err) !== 'no-entry') throw fsFailure(path, err, 'stat');
  }
  if (target && target.type === 'directory') throw failed(`${path} is a directory`);

  const stem = Array.from(name).slice(0, TEMP_NAME_CHARS).join('');
  const prefix = parent === '.' ? '' : `${parent}/`;
  let temp;
  let file;
  for (let attempt = 0; attempt < TEMP_ATTEMPTS && !file; attempt += 1) {
    temp = `${prefix}.${stem}.turngate-${randomToken()}.tmp`;
    try {
      file = root.openAt({}, temp, { create: true, exclusive: true }, { write: true });
    } catch (err) {
      if (errorCode(err) !== 'exist') throw fsFailure(path, err, 'create a temporary file for');
    }
  }
  if (!file) throw failed(`cannot write ${path}: no free temporary name`);
  try {
    let size;
    try {
      const writer = new TextWriter(file);
      produce(writer);
      writer.flush();
      file.sync();
      size = writer.offset;
    } finally {
      dispose(file);
    }
    root.renameAt(temp, root, path);
    return size;
  } catch (err) {
    try {
      root.unlinkFileAt(temp);
    } catch {
      // Best effort: the error that matters is the one that made the write fail.
    }
    throw fsFailure(path, err, 'write');
  }
}

// ---------------------------------------------------------------------------------------------
// The tool world's exports

export function describe() {
  return {
    name: NAME,
    description: DESCRIPTION,
    inputSchema: JSON.stringify(SCHEMA),
    paths: [
      { pointer: '/input_path', access: 'read' },
      { pointer: '/output_path', access: 'write' },
    ],
  };
}

export function call(input) {
  try {
    const { inputPath, outputPath, delimiter, header } = parseInput(input);
    const root = rootDirectory();
    const text = decodeUtf8(inputPath, readFile(root, inputPath));
    const summary = {};
    const size = atomicWrite(root, outputPath, (writer) => {
      try {
        for (const piece of csvToJsonPieces(text, { delimiter, header }, summary)) writer.write(piece);
      } catch (err) {
        if (err instanceof CsvError) throw failed(`${inputPath} is not valid CSV: ${err.message}`);
        throw err;
      }
    });
    const { rows, columns } = summary;
    const shape = columns
      ? `object${rows === 1 ? '' : 's'} with ${columns.length} column${columns.length === 1 ? '' : 's'}`
      : `array${rows === 1 ? '' : 's'}`;
    return `converted ${inputPath} to ${outputPath}: ${rows} ${shape}, ${size} bytes of JSON`;
  } catch (err) {
    if (err instanceof ToolFailure) throw err;
    // A bug or an engine limit: report it rather than trap.
    throw new ToolFailure('failed', `${NAME}: internal error: ${err && err.message ? err.message : String(err)}`);
  }
}

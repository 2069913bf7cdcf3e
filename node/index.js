'use strict';
// turngate for Node: the loader of the N-API addon (`turngate.node`, built from `src/`) and the package's
// face in Node's style. Everything here translates: bodies in any form to chunks for the library's
// decoder, JSON text to objects, `AbortSignal` to a cancellation, the addon's errors to `Error`
// subclasses. The gate, the sandbox, approval and the journal are the library's.

const path = require('node:path');

/** The addon: `turngate.node` beside this file, or the file TURNGATE_NODE_ADDON names (the tests' build). */
function loadAddon() {
  const addon = { exports: {} };
  process.dlopen(addon, process.env.TURNGATE_NODE_ADDON || path.join(__dirname, 'turngate.node'));
  return addon.exports;
}

const native = loadAddon();

/** Every error turngate throws. */
class TurngateError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}
/** A bad argument, provider name, root or option. */
class UsageError extends TurngateError {}
/** The policy (a file, TOML text or an object) is not valid; nothing was loaded or run. */
class PolicyError extends UsageError {}
/** A tool component could not be loaded (not a tool, a bad descriptor, not pinned by the lock). */
class ToolLoadError extends UsageError {}
/** The turn broke its protocol (status `malformed`): nothing ran. The report is `.report`. */
class StreamParseError extends TurngateError {}
/** An undo was refused (a file changed since, or nothing to undo); nothing was restored. */
class UndoError extends TurngateError {}
/** A bug in turngate (a Rust panic), caught at the boundary. */
class InternalError extends TurngateError {}

const classes = {
  UsageError,
  PolicyError,
  ToolLoadError,
  StreamParseError,
  UndoError,
  InternalError,
};

/** The addon's error (message `{"class", "message", "extra"}`) as its class; anything else as it is. */
function translated(error) {
  let parsed;
  try {
    parsed = JSON.parse(error.message);
  } catch {
    return error;
  }
  const Class = parsed && classes[parsed.class];
  if (!Class) return error;
  const typed = new Class(parsed.message);
  if (parsed.class === 'StreamParseError') typed.report = parsed.extra;
  return typed;
}

/** Runs `work` (which calls the addon); rethrows the addon's errors as their classes. */
async function native_(work) {
  try {
    return await work();
  } catch (error) {
    throw translated(error);
  }
}

function nativeSync(work) {
  try {
    return work();
  } catch (error) {
    throw translated(error);
  }
}

/** The user's approver as the addon calls it: JSON text in, a promise of exactly `true` to approve. */
function bridged(approver) {
  if (approver === undefined || approver === null) return undefined;
  if (typeof approver !== 'function') throw new UsageError('approver must be a function');
  return async (request) => {
    try {
      return (await approver(JSON.parse(request))) === true;
    } catch (error) {
      process.emitWarning(`turngate: the approver threw, so the call is denied: ${error}`);
      return false;
    }
  };
}

/** A cancellation set when `signal` aborts; `done()` stops listening. */
function cancellation(signal) {
  if (signal === undefined || signal === null) return { cancel: undefined, done() {} };
  if (typeof signal.addEventListener !== 'function') {
    throw new UsageError('signal must be an AbortSignal');
  }
  const cancel = new native.NativeCancel();
  const onAbort = () => cancel.cancel();
  if (signal.aborted) cancel.cancel();
  else signal.addEventListener('abort', onAbort, { once: true });
  return { cancel, done: () => signal.removeEventListener('abort', onAbort) };
}

function asBytes(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (typeof chunk === 'string') return Buffer.from(chunk, 'utf8');
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  throw new UsageError(`a response chunk must be a Uint8Array or a string, not ${typeof chunk}`);
}

/**
 * The chunks of a body: a `Uint8Array` or string (whole), a `Response` (its body), a
 * `ReadableStream<Uint8Array>`, or an (async) iterable of chunks.
 */
async function* chunksOf(body) {
  if (body instanceof Uint8Array || typeof body === 'string' || body instanceof ArrayBuffer) {
    yield asBytes(body);
  } else if (body && typeof body.getReader === 'function') {
    const reader = body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        yield asBytes(value);
      }
    } finally {
      reader.releaseLock();
    }
  } else if (body && typeof body.arrayBuffer === 'function' && 'body' in body) {
    if (body.body !== null) yield* chunksOf(body.body);
  } else if (body && typeof body[Symbol.asyncIterator] === 'function') {
    for await (const chunk of body) yield asBytes(chunk);
  } else if (body && typeof body[Symbol.iterator] === 'function') {
    for (const chunk of body) yield asBytes(chunk);
  } else {
    throw new UsageError(
      'a body must be a Uint8Array, a string, a Response, a ReadableStream or an (async) iterable of chunks',
    );
  }
}

/** A decoded turn: how it ended (`status`, `stopReason`, `detail`), its `text`, and the whole turn. */
class Turn {
  constructor(decoded, readError) {
    this.native = decoded.turn;
    const turn = JSON.parse(decoded.json);
    this.provider = turn.provider;
    this.status = turn.ending.status;
    this.stopReason = turn.ending.stop_reason ?? null;
    this.detail = turn.ending.detail;
    this.text = turn.text;
    /** The error reading the body ended with (then the turn is cut), or `undefined`. */
    this.readError = readError;
    this.decoded = turn;
  }

  toJSON() {
    return this.decoded;
  }
}

/**
 * Decodes a provider's response body (streamed or a whole JSON body) into a `Turn`, off the JavaScript
 * thread: each chunk is decoded on the addon's pool, one at a time, in order. A body that stops with a
 * read error is decoded as far as it came: its turn is cut and nothing of it will run. `onText(text)`
 * sees the visible text as it arrives (a whole JSON body's at its end).
 */
async function decodeTurn(provider, body, options = {}) {
  const { forcedToolChoice = false, maxOutputTokens, onText, ...rest } = options;
  refuseUnknown(rest, 'decodeTurn');
  const decoder = nativeSync(
    () => new native.NativeDecoder(String(provider), Boolean(forcedToolChoice), maxOutputTokens ?? null),
  );
  let readError;
  try {
    for await (const chunk of chunksOf(body)) {
      for (const text of await native_(() => decoder.feed(chunk))) onText?.(text);
    }
  } catch (error) {
    if (error instanceof TurngateError) throw error;
    readError = error;
  }
  const decoded = await native_(() => decoder.finish());
  for (const text of decoded.text) onText?.(text);
  return new Turn(decoded, readError);
}

function refuseUnknown(rest, where) {
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new UsageError(`${where}: unknown option ${unknown.join(', ')}`);
}

/** Tools, a root, a policy and the root's journal. Make one with `await Toolbox.open({...})`. */
class Toolbox {
  constructor(nativeToolbox) {
    this.native = nativeToolbox;
  }

  /**
   * Loads the tools and opens the root. Options: `root` (required), `policyFile` (a TOML file) or
   * `policy` (TOML text or an object of the same tables), `toolsDir`, `locked`, `bundled` (default
   * true), `timeoutMs`, `memoryMib`, `maxOutput`, `cacheDir`, `cache` (default true).
   */
  static async open(options) {
    if (!options || typeof options.root !== 'string') {
      throw new UsageError('Toolbox.open needs { root: "<directory>" }');
    }
    return new Toolbox(await native_(() => native.openToolbox(JSON.stringify(options))));
  }

  /** The root every call is confined to. */
  get root() {
    return this.native.root;
  }

  /** The loaded tools' names. */
  get toolNames() {
    return this.native.toolNames;
  }

  /** The tools as `provider`'s request expects them (its `tools`). */
  toolDefinitions(provider) {
    return JSON.parse(nativeSync(() => this.native.toolDefinitions(String(provider))));
  }

  /**
   * Runs one call as `turngate call` does: gate, sandbox, approval, apply. `input` is an object or JSON
   * text. Options: `approver`, `review`, `callId`, `turnId`, `signal`. Resolves with the outcome
   * (`{tool, status, output | error: {stage, kind, message}, changes, ...}`); an aborted call applies
   * nothing and resolves `cancelled`.
   */
  async call(tool, input, options = {}) {
    const { approver, signal, ...rest } = options;
    const text = typeof input === 'string' ? input : JSON.stringify(input);
    const { cancel, done } = cancellation(signal);
    try {
      const answer = await native_(() =>
        this.native.call(String(tool), text, JSON.stringify(rest), bridged(approver), cancel),
      );
      return JSON.parse(answer);
    } finally {
      done();
    }
  }

  /**
   * Gates a turn as `turngate run` does. `turn` is a `Turn` from `decodeTurn`. Options: `approver`,
   * `review`, `turnId`, `audit`, `signal`. Resolves with the report: `{turn: {id, status, stop_reason,
   * detail}, calls: [...], history: [...]}`, the history in the provider's own shape, ready to append to
   * the next request. A malformed turn throws `StreamParseError` (nothing ran; `.report`).
   */
  async processTurn(turn, options = {}) {
    if (!(turn instanceof Turn)) throw new UsageError('processTurn needs a Turn from decodeTurn');
    const { approver, signal, ...rest } = options;
    const { cancel, done } = cancellation(signal);
    try {
      const answer = await native_(() =>
        this.native.processTurn(turn.native, JSON.stringify(rest), bridged(approver), cancel),
      );
      return JSON.parse(answer);
    } finally {
      done();
    }
  }

  /**
   * Decodes `body` (see `decodeTurn`) and gates the turn: the raw response of `fetch` or an SDK's
   * `.asResponse()`, its `body`, chunks, or a whole JSON body. Options: those of `decodeTurn` and of
   * `processTurn`.
   */
  async runTurn(provider, body, options = {}) {
    const { forcedToolChoice, maxOutputTokens, onText, ...rest } = options;
    const turn = await decodeTurn(provider, body, { forcedToolChoice, maxOutputTokens, onText });
    return this.processTurn(turn, rest);
  }

  /** The root's journal, oldest first: one entry per applied (or undone) call. */
  async journal() {
    return JSON.parse(await native_(() => this.native.journal()));
  }

  /**
   * Undoes applied calls: `{last: true}`, `{call: ID}`, `{turn: ID}` or `{seq: N}`. Resolves with the
   * calls undone, newest first; throws `UndoError` when a file changed since or nothing matches (then
   * nothing is restored).
   */
  async undo(target) {
    return JSON.parse(await native_(() => this.native.undo(JSON.stringify(target ?? {}))));
  }
}

module.exports = {
  Toolbox,
  Turn,
  decodeTurn,
  TurngateError,
  UsageError,
  PolicyError,
  ToolLoadError,
  StreamParseError,
  UndoError,
  InternalError,
  _panicForTest: (inTask) => native_(() => native._panicForTest(Boolean(inTask))),
  _panicOnPoolForTest: () => native_(() => native._panicOnPoolForTest()),
  /** The addon itself, for the tests of its own checks. */
  _native: native,
};

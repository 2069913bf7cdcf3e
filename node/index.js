'use strict';
// turngate for Node: the package's face in Node's style, over the N-API addon (built from `src/`, found
// by `loader.js`). Everything here translates: bodies in any form to chunks for the library's
// decoder, JSON text to objects, `AbortSignal` to a cancellation, the addon's errors to `Error`
// subclasses. The gate, the sandbox, approval and the journal are the library's.
//
// The JSDoc types here are the package's declarations: `scripts/types.js` generates `index.d.ts` from
// them with tsc, which checks this file against the addon's declarations (`native.d.ts`, generated
// from the Rust by napi-rs).

const { loadAddon } = require('./loader');

const native = /** @type {typeof import('./native')} */ (loadAddon());

/** Every error turngate throws. */
class TurngateError extends Error {
  /**
   * @param {string} [message]
   * @param {ErrorOptions} [options]
   */
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
class StreamParseError extends TurngateError {
  /**
   * @param {string} message
   * @param {TurnReport} report
   */
  constructor(message, report) {
    super(message);
    /** @readonly */
    this.report = report;
  }
}
/** An undo was refused (a file changed since, or nothing to undo); nothing was restored. */
class UndoError extends TurngateError {}
/** A bug in turngate (a Rust panic), caught at the boundary. */
class InternalError extends TurngateError {}

/** @type {Record<string, typeof TurngateError>} */
const classes = {
  UsageError,
  PolicyError,
  ToolLoadError,
  UndoError,
  InternalError,
};

/**
 * The addon's error (message `{"class", "message", "extra"}`) as its class; anything else as it is.
 * @param {unknown} error
 * @returns {unknown}
 */
function translated(error) {
  let parsed;
  try {
    parsed = JSON.parse(/** @type {Error} */ (error).message);
  } catch {
    return error;
  }
  if (parsed && parsed.class === 'StreamParseError') return new StreamParseError(parsed.message, parsed.extra);
  const Class = parsed && Object.hasOwn(classes, parsed.class) ? classes[parsed.class] : undefined;
  return Class ? new Class(parsed.message) : error;
}

/**
 * Runs `work` (which calls the addon); rethrows the addon's errors as their classes.
 * @template T
 * @param {() => T | Promise<T>} work
 * @returns {Promise<T>}
 */
async function native_(work) {
  try {
    return await work();
  } catch (error) {
    throw translated(error);
  }
}

/**
 * Runs `work` (which calls the addon) on this thread; rethrows the addon's errors as their classes.
 * @template T
 * @param {() => T} work
 * @returns {T}
 */
function nativeSync(work) {
  try {
    return work();
  } catch (error) {
    throw translated(error);
  }
}

/**
 * The user's approver as the addon calls it: JSON text in, a promise of exactly `true` to approve
 * (`"console"` is the addon's own: see `nativeOptions`).
 * @param {Approver | 'console' | undefined} approver
 * @returns {((request: string) => Promise<boolean>) | undefined}
 */
function bridged(approver) {
  if (approver === undefined || approver === null || approver === 'console') return undefined;
  if (typeof approver !== 'function') {
    throw new UsageError('approver must be a function, or "console" to ask through turngate console');
  }
  return async (request) => {
    try {
      return (await approver(JSON.parse(request))) === true;
    } catch (error) {
      process.emitWarning(`turngate: the approver threw, so the call is denied: ${error}`);
      return false;
    }
  };
}

/**
 * A call's or a turn's options as the addon reads them: `approver: "console"` asks through the root's
 * recorded approvals (`recordedApprovals`), as `turngate run --approve-in console` does.
 * @param {Approver | 'console' | undefined} approver
 * @param {Record<string, unknown>} rest
 * @returns {string}
 */
function nativeOptions(approver, rest) {
  return JSON.stringify(approver === 'console' ? { ...rest, recordedApprovals: true } : rest);
}

/**
 * A cancellation set when `signal` aborts; `done()` stops listening.
 * @param {AbortSignal | undefined} signal
 * @returns {{ cancel: import('./native').NativeCancel | undefined, done: () => void }}
 */
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

/**
 * @param {unknown} chunk
 * @returns {Uint8Array}
 */
function asBytes(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (typeof chunk === 'string') return Buffer.from(chunk, 'utf8');
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  throw new UsageError(`a response chunk must be a Uint8Array or a string, not ${typeof chunk}`);
}

/**
 * The chunks of a body: a `Uint8Array` or string (whole), a `Response` (its body), a
 * `ReadableStream<Uint8Array>`, or an (async) iterable of chunks.
 * @param {any} body
 * @returns {AsyncGenerator<Uint8Array, void, undefined>}
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

/**
 * The two ways into a `Turn` this module has and its users have not: making one (`decodeTurn`) and
 * reaching its addon turn (`processTurn`). `Turn`'s static block sets them.
 * @type {(decoded: import('./native').DecodedTurn, readError: unknown) => Turn}
 */
let newTurn;
/** @type {(turn: Turn) => import('./native').NativeTurn} */
let nativeTurnOf;

/** A decoded turn: how it ended (`status`, `stopReason`, `detail`), its `text`, and the whole turn. */
class Turn {
  /** @type {import('./native').NativeTurn} */
  #native;
  /** @type {unknown} */
  #decoded;

  /**
   * @private
   * @param {import('./native').DecodedTurn} decoded
   * @param {unknown} readError
   */
  constructor(decoded, readError) {
    this.#native = decoded.turn;
    const turn = JSON.parse(decoded.json);
    this.#decoded = turn;
    /** @readonly @type {Provider} */
    this.provider = turn.provider;
    /** @readonly @type {TurnStatus} */
    this.status = turn.ending.status;
    /** @readonly @type {string | null} */
    this.stopReason = turn.ending.stop_reason ?? null;
    /** @readonly @type {string} */
    this.detail = turn.ending.detail;
    /** @readonly @type {string} */
    this.text = turn.text;
    /**
     * The error reading the body ended with (then the turn is cut), or `undefined`.
     * @readonly
     */
    this.readError = readError;
  }

  static {
    newTurn = (decoded, readError) => new Turn(decoded, readError);
    nativeTurnOf = (turn) => turn.#native;
  }

  /**
   * The whole decoded turn as the library serializes it.
   * @returns {unknown}
   */
  toJSON() {
    return this.#decoded;
  }
}

/**
 * Decodes a provider's response body (streamed or a whole JSON body) into a `Turn`, off the JavaScript
 * thread: each chunk is decoded on the addon's pool, one at a time, in order. A body that stops with a
 * read error is decoded as far as it came: its turn is cut and nothing of it will run. `onText(text)`
 * sees the visible text as it arrives (a whole JSON body's at its end).
 * @param {Provider} provider
 * @param {Body} body
 * @param {DecodeOptions} [options]
 * @returns {Promise<Turn>}
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
  return newTurn(decoded, readError);
}

/**
 * @param {object} rest
 * @param {string} where
 */
function refuseUnknown(rest, where) {
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new UsageError(`${where}: unknown option ${unknown.join(', ')}`);
}

/** Tools, a root, a policy and the root's journal. Make one with `await Toolbox.open({...})`. */
class Toolbox {
  /** @type {import('./native').NativeToolbox} */
  #native;

  /**
   * @private
   * @param {import('./native').NativeToolbox} nativeToolbox
   */
  constructor(nativeToolbox) {
    this.#native = nativeToolbox;
  }

  /**
   * Loads the tools and opens the root. Options: `root` (required), `policyFile` (a TOML file) or
   * `policy` (TOML text or an object of the same tables), `toolsDir`, `locked`, `bundled` (default
   * true), `timeoutMs`, `memoryMib`, `maxOutput`, `cacheDir`, `cache` (default true).
   * @param {ToolboxOptions} options
   * @returns {Promise<Toolbox>}
   */
  static async open(options) {
    if (!options || typeof options.root !== 'string') {
      throw new UsageError('Toolbox.open needs { root: "<directory>" }');
    }
    return new Toolbox(await native_(() => native.openToolbox(JSON.stringify(options))));
  }

  /**
   * The root every call is confined to.
   * @returns {string}
   */
  get root() {
    return this.#native.root;
  }

  /**
   * The loaded tools' names.
   * @returns {string[]}
   */
  get toolNames() {
    return this.#native.toolNames;
  }

  /**
   * The tools as `provider`'s request expects them (its `tools`).
   * @param {Provider} provider
   * @returns {any[]}
   */
  toolDefinitions(provider) {
    return JSON.parse(nativeSync(() => this.#native.toolDefinitions(String(provider))));
  }

  /**
   * Runs one call as `turngate call` does: gate, sandbox, approval, apply. `input` is an object or JSON
   * text. Options: `approver`, `review`, `callId`, `turnId`, `signal`. Resolves with the outcome
   * (`{tool, status, output | error: {stage, kind, message}, changes, ...}`); an aborted call applies
   * nothing and resolves `cancelled`.
   * @param {string} tool
   * @param {string | Record<string, unknown>} input
   * @param {CallOptions} [options]
   * @returns {Promise<CallOutcome>}
   */
  async call(tool, input, options = {}) {
    const { approver, signal, ...rest } = options;
    const text = typeof input === 'string' ? input : JSON.stringify(input);
    const { cancel, done } = cancellation(signal);
    try {
      const answer = await native_(() =>
        this.#native.call(String(tool), text, nativeOptions(approver, rest), bridged(approver), cancel),
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
   * @param {Turn} turn
   * @param {TurnOptions} [options]
   * @returns {Promise<TurnReport>}
   */
  async processTurn(turn, options = {}) {
    if (!(turn instanceof Turn)) throw new UsageError('processTurn needs a Turn from decodeTurn');
    const { approver, signal, ...rest } = options;
    const { cancel, done } = cancellation(signal);
    try {
      const answer = await native_(() =>
        this.#native.processTurn(
          nativeTurnOf(turn),
          nativeOptions(approver, rest),
          bridged(approver),
          cancel,
        ),
      );
      return JSON.parse(answer);
    } finally {
      done();
    }
  }

  /**
   * Decodes `body` (see `decodeTurn`) and gates the turn: the raw response of `fetch` or an SDK's
   * `.asResponse()`, its `body`, chunks, or a whole JSON body. Options: those of `decodeTurn` and of
   * `processTurn`. A body whose reading failed is decoded as far as it came (cut: nothing runs, every
   * call `not_run`), and the report keeps the error as `read_error`.
   * @param {Provider} provider
   * @param {Body} body
   * @param {DecodeOptions & TurnOptions} [options]
   * @returns {Promise<TurnReport>}
   */
  async runTurn(provider, body, options = {}) {
    const { forcedToolChoice, maxOutputTokens, onText, ...rest } = options;
    const turn = await decodeTurn(provider, body, { forcedToolChoice, maxOutputTokens, onText });
    const report = await this.processTurn(turn, rest);
    if (turn.readError !== undefined) report.read_error = turn.readError;
    return report;
  }

  /**
   * The questions waiting in the root, oldest first: those asked with `approver: 'console'` (here or
   * in another process), or by `turngate run --approve-in console` and the other surfaces.
   * @returns {PendingApproval[]}
   */
  waitingApprovals() {
    return JSON.parse(nativeSync(() => this.#native.waitingApprovals()));
  }

  /**
   * Answers the question `digest` (`sha256:...`, from `waitingApprovals`): it applies only to exactly
   * that request, the first answer stands, and a question past its deadline is denied. Throws
   * `UsageError` when no such question waits.
   * @param {string} digest
   * @param {boolean} approve
   * @returns {ApprovalAnswer}
   */
  answerApproval(digest, approve) {
    return JSON.parse(nativeSync(() => this.#native.answerApproval(String(digest), approve === true)));
  }

  /**
   * The root's journal, oldest first: one entry per applied (or undone) call.
   * @returns {Promise<JournalEntry[]>}
   */
  async journal() {
    return JSON.parse(await native_(() => this.#native.journal()));
  }

  /**
   * Undoes applied calls: `{last: true}`, `{call: ID}`, `{turn: ID}` or `{seq: N}`. Resolves with the
   * calls undone, newest first; throws `UndoError` when a file changed since or nothing matches (then
   * nothing is restored).
   * @param {UndoTarget} target
   * @returns {Promise<JournalEntry[]>}
   */
  async undo(target) {
    return JSON.parse(await native_(() => this.#native.undo(JSON.stringify(target ?? {}))));
  }
}

/**
 * The Vercel AI SDK's tool-result messages for a report: one `{role: 'tool', content: [...]}` with a
 * `tool-result` part per call ID, to append after the assistant message of the SDK's own
 * `response.messages` (declare the tools without `execute`, so the SDK reports the calls and turngate
 * runs them). A call that ran ok answers its `output` as text; any other answers its reason as
 * `error-text`, never a made-up success. A turn that did not complete answers `[]`: nothing goes back,
 * the turn is regenerated.
 * @param {TurnReport} report
 * @returns {AiSdkToolMessage[]}
 */
function aiSdkToolMessages(report) {
  if (report.turn.status !== 'completed') return [];
  const content = report.calls
    .filter((call) => call.id !== null)
    .map((call) => ({
      type: /** @type {const} */ ('tool-result'),
      toolCallId: /** @type {string} */ (call.id),
      toolName: call.name,
      output:
        call.status === 'ok'
          ? { type: /** @type {const} */ ('text'), value: call.output ?? '' }
          : { type: /** @type {const} */ ('error-text'), value: call.reason ?? call.status },
    }));
  return content.length === 0 ? [] : [{ role: 'tool', content }];
}

exports.aiSdkToolMessages = aiSdkToolMessages;
exports.Toolbox = Toolbox;
exports.Turn = Turn;
exports.decodeTurn = decodeTurn;
exports.TurngateError = TurngateError;
exports.UsageError = UsageError;
exports.PolicyError = PolicyError;
exports.ToolLoadError = ToolLoadError;
exports.StreamParseError = StreamParseError;
exports.UndoError = UndoError;
exports.InternalError = InternalError;
/** For the package's own tests: panics inside the addon's boundaries, and the addon itself. */
exports._testing = {
  /** @param {boolean} inTask */
  panic: (inTask) => native_(() => native._panicForTest(Boolean(inTask))),
  panicOnPool: () => native_(() => native._panicOnPoolForTest()),
  native,
};

// The package's types.
/** @typedef {'anthropic' | 'openai-chat' | 'openai-responses' | 'gemini'} Provider */

/**
 * How a turn ended; nothing runs unless `completed`.
 * @typedef {'completed' | 'truncated' | 'refused' | 'filtered' | 'errored' | 'malformed' | 'incomplete'} TurnStatus
 */

/**
 * What `runTurn` and `decodeTurn` read: a `Response`, its body, chunks, or the whole body.
 * @typedef {Uint8Array | ArrayBuffer | string | Response | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>} Body
 */

/**
 * @typedef {object} ToolboxOptions
 * @property {string} root The directory every call is confined to.
 * @property {string} [policyFile] A policy file (TOML).
 * @property {string | Record<string, unknown>} [policy] A policy as TOML text or an object of the same
 *   tables. Without one, every tool may act anywhere in the root.
 * @property {string} [toolsDir] Also load every `*.wasm` tool component in this directory.
 * @property {boolean} [locked] Load only the components `toolsDir/turngate.lock` pins.
 * @property {boolean} [bundled] Load the bundled tools (default true).
 * @property {number} [timeoutMs] Each call's wall-time limit.
 * @property {number} [memoryMib] Each call's memory limit.
 * @property {number} [maxOutput] Each call's output limit, in bytes.
 * @property {string} [cacheDir] Where precompiled components are cached.
 * @property {boolean} [cache] Cache precompiled components on disk (default true).
 */

/**
 * A path a call would touch, and how.
 * @typedef {object} PathAccess
 * @property {string} path
 * @property {string} access
 */

/**
 * One change a call would make (or made).
 * @typedef {object} Change
 * @property {string} path
 * @property {string} kind
 * @property {unknown} before
 * @property {unknown} after
 */

/**
 * The network request a running call waits to send (`approval = "ask"` in its network table).
 * @typedef {object} NetworkRequest
 * @property {string} method
 * @property {string} url
 * @property {number} body_bytes
 * @property {string} body_sha256
 * @property {string | null} body_start The body's start when it is text.
 */

/**
 * Where the tool that asks came from.
 * @typedef {object} ToolProvenance
 * @property {string} origin `bundled`, the component's file, or an embedding program's label.
 * @property {string} sha256 SHA-256 of the component's bytes, hex.
 * @property {string | null} source Where a tool installed from a registry came from.
 * @property {string | null} signer Who signed it, as its install verified.
 */

/**
 * What an approver is asked.
 * @typedef {object} ApprovalRequest
 * @property {string | null} id
 * @property {string} tool
 * @property {ToolProvenance | null} provenance Where the tool came from.
 * @property {"tool_asks" | "review" | "network_asks"} asked_because Which rule of the policy asks.
 * @property {string} input The input exactly as the model sent it.
 * @property {PathAccess[]} paths
 * @property {Change[] | null} changes What the call would change; `null` when asked before a call that
 *   only reads.
 * @property {string} diff The changes as a unified diff.
 * @property {NetworkRequest | null} network The network request a running call waits to send.
 */

/**
 * Only `true` lets the call apply; anything else, or a throw, denies it.
 * @typedef {(request: ApprovalRequest) => boolean | Promise<boolean>} Approver
 */

/**
 * A question recorded in the root, waiting for its answer.
 * @typedef {object} PendingApproval
 * @property {string} digest `sha256:...` of exactly what is shown.
 * @property {number} asked_ms
 * @property {number} deadline_ms Denied after it.
 * @property {string | null} turn
 * @property {number} [position] The call's place in its turn (0 for the first), when known.
 * @property {ApprovalRequest} request
 */

/**
 * An answer recorded in the root.
 * @typedef {object} ApprovalAnswer
 * @property {string} digest
 * @property {boolean} approved
 * @property {'user' | 'deadline'} by
 * @property {number} answered_ms
 */

/**
 * @typedef {object} CallOptions
 * @property {Approver | 'console'} [approver] A function, or `'console'`: the question is recorded in
 *   the root and answered from `turngate console` (or `answerApproval`), surviving this process.
 * @property {boolean} [review] Ask the approver with the call's change set and diff before applying.
 * @property {string} [callId] The call's ID in the journal.
 * @property {string} [turnId] The turn's ID in the journal.
 * @property {AbortSignal} [signal] Aborting stops the call; nothing is applied.
 */

/**
 * @typedef {object} DecodeOptions
 * @property {boolean} [forcedToolChoice] The request forced a named tool (OpenAI Chat).
 * @property {number} [maxOutputTokens] The request's output limit: a turn that reached it is truncated.
 * @property {(text: string) => void} [onText] Sees the visible text as it arrives.
 */

/**
 * @typedef {object} TurnOptions
 * @property {Approver | 'console'} [approver] A function, or `'console'` (see `CallOptions`).
 * @property {boolean} [review] Ask the approver with each call's change set and diff before applying.
 * @property {string} [turnId] The turn's ID in the journal.
 * @property {boolean} [audit] Add the audit records to the report.
 * @property {AbortSignal} [signal] Aborting stops the running call (nothing applied) and the calls after it.
 */

/**
 * Why a call produced no output.
 * @typedef {object} CallError
 * @property {'gate' | 'approval' | 'tool' | 'sandbox' | 'apply'} stage
 * @property {string} kind `cancelled` for a call cancelled at any stage.
 * @property {string} message
 */

/**
 * A call's outcome, as `turngate call` prints it.
 * @typedef {object} CallOutcomeFields
 * @property {string} tool
 * @property {'ok' | 'error'} status
 * @property {string} [output]
 * @property {CallError} [error]
 * @property {Change[]} changes
 * @property {string} stdout
 * @property {string} stderr
 * @property {number} duration_ms
 */

/**
 * A call's outcome, as `turngate call` prints it (with the network requests it made, when any).
 * @typedef {CallOutcomeFields & Record<string, unknown>} CallOutcome
 */

/**
 * The verdict on one call of a turn.
 * @typedef {object} CallReport
 * @property {string} kind
 * @property {string | null} id
 * @property {string} name
 * @property {'ok' | 'error' | 'not_run'} status
 * @property {string | null} reason
 * @property {string | null} step The gate step or failure kind behind an error (`cancelled` for a
 *   cancelled call); `null` when ok.
 * @property {string | null} output The tool's output when ok (what the history's result carries).
 * @property {{ path: string, kind: string }[]} changes
 */

/**
 * A turn's report: what `turngate run` prints, with each call's `output` and `step`.
 * @typedef {object} TurnReport
 * @property {{ id: string, status: TurnStatus, stop_reason: string | null, detail: string }} turn
 * @property {CallReport[]} calls
 * @property {any[]} history Provider-native messages (or items, or contents) to append to the next
 *   request; empty for a turn that did not complete (nothing to send back: regenerate it).
 * @property {unknown[]} [audit]
 * @property {unknown} [read_error] The error reading the body ended with (`runTurn` only; the turn was
 *   decoded as far as it came, and a cut turn runs nothing).
 */

/**
 * One entry of the root's journal.
 * @typedef {object} JournalEntryFields
 * @property {number} seq
 * @property {string | null} call_id
 * @property {string | null} turn
 * @property {string} tool
 * @property {string} state
 * @property {unknown[]} changes
 */

/**
 * One entry of the root's journal: an applied (or undone) call.
 * @typedef {JournalEntryFields & Record<string, unknown>} JournalEntry
 */

/** @typedef {{ last: true } | { call: string } | { turn: string } | { seq: number }} UndoTarget */

/**
 * One call's answer as the Vercel AI SDK's `ToolResultPart` (package `ai`).
 * @typedef {object} AiSdkToolResult
 * @property {'tool-result'} type
 * @property {string} toolCallId
 * @property {string} toolName
 * @property {{ type: 'text', value: string } | { type: 'error-text', value: string }} output
 */

/**
 * The Vercel AI SDK's `ToolModelMessage` for a turn's calls.
 * @typedef {{ role: 'tool', content: AiSdkToolResult[] }} AiSdkToolMessage
 */

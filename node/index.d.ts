export namespace _testing {
    export function panic(inTask: boolean): Promise<undefined>;
    export function panicOnPool(): Promise<void>;
    export { native };
}
export type Provider = "anthropic" | "openai-chat" | "openai-responses" | "gemini";
/**
 * How a turn ended; nothing runs unless `completed`.
 */
export type TurnStatus = "completed" | "truncated" | "refused" | "filtered" | "errored" | "malformed" | "incomplete";
/**
 * What `runTurn` and `decodeTurn` read: a `Response`, its body, chunks, or the whole body.
 */
export type Body = Uint8Array | ArrayBuffer | string | Response | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>;
export type ToolboxOptions = {
    /**
     * The directory every call is confined to.
     */
    root: string;
    /**
     * A policy file (TOML).
     */
    policyFile?: string | undefined;
    /**
     * A policy as TOML text or an object of the same
     * tables. Without one, every tool may act anywhere in the root.
     */
    policy?: string | Record<string, unknown> | undefined;
    /**
     * Also load every `*.wasm` tool component in this directory.
     */
    toolsDir?: string | undefined;
    /**
     * Load only the components `toolsDir/turngate.lock` pins.
     */
    locked?: boolean | undefined;
    /**
     * Load the bundled tools (default true).
     */
    bundled?: boolean | undefined;
    /**
     * Each call's wall-time limit.
     */
    timeoutMs?: number | undefined;
    /**
     * Each call's memory limit.
     */
    memoryMib?: number | undefined;
    /**
     * Each call's output limit, in bytes.
     */
    maxOutput?: number | undefined;
    /**
     * Where precompiled components are cached.
     */
    cacheDir?: string | undefined;
    /**
     * Cache precompiled components on disk (default true).
     */
    cache?: boolean | undefined;
};
/**
 * A path a call would touch, and how.
 */
export type PathAccess = {
    path: string;
    access: string;
};
/**
 * One change a call would make (or made).
 */
export type Change = {
    path: string;
    kind: string;
    before: unknown;
    after: unknown;
};
/**
 * The network request a running call waits to send (`approval = "ask"` in its network table).
 */
export type NetworkRequest = {
    method: string;
    url: string;
    body_bytes: number;
    body_sha256: string;
    /**
     * The body's start when it is text.
     */
    body_start: string | null;
};
/**
 * Where the tool that asks came from.
 */
export type ToolProvenance = {
    /**
     * `bundled`, the component's file, or an embedding program's label.
     */
    origin: string;
    /**
     * SHA-256 of the component's bytes, hex.
     */
    sha256: string;
    /**
     * Where a tool installed from a registry came from.
     */
    source: string | null;
    /**
     * Who signed it, as its install verified.
     */
    signer: string | null;
};
/**
 * What an approver is asked.
 */
export type ApprovalRequest = {
    id: string | null;
    tool: string;
    /**
     * Where the tool came from.
     */
    provenance: ToolProvenance | null;
    /**
     * Which rule of the policy asks.
     */
    asked_because: "tool_asks" | "review" | "network_asks";
    /**
     * The input exactly as the model sent it.
     */
    input: string;
    paths: PathAccess[];
    /**
     * What the call would change; `null` when asked before a call that
     * only reads.
     */
    changes: Change[] | null;
    /**
     * The changes as a unified diff.
     */
    diff: string;
    /**
     * The network request a running call waits to send.
     */
    network: NetworkRequest | null;
};
/**
 * Only `true` lets the call apply; anything else, or a throw, denies it.
 */
export type Approver = (request: ApprovalRequest) => boolean | Promise<boolean>;
/**
 * A question recorded in the root, waiting for its answer.
 */
export type PendingApproval = {
    /**
     * `sha256:...` of exactly what is shown.
     */
    digest: string;
    asked_ms: number;
    /**
     * Denied after it.
     */
    deadline_ms: number;
    turn: string | null;
    /**
     * The call's place in its turn (0 for the first), when known.
     */
    position?: number | undefined;
    request: ApprovalRequest;
};
/**
 * An answer recorded in the root.
 */
export type ApprovalAnswer = {
    digest: string;
    approved: boolean;
    by: "user" | "deadline";
    answered_ms: number;
};
export type CallOptions = {
    /**
     * A function, or `'console'`: the question is recorded in
     * the root and answered from `turngate console` (or `answerApproval`), surviving this process.
     */
    approver?: Approver | "console" | undefined;
    /**
     * Ask the approver with the call's change set and diff before applying.
     */
    review?: boolean | undefined;
    /**
     * The call's ID in the journal.
     */
    callId?: string | undefined;
    /**
     * The turn's ID in the journal.
     */
    turnId?: string | undefined;
    /**
     * Aborting stops the call; nothing is applied.
     */
    signal?: AbortSignal | undefined;
};
export type DecodeOptions = {
    /**
     * The request forced a named tool (OpenAI Chat).
     */
    forcedToolChoice?: boolean | undefined;
    /**
     * The request's output limit: a turn that reached it is truncated.
     */
    maxOutputTokens?: number | undefined;
    /**
     * Sees the visible text as it arrives.
     */
    onText?: ((text: string) => void) | undefined;
};
export type TurnOptions = {
    /**
     * A function, or `'console'` (see `CallOptions`).
     */
    approver?: Approver | "console" | undefined;
    /**
     * Ask the approver with each call's change set and diff before applying.
     */
    review?: boolean | undefined;
    /**
     * The turn's ID in the journal.
     */
    turnId?: string | undefined;
    /**
     * Add the audit records to the report.
     */
    audit?: boolean | undefined;
    /**
     * Aborting stops the running call (nothing applied) and the calls after it.
     */
    signal?: AbortSignal | undefined;
};
/**
 * Why a call produced no output.
 */
export type CallError = {
    stage: "gate" | "approval" | "tool" | "sandbox" | "apply";
    /**
     * `cancelled` for a call cancelled at any stage.
     */
    kind: string;
    message: string;
};
/**
 * A call's outcome, as `turngate call` prints it.
 */
export type CallOutcomeFields = {
    tool: string;
    status: "ok" | "error";
    output?: string | undefined;
    error?: CallError | undefined;
    changes: Change[];
    stdout: string;
    stderr: string;
    duration_ms: number;
};
/**
 * A call's outcome, as `turngate call` prints it (with the network requests it made, when any).
 */
export type CallOutcome = CallOutcomeFields & Record<string, unknown>;
/**
 * The verdict on one call of a turn.
 */
export type CallReport = {
    kind: string;
    id: string | null;
    name: string;
    status: "ok" | "error" | "not_run";
    reason: string | null;
    /**
     * The gate step or failure kind behind an error (`cancelled` for a
     * cancelled call); `null` when ok.
     */
    step: string | null;
    /**
     * The tool's output when ok (what the history's result carries).
     */
    output: string | null;
    changes: {
        path: string;
        kind: string;
    }[];
};
/**
 * A turn's report: what `turngate run` prints, with each call's `output` and `step`.
 */
export type TurnReport = {
    turn: {
        id: string;
        status: TurnStatus;
        stop_reason: string | null;
        detail: string;
    };
    calls: CallReport[];
    /**
     * Provider-native messages (or items, or contents) to append to the next
     * request; empty for a turn that did not complete (nothing to send back: regenerate it).
     */
    history: any[];
    audit?: unknown[] | undefined;
    /**
     * The error reading the body ended with (`runTurn` only; the turn was
     * decoded as far as it came, and a cut turn runs nothing).
     */
    read_error?: unknown;
};
/**
 * One entry of the root's journal.
 */
export type JournalEntryFields = {
    seq: number;
    call_id: string | null;
    turn: string | null;
    tool: string;
    state: string;
    changes: unknown[];
};
/**
 * One entry of the root's journal: an applied (or undone) call.
 */
export type JournalEntry = JournalEntryFields & Record<string, unknown>;
export type UndoTarget = {
    last: true;
} | {
    call: string;
} | {
    turn: string;
} | {
    seq: number;
};
/**
 * One call's answer as the Vercel AI SDK's `ToolResultPart` (package `ai`).
 */
export type AiSdkToolResult = {
    type: "tool-result";
    toolCallId: string;
    toolName: string;
    output: {
        type: "text";
        value: string;
    } | {
        type: "error-text";
        value: string;
    };
};
/**
 * The Vercel AI SDK's `ToolModelMessage` for a turn's calls.
 */
export type AiSdkToolMessage = {
    role: "tool";
    content: AiSdkToolResult[];
};
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
export function aiSdkToolMessages(report: TurnReport): AiSdkToolMessage[];
/** Tools, a root, a policy and the root's journal. Make one with `await Toolbox.open({...})`. */
export class Toolbox {
    /**
     * Loads the tools and opens the root. Options: `root` (required), `policyFile` (a TOML file) or
     * `policy` (TOML text or an object of the same tables), `toolsDir`, `locked`, `bundled` (default
     * true), `timeoutMs`, `memoryMib`, `maxOutput`, `cacheDir`, `cache` (default true).
     * @param {ToolboxOptions} options
     * @returns {Promise<Toolbox>}
     */
    static open(options: ToolboxOptions): Promise<Toolbox>;
    /**
     * @private
     * @param {import('./native').NativeToolbox} nativeToolbox
     */
    private constructor();
    /**
     * The root every call is confined to.
     * @returns {string}
     */
    get root(): string;
    /**
     * The loaded tools' names.
     * @returns {string[]}
     */
    get toolNames(): string[];
    /**
     * The tools as `provider`'s request expects them (its `tools`).
     * @param {Provider} provider
     * @returns {any[]}
     */
    toolDefinitions(provider: Provider): any[];
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
    call(tool: string, input: string | Record<string, unknown>, options?: CallOptions): Promise<CallOutcome>;
    /**
     * Gates a turn as `turngate run` does. `turn` is a `Turn` from `decodeTurn`. Options: `approver`,
     * `review`, `turnId`, `audit`, `signal`. Resolves with the report: `{turn: {id, status, stop_reason,
     * detail}, calls: [...], history: [...]}`, the history in the provider's own shape, ready to append to
     * the next request. A malformed turn throws `StreamParseError` (nothing ran; `.report`).
     * @param {Turn} turn
     * @param {TurnOptions} [options]
     * @returns {Promise<TurnReport>}
     */
    processTurn(turn: Turn, options?: TurnOptions): Promise<TurnReport>;
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
    runTurn(provider: Provider, body: Body, options?: DecodeOptions & TurnOptions): Promise<TurnReport>;
    /**
     * The questions waiting in the root, oldest first: those asked with `approver: 'console'` (here or
     * in another process), or by `turngate run --approve-in console` and the other surfaces.
     * @returns {PendingApproval[]}
     */
    waitingApprovals(): PendingApproval[];
    /**
     * Answers the question `digest` (`sha256:...`, from `waitingApprovals`): it applies only to exactly
     * that request, the first answer stands, and a question past its deadline is denied. Throws
     * `UsageError` when no such question waits.
     * @param {string} digest
     * @param {boolean} approve
     * @returns {ApprovalAnswer}
     */
    answerApproval(digest: string, approve: boolean): ApprovalAnswer;
    /**
     * The root's journal, oldest first: one entry per applied (or undone) call.
     * @returns {Promise<JournalEntry[]>}
     */
    journal(): Promise<JournalEntry[]>;
    /**
     * Undoes applied calls: `{last: true}`, `{call: ID}`, `{turn: ID}` or `{seq: N}`. Resolves with the
     * calls undone, newest first; throws `UndoError` when a file changed since or nothing matches (then
     * nothing is restored).
     * @param {UndoTarget} target
     * @returns {Promise<JournalEntry[]>}
     */
    undo(target: UndoTarget): Promise<JournalEntry[]>;
    #private;
}
/** A decoded turn: how it ended (`status`, `stopReason`, `detail`), its `text`, and the whole turn. */
export class Turn {
    /**
     * @private
     * @param {import('./native').DecodedTurn} decoded
     * @param {unknown} readError
     */
    private constructor();
    /** @readonly @type {Provider} */
    readonly provider: Provider;
    /** @readonly @type {TurnStatus} */
    readonly status: TurnStatus;
    /** @readonly @type {string | null} */
    readonly stopReason: string | null;
    /** @readonly @type {string} */
    readonly detail: string;
    /** @readonly @type {string} */
    readonly text: string;
    /**
     * The error reading the body ended with (then the turn is cut), or `undefined`.
     * @readonly
     */
    readonly readError: unknown;
    /**
     * The whole decoded turn as the library serializes it.
     * @returns {unknown}
     */
    toJSON(): unknown;
    #private;
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
export function decodeTurn(provider: Provider, body: Body, options?: DecodeOptions): Promise<Turn>;
/** Every error turngate throws. */
export class TurngateError extends Error {
    /**
     * @param {string} [message]
     * @param {ErrorOptions} [options]
     */
    constructor(message?: string, options?: ErrorOptions);
}
/** A bad argument, provider name, root or option. */
export class UsageError extends TurngateError {
}
/** The policy (a file, TOML text or an object) is not valid; nothing was loaded or run. */
export class PolicyError extends UsageError {
}
/** A tool component could not be loaded (not a tool, a bad descriptor, not pinned by the lock). */
export class ToolLoadError extends UsageError {
}
/** The turn broke its protocol (status `malformed`): nothing ran. The report is `.report`. */
export class StreamParseError extends TurngateError {
    /**
     * @param {string} message
     * @param {TurnReport} report
     */
    constructor(message: string, report: TurnReport);
    /** @readonly */
    readonly report: TurnReport;
}
/** An undo was refused (a file changed since, or nothing to undo); nothing was restored. */
export class UndoError extends TurngateError {
}
/** A bug in turngate (a Rust panic), caught at the boundary. */
export class InternalError extends TurngateError {
}
declare const native: typeof import("./native");
export {};

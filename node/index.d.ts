// Type declarations of the package `turngate` (index.js).

export type Provider = 'anthropic' | 'openai-chat' | 'openai-responses' | 'gemini';

export type TurnStatus =
  | 'completed'
  | 'truncated'
  | 'refused'
  | 'filtered'
  | 'errored'
  | 'malformed'
  | 'incomplete';

/** What `runTurn` and `decodeTurn` read: a `Response`, its body, chunks, or the whole body. */
export type Body =
  | Uint8Array
  | ArrayBuffer
  | string
  | Response
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array | string>
  | Iterable<Uint8Array | string>;

export interface ToolboxOptions {
  /** The directory every call is confined to. */
  root: string;
  /** A policy file (TOML). */
  policyFile?: string;
  /** A policy as TOML text or an object of the same tables. Without one, every tool may act anywhere in the root. */
  policy?: string | Record<string, unknown>;
  /** Also load every `*.wasm` tool component in this directory. */
  toolsDir?: string;
  /** Load only the components `toolsDir/turngate.lock` pins. */
  locked?: boolean;
  /** Load the bundled tools (default true). */
  bundled?: boolean;
  timeoutMs?: number;
  memoryMib?: number;
  maxOutput?: number;
  cacheDir?: string;
  /** Cache precompiled components on disk (default true). */
  cache?: boolean;
}

export interface ApprovalRequest {
  id: string | null;
  tool: string;
  /** The input exactly as the model sent it. */
  input: string;
  paths: { path: string; access: string }[];
  /** What the call would change; `null` when asked before a call that only reads. */
  changes: { path: string; kind: string; before: unknown; after: unknown }[] | null;
  /** The changes as a unified diff. */
  diff: string;
  /** The network request a running call waits to send (`approval = "ask"` in its network table). */
  network: {
    method: string;
    url: string;
    body_bytes: number;
    body_sha256: string;
    /** The body's start when it is text. */
    body_start: string | null;
  } | null;
}

/** Only `true` lets the call apply; anything else, or a throw, denies it. */
export type Approver = (request: ApprovalRequest) => boolean | Promise<boolean>;

export interface CallOptions {
  approver?: Approver;
  review?: boolean;
  callId?: string;
  turnId?: string;
  signal?: AbortSignal;
}

export interface DecodeOptions {
  forcedToolChoice?: boolean;
  maxOutputTokens?: number;
  onText?: (text: string) => void;
}

export interface TurnOptions {
  approver?: Approver;
  review?: boolean;
  turnId?: string;
  audit?: boolean;
  signal?: AbortSignal;
}

/** A call's outcome, as `turngate call` prints it. */
export interface CallOutcome {
  tool: string;
  status: 'ok' | 'error';
  output?: string;
  error?: { stage: string; kind: string; message: string };
  changes: unknown[];
  [field: string]: unknown;
}

export interface CallReport {
  kind: string;
  id: string | null;
  name: string;
  status: string;
  reason: string | null;
  changes: { path: string; kind: string }[];
}

/** A turn's report, as `turngate run` prints it. */
export interface TurnReport {
  turn: { id: string; status: TurnStatus; stop_reason: string | null; detail: string };
  calls: CallReport[];
  /** Provider-native messages (or items, or contents) to append to the next request. */
  history: any[];
  audit?: unknown[];
}

export interface JournalEntry {
  seq: number;
  call_id: string | null;
  turn: string | null;
  tool: string;
  state: string;
  changes: unknown[];
  [field: string]: unknown;
}

export type UndoTarget = { last: true } | { call: string } | { turn: string } | { seq: number };

export class Turn {
  readonly provider: Provider;
  readonly status: TurnStatus;
  readonly stopReason: string | null;
  readonly detail: string;
  readonly text: string;
  /** The error reading the body ended with (then the turn is cut), or `undefined`. */
  readonly readError: unknown;
  toJSON(): unknown;
}

export function decodeTurn(provider: Provider, body: Body, options?: DecodeOptions): Promise<Turn>;

export class Toolbox {
  static open(options: ToolboxOptions): Promise<Toolbox>;
  readonly root: string;
  readonly toolNames: string[];
  toolDefinitions(provider: Provider): any[];
  call(tool: string, input: string | Record<string, unknown>, options?: CallOptions): Promise<CallOutcome>;
  processTurn(turn: Turn, options?: TurnOptions): Promise<TurnReport>;
  runTurn(provider: Provider, body: Body, options?: DecodeOptions & TurnOptions): Promise<TurnReport>;
  journal(): Promise<JournalEntry[]>;
  undo(target: UndoTarget): Promise<JournalEntry[]>;
}

export class TurngateError extends Error {}
export class UsageError extends TurngateError {}
export class PolicyError extends UsageError {}
export class ToolLoadError extends UsageError {}
export class StreamParseError extends TurngateError {
  readonly report: TurnReport;
}
export class UndoError extends TurngateError {}
export class InternalError extends TurngateError {}

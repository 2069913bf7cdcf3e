// The whole public surface of `turngate`, typed: compiled (never run) by `scripts/types.js` with
// `tsc --noEmit --strict` against the generated `index.d.ts`. Each `@ts-expect-error` is a misuse the
// declarations must refuse; the compile fails if one is accepted.

import {
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
  aiSdkToolMessages,
} from 'turngate';
import type {
  AiSdkToolMessage,
  ApprovalRequest,
  Approver,
  Body,
  CallOutcome,
  JournalEntry,
  Provider,
  ToolboxOptions,
  TurnReport,
  TurnStatus,
  UndoTarget,
} from 'turngate';

export async function everything(response: Response): Promise<void> {
  const options: ToolboxOptions = {
    root: 'workspace',
    policy: { tools: { write_file: { paths: ['**'], approval: 'ask' } } },
    toolsDir: 'tools',
    locked: true,
    bundled: false,
    timeoutMs: 1000,
    memoryMib: 64,
    maxOutput: 1 << 20,
    cacheDir: '.cache',
    cache: false,
  };
  const toolbox: Toolbox = await Toolbox.open(options);
  await Toolbox.open({ root: 'workspace', policyFile: 'policy.toml' });
  await Toolbox.open({ root: 'workspace', policy: '[tools.write_file]\npaths = ["**"]\n' });
  // @ts-expect-error: root is required
  await Toolbox.open({ policyFile: 'policy.toml' });
  // @ts-expect-error: no such option
  await Toolbox.open({ root: 'workspace', timeoutMz: 3 });
  // @ts-expect-error: a toolbox is opened, not constructed
  new Toolbox();

  const root: string = toolbox.root;
  const names: string[] = toolbox.toolNames;
  const tools: unknown[] = toolbox.toolDefinitions('anthropic');
  // @ts-expect-error: not a provider
  toolbox.toolDefinitions('anthropics');

  const approver: Approver = async (request: ApprovalRequest) => {
    const tool: string = request.tool;
    const diff: string = request.diff;
    const input: string = request.input;
    const id: string | null = request.id;
    for (const { path, access } of request.paths) console.log(path, access);
    for (const change of request.changes ?? []) console.log(change.path, change.kind, change.before, change.after);
    if (request.network !== null) {
      const { method, url, body_bytes, body_sha256, body_start } = request.network;
      console.log(method, url, body_bytes.toFixed(), body_sha256, body_start ?? '');
    }
    return tool === 'write_file' && diff.length > 0 && input.length > 0 && id !== '';
  };
  const denyAll: Approver = () => false;
  // @ts-expect-error: an approver answers a boolean
  const wrong: Approver = () => 'yes';

  const controller = new AbortController();
  const outcome: CallOutcome = await toolbox.call(
    'write_file',
    { path: 'notes.txt', content: 'x' },
    { approver, review: true, callId: 'c1', turnId: 't1', signal: controller.signal },
  );
  await toolbox.call('read_file', '{"path":"notes.txt"}');
  const status: 'ok' | 'error' = outcome.status;
  if (outcome.error) console.log(outcome.error.stage, outcome.error.kind, outcome.error.message);
  console.log(outcome.tool, outcome.output ?? '', outcome.changes.length, outcome.stdout, outcome.stderr, outcome.duration_ms);
  // @ts-expect-error: no such option
  await toolbox.call('write_file', {}, { approve: approver });

  const bodies: Body[] = [
    new Uint8Array(),
    new ArrayBuffer(0),
    'data: {}\n\n',
    response,
    new ReadableStream<Uint8Array>(),
    (async function* () {
      yield new Uint8Array();
    })(),
    ['data: ', new Uint8Array()],
  ];
  const provider: Provider = 'openai-responses';
  const turn: Turn = await decodeTurn(provider, bodies[0], {
    forcedToolChoice: false,
    maxOutputTokens: 4096,
    onText: (text: string) => console.log(text),
  });
  const turnStatus: TurnStatus = turn.status;
  const stopReason: string | null = turn.stopReason;
  console.log(turn.provider, turn.detail, turn.text, turn.readError, JSON.stringify(turn));
  // @ts-expect-error: a turn's fields are read-only
  turn.status = 'completed';
  // @ts-expect-error: not a provider
  await decodeTurn('anthropics', bodies[0]);
  // @ts-expect-error: not a body
  await decodeTurn('gemini', 42);

  const report: TurnReport = await toolbox.processTurn(turn, {
    approver: denyAll,
    review: true,
    turnId: 't2',
    audit: true,
    signal: AbortSignal.timeout(60_000),
  });
  const run: TurnReport = await toolbox.runTurn('anthropic', response, {
    maxOutputTokens: 4096,
    onText: (text) => console.log(text),
    approver,
    signal: controller.signal,
  });
  const reportStatus: TurnStatus = report.turn.status;
  console.log(report.turn.id, report.turn.stop_reason ?? '', report.turn.detail, report.audit?.length);
  for (const call of run.calls) {
    const output: string | null = call.output;
    const step: string | null = call.step;
    console.log(output ?? step, run.read_error);
  }
  const toolMessages: AiSdkToolMessage[] = aiSdkToolMessages(run);
  const part = toolMessages[0]?.content[0];
  if (part !== undefined) console.log(part.toolCallId, part.output.type === 'text' ? part.output.value : '');
  // @ts-expect-error: a report, not a turn
  aiSdkToolMessages(turn);
  for (const call of run.calls) console.log(call.kind, call.id ?? '', call.name, call.status, call.reason ?? '', call.changes.map((c) => c.path));
  const history: unknown[] = run.history;

  await toolbox.call('write_file', {}, { approver: 'console' });
  // @ts-expect-error: 'console' or a function
  await toolbox.call('write_file', {}, { approver: 'terminal' });
  for (const question of toolbox.waitingApprovals()) {
    const answer = toolbox.answerApproval(question.digest, question.request.tool === 'write_file');
    console.log(answer.approved, answer.by, question.deadline_ms.toFixed());
  }
  const journal: JournalEntry[] = await toolbox.journal();
  for (const entry of journal) console.log(entry.seq.toFixed(), entry.call_id, entry.turn, entry.tool, entry.state, entry.changes);
  const targets: UndoTarget[] = [{ last: true }, { call: 'c1' }, { turn: 't1' }, { seq: journal[0]?.seq ?? 0 }];
  const undone: JournalEntry[] = await toolbox.undo(targets[0]);
  // @ts-expect-error: not an undo target
  await toolbox.undo({ last: false });

  try {
    await toolbox.runTurn('anthropic', response);
  } catch (error) {
    if (error instanceof StreamParseError) {
      const malformed: TurnReport = error.report;
      console.log(malformed.turn.status, error.message);
    } else if (error instanceof PolicyError || error instanceof ToolLoadError) {
      const usage: UsageError = error;
      console.log(usage.name);
    } else if (error instanceof UndoError || error instanceof InternalError) {
      const any: TurngateError = error;
      const base: Error = any;
      console.log(base.message);
    }
  }

  console.log(root, names, tools, status, turnStatus, stopReason, reportStatus, history, undone, wrong);
}

"""turngate for Python: act on a model's tool calls only when it is safe to.

The gate, the sandbox, approval and the journal are the Rust library's (``turngate._turngate``); this
package adds what is Python's own: reading a response body from bytes, an iterator or an async iterator
of chunks, asyncio variants that cancel the call when the awaiting task is cancelled, and async
approvers.

    import turngate

    toolbox = turngate.Toolbox("workspace", policy={"default": "read-only"})
    report = toolbox.run_turn("anthropic", response.iter_bytes())
    messages += report["history"]
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import os
import threading
from collections.abc import AsyncIterable, Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Union, cast, overload


def _unloadable(error: ImportError) -> ImportError:
    """The extension module did not load: say on what, and what is prebuilt, not only the linker's words."""
    import platform
    import sys

    found = f"{sys.platform} {platform.machine()}"
    if sys.platform == "linux":  # macOS has one C library; Linux's decides which wheel fits
        libc, libc_version = platform.libc_ver()
        found += f" ({libc or 'an unknown libc'} {libc_version})"
    found += f", CPython {platform.python_version()}"
    return ImportError(
        f"turngate's extension module does not load on {found}: {error}. The prebuilt wheels are for "
        "CPython 3.10 or later on Linux x86_64 and aarch64 with glibc 2.28 or later, and on macOS 11 or "
        "later on Apple silicon (arm64) and 10.12 or later on Intel (x86_64); elsewhere build it from a "
        "clone on a machine with Rust (pip install ./python)."
    )


try:
    from ._turngate import (
        Cancel,
        InternalError,
        PolicyError,
        StreamParseError,
        ToolLoadError,
        Turn,
        TurnDecoder,
        TurngateError,
        UndoError,
        UsageError,
    )
    from ._turngate import Toolbox as _Toolbox
except ImportError as _error:
    raise _unloadable(_error) from _error

__all__ = [
    "ApprovalRequest",
    "Approver",
    "CallOutcome",
    "CallReport",
    "Cancel",
    "GeminiTool",
    "InternalError",
    "PolicyError",
    "Provider",
    "StreamParseError",
    "ToolLoadError",
    "Toolbox",
    "Turn",
    "TurnDecoder",
    "TurnReport",
    "TurngateError",
    "UndoError",
    "UsageError",
    "decode_turn",
    "adecode_turn",
]

if TYPE_CHECKING:
    # The SDKs' own parameter types, so that `tools=toolbox.tool_definitions(...)` type-checks in
    # `messages.create`, `chat.completions.create` and `responses.create`; without an SDK installed,
    # its tools are `Any` to a type checker.
    from anthropic.types import ToolParam as AnthropicTool  # type: ignore[import-not-found,unused-ignore]
    from openai.types.chat import (  # type: ignore[import-not-found,unused-ignore]
        ChatCompletionFunctionToolParam as OpenAIChatTool,
    )
    from openai.types.responses import (  # type: ignore[import-not-found,unused-ignore]
        FunctionToolParam as OpenAIResponsesTool,
    )

Provider = Literal["anthropic", "openai-chat", "openai-responses", "gemini"]
Chunk = Union[bytes, bytearray, memoryview, str]
Body = Union[Chunk, Iterable[Chunk]]
AsyncBody = Union[Body, AsyncIterable[Chunk]]


class GeminiFunctionDeclaration(TypedDict):
    name: str
    description: str
    parametersJsonSchema: dict[str, Any]


class GeminiTool(TypedDict):
    """One entry of Gemini's ``tools`` (``functionDeclarations``, in the REST API's own spelling)."""

    functionDeclarations: list[GeminiFunctionDeclaration]


class TurnJson(TypedDict):
    id: str
    status: Literal["completed", "truncated", "refused", "filtered", "errored", "malformed", "incomplete"]
    stop_reason: str | None
    detail: str


class CallReport(TypedDict):
    """The verdict on one call of a turn (docs/report.md)."""

    kind: str
    id: str | None
    name: str
    status: Literal["ok", "error", "not_run"]
    reason: str | None
    step: str | None
    output: str | None
    changes: list[dict[str, str]]


class _TurnReportFields(TypedDict):
    turn: TurnJson
    calls: list[CallReport]
    history: list[Any]


class TurnReport(_TurnReportFields, total=False):
    """What ``run_turn`` and ``process_turn`` answer (docs/report.md). ``history`` is empty for a turn
    that did not complete: nothing goes back to the model, the caller regenerates the turn."""

    requests: list[dict[str, Any]]
    audit: list[dict[str, Any]]
    read_error: Exception


class CallErrorJson(TypedDict):
    stage: Literal["gate", "approval", "tool", "sandbox", "apply"]
    kind: str
    message: str


class _CallOutcomeFields(TypedDict):
    tool: str
    status: Literal["ok", "error"]
    changes: list[dict[str, Any]]
    stdout: str
    stderr: str
    duration_ms: float


class CallOutcome(_CallOutcomeFields, total=False):
    """What ``call`` answers, as ``turngate call`` prints it."""

    output: str
    error: CallErrorJson
    requests: list[dict[str, Any]]


class ChangeJson(TypedDict, total=False):
    path: str
    kind: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class NetworkRequestJson(TypedDict):
    method: str
    url: str
    body_bytes: int
    body_sha256: str
    body_start: str | None


class ApprovalRequest(TypedDict):
    """What an approver is asked: the call, the paths it was approved for, and the change set with its
    unified diff (``changes`` is None when a call that only reads is asked about before it runs), or the
    network request a running call waits to send (``network``, under ``approval = "ask"``)."""

    id: str | None
    tool: str
    input: str
    paths: list[dict[str, str]]
    changes: list[ChangeJson] | None
    diff: str
    network: NetworkRequestJson | None


Approver = Callable[[ApprovalRequest], Union[bool, Awaitable[bool]]]
"""Answers True to let a call apply; False (or anything but True, or an exception) denies it. An
exception is logged once, as a warning of the ``turngate`` logger, with its traceback."""

_log = logging.getLogger("turngate")


def _chunks(body: Body) -> Iterable[Chunk]:
    if isinstance(body, (bytes, bytearray, memoryview, str)):
        return (body,)
    if isinstance(body, Iterable):
        return body
    raise UsageError(
        f"a response body must be bytes, str or an iterable of chunks, not {type(body).__name__}"
    )


def decode_turn(
    provider: Provider,
    body: Body,
    *,
    forced_tool_choice: bool = False,
    max_output_tokens: int | None = None,
    on_text: Callable[[str], object] | None = None,
) -> Turn:
    """Decodes a whole response body (SSE, or a non-streamed JSON body) given whole or in chunks.
    ``forced_tool_choice`` and ``max_output_tokens`` as the request asked: a turn whose usage reached
    ``max_output_tokens`` was cut, whatever its stop reason. ``on_text`` sees the visible text in order
    (a JSON body's text only at its end). An exception raised while reading the chunks (a dropped
    connection) ends the body where it stopped: the turn is decoded as far as it came, so a cut turn
    is ``incomplete`` and runs nothing, and the exception is its ``read_error``."""
    decoder = TurnDecoder(
        provider, forced_tool_choice=forced_tool_choice, max_output_tokens=max_output_tokens
    )
    chunks = _chunks(body)
    read_error = None
    try:
        for chunk in chunks:
            _echo(decoder.feed(chunk), on_text)
    except TurngateError:
        raise
    except Exception as error:
        read_error = error
    return _finished(decoder, on_text, read_error)


async def adecode_turn(
    provider: Provider,
    body: AsyncBody,
    *,
    forced_tool_choice: bool = False,
    max_output_tokens: int | None = None,
    on_text: Callable[[str], object] | None = None,
) -> Turn:
    """`decode_turn` that also takes an async iterator of chunks (the async clients' ``iter_bytes()``)."""
    if not isinstance(body, AsyncIterable):
        return decode_turn(
            provider,
            body,
            forced_tool_choice=forced_tool_choice,
            max_output_tokens=max_output_tokens,
            on_text=on_text,
        )
    decoder = TurnDecoder(
        provider, forced_tool_choice=forced_tool_choice, max_output_tokens=max_output_tokens
    )
    read_error = None
    try:
        async for chunk in body:
            _echo(decoder.feed(chunk), on_text)
    except TurngateError:
        raise
    except Exception as error:
        read_error = error
    return _finished(decoder, on_text, read_error)


def _echo(texts: list[str], on_text: Callable[[str], object] | None) -> None:
    if on_text is not None:
        for text in texts:
            on_text(text)


def _finished(
    decoder: TurnDecoder, on_text: Callable[[str], object] | None, read_error: Exception | None
) -> Turn:
    turn, texts = decoder.finish_with_text(read_error=read_error)
    _echo(texts, on_text)
    return turn


async def _awaited(answer: Awaitable[bool]) -> bool:
    return await answer


class _Withdrawn(Exception):
    """The question was withdrawn: the call it was about was cancelled."""


def _decided(
    approver: Approver, request: ApprovalRequest, wait: Callable[[Awaitable[bool]], bool]
) -> bool:
    """The approver's answer (``wait`` awaits an async one): only True approves; an exception denies
    and is logged once, a withdrawn question denies silently (the call is cancelled anyway)."""
    try:
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = wait(answer)
    except _Withdrawn:
        return False
    except Exception:
        _log.warning(
            "the approver raised while asked about `%s` call %s: the call is denied",
            request["tool"],
            request["id"],
            exc_info=True,
        )
        return False
    return answer is True


def _recorded(approver: str) -> Literal["console"]:
    """``"console"`` (the root's recorded approvals); any other string is a usage error."""
    if approver != "console":
        raise UsageError(
            f"approver={approver!r}: give a callable, or \"console\" to ask through turngate console"
        )
    return "console"


def _blocking_approver(
    approver: Approver | Literal["console"] | None,
) -> Callable[[ApprovalRequest], bool] | Literal["console"] | None:
    """The approver as the library calls it, from a thread with no event loop of its own
    (``"console"`` is the library's own: the root's recorded approvals)."""
    if approver is None:
        return None
    if isinstance(approver, str):
        return _recorded(approver)
    given = approver

    def ask(request: ApprovalRequest) -> bool:
        return _decided(given, request, lambda answer: asyncio.run(_awaited(answer)))

    return ask


class _Questions:
    """The questions an async call has open on its caller's event loop, withdrawn (their coroutines
    cancelled) when the awaiting task is cancelled, so no one waits for a user who is no longer
    asked."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._open: set[concurrent.futures.Future[bool]] = set()
        self._withdrawn = False

    def wait(self, answer: Awaitable[bool]) -> bool:
        """Awaits ``answer`` on the loop, from the call's worker thread."""
        with self._lock:
            if self._withdrawn:
                if isinstance(answer, Coroutine):
                    answer.close()
                raise _Withdrawn
            question = asyncio.run_coroutine_threadsafe(_awaited(answer), self._loop)
            self._open.add(question)
        try:
            return question.result()
        except concurrent.futures.CancelledError:
            raise _Withdrawn from None
        finally:
            with self._lock:
                self._open.discard(question)

    def withdraw(self) -> None:
        with self._lock:
            self._withdrawn = True
            for question in self._open:
                question.cancel()

    def approver(
        self, approver: Approver | Literal["console"] | None
    ) -> Callable[[ApprovalRequest], bool] | Literal["console"] | None:
        """The approver as the library calls it from the worker thread."""
        if approver is None:
            return None
        if isinstance(approver, str):
            return _recorded(approver)
        given = approver
        return lambda request: _decided(given, request, self.wait)


async def _in_thread(
    work: Callable[[Cancel], Any], cancel: Cancel | None, questions: _Questions
) -> Any:
    """Runs ``work`` in a worker thread; if the awaiting task is cancelled, sets the signal, withdraws
    the questions open on the loop, waits for the library to stop the call (a stopped call applies
    nothing, whatever the approver answered), then lets the cancellation through."""
    signal = cancel if cancel is not None else Cancel()
    running = questions._loop.run_in_executor(None, work, signal)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        signal.cancel()
        questions.withdraw()
        try:
            await running
        except Exception:
            pass
        raise


def _with_read_error(report: dict[str, Any], turn: Turn) -> TurnReport:
    """The report, with the error its body's reading ended with (``read_error``) when there was one."""
    if turn.read_error is not None:
        report["read_error"] = turn.read_error
    return cast(TurnReport, report)


class Toolbox:
    """The bundled tools (and any in ``tools_dir``) confined to ``root`` under ``policy``.

    ``policy`` is a path (``os.PathLike``) to a TOML policy file, TOML text (``str``) or a dict of the
    same tables; None allows every tool everywhere in the root. ``locked`` loads only what
    ``tools_dir/turngate.lock`` pins. ``timeout_ms``, ``memory_mib`` and ``max_output`` are the per-call
    limits; ``cache_dir`` / ``cache=False`` control the cache of precompiled components.

    Raises ``PolicyError`` for a bad policy, ``ToolLoadError`` for a tool that cannot be loaded and
    ``UsageError`` for a root that cannot be opened. Safe to share between threads.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        policy: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        tools_dir: str | os.PathLike[str] | None = None,
        locked: bool = False,
        bundled: bool = True,
        timeout_ms: int | None = None,
        memory_mib: int | None = None,
        max_output: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache: bool = True,
    ) -> None:
        self._inner = _Toolbox(
            root,
            policy=dict(policy) if isinstance(policy, Mapping) else policy,
            tools_dir=tools_dir,
            locked=locked,
            bundled=bundled,
            timeout_ms=timeout_ms,
            memory_mib=memory_mib,
            max_output=max_output,
            cache_dir=cache_dir,
            cache=cache,
        )

    @property
    def root(self) -> str:
        """The root, as opened."""
        return os.fspath(self._inner.root)

    @property
    def tool_names(self) -> list[str]:
        """The loaded tools."""
        return self._inner.tool_names

    @overload
    def tool_definitions(self, provider: Literal["anthropic"]) -> list[AnthropicTool]: ...
    @overload
    def tool_definitions(self, provider: Literal["openai-chat"]) -> list[OpenAIChatTool]: ...
    @overload
    def tool_definitions(
        self, provider: Literal["openai-responses"]
    ) -> list[OpenAIResponsesTool]: ...
    @overload
    def tool_definitions(self, provider: Literal["gemini"]) -> list[GeminiTool]: ...
    def tool_definitions(self, provider: Provider) -> list[Any]:
        """The tools in the shape the provider's request takes (``tools=``), typed as the official
        SDK's own tool parameters when it is installed (``anthropic``, ``openai``)."""
        return self._inner.tool_definitions(provider)

    # --- one call ---------------------------------------------------------------------------------

    def call(
        self,
        tool: str,
        input: str | Mapping[str, Any],
        *,
        approver: Approver | Literal["console"] | None = None,
        review: bool = False,
        call_id: str | None = None,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
    ) -> CallOutcome:
        """Runs one call as ``turngate call`` does; answers its outcome (``status``, ``output`` or
        ``error`` with ``stage``/``kind``/``message``, ``changes``). ``input`` is JSON text (checked
        strictly as the model sent it) or a dict. A ``cancel`` set while the approver decides wins
        over its answer: nothing applies, and the error's ``kind`` is ``cancelled``."""
        outcome = self._inner.call(
            tool,
            input,
            approver=_blocking_approver(approver),
            review=review,
            call_id=call_id,
            turn_id=turn_id,
            cancel=cancel,
        )
        return cast(CallOutcome, outcome)

    async def acall(
        self,
        tool: str,
        input: str | Mapping[str, Any],
        *,
        approver: Approver | Literal["console"] | None = None,
        review: bool = False,
        call_id: str | None = None,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
    ) -> CallOutcome:
        """`call` on a worker thread; cancelling the awaiting task stops the call, which applies
        nothing (also when the approver was asked: its question is withdrawn, and a yes that comes
        anyway applies nothing)."""
        questions = _Questions(asyncio.get_running_loop())
        ask = questions.approver(approver)
        outcome = await _in_thread(
            lambda signal: self._inner.call(
                tool,
                input,
                approver=ask,
                review=review,
                call_id=call_id,
                turn_id=turn_id,
                cancel=signal,
            ),
            cancel,
            questions,
        )
        return cast(CallOutcome, outcome)

    # --- a whole turn -----------------------------------------------------------------------------

    def process_turn(
        self,
        turn: Turn,
        *,
        approver: Approver | Literal["console"] | None = None,
        review: bool = False,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
        audit: bool = False,
    ) -> TurnReport:
        """Gates a decoded turn as ``turngate run`` does; answers the report (``turn``, ``calls``,
        ``history``, see docs/report.md). Raises ``StreamParseError`` (with ``.report``) for a
        malformed turn."""
        return _with_read_error(
            self._inner.process_turn(
                turn,
                approver=_blocking_approver(approver),
                review=review,
                turn_id=turn_id,
                cancel=cancel,
                audit=audit,
            ),
            turn,
        )

    def run_turn(
        self,
        provider: Provider,
        body: Body,
        *,
        approver: Approver | Literal["console"] | None = None,
        review: bool = False,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
        audit: bool = False,
        forced_tool_choice: bool = False,
        max_output_tokens: int | None = None,
        on_text: Callable[[str], object] | None = None,
    ) -> TurnReport:
        """Decodes the raw response body (bytes, or chunks as ``iter_bytes()`` gives them) and gates
        the turn: nothing runs unless the turn completed. ``report["history"]`` is ready to append to
        the next request's ``messages`` / ``input`` / ``contents``. A body whose reading fails (the
        connection dropped) is decoded as far as it came: the turn is cut (every call ``not_run``)
        and the report keeps the error as ``read_error``."""
        turn = decode_turn(
            provider,
            body,
            forced_tool_choice=forced_tool_choice,
            max_output_tokens=max_output_tokens,
            on_text=on_text,
        )
        return self.process_turn(
            turn,
            approver=approver,
            review=review,
            turn_id=turn_id,
            cancel=cancel,
            audit=audit,
        )

    async def aprocess_turn(
        self,
        turn: Turn,
        *,
        approver: Approver | Literal["console"] | None = None,
        review: bool = False,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
        audit: bool = False,
    ) -> TurnReport:
        """`process_turn` on a worker thread. Cancelling the awaiting task stops the running call
        (nothing of it applies, whatever the approver answers) and raises ``CancelledError``; the
        library answers that call and the rest as errors whose ``step`` is ``cancelled``, in the
        report nobody awaits any more (pass ``cancel`` and set it yourself to get the report)."""
        questions = _Questions(asyncio.get_running_loop())
        ask = questions.approver(approver)
        return _with_read_error(
            await _in_thread(
                lambda signal: self._inner.process_turn(
                    turn,
                    approver=ask,
                    review=review,
                    turn_id=turn_id,
                    cancel=signal,
                    audit=audit,
                ),
                cancel,
                questions,
            ),
            turn,
        )

    async def arun_turn(
        self,
        provider: Provider,
        body: AsyncBody,
        *,
        approver: Approver | Literal["console"] | None = None,
        review: bool = False,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
        audit: bool = False,
        forced_tool_choice: bool = False,
        max_output_tokens: int | None = None,
        on_text: Callable[[str], object] | None = None,
    ) -> TurnReport:
        """`run_turn` for async code: ``body`` may be an async iterator (the async clients' ``iter_bytes()``)."""
        turn = await adecode_turn(
            provider,
            body,
            forced_tool_choice=forced_tool_choice,
            max_output_tokens=max_output_tokens,
            on_text=on_text,
        )
        return await self.aprocess_turn(
            turn,
            approver=approver,
            review=review,
            turn_id=turn_id,
            cancel=cancel,
            audit=audit,
        )

    # --- recorded approvals ------------------------------------------------------------------------

    def waiting_approvals(self) -> list[dict[str, Any]]:
        """The questions waiting in the root, oldest first: those asked with ``approver="console"``
        (here or in another process), or by ``turngate run --approve-in console`` and the other
        surfaces. Each is ``{"digest", "asked_ms", "deadline_ms", "turn", "request"}`` (and
        ``"position"``, the call's place in its turn, when known), ``request`` being what an approver
        is asked (an ``ApprovalRequest``)."""
        return self._inner.waiting_approvals()

    def answer_approval(self, digest: str, approve: bool) -> dict[str, Any]:
        """Answers the question ``digest`` (``sha256:...``, from ``waiting_approvals``): it applies
        only to exactly that request, the first answer stands, and a question past its deadline is
        denied. Raises ``UsageError`` when no such question waits."""
        return self._inner.answer_approval(digest, approve)

    # --- the journal ------------------------------------------------------------------------------

    def journal(self) -> list[dict[str, Any]]:
        """Every applied (or undone) call on the root, oldest first."""
        return self._inner.journal()

    def undo(
        self, *, last: bool = False, call: str | None = None, turn: str | None = None
    ) -> list[dict[str, Any]]:
        """Restores what the last call, the last call with ID ``call``, or every call of ``turn``
        changed; answers the calls undone. Raises ``UndoError`` (nothing restored) when a file changed
        since or nothing matches."""
        return self._inner.undo(last=last, call=call, turn=turn)

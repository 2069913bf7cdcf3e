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
import inspect
import os
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal, TypedDict, Union

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

__all__ = [
    "ApprovalRequest",
    "Approver",
    "Cancel",
    "InternalError",
    "PolicyError",
    "Provider",
    "StreamParseError",
    "ToolLoadError",
    "Toolbox",
    "Turn",
    "TurnDecoder",
    "TurngateError",
    "UndoError",
    "UsageError",
    "decode_turn",
    "adecode_turn",
]

Provider = Literal["anthropic", "openai-chat", "openai-responses", "gemini"]
Chunk = Union[bytes, bytearray, memoryview, str]
Body = Union[Chunk, Iterable[Chunk]]
AsyncBody = Union[Body, AsyncIterable[Chunk]]


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
"""Answers True to let a call apply; False (or anything but True, or an exception) denies it."""


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
    (a JSON body's text only at its end)."""
    decoder = TurnDecoder(
        provider, forced_tool_choice=forced_tool_choice, max_output_tokens=max_output_tokens
    )
    for chunk in _chunks(body):
        _echo(decoder.feed(chunk), on_text)
    return _finished(decoder, on_text)


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
    async for chunk in body:
        _echo(decoder.feed(chunk), on_text)
    return _finished(decoder, on_text)


def _echo(texts: list[str], on_text: Callable[[str], object] | None) -> None:
    if on_text is not None:
        for text in texts:
            on_text(text)


def _finished(decoder: TurnDecoder, on_text: Callable[[str], object] | None) -> Turn:
    turn, texts = decoder.finish_with_text()
    _echo(texts, on_text)
    return turn


async def _awaited(answer: Awaitable[bool]) -> bool:
    return await answer


def _blocking_approver(approver: Approver | None) -> Callable[[ApprovalRequest], object] | None:
    """The approver as the library calls it, from a thread with no event loop of its own."""
    if approver is None:
        return None

    def ask(request: ApprovalRequest) -> bool:
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = asyncio.run(_awaited(answer))
        return answer

    return ask


def _loop_approver(
    approver: Approver | None, loop: asyncio.AbstractEventLoop
) -> Callable[[ApprovalRequest], object] | None:
    """The approver as the library calls it from a worker thread: an async answer is awaited on the
    caller's event loop."""
    if approver is None:
        return None

    def ask(request: ApprovalRequest) -> bool:
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = asyncio.run_coroutine_threadsafe(_awaited(answer), loop).result()
        return answer

    return ask


async def _in_thread(work: Callable[[Cancel], Any], cancel: Cancel | None) -> Any:
    """Runs ``work`` in a worker thread; if the awaiting task is cancelled, sets the signal, waits for
    the library to stop the call (a stopped call applies nothing), then lets the cancellation through."""
    signal = cancel if cancel is not None else Cancel()
    loop = asyncio.get_running_loop()
    running = loop.run_in_executor(None, work, signal)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        signal.cancel()
        try:
            await running
        except Exception:
            pass
        raise


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

    def tool_definitions(self, provider: Provider) -> list[dict[str, Any]]:
        """The tools in the shape the provider's request takes (``tools=``)."""
        return self._inner.tool_definitions(provider)

    # --- one call ---------------------------------------------------------------------------------

    def call(
        self,
        tool: str,
        input: str | Mapping[str, Any],
        *,
        approver: Approver | None = None,
        review: bool = False,
        call_id: str | None = None,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
    ) -> dict[str, Any]:
        """Runs one call as ``turngate call`` does; answers its outcome (``status``, ``output`` or
        ``error`` with ``stage``/``kind``/``message``, ``changes``). ``input`` is JSON text (checked
        strictly as the model sent it) or a dict."""
        return self._inner.call(
            tool,
            input,
            approver=_blocking_approver(approver),
            review=review,
            call_id=call_id,
            turn_id=turn_id,
            cancel=cancel,
        )

    async def acall(
        self,
        tool: str,
        input: str | Mapping[str, Any],
        *,
        approver: Approver | None = None,
        review: bool = False,
        call_id: str | None = None,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
    ) -> dict[str, Any]:
        """`call` on a worker thread; cancelling the awaiting task stops the call, which applies
        nothing."""
        ask = _loop_approver(approver, asyncio.get_running_loop())
        return await _in_thread(
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
        )

    # --- a whole turn -----------------------------------------------------------------------------

    def process_turn(
        self,
        turn: Turn,
        *,
        approver: Approver | None = None,
        review: bool = False,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
        audit: bool = False,
    ) -> dict[str, Any]:
        """Gates a decoded turn as ``turngate run`` does; answers the report (``turn``, ``calls``,
        ``history``). Raises ``StreamParseError`` (with ``.report``) for a malformed turn."""
        return self._inner.process_turn(
            turn,
            approver=_blocking_approver(approver),
            review=review,
            turn_id=turn_id,
            cancel=cancel,
            audit=audit,
        )

    def run_turn(
        self,
        provider: Provider,
        body: Body,
        *,
        approver: Approver | None = None,
        review: bool = False,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
        audit: bool = False,
        forced_tool_choice: bool = False,
        max_output_tokens: int | None = None,
        on_text: Callable[[str], object] | None = None,
    ) -> dict[str, Any]:
        """Decodes the raw response body (bytes, or chunks as ``iter_bytes()`` gives them) and gates
        the turn: nothing runs unless the turn completed. ``report["history"]`` is ready to append to
        the next request's ``messages`` / ``input`` / ``contents``."""
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
        approver: Approver | None = None,
        review: bool = False,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
        audit: bool = False,
    ) -> dict[str, Any]:
        """`process_turn` on a worker thread; cancelling the awaiting task stops the running call
        (nothing of it applies) and answers the rest ``cancelled``."""
        ask = _loop_approver(approver, asyncio.get_running_loop())
        return await _in_thread(
            lambda signal: self._inner.process_turn(
                turn,
                approver=ask,
                review=review,
                turn_id=turn_id,
                cancel=signal,
                audit=audit,
            ),
            cancel,
        )

    async def arun_turn(
        self,
        provider: Provider,
        body: AsyncBody,
        *,
        approver: Approver | None = None,
        review: bool = False,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
        audit: bool = False,
        forced_tool_choice: bool = False,
        max_output_tokens: int | None = None,
        on_text: Callable[[str], object] | None = None,
    ) -> dict[str, Any]:
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

# Stubs of the extension module built from python/src (PyO3). The package's public names are in
# __init__.py, which re-exports these.
import os
from collections.abc import Callable, Mapping
from typing import Any, Literal

_Provider = Literal["anthropic", "openai-chat", "openai-responses", "gemini"]
_Chunk = bytes | bytearray | memoryview | str

class TurngateError(Exception): ...
class UsageError(TurngateError): ...
class PolicyError(UsageError): ...
class ToolLoadError(UsageError): ...

class StreamParseError(TurngateError):
    report: dict[str, Any]

class UndoError(TurngateError): ...
class InternalError(TurngateError): ...

class Cancel:
    def __init__(self) -> None: ...
    def cancel(self) -> None: ...
    @property
    def cancelled(self) -> bool: ...

class Turn:
    @property
    def status(
        self,
    ) -> Literal["completed", "truncated", "refused", "filtered", "errored", "malformed", "incomplete"]: ...
    @property
    def stop_reason(self) -> str | None: ...
    @property
    def detail(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def read_error(self) -> Exception | None: ...
    def to_dict(self) -> dict[str, Any]: ...

class TurnDecoder:
    def __init__(
        self,
        provider: _Provider,
        *,
        forced_tool_choice: bool = False,
        max_output_tokens: int | None = None,
    ) -> None: ...
    def feed(self, chunk: _Chunk) -> list[str]: ...
    def finish(self, *, read_error: Exception | None = None) -> Turn: ...
    def finish_with_text(self, *, read_error: Exception | None = None) -> tuple[Turn, list[str]]: ...

class Toolbox:
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
    ) -> None: ...
    @property
    def root(self) -> str: ...
    @property
    def tool_names(self) -> list[str]: ...
    def tool_definitions(self, provider: _Provider) -> list[dict[str, Any]]: ...
    def call(
        self,
        tool: str,
        input: str | Mapping[str, Any],
        *,
        approver: Callable[[Any], bool] | Literal["console"] | None = None,  # gets a turngate.ApprovalRequest
        review: bool = False,
        call_id: str | None = None,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
    ) -> dict[str, Any]: ...
    def process_turn(
        self,
        turn: Turn,
        *,
        approver: Callable[[Any], bool] | Literal["console"] | None = None,  # gets a turngate.ApprovalRequest
        review: bool = False,
        turn_id: str | None = None,
        cancel: Cancel | None = None,
        audit: bool = False,
    ) -> dict[str, Any]: ...
    def waiting_approvals(self) -> list[dict[str, Any]]: ...
    def answer_approval(self, digest: str, approve: bool) -> dict[str, Any]: ...
    def journal(self) -> list[dict[str, Any]]: ...
    def undo(
        self, *, last: bool = False, call: str | None = None, turn: str | None = None
    ) -> list[dict[str, Any]]: ...

def _panic_for_test() -> None: ...

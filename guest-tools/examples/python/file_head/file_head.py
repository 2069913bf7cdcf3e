"""`file_head`: answers the first lines of a UTF-8 text file, read through WASI 0.3's filesystem.

An example turngate tool written in Python and built into a WASI 0.3 component with componentize-py 0.25
(see `../../build.sh`). It implements the `async-tool` world, where `call` is an `async func`, and
imports `wasi:filesystem@0.3.0` (`wit/world.wit`): it opens the file with an awaited `open-at` from the
preopened root and reads it through `read-via-stream`, a `stream<u8>` it reads chunk by chunk until it
has `lines` lines or the file ends, and then closes. The host serves that filesystem with the same view
as a 0.2 tool's: only the approved path, read-only for a tool whose paths are all `read`.

At most 1 MiB is read. (CPython itself still imports WASI 0.2 for its own I/O; the tool's file access
is all 0.3.)
"""

import json

import wit_world
from componentize_py_types import Err, Ok
from wit_world.imports import preopens
from wit_world.imports.turngate_tool_types import (
    Access,
    Descriptor,
    PathParam,
    ToolError_Denied,
    ToolError_Failed,
    ToolError_InvalidInput,
    ToolError_NotFound,
)
from wit_world.imports.wasi_filesystem_types import (
    DescriptorFlags,
    ErrorCode_Access,
    ErrorCode_IsDirectory,
    ErrorCode_NoEntry,
    ErrorCode_NotPermitted,
    OpenFlags,
    PathFlags,
)

NAME = "file_head"
#: The most bytes read.
MAX_BYTES = 1024 * 1024
#: How many bytes one stream read asks for.
CHUNK_BYTES = 16 * 1024

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "minLength": 1,
            "description": "Path of the text file, relative to the root.",
        },
        "lines": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000,
            "description": "How many lines to answer (default 10).",
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}


class ToolFailure(Exception):
    """A failed call, carrying the `tool-error` returned to the host."""

    def __init__(self, error):
        super().__init__(error.value)
        self.error = error


def parse_input(text: str) -> tuple[str, int]:
    try:
        value = json.loads(text)
    except ValueError as err:
        raise ToolFailure(ToolError_InvalidInput(f"bad input: {err}"))
    if not isinstance(value, dict):
        raise ToolFailure(ToolError_InvalidInput("bad input: expected an object"))
    unknown = sorted(set(value) - {"path", "lines"})
    if unknown:
        raise ToolFailure(ToolError_InvalidInput(f"bad input: unknown field `{unknown[0]}`"))
    path, lines = value.get("path"), value.get("lines", 10)
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
        raise ToolFailure(ToolError_InvalidInput("bad input: `path` must be a relative path"))
    if isinstance(lines, bool) or not isinstance(lines, int) or not 1 <= lines <= 1000:
        raise ToolFailure(ToolError_InvalidInput("bad input: `lines` must be an integer from 1 to 1000"))
    return path, lines


def failure(path: str, code) -> ToolFailure:
    """The tool error for a filesystem `error-code`."""
    words = type(code).__name__.removeprefix("ErrorCode_")
    message = f"{path}: {words}"
    if isinstance(code, ErrorCode_NoEntry):
        return ToolFailure(ToolError_NotFound(message))
    if isinstance(code, (ErrorCode_Access, ErrorCode_NotPermitted)):
        return ToolFailure(ToolError_Denied(message))
    if isinstance(code, ErrorCode_IsDirectory):
        return ToolFailure(ToolError_Failed(f"{path} is a directory, not a file"))
    return ToolFailure(ToolError_Failed(message))


async def head(path: str, lines: int) -> dict:
    directories = preopens.get_directories()
    if not directories:
        raise ToolFailure(ToolError_Denied("no filesystem: the host preopened no root directory"))
    root, _ = directories[0]
    try:
        file = await root.open_at(PathFlags.SYMLINK_FOLLOW, path, OpenFlags(0), DescriptorFlags.READ)
    except Err as err:
        raise failure(path, err.value)
    stream, done = file.read_via_stream(0)
    data = bytearray()
    with stream:
        while data.count(b"\n") < lines and len(data) < MAX_BYTES and not stream.writer_dropped:
            data += await stream.read(CHUNK_BYTES)
    whole = stream.writer_dropped
    result = await done.read()
    if isinstance(result, Err):
        raise failure(path, result.value)
    try:
        text = bytes(data[:MAX_BYTES]).decode("utf-8")
    except UnicodeDecodeError:
        if whole:
            raise ToolFailure(ToolError_Failed(f"{path} is not UTF-8 text"))
        text = bytes(data[:MAX_BYTES]).decode("utf-8", errors="ignore")
    first = text.splitlines(keepends=True)[:lines]
    return {"path": path, "lines": len(first), "text": "".join(first)}


class WitWorld(wit_world.WitWorld):
    def describe(self) -> Descriptor:
        return Descriptor(
            name=NAME,
            description=(
                "Answer the first `lines` (default 10) lines of a UTF-8 text file as JSON: "
                "`path`, `lines` (how many were found) and `text`."
            ),
            input_schema=json.dumps(SCHEMA),
            paths=[PathParam(pointer="/path", access=Access.READ)],
        )

    async def call(self, input: str) -> str:
        try:
            path, lines = parse_input(input)
            return json.dumps(await head(path, lines))
        except ToolFailure as failure:
            raise Err(failure.error)
        except MemoryError:
            raise Err(ToolError_Failed(f"{NAME}: out of memory"))
        except Err:
            raise
        except Exception as err:  # a bug: report it rather than trap
            raise Err(ToolError_Failed(f"{NAME}: internal error: {type(err).__name__}: {err}"))

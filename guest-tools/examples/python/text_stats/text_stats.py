"""`text_stats`: counts the lines, words and characters of a UTF-8 text file and lists its most
frequent words.

An example turngate tool written in Python and built into a WASI 0.2 component with componentize-py
(see `../../build.sh`). The module is imported once at build time (componentize-py pre-initializes
the interpreter and snapshots it), so nothing at module level may touch the filesystem.

The file is read in 1 MiB chunks through an incremental UTF-8 decoder, so only one chunk of text
(plus the word counts) is held in memory at a time; files over 8 MiB are refused.
"""

import codecs
import heapq
import json
import os
import re
import stat

import wit_world
from componentize_py_types import Err
from wit_world.imports.types import (
    Access,
    Descriptor,
    PathParam,
    ToolError_Denied,
    ToolError_Failed,
    ToolError_InvalidInput,
    ToolError_NotFound,
)

NAME = "text_stats"
#: The largest file read, in bytes.
MAX_FILE_BYTES = 8 * 1024 * 1024
#: How many bytes one read asks for.
CHUNK_BYTES = 1024 * 1024
#: `top` when the input does not set it, and the largest value accepted.
DEFAULT_TOP = 10
MAX_TOP = 100

#: A word: a run of letters, digits or underscores, with inner apostrophes (`don't`, `l’eau`).
WORD = re.compile(r"\w+(?:['\u2019]\w+)*")
#: The last whitespace character of a piece of text: words never span it, so text can be cut there.
LAST_SPACE = re.compile(r"\s(?=\S*\Z)")

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "minLength": 1,
            "description": "UTF-8 text file to analyse, relative to the root, e.g. `docs/notes.md`. "
            "At most 8 MiB.",
        },
        "top": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_TOP,
            "default": DEFAULT_TOP,
            "description": "How many of the most frequent words (case-folded) to list, 0 to 100. "
            "Default 10.",
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "Count the lines, words, characters and bytes of a UTF-8 text file (at most 8 MiB) and list "
    "its most frequent words, case-folded, with their counts. Returns JSON. A word is a run of "
    "letters, digits or underscores, with inner apostrophes (don't). Use it to size up a document "
    "before reading it."
)


class ToolFailure(Exception):
    """A failed call: `error` is the tool-error variant returned to the host."""

    def __init__(self, error):
        super().__init__(error.value)
        self.error = error


def invalid(message):
    return ToolFailure(ToolError_InvalidInput(message))


class WitWorld(wit_world.WitWorld):
    def describe(self) -> Descriptor:
        return Descriptor(
            name=NAME,
            description=DESCRIPTION,
            input_schema=json.dumps(SCHEMA, separators=(",", ":")),
            paths=[PathParam(pointer="/path", access=Access.READ)],
        )

    def call(self, input: str) -> str:
        try:
            path, top = parse_input(input)
            stats = analyse(path, top)
        except ToolFailure as failure:
            raise Err(failure.error)
        except MemoryError:
            raise Err(ToolError_Failed(f"{NAME}: out of memory"))
        except Exception as err:  # a bug: report it rather than trap
            raise Err(ToolError_Failed(f"{NAME}: internal error: {type(err).__name__}: {err}"))
        return json.dumps(stats, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Input


def _reject_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise invalid(f"bad input: duplicate field `{key}`")
        seen[key] = value
    return seen


def _reject_constant(name):
    raise invalid(f"bad input: `{name}` is not valid JSON")


def parse_input(raw):
    """Parses the `call` input strictly; returns `(path, top)`."""
    try:
        value = json.loads(
            raw, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant
        )
    except ValueError as err:
        raise invalid(f"bad input: not a JSON object: {err}") from None
    if not isinstance(value, dict):
        raise invalid("bad input: expected a JSON object")
    unknown = sorted(set(value) - set(SCHEMA["properties"]))
    if unknown:
        raise invalid(
            f"bad input: unknown field `{unknown[0]}`, expected `path` or `top`"
        )
    if "path" not in value:
        raise invalid("bad input: missing field `path`")
    path = value["path"]
    if not isinstance(path, str):
        raise invalid("bad input: `path` must be a string")
    check_relative(path)

    top = value.get("top", DEFAULT_TOP)
    # JSON Schema's "integer" also accepts 10.0; booleans are not integers.
    if isinstance(top, float) and top.is_integer():
        top = int(top)
    if isinstance(top, bool) or not isinstance(top, int):
        raise invalid("bad input: `top` must be an integer")
    if not 0 <= top <= MAX_TOP:
        raise invalid(f"bad input: `top` must be between 0 and {MAX_TOP}, got {top}")
    return path, top


def check_relative(path):
    """Refuses paths that are empty, absolute or climb out with `..` (the host checks them too)."""
    if not path:
        raise invalid("bad input: `path` must not be empty")
    if "\0" in path:
        raise invalid("bad input: `path` must not contain a NUL character")
    if path.startswith("/"):
        raise invalid(f"bad input: `path` must be relative to the root, got `{path}`")
    if ".." in path.split("/"):
        raise invalid(f"bad input: `path` must not contain `..`, got `{path}`")


# ---------------------------------------------------------------------------------------------
# Reading and counting


def os_failure(path, err):
    """Maps an OSError on `path` to the matching tool error."""
    message = f"{path}: {err.strerror or err}"
    if isinstance(err, IsADirectoryError):
        return ToolFailure(ToolError_Failed(f"{path} is a directory, not a file"))
    if isinstance(err, FileNotFoundError):
        return ToolFailure(ToolError_NotFound(message))
    if isinstance(err, PermissionError):
        return ToolFailure(ToolError_Denied(message))
    return ToolFailure(ToolError_Failed(message))


def read_chunks(path):
    """Yields the file's bytes in chunks; refuses a file that is not regular or is too large."""
    try:
        file = open(path, "rb", buffering=0)
    except OSError as err:
        raise os_failure(path, err) from None
    with file:
        try:
            info = os.fstat(file.fileno())
        except OSError as err:
            raise os_failure(path, err) from None
        if stat.S_ISDIR(info.st_mode):
            raise ToolFailure(ToolError_Failed(f"{path} is a directory, not a file"))
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailure(ToolError_Failed(f"{path} is not a regular file"))
        if info.st_size > MAX_FILE_BYTES:
            raise ToolFailure(ToolError_Failed(too_large(path, info.st_size)))
        total = 0
        while True:
            try:
                chunk = file.read(CHUNK_BYTES)
            except OSError as err:
                raise os_failure(path, err) from None
            if not chunk:
                return
            total += len(chunk)
            if total > MAX_FILE_BYTES:  # the file grew after fstat
                raise ToolFailure(ToolError_Failed(too_large(path, total)))
            yield chunk


def too_large(path, size):
    return (
        f"{path} is too large: {size} bytes, the limit is {MAX_FILE_BYTES} bytes (8 MiB); "
        "text_stats only reads files up to that size"
    )


class Counts:
    """Running totals over the decoded text."""

    def __init__(self):
        self.lines = 0
        self.characters = 0
        self.words = 0
        self.word_characters = 0
        self.frequencies = {}
        self.last_char = ""
        # Text after the last whitespace seen, whose words may continue in the next chunk.
        self.carry = ""

    def feed(self, text, final):
        if text:
            self.characters += len(text)
            self.lines += text.count("\n")
            self.last_char = text[-1]
        pending = self.carry + text
        if final:
            ready, self.carry = pending, ""
        else:
            cut = LAST_SPACE.search(pending)
            if cut is None:
                self.carry = pending
                return
            ready, self.carry = pending[: cut.end()], pending[cut.end() :]
        frequencies = self.frequencies
        for match in WORD.finditer(ready):
            word = match.group()
            self.words += 1
            self.word_characters += len(word)
            key = word.casefold()
            frequencies[key] = frequencies.get(key, 0) + 1


def analyse(path, top):
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    counts = Counts()
    offset = 0  # bytes of the file passed to the decoder so far

    def decode(chunk, final):
        buffered = len(decoder.getstate()[0])
        try:
            return decoder.decode(chunk, final)
        except UnicodeDecodeError as err:
            position = offset - buffered + err.start
            raise ToolFailure(
                ToolError_Failed(
                    f"{path} is not UTF-8 text: invalid byte sequence at byte offset {position} "
                    f"({err.reason}); text_stats only reads UTF-8 text files"
                )
            ) from None

    for chunk in read_chunks(path):
        text = decode(chunk, False)
        offset += len(chunk)
        counts.feed(text, False)
    counts.feed(decode(b"", True), True)

    lines = counts.lines
    if counts.characters and counts.last_char != "\n":
        lines += 1  # a last line without a newline still counts
    most_frequent = heapq.nsmallest(
        top, counts.frequencies.items(), key=lambda item: (-item[1], item[0])
    )
    average = counts.word_characters / counts.words if counts.words else 0.0
    return {
        "path": path,
        "lines": lines,
        "words": counts.words,
        "characters": counts.characters,
        "bytes": offset,
        "average_word_length": round(average, 2),
        "unique_words": len(counts.frequencies),
        "top_words": [{"word": word, "count": count} for word, count in most_frequent],
    }

"""`page_title`: fetches a web page and answers its status and the text of its `<title>`.

An example turngate network tool written in Python and built into a WASI 0.2 component with
componentize-py (see `../../build.sh`). It implements the `network-tool` world: besides `describe` and
`call` it exports `url-fields`, naming `/url`, so turngate checks the URL against the tool's network
grant before the call starts. The request goes out through `wasi:http/outgoing-handler`, where the host
checks it again (method, origin, path, the address the name resolves to) before anything is sent; a
request the policy does not grant fails with the host's `HTTP-request-denied` error, which the tool
reports. The tool follows no redirect itself and sees no secret: whatever the host adds to a request
never reaches it.

At most 256 KiB of the body are read; the title is looked for in that much.
"""

import html
import json
import re

import wit_world
from componentize_py_types import Err, Ok
from wit_world.imports import outgoing_handler, streams
from wit_world.imports.turngate_tool_types import (
    Descriptor,
    ToolError_Failed,
    ToolError_InvalidInput,
)
from wit_world.imports.wasi_http_types import (
    Fields,
    Method_Get,
    OutgoingBody,
    OutgoingRequest,
    Scheme_Http,
    Scheme_Https,
)

NAME = "page_title"
#: The most bytes of the body read.
MAX_BODY_BYTES = 256 * 1024
#: How many bytes one read asks for.
CHUNK_BYTES = 16 * 1024

#: `scheme://authority/path?query` of an absolute http(s) URL (no user info, no fragment).
URL = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#@\s]+)(?P<rest>[^#\s]*)", re.ASCII)
#: The title element, across lines, case-insensitively.
TITLE = re.compile(rb"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "url": {
            "type": "string",
            "minLength": 1,
            "description": "Absolute http or https URL of the page, e.g. `https://example.org/`.",
        },
    },
    "required": ["url"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "Fetch a web page (GET) and return its HTTP status, content type and the text of its <title>, "
    "as JSON. Reads at most 256 KiB of the page. Use it to check what a link points to."
)


class ToolFailure(Exception):
    """A failed call: `error` is the tool-error variant returned to the host."""

    def __init__(self, error):
        super().__init__(error.value)
        self.error = error


class WitWorld(wit_world.WitWorld):
    def describe(self) -> Descriptor:
        return Descriptor(
            name=NAME, description=DESCRIPTION, input_schema=json.dumps(SCHEMA), paths=[]
        )

    def url_fields(self) -> list[str]:
        return ["/url"]

    def call(self, input: str) -> str:
        try:
            return json.dumps(fetch_title(parse_url(input)))
        except ToolFailure as failure:
            raise Err(failure.error)


def parse_url(input: str):
    """The URL of the call's input, split into scheme, authority and path with query."""
    try:
        value = json.loads(input)
    except ValueError as error:
        raise ToolFailure(ToolError_InvalidInput(f"the input is not JSON: {error}"))
    url = value.get("url") if isinstance(value, dict) else None
    match = URL.fullmatch(url) if isinstance(url, str) else None
    if match is None:
        raise ToolFailure(ToolError_InvalidInput("`url` must be an absolute http or https URL"))
    return match["scheme"], match["authority"], match["rest"] or "/"


def fetch_title(url):
    """GETs the page and answers its status, content type and title."""
    scheme, authority, path = url
    request = OutgoingRequest(Fields.from_list([("accept", b"text/html")]))
    request.set_method(Method_Get())
    request.set_scheme(Scheme_Https() if scheme == "https" else Scheme_Http())
    request.set_authority(authority)
    request.set_path_with_query(path)
    body = request.body()
    try:
        pending = outgoing_handler.handle(request, None)
    except Err as error:
        raise ToolFailure(ToolError_Failed(f"the request was not sent: {describe(error.value)}"))
    OutgoingBody.finish(body, None)
    pending.subscribe().block()
    answer = pending.get()
    if answer is None or isinstance(answer, Err) or isinstance(answer.value, Err):
        why = describe(answer.value.value) if answer is not None and isinstance(answer, Ok) else "none"
        raise ToolFailure(ToolError_Failed(f"no response: {why}"))
    response = answer.value.value
    content_type = b", ".join(response.headers().get("content-type")).decode("latin-1")
    page = read_body(response)
    found = TITLE.search(page)
    title = None
    if found:
        title = " ".join(html.unescape(found[1].decode("utf-8", "replace")).split())
    return {
        "url": f"{scheme}://{authority}{path}",
        "status": response.status(),
        "content_type": content_type or None,
        "title": title,
    }


def read_body(response) -> bytes:
    """Up to `MAX_BODY_BYTES` of the response body."""
    page = bytearray()
    # A stream is a child of its body: it must go first, which the nested `with` ensures.
    with response.consume() as incoming, incoming.stream() as stream:
        try:
            while len(page) < MAX_BODY_BYTES:
                page += stream.blocking_read(min(CHUNK_BYTES, MAX_BODY_BYTES - len(page)))
        except Err as error:
            if not isinstance(error.value, streams.StreamError_Closed):
                raise ToolFailure(ToolError_Failed("the page could not be read"))
    return bytes(page)


def describe(error) -> str:
    """An `error-code` of wasi:http as words (`HTTP-request-denied` and so on)."""
    name = type(error).__name__.removeprefix("ErrorCode_")
    detail = getattr(error, "value", None)
    return f"{name} ({detail})" if detail else name

"""Named scenarios run by the official MCP Python SDK's own client against `turngate mcp` over stdio.

Usage: client.py [--mode auto|legacy] SCENARIO... -- SERVER_COMMAND [ARG...]

Each scenario launches SERVER_COMMAND through the SDK (`mcp.Client` over `StdioServerParameters`), runs,
and prints one JSON line to stdout: {"scenario", "mode", "protocol_version", ...what it saw}. The client
only reports; tests/mcp_clients.rs asserts. A scenario that raises reports {"exception", "traceback"}
instead, and the others still run. --mode is the SDK's connect mode: "auto" (its default: probe
`server/discover` at 2026-07-28, fall back to `initialize`) or "legacy" (the `initialize` handshake,
2025-11-25). The root and the server's configuration are the caller's; the scenarios use these paths:

  list_tools                 tools/list, with the bundled tools' schemas and annotations
  write_applies              write_file notes.txt
  unknown_tool               tools/call of a tool nobody offers
  schema_refusal             write_file schema.txt without `content`
  policy_refusal             write_file private/x.txt (for a policy that allows drafts/** only)
  cancel_spinning_call       hostile_rw write_all_then_spin a.txt, cancelled after CANCEL_AFTER seconds,
                             then read_file present.txt (which the caller creates)
  approval_accept            write_file approved.txt, the elicitation accepted with apply = true
  approval_decline           write_file declined.txt, the elicitation declined
  approval_no_elicitation    write_file unasked.txt from a client that declares no elicitation support
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

CANCEL_AFTER = 1.0
"""Seconds the spinning call runs before the client cancels it."""

CPU_WINDOW = 1.5
"""Seconds over which the server's CPU time is sampled after the cancelled call."""

WRITE_CONTENT = "written over MCP\n"
APPROVED_CONTENT = "approved over MCP\n"
DECLINED_CONTENT = "declined over MCP\n"


def dump(model: Any) -> Any:
    """A result or params model as the JSON the wire carried (aliases, nulls left out)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def server_pid() -> int | None:
    """The server: the child process the SDK spawned (Linux /proc), or None."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name (field 2) is in parentheses and may hold spaces: fields follow the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == me:
            return int(entry)
    return None


def cpu_seconds(pid: int | None) -> float | None:
    """User plus system CPU time of `pid`, all its threads, or None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    # utime and stime are fields 14 and 15 of stat(5); `fields` starts at field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Elicitor:
    """The client's elicitation callback: answers with `answer` and records every request it got."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.requests: list[Any] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        # The request's ID: the JSON-RPC ID of an `elicitation/create` request, or the key of an input
        # request embedded in an InputRequiredResult (2026-07-28, SEP-2322).
        self.requests.append({"request_id": context.request_id, "params": dump(params)})
        if self.answer == "accept":
            return types.ElicitResult(action="accept", content={"apply": True})
        return types.ElicitResult(action=self.answer)


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    result = await client.call_tool(tool, arguments)
    return {"arguments": arguments, "result": dump(result), "seconds": time.monotonic() - started}


async def list_tools(client: Client, _: Elicitor | None) -> dict[str, Any]:
    listing = await client.list_tools()
    return {"tools": [dump(tool) for tool in listing.tools], "next_cursor": listing.next_cursor}


async def write_applies(client: Client, _: Elicitor | None) -> dict[str, Any]:
    return await call(client, "write_file", {"path": "notes.txt", "content": WRITE_CONTENT})


async def unknown_tool(client: Client, _: Elicitor | None) -> dict[str, Any]:
    return await call(client, "no_such_tool", {"path": "notes.txt"})


async def schema_refusal(client: Client, _: Elicitor | None) -> dict[str, Any]:
    return await call(client, "write_file", {"path": "schema.txt"})


async def policy_refusal(client: Client, _: Elicitor | None) -> dict[str, Any]:
    return await call(client, "write_file", {"path": "private/x.txt", "content": WRITE_CONTENT})


async def cancel_spinning_call(client: Client, _: Elicitor | None) -> dict[str, Any]:
    pid = server_pid()
    arguments = {"attack": "write_all_then_spin", "arg": "a.txt"}
    cpu_before = cpu_seconds(pid)
    started = time.monotonic()
    finished: Any = None
    # The SDK's cancellation: cancelling the awaiting task sends notifications/cancelled for the request.
    with anyio.move_on_after(CANCEL_AFTER) as scope:
        finished = dump(await client.call_tool("hostile_rw", arguments))
    cancelled_at = time.monotonic()
    cpu_at_cancel = cpu_seconds(pid)
    followup = await call(client, "read_file", {"path": "present.txt"})
    followup_done = time.monotonic()
    cpu_after_followup = cpu_seconds(pid)
    # Still spinning, the guest would burn a core; stopped, the server idles.
    await anyio.sleep(CPU_WINDOW)
    cpu_end = cpu_seconds(pid)

    def spent(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else b - a

    return {
        "arguments": arguments,
        "cancelled": scope.cancelled_caught,
        "result_before_cancel": finished,
        "seconds_until_cancel": cancelled_at - started,
        "followup": followup,
        "followup_seconds_after_cancel": followup_done - cancelled_at,
        "server_pid": pid,
        "server_cpu_while_spinning": spent(cpu_before, cpu_at_cancel),
        "server_cpu_window_seconds": CPU_WINDOW,
        "server_cpu_in_window_after_followup": spent(cpu_after_followup, cpu_end),
    }


async def approval(client: Client, elicitor: Elicitor | None, path: str, content: str) -> dict[str, Any]:
    report = await call(client, "write_file", {"path": path, "content": content})
    report["elicitations"] = elicitor.requests if elicitor is not None else None
    return report


async def approval_accept(client: Client, elicitor: Elicitor | None) -> dict[str, Any]:
    return await approval(client, elicitor, "approved.txt", APPROVED_CONTENT)


async def approval_decline(client: Client, elicitor: Elicitor | None) -> dict[str, Any]:
    return await approval(client, elicitor, "declined.txt", DECLINED_CONTENT)


async def approval_no_elicitation(client: Client, elicitor: Elicitor | None) -> dict[str, Any]:
    return await approval(client, elicitor, "unasked.txt", WRITE_CONTENT)


SCENARIOS = {
    "list_tools": (list_tools, None),
    "write_applies": (write_applies, None),
    "unknown_tool": (unknown_tool, None),
    "schema_refusal": (schema_refusal, None),
    "policy_refusal": (policy_refusal, None),
    "cancel_spinning_call": (cancel_spinning_call, None),
    "approval_accept": (approval_accept, "accept"),
    "approval_decline": (approval_decline, "decline"),
    "approval_no_elicitation": (approval_no_elicitation, None),
}
"""Each scenario, with the answer of its elicitation callback (None: the client declares no elicitation)."""


async def run(name: str, mode: str, server: list[str]) -> dict[str, Any]:
    scenario, answer = SCENARIOS[name]
    elicitor = Elicitor(answer) if answer is not None else None
    transport_errors: list[str] = []

    async def on_message(message: Any) -> None:
        # Anything on the server's stdout that is not a protocol message arrives here as an exception.
        if isinstance(message, Exception):
            transport_errors.append(repr(message))

    report: dict[str, Any] = {"scenario": name, "mode": mode}
    try:
        client = Client(
            StdioServerParameters(command=server[0], args=server[1:]),
            mode=mode,
            elicitation_callback=elicitor,
            message_handler=on_message,
            client_info=types.Implementation(name="turngate-tests-python-sdk", version="2.3.0"),
            read_timeout_seconds=60,
        )
        async with client:
            report["protocol_version"] = client.protocol_version
            report["server_info"] = dump(client.server_info) if client.server_info is not None else None
            report.update(await scenario(client, elicitor))
    except Exception as e:  # a scenario's failure is a report, so the others still run
        report["exception"] = repr(e)
        report["traceback"] = traceback.format_exc()
    report["transport_errors"] = transport_errors
    return report


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit(__doc__)
    split = argv.index("--")
    parser = argparse.ArgumentParser(description="MCP Python SDK scenarios against turngate mcp")
    parser.add_argument("--mode", choices=["auto", "legacy"], default="auto")
    parser.add_argument("scenarios", nargs="+", choices=sorted(SCENARIOS))
    args = parser.parse_args(argv[:split])
    server = argv[split + 1 :]
    if not server:
        sys.exit("no server command after --")

    async def all_scenarios() -> None:
        for name in args.scenarios:
            report = await run(name, args.mode, server)
            print(json.dumps(report), flush=True)

    anyio.run(all_scenarios)


if __name__ == "__main__":
    main()

"""Threads and asyncio: the GIL is released while a turn or call runs, so two threads gate turns on
different roots at once; cancelling the task awaiting an async call stops it, and it applies nothing."""

import asyncio
import json
import threading
import time

import pytest
import turngate

from conftest import ORIGINAL
from fake_provider import sse

SLOW_MS = 3000


def anthropic_turn(calls: list[tuple[str, str, dict]]) -> bytes:
    """A Messages turn asking for `calls` (id, tool, input), in the shape the API streams it."""
    message = {"id": "msg_t", "type": "message", "role": "assistant", "model": "fake", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    events = [("message_start", {"type": "message_start", "message": message})]
    for index, (call_id, name, input) in enumerate(calls):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(input)}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 9}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return sse(events)


def test_two_threads_run_turns_at_once_on_different_roots(tmp_path, hostile_tools):
    roots = []
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        roots.append(tmp_path / name)
    toolboxes = [turngate.Toolbox(r, tools_dir=hostile_tools, timeout_ms=SLOW_MS) for r in roots]
    reports = {}
    start = threading.Barrier(2)

    def run(index):
        turn = anthropic_turn([
            ("w", "write_file", {"path": "mine.txt", "content": f"root {index}"}),
            ("s", "hostile_rw", {"attack": "sleep", "path": "sleeping.txt"}),
        ])
        start.wait()
        reports[index] = toolboxes[index].run_turn("anthropic", turn)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    for index, root in enumerate(roots):
        write, sleep = reports[index]["calls"]
        assert write["status"] == "ok" and (root / "mine.txt").read_text() == f"root {index}"
        assert sleep["status"] == "error" and "time" in sleep["reason"]
        assert not (root / "sleeping.txt").exists()
    # Each turn waits SLOW_MS for its sleeping call: together, not one after the other.
    assert elapsed < 1.7 * SLOW_MS / 1000, f"the turns took {elapsed:.1f}s: they did not run at once"


def test_a_cancelled_async_call_applies_nothing(root, hostile_tools):
    toolbox = turngate.Toolbox(root, tools_dir=hostile_tools, timeout_ms=60_000)
    spin = {"attack": "write_all_then_spin", "path": "notes.txt", "arg": "notes.txt"}

    async def main():
        task = asyncio.create_task(toolbox.acall("hostile_rw", spin))
        await asyncio.sleep(1.0)
        began = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - began

    stopped_in = asyncio.run(main())
    assert stopped_in < 20, f"the call ran on for {stopped_in:.1f}s after the task was cancelled"
    assert (root / "notes.txt").read_text() == ORIGINAL
    assert toolbox.journal() == []
    # The same call without the spin applies: only the cancellation kept it out.
    done = toolbox.call("hostile_rw", dict(spin, attack="write_all"))
    assert done["status"] == "ok" and (root / "notes.txt").read_text() == "PWNED"


def test_a_cancel_signal_stops_a_turn_from_another_thread(root, hostile_tools):
    toolbox = turngate.Toolbox(root, tools_dir=hostile_tools, timeout_ms=60_000)
    cancel = turngate.Cancel()
    turn = anthropic_turn([
        ("s", "hostile_rw", {"attack": "write_all_then_spin", "path": "notes.txt", "arg": "notes.txt"}),
        ("w", "write_file", {"path": "notes.txt", "content": "late"}),
    ])
    threading.Timer(1.0, cancel.cancel).start()
    report = toolbox.run_turn("anthropic", turn, cancel=cancel)
    assert [c["status"] for c in report["calls"]] == ["error", "error"]
    assert (root / "notes.txt").read_text() == ORIGINAL

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


def staged(root) -> bool:
    """Whether a call has staged a write beneath `root` (it is running, past its first write)."""
    staging = root / ".turngate" / "staging"
    return staging.exists() and any(staging.iterdir())


def test_two_threads_run_turns_at_once_on_different_roots(tmp_path, hostile_tools):
    """One thread's turn spins until it is cancelled; the other thread's turn runs and finishes
    meanwhile and then cancels the first. Had either held the GIL, the second turn could not finish
    while the first ran, and the first would end at its wall-time limit instead of the cancel."""
    roots = []
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        roots.append(tmp_path / name)
    spinning, quick = (turngate.Toolbox(r, tools_dir=hostile_tools, timeout_ms=600_000) for r in roots)
    cancel = turngate.Cancel()
    reports = {}

    def spin():
        turn = anthropic_turn([("s", "hostile_rw", {"attack": "write_all_then_spin", "path": "a.txt", "arg": "a.txt"})])
        reports["spin"] = spinning.run_turn("anthropic", turn, cancel=cancel)

    thread = threading.Thread(target=spin)
    thread.start()
    while not staged(roots[0]):  # the spinning call is under way
        time.sleep(0.01)
    turn = anthropic_turn([("w", "write_file", {"path": "mine.txt", "content": "root two"})])
    reports["quick"] = quick.run_turn("anthropic", turn)
    assert thread.is_alive(), "the spinning turn ended before it was cancelled"
    cancel.cancel()
    thread.join()
    assert reports["quick"]["calls"][0]["status"] == "ok"
    assert (roots[1] / "mine.txt").read_text() == "root two"
    [stopped] = reports["spin"]["calls"]
    assert stopped["step"] == "cancelled", stopped
    assert not (roots[0] / "a.txt").exists()


@pytest.mark.parametrize("tool", ["hostile_rw", "hostile_rw_p3"])  # built for WASI 0.2, and 0.3
def test_a_cancelled_async_call_applies_nothing(root, hostile_tools, tool):
    toolbox = turngate.Toolbox(root, tools_dir=hostile_tools, timeout_ms=600_000)
    spin = {"attack": "write_all_then_spin", "path": "notes.txt", "arg": "notes.txt"}

    async def main():
        task = asyncio.create_task(toolbox.acall(tool, spin))
        while not staged(root):  # the call is running: it wrote, and spins
            await asyncio.sleep(0.01)
        began = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - began

    stopped_in = asyncio.run(main())
    # Not a speed check: uncancelled, the call would spin to its 600 s wall-time limit.
    assert stopped_in < 300, f"the call ran on for {stopped_in:.1f}s after the task was cancelled"
    assert (root / "notes.txt").read_text() == ORIGINAL
    assert toolbox.journal() == []
    # The same call without the spin applies: only the cancellation kept it out.
    done = toolbox.call(tool, dict(spin, attack="write_all"))
    assert done["status"] == "ok" and (root / "notes.txt").read_text() == "PWNED"


def test_a_cancel_signal_stops_a_turn_from_another_thread(root, hostile_tools):
    toolbox = turngate.Toolbox(root, tools_dir=hostile_tools, timeout_ms=60_000)
    cancel = turngate.Cancel()
    turn = anthropic_turn([
        ("s", "hostile_rw", {"attack": "write_all_then_spin", "path": "notes.txt", "arg": "notes.txt"}),
        ("w", "write_file", {"path": "notes.txt", "content": "late"}),
    ])

    def cancel_once_running():
        while not staged(root):
            time.sleep(0.01)
        cancel.cancel()

    threading.Thread(target=cancel_once_running).start()
    report = toolbox.run_turn("anthropic", turn, cancel=cancel)
    assert [c["step"] for c in report["calls"]] == ["cancelled", "cancelled"]
    assert (root / "notes.txt").read_text() == ORIGINAL

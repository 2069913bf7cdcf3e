"""Approval from Python: the approver (sync or async) gets the change set with its diff, and only True
lets the call apply."""

import asyncio
import logging
import threading
import time

import pytest
import turngate

from conftest import ORIGINAL, WRITTEN, seed

ASK = {"tools": {"write_file": {"paths": ["notes.txt"], "approval": "ask"}}}


def test_an_approver_that_denies_applies_nothing(root):
    asked = []

    def deny(request):
        asked.append(request)
        return False

    toolbox = turngate.Toolbox(root, policy=ASK)
    report = toolbox.run_turn("anthropic", seed("anthropic", "complete"), approver=deny)
    [call] = report["calls"]
    assert call["status"] == "error" and call["step"] == "approval"
    assert (root / "notes.txt").read_text() == ORIGINAL
    assert toolbox.journal() == []
    [request] = asked
    assert request["id"] == "u1" and request["tool"] == "write_file"
    assert request["changes"][0]["path"] == "notes.txt" and request["changes"][0]["kind"] == "replace"
    assert "-Original notes" in request["diff"] and "+Final notes" in request["diff"]


@pytest.mark.parametrize("answer", [1, "yes", None])
def test_only_true_approves(root, answer):
    toolbox = turngate.Toolbox(root, policy=ASK)
    outcome = toolbox.call("write_file", {"path": "notes.txt", "content": "x"}, approver=lambda r: answer)
    assert outcome["status"] == "error" and outcome["error"]["stage"] == "approval"
    assert (root / "notes.txt").read_text() == ORIGINAL


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_approver_that_raises_denies_and_is_logged_once(root, caplog, capfd, asynchronous):
    def broken(request):
        raise RuntimeError("approver bug")

    async def broken_async(request):
        raise RuntimeError("approver bug")

    toolbox = turngate.Toolbox(root, policy=ASK)
    with caplog.at_level(logging.WARNING, logger="turngate"):
        outcome = toolbox.call(
            "write_file", {"path": "notes.txt", "content": "x"}, call_id="c7",
            approver=broken_async if asynchronous else broken,
        )
    assert outcome["error"]["stage"] == "approval"
    assert (root / "notes.txt").read_text() == ORIGINAL
    [record] = caplog.records
    assert record.name == "turngate" and "`write_file` call c7" in record.getMessage()
    assert record.exc_info and isinstance(record.exc_info[1], RuntimeError)
    assert "Exception ignored" not in capfd.readouterr().err


def test_a_sync_approver_that_approves_applies(root):
    toolbox = turngate.Toolbox(root, policy=ASK)
    report = toolbox.run_turn("anthropic", seed("anthropic", "complete"), approver=lambda r: True)
    assert report["calls"][0]["status"] == "ok"
    assert (root / "notes.txt").read_text() == WRITTEN


def test_without_an_approver_an_ask_tool_is_denied(root):
    toolbox = turngate.Toolbox(root, policy=ASK)
    report = toolbox.run_turn("anthropic", seed("anthropic", "complete"))
    assert report["calls"][0]["step"] == "approval"
    assert (root / "notes.txt").read_text() == ORIGINAL


def test_async_approvers_in_sync_and_async_code(root):
    seen = []

    async def approve(request):
        await asyncio.sleep(0)
        seen.append(request["diff"])
        return "+x" in request["diff"]

    toolbox = turngate.Toolbox(root, policy=ASK)
    assert toolbox.call("write_file", {"path": "notes.txt", "content": "x"}, approver=approve)["status"] == "ok"
    assert (root / "notes.txt").read_text() == "x"

    async def main():
        denied = await toolbox.acall("write_file", {"path": "notes.txt", "content": "y"}, approver=approve)
        report = await toolbox.arun_turn("anthropic", seed("anthropic", "complete"), approver=lambda r: True)
        return denied, report

    denied, report = asyncio.run(main())
    assert denied["error"]["stage"] == "approval"
    assert report["calls"][0]["status"] == "ok"
    assert (root / "notes.txt").read_text() == WRITTEN
    assert len(seen) == 2


def test_review_asks_about_every_change(root):
    toolbox = turngate.Toolbox(root)
    outcome = toolbox.call("write_file", '{"path": "notes.txt", "content": "x"}', review=True, approver=lambda r: False)
    assert outcome["error"]["stage"] == "approval"
    assert (root / "notes.txt").read_text() == ORIGINAL


# --- a cancel while the approver decides -----------------------------------------------------------


def test_a_cancelled_async_call_applies_nothing_whatever_the_approver_answers(root):
    """The task is cancelled while the async approver is deciding: `CancelledError`, the question is
    withdrawn, and nothing is written or journaled, although the approver would have said yes."""
    asking = asyncio.Event()
    answered = []

    async def slow_yes(request):
        asking.set()
        await asyncio.sleep(1.0)
        answered.append(request["id"])
        return True

    toolbox = turngate.Toolbox(root)

    async def main():
        task = asyncio.create_task(
            toolbox.acall("write_file", {"path": "notes.txt", "content": "x"}, review=True, approver=slow_yes)
        )
        await asking.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(1.2)  # past the approver's answer, had it not been withdrawn

    asyncio.run(main())
    assert answered == [], "the question was not withdrawn"
    assert (root / "notes.txt").read_text() == ORIGINAL
    assert toolbox.journal() == []


def test_a_cancel_set_while_asked_wins_over_a_yes_in_a_turn(root):
    """run_turn(review=True, cancel=c): the approver sets c at the 50th call and says yes; the 50th
    call applies nothing and every call from it on is answered `cancelled`."""
    from test_concurrency import anthropic_turn

    cancel = turngate.Cancel()
    asked = []

    def approver(request):
        asked.append(request["id"])
        if len(asked) == 50:
            cancel.cancel()
        return True

    turn = anthropic_turn([(f"c{i}", "write_file", {"path": f"f{i:02}.txt", "content": "x"}) for i in range(60)])
    toolbox = turngate.Toolbox(root)
    report = toolbox.run_turn("anthropic", turn, review=True, cancel=cancel, approver=approver)
    statuses = [c["status"] for c in report["calls"]]
    assert statuses[:49] == ["ok"] * 49
    assert [c["step"] for c in report["calls"][49:]] == ["cancelled"] * 11
    assert not (root / "f49.txt").exists() and (root / "f48.txt").exists()
    assert len(toolbox.journal()) == 49
    assert len(asked) == 50


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_cancel_set_by_the_approver_of_one_call_wins_over_its_yes(root, asynchronous):
    cancel = turngate.Cancel()

    def cancels_then_yes(request):
        cancel.cancel()
        return True

    toolbox = turngate.Toolbox(root, policy=ASK)
    input = {"path": "notes.txt", "content": "x"}
    if asynchronous:
        outcome = asyncio.run(toolbox.acall("write_file", input, approver=cancels_then_yes, cancel=cancel))
    else:
        outcome = toolbox.call("write_file", input, approver=cancels_then_yes, cancel=cancel)
    assert outcome["status"] == "error", outcome
    assert (outcome["error"]["stage"], outcome["error"]["kind"]) == ("approval", "cancelled")
    assert (root / "notes.txt").read_text() == ORIGINAL
    assert toolbox.journal() == []


def test_a_console_approver_waits_for_the_answer_recorded_in_the_root(root):
    """``approver="console"``: the question is recorded in the root (as ``--approve-in console``
    records it), the call waits, and the answer given by digest, here from another thread as the
    console or a platform's own page would, lets it apply."""
    toolbox = turngate.Toolbox(root, policy=ASK)
    outcome = {}
    call = threading.Thread(
        target=lambda: outcome.update(
            toolbox.call("write_file", {"path": "notes.txt", "content": "x"}, approver="console")
        )
    )
    call.start()
    deadline = time.monotonic() + 60
    while not (waiting := toolbox.waiting_approvals()):
        assert time.monotonic() < deadline, "no question was recorded"
        time.sleep(0.02)
    [question] = waiting
    assert question["request"]["tool"] == "write_file"
    assert question["digest"].startswith("sha256:")
    assert (root / "notes.txt").read_text() == ORIGINAL
    answer = toolbox.answer_approval(question["digest"], True)
    assert answer["approved"] is True
    call.join(60)
    assert outcome["status"] == "ok", outcome
    assert (root / "notes.txt").read_text() == "x"
    assert toolbox.waiting_approvals() == []
    with pytest.raises(turngate.UsageError):
        toolbox.answer_approval(question["digest"], False)


def test_an_approver_that_is_a_string_other_than_console_is_a_usage_error(root):
    toolbox = turngate.Toolbox(root, policy=ASK)
    with pytest.raises(turngate.UsageError, match="console"):
        toolbox.call("write_file", {"path": "notes.txt", "content": "x"}, approver="terminal")

"""Approval from Python: the approver (sync or async) gets the change set with its diff, and only True
lets the call apply."""

import asyncio

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


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_approver_that_raises_denies(root):
    def broken(request):
        raise RuntimeError("approver bug")

    toolbox = turngate.Toolbox(root, policy=ASK)
    outcome = toolbox.call("write_file", {"path": "notes.txt", "content": "x"}, approver=broken)
    assert outcome["error"]["stage"] == "approval"
    assert (root / "notes.txt").read_text() == ORIGINAL


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

"""The journal and undo from Python: by call ID, by turn, the last call; a refused undo restores
nothing."""

import pytest
import turngate

from conftest import ORIGINAL, WRITTEN, seed


def test_undo_by_call_id_restores_the_file(root):
    toolbox = turngate.Toolbox(root)
    toolbox.run_turn("openai-chat", seed("openai-chat", "complete"))
    assert (root / "notes.txt").read_text() == WRITTEN
    [undone] = toolbox.undo(call="u1")
    assert undone["call_id"] == "u1" and undone["state"] == "undone"
    assert (root / "notes.txt").read_text() == ORIGINAL
    assert [e["state"] for e in toolbox.journal()] == ["undone"]


def test_undo_a_turn_and_the_last_call(root):
    toolbox = turngate.Toolbox(root)
    report = toolbox.run_turn("gemini", seed("gemini", "complete"), turn_id="turn-1")
    assert report["turn"]["id"] == "turn-1"
    toolbox.call("write_file", {"path": "other.txt", "content": "o"})
    assert [e["tool"] for e in toolbox.journal()] == ["write_file", "write_file"]
    toolbox.undo(last=True)
    assert not (root / "other.txt").exists()
    assert (root / "notes.txt").read_text() == WRITTEN
    toolbox.undo(turn="turn-1")
    assert (root / "notes.txt").read_text() == ORIGINAL


def test_a_refused_undo_raises_and_restores_nothing(root):
    toolbox = turngate.Toolbox(root)
    toolbox.run_turn("anthropic", seed("anthropic", "complete"))
    (root / "notes.txt").write_text("edited by the user\n")
    with pytest.raises(turngate.UndoError, match="changed since"):
        toolbox.undo(last=True)
    assert (root / "notes.txt").read_text() == "edited by the user\n"
    with pytest.raises(turngate.UndoError, match="no applied call"):
        toolbox.undo(call="nope")
    with pytest.raises(turngate.UsageError):
        toolbox.undo(last=True, call="u1")

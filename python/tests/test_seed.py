"""The seed cases from Python, for every provider: a complete write writes once and answers call u1;
a cut, truncated, refused, invalid-JSON or out-of-root turn writes nothing."""

import pytest
import turngate

from conftest import ORIGINAL, PROVIDERS, WRITTEN, chunks, seed


def answered_ids(provider: str, history: list) -> list:
    """The call IDs the history's results answer, in the provider's protocol."""
    if provider == "anthropic":
        return [b["tool_use_id"] for m in history if m["role"] == "user" for b in m["content"] if b["type"] == "tool_result"]
    if provider == "openai-chat":
        return [m["tool_call_id"] for m in history if m["role"] == "tool"]
    if provider == "openai-responses":
        return [i["call_id"] for i in history if i.get("type") == "function_call_output"]
    return [p["functionResponse"]["id"] for m in history for p in m["parts"] if "functionResponse" in p]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("chunk_size", [1, 7, 1 << 20])
def test_a_complete_write_writes_once_and_answers_its_call(root, provider, chunk_size):
    toolbox = turngate.Toolbox(root)
    report = toolbox.run_turn(provider, chunks(seed(provider, "complete"), chunk_size))
    assert report["turn"]["status"] == "completed"
    [call] = report["calls"]
    assert (call["id"], call["name"], call["kind"], call["status"]) == ("u1", "write_file", "function", "ok")
    assert call["reason"] is None and call["output"]
    assert call["changes"] == [{"path": "notes.txt", "kind": "replace"}]
    assert (root / "notes.txt").read_text() == WRITTEN
    assert answered_ids(provider, report["history"]) == ["u1"]
    [entry] = toolbox.journal()
    assert entry["call_id"] == "u1" and entry["turn"] == report["turn"]["id"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("case", ["cutoff", "truncated", "refusal", "invalid", "outside"])
def test_a_bad_turn_writes_nothing(root, provider, case):
    toolbox = turngate.Toolbox(root)
    report = toolbox.run_turn(provider, chunks(seed(provider, case), 5))
    assert (root / "notes.txt").read_text() == ORIGINAL
    assert not (root.parent / "outside.txt").exists()
    assert toolbox.journal() == []
    assert all(c["status"] != "ok" and c["changes"] == [] for c in report["calls"])
    if case in ("cutoff", "truncated", "refusal"):
        assert report["turn"]["status"] != "completed"
        assert report["history"] == []
        assert all(c["status"] == "not_run" for c in report["calls"])
    else:
        # The turn completed: the call is refused, and its ID still gets an (error) answer.
        assert report["turn"]["status"] == "completed"
        [call] = report["calls"]
        assert call["status"] == "error" and call["reason"]
        assert call["step"] == ("parse" if case == "invalid" else "path")
        assert answered_ids(provider, report["history"]) == ["u1"]


def test_the_decoded_turn_says_how_it_ended():
    turn = turngate.decode_turn("anthropic", seed("anthropic", "truncated"))
    assert turn.status == "truncated" and turn.stop_reason == "max_tokens"
    assert turn.to_dict()["calls"][0]["id"] == "u1"

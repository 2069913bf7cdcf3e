"""A non-streamed JSON response body, as `client.messages.create(...)` without `stream` returns it: its
calls run like a stream's, its text reaches `on_text`, and a turn whose usage reached the request's
output limit is cut whatever its stop reason."""

import json

import turngate

from conftest import ORIGINAL, WRITTEN


def whole_body(output_tokens: int = 20) -> bytes:
    return json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": "Writing the notes."},
                {
                    "type": "tool_use",
                    "id": "u1",
                    "name": "write_file",
                    "input": {"path": "notes.txt", "content": WRITTEN},
                },
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": output_tokens},
        }
    ).encode()


def test_a_whole_body_runs_its_call_and_its_text_reaches_on_text(root):
    texts: list[str] = []
    report = turngate.Toolbox(root).run_turn("anthropic", whole_body(), on_text=texts.append)
    assert report["turn"]["status"] == "completed"
    assert [c["status"] for c in report["calls"]] == ["ok"]
    assert (root / "notes.txt").read_text() == WRITTEN
    assert texts == ["Writing the notes."]


def test_a_whole_body_in_chunks_decodes_as_one(root):
    body = whole_body()
    texts: list[str] = []
    turn = turngate.decode_turn(
        "anthropic", (body[i : i + 5] for i in range(0, len(body), 5)), on_text=texts.append
    )
    assert (turn.status, turn.text, texts) == ("completed", "Writing the notes.", ["Writing the notes."])


def test_usage_at_the_output_limit_cuts_the_turn_whatever_its_stop_reason(root):
    toolbox = turngate.Toolbox(root)
    report = toolbox.run_turn("anthropic", whole_body(output_tokens=64), max_output_tokens=64)
    assert report["turn"]["status"] == "truncated"
    assert [c["status"] for c in report["calls"]] != ["ok"]
    assert (root / "notes.txt").read_text() == ORIGINAL
    assert toolbox.journal() == []

    report = toolbox.run_turn("anthropic", whole_body(output_tokens=63), max_output_tokens=64)
    assert report["turn"]["status"] == "completed"
    assert (root / "notes.txt").read_text() == WRITTEN

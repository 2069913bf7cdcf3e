"""Errors: one hierarchy mirroring the library's classes; a bad policy or bad bytes raise the right
exception and lose nothing; a Rust panic is an exception, not an abort."""

import shutil

import pytest
import turngate

from conftest import ORIGINAL, WRITTEN, guest, seed


def test_the_hierarchy():
    for error in (turngate.UsageError, turngate.StreamParseError, turngate.UndoError, turngate.InternalError):
        assert issubclass(error, turngate.TurngateError)
    assert issubclass(turngate.PolicyError, turngate.UsageError)
    assert issubclass(turngate.ToolLoadError, turngate.UsageError)
    assert issubclass(turngate.TurngateError, Exception)


@pytest.mark.parametrize(
    "policy",
    [
        'default = "sometimes"',
        "deny = [",
        {"tools": {"write_file": {"paths": ["["]}}},
        {"tool": {}},
        {"deny": [None]},
    ],
)
def test_a_bad_policy_raises_policy_error(root, policy):
    with pytest.raises(turngate.PolicyError):
        turngate.Toolbox(root, policy=policy)
    assert (root / "notes.txt").read_text() == ORIGINAL


def test_a_policy_file_a_toml_text_and_a_dict_say_the_same(root, tmp_path):
    text = 'default = "read-only"\n[tools.write_file]\npaths = ["drafts/**"]\n'
    (tmp_path / "policy.toml").write_text(text)
    (root / "drafts").mkdir()
    as_dict = {"default": "read-only", "tools": {"write_file": {"paths": ["drafts/**"]}}}
    for policy in (tmp_path / "policy.toml", text, as_dict):
        toolbox = turngate.Toolbox(root, policy=policy)
        refused = toolbox.call("write_file", {"path": "notes.txt", "content": "x"})
        assert refused["error"]["stage"] == "gate" and refused["error"]["kind"] == "policy"
        assert toolbox.call("write_file", {"path": "drafts/a.txt", "content": "x"})["status"] == "ok"
    assert (root / "notes.txt").read_text() == ORIGINAL
    with pytest.raises(turngate.PolicyError, match="reading policy"):
        turngate.Toolbox(root, policy=tmp_path / "missing.toml")


def test_a_tool_that_does_not_load_raises_tool_load_error(root, tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    shutil.copy(guest("not_a_tool"), tools / "not_a_tool.wasm")
    with pytest.raises(turngate.ToolLoadError, match="not_a_tool"):
        turngate.Toolbox(root, tools_dir=tools)
    with pytest.raises(turngate.ToolLoadError):
        turngate.Toolbox(root, tools_dir=tmp_path / "no-such-dir")
    with pytest.raises(turngate.UsageError, match="tools_dir"):
        turngate.Toolbox(root, locked=True)


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe\x00garbage that is not a stream\n\n",
        seed("anthropic", "complete").replace(b"event: message_stop", b"event: message_start"),
    ],
)
def test_bad_bytes_raise_stream_parse_error_and_lose_nothing(root, body):
    toolbox = turngate.Toolbox(root)
    with pytest.raises(turngate.StreamParseError) as raised:
        toolbox.run_turn("anthropic", [body])
    report = raised.value.report
    assert report["turn"]["status"] == "malformed" and report["history"] == []
    assert all(c["status"] == "not_run" for c in report["calls"])
    assert (root / "notes.txt").read_text() == ORIGINAL and toolbox.journal() == []
    # The toolbox goes on: the next good turn applies.
    assert toolbox.run_turn("anthropic", seed("anthropic", "complete"))["calls"][0]["status"] == "ok"
    assert (root / "notes.txt").read_text() == WRITTEN


def test_usage_errors(root):
    with pytest.raises(turngate.UsageError, match="unknown provider"):
        turngate.decode_turn("claude", b"")
    with pytest.raises(turngate.UsageError, match="must be bytes"):
        turngate.decode_turn("anthropic", [b"event: ping\n", 42])
    with pytest.raises(turngate.UsageError, match="opening root"):
        turngate.Toolbox(root / "missing")
    decoder = turngate.TurnDecoder("gemini")
    decoder.finish()
    with pytest.raises(turngate.UsageError, match="finished"):
        decoder.feed(b"")


def test_a_rust_panic_is_an_exception():
    from turngate import _turngate

    with pytest.raises(turngate.InternalError, match="panic requested by the test"):
        _turngate._panic_for_test()


def test_locked_loads_only_what_the_lock_pins(root, hostile_tools):
    with pytest.raises(turngate.ToolLoadError, match="lock"):
        turngate.Toolbox(root, tools_dir=hostile_tools, locked=True)
    assert "hostile_rw" in turngate.Toolbox(root, tools_dir=hostile_tools).tool_names


def test_limits_are_the_toolboxs(root, hostile_tools):
    toolbox = turngate.Toolbox(root, tools_dir=hostile_tools, max_output=1000)
    big = toolbox.call("hostile_rw", {"attack": "big_result", "size": 5000, "path": "x.txt"})
    assert big["status"] == "error" and big["error"]["stage"] == "sandbox"
    small = toolbox.call("hostile_rw", {"attack": "big_result", "size": 500, "path": "x.txt"})
    assert small["status"] == "ok"

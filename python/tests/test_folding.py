"""A name means one file, from Python: on a root whose file system folds case and Unicode forms (the
test file system `tests/python.rs` mounts and names in `TURNGATE_TEST_FOLDING_DIR`), every spelling of a
denied name and of turngate's state directory is that name, for the bundled tools and a hostile guest
of each WASI generation."""

import os
import pathlib
import tempfile

import pytest
import turngate


POLICY = {"default": "workspace-write", "deny": [".env", "**/.env", "secrets/**"]}
SECRET = "TOKEN=do-not-leak\n"


@pytest.fixture
def folding_root() -> pathlib.Path:
    parent = pathlib.Path(os.environ["TURNGATE_TEST_FOLDING_DIR"])
    root = pathlib.Path(tempfile.mkdtemp(dir=parent)) / "root"
    (root / "secrets").mkdir(parents=True)
    (root / ".env").write_text(SECRET)
    (root / "secrets" / "key.txt").write_text(SECRET)
    (root / "notes.txt").write_text("notes\n")
    return root


def leaks(text: str) -> bool:
    lowered = text.lower()
    return any(name in lowered for name in (".env", "secrets", ".turngate", "do-not-leak"))


def test_every_spelling_of_a_denied_name_or_the_state_directory_is_refused(folding_root):
    toolbox = turngate.Toolbox(folding_root, policy=POLICY)
    assert toolbox.call("write_file", {"path": "a.txt", "content": "a\n"})["status"] == "ok"
    for tool, args in [
        ("read_file", {"path": ".ENV"}),
        ("read_file", {"path": "Secrets/Key.txt"}),
        ("write_file", {"path": ".Env", "content": "PWNED"}),
        ("delete_file", {"path": ".eNV"}),
        ("list_dir", {"path": ".TurnGate"}),
        ("make_dir", {"path": ".TURNGATE/evil"}),
    ]:
        outcome = toolbox.call(tool, args)
        assert outcome["status"] == "error", (tool, args, outcome)
    listing = toolbox.call("list_dir", {"path": "."})
    assert listing["status"] == "ok" and not leaks(listing["output"]), listing
    assert (folding_root / ".env").read_text() == SECRET
    assert not (folding_root / ".turngate" / "evil").exists()


@pytest.mark.parametrize("tool", ["hostile_rw", "hostile_rw_p3"])
def test_a_hostile_guest_meets_every_spelling_as_the_name_it_is(folding_root, hostile_tools, tool):
    toolbox = turngate.Toolbox(folding_root, policy=POLICY, tools_dir=hostile_tools)
    for attack, arg in [("read", ".ENV"), ("read", "SECRETS/KEY.TXT"), ("write", ".Env"), ("mkdir", ".TurnGate/evil")]:
        outcome = toolbox.call(tool, {"attack": attack, "arg": arg, "path": "."})
        assert outcome["status"] == "error" or not outcome["output"].startswith("ESCAPED"), outcome
        assert "do-not-leak" not in str(outcome), outcome
    walked = toolbox.call(tool, {"attack": "walk", "arg": ".", "path": "."})
    assert walked["status"] == "ok" and not leaks(walked["output"]), walked
    assert (folding_root / ".env").read_text() == SECRET

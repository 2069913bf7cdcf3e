"""A tool installed from a registry (here an OCI image layout that `turngate tools publish` wrote and
`turngate tools add` installed from) loads from the tools directory and its lock like any other: it runs
only under a policy that lists it, with the grants the user accepted, and a `locked` load refuses it
once what was kept of its origin has changed."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

import turngate

from conftest import guest


def cli(*args: str | os.PathLike[str]) -> dict:
    """Runs the `turngate` binary that `tests/python.rs` passes in; answers the JSON it printed."""
    binary = os.environ.get("TURNGATE_TEST_BIN")
    assert binary, "TURNGATE_TEST_BIN is not set: run these tests through `cargo test --test python`"
    done = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def installed(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A tools directory holding `hostile_rw` installed from a layout, and the policy its grants
    (writing under `out/`) were accepted into."""
    layout, tools = tmp_path / "layout", tmp_path / "tools"
    tools.mkdir()
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"paths": {"write": ["out/**"]}}))
    cli("tools", "publish", guest("hostile_rw"), f"oci:{layout}:1.0", "--grants", grants)
    policy = tmp_path / "policy.toml"
    policy.write_text('default = "read-only"\n')
    added = cli(
        "tools", "add", f"oci:{layout}:1.0", "--tools", tools,
        "--allow-unsigned", "--policy", policy, "--accept-grants",
    )
    assert added["name"] == "hostile_rw" and added["unsigned"] is True
    return tools, policy


def test_an_installed_tool_runs_with_its_accepted_grants_only(root, installed):
    tools, policy = installed
    (root / "out").mkdir()
    toolbox = turngate.Toolbox(root, tools_dir=tools, locked=True, policy=policy)
    written = toolbox.call("hostile_rw", {"attack": "write", "path": "out/a.txt"})
    assert written["status"] == "ok", written
    assert (root / "out" / "a.txt").read_text() == "PWNED"
    outside = toolbox.call("hostile_rw", {"attack": "write", "path": "notes.txt"})
    assert outside["error"]["stage"] == "gate" and outside["error"]["kind"] == "policy", outside


def test_an_installed_tool_runs_under_no_policy_that_does_not_list_it(root, installed):
    tools, _ = installed
    toolbox = turngate.Toolbox(root, tools_dir=tools, locked=True)
    refused = toolbox.call("hostile_rw", {"attack": "noop"})
    assert refused["error"]["stage"] == "gate" and refused["error"]["kind"] == "policy", refused
    assert "was installed from a registry" in refused["error"]["message"], refused


def test_a_locked_load_refuses_a_tool_whose_kept_manifest_changed(root, installed):
    tools, policy = installed
    [provenance] = tools.glob("*.provenance.json")
    kept = json.loads(provenance.read_text())
    kept["manifest"] = kept["manifest"].replace("wasm", "WASM", 1)
    provenance.write_text(json.dumps(kept))
    with pytest.raises(turngate.ToolLoadError, match="its kept manifest has digest"):
        turngate.Toolbox(root, tools_dir=tools, locked=True, policy=policy)

"""Shared fixtures: the repository's recorded turns, a root holding notes.txt, and the test guests that
`tests/python.rs` passes in through the environment (TURNGATE_TEST_GUEST_*)."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SEED = REPO / "tests" / "fixtures" / "seed"
ORIGINAL = "Original notes\n"
WRITTEN = "Final notes\n"  # what the seed's complete turns write (tests/fixtures/seed/generate.py)
PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]


def seed(provider: str, case: str) -> bytes:
    return (SEED / f"{provider}_{case}.sse").read_bytes()


def chunks(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text(ORIGINAL)
    return root


def guest(name: str) -> pathlib.Path:
    """A test guest built by host/build.rs; the test fails (not skips) when it was not passed in."""
    variable = f"TURNGATE_TEST_GUEST_{name.upper()}"
    path = os.environ.get(variable)
    assert path, f"{variable} is not set: run these tests through `cargo test --test python`"
    return pathlib.Path(path)


@pytest.fixture
def hostile_tools(tmp_path: pathlib.Path) -> pathlib.Path:
    """A tools directory holding `hostile_rw` (spins, sleeps, writes what it is given) and its twin built
    for WASI 0.3, `hostile_rw_p3`."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("hostile_rw", "hostile_rw_p3"):
        shutil.copy(guest(name), tools / f"{name}.wasm")
    return tools

"""python/examples/: each agent loop runs against the fake provider, writes notes.txt through the gate,
sends the history back (accepted by the fake provider's check) and ends on the model's text."""

import os
import pathlib
import subprocess
import sys

import pytest

from conftest import WRITTEN
from fake_provider import FINAL_TEXT, FakeProvider

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    "example, provider, variable",
    [
        ("anthropic_agent.py", "anthropic", "ANTHROPIC"),
        ("openai_agent.py", "openai-responses", "OPENAI"),
    ],
)
def test_example_agent_loop(root, example, provider, variable):
    with FakeProvider(provider) as fake:
        env = dict(os.environ, **{f"{variable}_BASE_URL": fake.base_url, f"{variable}_API_KEY": "test"})
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / example), str(root), "Update the notes."],
            env=env, capture_output=True, text=True, timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert fake.refusals == [] and len(fake.requests) == 2
    assert (root / "notes.txt").read_text() == WRITTEN
    assert FINAL_TEXT in done.stdout
    assert "[write_file u1: ok]" in done.stderr

"""The typed surface with the official SDKs' own types: the documented agent loops (docs/python.md's
code blocks and python/examples/) pass `mypy --strict` as they are, `tools=toolbox.tool_definitions(...)`
included, and the package's own module checks too."""

import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def mypy(*targets: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--", *map(str, targets)],
        capture_output=True, text=True, cwd=REPO,
    )


def test_the_documented_loops_pass_mypy_strict(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "python.md").read_text(), re.S)
    assert len(blocks) >= 2, "docs/python.md lost its agent loops"
    targets = []
    for index, block in enumerate(blocks):
        target = tmp_path / f"docs_loop_{index}.py"
        target.write_text(block)
        targets.append(target)
    targets += sorted((REPO / "python" / "examples").glob("*.py"))
    done = mypy(*targets)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_tool_list_of_the_wrong_provider_is_caught(tmp_path):
    """The check has teeth: Gemini's tools handed to Anthropic's `tools=` fail it."""
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "import anthropic\nimport turngate\n\n"
        "toolbox = turngate.Toolbox('.')\n"
        "anthropic.Anthropic().messages.create(model='m', max_tokens=1, messages=[],\n"
        "    tools=toolbox.tool_definitions('gemini'))\n"
    )
    done = mypy(wrong)
    assert done.returncode == 1 and "tools" in done.stdout, done.stdout + done.stderr


def test_the_package_passes_mypy_strict():
    done = mypy(REPO / "python" / "turngate")
    assert done.returncode == 0, done.stdout + done.stderr

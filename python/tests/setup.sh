#!/usr/bin/env bash
# Creates the virtual environment the Python package's tests run in: DEST/venv with maturin, pytest and
# the official anthropic and openai SDKs at the versions requirements.txt pins (hash-checked, wheels only).
# The package itself is built into it afterwards by tests/python.rs (`maturin develop`, dev profile).
#
# Usage: setup.sh DEST
#
# Needs python3 (3.11 or later, with its venv module) and PyPI; nothing else. Runs on Linux (x86_64,
# aarch64) and macOS (arm64, x86_64), whose wheels requirements.txt pins, under bash 3.2 (macOS's) or
# later. Idempotent: the venv is stamped with the hash of requirements.txt and the interpreter once
# complete, and a venv whose stamp matches is left alone; anything else is removed and installed again.
# Concurrent runs on the same DEST wait for each other where flock(1) exists (util-linux: Linux, not
# macOS). Progress goes to stderr; stdout stays empty.
set -euo pipefail

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 DEST" >&2
    exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
dest="$(cd "$1" && pwd)"
python="${PYTHON:-python3}"

say() { echo "python/tests/setup.sh: $*" >&2; }

if command -v flock >/dev/null 2>&1; then
    exec 9>"$dest/.setup.lock"
    flock 9
fi

# SHA-256 of stdin: GNU coreutils' sha256sum on Linux, the shasum macOS ships (Perl's) elsewhere. Both
# print "HASH  -"; the stamp only has to match the next run's on the same machine.
if command -v sha256sum >/dev/null 2>&1; then
    sha256() { sha256sum; }
else
    sha256() { shasum -a 256; }
fi

want="$({
    sha256 <"$here/requirements.txt"
    "$python" -c 'import sys; print(sys.implementation.name, sys.version)'
} | sha256 | cut -d' ' -f1)"
if [ -f "$dest/venv/.turngate-stamp" ] && [ "$(cat "$dest/venv/.turngate-stamp")" = "$want" ] &&
    "$dest/venv/bin/python" -c 'import anthropic, openai, pytest, mypy' 2>/dev/null; then
    say "$dest/venv is up to date"
    exit 0
fi
say "creating $dest/venv with $("$python" --version 2>&1)"
rm -rf "$dest/venv"
"$python" -m venv "$dest/venv"
say "installing requirements.txt (maturin, pytest, anthropic, openai and their dependencies, hash-checked)"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$dest/venv/bin/python" -m pip install \
    --no-cache-dir --no-input --progress-bar off --quiet \
    --require-hashes --only-binary=:all: -r "$here/requirements.txt" >&2
"$dest/venv/bin/python" -m pip check >&2
echo "$want" >"$dest/venv/.turngate-stamp"
say "done"

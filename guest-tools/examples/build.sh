#!/usr/bin/env bash
# Builds the example tools into WASI 0.2 components:
#
#   OUT_DIR/text_stats.wasm    Python      (python/text_stats, componentize-py)
#   OUT_DIR/page_title.wasm    Python      (python/page_title, componentize-py; a network tool)
#   OUT_DIR/file_head.wasm     Python      (python/file_head, componentize-py; built for WASI 0.3)
#   OUT_DIR/csv_to_json.wasm   JavaScript  (js/csv_to_json, componentize-js)
#   OUT_DIR/url_info.wasm      JavaScript  (js/url_info, componentize-js; a network tool awaiting fetch)
#   OUT_DIR/line_count.wasm    Rust        (rust/line_count, wit-bindgen + wasip3; built for WASI 0.3)
#
# Usage: guest-tools/examples/build.sh [OUT_DIR]      (default OUT_DIR: <repo>/target/examples)
#
# Needs python3 (3.11 or later, with venv and pip), node (20 or later) and npm, and cargo with the
# wasm32-wasip2 target (the repository's rust-toolchain.toml names it), and reaches only PyPI, the npm
# registry and crates.io. The pinned tool-chains are installed on first use under
# <repo>/target/examples-toolchain (or $TURNGATE_EXAMPLES_TOOLCHAIN): a virtualenv from
# python/text_stats/requirements.txt, and `npm ci` of js/csv_to_json's package.json and
# package-lock.json. They are reinstalled when those pins change. node_modules is kept there rather than
# in the source tree because host/build.rs watches guest-tools/ for changes: hundreds of megabytes of
# packages there would be rescanned by every cargo build.
#
# A component is rebuilt only when it is missing or older than one of its sources (this script
# included), so a second run with nothing changed takes well under a second. Every step is printed;
# any failure stops the script with a non-zero exit status. Concurrent runs wait for each other.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out_dir="${1:-$repo/target/examples}"
toolchain="${TURNGATE_EXAMPLES_TOOLCHAIN:-$repo/target/examples-toolchain}"

say() { printf '[examples] %s\n' "$*" >&2; }
die() {
    printf '[examples] error: %s\n' "$*" >&2
    exit 1
}
trap 'status=$?; ((BASH_SUBSHELL)) || printf "[examples] FAILED (exit %s) at line %s: %s\n" "$status" "$LINENO" "$BASH_COMMAND" >&2' ERR

# --- Prerequisites --------------------------------------------------------------------------------

command -v python3 >/dev/null || die "python3 is not installed (3.11 or later, with venv and pip)"
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' ||
    die "python3 is $(python3 -V 2>&1 | cut -d' ' -f2); componentize-py needs 3.11 or later"
command -v node >/dev/null || die "node is not installed (20 or later)"
command -v npm >/dev/null || die "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
((node_major >= 20)) || die "node is $(node --version); componentize-js needs 20 or later"

mkdir -p "$out_dir" "$toolchain"
out_dir="$(cd "$out_dir" && pwd)"
toolchain="$(cd "$toolchain" && pwd)"

# One build at a time per tool-chain directory (the test suite and a person may run this together).
if command -v flock >/dev/null; then
    exec 9>"$toolchain/.lock"
    flock 9
fi

# Whether $1 is missing or older than any of the files that follow.
stale() {
    local target="$1"
    shift
    [[ -e "$target" ]] || return 0
    local source
    for source in "$@"; do
        [[ -e "$source" ]] || die "missing source file: $source"
        [[ "$source" -nt "$target" ]] && return 0
    done
    return 1
}

# Prints a component's size.
report() {
    say "$(basename "$1"): $(stat -c %s "$1") bytes ($(du -h "$1" | cut -f1))"
}

build_dir="$toolchain/build"
mkdir -p "$build_dir"

# --- Python: text_stats (componentize-py) ---------------------------------------------------------

venv="$toolchain/venv"
# One tool-chain for every Python example.
requirements="$here/python/text_stats/requirements.txt"

python_toolchain() {
    if [[ -x "$venv/bin/componentize-py" && -x "$venv/bin/wasm-tools" ]] &&
        cmp -s "$requirements" "$venv/turngate-requirements.txt"; then
        return
    fi
    say "installing the Python tool-chain into $venv (pip install -r $requirements)"
    python3 -m venv --clear "$venv"
    "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
        --only-binary=:all: -r "$requirements"
    cp "$requirements" "$venv/turngate-requirements.txt"
    say "$("$venv/bin/componentize-py" --version), $("$venv/bin/wasm-tools" --version)"
}

# Builds the Python example NAME from python/NAME/NAME.py against WORLD in the WIT directory WIT_DIR.
build_python() {
    local name="$1" wit_dir="$2" world="$3"
    local py_src="$here/python/$name"
    local out="$out_dir/$name.wasm"
    local sources
    mapfile -t sources < <(find -L "$wit_dir" -type f -name '*.wit' | sort)
    sources+=("$py_src/$name.py" "$requirements" "$here/build.sh")
    if ! stale "$out" "${sources[@]}"; then
        say "$name.wasm is up to date"
        return
    fi
    python_toolchain
    local work="$build_dir/$name"
    rm -rf "$work"
    mkdir -p "$work"

    say "componentize-py: python/$name/$name.py -> $name (world $world)"
    # componentize-py imports the app inside its CPython-for-WASI at build time, and that CPython
    # writes __pycache__ next to the sources: build from a copy so the source tree stays untouched.
    # -p: that copy only; no VIRTUAL_ENV, so no site-packages are bundled.
    mkdir -p "$work/app"
    cp "$py_src/$name.py" "$work/app/"
    (cd "$work/app" && env -u VIRTUAL_ENV "$venv/bin/componentize-py" \
        -d "$wit_dir" -w "$world" componentize -p "$work/app" -o "$work/raw.wasm" "$name")

    # CPython's runtime imports wasi:sockets, which the sandbox does not link: give those imports to
    # a stub component whose every function traps, composed into the tool.
    local wasm_tools="$venv/bin/wasm-tools"
    "$wasm_tools" component wit "$work/raw.wasm" --out-dir "$work/raw-wit" >/dev/null
    local sockets
    sockets="$("$wasm_tools" component wit "$work/raw.wasm" |
        sed -n -E 's/^[[:space:]]*import (wasi:sockets\/[a-z0-9-]+@[0-9.]+);$/\1/p')"
    if [[ -z "$sockets" ]]; then
        say "the component imports no wasi:sockets; nothing to stub"
        cp "$work/raw.wasm" "$work/$name.wasm"
    else
        say "stubbing $(wc -l <<<"$sockets") wasi:sockets imports (wasm-tools component embed --dummy + compose)"
        mkdir -p "$work/stub-wit"
        cp -r "$work/raw-wit/deps" "$work/stub-wit/deps"
        {
            echo "package turngate-examples:sockets-stub;"
            echo "world sockets-stub {"
            sed 's/.*/  export &;/' <<<"$sockets"
            echo "}"
        } >"$work/stub-wit/world.wit"
        "$wasm_tools" component embed --dummy "$work/stub-wit" -w sockets-stub -o "$work/stub.core.wasm"
        "$wasm_tools" component new "$work/stub.core.wasm" -o "$work/stub.wasm"
        # `compose` is deprecated in favour of wac, which no package registry here serves.
        "$wasm_tools" compose "$work/raw.wasm" -d "$work/stub.wasm" -o "$work/$name.wasm" 2>"$work/compose.log" ||
            {
                cat "$work/compose.log" >&2
                die "wasm-tools compose failed"
            }
        if "$wasm_tools" component wit "$work/$name.wasm" | grep -q 'import wasi:sockets/'; then
            die "the composed $name.wasm still imports wasi:sockets"
        fi
    fi
    mv -f "$work/$name.wasm" "$out"
    report "$out"
}

# --- JavaScript: csv_to_json and url_info (componentize-js) -----------------------------------------

# One tool-chain for every JavaScript example, pinned by csv_to_json's package.json and lock.
js_pins="$here/js/csv_to_json"
js_tools="$toolchain/js"

js_toolchain() {
    if [[ -x "$js_tools/node_modules/.bin/componentize-js" ]] &&
        cmp -s "$js_pins/package-lock.json" "$js_tools/package-lock.json" &&
        cmp -s "$js_pins/package.json" "$js_tools/package.json"; then
        return
    fi
    say "installing the JavaScript tool-chain into $js_tools (npm ci)"
    mkdir -p "$js_tools"
    rm -f "$js_tools/package.json" "$js_tools/package-lock.json"
    cp "$js_pins/package.json" "$js_pins/package-lock.json" "$js_tools/"
    (cd "$js_tools" && npm ci --no-audit --no-fund --loglevel=error)
    say "componentize-js $(node -p "require('$js_tools/node_modules/@bytecodealliance/componentize-js/package.json').version")"
}

# Builds the JavaScript example NAME from js/NAME/src/NAME.js against WORLD of js/NAME/wit, with the
# componentize-js features that follow disabled.
build_js() {
    local name="$1" world="$2"
    shift 2
    local js_src="$here/js/$name"
    local out="$out_dir/$name.wasm"
    local sources
    mapfile -t sources < <(find -L "$js_src/src" "$js_src/wit" -type f \( -name '*.js' -o -name '*.wit' \) | sort)
    sources+=("$js_pins/package.json" "$js_pins/package-lock.json" "$here/build.sh")
    if ! stale "$out" "${sources[@]}"; then
        say "$name.wasm is up to date"
        return
    fi
    js_toolchain
    local work="$build_dir/$name"
    rm -rf "$work"
    mkdir -p "$work"

    say "componentize-js: js/$name/src/$name.js -> $name (world $world, disabled: $*)"
    # Run from the example's directory: componentize-js maps it as the source root, which is how
    # `import './csv.js'` resolves.
    (cd "$js_src" && "$js_tools/node_modules/.bin/componentize-js" "src/$name.js" \
        --wit wit --world-name "$world" --disable "$@" -o "$work/$name.wasm")
    mv -f "$work/$name.wasm" "$out"
    report "$out"
}

# --- Rust: line_count (wit-bindgen, wasip3) --------------------------------------------------------

# Builds the Rust example NAME (a workspace of its own, with its lock) for wasm32-wasip2.
build_rust() {
    local name="$1"
    local rs_src="$here/rust/$name"
    local out="$out_dir/$name.wasm"
    local sources
    mapfile -t sources < <(find -L "$rs_src/src" "$repo/wit" -type f \( -name '*.rs' -o -name '*.wit' \) | sort)
    sources+=("$rs_src/Cargo.toml" "$rs_src/Cargo.lock" "$here/build.sh")
    if ! stale "$out" "${sources[@]}"; then
        say "$name.wasm is up to date"
        return
    fi
    say "cargo: rust/$name -> $name (wasm32-wasip2, release)"
    # Outside the source tree (host/build.rs watches guest-tools/), and free of a calling cargo's flags.
    (cd "$rs_src" && env -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u CARGO_BUILD_TARGET -u CARGO_TARGET_DIR \
        -u RUSTC_WRAPPER -u RUSTC_WORKSPACE_WRAPPER \
        cargo build --release --locked --target wasm32-wasip2 --target-dir "$toolchain/rust-target")
    cp "$toolchain/rust-target/wasm32-wasip2/release/${name//-/_}.wasm" "$out"
    report "$out"
}

say "output: $out_dir; tool-chains: $toolchain"
build_python text_stats "$repo/wit" tool
build_python page_title "$here/python/page_title/wit" page-title
build_python file_head "$here/python/file_head/wit" file-head
# csv_to_json reads and writes files only: no `http`. url_info awaits `fetch`, over wasi:http. Neither
# serves requests: no `fetch-event`.
build_js csv_to_json csv-to-json http fetch-event
build_js url_info url-info fetch-event
build_rust line_count
say "done"

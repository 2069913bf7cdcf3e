//! Functional tests of every bundled tool, run through the gate and the sandbox on a temporary root.

mod common;

use common::{Workspace, bundled, call, call_ok};
use serde_json::json;
use turngate::{CallError, Policy, RunError, ToolError};

fn tool_error(ws: &Workspace, tool: &str, input: serde_json::Value) -> ToolError {
    let outcome = call(
        bundled(),
        &ws.root,
        &Policy::allow_all(),
        tool,
        &input.to_string(),
    );
    match outcome.result {
        Err(CallError::Run(RunError::Tool(e))) => e,
        other => panic!("{tool} {input}: expected a tool error, got {other:?}"),
    }
}

#[test]
fn every_bundled_tool_is_loaded_with_a_strict_schema() {
    let names: Vec<_> = bundled()
        .tools()
        .map(|t| t.descriptor().name.clone())
        .collect();
    assert_eq!(
        names,
        [
            "delete_file",
            "edit_file",
            "fetch",
            "list_dir",
            "make_dir",
            "read_file",
            "search_files",
            "write_file"
        ]
    );
    for tool in bundled().tools() {
        let schema = &tool.descriptor().input_schema;
        assert_eq!(
            schema["additionalProperties"],
            json!(false),
            "{}",
            tool.descriptor().name
        );
        assert!(schema["required"].is_array(), "{}", tool.descriptor().name);
        let declares = &tool.descriptor();
        assert!(!declares.paths.is_empty() || !declares.urls.is_empty());
    }
}

#[test]
fn read_only_tools_declare_read_access() {
    use turngate::Access;
    for (name, access) in [
        ("read_file", Access::Read),
        ("list_dir", Access::Read),
        ("search_files", Access::Read),
        ("write_file", Access::Write),
        ("edit_file", Access::Write),
        ("make_dir", Access::Write),
        ("delete_file", Access::Write),
    ] {
        assert_eq!(
            bundled()
                .get(name)
                .unwrap()
                .descriptor()
                .filesystem_access(),
            Some(access),
            "{name}"
        );
    }
}

#[test]
fn write_file_creates_and_replaces() {
    let ws = Workspace::new();
    call_ok(
        bundled(),
        &ws.root,
        "write_file",
        json!({"path": "notes.txt", "content": "first"}),
    );
    assert_eq!(ws.read("notes.txt"), "first");
    call_ok(
        bundled(),
        &ws.root,
        "write_file",
        json!({"path": "notes.txt", "content": "second"}),
    );
    assert_eq!(ws.read("notes.txt"), "second");
    // No temporary file is left behind, in the root or in turngate's staging area.
    assert_eq!(ws.names(), ["notes.txt"]);
    assert!(ws.no_staging_left());
}

#[test]
fn write_file_needs_an_existing_parent() {
    let ws = Workspace::new();
    let e = tool_error(
        &ws,
        "write_file",
        json!({"path": "missing/notes.txt", "content": "x"}),
    );
    assert!(matches!(e, ToolError::NotFound(_)), "{e:?}");
    assert!(!ws.exists("missing"));
}

#[test]
fn write_file_refuses_a_directory_target() {
    let ws = Workspace::new();
    std::fs::create_dir(ws.root_path().join("dir")).unwrap();
    tool_error(&ws, "write_file", json!({"path": "dir", "content": "x"}));
    assert!(ws.root_path().join("dir").is_dir());
}

#[test]
fn write_file_names_a_wasi_error_instead_of_printing_its_number() {
    // `notes.txt/` asks for a directory; the guest's std reports WASI's ENOTDIR (54), which the host's
    // error text would call `os error 54`. The tool names the error instead.
    for existing in [false, true] {
        let ws = Workspace::new();
        if existing {
            ws.write("notes.txt", "Original notes\n");
        }
        let e = tool_error(
            &ws,
            "write_file",
            json!({"path": "notes.txt/", "content": "x"}),
        );
        let message = e.to_string();
        assert!(!message.contains("os error"), "{message}");
        assert!(message.contains("not a directory"), "{message}");
        if existing {
            assert_eq!(ws.read("notes.txt"), "Original notes\n");
        }
    }
}

#[test]
fn read_file_reads_text_with_optional_line_numbers_and_ranges() {
    let ws = Workspace::new();
    ws.write("a.txt", "one\ntwo\nthree\nfour\n");
    assert_eq!(
        call_ok(bundled(), &ws.root, "read_file", json!({"path": "a.txt"})),
        "one\ntwo\nthree\nfour\n"
    );
    let numbered = call_ok(
        bundled(),
        &ws.root,
        "read_file",
        json!({"path": "a.txt", "offset": 2, "limit": 2, "line_numbers": true}),
    );
    assert!(numbered.contains("2\ttwo"), "{numbered}");
    assert!(numbered.contains("3\tthree"), "{numbered}");
    assert!(
        !numbered.contains("one") && !numbered.contains("four"),
        "{numbered}"
    );
}

#[test]
fn read_file_errors_on_binary_and_missing_files() {
    let ws = Workspace::new();
    std::fs::write(ws.root_path().join("bin.dat"), b"\x00\x01\x02binary").unwrap();
    assert!(
        matches!(tool_error(&ws, "read_file", json!({"path": "bin.dat"})), ToolError::Failed(m) if m.contains("binary"))
    );
    assert!(matches!(
        tool_error(&ws, "read_file", json!({"path": "nope.txt"})),
        ToolError::NotFound(_)
    ));
}

#[test]
fn edit_file_replaces_an_exact_unique_match() {
    let ws = Workspace::new();
    ws.write("code.rs", "let a = 1;\nlet b = 2;\n");
    call_ok(
        bundled(),
        &ws.root,
        "edit_file",
        json!({"path": "code.rs", "old_string": "b = 2", "new_string": "b = 3"}),
    );
    assert_eq!(ws.read("code.rs"), "let a = 1;\nlet b = 3;\n");
}

#[test]
fn edit_file_refuses_missing_and_ambiguous_matches() {
    let ws = Workspace::new();
    ws.write("t.txt", "x x x");
    tool_error(
        &ws,
        "edit_file",
        json!({"path": "t.txt", "old_string": "y", "new_string": "z"}),
    );
    tool_error(
        &ws,
        "edit_file",
        json!({"path": "t.txt", "old_string": "x", "new_string": "z"}),
    );
    assert_eq!(ws.read("t.txt"), "x x x", "a refused edit changes nothing");
    call_ok(
        bundled(),
        &ws.root,
        "edit_file",
        json!({"path": "t.txt", "old_string": "x", "new_string": "z", "replace_all": true}),
    );
    assert_eq!(ws.read("t.txt"), "z z z");
}

#[test]
fn list_dir_lists_sorted_entries() {
    let ws = Workspace::new();
    ws.write("b.txt", "bb");
    ws.write("a/inner.txt", "i");
    let listing = call_ok(bundled(), &ws.root, "list_dir", json!({"path": "."}));
    let a = listing.find("a/").expect(&listing);
    let b = listing.find("b.txt").expect(&listing);
    assert!(a < b, "{listing}");
    assert!(!listing.contains("inner.txt"), "not recursive: {listing}");
}

#[test]
fn make_dir_creates_parents_and_is_idempotent() {
    let ws = Workspace::new();
    call_ok(bundled(), &ws.root, "make_dir", json!({"path": "a/b/c"}));
    assert!(ws.root_path().join("a/b/c").is_dir());
    call_ok(bundled(), &ws.root, "make_dir", json!({"path": "a/b/c"}));
    ws.write("file", "x");
    tool_error(&ws, "make_dir", json!({"path": "file"}));
}

#[test]
fn delete_file_removes_files_only() {
    let ws = Workspace::new();
    ws.write("gone.txt", "x");
    call_ok(
        bundled(),
        &ws.root,
        "delete_file",
        json!({"path": "gone.txt"}),
    );
    assert!(!ws.exists("gone.txt"));
    std::fs::create_dir(ws.root_path().join("dir")).unwrap();
    tool_error(&ws, "delete_file", json!({"path": "dir"}));
    assert!(ws.root_path().join("dir").is_dir());
    assert!(matches!(
        tool_error(&ws, "delete_file", json!({"path": "gone.txt"})),
        ToolError::NotFound(_)
    ));
}

#[test]
fn search_files_finds_matches_with_glob_and_bounds_output() {
    let ws = Workspace::new();
    ws.write("src/main.rs", "fn main() {}\n// TODO: more\n");
    ws.write("src/lib.rs", "// TODO: lib\n");
    ws.write("notes.md", "TODO in notes\n");
    let all = call_ok(
        bundled(),
        &ws.root,
        "search_files",
        json!({"pattern": "TODO"}),
    );
    assert!(
        all.contains("src/main.rs:2:")
            && all.contains("src/lib.rs:1:")
            && all.contains("notes.md:1:"),
        "{all}"
    );
    let rust = call_ok(
        bundled(),
        &ws.root,
        "search_files",
        json!({"pattern": "TODO", "glob": "**/*.rs"}),
    );
    assert!(!rust.contains("notes.md"), "{rust}");
    let many: String = (0..5000).map(|i| format!("match {i}\n")).collect();
    ws.write("big.txt", &many);
    let bounded = call_ok(
        bundled(),
        &ws.root,
        "search_files",
        json!({"pattern": "match", "path": "big.txt"}),
    );
    assert!(
        bounded.len() < 70 * 1024 && bounded.contains("truncated"),
        "{} bytes",
        bounded.len()
    );
    assert!(matches!(
        tool_error(&ws, "search_files", json!({"pattern": "("})),
        ToolError::InvalidInput(_)
    ));
}

#[test]
fn the_gate_refuses_input_that_does_not_fit_the_schema() {
    let ws = Workspace::new();
    for (input, step) in [
        (r#"{"path":"a.txt","content":"x","extra":1}"#, "schema"),
        (r#"{"path":"a.txt"}"#, "schema"),
        (r#"{"path":"a.txt","content":"x","path":"b.txt"}"#, "parse"),
        (r#"{"path":"a.txt","content":"Fil"#, "parse"),
        (r#"["a.txt"]"#, "parse"),
        (r#"{"path":"../a.txt","content":"x"}"#, "path"),
    ] {
        let outcome = call(
            bundled(),
            &ws.root,
            &Policy::allow_all(),
            "write_file",
            input,
        );
        match outcome.result {
            Err(CallError::Gate(e)) => assert_eq!(e.step(), step, "{input}: {e}"),
            other => panic!("{input}: expected a gate refusal, got {other:?}"),
        }
    }
    assert!(
        std::fs::read_dir(ws.root_path()).unwrap().next().is_none(),
        "nothing was written"
    );
}

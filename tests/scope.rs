//! The gate's path-scope step: paths are resolved through the root's capability handle, symlinks
//! included, and anything that leaves the root (or is a hard-linked file) is refused before any tool runs.

mod common;

use common::{Workspace, bundled, call, hash_tree};
use serde_json::json;
use turngate::scope::{ScopeError, check_path};
use turngate::{CallError, Policy};

fn scope(ws: &Workspace, path: &str) -> Result<String, ScopeError> {
    check_path(&ws.root, path, false).map(|p| p.location.to_string())
}

fn links() -> Workspace {
    let ws = Workspace::new();
    let root = ws.root_path();
    let outside = ws.outside_path();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink("../outside", root.join("to_outside_dir")).unwrap();
    std::os::unix::fs::symlink("../outside/secret.txt", root.join("to_outside_file")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("to_outside_absolute"))
        .unwrap();
    std::os::unix::fs::symlink("../../outside", root.join("sub/deep_escape")).unwrap();
    std::os::unix::fs::symlink("sub", root.join("to_sub")).unwrap();
    ws
}

#[test]
fn lexical_escapes_are_refused() {
    let ws = links();
    assert_eq!(scope(&ws, ""), Err(ScopeError::Empty));
    assert_eq!(scope(&ws, "a\0b"), Err(ScopeError::Nul));
    assert_eq!(scope(&ws, "/etc/passwd"), Err(ScopeError::Absolute));
    assert_eq!(scope(&ws, "C:/x"), Err(ScopeError::Absolute));
    assert_eq!(
        scope(&ws, "../outside/secret.txt"),
        Err(ScopeError::ParentComponent)
    );
    assert_eq!(
        scope(&ws, "sub/../../outside"),
        Err(ScopeError::ParentComponent)
    );
}

#[test]
fn symlinks_that_leave_the_root_are_refused() {
    let ws = links();
    for path in [
        "to_outside_dir",
        "to_outside_dir/secret.txt",
        "to_outside_dir/new_file.txt",
        "to_outside_file",
        "to_outside_absolute",
        "sub/deep_escape/secret.txt",
        "to_sub/deep_escape",
    ] {
        assert!(
            matches!(scope(&ws, path), Err(ScopeError::Escapes { .. })),
            "{path}: {:?}",
            scope(&ws, path)
        );
    }
}

#[test]
fn paths_inside_the_root_are_normalized() {
    let ws = links();
    assert_eq!(scope(&ws, "."), Ok(".".into()));
    assert_eq!(scope(&ws, "./notes.txt"), Ok("notes.txt".into()));
    assert_eq!(
        scope(&ws, "sub//new/file.txt"),
        Ok("sub/new/file.txt".into())
    );
    let through_link = check_path(&ws.root, "to_sub/x.txt", false).unwrap();
    assert_eq!(
        (through_link.name.as_str(), through_link.location.as_str()),
        ("to_sub/x.txt", "sub/x.txt"),
        "a symlink that stays inside is fine, and the scope says where it leads"
    );
}

#[test]
fn hard_linked_files_are_refused_unless_allowed() {
    let ws = Workspace::new();
    std::fs::hard_link(
        ws.outside_path().join("secret.txt"),
        ws.root_path().join("linked.txt"),
    )
    .unwrap();
    assert_eq!(
        scope(&ws, "linked.txt"),
        Err(ScopeError::HardLink("linked.txt".into()))
    );
    assert_eq!(
        check_path(&ws.root, "linked.txt", true)
            .unwrap()
            .location
            .to_string(),
        "linked.txt"
    );
}

#[test]
fn write_file_through_an_escaping_symlink_is_refused_before_it_runs() {
    let ws = links();
    let before = hash_tree(&ws.outside_path());
    for path in [
        "to_outside_file",
        "to_outside_dir/new.txt",
        "to_outside_absolute",
    ] {
        let input = json!({"path": path, "content": "overwritten"}).to_string();
        let outcome = call(
            bundled(),
            &ws.root,
            &Policy::allow_all(),
            "write_file",
            &input,
        );
        match outcome.result {
            Err(CallError::Gate(e)) => assert_eq!(e.step(), "path", "{path}: {e}"),
            other => panic!("{path}: expected a path refusal, got {other:?}"),
        }
    }
    assert_eq!(hash_tree(&ws.outside_path()), before);
}

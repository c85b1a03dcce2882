//! `larch snapshot export|import|verify` end to end, through files and through a pipe, and what the
//! other commands say about an imported store (fsck: absent parent; replay: refused, no crash).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn larch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A store replayed from a small generated trace; returns its head as printed by `trace gen`.
fn small_store(dir: &Path) -> (std::path::PathBuf, String) {
    let trace = dir.join("small.larch");
    let out = larch(&[
        "trace",
        "gen",
        "--out",
        path_str(&trace),
        "--format",
        "larch",
        "--blocks",
        "12",
        "--accounts",
        "200",
        "--ops-per-block",
        "60",
        "--seed",
        "11",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let head = text(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("final commit: ").map(str::to_string))
        .expect("trace gen prints its final commit");
    let store = dir.join("store");
    let out = larch(&["replay", path_str(&trace), "--store", path_str(&store), "--sync", "never"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    (store, head)
}

#[test]
fn export_import_verify_through_files_and_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let (store, head) = small_store(dir.path());
    let snap = dir.path().join("head.snap");
    let out = larch(&["snapshot", "export", path_str(&store), path_str(&snap)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("exported commit {head}")), "{}", text(&out.stdout));

    let out = larch(&["snapshot", "verify", path_str(&snap)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("snapshot of commit {head}")), "{}", text(&out.stdout));

    let imported = dir.path().join("imported");
    let out = larch(&["snapshot", "import", path_str(&snap), path_str(&imported)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary = text(&out.stdout);
    assert!(summary.contains(&format!("imported commit {head}")), "{summary}");
    assert!(summary.contains("absent from the new store"), "{summary}");

    let out = larch(&["fsck", path_str(&imported)]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("absent parent: commit"), "{}", text(&out.stdout));

    // A replay into the imported store is refused with an error, not a crash.
    let out = larch(&["replay", path_str(&dir.path().join("small.larch")), "--store", path_str(&imported)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("already holds commits"), "{}", text(&out.stderr));

    // export | import, through a pipe; the re-export of the imported store is the same file.
    let piped = dir.path().join("piped");
    let mut export = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["snapshot", "export", path_str(&imported), "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let import = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["snapshot", "import", "-", path_str(&piped)])
        .stdin(export.stdout.take().unwrap())
        .output()
        .unwrap();
    let exported = export.wait_with_output().unwrap();
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    assert!(text(&exported.stderr).contains(&format!("exported commit {head}")));
    assert!(import.status.success(), "{}", text(&import.stderr));
    assert!(text(&import.stdout).contains(&format!("imported commit {head}")));
    let again = dir.path().join("again.snap");
    let out = larch(&["snapshot", "export", path_str(&piped), path_str(&again)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read(&snap).unwrap() == std::fs::read(&again).unwrap(), "re-export differs");
}

#[test]
fn a_corrupted_snapshot_is_an_error_naming_the_offset_and_leaves_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = small_store(dir.path());
    let snap = dir.path().join("head.snap");
    assert!(
        larch(&["snapshot", "export", path_str(&store), path_str(&snap), "--level", "0"]).status.success()
    );
    let mut bytes = std::fs::read(&snap).unwrap();
    bytes[100] ^= 2;
    std::fs::write(&snap, &bytes).unwrap();
    let target = dir.path().join("target");
    let out = larch(&["snapshot", "import", path_str(&snap), path_str(&target)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("corrupt snapshot at file offset 24"), "{}", text(&out.stderr));
    assert!(!target.exists());
    let out = larch(&["snapshot", "import", path_str(&snap), path_str(&store)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("already exists"), "{}", text(&out.stderr));
}

/// An import killed midway leaves `.NAME.importing-PID` beside its target (issue 44): the next
/// import into the same target removes it (its process is gone, no writer holds it) and says so;
/// a build directory of a live process is never touched.
#[test]
fn an_import_removes_the_build_directories_of_imports_that_died() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = small_store(dir.path());
    let snap = dir.path().join("s.snap");
    assert!(larch(&["snapshot", "export", path_str(&store), path_str(&snap)]).status.success());
    // A process that has exited: its id names the stale build directory.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = dir.path().join(format!(".copy.importing-{dead}"));
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("control"), b"partial").unwrap();
    let live = dir.path().join(format!(".copy.importing-{}", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let target = dir.path().join("copy");
    let out = larch(&["snapshot", "import", path_str(&snap), path_str(&target)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains(&format!("removed {}", stale.display())), "{stdout}");
    assert!(!stale.exists(), "the dead import's build directory is gone");
    assert!(live.exists(), "a live process's build directory stays");
    assert!(target.join("control").exists());
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".importing-") && !name.ends_with(&std::process::id().to_string()))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

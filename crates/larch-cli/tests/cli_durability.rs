//! End-to-end tests of the store's durability tools: `larch recover` on a store whose control file
//! was emptied, and a replay interrupted by SIGINT/SIGTERM removing the store it created.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn larch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn trace(dir: &Path, blocks: u32) -> String {
    let path = dir.join(format!("t{blocks}.larch"));
    let out = larch(&[
        "trace",
        "gen",
        "--out",
        path_str(&path),
        "--format",
        "larch",
        "--blocks",
        &blocks.to_string(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    path_str(&path).to_string()
}

#[test]
fn recover_reports_then_publishes_the_newest_complete_commit() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace(dir.path(), 5);
    let store = dir.path().join("store");
    let out = larch(&["replay", &trace, "--store", path_str(&store)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::write(store.join("control"), b"").unwrap();
    let chunks = |store: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(store)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("chunk."))
            .map(|name| (name.clone(), std::fs::read(store.join(&name)).unwrap()))
            .collect();
        files.sort();
        files
    };
    let pack_before = chunks(&store);
    assert!(!pack_before.is_empty());

    let out = larch(&["fsck", path_str(&store)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("larch recover"), "{}", text(&out.stderr));

    let out = larch(&["recover", path_str(&store)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("newest complete commit"), "{report}");
    assert!(report.contains("7 commits"), "{report}"); // genesis, setup and 5 blocks
    assert!(report.contains("--apply"), "{report}");
    assert_eq!(std::fs::read(store.join("control")).unwrap(), b"", "recover without --apply wrote");

    let out = larch(&["recover", path_str(&store), "--apply"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("published"), "{}", text(&out.stdout));
    assert!(chunks(&store) == pack_before, "recover changed the pack");
    let out = larch(&["fsck", path_str(&store)]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("commits"), "{}", text(&out.stdout));
    let out = larch(&["recover", path_str(&store)]);
    assert!(text(&out.stdout).contains("nothing to do"), "{}", text(&out.stdout));
}

#[test]
fn a_replay_interrupted_by_a_signal_removes_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace(dir.path(), 300);
    for signal in ["INT", "TERM"] {
        let store = dir.path().join(format!("store-{signal}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_larch"))
            .args(["replay", &trace, "--store", path_str(&store)])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the store holds some commits.
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::fs::metadata(store.join("commits")).map_or(true, |m| m.len() < 16 + 3 * 44) {
            assert!(Instant::now() < deadline, "the replay never started writing");
            assert!(child.try_wait().unwrap().is_none(), "the replay ended before the signal");
            std::thread::sleep(Duration::from_millis(20));
        }
        let status =
            Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().unwrap();
        assert!(status.success());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(130), "{signal}: {}", text(&output.stderr));
        assert!(text(&output.stderr).contains("interrupted"), "{}", text(&output.stderr));
        assert!(!store.exists(), "{signal}: the partial store was left behind");
    }
}

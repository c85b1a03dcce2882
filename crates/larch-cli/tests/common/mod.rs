//! Helpers shared by the CLI's integration tests: run the `larch` binary, read its output.
#![allow(dead_code, clippy::unwrap_used)] // each test binary uses a part of them

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Runs the `larch` binary built for these tests with `args`.
pub fn larch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap()
}

/// Output bytes as text (lossy).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A path as `&str` (test paths are UTF-8).
pub fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs `larch` with `args`, asserts it succeeded, and parses its standard output as JSON.
pub fn larch_json(args: &[&str]) -> serde_json::Value {
    let out = larch(args);
    assert!(out.status.success(), "larch {args:?}: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Generates a small Tezos-like trace (300 accounts, 80 operations per block) of `blocks`
/// regular blocks into `dir/small.larch`; returns its path and the final commit `trace gen` printed.
pub fn small_trace(dir: &Path, blocks: u32, seed: u64) -> (std::path::PathBuf, String) {
    let trace = dir.join("small.larch");
    let (blocks, seed) = (blocks.to_string(), seed.to_string());
    let out = larch(&[
        "trace",
        "gen",
        "--out",
        path_str(&trace),
        "--blocks",
        &blocks,
        "--accounts",
        "300",
        "--ops-per-block",
        "80",
        "--seed",
        &seed,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let head = text(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("final commit: ").map(str::to_string))
        .expect("trace gen prints its final commit");
    (trace, head)
}

/// Starts `larch serve STORE --listen 127.0.0.1:0 …` and reads the address it prints; the
/// server's error output when it exits instead.
pub fn serve(store: &Path, extra: &[&str]) -> Result<(Child, SocketAddr), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_larch"))
        .arg("serve")
        .arg(store)
        .args(["--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    match line.trim().strip_prefix("larch serve: listening on http://") {
        Some(addr) => Ok((child, addr.parse().unwrap())),
        None => {
            let status = child.wait().unwrap();
            let mut stderr = String::new();
            child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
            Err(format!("larch serve exited ({status}): {stderr}"))
        }
    }
}

/// The names in `dir` starting with `prefix`, sorted.
pub fn file_names(dir: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(prefix))
        .collect();
    names.sort();
    names
}

/// `GET target` over HTTP/1.1: the status and the JSON body.
pub fn get(addr: SocketAddr, target: &str) -> (u16, serde_json::Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(stream, "GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = String::from_utf8_lossy(&raw[..split]).split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_slice(&raw[split + 4..]).unwrap())
}

//! A reader in its own process, for benchmarks that run a writer (with or without garbage
//! collection) beside readers: opens STORE read-only (waiting for it to exist), then for SECONDS
//! (or until the file STOP_FILE exists, checked every reload) reloads every 100 ms and walks random paths of the head's tree from the root to a value, and
//! prints a JSON line with what it did and every error it met (a reader must never fail because
//! of the writer or a GC).
//!
//! `cargo run --release -p larch-store --example reader_loop -- STORE SECONDS [SEED [STOP_FILE]]`

use larch_core::Tree;
use larch_store::{DEFAULT_BRANCH, Repo};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

/// Walks from the root of `tree` to a value through random entries, preferring directories (up to
/// three draws per level) so that walks reach the deep levels; returns the steps taken.
fn random_walk(tree: &Tree, rng: &mut StdRng) -> Result<u32, String> {
    let mut path: Vec<Vec<u8>> = Vec::new();
    let mut steps = 0;
    loop {
        let length = tree.length(&path).map_err(|e| e.to_string())?;
        if length == 0 {
            // A value (or an empty directory): read it to the end.
            tree.find(&path).map_err(|e| e.to_string())?;
            return Ok(steps);
        }
        let mut chosen = None;
        for _ in 0..3 {
            let index = rng.random_range(0..length) as usize;
            let entries = tree.list(&path, index, Some(1)).map_err(|e| e.to_string())?;
            let Some((name, child)) = entries.into_iter().next() else {
                return Err(format!("list of a {length}-entry directory at depth {steps} returned nothing"));
            };
            let is_dir = child.length::<&[u8]>(&[]).map_err(|e| e.to_string())? > 0;
            chosen = Some(name);
            if is_dir {
                break;
            }
        }
        let Some(name) = chosen else { return Ok(steps) };
        path.push(name.as_bytes().to_vec());
        steps += 1;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: reader_loop STORE SECONDS [SEED [STOP_FILE]]";
    let store = args.next().ok_or(usage)?;
    let seconds: f64 = args.next().ok_or(usage)?.parse()?;
    let seed: u64 = args.next().map_or(Ok(0), |s| s.parse())?;
    let stop_file = args.next().map(std::path::PathBuf::from);
    let stopped = || stop_file.as_ref().is_some_and(|file| file.exists());
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let mut repo = loop {
        match Repo::open_read_only(&store) {
            Ok(repo) if repo.branch(DEFAULT_BRANCH).is_some() => break repo,
            _ if Instant::now() > deadline || stopped() => return Err(format!("{store} never opened").into()),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let (mut walks, mut steps, mut reloads, mut changed) = (0u64, 0u64, 0u64, 0u64);
    let mut errors: Vec<String> = Vec::new();
    let mut error_count = 0u64;
    let mut last_reload = Instant::now();
    let mut tree = None;
    while Instant::now() < deadline {
        if tree.is_none() || last_reload.elapsed() >= Duration::from_millis(100) {
            if stopped() {
                break;
            }
            last_reload = Instant::now();
            reloads += 1;
            match repo.reload() {
                Ok(true) => {
                    changed += 1;
                    tree = None;
                }
                Ok(false) => {}
                Err(err) => {
                    error_count += 1;
                    errors.push(format!("reload: {err}"));
                }
            }
        }
        if tree.is_none() {
            let head = repo.branch(DEFAULT_BRANCH).ok_or("the store lost its head")?;
            match repo.checkout(&head) {
                Ok(checked_out) => tree = Some(checked_out),
                Err(err) => {
                    error_count += 1;
                    errors.push(format!("checkout {head}: {err}"));
                    continue;
                }
            }
        }
        let Some(current) = &tree else { continue };
        match random_walk(current, &mut rng) {
            Ok(n) => {
                walks += 1;
                steps += u64::from(n);
            }
            Err(err) => {
                error_count += 1;
                errors.push(format!("walk: {err}"));
            }
        }
        errors.truncate(20);
    }
    println!(
        "{{\"seconds\": {:.3}, \"walks\": {walks}, \"steps\": {steps}, \"reloads\": {reloads}, \"heads_seen\": {changed}, \"errors\": {error_count}, \"first_errors\": {:?}}}",
        started.elapsed().as_secs_f64(),
        errors
    );
    Ok(())
}

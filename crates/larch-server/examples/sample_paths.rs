//! Samples random paths of a store's head for the server benchmark: value paths, and directories
//! small enough to read at depth 2. Paths are printed percent-encoded, one per line, ready to be
//! appended to `/context/head/raw/bytes/`. With commit hashes after the seed, only paths that
//! exist (with the same kind) in each of those commits too are kept: paths that live through a
//! span of the chain, so that a load over that span reads no removed path.
//!
//! ```sh
//! cargo run --release -p larch-server --example sample_paths -- STORE 2000 500 values.txt dirs.txt [SEED [COMMIT…]]
//! ```

use larch_core::{Hash, Kind, Tree};
use larch_store::Repo;
use std::io::Write;

/// xorshift64*: enough to pick children; seeded from the command line.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

fn encode(path: &[Vec<u8>]) -> String {
    let mut out = String::new();
    for (i, name) in path.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        for &byte in name {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                out.push(char::from(byte));
            } else {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, store, values, dirs, values_out, dirs_out, rest @ ..] = args.as_slice() else {
        return Err("usage: sample_paths STORE N_VALUES N_DIRS VALUES_OUT DIRS_OUT [SEED]".into());
    };
    let (want_values, want_dirs): (usize, usize) = (values.parse()?, dirs.parse()?);
    let seed: u64 = rest.first().map(|s| s.parse()).transpose()?.unwrap_or(1);
    eprintln!("seed {seed}");
    let repo = Repo::open_read_only(store)?;
    let head = repo.head().ok_or("the store has no head")?;
    let root = repo.checkout(&head)?;
    let mut others = Vec::new();
    for hash in rest.iter().skip(1) {
        others.push(repo.checkout(&hash.parse::<Hash>()?)?);
    }
    let everywhere = |path: &[Vec<u8>], kind: Kind| -> Result<bool, Box<dyn std::error::Error>> {
        for other in &others {
            if other.find_tree(path)?.map(|t| t.kind()) != Some(kind) {
                return Ok(false);
            }
        }
        Ok(true)
    };
    let (mut value_bytes, mut rejected) = (0usize, 0usize);
    let mut rng = Rng(seed | 1);
    let (mut value_paths, mut dir_paths) = (Vec::new(), Vec::new());
    let mut walks = 0usize;
    while (value_paths.len() < want_values || dir_paths.len() < want_dirs)
        && walks < 100 * (want_values + want_dirs)
    {
        walks += 1;
        let mut path: Vec<Vec<u8>> = Vec::new();
        let mut tree: Tree = root.clone();
        loop {
            if tree.kind() == Kind::Contents {
                // Values below the top two levels (accounts, big maps, rolls…), not `protocol`.
                if value_paths.len() < want_values && path.len() >= 3 {
                    if everywhere(&path, Kind::Contents)? {
                        value_bytes += tree.find(&[] as &[&[u8]])?.map_or(0, |c| c.len());
                        value_paths.push(encode(&path));
                    } else {
                        rejected += 1;
                    }
                }
                break;
            }
            let length = tree.length(&[] as &[&[u8]])?;
            // A directory below the top two levels whose depth-2 reading holds at most 256
            // entries: a depth-2 target.
            if path.len() >= 2 && length <= 64 && dir_paths.len() < want_dirs && rng.below(3) == 0 {
                let mut entries = length;
                for (_, child) in tree.list(&[] as &[&[u8]], 0, None)? {
                    entries += child.length(&[] as &[&[u8]])?;
                }
                if entries <= 256 {
                    if everywhere(&path, Kind::Node)? {
                        dir_paths.push(encode(&path));
                    } else {
                        rejected += 1;
                    }
                }
            }
            if length == 0 {
                break;
            }
            let pick = usize::try_from(rng.below(length))?;
            let Some((name, child)) = tree.list(&[] as &[&[u8]], pick, Some(1))?.into_iter().next() else {
                break;
            };
            path.push(name.as_bytes().to_vec());
            tree = child;
        }
    }
    for (file, paths) in [(values_out, &value_paths), (dirs_out, &dir_paths)] {
        let mut out = std::io::BufWriter::new(std::fs::File::create(file)?);
        for path in paths {
            writeln!(out, "{path}")?;
        }
    }
    eprintln!(
        "head {head}: {} value paths (mean value {} bytes), {} directories ({walks} walks, {rejected} paths absent from another commit)",
        value_paths.len(),
        value_bytes / value_paths.len().max(1),
        dir_paths.len()
    );
    Ok(())
}

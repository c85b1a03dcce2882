//! `larch proof produce|verify`: Merkle proofs of a store's context (Irmin tree proofs, Octez
//! V1/V2 encodings or Irmin's repr JSON; with `--stream`, stream proofs in V1/V2 or Irmin's repr JSON; see
//! docs/proofs.md).
//!
//! Paths are `/`-separated steps. The operations are the `--find`s in order, then the `--update`s
//! in order. Both commands print `before <hash>`, one `find <path> <hex|none>` line per find, and
//! `after <hash>`. `verify` exits with 1 when the proof is rejected (undecodable, wrong hashes, or
//! needing a part it blinds).

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use larch_core::Hash;
use larch_proof::encoding::{stream, v1, v2};
use larch_proof::{Op, OpResult, Proof, StreamProof};
use std::path::PathBuf;
use std::process::ExitCode;

/// `larch proof` subcommands.
#[derive(Subcommand, Debug)]
pub enum ProofCommand {
    /// Produce the proof of finds and updates on a commit of a store, and write it to OUT.
    Produce(ProduceArgs),
    /// Verify a proof for finds and updates; print the results; exit 1 if it is rejected.
    Verify(VerifyArgs),
}

/// A proof's encoding.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Octez `Merkle_proof_encoding.V1.Tree32` (binary).
    V1,
    /// Octez `Merkle_proof_encoding.V2.Tree32` (binary, compact; what smart rollups use).
    V2,
    /// Irmin's repr JSON.
    Json,
}

/// The operations of a proof, shared by both subcommands.
#[derive(Args, Debug)]
pub struct OpsArgs {
    /// A path to find (`a/b/c`); repeatable. Finds run first, in order.
    #[arg(long = "find", value_name = "PATH")]
    find: Vec<String>,
    /// An update, `add:PATH=HEX` or `remove:PATH`; repeatable. Updates run after the finds.
    #[arg(long = "update", value_name = "UPDATE")]
    update: Vec<String>,
}

/// Arguments of `larch proof produce`.
#[derive(Args, Debug)]
pub struct ProduceArgs {
    /// The store directory.
    store: PathBuf,
    /// The commit (`Co…` or hex); default: the head of branch `main`.
    #[arg(long)]
    commit: Option<String>,
    #[command(flatten)]
    ops: OpsArgs,
    /// Encoding of the written proof.
    #[arg(long, value_enum, default_value = "v2")]
    encoding: Encoding,
    /// Write a stream proof (the objects read, in order) instead of a tree proof (v1 or v2 only).
    #[arg(long)]
    stream: bool,
    /// Where to write the proof.
    out: PathBuf,
}

/// Arguments of `larch proof verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The proof file.
    proof: PathBuf,
    /// Encoding of the proof.
    #[arg(long, value_enum, default_value = "v2")]
    encoding: Encoding,
    /// The file is a stream proof (v1 or v2 only).
    #[arg(long)]
    stream: bool,
    /// The hash the proof must start from (`Co…` or hex), e.g. a commit's tree hash.
    #[arg(long)]
    hash: Option<String>,
    #[command(flatten)]
    ops: OpsArgs,
}

/// Runs a `larch proof` subcommand.
pub fn run(command: ProofCommand) -> anyhow::Result<ExitCode> {
    match command {
        ProofCommand::Produce(args) => produce(args),
        ProofCommand::Verify(args) => verify(args),
    }
}

fn parse_path(text: &str) -> Vec<Vec<u8>> {
    text.split('/').filter(|step| !step.is_empty()).map(|step| step.as_bytes().to_vec()).collect()
}

fn parse_ops(args: &OpsArgs) -> anyhow::Result<Vec<Op>> {
    let mut ops: Vec<Op> = args.find.iter().map(|path| Op::Find(parse_path(path))).collect();
    for update in &args.update {
        if let Some(rest) = update.strip_prefix("add:") {
            let (path, value) =
                rest.split_once('=').with_context(|| format!("update {update:?}: expected add:PATH=HEX"))?;
            let value =
                hex::decode(value).with_context(|| format!("update {update:?}: the value is not hex"))?;
            ops.push(Op::Add(parse_path(path), value));
        } else if let Some(path) = update.strip_prefix("remove:") {
            ops.push(Op::Remove(parse_path(path)));
        } else {
            bail!("update {update:?}: expected add:PATH=HEX or remove:PATH");
        }
    }
    Ok(ops)
}

fn show(hash: &larch_proof::Hash) -> String {
    Hash(hash.0).to_base58()
}

fn print_outcome(
    before: &larch_proof::KindedHash,
    ops: &[Op],
    results: &[OpResult],
    after: &larch_proof::KindedHash,
) {
    println!("before {}", show(&before.hash));
    for (op, result) in ops.iter().zip(results) {
        if let (Op::Find(path), OpResult::Value(value)) = (op, result) {
            let path: Vec<String> =
                path.iter().map(|step| String::from_utf8_lossy(step).into_owned()).collect();
            let value = value.as_ref().map_or_else(|| "none".to_string(), hex::encode);
            println!("find {} {value}", path.join("/"));
        }
    }
    println!("after {}", show(&after.hash));
}

fn encode(proof: &Proof, encoding: Encoding) -> anyhow::Result<Vec<u8>> {
    Ok(match encoding {
        Encoding::V1 => v1::encode(proof)?,
        Encoding::V2 => v2::encode(proof)?,
        Encoding::Json => larch_proof::json::write(proof)?.into_bytes(),
    })
}

fn decode(bytes: &[u8], encoding: Encoding) -> anyhow::Result<Proof> {
    Ok(match encoding {
        Encoding::V1 => v1::decode(bytes)?,
        Encoding::V2 => v2::decode(bytes)?,
        Encoding::Json => {
            larch_proof::json::read(std::str::from_utf8(bytes).context("the JSON proof is not UTF-8")?)?
        }
    })
}

fn encode_stream(proof: &StreamProof, encoding: Encoding) -> anyhow::Result<Vec<u8>> {
    Ok(match encoding {
        Encoding::V1 => stream::v1::encode(proof)?,
        Encoding::V2 => stream::v2::encode(proof)?,
        Encoding::Json => larch_proof::json::write_stream(proof)?.into_bytes(),
    })
}

fn decode_stream(bytes: &[u8], encoding: Encoding) -> anyhow::Result<StreamProof> {
    Ok(match encoding {
        Encoding::V1 => stream::v1::decode(bytes)?,
        Encoding::V2 => stream::v2::decode(bytes)?,
        Encoding::Json => larch_proof::json::read_stream(
            std::str::from_utf8(bytes).context("the JSON stream proof is not UTF-8")?,
        )?,
    })
}

fn produce(args: ProduceArgs) -> anyhow::Result<ExitCode> {
    let ops = parse_ops(&args.ops)?;
    let lower = crate::lower::open(&args.store, false)?;
    let options = larch_store::RepoOptions { create: false, ..larch_store::RepoOptions::default() };
    let repo = lower
        .open_read_only(&args.store, options)
        .with_context(|| format!("opening store {}", args.store.display()))?;
    let commit = match &args.commit {
        Some(text) => text.parse::<Hash>().with_context(|| format!("commit {text:?}"))?,
        None => repo.head().context("the store has no head commit (branch main); give --commit")?,
    };
    let tree = repo.checkout(&commit).with_context(|| format!("checking out {commit}"))?;
    let (bytes, before, results, after) = if args.stream {
        let produced = larch_core::proof::produce_stream(&tree, &ops)?;
        let bytes = encode_stream(&produced.proof, args.encoding)?;
        (bytes, produced.proof.before, produced.results, produced.proof.after)
    } else {
        let produced = larch_core::proof::produce(&tree, &ops)?;
        let bytes = encode(&produced.proof, args.encoding)?;
        (bytes, produced.proof.before, produced.results, produced.proof.after)
    };
    std::fs::write(&args.out, &bytes).with_context(|| format!("writing {}", args.out.display()))?;
    print_outcome(&before, &ops, &results, &after);
    eprintln!("wrote {} ({} bytes)", args.out.display(), bytes.len());
    Ok(ExitCode::SUCCESS)
}

fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let ops = parse_ops(&args.ops)?;
    let expected = match &args.hash {
        Some(text) => Some(text.parse::<Hash>().with_context(|| format!("hash {text:?}"))?),
        None => None,
    };
    let bytes = std::fs::read(&args.proof).with_context(|| format!("reading {}", args.proof.display()))?;
    let decoded = if args.stream {
        decode_stream(&bytes, args.encoding).map(|proof| (proof.before, Err(proof)))
    } else {
        decode(&bytes, args.encoding).map(|proof| (proof.before, Ok(proof)))
    };
    let (before, proof) = match decoded {
        Ok(decoded) => decoded,
        Err(err) => {
            eprintln!("rejected: cannot decode the proof: {err:#}");
            return Ok(ExitCode::FAILURE);
        }
    };
    if let Some(expected) = expected
        && before.hash.0 != expected.0
    {
        eprintln!("rejected: the proof starts from {}, not {expected}", show(&before.hash));
        return Ok(ExitCode::FAILURE);
    }
    let outcome = match proof {
        Ok(tree_proof) => larch_proof::verify(&tree_proof, &ops).map(|v| (v.before, v.results, v.after)),
        Err(stream_proof) => {
            larch_proof::verify_stream(&stream_proof, &ops).map(|v| (v.before, v.results, v.after))
        }
    };
    match outcome {
        Ok((before, results, after)) => {
            print_outcome(&before, &ops, &results, &after);
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("rejected: {err}");
            Ok(ExitCode::FAILURE)
        }
    }
}

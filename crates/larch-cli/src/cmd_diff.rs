//! `larch diff STORE C1 C2 [PATH]`: the paths added, removed and changed from commit C1 to C2,
//! walking only the sub-trees whose hashes differ (an unchanged sub-tree costs one comparison,
//! however large). The walk uses an explicit stack, so no path depth can overflow it.

use crate::inspect::{kind_name, open_store, parse_path, resolve_commit, show_name, show_path};
use crate::output::{emit, emit_line};
use anyhow::Context;
use clap::Args;
use larch_core::{Kind, Tree};
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `larch diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The store directory.
    store: PathBuf,
    /// The old commit: a hash (`Co…` or hex), a branch, or `head`.
    from: String,
    /// The new commit.
    to: String,
    /// Compare only below this path, `a/b/c` (default: the whole tree).
    path: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// What happened to one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    /// Present only in the new tree.
    Added(Kind),
    /// Present only in the old tree.
    Removed(Kind),
    /// A value whose bytes changed.
    Changed,
}

impl Change {
    fn symbol(self) -> &'static str {
        match self {
            Change::Added(_) => "+",
            Change::Removed(_) => "-",
            Change::Changed => "M",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Change::Added(_) => "added",
            Change::Removed(_) => "removed",
            Change::Changed => "changed",
        }
    }

    fn kind(self) -> Kind {
        match self {
            Change::Added(kind) | Change::Removed(kind) => kind,
            Change::Changed => Kind::Contents,
        }
    }
}

/// The differences between `old` and `new` (either may be absent), below `prefix`, sorted by path.
fn diff(prefix: Vec<String>, old: Option<Tree>, new: Option<Tree>) -> anyhow::Result<Vec<(String, Change)>> {
    let mut changes = Vec::new();
    let mut stack = vec![(prefix, old, new)];
    while let Some((path, old, new)) = stack.pop() {
        let (old, new) = match (old, new) {
            (None, None) => continue,
            (Some(old), None) => {
                changes.push((show_path(&path), Change::Removed(old.kind())));
                continue;
            }
            (None, Some(new)) => {
                changes.push((show_path(&path), Change::Added(new.kind())));
                continue;
            }
            (Some(old), Some(new)) => (old, new),
        };
        if old.hash() == new.hash() {
            continue;
        }
        match (old.kind(), new.kind()) {
            (Kind::Contents, Kind::Contents) => changes.push((show_path(&path), Change::Changed)),
            (Kind::Node, Kind::Node) => {
                let read = |tree: &Tree| {
                    // By name: the two listings are merged (`list` gives a stored directory's
                    // entries in Irmin's bucket order).
                    tree.list_sorted::<&[u8]>(&[], 0, None)
                        .with_context(|| format!("reading {}", show_path(&path)))
                };
                let mut old_entries = read(&old)?.into_iter().peekable();
                let mut new_entries = read(&new)?.into_iter().peekable();
                loop {
                    let order = match (old_entries.peek(), new_entries.peek()) {
                        (None, None) => break,
                        (Some(_), None) => std::cmp::Ordering::Less,
                        (None, Some(_)) => std::cmp::Ordering::Greater,
                        (Some((a, _)), Some((b, _))) => a.as_bytes().cmp(b.as_bytes()),
                    };
                    let (name, old_child, new_child) = match order {
                        std::cmp::Ordering::Less => {
                            let (name, tree) = old_entries.next().context("entry vanished")?;
                            (name, Some(tree), None)
                        }
                        std::cmp::Ordering::Greater => {
                            let (name, tree) = new_entries.next().context("entry vanished")?;
                            (name, None, Some(tree))
                        }
                        std::cmp::Ordering::Equal => {
                            let (name, old_tree) = old_entries.next().context("entry vanished")?;
                            let (_, new_tree) = new_entries.next().context("entry vanished")?;
                            (name, Some(old_tree), Some(new_tree))
                        }
                    };
                    let mut child = path.clone();
                    child.push(show_name(name.as_bytes()));
                    stack.push((child, old_child, new_child));
                }
            }
            (old_kind, new_kind) => {
                let shown = show_path(&path);
                changes.push((shown.clone(), Change::Removed(old_kind)));
                changes.push((shown, Change::Added(new_kind)));
            }
        }
    }
    changes.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(changes)
}

/// Runs `larch diff`.
pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let repo = open_store(&args.store)?;
    let from = resolve_commit(&repo, Some(&args.from))?;
    let to = resolve_commit(&repo, Some(&args.to))?;
    let steps = parse_path(args.path.as_deref());
    let at = |commit| -> anyhow::Result<Option<Tree>> {
        let steps: Vec<&[u8]> = steps.iter().map(|step| step.as_bytes()).collect();
        Ok(repo.checkout(&commit)?.find_tree(&steps)?)
    };
    let changes = diff(steps.clone(), at(from)?, at(to)?)?;
    if args.json {
        let values: Vec<_> = changes
            .iter()
            .map(|(path, change)| json!({ "path": path, "change": change.name(), "kind": kind_name(change.kind()) }))
            .collect();
        let out = json!({ "from": from.to_string(), "to": to.to_string(), "path": show_path(&steps), "changes": values });
        emit_line(serde_json::to_string_pretty(&out)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::new();
    for (path, change) in &changes {
        match change {
            Change::Changed => writeln!(text, "{} {path}", change.symbol())?,
            _ => writeln!(text, "{} {path} ({})", change.symbol(), kind_name(change.kind()))?,
        }
    }
    emit(text)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(entries: &[(&[&str], &str)]) -> Tree {
        let mut tree = Tree::empty();
        for (path, value) in entries {
            tree.add(path, value.as_bytes().to_vec()).unwrap_or_else(|e| panic!("add: {e}"));
        }
        tree
    }

    #[test]
    fn changes_are_found_only_where_hashes_differ() {
        let old = tree(&[(&["a", "x"], "1"), (&["a", "y"], "2"), (&["b"], "3"), (&["c", "d"], "4")]);
        let new = tree(&[(&["a", "x"], "1"), (&["a", "y"], "22"), (&["b", "e"], "5"), (&["f"], "6")]);
        let changes =
            diff(Vec::new(), Some(old.clone()), Some(new.clone())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            changes,
            vec![
                ("a/y".to_owned(), Change::Changed),
                ("b".to_owned(), Change::Removed(Kind::Contents)),
                ("b".to_owned(), Change::Added(Kind::Node)),
                ("c".to_owned(), Change::Removed(Kind::Node)),
                ("f".to_owned(), Change::Added(Kind::Contents)),
            ]
        );
        assert!(diff(Vec::new(), Some(old.clone()), Some(old)).unwrap_or_else(|e| panic!("{e}")).is_empty());
        // Missing on one side: the whole sub-tree is one change.
        let changes = diff(vec!["z".into()], None, Some(new)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(changes, vec![("z".to_owned(), Change::Added(Kind::Node))]);
    }
}

#!/usr/bin/env python3
"""Writes Irmin 3.7.2's hash vectors (crates/larch-core/tests/data/irmin-3.7.2-vectors.json) as
lines the OCaml tests read without a JSON library, every generation rule expanded:

  case NAME
  commit INDEX FROM DATE AUTHOR_HEX MESSAGE_HEX PARENTS     (FROM: -1 or an index; PARENTS: - or i,j)
  add PATH VALUE_HEX                                         (PATH: hex steps joined by '/', '-' for [])
  remove PATH
  tree HASH_HEX
  probe PATH HASH_HEX
  commit_hash HASH_HEX            (or: commit_error)
  end

Usage: vectors_to_lines.py VECTORS_JSON OUT"""
import json
import sys


def path_text(steps):
    return "/".join(steps) if steps else "-"


def rule_entries(rule):
    if rule.startswith("flat: for i in 0.."):
        last = int(rule[len("flat: for i in 0.."):].split(":")[0])
        return [([str(i).encode().hex()], str(i).encode().hex()) for i in range(last + 1)]
    if rule.startswith("for n in ["):
        sizes = [int(n) for n in rule[len("for n in ["):].split("]")[0].split(",")]
        assert rule.endswith("path ['s'+str(n)] -> bytes(k % 256 for k in range(n))"), rule
        return [([("s" + str(n)).encode().hex()], bytes(k % 256 for k in range(n)).hex()) for n in sizes]
    if rule.startswith("path ['d'+str(i) for i in 0.."):
        last = int(rule[len("path ['d'+str(i) for i in 0.."):].split("]")[0])
        assert rule.endswith("-> 'leaf'"), rule
        return [([("d" + str(i)).encode().hex() for i in range(last + 1)], b"leaf".hex())]
    raise SystemExit(f"unknown rule {rule!r}")


def main():
    vectors = json.load(open(sys.argv[1]))
    out = []
    for case in vectors["cases"]:
        out.append(f"case {case['name']}")
        for commit in case["commits"]:
            info = commit["info"]
            parents = ",".join(str(p) for p in commit["parents"]) or "-"
            out.append(
                f"commit {commit['index']} {commit.get('from', -1)} {info['date']} "
                f"{info['author'].encode().hex() or '-'} {info['message'].encode().hex() or '-'} {parents}"
            )
            if "rule" in commit:
                entries = rule_entries(commit["rule"])
                assert len(entries) == commit["entry_count"], case["name"]
            else:
                entries = [([s["hex"] for s in e["path"]], e["value"]["hex"]) for e in commit["entries"]]
            for steps, value in entries:
                out.append(f"add {path_text(steps)} {value or '-'}")
            for removed in commit.get("removes", []):
                out.append(f"remove {path_text([s['hex'] for s in removed])}")
            expected = commit["expected"]
            out.append(f"tree {expected['tree_hash']['hex']}")
            for probe in expected.get("probes", []):
                out.append(f"probe {path_text([s['hex'] for s in probe['path']])} {probe['hash']['hex']}")
            if "commit_hash" in expected:
                out.append(f"commit_hash {expected['commit_hash']['hex']}")
            else:
                out.append("commit_error")
        out.append("end")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


main()

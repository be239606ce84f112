#!/usr/bin/python3
"""`zklock prune` and `--lock-folders` against a real ZooKeeper server.

    tests/with-zk /usr/bin/python3 tests/zklock/test_prune.py build/tools/zklock [CASE...]

The helpers, the environment and the runner are test_zklock.py's (its header says how
a case runs); only the cases differ.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_zklock as z  # noqa: E402  (parses argv: ZKLOCK [CASE...])

z.CASES.clear()
check, expect, run, case = z.check, z.expect, z.run, z.case


def kazoo_tree(*paths, data=None):
    """Creates persistent paths (with their parents) through kazoo; returns the client."""
    k = z.kazoo_client()
    for p in paths:
        k.ensure_path(p)
    for p, value in (data or {}).items():
        k.create(p, value, makepath=True)
    return k


@case
def prune_deletes_empty_folders_only():
    base = z.lock_path("prune")
    k = kazoo_tree(base + "/a/b", data={base + "/record": b"data"})
    try:
        h = z.holder(base + "/held", ["--lock-folders", "persistent"])
        try:
            out, _, _ = expect(["prune", "--dry-run", base], 0)
            check(out.splitlines() == [base + "/a/b", base + "/a"],
                  "dry run printed %r" % out)
            check(k.exists(base + "/a/b"), "the dry run deleted")
            out, _, _ = expect(["prune", base, "--json"], 0)
            doc = json.loads(out)
            check(doc["prefix"] == base and doc["dry_run"] is False and
                  doc["folders"] == [base + "/a/b", base + "/a"], "json: %r" % doc)
            check(not k.exists(base + "/a"), "/a is still there")
            check(len(z.status(base + "/held")) == 1, "the holder's node went")
        finally:
            h.release()
        check(h.wait() == 0, "holder: exit %s; %r" % (h.p.returncode, h.stderr()))
        # Given back, its persistent folder is empty: prune takes it, the record stays.
        out, _, _ = expect(["prune", base], 0)
        check(out.splitlines() == [base + "/held"], "prune printed %r" % out)
        check(k.exists(base + "/record") and k.exists(base), "the record or base went")
        expect(["prune", base + "/nothing-here"], 0)
    finally:
        k.stop()
        k.close()


@case
def prune_usage_errors():
    expect(["prune"], 64, stderr_has="missing prefix")
    expect(["prune", "rel"], 64, stderr_has="prefix \"rel\" is not absolute")
    expect(["status", "--dry-run", "/x"], 64, stderr_has="--dry-run works with prune only")
    expect(["--dry-run", "/x", "--", "true"], 64, stderr_has="--dry-run works with prune")
    expect(["--lock-folders", "maybe", "/x", "--", "true"], 64,
           stderr_has="invalid --lock-folders \"maybe\"")
    expect(["prune", "/zookeeper"], 64, stderr_has="zookeeper")


@case
def prune_racing_zklocks():
    """Three shells run zklock on persistent folders (their own and a shared one) while
    prune runs again and again: every zklock succeeds, and prune deleted folders meanwhile."""
    base = z.lock_path("prune-race")
    k = kazoo_tree(base, data={base + "/keep": b"x"})
    try:
        loop = ('for i in $(seq 12); do "$@" --lock-folders persistent %s/own-$W -- true '
                '&& "$@" --lock-folders persistent %s/shared -- true || exit 1; done'
                % (base, base))
        shells = []
        for w in range(3):
            env = dict(z.ENV, W=str(w))
            shells.append(subprocess.Popen(["sh", "-c", loop, "sh"] + z.zklock_cmd([]),
                                           env=env, stdin=subprocess.DEVNULL,
                                           stderr=subprocess.PIPE))
        deleted = 0
        while any(s.poll() is None for s in shells):
            rc, out, err, _ = run(["prune", base])
            check(rc == 0, "prune: exit %s; %r" % (rc, err))
            deleted += len(out.splitlines())
        for s in shells:
            err = s.stderr.read().decode(errors="replace")
            check(s.wait() == 0, "a zklock loop failed: exit %s; %r" % (s.returncode, err))
        check(deleted > 0, "prune deleted nothing while the zklocks ran")
        expect(["prune", base], 0)
        check(k.get_children(base) == ["keep"], "left: %r" % k.get_children(base))
    finally:
        k.stop()
        k.close()


if __name__ == "__main__":
    try:
        sys.exit(z.main())
    finally:
        subprocess.run(["rm", "-rf", "--", z.TMP])

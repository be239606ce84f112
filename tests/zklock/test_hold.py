#!/usr/bin/python3
"""zklock hold and zklock release against a real ZooKeeper server: a maintenance hold
keeps every host's job off after the hold command has exited, waits its turn behind a
holder, ends at its time (the server deletes its TTL node) and on `zklock release`, is
shown by `zklock status`, keeps a Curator contender waiting too; and a server without
TTL nodes (extendedTypesEnabled=false) gets a clear refusal.

    tests/with-zk /usr/bin/python3 tests/zklock/test_hold.py build/tools/zklock [CASE...]

The helpers, the environment and the runner are test_zklock.py's (its header says how
a case runs). The server tests/with-zk starts has extended types enabled and checks its
containers and TTL nodes every 100 ms (scripts/zk-server); the refusal case starts a
second server of its own without them (ZKL_ZK_EXTENDED_TYPES=0).
"""

import calendar
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_zklock as z  # noqa: E402  (parses argv: ZKLOCK [CASE...])
from test_zklock import (Proc, Skip, case, check, expect, holder, lock_path,  # noqa: E402
                         run, status_lines, tmp, waiter_queued)
from test_fleet import Curator  # noqa: E402  (tests/interop/Peer.java's driver)

z.CASES.clear()  # test_zklock.py's cases, and test_fleet.py's


def hold_line(path):
    """The `.hold` line of `zklock status path` as a dict, or None."""
    rc, out, err, _ = run(["status", path])
    check(rc == 0, "zklock status %s: exit %s; stderr %r" % (path, rc, err))
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] == path + ".hold":
            check(len(f) == 9, "status: hold line %r has not nine fields" % line)
            return dict(zip(("path", "reason", "kind", "role", "by", "pid", "until",
                             "token", "node"), f))
    return None


def utc_ms(text):
    """2026-01-02T03:04:05.678Z in ms since the epoch."""
    t = calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))
    return t * 1000 + int(text[20:23])


def job(name):
    """A command that records that it ran, in tmp(name)."""
    return ["sh", "-c", 'echo ran >> "$1"', "job", tmp(name)]


def ran(name):
    try:
        with open(tmp(name)) as f:
            return len(f.read().splitlines())
    except FileNotFoundError:
        return 0


@case
def hold_outlives_its_command_and_release_ends_it():
    """zklock hold exits 0 and the lock stays held: three hosts' jobs (-n) find it busy
    and do not run; status shows the hold (reason, who, until its creation plus --for,
    holding), its node data names it; a job queued behind it gets in once zklock release
    ends it; release again says there is none."""
    p = lock_path("outlives")
    _, err, _ = expect(["hold", p, "--for", "10m", "--reason", "database migration"], 0,
                       stderr_has="holding %s until " % p)
    nodes = status_lines(p)
    check(len(nodes) == 1 and nodes[0]["role"] == "holder" and
          nodes[0]["data"].startswith("zklock-hold by=") and
          nodes[0]["data"].endswith(" for=600000 reason=database migration"),
          "the queue after the hold: %r" % nodes)
    h = hold_line(p)
    check(h is not None and h["reason"] == "database migration" and h["role"] == "holding"
          and "@" in h["by"] and nodes[0]["node"].endswith("/" + h["node"]),
          "status: hold line %r" % h)
    check(utc_ms(h["until"]) - utc_ms(nodes[0]["since"]) == 600000,
          "until %s is not 10 min after the hold's creation %s" %
          (h["until"], nodes[0]["since"]))
    for host in range(3):
        expect(["-n", p, "--"] + job("outlives"), 1,
               stderr_has="is held by zklock-hold by=")
    check(ran("outlives") == 0, "a job ran under the hold")
    w = Proc([p, "--"] + job("outlives"))
    waiter_queued(p, w, 1)
    expect(["release", p], 0, stderr_has="released the hold of %s by " % p)
    check(w.wait() == 0, "the job queued behind the hold: exit %s; stderr %r" %
          (w.p.returncode, w.stderr()))
    check(ran("outlives") == 1, "the queued job ran %d times" % ran("outlives"))
    check(hold_line(p) is None, "status still shows a hold")
    expect(["release", p], 1, stderr_has="%s has no maintenance hold" % p)


GUIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                     "GUIDE.md")


@case
def guide_hold_sample_is_real():
    """GUIDE's sample of a hold in `zklock status` (its node's line and its .hold line)
    has the fields and forms that the tool prints for a hold."""
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^(/\S+)\.hold\t.*$", text, flags=re.M)
    check(m is not None, "GUIDE.md has no .hold line of zklock status")
    base = m.group(1)
    node_line = re.search(r"^%s/\S+\tzklock-hold .*$" % re.escape(base), text, flags=re.M)
    check(node_line is not None, "GUIDE.md has no line of the hold's node")
    sample = [node_line.group(0).split("\t"), m.group(0).split("\t")]
    p = lock_path("guide-hold")
    expect(["hold", p, "--for", "2h", "--reason", "moving the database to db2"], 0)
    rc, out, err, _ = run(["status", p])
    expect(["release", p], 0)
    real = [line.split("\t") for line in out.splitlines()]
    iso = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"
    name = r"_c_[0-9a-f-]{36}-lock-\d{10}"
    forms = [[r"^%s/" + name + "$", r"^zklock-hold by=\S+@\S+ for=7200000 "
              r"reason=moving the database to db2$", r"^holder$", r"^mutex$", r"^-$", r"^-$",
              iso, r"^\d+$", r"^-$"],
             [r"^%s\.hold$", r"^moving the database to db2$", r"^hold$", r"^holding$",
              r"^\S+@\S+$", r"^-$", iso, r"^-$", "^" + name + "$"]]
    check(len(real) == 2, "status of a hold: %r" % real)
    for which, lines, b in (("real", real, p), ("GUIDE", sample, base)):
        for line, form in zip(lines, forms):
            check(len(line) == 9, "%s: %r has not nine fields" % (which, line))
            for value, f in zip(line, form):
                f = f.replace("%s", re.escape(b))
                check(re.match(f, value), "%s: %r is not of the form %s" % (which, value, f))
        check(lines[1][8] == lines[0][0].rsplit("/", 1)[1], "%s: the .hold line names "
              "another node: %r" % (which, lines))
        check(utc_ms(lines[1][6]) - utc_ms(lines[0][6]) == 7200000,
              "%s: until is not since + 2 h: %r" % (which, lines))


@case
def hold_ends_at_its_time():
    """A 3 s hold: a job waiting behind it (zklock -w 60) starts once the server has
    deleted the hold's node, not before its creation plus 3 s; no release needed."""
    p = lock_path("ends")
    expect(["hold", p, "--for", "3s", "--reason", "short"], 0)
    since = utc_ms(status_lines(p)[0]["since"]) / 1000.0
    w = Proc(["-w", "60", p, "--", "sh", "-c", 'date +%s.%N > "$1"', "job", tmp("ends")])
    rc = w.wait(60)
    check(rc == 0, "the job behind the hold: exit %s; stderr %r" % (rc, w.stderr()))
    with open(tmp("ends")) as f:
        started = float(f.read().strip())
    # The server's clock is this host's (the test server runs here).
    check(started >= since + 3.0 - 0.05, "the job started %.3f s after the hold was "
          "made, before its 3 s were over" % (started - since))
    check(hold_line(p) is None, "status still shows the hold")


@case
def hold_waits_its_turn():
    """Behind a holder: hold -n gives up (exit 1, nothing held); a hold queued behind the
    holder takes the lock when it goes, in its place, before a job queued after it; the
    hold command exits and the job still waits until the hold is released."""
    p = lock_path("turn")
    h = holder(p)
    expect(["hold", "-n", p, "--for", "1h", "--reason", "r"], 1, stderr_has="no hold taken")
    check(hold_line(p) is None, "hold -n left a hold")
    hd = Proc(["hold", p, "--for", "1h", "--reason", "after the holder"])
    waiter_queued(p, hd, 1)
    w = Proc([p, "--"] + job("turn"))
    waiter_queued(p, w, 2)
    h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    check(hd.wait() == 0, "hold: exit %s; stderr %r" % (hd.p.returncode, hd.stderr()))
    line = hold_line(p)
    check(line is not None and line["role"] == "holding", "status: hold line %r" % line)
    nodes = status_lines(p)
    check([n["role"] for n in nodes] == ["holder", "waiting"] and
          nodes[1]["data"].endswith(":%d" % w.pid),
          "the queue with the hold ahead of the job: %r" % nodes)
    check(ran("turn") == 0, "the job ran under the hold")
    expect(["release", p], 0)
    check(w.wait() == 0, "the job: exit %s" % w.p.returncode)
    check(ran("turn") == 1, "the job ran %d times" % ran("turn"))


@case
def hold_signal_while_waiting():
    """SIGTERM to a hold waiting behind a holder: it withdraws from the queue and exits
    143; nothing is held once the holder goes."""
    p = lock_path("signal")
    h = holder(p)
    hd = Proc(["hold", p, "--for", "1h", "--reason", "r"])
    waiter_queued(p, hd, 1)
    hd.signal(signal.SIGTERM)
    check(hd.wait() == 128 + signal.SIGTERM, "hold: exit %s, expected 143; stderr %r" %
          (hd.p.returncode, hd.stderr()))
    nodes = status_lines(p)
    check(len(nodes) == 1 and nodes[0]["role"] == "holder", "the queue %r" % nodes)
    h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    expect(["-n", p, "--", "true"], 0)
    check(hold_line(p) is None, "a hold after the signal")


@case
def hold_usage_errors():
    """A hold needs --for (never forever) and --reason; --for and --reason belong to hold;
    hold takes a mutex only."""
    p = lock_path("usage")
    for args, says in ((["hold", p, "--reason", "r"], "needs --for"),
                       (["hold", p, "--for", "1h"], "needs --reason"),
                       (["hold", p, "--for", "0", "--reason", "r"], "invalid --for"),
                       (["hold", p, "--for", "1h", "--reason", ""], "invalid --reason"),
                       (["hold", p, "--for", "1h", "--reason", "a\nb"], "invalid --reason"),
                       (["hold", "--read", p, "--for", "1h", "--reason", "r"], "mutex"),
                       (["release", p, "--for", "1h"], "options of zklock hold"),
                       (["--for", "1h", p, "--", "true"], "options of zklock hold"),
                       (["hold", "--for", "1h", "--reason", "r"], "missing lock path")):
        expect(args, 64, stderr_has=says)
    check(status_lines(p) == [], "a refused hold queued a node")


@case
def curator_waits_behind_a_hold():
    """A Curator InterProcessMutex on the path waits behind the hold as behind any
    holder: its timed acquire times out while the hold stands, and an acquire started
    then gets the lock once zklock release ends the hold."""
    p = lock_path("curator")
    expect(["hold", p, "--for", "10m", "--reason", "migration"], 0)
    c = Curator()
    try:
        c.say("t acquire mutex %s 1500" % p)
        c.expect("t timeout")
        c.say("w acquire mutex %s -1" % p)
        z.wait_until(lambda: len(status_lines(p)) == 2, "Curator's node is queued")
        check(status_lines(p)[1]["role"] == "waiting", "queue %r" % status_lines(p))
        expect(["release", p], 0)
        c.expect("w acquired")
        c.say("w release")
        c.expect("w released")
    finally:
        c.close()


@case
def kazoo_waits_behind_a_hold():
    """With --naming kazoo the hold's node has kazoo's name (uuid hex, __lock__, the
    number of the node it replaced), and a kazoo Lock waits behind it: a timed acquire
    fails while it stands and succeeds once it is released."""
    p = lock_path("kazoo")
    expect(["hold", "--naming", "kazoo", p, "--for", "10m", "--reason", "kazoo"], 0)
    nodes = status_lines(p)
    check(len(nodes) == 1 and nodes[0]["layout"] == "kazoo-lock" and
          re.search(r"/[0-9a-f]{32}__lock__\d{10}$", nodes[0]["node"]),
          "the hold's node with kazoo's naming: %r" % nodes)
    k = z.kazoo_client()
    try:
        from kazoo.exceptions import LockTimeout
        lock = k.Lock(p, "kazoo-peer")
        try:
            got = lock.acquire(timeout=1.5)
        except LockTimeout:
            got = False
        check(not got, "kazoo got the lock under the hold")
        # kazoo queues behind the hold before it is released: a folder left empty would
        # be the server's to reap (a container), and kazoo makes its folder only once.
        result = {}
        waiter = threading.Thread(
            target=lambda: result.setdefault("got", lock.acquire(timeout=20)))
        waiter.start()
        deadline = time.monotonic() + 20
        while len(k.get_children(p)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        check(len(k.get_children(p)) == 2, "kazoo did not queue behind the hold")
        check(waiter.is_alive(), "kazoo's acquire ended with the hold still there")
        expect(["release", p], 0)
        waiter.join(30)
        check(result.get("got") is True, "kazoo did not get the lock after the release")
        lock.release()
    finally:
        k.stop()
        k.close()


@case
def refused_without_ttl_nodes():
    """On a server without extended types (extendedTypesEnabled=false, ZooKeeper's
    default), zklock hold is refused with exit 78 and a message naming the setting, and
    leaves the lock free."""
    script = os.environ.get("ZKL_TEST_ZK_SCRIPT")
    if not script:
        raise Skip("ZKL_TEST_ZK_SCRIPT is not set (run through tests/with-zk)")
    d = tempfile.mkdtemp(prefix="zklock-hold-nottl.", dir=z.TMP)
    env = dict(os.environ, ZKL_ZK_EXTENDED_TYPES="0")
    r = subprocess.run([script, "start", d], env=env, capture_output=True, text=True,
                       timeout=150)
    check(r.returncode == 0, "a server without extended types did not start: %r" % r.stderr)
    try:
        servers = r.stdout.strip()
        p = lock_path("nottl")
        _, err, _ = expect(["-s", servers, "hold", p, "--for", "1h", "--reason", "r"], 78,
                           stderr_has=["makes no TTL nodes", "extendedTypesEnabled=true",
                                       "nothing is held"])
        expect(["-s", servers, "-n", p, "--", "true"], 0)
    finally:
        subprocess.run([script, "stop", d], capture_output=True, timeout=60)


if __name__ == "__main__":
    try:
        sys.exit(z.main())
    finally:
        subprocess.run(["rm", "-rf", "--", z.TMP])

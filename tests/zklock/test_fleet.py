#!/usr/bin/python3
"""Tests of what zklock offers for running it on a fleet, against a real ZooKeeper server:
--metrics-file, `zklock check`, --max-runtime and --warn-after, systemd's notification
socket, and the planned failover of a leader (zklock revoke, SIGUSR1).

    tests/with-zk /usr/bin/python3 tests/zklock/test_fleet.py build/tools/zklock [CASE...]

It uses the helpers of test_zklock.py beside it (the same arguments, environment and
rules: no sleeps as synchronisation, every case prints ok, FAIL or skip). The metrics
files are checked with `promtool check metrics` (Debian's prometheus package; without
it, and outside CI, by this file's parser alone) and parsed here. The Curator holder of
the check case is tests/interop/Peer.java (ZKL_INTEROP_JAVA and ZKL_INTEROP_CLASSPATH,
which meson sets); the kazoo holder is kazoo for the system Python.
"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_zklock as z  # noqa: E402  (parses the same argv, makes the same TMP)
from test_zklock import (Failure, Skip, Proc, check, expect, run, status_lines,  # noqa: E402
                         owners, wait_until, holder, waiter_queued, kazoo_client,
                         stamping_job, stamp_once_job, job_started, check_handover,
                         kill_leftovers, alive)

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def lock_path(name):
    return "%s/fleet-%s" % (z.ROOT, name)


# ---- the metrics file ----

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_metrics(path):
    """The file's samples as {(name, reason or None): value}, after checking the text
    format: HELP and TYPE (gauge) before each metric's samples, the labels lock and
    job_name on each, and with promtool when it is installed."""
    with open(path) as f:
        text = f.read()
    check(text.endswith("\n"), "%s does not end with a newline" % path)
    promtool = shutil.which("promtool")
    if promtool:
        p = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                           capture_output=True)
        check(p.returncode == 0, "promtool check metrics: %s %s\n%s" %
              (p.stdout.decode(), p.stderr.decode(), text))
    elif os.environ.get("CI") == "true":
        raise Failure("promtool is not installed (Debian's prometheus package); CI=true")
    samples, typed, helped = {}, set(), set()
    labels_seen = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split(" ")[2])
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            check(parts[3] == "gauge", "not a gauge: %r" % line)
            typed.add(parts[2])
            continue
        m = SAMPLE.match(line)
        check(m is not None, "not a sample line: %r" % line)
        name, body, value = m.groups()
        check(name in typed and name in helped, "%s has no HELP or TYPE before it" % name)
        labels, pos = {}, 0
        for lm in LABEL.finditer(body):
            check(lm.start() == pos, "bad labels %r" % body)
            labels[lm.group(1)] = lm.group(2)
            pos = lm.end()
        check(pos == len(body), "bad labels %r" % body)
        key = (name, labels.pop("reason", None))
        ident = (labels.get("lock"), labels.get("job_name"))
        check(set(labels) == {"lock", "job_name"}, "labels of %s: %r" % (name, labels))
        check(labels_seen in (None, ident), "labels differ: %r %r" % (labels_seen, ident))
        labels_seen = ident
        samples[key] = float(value)
    samples["labels"] = labels_seen
    return samples


def metrics_file(name):
    return os.path.join(z.TMP, name + ".prom")


def expect_metrics(path, lock, job, **want):
    """Parses path and checks its labels and the values given (exit_status=0, ran=1,
    busy=0, ...: a name without the zklock_ prefix; busy and once_per are the reasons
    of zklock_skipped). Every flag not given must be 0. Returns the samples."""
    m = parse_metrics(path)
    check(m["labels"] == (lock, job), "labels %r, not %r" % (m["labels"], (lock, job)))
    flags = {"ran": 0, "busy": 0, "once_per": 0, "lost": 0, "revoked": 0,
             "max_runtime_exceeded": 0, "warn_after_exceeded": 0}
    flags.update(want)
    for k, v in flags.items():
        key = ("zklock_skipped", k) if k in ("busy", "once_per") else ("zklock_" + k, None)
        check(m.get(key) == v, "%s: %s is %r, expected %r" % (path, k, m.get(key), v))
    for k in ("wait_seconds", "hold_seconds"):
        check(m[("zklock_" + k, None)] >= 0, "%s negative" % k)
    return m


@case
def metrics_every_state():
    """A metrics file for each state a run ends in: ran (the last success on the
    server's clock: the --once-per record's mtime), skipped busy (the last success kept
    from the file it replaces), skipped by --once-per, lost, revoked, killed by
    --max-runtime, past --warn-after. promtool accepts every one."""
    k = kazoo_client()
    try:
        p = lock_path("metrics")
        f = metrics_file("metrics")
        opts = ["--metrics-file", f, "--job-name", 'nightly "backup"']
        # ran, with --once-per: the last success is the record's mtime, to the ms
        expect(opts + ["--once-per", "1h", p, "--", "sleep", "0.3"], 0)
        m = expect_metrics(f, p, 'nightly \\"backup\\"', ran=1, exit_status=0)
        mtime = k.get(p + ".last-run")[1].mtime
        last = m[("zklock_last_success_timestamp_seconds", None)]
        check(round(last * 1000) == mtime, "last success %r, record mtime %d" % (last, mtime))
        check(0.3 <= m[("zklock_hold_seconds", None)] < 10,
              "hold %r for a 0.3 s job" % m[("zklock_hold_seconds", None)])
        # skipped: --once-per finds it done (the same record's time)
        expect(opts + ["-q", "--once-per", "1h", p, "--", "true"], 0)
        m = expect_metrics(f, p, 'nightly \\"backup\\"', once_per=1, exit_status=0)
        check(m[("zklock_last_success_timestamp_seconds", None)] == last, "once-per skip")
        # skipped: busy (-n against a holder); the last success carries over
        h = holder(p)
        try:
            expect(opts + ["-n", p, "--", "true"], 1)
            m = expect_metrics(f, p, 'nightly \\"backup\\"', busy=1, exit_status=1)
            check(m[("zklock_last_success_timestamp_seconds", None)] == last,
                  "busy: last success %r, not %r" %
                  (m.get(("zklock_last_success_timestamp_seconds", None)), last))
            # and a wait that ran out: its length
            expect(opts + ["-w", "0.4", p, "--", "true"], 1)
            m = expect_metrics(f, p, 'nightly \\"backup\\"', busy=1, exit_status=1)
            check(0.4 <= m[("zklock_wait_seconds", None)] < 5, "wait %r" %
                  m[("zklock_wait_seconds", None)])
        finally:
            h.release()
        check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
        # ran, without --once-per: the success is our node's creation time (server)
        before = time.time()
        expect(["--metrics-file", f, p, "--", "true"], 0)
        m = expect_metrics(f, p, "true", ran=1, exit_status=0)
        t = m[("zklock_last_success_timestamp_seconds", None)]
        check(before - 5 < t < time.time() + 5, "last success %r, host time %r" % (t, before))
        # lost: the leader's node deleted from outside
        f2 = metrics_file("metrics-lost")
        pl = lock_path("metrics-lost")
        zl = Proc(["--leader", "--metrics-file", f2, "--kill-grace", "0.5", pl, "--", "sh",
                   "-c", "echo ready; exec sleep 60"])
        zl.wait_line("^ready$", stream="out")
        k.delete(status_lines(pl)[0]["node"])
        check(zl.wait(20) == 70, "lost: exit %s; %r" % (zl.p.returncode, zl.stderr()))
        expect_metrics(f2, pl, "sh", ran=1, lost=1, exit_status=70)
        # revoked
        f3 = metrics_file("metrics-revoked")
        pr = lock_path("metrics-revoked")
        zr = Proc(["--revocable", "--metrics-file", f3, pr, "--", "sh", "-c",
                   "echo ready; exec sleep 60"])
        zr.wait_line("^ready$", stream="out")
        expect(["revoke", pr], 0)
        check(zr.wait(20) == 71, "revoked: exit %s; %r" % (zr.p.returncode, zr.stderr()))
        expect_metrics(f3, pr, "sh", ran=1, revoked=1, exit_status=71)
        # killed by --max-runtime, after --warn-after
        f4 = metrics_file("metrics-max")
        expect(["--metrics-file", f4, "--warn-after", "0.2", "--max-runtime", "0.6",
                "--kill-grace", "0.3", p, "--", "sh", "-c", "trap '' TERM; sleep 30"], 124)
        expect_metrics(f4, p, "sh", ran=1, max_runtime_exceeded=1, warn_after_exceeded=1,
                       exit_status=124)
        # no server at all: the exit status still gets out
        f5 = metrics_file("metrics-noserver")
        expect(["-s", "127.0.0.1:1", "--connect-timeout", "500", "--metrics-file", f5, p,
                "--", "true"], 69)
        expect_metrics(f5, p, "true", exit_status=69)
        leftovers = [n for n in os.listdir(z.TMP) if n.endswith(".tmp")]
        check(leftovers == [], "temporary files left: %r" % leftovers)
    finally:
        k.stop()
        k.close()


@case
def metrics_file_errors():
    p = lock_path("metrics-errors")
    expect(["--metrics-file", "/nonexistent-dir/x.prom", p, "--", "true"], 64,
           stderr_has="/nonexistent-dir")
    expect(["--job-name", "a\nb", p, "--", "true"], 64, stderr_has="--job-name")
    expect(["status", "--metrics-file", metrics_file("x"), p], 64,
           stderr_has="options of a run")
    expect(["--held-longer", "1h", p, "--", "true"], 64, stderr_has="zklock check")


@case
def metrics_file_planted_symlink():
    """The metrics folder is shared: a symlink planted at the temporary name zklock used
    to take (FILE.PID.tmp, PID zklock's, known to the command as $PPID) is never
    followed; the file it points to keeps its bytes, and the metrics are written."""
    p = lock_path("metrics-symlink")
    d = tempfile.mkdtemp(prefix="textfile.", dir=z.TMP)
    f = os.path.join(d, "job.prom")
    victim = os.path.join(z.TMP, "victim-of-metrics")
    with open(victim, "w") as v:
        v.write("precious\n")
    plant = 'ln -s %s "%s.$PPID.tmp"' % (shlex.quote(victim), f)
    expect(["--metrics-file", f, p, "--", "sh", "-c", plant], 0)
    with open(victim) as v:
        got = v.read()
    check(got == "precious\n", "the symlink's target was written: %r" % got[:200])
    check(not os.path.islink(f) and os.path.isfile(f), "the metrics file is not a file")
    expect_metrics(f, p, "sh", ran=1, exit_status=0)
    left = sorted(n for n in os.listdir(d) if n != "job.prom")
    check(len(left) == 1 and os.path.islink(os.path.join(d, left[0])),
          "the folder holds %r: the planted link only, left alone" % left)


@case
def metrics_file_not_regular():
    """A FIFO (or a folder, a device) at the metrics file is refused at the start (64),
    and one put there while the command runs is refused when the metrics are written:
    zklock never blocks opening it. A metrics folder that is a regular file is "Not a
    directory"."""
    p = lock_path("metrics-fifo")
    d = tempfile.mkdtemp(prefix="textfile.", dir=z.TMP)
    fifo = os.path.join(d, "fifo.prom")
    os.mkfifo(fifo)
    expect(["--metrics-file", fifo, p, "--", "true"], 64, timeout=20,
           stderr_has="a FIFO, not a regular file")
    expect(["--metrics-file", "/dev/null", p, "--", "true"], 64, timeout=20,
           stderr_has="a device, not a regular file")
    expect(["--metrics-file", d, p, "--", "true"], 64, timeout=20,
           stderr_has="a folder, not a regular file")
    # Made a FIFO while the command runs: the run's status stands, the metrics are not
    # written, and zklock does not hang.
    f = os.path.join(d, "late.prom")
    swap = "mkfifo %s" % shlex.quote(f)
    _, err, _ = expect(["--metrics-file", f, p, "--", "sh", "-c", swap], 0, timeout=20)
    check("cannot write the metrics to %s: a FIFO, not a regular file" % f in err,
          "stderr %r" % err)
    check([n for n in os.listdir(d) if n.endswith(".tmp")] == [], "temporary file left")
    plain = os.path.join(z.TMP, "plain-file")
    open(plain, "w").close()
    expect(["--metrics-file", plain + "/x.prom", p, "--", "true"], 64,
           stderr_has="folder %s: Not a directory" % plain)


# ---- --max-runtime, --warn-after ----

@case
def max_runtime_kills_stubborn_job():
    """A job that ignores SIGTERM (and its background child) runs past --max-runtime:
    it gets SIGTERM, then SIGKILL --kill-grace later; zklock exits 124, and the next
    holder, queued meanwhile, starts only after the last record of both."""
    p = lock_path("max-runtime")
    # Both queue behind a holder first, so that the next holder is queued before the
    # limit can pass, however slow the machine.
    h = holder(p)
    a = Proc(["-v", "--max-runtime", "1", "--kill-grace", "0.8", p, "--"] +
             stamping_job("max-a"))
    waiter_queued(p, a, 1)
    b = Proc([p, "--"] + stamp_once_job("max-b"))
    waiter_queued(p, b, 2)
    h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    pids = []
    try:
        a.wait_line(r"^zklock: acquired ")
        pids = job_started("max-a")
        _, t_term = a.wait_line_at(r"^zklock: bash ran past --max-runtime \(1 s\): stopping it$")
        rc = a.wait(20)
        secs = time.monotonic() - t_term
        check(rc == 124, "exit %s, expected 124; %r" % (rc, a.stderr()))
        check(0.6 <= secs < 6, "exited %.2f s after SIGTERM, not after the 0.8 s grace" % secs)
        check(not any(alive(x) for x in pids), "the job outlived --max-runtime")
        check(b.wait(20) == 0, "next holder: exit %s; %r" % (b.p.returncode, b.stderr()))
        check_handover("max-a", "max-b")
    finally:
        kill_leftovers(pids)


@case
def warn_after_one_line():
    p = lock_path("warn-after")
    _, err, _ = expect(["--warn-after", "0.2", p, "--", "sleep", "2"], 0)
    lines = [l for l in err.splitlines() if "--warn-after" in l]
    check(len(lines) == 1 and "sleep has run for more than 0.2 s" in lines[0] and p in lines[0],
          "warn-after lines: %r" % err)
    _, err, _ = expect(["--warn-after", "5", p, "--", "true"], 0)
    check("--warn-after" not in err, "warned early: %r" % err)
    expect(["--warn-after", "2", "--max-runtime", "1", p, "--", "true"], 64,
           stderr_has="shorter than --max-runtime")
    expect(["--max-runtime", "0", p, "--", "true"], 64, stderr_has="--max-runtime")


# ---- zklock check ----

def check_run(args, want=None):
    """zklock check ARGS --json: (exit status, document). want: the status expected."""
    rc, out, err, _ = run(["check", "--json"] + list(args))
    try:
        doc = json.loads(out)
    except ValueError:
        raise Failure("zklock check %s: not JSON: %r; stderr %r" % (" ".join(args), out, err))
    check(doc["code"] == rc and doc["status"] == ["OK", "WARNING", "CRITICAL",
                                                  "UNKNOWN"][rc],
          "exit %s with %r" % (rc, doc))
    if want is not None:
        check(rc == want, "zklock check %s: exit %s, expected %s; %r" %
              (" ".join(args), rc, want, doc))
    return rc, doc


def check_text(args, want):
    """zklock check ARGS: one line, "ZKLOCK <STATE> - ..." with performance data."""
    rc, out, err, _ = run(["check"] + list(args))
    state = ["OK", "WARNING", "CRITICAL", "UNKNOWN"][want]
    check(rc == want and len(out.splitlines()) == 1 and
          out.startswith("ZKLOCK %s - " % state),
          "zklock check %s: exit %s, %r; stderr %r" % (" ".join(args), rc, out, err))
    return out


def wait_check(args, want, what):
    """Polls zklock check (a real query each time) until it exits want."""
    wait_until(lambda: run(["check"] + list(args))[0] == want, what)


def check_holder_ages(p, kz, who):
    """A holder of p (of whatever library) is checked on the server's clock: the age
    check reports is the clock node's mtime minus the holder node's ctime, both read
    from the server (through kazoo here), and each threshold gives its status."""
    rc, doc = check_run(["--held-longer", "1h,2h", p], 0)
    lk = [l for l in doc["locks"] if l["path"] == p]
    check(len(lk) == 1 and lk[0]["holders"] == 1, "%s: %r" % (who, doc))
    node = [n for n in status_lines(p) if n["role"] in ("holder", "leader", "lease")][0]
    ctime = kz.exists(node["node"]).ctime
    clock = kz.exists(p + ".clock").mtime
    check(doc["server_time_ms"] == clock and lk[0]["held_ms"] == clock - ctime,
          "%s: held_ms %r, server time %r; the server says ctime %d, clock %d" %
          (who, lk[0]["held_ms"], doc["server_time_ms"], ctime, clock))
    wait_check(["--held-longer", "0.3,1h", p], 1, "%s is held longer than 0.3 s" % who)
    out = check_text(["--held-longer", "0.3,1h", p], 1)
    check("held for" in out and "| locks=1 held=" in out, "%s: %r" % (who, out))
    wait_check(["--held-longer", "0.3,0.6", p], 2, "%s is held longer than 0.6 s" % who)
    check_text(["--held-longer", ",0.6", p], 2)


@case
def check_zklock_holder():
    """--held-longer and --waiters-more against zklock holders and waiters, each status;
    UNKNOWN for a bad command line and for no server."""
    k = kazoo_client()
    p = lock_path("check")
    h = holder(p)
    waiters = []
    try:
        check_holder_ages(p, k, "a zklock mutex")
        for i in range(2):
            w = Proc([p, "--", "true"])
            waiter_queued(p, w, i + 1)
            waiters.append(w)
        check_run(["--waiters-more", "2,5", p], 0)
        _, doc = check_run(["--waiters-more", "1,5", p], 1)
        check(len(doc["problems"]) == 1 and "2 waiting" in doc["problems"][0]["text"],
              "problems %r" % doc["problems"])
        check_run(["--waiters-more", "0,1", p], 2)
        out = check_text(["--waiters-more", "0,1", z.ROOT], 2)
        check(p in out and "waiting=2;0;1" in out, "prefix: %r" % out)
        # the worst wins: a warning and a critical
        check_run(["--waiters-more", "1,5", "--held-longer", ",0.1", p], 2)
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    for w in waiters:
        check(w.wait() == 0, "waiter: exit %s" % w.p.returncode)
    k.stop()
    k.close()
    check_run(["--held-longer", ",0.1", "--waiters-more", "0", p], 0)
    rc, out, err, _ = run(["check", "--held-longer", "soon", p])
    check(rc == 3 and out.startswith("ZKLOCK UNKNOWN - ") and "--held-longer" in err,
          "bad threshold: exit %s %r %r" % (rc, out, err))
    rc, out, _, _ = run(["check", "-s", "127.0.0.1:1", "--connect-timeout", "500", p])
    check(rc == 3 and out.startswith("ZKLOCK UNKNOWN - ") and "127.0.0.1:1" in out,
          "no server: exit %s %r" % (rc, out))


@case
def check_last_run():
    """--last-run-older reads the --once-per record's mtime: no record is CRITICAL (or
    WARNING with a warning threshold only), a fresh one OK, an old one WARNING or
    CRITICAL."""
    p = lock_path("check-last-run")
    _, doc = check_run(["--last-run-older", "1h,2h", p], 2)
    check("no record of a run" in doc["problems"][0]["text"], "%r" % doc)
    check_run(["--last-run-older", "1h", p], 1)
    expect(["--once-per", "1h", p, "--", "true"], 0)
    k = kazoo_client()
    try:
        _, doc = check_run(["--last-run-older", "1h,2h", p], 0)
        check([r["finished_ms"] for r in doc["last_runs"]] ==
              [k.get(p + ".last-run")[1].mtime], "last run %r" % doc)
    finally:
        k.stop()
        k.close()
    wait_check(["--last-run-older", "0.3,1h", p], 1, "the record is older than 0.3 s")
    wait_check(["--last-run-older", "0.3,0.6", p], 2, "the record is older than 0.6 s")
    out = check_text(["--last-run-older", "0.3,0.6", p], 2)
    check("last run finished" in out and "last_run_age=" in out, "%r" % out)


@case
def records_under_a_prefix():
    """Between runs (no lock in use), `zklock list PREFIX` shows the --once-per records
    under PREFIX, with who ran each job, when it started and finished (as status does),
    and `zklock check --last-run-older PREFIX` checks every job under PREFIX, each a
    problem of its own once too old; a prefix with no record at all is critical."""
    prefix = lock_path("prefix-jobs")
    jobs = [prefix + "/a", prefix + "/deep/b"]
    for j in jobs:
        expect(["--once-per", "1d", j, "--", "true"], 0)
    rc, out, err, _ = run(["list", prefix])
    lines = out.splitlines()
    check(rc == 0 and len(lines) == 2, "list between runs: exit %s %r %r" % (rc, out, err))
    for j, line in zip(jobs, lines):
        rec = dict(zip(z.STATUS_FIELDS, status_lines_raw(j)[-1]))
        check(line == "%s.last-run\trecord\t-\t-\t%s, started %s, finished %s" %
              (j, rec["data"], rec["since"], rec["token"]), "list line %r, status %r" %
              (line, rec))
    rc, out, _, _ = run(["list", "--json", prefix])
    doc = json.loads(out)
    check(rc == 0 and [(l["path"], l["nodes"], l["last_run"]["node"]) for l in doc["locks"]]
          == [(j, [], j + ".last-run") for j in jobs], "list --json: %r" % doc)
    _, doc = check_run(["--last-run-older", "1h,2h", prefix], 0)
    check(sorted(r["node"] for r in doc["last_runs"]) == [j + ".last-run" for j in jobs],
          "check read %r" % doc)
    wait_until(lambda: len(check_run(["--last-run-older", "0.3,1h", prefix])[1]["problems"])
               == 2, "both records older than 0.3 s")
    _, doc = check_run(["--last-run-older", "0.3,1h", prefix], 1)
    texts = [p_["text"] for p_ in doc["problems"]]
    check(len(texts) == 2 and all(any(t.startswith(j + " last run finished ") for t in texts)
                                  for j in jobs), "problems %r" % texts)
    out = check_text(["--last-run-older", "1h", prefix], 0)
    check("2 jobs, the oldest last run finished" in out, "%r" % out)
    _, doc = check_run(["--last-run-older", "1h,2h", lock_path("prefix-none")], 2)
    check("no record of a run" in doc["problems"][0]["text"], "%r" % doc)


def status_lines_raw(path):
    rc, out, err, _ = run(["status", path])
    check(rc == 0, "status %s: exit %s %r" % (path, rc, err))
    return [l.split("\t") for l in out.splitlines()]


@case
def forget_leaves_nothing():
    """zklock forget deletes the record, the note of --previous and the clock node that
    zklock check writes beside the lock (PATH.clock): a retired job leaves nothing."""
    p = lock_path("forget-all")
    expect(["--previous", "--once-per", "1d", p, "--", "true"], 0)
    check_run(["--last-run-older", "1h", p], 0)
    k = kazoo_client()
    try:
        for sfx in (".last-run", ".previous", ".clock"):
            check(k.exists(p + sfx) is not None, "no %s%s before forget" % (p, sfx))
        expect(["forget", p], 0, stderr_has="forgot the clock node of zklock check (%s.clock)"
               % p)
        left = [p + s for s in (".last-run", ".previous", ".clock") if k.exists(p + s)]
        check(left == [], "forget left %r" % left)
        check_run(["--held-longer", "1h", p], 0)  # a clock node alone is forgotten too
        expect(["forget", p], 0, stderr_has="forgot the clock node")
        expect(["forget", p], 1, stderr_has="no record")
    finally:
        k.stop()
        k.close()


@case
def metrics_last_success_always_written():
    """zklock_last_success_timestamp_seconds is in every file: 0 for a host whose runs
    have all failed, and for a --leader --requeue worker stopped by a signal before any
    run exited 0; once a run succeeds, when it finished (server's clock; here the
    server's clock is this host's), not when it started."""
    p = lock_path("metrics-always")
    f = metrics_file("metrics-always")
    expect(["--metrics-file", f, p, "--", "false"], 1)
    m = expect_metrics(f, p, "false", ran=1, exit_status=1)
    check(m.get(("zklock_last_success_timestamp_seconds", None)) == 0,
          "first run failed: last success %r" % m.get(("zklock_last_success_timestamp_seconds",
                                                       None)))
    before = time.time()
    expect(["--metrics-file", f, p, "--", "sleep", "1"], 0)
    after = time.time()
    m = expect_metrics(f, p, "sleep", ran=1, exit_status=0)
    t = m[("zklock_last_success_timestamp_seconds", None)]
    check(before + 0.9 <= t <= after + 0.5, "last success %.3f for a run from %.3f to %.3f: "
          "not when it finished" % (t, before, after))
    # A leader that never exits 0: stopped by SIGTERM.
    pl = lock_path("metrics-always-leader")
    fl = metrics_file("metrics-always-leader")
    zl = Proc(["--leader", "--requeue", "--metrics-file", fl, pl, "--", "sh", "-c",
               "echo ready; exec sleep 60"])
    zl.wait_line("^ready$", stream="out")
    zl.signal(signal.SIGTERM)
    check(zl.wait(20) == 128 + signal.SIGTERM, "leader: exit %s" % zl.p.returncode)
    m = expect_metrics(fl, pl, "sh", ran=1, exit_status=128 + signal.SIGTERM)
    check(m.get(("zklock_last_success_timestamp_seconds", None)) == 0,
          "leader: last success %r" % m.get(("zklock_last_success_timestamp_seconds", None)))


@case
def check_kazoo_holder():
    k = kazoo_client()
    p = lock_path("check-kazoo")
    lock = k.Lock(p, "kazoo-worker")
    check(lock.acquire(timeout=10), "kazoo could not take the lock")
    try:
        check_holder_ages(p, k, "a kazoo Lock")
        out = check_text(["--held-longer", "0.3", p], 1)
        check("kazoo-worker" in out and "kazoo-lock" in out, "%r" % out)
    finally:
        lock.release()
        k.stop()
        k.close()


class Curator:
    """tests/interop/Peer.java: a Curator client holding locks on request."""

    def __init__(self):
        java = os.environ.get("ZKL_INTEROP_JAVA", "")
        cp = os.environ.get("ZKL_INTEROP_CLASSPATH", "")
        if not java or not cp:
            raise Skip("java, javac or Curator's jars were not found when the build was "
                       "configured (ZKL_INTEROP_JAVA, ZKL_INTEROP_CLASSPATH)")
        self.p = subprocess.Popen([java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                   "-cp", cp, "Peer", z.SERVERS, "10000"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.expect("* ready")

    def expect(self, prefix, timeout=60):
        result = {}

        def read():
            for line in self.p.stdout:
                if line.startswith(prefix):
                    result["line"] = line.rstrip("\n")
                    return
                if " error " in line or line.startswith("* fatal"):
                    result["line"] = line.rstrip("\n")
                    return
        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        line = result.get("line")
        check(line is not None and line.startswith(prefix),
              "Curator peer: expected %r, got %r" % (prefix, line))
        return line

    def say(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def close(self):
        try:
            self.say("* quit")
            self.p.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()


@case
def check_curator_holder():
    c = Curator()
    k = kazoo_client()
    p = lock_path("check-curator")
    try:
        c.say("h acquire mutex %s -1" % p)
        c.expect("h acquired")
        check_holder_ages(p, k, "a Curator InterProcessMutex")
        w = Proc([p, "--", "true"])
        waiter_queued(p, w, 1)
        check_run(["--waiters-more", "0,5", p], 1)
        c.say("h release")
        c.expect("h released")
        check(w.wait() == 0, "waiter: exit %s" % w.p.returncode)
    finally:
        c.close()
        k.stop()
        k.close()


@case
def previous_after_curator_holder():
    """A Curator InterProcessMutex that releases leaves no note: the zklock that waited
    behind it is told "vanished" (never "released": the note it finds is of the zklock
    before), and waits --lock-delay."""
    c = Curator()
    p = lock_path("previous-curator")
    try:
        out, _, _ = expect(["--previous", p, "--", "sh", "-c", 'echo "$ZKLOCK_PREVIOUS"'], 0)
        check(out == "none\n", "first holder: ZKLOCK_PREVIOUS %r" % out)
        c.say("h acquire mutex %s -1" % p)
        c.expect("h acquired")
        w = Proc(["-v", "--lock-delay", "1", p, "--", "sh", "-c", 'echo "$ZKLOCK_PREVIOUS"'])
        waiter_queued(p, w, 1)
        c.say("h release")
        c.expect("h released")
        line = w.wait_line(r"^\w+$", stream="out", timeout=30)
        check(line == "vanished", "after Curator's release: ZKLOCK_PREVIOUS %r" % line)
        check(w.wait() == 0, "waiter: exit %s; %r" % (w.p.returncode, w.stderr()))
        check(re.search(r"vanished .*--lock-delay", w.stderr()), "stderr %r" % w.stderr())
    finally:
        c.close()


# ---- systemd ----

class NotifySocket:
    """A fake systemd: a datagram socket that collects what zklock sends."""

    def __init__(self, name):
        self.path = os.path.join(z.TMP, name + ".sock")
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(self.path)
        self.msgs = []
        self.times = []  # when each message arrived (time.monotonic())
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            try:
                data = self.s.recv(65536)
            except OSError:
                return
            with self.cond:
                self.times.append(time.monotonic())
                self.msgs.append(dict(l.split("=", 1) for l in data.decode().split("\n")
                                      if "=" in l))
                self.cond.notify_all()

    def wait(self, key, pattern=".*", timeout=20):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for m in self.msgs:
                    if key in m and re.search(pattern, m[key]):
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Failure("no %s=%s from zklock; got %r" % (key, pattern, self.msgs))
                self.cond.wait(left)

    def has(self, key):
        with self.cond:
            return any(key in m for m in self.msgs)

    def close(self):
        self.s.close()


@case
def systemd_notify():
    """With NOTIFY_SOCKET, a waiting zklock says STATUS (who holds it, how many ahead)
    and EXTEND_TIMEOUT_USEC, and no READY; once it holds the lock and its command runs
    (exec done), READY=1 with STATUS naming the command's pid; the command does not
    inherit NOTIFY_SOCKET."""
    p = lock_path("notify")
    ns = NotifySocket("notify")
    env = dict(z.ENV)
    env["NOTIFY_SOCKET"] = ns.path
    out = os.path.join(z.TMP, "notify-env")
    h = holder(p)
    try:
        w = Proc([p, "--", "sh", "-c", 'echo "${NOTIFY_SOCKET:-unset}" > %s; exec cat' %
                  shlex.quote(out)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                 env=env)
        m = ns.wait("STATUS", r"^waiting for %s: held by \S+:%d, 1 ahead$" %
                    (re.escape(p), h.pid))
        check("EXTEND_TIMEOUT_USEC" in m and int(m["EXTEND_TIMEOUT_USEC"]) > 0, "%r" % m)
        waiter_queued(p, w, 1)
        check(not ns.has("READY"), "READY while waiting: %r" % ns.msgs)
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    try:
        m = ns.wait("READY")
        check(m["READY"] == "1", "%r" % m)
        pid = int(re.search(r"\(pid (\d+)\)", m["STATUS"]).group(1))
        check(re.match(r"^holding %s since \S+, fencing token \d+; running sh" % re.escape(p),
                       m["STATUS"]), "status %r" % m["STATUS"])
        # exec done: the pid runs the command (sh, or cat that it became), not a copy of
        # zklock between fork and exec
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
        check(argv[0] in (b"sh", b"cat"), "READY before exec: pid %d runs %r" % (pid, argv))
        check(owners(p) == [w.pid], "READY but not holding: %r" % owners(p))
        wait_until(lambda: os.path.exists(out) and open(out).read() == "unset\n",
                   "the command wrote its NOTIFY_SOCKET")
    finally:
        w.release()
    check(w.wait() == 0, "exit %s; %r" % (w.p.returncode, w.stderr()))
    ns.wait("STOPPING")
    ns.close()


@case
def systemd_extend_rate():
    """A waiting zklock extends systemd's start timeout every 10 s, by a minute, with -v
    too (which lists the queue twice a second for the terminal): a datagram and a
    listing every 10 s per waiting host, which a fleet can afford."""
    p = lock_path("notify-rate")
    ns = NotifySocket("notify-rate")
    env = dict(z.ENV)
    env["NOTIFY_SOCKET"] = ns.path
    h = holder(p)
    try:
        w = Proc(["-v", p, "--", "true"], env=env)
        first = ns.wait("EXTEND_TIMEOUT_USEC")
        check(first["EXTEND_TIMEOUT_USEC"] == "60000000", "%r" % first)
        deadline = time.monotonic() + 30
        with ns.cond:
            while True:
                at = [t for t, m in zip(ns.times, ns.msgs) if "EXTEND_TIMEOUT_USEC" in m]
                if len(at) >= 2:
                    break
                left = deadline - time.monotonic()
                check(left > 0, "no second EXTEND_TIMEOUT_USEC in 30 s: %r" % ns.msgs)
                ns.cond.wait(left)
            gap = at[1] - at[0]
        check(gap >= 9, "EXTEND_TIMEOUT_USEC again after %.1f s, not every 10 s" % gap)
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    check(w.wait() == 0, "waiter: exit %s; %r" % (w.p.returncode, w.stderr()))
    ns.close()


# ---- planned failover of a leader ----

def leader_job(name, log):
    """A leader's command: logs "start NAME", and "term NAME" when it gets SIGTERM."""
    q = shlex.quote(log)
    return ["sh", "-c", "trap 'echo term %s >> %s; exit 0' TERM; echo start %s >> %s; "
            "while :; do sleep 0.05; done" % (name, q, name, q)]


def log_lines(log):
    try:
        with open(log) as f:
            return f.read().split("\n")[:-1]
    except FileNotFoundError:
        return []


@case
def revoke_leader_hands_over():
    """zklock revoke of a --leader --requeue: the leader's command gets SIGTERM, the next
    in line leads at once, and the revoked one joins again at the back; SIGUSR1 to the
    new leader hands leadership back the same way. Without --requeue, a revoked leader
    exits 71."""
    p = lock_path("failover")
    log = os.path.join(z.TMP, "failover-log")
    a = Proc(["--leader", "--requeue", p, "--"] + leader_job("A", log))
    wait_until(lambda: log_lines(log) == ["start A"], "A leads")
    b = Proc(["--leader", "--requeue", p, "--"] + leader_job("B", log))
    waiter_queued(p, b, 1)
    _, out, _ = expect(["revoke", p], 0, stdout_has="asked the leader to hand over")
    wait_until(lambda: log_lines(log) == ["start A", "term A", "start B"],
               "B leads after A's command stopped (log %r)" % log_lines(log))
    wait_until(lambda: owners(p) == [b.pid, a.pid], "A queued again behind B")
    nodes = status_lines(p)
    check([n["role"] for n in nodes] == ["leader", "waiting"], "roles %r" % nodes)
    b.signal(signal.SIGUSR1)
    wait_until(lambda: log_lines(log)[3:] == ["term B", "start A"],
               "A leads after SIGUSR1 to B (log %r)" % log_lines(log))
    wait_until(lambda: owners(p) == [a.pid, b.pid], "B queued again behind A")
    check(a.p.poll() is None and b.p.poll() is None, "a requeued zklock exited")
    for x in (a, b):
        x.signal(signal.SIGTERM)
    for x in (a, b):
        rc = x.wait(20)
        check(rc in (0, 143), "exit %s; %r" % (rc, x.stderr()))
    check(status_lines(p) == [], "not left: %r" % status_lines(p))
    # without --requeue
    c = Proc(["--leader", p, "--"] + leader_job("C", log))
    wait_until(lambda: "start C" in log_lines(log), "C leads")
    expect(["revoke", "-w", "10", p], 0, stdout_has="released")
    check(c.wait(20) == 71, "exit %s; %r" % (c.p.returncode, c.stderr()))
    check("term C" in log_lines(log), "C's command was not stopped")


if __name__ == "__main__":
    try:
        sys.exit(z.main(CASES))
    finally:
        subprocess.run(["rm", "-rf", "--", z.TMP])

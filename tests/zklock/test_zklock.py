#!/usr/bin/python3
"""Tests of the zklock command against a real ZooKeeper server.

    tests/with-zk /usr/bin/python3 tests/zklock/test_zklock.py build/tools/zklock [CASE...]

Needs ZKL_TEST_SERVERS (set by tests/with-zk); without it the test is skipped (exit 77),
unless CI=true, where that is a failure. The lock-lost case cuts zklock off from the
server through a TCP proxy of its own. ZKLOCK_TEST_PREFIX, a command prefix split on
spaces (e.g. "valgrind -q --error-exitcode=99"), runs every zklock under it. Only the
standard library is used. Every case prints "ok", "FAIL" or "skip" with its name; the
exit status is 0 when none failed. Cases named on the command line run alone.

Synchronisation is by events, never by sleeping: a holder is known to hold once its
"acquired" line (zklock -v) appears on stderr, a waiter is known to be queued once its
node (data "<host>:<pid>") shows up in `zklock status`, and a holder whose command is
`cat` releases when the test closes its stdin.
"""

import calendar
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

if len(sys.argv) < 2:
    print("usage: test_zklock.py ZKLOCK [CASE...]", file=sys.stderr)
    sys.exit(2)

ZKLOCK = os.path.abspath(sys.argv[1])
ONLY = sys.argv[2:]
SERVERS = os.environ.get("ZKL_TEST_SERVERS", "")
PREFIX = shlex.split(os.environ.get("ZKLOCK_TEST_PREFIX", ""))
ROOT = "/zklock-test-" + uuid.uuid4().hex[:12]

if not SERVERS:
    if os.environ.get("CI") == "true":
        print("FAIL: ZKL_TEST_SERVERS is not set (run through tests/with-zk); CI=true")
        sys.exit(1)
    print("skip: ZKL_TEST_SERVERS is not set (run through tests/with-zk)")
    sys.exit(77)

ENV = dict(os.environ)
ENV["ZKLOCK_SERVERS"] = SERVERS
ENV.pop("POSIXLY_CORRECT", None)

TMP = tempfile.mkdtemp(prefix="zklock-test.")
PROCS = []  # every background zklock, killed at the end if still running


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def zklock_cmd(args):
    return PREFIX + [ZKLOCK] + list(args)


class Proc:
    """A zklock started in the background; its stderr (and stdout if piped) are
    collected line by line by reader threads, so that a test can wait for a line."""

    def __init__(self, args, stdin=subprocess.DEVNULL, stdout=None, env=None, preexec=None):
        self.args = list(args)
        self.p = subprocess.Popen(zklock_cmd(args), stdin=stdin,
                                  stdout=subprocess.PIPE if stdout is None else stdout,
                                  stderr=subprocess.PIPE, env=env or ENV,
                                  preexec_fn=preexec)
        self.pid = self.p.pid
        self.cond = threading.Condition()
        self.lines = {"out": [], "err": []}
        self.times = {}  # when each line arrived
        self.closed = {"out": stdout is not None, "err": False}
        self.readers = []
        streams = [("err", self.p.stderr)]
        if stdout is None:
            streams.append(("out", self.p.stdout))
        for name, f in streams:
            t = threading.Thread(target=self._read, args=(name, f), daemon=True)
            t.start()
            self.readers.append(t)
        PROCS.append(self)

    def _read(self, name, f):
        for raw in f:
            with self.cond:
                self.lines[name].append(raw.decode(errors="replace").rstrip("\n"))
                self.times.setdefault(name, []).append(time.monotonic())
                self.cond.notify_all()
        with self.cond:
            self.closed[name] = True
            self.cond.notify_all()

    def wait_line(self, pattern, stream="err", timeout=20):
        """Waits until a line of the stream matches the regex pattern."""
        return self.wait_line_at(pattern, stream, timeout)[0]

    def wait_line_at(self, pattern, stream="err", timeout=20):
        """wait_line, and also when the line arrived (time.monotonic())."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i, line in enumerate(self.lines[stream]):
                    if rx.search(line):
                        return line, self.times[stream][i]
                left = deadline - time.monotonic()
                if self.closed[stream] or left <= 0:
                    raise Failure("%s: no line matching %r on std%s; got %r" %
                                  (self.desc(), pattern, stream, self.lines[stream]))
                self.cond.wait(left)

    def stderr(self):
        with self.cond:
            return "\n".join(self.lines["err"])

    def stdout(self):
        with self.cond:
            return "\n".join(self.lines["out"])

    def wait(self, timeout=30):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            raise Failure("%s still running after %s s; stderr %r" %
                          (self.desc(), timeout, self.stderr()))
        for t in self.readers:
            t.join(5)
        return rc

    def signal(self, sig):
        self.p.send_signal(sig)

    def release(self):
        """For a holder whose command is `cat`: end its command."""
        self.p.stdin.close()

    def desc(self):
        return "zklock " + " ".join(self.args)

    def kill(self):
        """Kills zklock and its command's process group (the command leads it)."""
        if self.p.poll() is None:
            children = []
            try:
                for task in os.listdir("/proc/%d/task" % self.pid):
                    with open("/proc/%d/task/%s/children" % (self.pid, task)) as f:
                        children += [int(c) for c in f.read().split()]
            except OSError:
                pass
            # zklock first: killed after its command, it could see the command end by
            # signal 9 and release with that end, as no host that dies whole does.
            self.p.kill()
            for c in children:
                try:
                    os.killpg(c, signal.SIGKILL)
                except OSError:
                    pass
            self.p.wait()
        # The pipes are left to the reader threads (daemons): closing one while its
        # reader is blocked on it would wait for that reader.


def run(args, timeout=30, env=None):
    """Runs zklock to the end. Returns (status, stdout, stderr, seconds)."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(zklock_cmd(args), stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=timeout, env=env or ENV)
    except subprocess.TimeoutExpired:
        raise Failure("zklock %s did not finish in %s s" % (" ".join(args), timeout))
    return (r.returncode, r.stdout.decode(errors="replace"),
            r.stderr.decode(errors="replace"), time.monotonic() - t0)


def expect(args, status, timeout=30, stderr_has=None, stdout_has=None, env=None):
    rc, out, err, secs = run(args, timeout, env)
    check(rc == status, "zklock %s: exit %s, expected %s; stderr %r" %
          (" ".join(args), rc, status, err))
    if stderr_has is not None:
        for s in ([stderr_has] if isinstance(stderr_has, str) else stderr_has):
            check(s in err, "zklock %s: stderr %r lacks %r" % (" ".join(args), err, s))
    if stdout_has is not None:
        check(stdout_has in out, "zklock %s: stdout %r lacks %r" %
              (" ".join(args), out, stdout_has))
    return out, err, secs


STATUS_FIELDS = ("node", "data", "role", "layout", "host", "pid", "since", "token",
                 "deadline")


def status_lines(path):
    """The lock's queue from `zklock status`: a list of dicts of the tab-separated
    fields (node, data, role, layout, host, pid, since, token, deadline)."""
    rc, out, err, _ = run(["status", path])
    check(rc == 0, "zklock status %s: exit %s; stderr %r" % (path, rc, err))
    nodes = []
    for line in out.splitlines():
        fields = line.split("\t")
        if fields[0] in (path + ".last-run", path + ".hold"):
            continue  # the --once-per record (last_run_line()), a maintenance hold
        check(len(fields) == len(STATUS_FIELDS) and fields[0].startswith(path + "/"),
              "zklock status %s: bad line %r" % (path, line))
        nodes.append(dict(zip(STATUS_FIELDS, fields)))
    return nodes


def status(path):
    """The lock's queue from `zklock status`: a list of (node path, data)."""
    return [(n["node"], n["data"]) for n in status_lines(path)]


def owners(path):
    """The pids in the lock's queue, holder first (from the "<host>:<pid>" data)."""
    pids = []
    for _, data in status(path):
        m = re.search(r":(\d+)$", data)
        pids.append(int(m.group(1)) if m else None)
    return pids


def wait_until(cond, what, timeout=20):
    """Polls cond (a function doing real work, e.g. asking the server) until true."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return
        if time.monotonic() > deadline:
            raise Failure("timed out waiting until " + what)
        time.sleep(0.02)


def holder(path, extra=()):
    """A zklock holding path until .release(); returns once it reports "acquired"."""
    h = Proc(["-v"] + list(extra) + [path, "--", "cat"], stdin=subprocess.PIPE,
             stdout=subprocess.DEVNULL)
    h.wait_line(r"^zklock: acquired ")
    return h


def waiter_queued(path, proc, position):
    """Waits until proc's node is at index position of path's queue."""
    wait_until(lambda: len(owners(path)) > position and owners(path)[position] == proc.pid,
               "zklock %d is queued at position %d of %s (queue %r)" %
               (proc.pid, position, path, owners(path)))


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def lock_path(name):
    return "%s/%s" % (ROOT, name)


# ---- informational ----

@case
def help_and_version():
    out, _, _ = expect(["--help"], 0, stdout_has="Usage: zklock")
    check("--conflict-exit-code" in out and "status" in out, "help lacks options: %r" % out)
    expect(["-h"], 0, stdout_has="Usage: zklock")
    out, _, _ = expect(["--version"], 0)
    check(re.fullmatch(r"zklock \(zklocks\) \d+\.\d+\.\d+\n", out), "version: %r" % out)


# ---- the command's status ----

@case
def success_and_released():
    p = lock_path("success")
    marker = os.path.join(TMP, "success")
    expect([p, "--", "touch", marker], 0)
    check(os.path.exists(marker), "the command did not run")
    check(status(p) == [], "the lock was not released: %r" % status(p))
    expect(["-s", SERVERS, p, "--", "true"], 0)
    # flock style: no "--", everything after PATH is the command (even options).
    expect([p, "sh", "-c", "exit 5"], 5)
    expect([p, "sh", "-c", 'test "$1" = -n', "sh", "-n"], 0)
    # options between PATH and "--"
    expect([p, "-w", "5", "-E", "3", "--", "true"], 0)


@case
def exit_status_passed_through():
    p = lock_path("status")
    expect([p, "--", "sh", "-c", "exit 3"], 3)
    expect([p, "--", "sh", "-c", "exit 255"], 255)
    check(status(p) == [], "the lock was not released")


@case
def killed_by_signal():
    p = lock_path("signal")
    expect([p, "--", "sh", "-c", "kill -TERM $$"], 128 + signal.SIGTERM)
    expect([p, "--", "sh", "-c", "kill -KILL $$"], 128 + signal.SIGKILL)
    check(status(p) == [], "the lock was not released")


@case
def signal_mask_and_dispositions_restored():
    # The command must see the signal mask and ignored signals that zklock was started
    # with (zklock blocks some for itself), the same as a command started directly.
    p = lock_path("mask")
    show = ["sh", "-c", "grep -E '^Sig(Blk|Ign):' /proc/self/status"]
    direct = subprocess.run(show, capture_output=True, stdin=subprocess.DEVNULL, env=ENV)
    out, _, _ = expect([p, "--"] + show, 0)
    want = direct.stdout.decode()
    check(out == want, "the command has %r, not %r" % (out, want))


@case
def command_dies_of_sigpipe():
    # The command sees SIGPIPE as usual (at its default action, unblocked), whatever
    # zklock and the library do about their own connections: a command that writes to a
    # pipe nobody reads any more dies of it, and zklock says so with 128+13.
    p = lock_path("sigpipe")
    proc = subprocess.Popen(zklock_cmd([p, "--", "yes"]), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    PROCS.append(proc)
    check(proc.stdout.read(4096).startswith(b"y\n"), "the command wrote nothing")
    proc.stdout.close()
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise Failure("zklock did not end once its command's pipe was closed")
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    check(rc == 128 + signal.SIGPIPE, "zklock exited %s, expected %s; stderr %r" %
          (rc, 128 + signal.SIGPIPE, err))
    check(status(p) == [], "the lock was not released")


@case
def command_not_found_or_not_executable():
    p = lock_path("exec")
    expect([p, "--", "zklock-no-such-command-" + uuid.uuid4().hex], 127,
           stderr_has="zklock: cannot run")
    expect([p, "--", "/nonexistent/dir/cmd"], 127)
    script = os.path.join(TMP, "not-executable")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(script, 0o644)
    expect([p, "--", script], 126, stderr_has="Permission denied")
    expect([p, "--", TMP], 126)
    check(status(p) == [], "the lock was not released")


# ---- conflicts ----

@case
def nonblock_free():
    # -n on a free lock: a fresh path (its folder does not exist yet), and again once
    # the server has removed the emptied folder (a CONTAINER node).
    p = lock_path("nonblock-free")
    expect(["-n", p, "--", "true"], 0)
    expect(["-n", p, "--", "true"], 0)
    expect(["-n", p, "--", "true"], 0)


@case
def nonblock_conflict():
    p = lock_path("nonblock")
    h = holder(p)
    try:
        marker = os.path.join(TMP, "nonblock")
        _, err, secs = expect(["-n", p, "--", "touch", marker], 1,
                              stderr_has=["zklock: %s is held by " % p, ":%d;" % h.pid,
                                          "gave up after 0 s"])
        check(secs < 2.5, "-n took %.2f s" % secs)
        check(len(err.strip().splitlines()) == 1, "not one line: %r" % err)
        check(not os.path.exists(marker), "the command ran without the lock")
        _, _, secs = expect(["-E", "9", "-n", p, "--", "true"], 9)
        check(secs < 2.5, "-E 9 -n took %.2f s" % secs)
        expect(["--conflict-exit-code", "0", "--nonblock", p, "--", "false"], 0)
        expect(["-w", "0", p, "--", "true"], 1)
        check(owners(p) == [h.pid], "queue after the failed tries: %r" % owners(p))
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    expect(["-w", "10", p, "--", "true"], 0)


@case
def wait_timeout():
    p = lock_path("wait")
    h = holder(p)
    try:
        _, err, secs = expect(["-w", "0.5", p, "--", "true"], 1,
                              stderr_has="gave up after 0.5 s")
        check(0.45 <= secs < 3.0, "-w 0.5 took %.2f s" % secs)
        check(owners(p) == [h.pid], "the timed-out waiter left a node: %r" % owners(p))
        # -v says who holds it and how many are ahead
        _, err, _ = expect(["-v", "-w", "0.2", "-E", "4", p, "--", "true"], 4)
        check(re.search(r"waiting for %s: held by \S+:%d, 1 ahead" % (re.escape(p), h.pid),
                        err), "-v waiting line: %r" % err)
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    # A wait that ends in time acquires.
    _, err, _ = expect(["-v", "-w", "5", p, "--", "true"], 0)
    check(re.search(r"acquired %s \(fencing token \d+\)" % re.escape(p), err),
          "-v acquired line: %r" % err)


# ---- errors ----

@case
def cannot_connect():
    # Nothing listens at port 1: refused, said so, at once (not after the 20 s timeout),
    # and no word of TLS.
    _, err, secs = expect(["-s", "127.0.0.1:1", "--connect-timeout", "20000",
                           lock_path("connect"), "--", "true"], 69,
                          stderr_has=["zklock: ", "127.0.0.1:1", "connection refused",
                                      "nothing listens"])
    check(secs < 5, "took %.1f s" % secs)
    check("TLS" not in err, "a refused connection mentions TLS: %r" % err)
    env = dict(ENV)
    env["ZKLOCK_SERVERS"] = "127.0.0.1:1"
    expect(["--connect-timeout", "500", lock_path("connect"), "--", "true"], 69,
           stderr_has="127.0.0.1:1", env=env)
    expect(["--connect-timeout", "500", "status", lock_path("connect")], 69,
           stderr_has="127.0.0.1:1", env=env)


@case
def secure_options_in_a_build_without():
    """A zklock built on a C client without TLS or SASL (Debian's) refuses --tls-ca and
    --sasl-mechanism (exit 70) with a whole message that says what the user of a
    package can do, not only how to build from source."""
    for args, advice in ((["--tls-ca", "/dev/null"], "through a TLS tunnel on this host"),
                         (["--sasl-mechanism", "DIGEST-MD5", "--sasl-user", "bob",
                           "--sasl-password-file", "/dev/null"], "auth = user:password")):
        rc, out, err, _ = run(args + [lock_path("secure"), "--", "true"])
        if not re.search(r"without (it|TLS|SASL)\b", err):
            raise Skip("this build has TLS and SASL")
        check(rc == 70 and advice in err and err.rstrip().endswith(
            '"Secure connections").') and "..." not in err,
              "%s: exit %s, stderr %r" % (args[0], rc, err))


@case
def usage_errors():
    hint = "zklock --help"
    p = lock_path("usage")
    for args in ([], ["locks/x", "--", "true"], [ROOT + "//x", "--", "true"],
                 [ROOT + "/x/", "--", "true"], [p], [p, "--"],
                 ["-w", "abc", p, "--", "true"], ["-w", "-1", p, "--", "true"],
                 ["-w", "1e3", p, "--", "true"], ["-w", "", p, "--", "true"],
                 ["-E", "256", p, "--", "true"], ["-E", "x", p, "--", "true"],
                 ["--session-timeout", "0", p, "--", "true"], ["--bogus", p, "--", "true"],
                 ["-x", p, "--", "true"], ["-w"], ["status"], ["status", "rel"],
                 ["status", p, "extra"], [p, "-w", "x", "--", "true"]):
        _, err, _ = expect(args, 64, stderr_has=[hint, "zklock: "])
        check("Usage" not in err, "the whole usage on a usage error: %r" % err)


# ---- signals ----

def signal_while_waiting(sig, name):
    p = lock_path("waiting-" + name)
    h = holder(p)
    try:
        marker = os.path.join(TMP, "waiting-" + name)
        w = Proc(["-v", p, "--", "touch", marker])
        waiter_queued(p, w, 1)
        t0 = time.monotonic()
        w.signal(sig)
        rc = w.wait(10)
        check(rc == 128 + sig, "waiter: exit %s, expected %s; stderr %r" %
              (rc, 128 + sig, w.stderr()))
        check(time.monotonic() - t0 < 3, "the waiter took %.1f s to go" %
              (time.monotonic() - t0))
        check(owners(p) == [h.pid], "queue after the waiter left: %r" % owners(p))
        check(not os.path.exists(marker), "the command ran")
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    expect(["-w", "10", p, "--", "true"], 0)


@case
def sigterm_while_waiting():
    signal_while_waiting(signal.SIGTERM, "term")


@case
def sigint_while_waiting():
    signal_while_waiting(signal.SIGINT, "int")


@case
def sighup_while_waiting():
    signal_while_waiting(signal.SIGHUP, "hup")


def signal_passed_on(sig, name):
    p = lock_path("pass-" + name)
    marker = os.path.join(TMP, "pass-" + name)
    script = ('trap "echo got > %s; exit 0" %s; echo ready; '
              'while :; do sleep 0.1; done' % (shlex.quote(marker), name.upper()))
    # zklock hands its command the dispositions it was given: a signal ignored here (the
    # suite run under nohup ignores SIGHUP) stays ignored, and a shell cannot trap a
    # signal ignored on entry. The command must see it caught, so it starts at default.
    z = Proc([p, "--", "sh", "-c", script],
             preexec=lambda: signal.signal(sig, signal.SIG_DFL))
    z.wait_line("^ready$", stream="out")
    z.signal(sig)
    rc = z.wait(10)
    check(rc == 0, "exit %s, expected 0; stderr %r" % (rc, z.stderr()))
    check(os.path.exists(marker), "the command did not get the signal")
    check(status(p) == [], "the lock was not released: %r" % status(p))
    # a command that does not catch it dies of it, and zklock says so
    z = Proc([p, "--", "sh", "-c", "echo ready; while :; do sleep 0.1; done"],
             preexec=lambda: signal.signal(sig, signal.SIG_DFL))
    z.wait_line("^ready$", stream="out")
    z.signal(sig)
    rc = z.wait(10)
    check(rc == 128 + sig, "exit %s, expected %s" % (rc, 128 + sig))
    check(status(p) == [], "the lock was not released: %r" % status(p))


@case
def sigterm_passed_on():
    signal_passed_on(signal.SIGTERM, "term")


@case
def sigint_passed_on():
    signal_passed_on(signal.SIGINT, "int")


@case
def sighup_passed_on():
    signal_passed_on(signal.SIGHUP, "hup")


# ---- queue ----

@case
def status_lists_the_queue():
    p = lock_path("status-list")
    check(status(p) == [], "a fresh lock has a queue")
    h = holder(p)
    try:
        nodes = status(p)
        check(len(nodes) == 1 and re.fullmatch(r".+:%d" % h.pid, nodes[0][1]) and
              re.search(r"/_c_[0-9a-f-]+-lock-\d{10}$", nodes[0][0]),
              "status: %r" % nodes)
        w = Proc([p, "--", "true"])
        waiter_queued(p, w, 1)
        rc, out, _, _ = run(["status", "-s", SERVERS, p])  # options after "status"
        check(rc == 0 and len(out.splitlines()) == 2, "status: %r" % out)
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    check(w.wait() == 0, "waiter: exit %s" % w.p.returncode)
    check(status(p) == [], "queue after both: %r" % status(p))


@case
def fairness():
    p = lock_path("fair")
    order = os.path.join(TMP, "fair-order")
    h = holder(p)
    waiters = []
    try:
        for i in range(1, 4):
            w = Proc([p, "--", "sh", "-c", "echo %d >> %s" % (i, shlex.quote(order))])
            waiter_queued(p, w, i)
            waiters.append(w)
        check(owners(p) == [h.pid] + [w.pid for w in waiters], "queue %r" % owners(p))
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    for w in waiters:
        check(w.wait() == 0, "waiter: exit %s; stderr %r" % (w.p.returncode, w.stderr()))
    with open(order) as f:
        got = f.read().split()
    check(got == ["1", "2", "3"], "acquired in the order %r" % got)


# ---- lock lost ----

class Proxy:
    """A TCP proxy to the server that the test can cut: partition() closes every
    connection and closes new ones at once (the client sees a server it cannot reach),
    heal() lets connections through again. The server itself keeps running, so it
    expires the sessions of cut-off clients after their timeout, as in a partition."""

    def __init__(self, target):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.lock = threading.Lock()
        self.cut = False
        self.pairs = []
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.addr = "127.0.0.1:%d" % self.ls.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            with self.lock:
                cut = self.cut
            if cut:
                c.close()
                continue
            try:
                u = socket.create_connection(self.target, timeout=5)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.pairs.append((c, u))
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for sock in (a, b):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def partition(self):
        with self.lock:
            self.cut = True
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for sock in pair:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def heal(self):
        with self.lock:
            self.cut = False

    def close(self):
        self.partition()
        self.ls.close()


@case
def lock_lost():
    """zklock is cut off from the server for longer than the session timeout: the
    server expires the session (its node goes), the lock is lost, the command gets
    SIGTERM, and SIGKILL if it ignores that: not --kill-grace (10 s) later, but halfway
    from the loss to the session's earliest expiry (200 ms with a 4 s session), and
    zklock exits 70. The loss is reported while cut off, after 90% of the session
    timeout without an answer."""
    p1, p2 = lock_path("lost-term"), lock_path("lost-kill")
    marker = os.path.join(TMP, "lost")
    polite = ('trap "echo got > %s; exit 0" TERM; echo ready; '
              'while :; do sleep 0.1; done' % shlex.quote(marker))
    stubborn = "trap '' TERM; echo ready; while :; do sleep 0.1; done"
    proxy = Proxy(SERVERS)
    try:
        opts = ["-v", "-s", proxy.addr, "--session-timeout", "4000"]
        a = Proc(opts + [p1, "--", "sh", "-c", polite])
        b = Proc(opts + [p2, "--", "sh", "-c", stubborn])
        a.wait_line("^ready$", stream="out")
        b.wait_line("^ready$", stream="out")
        check(owners(p1) == [a.pid] and owners(p2) == [b.pid], "not holding")
        proxy.partition()
        wait_until(lambda: status(p1) == [] and status(p2) == [],
                   "the server expired the cut-off sessions", timeout=40)
        proxy.heal()
        lost = "^zklock: lock on %s lost$"
        a.wait_line(lost % re.escape(p1), timeout=30)
        rc = a.wait(10)
        check(rc == 70, "exit %s, expected 70; stderr %r" % (rc, a.stderr()))
        check(os.path.exists(marker), "the command did not get SIGTERM")
        _, t_lost = b.wait_line_at(lost % re.escape(p2), timeout=30)
        rc = b.wait(20)
        secs = time.monotonic() - t_lost
        check(rc == 70, "exit %s, expected 70; stderr %r" % (rc, b.stderr()))
        # zklock's exit also waits for its session to close (up to 3 s): measured to
        # the exit, 6 s tells the clamp from the 10 s grace.
        check(secs < 6, "zklock exited %.1f s after the loss: SIGKILL did not come before "
              "the session's expiry (kill-grace is 10 s)" % secs)
    finally:
        proxy.close()
    expect(["-w", "10", p1, "--", "true"], 0)


# ---- the watchdog: the command does not outlive the lock ----
#
# A holder's command here is bash: it ignores SIGTERM, writes its pid and its background
# child's, and both append a timestamp (date +%s%N, wall clock) to a file every ~20 ms.
# The next holder's command writes one timestamp: it must come after the last of theirs.

WD_OPTS = ["-v", "--session-timeout", "4000"]


def tmp(name):
    return os.path.join(TMP, name)


def stamping_job(name):
    """The command of a holder: ignores SIGTERM; writes $ZKLOCK_TOKEN to NAME.token,
    "PID CHILD" to NAME.pids, and appends a timestamp to NAME (and its background child,
    a subshell, to NAME.child) every ~20 ms until killed."""
    q = {k: shlex.quote(tmp(name + k)) for k in ("", ".child", ".token", ".pids")}
    loop = "while :; do date +%%s%%N >> %s; sleep 0.02; done"
    script = ('trap "" TERM; echo "$ZKLOCK_TOKEN" > %s; (%s) & echo "$$ $!" > %s.tmp; '
              'mv %s.tmp %s; %s' % (q[".token"], loop % q[".child"], q[".pids"],
                                    q[".pids"], q[".pids"], loop % q[""]))
    return ["bash", "-c", script]


def stamp_once_job(name):
    """The command of the next holder: writes $ZKLOCK_TOKEN to NAME.token and one
    timestamp to NAME."""
    return ["bash", "-c", 'echo "$ZKLOCK_TOKEN" > %s; date +%%s%%N >> %s' %
            (shlex.quote(tmp(name + ".token")), shlex.quote(tmp(name)))]


def stamps(name):
    """The whole timestamps (ns) in NAME, in order."""
    try:
        with open(tmp(name)) as f:
            return [int(l) for l in f.read().split("\n")[:-1] if l.isdigit()]
    except FileNotFoundError:
        return []


def token_of(name):
    with open(tmp(name + ".token")) as f:
        return int(f.read())


def job_started(name):
    """Waits until a stamping_job has written its pids and both have written a record;
    returns the pids [leader, child]."""
    wait_until(lambda: os.path.exists(tmp(name + ".pids")) and stamps(name) and
               stamps(name + ".child"), "the command %s has started" % name)
    with open(tmp(name + ".pids")) as f:
        return [int(x) for x in f.read().split()]


def last_stamp(name):
    """The last record of a stamping_job and its child."""
    return max(stamps(name) + stamps(name + ".child"))


def check_handover(first, second):
    """The second holder's command started after the last record of the first's (and of
    its child), with a greater fencing token."""
    last, start = last_stamp(first), min(stamps(second))
    check(start > last, "%s's command started %.3f s before %s's last record"
          % (second, (last - start) / 1e9, first))
    ta, tb = token_of(first), token_of(second)
    check(tb > ta > 0, "tokens %d then %d" % (ta, tb))


def proc_stat(pid):
    """(comm, state, ppid) of pid from /proc, or None if there is no such process."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rindex(")") + 2:].split()
    return s[s.index("(") + 1:s.rindex(")")], rest[0], int(rest[1])


def alive(pid):
    """Whether pid runs: a zombie has ended (its parent has not reaped it yet)."""
    st = proc_stat(pid)
    return st is not None and st[1] not in "ZXx"


def kill_leftovers(pids):
    """SIGKILLs the job's processes that still run (only bash, lest a pid be reused)."""
    for pid in pids:
        st = proc_stat(pid)
        if st is not None and st[0] == "bash" and alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def watchdogs_of(pid):
    """The pids of pid's children named zklock-watchdog."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st is not None and st[2] == pid and st[0] == "zklock-watchdog":
                found.append(int(d))
    return found


@case
def kill9_zklock_kills_job():
    """zklock is killed with SIGKILL while its command runs: the command's leader and its
    background child (both ignoring SIGTERM) are killed at once (the watchdog kills the
    group), and the next holder, waiting for the server to expire the dead session,
    starts its command only after their last record, with a greater fencing token."""
    p = lock_path("kill9")
    a = Proc(WD_OPTS + [p, "--"] + stamping_job("kill9-a"))
    pids = []
    try:
        a.wait_line(r"^zklock: acquired ")
        pids = job_started("kill9-a")
        check(owners(p) == [a.pid], "queue %r" % owners(p))
        a.signal(signal.SIGKILL)
        t_kill, wall_kill = time.monotonic(), time.time_ns()
        b = Proc(WD_OPTS + [p, "--"] + stamp_once_job("kill9-b"))
        wait_until(lambda: not any(alive(x) for x in pids),
                   "the command %r is gone" % pids, timeout=5)
        secs = time.monotonic() - t_kill
        check(secs < 0.5, "the command %r went %.3f s after zklock's SIGKILL" % (pids, secs))
        check(a.wait() == -signal.SIGKILL, "zklock: exit %s" % a.p.returncode)
        rc = b.wait(30)
        check(rc == 0, "second: exit %s; %r" % (rc, b.stderr()))
        last = last_stamp("kill9-a")
        check(last < wall_kill + 500000000,
              "the command wrote %.3f s after zklock's SIGKILL" % ((last - wall_kill) / 1e9))
        check_handover("kill9-a", "kill9-b")
    finally:
        kill_leftovers(pids)
    wait_until(lambda: status(p) == [], "the lock is free (%r)" % status(p))


@case
def stop_zklock_past_session():
    """zklock is stopped (SIGSTOP) past its session's loss deadline: the watchdog sends
    SIGTERM (ignored) then SIGKILL to the command's group before the server expires the
    session, so the waiter's command starts after the last record. Continued, zklock
    says the lock was lost and exits 70."""
    p = lock_path("stopped")
    a = Proc(WD_OPTS + [p, "--"] + stamping_job("stopped-a"))
    pids, stopped = [], False
    try:
        a.wait_line(r"^zklock: acquired ")
        pids = job_started("stopped-a")
        b = Proc(WD_OPTS + [p, "--"] + stamp_once_job("stopped-b"))
        waiter_queued(p, b, 1)
        a.signal(signal.SIGSTOP)
        stopped = True
        wait_until(lambda: stamps("stopped-b"), "the waiter's command has started",
                   timeout=20)
        check(not any(alive(x) for x in pids), "the command %r runs on" % pids)
        check_handover("stopped-a", "stopped-b")
        rc = b.wait(10)
        check(rc == 0, "waiter: exit %s; %r" % (rc, b.stderr()))
        a.signal(signal.SIGCONT)
        stopped = False
        rc = a.wait(20)
        check(rc == 70, "exit %s, expected 70; stderr %r" % (rc, a.stderr()))
        a.wait_line(r"^zklock: lock on %s lost" % re.escape(p), timeout=0)
        check(not any(alive(x) for x in pids), "the command %r runs on" % pids)
        check(proc_stat(pids[0]) is None, "the command's leader %d was not reaped: %r" %
              (pids[0], proc_stat(pids[0])))
    finally:
        if stopped:
            a.signal(signal.SIGCONT)
        kill_leftovers(pids)
    wait_until(lambda: status(p) == [], "the lock is free (%r)" % status(p))


@case
def short_stop_costs_nothing():
    """zklock stopped for 1 s (a quarter of the session timeout) while its command runs:
    nothing is lost, the command's status passes through."""
    p = lock_path("short-stop")
    a = Proc(WD_OPTS + [p, "--", "bash", "-c", "echo ready; sleep 2; exit 7"])
    a.wait_line("^ready$", stream="out")
    a.signal(signal.SIGSTOP)
    try:
        time.sleep(1)  # the scenario: how long zklock stays stopped
        check(owners(p) == [a.pid], "queue while stopped: %r" % owners(p))
    finally:
        a.signal(signal.SIGCONT)
    rc = a.wait(20)
    check(rc == 7, "exit %s, expected 7; stderr %r" % (rc, a.stderr()))
    check("lost" not in a.stderr(), "stderr %r" % a.stderr())
    check(status(p) == [], "not released: %r" % status(p))


@case
def chroot_holder_keeps_lock():
    """Under a chroot, a holder past its loss deadline (3.6 s of 4 s) keeps its lock: its
    heartbeat, a check of "/", finds the chroot's root there and proves the session."""
    k = kazoo_client()
    chroot = ROOT + "-chroot"
    try:
        k.ensure_path(chroot)
        servers = SERVERS + chroot
        a = Proc(WD_OPTS + ["-s", servers, "/held", "--", "bash", "-c",
                            "echo ready; sleep 5; exit 7"])
        a.wait_line("^ready$", stream="out")
        check(len(k.get_children(chroot + "/held")) == 1,
              "no node under the chroot: %r" % k.get_children(chroot))
        rc = a.wait(20)
        check(rc == 7, "exit %s, expected 7; stderr %r" % (rc, a.stderr()))
        check("lost" not in a.stderr(), "stderr %r" % a.stderr())
        check("refused" not in a.stderr(), "stderr %r" % a.stderr())
    finally:
        k.delete(chroot, recursive=True)
        k.stop()


@case
def status_shows_deadline():
    """`zklock status` shows, for our own holder on this host, the time left until the
    deadline its watchdog enforces (less than 90% of the 4 s session ahead); for a
    waiter, "-"; and the same in JSON."""
    p = lock_path("deadline")
    a = Proc(WD_OPTS + [p, "--", "bash", "-c", "echo ready; exec cat"],
             stdin=subprocess.PIPE)
    a.wait_line("^ready$", stream="out")
    b = Proc(WD_OPTS + [p, "--", "true"])
    try:
        waiter_queued(p, b, 1)
        nodes = status_lines(p)
        check([n["pid"] for n in nodes] == [str(a.pid), str(b.pid)], "queue %r" % nodes)
        m = re.match(r"^(-?\d+)ms$", nodes[0]["deadline"])
        check(m and 0 < int(m.group(1)) <= 3600,
              "holder's deadline %r, expected 1..3600ms" % nodes[0]["deadline"])
        check(nodes[1]["deadline"] == "-", "waiter's deadline %r" % nodes[1]["deadline"])
        rc, out, err, _ = run(["status", "--json", p])
        check(rc == 0, "status --json: %s %r" % (rc, err))
        left = [n["deadline_ms"] for n in json.loads(out)["nodes"]]
        check(isinstance(left[0], int) and 0 < left[0] <= 3600 and left[1] is None,
              "deadline_ms %r" % left)
    finally:
        a.p.stdin.close()
    check(a.wait(10) == 0, "holder: %r" % a.stderr())
    check(b.wait(10) == 0, "waiter: %r" % b.stderr())


@case
def watchdog_killed():
    """The watchdog is killed: zklock kills the command's group (SIGKILL) and exits 70;
    the group is gone before the waiter's command starts."""
    p = lock_path("watchdog-killed")
    a = Proc(WD_OPTS + [p, "--"] + stamping_job("wd-a"))
    pids = []
    try:
        a.wait_line(r"^zklock: acquired ")
        pids = job_started("wd-a")
        b = Proc(WD_OPTS + [p, "--"] + stamp_once_job("wd-b"))
        waiter_queued(p, b, 1)
        found = []

        def one_watchdog():
            found[:] = watchdogs_of(a.pid)
            return len(found) == 1
        wait_until(one_watchdog, "zklock %d has one zklock-watchdog child" % a.pid,
                   timeout=5)
        os.kill(found[0], signal.SIGKILL)
        rc = a.wait(10)
        check(rc == 70, "exit %s, expected 70; stderr %r" % (rc, a.stderr()))
        a.wait_line(r"^zklock: the watchdog of %s died" % re.escape(p), timeout=0)
        check(not any(alive(x) for x in pids), "the command %r runs on" % pids)
        rc = b.wait(20)
        check(rc == 0, "waiter: exit %s; %r" % (rc, b.stderr()))
        check_handover("wd-a", "wd-b")
    finally:
        kill_leftovers(pids)
    wait_until(lambda: status(p) == [], "the lock is free (%r)" % status(p))


# ---- bad arguments name the problem ----

@case
def usage_errors_name_the_problem():
    p = lock_path("usage2")
    for args, words in (
            (["--semaphore", "0", p, "--", "true"], ["semaphore size \"0\""]),
            (["--semaphore", "x", p, "--", "true"], ["semaphore size"]),
            (["-w", "-3", p, "--", "true"], ["invalid wait \"-3\""]),
            ([p, "-w", "5", "true"], ["\"-w\" after the lock path", "\"--\""]),
            ([p], ["missing command"]),
            ([p, "--"], ["missing command", "\"--\""]),
            (["--frobnicate", p, "--", "true"], ["unrecognized option '--frobnicate'"]),
            (["locks/x", "--", "true"], ["\"locks/x\" is not absolute"]),
            (["--read", "--write", p, "--", "true"], ["exclude each other"]),
            (["--leader", "--semaphore", "2", p, "--", "true"], ["exclude each other"]),
            (["--requeue", p, "--", "true"], ["--requeue needs --leader"]),
            (["--revocable", "--leader", p, "--", "true"], ["--revocable", "not --leader"]),
            (["--kill-signal", "BOGUS", p, "--", "true"], ["kill signal \"BOGUS\""]),
            (["--kill-grace", "-1", p, "--", "true"], ["kill grace \"-1\""]),
            (["--once-per", "0", p, "--", "true"], ["interval \"0\""]),
            (["--once-per", "1w", p, "--", "true"], ["interval \"1w\""]),
            (["--token-env", "1X", p, "--", "true"], ["\"1X\""]),
            (["--data", "x", "--revocable", p, "--", "true"],
             ["--data does not work with --revocable"]),
            (["list"], ["missing prefix"]),
            (["list", "rel"], ["prefix \"rel\" is not absolute"]),
            (["revoke"], ["missing lock path"]),
            (["--session-timeout", "1", p, "--", "true"],
             ["session timeout \"1\"", "100..3600000 milliseconds"]),
            (["--session-timeout", "3600001", p, "--", "true"], ["100..3600000"]),
            (["--lock-delay", "0", p, "--", "true"], ["--lock-delay \"0\""]),
            (["--lock-delay", "soon", p, "--", "true"], ["--lock-delay \"soon\""]),
            (["--lock-delay", "1w", p, "--", "true"], ["--lock-delay \"1w\""]),
            (["--lock-delay", "5", "--read", p, "--", "true"], ["--lock-delay", "not --read"]),
            (["--semaphore", "2", "--lock-delay", "5", p, "--", "true"],
             ["--lock-delay", "not --semaphore"]),
            (["status", "--lock-delay", "5", p], ["--lock-delay", "not of zklock status"]),
            (["--previous", "--read", p, "--", "true"], ["--previous", "not --read"]),
            (["list", "--previous", p], ["--previous", "not of zklock list"]),
            (["--previous", "--leader", p, "--", "true"], ["--previous", "not --leader"]),
            (["--leader", "--lock-delay", "1", p, "--", "true"],
             ["--lock-delay", "not --leader"])):
        _, err, _ = expect(args, 64, stderr_has=["zklock --help"] + words)
        check("Usage" not in err, "the whole usage on a usage error: %r" % err)


# ---- modes ----

@case
def read_write_modes():
    p = lock_path("rw")
    r1 = holder(p, ["--read"])
    r2 = holder(p, ["--read"])  # readers share
    try:
        expect(["--write", "-n", p, "--", "true"], 1, stderr_has="is held by ")
        w = Proc(["-v", "--write", p, "--", "true"])
        wait_until(lambda: len(status_lines(p)) == 3, "the writer is queued")
        nodes = status_lines(p)
        check([n["role"] for n in nodes] == ["holder", "holder", "waiting"] and
              [n["layout"] for n in nodes] == ["read", "read", "write"] and
              "__READ__" in nodes[0]["node"] and "__WRIT__" in nodes[2]["node"],
              "status: %r" % nodes)
        expect(["--read", "-n", p, "--", "true"], 1)  # a reader waits behind a writer
    finally:
        r1.release()
        r2.release()
    check(r1.wait() == 0 and r2.wait() == 0, "readers failed")
    check(w.wait() == 0, "writer: exit %s; %r" % (w.p.returncode, w.stderr()))
    check(status(p) == [], "not released: %r" % status(p))


@case
def naming_kazoo():
    """--naming kazoo makes kazoo's names, which a kazoo Lock waits behind; a bad naming
    is a usage error."""
    expect(["--naming", "bogus", "/x", "--", "true"], 64, stderr_has="--naming")
    expect(["--naming", "kazoo", "--semaphore", "2", "/x", "--", "true"], 64,
           stderr_has="--naming kazoo")
    p = lock_path("naming-kazoo")
    h = holder(p, ["--naming", "kazoo"])
    try:
        nodes = status_lines(p)
        check(len(nodes) == 1 and re.search(r"/[0-9a-f]{32}__lock__\d{10}$", nodes[0]["node"]),
              "status: %r" % nodes)
        k = kazoo_client()
        try:
            check(not k.Lock(p, "kazoo").acquire(blocking=False),
                  "kazoo's Lock got in while zklock held with kazoo names")
        finally:
            k.stop()
            k.close()
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    r = holder(p, ["--naming", "kazoo", "--read"])
    try:
        nodes = status_lines(p)
        check(len(nodes) == 1 and "__rlock__" in nodes[0]["node"], "status: %r" % nodes)
    finally:
        r.release()
    check(r.wait() == 0, "reader: exit %s" % r.p.returncode)


@case
def semaphore_mode():
    p = lock_path("sem")
    a = holder(p, ["--semaphore", "2"])
    b = holder(p, ["--semaphore", "2"])
    try:
        _, err, _ = expect(["--semaphore", "2", "-n", p, "--", "true"], 1,
                           stderr_has=["is held by ", "2 leases taken"])
        nodes = status_lines(p)
        check([n["role"] for n in nodes] == ["lease", "lease"] and
              all(n["layout"] == "semaphore" and "/leases/" in n["node"] and
                  "-lease-" in n["node"] for n in nodes) and
              sorted(int(n["pid"]) for n in nodes) == sorted([a.pid, b.pid]),
              "status: %r" % nodes)
        c = Proc(["-v", "--semaphore", "2", p, "--", "true"])
        # Curator's layout: the taker at the gate (locks/) has made its lease and waits.
        wait_until(lambda: len(status_lines(p)) == 4, "the third is at the gate")
        nodes = status_lines(p)
        check([n["role"] for n in nodes] == ["lease", "lease", "waiting", "gate"] and
              "/locks/" in nodes[3]["node"] and int(nodes[2]["pid"]) == c.pid and
              int(nodes[3]["pid"]) == c.pid, "status: %r" % nodes)
        a.release()
        check(c.wait() == 0, "third: exit %s; %r" % (c.p.returncode, c.stderr()))
        check(a.wait() == 0, "first holder: exit %s" % a.p.returncode)
    finally:
        a.release() if not a.p.stdin.closed else None
        b.release()
    check(b.wait() == 0, "second holder: exit %s" % b.p.returncode)
    check(status(p) == [], "not released: %r" % status(p))


@case
def leader_mode():
    p = lock_path("leader")
    h = Proc(["-v", "--leader", p, "--", "cat"], stdin=subprocess.PIPE,
             stdout=subprocess.DEVNULL)
    h.wait_line(r"^zklock: acquired leadership of %s \(fencing token \d+\)" % re.escape(p))
    try:
        expect(["--leader", "-n", p, "--", "true"], 1,
               stderr_has=["leadership of %s is held by " % p, ":%d;" % h.pid])
        w = Proc(["--leader", p, "--", "true"])
        wait_until(lambda: len(status_lines(p)) == 2, "the second is queued")
        nodes = status_lines(p)
        check([n["role"] for n in nodes] == ["leader", "waiting"] and
              all(n["layout"] == "latch" and "-latch-" in n["node"] for n in nodes) and
              int(nodes[0]["pid"]) == h.pid and int(nodes[1]["pid"]) == w.pid,
              "status: %r" % nodes)
    finally:
        h.release()
    check(h.wait() == 0, "leader: exit %s" % h.p.returncode)
    check(w.wait() == 0, "second: exit %s; %r" % (w.p.returncode, w.stderr()))
    check(status(p) == [], "not released: %r" % status(p))


@case
def leader_requeue():
    """Two --requeue workers take turns, never at once, until told to stop."""
    p = lock_path("requeue")
    log = os.path.join(TMP, "requeue-log")
    procs = []
    for name in ("A", "B"):
        # SIGTERM reaches the command's group while it runs; it says so before it exits
        # (zklock gives leadership up only once it has), so that a turn cut short by the
        # end of the test still shows as one.
        q = shlex.quote(log)
        script = ("trap 'echo killed %s >> %s; exit 143' TERM; echo start %s >> %s; "
                  "sleep 0.1; echo end %s >> %s" % (name, q, name, q, name, q))
        procs.append(Proc(["--leader", "--requeue", p, "--", "sh", "-c", script]))

    def lines():
        try:
            with open(log) as f:
                return f.read().split("\n")[:-1]
        except FileNotFoundError:
            return []
    wait_until(lambda: len(lines()) >= 12, "six turns were taken", timeout=30)
    for x in procs:
        x.signal(signal.SIGTERM)
    for x in procs:
        rc = x.wait(20)
        check(rc in (0, 143), "exit %s; %r" % (rc, x.stderr()))
    got = lines()
    # Never two at once: start X, then end X (or killed X) before anyone starts again. A
    # "killed X" with no start before it is a command stopped before it began its turn.
    inside = None
    for line in got:
        what, name = line.split(" ", 1)
        if what == "start":
            check(inside is None, "overlap in %r" % got)
            inside = name
        else:
            check(what in ("end", "killed") and
                  (inside == name or (what == "killed" and inside is None)),
                  "unpaired in %r" % got)
            inside = None
    turns = [l[6:] for l in got if l.startswith("start ")]
    check(turns.count("A") >= 2 and turns.count("B") >= 2, "turns %r" % turns)
    # Once both are in the election, leadership alternates.
    first_b = turns.index("B") if turns[0] == "A" else turns.index("A")
    for i in range(first_b, len(turns) - 1):
        check(turns[i] != turns[i + 1], "not alternating: %r" % turns)
    check(status(p) == [], "not left: %r" % status(p))


def kazoo_client():
    try:
        from kazoo.client import KazooClient
    except ImportError:
        raise Skip("kazoo is not installed for this Python")
    k = KazooClient(hosts=SERVERS)
    k.start(timeout=15)
    return k


@case
def leader_node_deleted_kills_command():
    """The leader's node is deleted from outside: leadership is lost, the command gets
    --kill-signal, ignores it, gets SIGKILL 0.1 s later (a deleted node keeps nobody
    out, so the longer --kill-grace does not apply); zklock exits 70."""
    p = lock_path("leader-deleted")
    k = kazoo_client()
    try:
        marker = os.path.join(TMP, "usr1")
        # The trap runs as soon as the signal comes: wait (unlike a foreground sleep)
        # returns at once for a trapped signal.
        script = ('trap "echo got > %s" USR1; echo ready; '
                  'while :; do sleep 10 & wait $!; done' % shlex.quote(marker))
        z = Proc(["--leader", "--kill-signal", "USR1", "--kill-grace", "1.5", p, "--",
                  "sh", "-c", script])
        z.wait_line("^ready$", stream="out")
        node = status_lines(p)[0]["node"]
        k.delete(node)
        _, t_lost = z.wait_line_at("^zklock: lock on %s lost$" % re.escape(p))
        rc = z.wait(10)
        secs = time.monotonic() - t_lost
        check(rc == 70, "exit %s, expected 70; %r" % (rc, z.stderr()))
        # A deleted node keeps nobody out: SIGKILL within 0.1 s, not --kill-grace.
        check(secs < 1.0, "SIGKILL %.1f s after the loss, not within 0.1 s" % secs)
        wait_until(lambda: os.path.exists(marker), "the command got SIGUSR1", timeout=5)
        wait_until(lambda: status(p) == [], "the latch left")
    finally:
        k.stop()
        k.close()


@case
def mutex_node_deleted_stops_command():
    """A holder's node deleted by hand (as an operator "clears a stuck lock"): the lock is
    lost, the command gets --kill-signal, and zklock exits 70; the next waiter takes the
    lock. Both hear of the deletion from the server at the same moment, so the signal
    comes as the next holder's command starts, not before: the gap between the two is
    measured and printed, and must stay small."""
    p = lock_path("mutex-deleted")
    k = kazoo_client()
    try:
        first, second = "deleted-first", "deleted-second"
        got = tmp(first + ".term")
        q = {n: shlex.quote(tmp(n)) for n in (first, first + ".term")}
        polite = ("trap 'date +%%s%%N > %s; exit 0' TERM; echo ready; "
                  "while :; do date +%%s%%N >> %s; sleep 0.02; done"
                  % (q[first + ".term"], q[first]))
        a = Proc(WD_OPTS + [p, "--", "bash", "-c", polite])
        a.wait_line("^ready$", stream="out")
        b = Proc(WD_OPTS + ["-w", "30", p, "--"] + stamp_once_job(second))
        waiter_queued(p, b, 1)
        node = status_lines(p)[0]["node"]
        t0 = time.time_ns()
        k.delete(node)
        a.wait_line("^zklock: lock on %s lost$" % re.escape(p), timeout=10)
        rc = a.wait(10)
        check(rc == 70, "exit %s, expected 70; stderr %r" % (rc, a.stderr()))
        rc = b.wait(10)
        check(rc == 0, "the next holder: exit %s; stderr %r" % (rc, b.stderr()))
        check(os.path.exists(got), "the command did not get SIGTERM")
        with open(got) as f:
            t_term = int(f.read())
        start = min(stamps(second))
        print("# delete -> first command signalled %.1f ms, -> next command started "
              "%.1f ms (signal %.1f ms %s the start)"
              % ((t_term - t0) / 1e6, (start - t0) / 1e6, abs(start - t_term) / 1e6,
                 "before" if t_term <= start else "after"))
        check(t_term - t0 < 1e9, "signalled %.3f s after the delete" % ((t_term - t0) / 1e9))
        check(abs(start - t_term) < 1e9, "the signal and the next start %.3f s apart"
              % (abs(start - t_term) / 1e9))
        check(token_of(second) > 0, "the next holder has no token")
    finally:
        k.stop()
        k.close()


@case
def deleted_node_stubborn_job_killed_at_once():
    """A holder's node deleted by hand while its command (and the command's background
    child) ignores SIGTERM: nothing keeps the next holder out, so SIGKILL follows the
    signal within 0.1 s (not halfway to the session's expiry, as after a silence), and
    the stubborn job's last record comes at most that long after the next holder's
    command started. --kill-grace is long here: it does not apply."""
    p = lock_path("deleted-stubborn")
    k = kazoo_client()
    pids = []
    try:
        first, second = "stubborn-first", "stubborn-second"
        a = Proc(WD_OPTS + ["--kill-grace", "30", p, "--"] + stamping_job(first))
        a.wait_line(r"^zklock: acquired ")
        pids = job_started(first)
        b = Proc(WD_OPTS + ["-w", "30", p, "--"] + stamp_once_job(second))
        waiter_queued(p, b, 1)
        node = status_lines(p)[0]["node"]
        k.delete(node)
        _, t_lost = a.wait_line_at("^zklock: lock on %s lost$" % re.escape(p), timeout=10)
        a.wait_line("its node was deleted while held.*SIGKILL follows signal 15 in 100 ms")
        rc = a.wait(10)
        secs = time.monotonic() - t_lost
        check(rc == 70, "exit %s, expected 70; stderr %r" % (rc, a.stderr()))
        rc = b.wait(10)
        check(rc == 0, "the next holder: exit %s; stderr %r" % (rc, b.stderr()))
        wait_until(lambda: not any(alive(x) for x in pids), "the stubborn job is gone",
                   timeout=5)
        after = (last_stamp(first) - min(stamps(second))) / 1e9
        print("# zklock exited %.3f s after telling the loss; the stubborn job's last "
              "record %.3f s after the next command started" % (secs, after))
        # Without the short grace: SIGKILL ~2 s after the loss (halfway to the expiry
        # of a 4 s session), records for as long.
        check(secs < 1.0, "zklock exited %.3f s after the loss" % secs)
        check(after < 1.0, "the stubborn job wrote %.3f s after the next command started"
              % after)
    finally:
        kill_leftovers(pids)
        k.stop()
        k.close()


# ---- revocation ----

@case
def revocable_and_revoke():
    p = lock_path("revoke")
    expect(["revoke", p], 1, stdout_has="is free")
    marker = os.path.join(TMP, "revoked")
    script = ('trap "echo got > %s; exit 0" TERM; echo ready; while :; do sleep 0.1; done' %
              shlex.quote(marker))
    h = Proc(["--revocable", p, "--", "sh", "-c", script])
    h.wait_line("^ready$", stream="out")
    check(status_lines(p)[0]["data"] == "", "a revocable node has data: %r" % status_lines(p))
    out, _, _ = expect(["revoke", p], 0, stdout_has="revocable; asked its holder")
    rc = h.wait(15)
    check(rc == 71, "holder: exit %s, expected 71; %r" % (rc, h.stderr()))
    check("revoked" in h.stderr(), "no word of revocation: %r" % h.stderr())
    check(os.path.exists(marker), "the command did not get SIGTERM")
    check(status(p) == [], "not released: %r" % status(p))

    # -w waits until the holder has let go.
    h = Proc(["--revocable", p, "--", "sh", "-c", script])
    h.wait_line("^ready$", stream="out")
    expect(["revoke", "-w", "10", p], 0, stdout_has="released")
    check(h.wait(5) == 71, "holder: exit %s" % h.p.returncode)

    # A holder without --revocable is not asked (its data stays).
    h = holder(p)
    try:
        out, _, _ = expect(["revoke", p], 1, stdout_has="not revocable")
        check(h.p.poll() is None, "the holder went away")
        check(status_lines(p)[0]["data"].endswith(":%d" % h.pid), "data changed")
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)


@case
def revoke_writes_lock_nodes_only():
    # A persistent node named like a lock node, with no data, looks revocable to a
    # listing; zkl_revoke() reads it first and leaves it alone: it is no lock node.
    p = lock_path("revoke-fake")
    k = kazoo_client()
    try:
        fake = p + "/x-lock-0000000001"
        k.create(fake, b"", makepath=True)
        # Not a usage error (exit 1: nothing asked), and the library's reason is said.
        out, _, _ = expect(["revoke", fake], 1, stdout_has="%s: not asked: " % fake)
        check("is not a lock node (an ephemeral node of a lock's queue" in out,
              "the reason is dropped: %r" % out)
        expect(["revoke", p], 1, stdout_has="%s: not asked: " % fake)
        check(k.get(fake)[0] == b"", "its data was written: %r" % (k.get(fake)[0],))
    finally:
        k.stop()
        k.close()


@case
def semaphore_revocable():
    # --semaphore N --revocable: each lease can be asked back, one by naming its node
    # (zklock revoke NODE), all by naming the semaphore (zklock revoke PATH).
    p = lock_path("sem-revoke")
    script = 'trap "exit 0" TERM; echo ready; while :; do sleep 0.1; done'
    hs = [Proc(["--semaphore", "2", "--revocable", p, "--", "sh", "-c", script])
          for _ in range(2)]
    for h in hs:
        h.wait_line("^ready$", stream="out")
    nodes = status_lines(p)
    check([n["role"] for n in nodes] == ["lease", "lease"] and
          all(n["data"] == "" for n in nodes), "revocable leases: %r" % nodes)
    victim = nodes[0]["node"]
    expect(["revoke", victim], 0, stdout_has="revocable; asked its holder")
    wait_until(lambda: any(h.p.poll() is not None for h in hs), "one holder exits")
    gone = [h for h in hs if h.p.poll() is not None]
    left = [h for h in hs if h.p.poll() is None]
    check(len(gone) == 1 and len(left) == 1, "both exited on one revocation")
    check(gone[0].wait() == 71, "revoked holder: exit %s; %r" %
          (gone[0].p.returncode, gone[0].stderr()))
    check([n["node"] for n in status_lines(p)] == [nodes[1]["node"]],
          "the other lease went too, or the revoked one stayed: %r" % status_lines(p))
    expect(["revoke", victim], 1, stdout_has="no such node")
    # The semaphore's path: every lease is asked; -w waits until they are gone.
    expect(["revoke", "-w", "10", p], 0, stdout_has="released")
    check(left[0].wait(10) == 71, "last holder: exit %s" % left[0].p.returncode)
    check(status(p) == [], "not released: %r" % status(p))

    # A lease still waiting for its turn withdraws when asked (exit 71).
    p1 = lock_path("sem-revoke-wait")
    h = Proc(["--semaphore", "1", "--revocable", p1, "--", "sh", "-c", script])
    h.wait_line("^ready$", stream="out")
    w = Proc(["--semaphore", "1", "--revocable", p1, "--", "true"])
    wait_until(lambda: len([n for n in status_lines(p1) if "/leases/" in n["node"]]) == 2,
               "the waiter has made its lease")
    waiting = [n["node"] for n in status_lines(p1) if "/leases/" in n["node"]][1]
    expect(["revoke", waiting], 0, stdout_has="asked its")
    check(w.wait(10) == 71, "waiter: exit %s; %r" % (w.p.returncode, w.stderr()))
    check("withdrew" in w.stderr(), "waiter: %r" % w.stderr())
    check(h.p.poll() is None, "the holder went away")
    h.signal(signal.SIGTERM)
    h.wait()

    # A lease without --revocable carries its data and is not asked.
    p2 = lock_path("sem-revoke-no")
    h = holder(p2, ["--semaphore", "2"])
    try:
        expect(["revoke", p2], 1, stdout_has="not revocable")
        check(h.p.poll() is None, "the holder went away")
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)


# ---- fencing token ----

@case
def token_env():
    p = lock_path("token")
    out, _, _ = expect([p, "--", "sh", "-c", 'echo "$ZKLOCK_TOKEN"'], 0)
    check(re.fullmatch(r"[1-9]\d*\n", out), "ZKLOCK_TOKEN: %r" % out)
    out2, _, _ = expect(["--token-env", "FENCE", p, "--", "sh", "-c",
                         'echo "$FENCE ${ZKLOCK_TOKEN:-unset}"'], 0)
    t2, other = out2.split()
    check(int(t2) > int(out) and other == "unset", "FENCE: %r after %r" % (out2, out))
    # It is the czxid that status shows as the holder's token.
    h = Proc([p, "--", "sh", "-c", 'echo "$ZKLOCK_TOKEN"; cat'], stdin=subprocess.PIPE)
    try:
        line = h.wait_line(r"^\d+$", stream="out")
        check(status_lines(p)[0]["token"] == line, "status %r, token %s" %
              (status_lines(p), line))
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)


# ---- status, list ----

@case
def status_json_with_kazoo_holder():
    """A kazoo Lock holds the path; zklock waiters queue behind it; status --json lists
    them all in order, the kazoo holder first."""
    import json
    k = kazoo_client()
    p = lock_path("status-kazoo")
    lock = k.Lock(p, "kazoo-worker")
    check(lock.acquire(timeout=10), "kazoo could not take the lock")
    waiters = []
    try:
        for i in range(2):
            w = Proc([p, "--", "true"])
            waiter_queued(p, w, i + 1)
            waiters.append(w)
        rc, out, err, _ = run(["status", "--json", p])
        check(rc == 0, "exit %s; %r" % (rc, err))
        doc = json.loads(out)
        nodes = doc["nodes"]
        check(doc["path"] == p and doc["holders"] == 1 and doc["waiting"] == 2,
              "json: %r" % doc)
        check(nodes[0]["role"] == "holder" and nodes[0]["layout"] == "kazoo-lock" and
              nodes[0]["data"] == "kazoo-worker" and nodes[0]["pid"] is None and
              "__lock__" in nodes[0]["node"], "holder: %r" % nodes[0])
        check([n["pid"] for n in nodes[1:]] == [w.pid for w in waiters] and
              all(n["role"] == "waiting" and n["layout"] == "mutex" for n in nodes[1:]),
              "waiters: %r" % nodes[1:])
        tokens = [n["token"] for n in nodes]
        check(tokens == sorted(tokens) and
              all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", n["since"])
                  for n in nodes), "tokens / since: %r" % nodes)
    finally:
        lock.release()
        k.stop()
        k.close()
    for w in waiters:
        check(w.wait() == 0, "waiter: exit %s" % w.p.returncode)


@case
def list_prefix():
    import json
    prefix = lock_path("list")
    a = holder(prefix + "/a")
    b = holder(prefix + "/deep/b", ["--semaphore", "3"])
    try:
        w = Proc([prefix + "/a", "--", "true"])
        waiter_queued(prefix + "/a", w, 1)
        rc, out, err, _ = run(["list", prefix])
        check(rc == 0, "exit %s; %r" % (rc, err))
        rows = [l.split("\t") for l in out.splitlines()]
        check([r[0] for r in rows] == [prefix + "/a", prefix + "/deep/b"], "rows %r" % rows)
        check(rows[0][1:4] == ["mutex", "1", "1"] and rows[0][4].endswith(":%d" % a.pid),
              "row a: %r" % rows[0])
        check(rows[1][1:4] == ["semaphore", "1", "0"] and rows[1][4].endswith(":%d" % b.pid),
              "row b: %r" % rows[1])
        rc, out, err, _ = run(["list", "--json", prefix])
        doc = json.loads(out)
        check([l["path"] for l in doc["locks"]] == [prefix + "/a", prefix + "/deep/b"],
              "json: %r" % doc)
        expect(["list", prefix + "/nothing-here"], 0)
    finally:
        a.release()
        b.release()
    for x in (a, b, w):
        check(x.wait() == 0, "exit %s" % x.p.returncode)


@case
def list_unreadable_folder():
    # A folder that may not be read is left out of `zklock list`, and said so on stderr;
    # the rest is listed and the exit status is 0.
    from kazoo.security import make_digest_acl
    prefix = lock_path("list-acl")
    k = kazoo_client()
    try:
        k.create(prefix + "/secret/x", makepath=True)
        k.set_acls(prefix + "/secret", [make_digest_acl("someone", "else", all=True)])
        h = holder(prefix + "/open")
        try:
            rc, out, err, _ = run(["list", prefix])
            check(rc == 0, "exit %s; %r" % (rc, err))
            check([l.split("\t")[0] for l in out.splitlines()] == [prefix + "/open"],
                  "list: %r" % out)
            check("1 folder under %s could not be read (ACL)" % prefix in err,
                  "stderr: %r" % err)
        finally:
            h.release()
        check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    finally:
        k.stop()
        k.close()


# ---- progress ----

@case
def verbose_progress():
    p = lock_path("progress")
    h = holder(p)
    try:
        first = Proc([p, "--", "true"])
        waiter_queued(p, first, 1)
        w = Proc(["-v", p, "--", "true"])
        w.wait_line(r"waiting for %s: held by \S+:%d, 2 ahead$" % (re.escape(p), h.pid))
        # Queued, and past a turn of its progress report (every 0.5 s), with nothing
        # changed: the line is not said again.
        waiter_queued(p, w, 2)
        time.sleep(0.7)
        first.signal(signal.SIGTERM)
        check(first.wait() == 128 + signal.SIGTERM, "first waiter: %s" % first.p.returncode)
        w.wait_line(r"waiting for %s: held by \S+:%d, 1 ahead$" % (re.escape(p), h.pid))
        said = [line for line in w.stderr().splitlines() if "waiting for" in line]
        check(len(said) == 2 and said[0].endswith("2 ahead") and
              said[1].endswith("1 ahead"), "the waiting lines: %r" % said)
    finally:
        h.release()
    check(h.wait() == 0 and w.wait() == 0, "exits %s %s" % (h.p.returncode, w.p.returncode))


# ---- the docs ----

GUIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                     "GUIDE.md")


def guide_status_sample():
    """The lines of docs/GUIDE.md's sample `zklock status` output, split on tabs."""
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^\$ zklock status (\S+)\n(.*?)^```", text, flags=re.M | re.S)
    check(m is not None, "GUIDE.md has no sample of zklock status")
    return m.group(1), [line.split("\t") for line in m.group(2).splitlines()]


@case
def guide_status_sample_is_real():
    """GUIDE's sample of `zklock status` (a holder and a waiter of a mutex) has the
    fields, roles and forms that the tool prints for the same queue."""
    path, sample = guide_status_sample()
    p = lock_path("guide")
    h = holder(p)
    w = Proc([p, "--", "true"])
    try:
        waiter_queued(p, w, 1)
        rc, out, err, _ = run(["status", p])
    finally:
        h.release()
    check(h.wait() == 0 and w.wait() == 0, "exits %s %s" % (h.p.returncode, w.p.returncode))
    real = [line.split("\t") for line in out.splitlines()]
    check(len(real) == 2 and len(sample) == 2, "lines: real %r, GUIDE %r" % (real, sample))
    forms = [("node", r"^%s/_c_[0-9a-f-]{36}-lock-\d{10}$"), ("data", r"^[\w.-]+:\d+$"),
             ("role", None), ("layout", None), ("host", r"^[\w.-]+$"), ("pid", r"^\d+$"),
             ("since", r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"),
             ("token", r"^\d+$"), ("deadline", r"^(-|-?\d+ms)$")]
    for which, lines, base in (("real", real, p), ("GUIDE", sample, path)):
        for f in lines:
            check(len(f) == len(forms), "%s line has %d fields, not %d: %r" %
                  (which, len(f), len(forms), f))
            for (name, form), value in zip(forms, f):
                if form:
                    form = form.replace("%s", re.escape(base)) if "%s" in form else form
                    check(re.match(form, value), "%s %s %r is not of the form %s" %
                          (which, name, value, form))
            check(f[1] == "%s:%s" % (f[4], f[5]), "%s: data %r is not host:pid" % (which, f))
    for k, name in ((2, "role"), (3, "layout")):
        check([f[k] for f in real] == [f[k] for f in sample],
              "%s: real %r, GUIDE %r" % (name, [f[k] for f in real], [f[k] for f in sample]))
    check(int(sample[0][7]) < int(sample[1][7]), "GUIDE's tokens do not grow: %r" % sample)


# ---- cron: --once-per ----

@case
def once_per_runs_once():
    p = lock_path("once")
    runs = os.path.join(TMP, "once-runs")
    cmd = ["sh", "-c", "echo ran >> %s; sleep 0.3" % shlex.quote(runs)]
    procs = [Proc(["--once-per", "1h", p, "--"] + cmd) for _ in range(3)]
    for x in procs:
        check(x.wait() == 0, "exit %s; %r" % (x.p.returncode, x.stderr()))
    with open(runs) as f:
        check(f.read() == "ran\n", "ran more than once")
    skipped = [x for x in procs if "already ran" in x.stderr()]
    check(len(skipped) == 2, "stderr: %r" % [x.stderr() for x in procs])
    expect(["--once-per", "3600", p, "--"] + cmd, 0, stderr_has="already ran")
    with open(runs) as f:
        check(f.read() == "ran\n", "ran again within the hour")
    check(status(p) == [], "not released: %r" % status(p))
    # An interval that has passed runs again (3 s, a quarter of which is the slack: a
    # run asked for within 2.25 s of the last one is the same run).
    p1 = lock_path("once-3s")
    expect(["--once-per", "3s", p1, "--"] + cmd, 0)
    expect(["--once-per", "3", p1, "--"] + cmd, 0, stderr_has="already ran")
    time.sleep(3.1)
    expect(["--once-per", "3", p1, "--"] + cmd, 0)
    with open(runs) as f:
        check(f.read() == "ran\n" * 3, "runs: %r" % f.read())
    # A failed run is not recorded: the next one runs.
    p2 = lock_path("once-fail")
    expect(["--once-per", "1d", p2, "--", "false"], 1)
    marker = os.path.join(TMP, "once-after-fail")
    expect(["--once-per", "1d", p2, "--", "touch", marker], 0)
    check(os.path.exists(marker), "the run after a failure was skipped")


@case
def once_per_record_from_the_future():
    """A record that no run before ours can have written (a time after our own arrival,
    a number that overflows, a megabyte of digits) is no reason to skip: zklock says
    so, runs, and its own record then holds as any. The "by" of the record is printed
    with its control bytes escaped."""
    p = lock_path("once-future")
    rec = p + ".last-run"
    marker = os.path.join(TMP, "once-future-ran")
    k = kazoo_client()
    try:
        k.ensure_path(rec)
        future = int(time.time() * 1000) + 10 * 365 * 86400 * 1000
        for data, said in (
                (b"%d evil\x1b]0;pwned\x07:1" % future, "not trusted; running"),
                (b"9223372036854775807 evil:1", "not trusted; running"),
                (b"99999999999999999999999 evil:1", "not one of zklock's"),
                (b"7" * (1000 * 1000), "not one of zklock's")):
            k.set(rec, data)
            if os.path.exists(marker):
                os.unlink(marker)
            _, err, _ = expect(["--once-per", "1d", p, "--", "touch", marker], 0,
                               stderr_has=said)
            check(os.path.exists(marker), "skipped for %r: %r" % (data[:40], err))
            check("already ran" not in err, "stderr %r" % err)
            check("\x1b" not in err and "\x07" not in err, "raw bytes: %r" % err)
            if data.startswith(b"%d" % future):
                check("evil\\x1b]0;pwned\\x07:1" in err, "not escaped: %r" % err)
            # Recorded by this run: the next one skips.
            expect(["--once-per", "1d", p, "--", "true"], 0, stderr_has="already ran")
    finally:
        k.stop()
        k.close()


def last_run_line(path):
    """The --once-per record's line of `zklock status path` as a dict of the nine
    fields, or None."""
    rc, out, err, _ = run(["status", path])
    check(rc == 0, "zklock status %s: exit %s; stderr %r" % (path, rc, err))
    rec = [line.split("\t") for line in out.splitlines()
           if line.split("\t")[0].endswith(".last-run")]
    check(len(rec) <= 1, "zklock status %s: %d records: %r" % (path, len(rec), out))
    if rec:
        check(len(rec[0]) == len(STATUS_FIELDS), "bad record line %r" % rec[0])
    return dict(zip(STATUS_FIELDS, rec[0])) if rec else None


@case
def once_per_record_shown_and_forgotten():
    """status shows the record of the last run (who, when by the server's clock), list
    too; forget deletes it, so the job runs again; the record's folders go with it."""
    p = lock_path("once-rec/job")
    marker = os.path.join(TMP, "once-rec-runs")
    cmd = ["sh", "-c", "echo ran >> %s" % shlex.quote(marker)]
    check(last_run_line(p) is None, "a record before any run")
    t0 = time.time()
    x = Proc(["--once-per", "1d", p, "--"] + cmd)
    check(x.wait() == 0, "exit %s; %r" % (x.p.returncode, x.stderr()))
    t1 = time.time()
    rec = last_run_line(p)
    check(rec is not None, "status shows no record after a run")
    check(rec["node"] == p + ".last-run" and rec["role"] == "last-run" and
          rec["layout"] == "record", "record line %r" % rec)
    check(rec["pid"] == str(x.pid) and rec["host"] == socket.gethostname() and
          rec["data"] == "%s:%d" % (socket.gethostname(), x.pid), "by whom: %r" % rec)
    at = calendar.timegm(time.strptime(rec["since"][:19], "%Y-%m-%dT%H:%M:%S"))
    # The server's clock is this host's here: the run was asked for between t0 and t1.
    check(t0 - 2 <= at <= t1 + 1, "last run at %s, not between %s and %s" %
          (rec["since"], t0, t1))
    # started: when it asked for the lock; finished: when its release wrote the record.
    done = calendar.timegm(time.strptime(rec["token"][:19], "%Y-%m-%dT%H:%M:%S"))
    check(at <= done <= t1 + 1 and rec["deadline"] == "-", "record line %r" % rec)
    check(last_run_line(p + ".last-run") == rec, "status of the record itself: %r" %
          last_run_line(p + ".last-run"))
    rc, out, err, _ = run(["status", "--json", p])
    j = json.loads(out)
    check(j["nodes"] == [] and j["last_run"]["node"] == p + ".last-run" and
          j["last_run"]["pid"] == x.pid and j["last_run"]["started"] == rec["since"] and
          j["last_run"]["finished"] == rec["token"], "status --json: %r" % out)
    # list shows the record of a lock in use.
    h = holder(p)
    try:
        rc, out, err, _ = run(["list", lock_path("once-rec")])
        check(rc == 0 and "%s.last-run\trecord\t-\t-\t%s, started %s, finished %s" % (
            p, rec["data"], rec["since"], rec["token"]) in out, "list: %r %r" % (out, err))
    finally:
        h.release()
    check(h.wait() == 0, "holder exit %s" % h.p.returncode)
    # The skip message names the same two times as status: started and finished.
    expect(["--once-per", "1d", p, "--"] + cmd, 0,
           stderr_has="already ran (started %s, finished %s, by %s)" %
           (rec["since"], rec["token"], rec["data"]))
    # The record keeps its folder; forget deletes it, and the folder goes with it.
    k = kazoo_client()
    try:
        check(k.exists(lock_path("once-rec")) is not None, "the record's folder is gone")
        expect(["forget", p], 0, stderr_has="forgot the last run of %s" % p)
        check(last_run_line(p) is None, "forget left the record")
        expect(["forget", p], 1, stderr_has="no record")
        wait_until(lambda: k.exists(lock_path("once-rec")) is None,
                   "the empty folder of a forgotten record is removed")
    finally:
        k.stop()
        k.close()
    expect(["--once-per", "1d", p, "--"] + cmd, 0)
    with open(marker) as f:
        check(f.read() == "ran\n" * 2, "runs after forget: %r" % open(marker).read())
    expect(["forget", p + ".last-run"], 0)
    expect(["forget", "relative"], 64, stderr_has="not absolute")


# ---- cron: quiet, shell strings, flock's names ----

@case
def once_per_record_with_release():
    """--once-per writes its record in the transaction that deletes its lock node: in a
    persistent lock folder, the record's last change (mzxid) is the folder's last child
    change (pzxid), the delete of our node; and a reader polling the tree while the job
    ends never finds the lock free with the record older than that run."""
    p = lock_path("once-txn")
    rec = p + ".last-run"
    k = kazoo_client()
    seen, stop = [], threading.Event()

    def poll():
        # Children first, then the record: the record read is at least as new as the
        # children read (one server, one session: reads in order).
        while not stop.is_set():
            try:
                kids = k.get_children(p)
                data = k.get(rec)[0].decode()
            except Exception:  # the folder or the record not made yet
                kids, data = None, None
            seen.append((kids, data))

    try:
        for run_ in range(3):
            h = Proc(["-v", "--lock-folders", "persistent", "--once-per", "1s", p, "--",
                      "cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
            h.wait_line(r"^zklock: acquired ")
            me = status_lines(p)[0]
            del seen[:]
            stop.clear()
            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            wait_until(lambda: len(seen) > 3, "the reader has polled while the lock is held")
            h.release()
            check(h.wait() == 0, "run %d: exit %s; %r" % (run_, h.p.returncode, h.stderr()))
            wait_until(lambda: any(kids == [] for kids, _ in seen[-3:]),
                       "the reader has seen the lock free")
            stop.set()
            poller.join(10)
            data, rst = k.get(rec)
            check(data.decode().endswith(" " + me["data"]), "run %d: record %r, our node "
                  "says %r" % (run_, data, me["data"]))
            pst = k.exists(p)
            check(rst.mzxid == pst.pzxid, "run %d: the record was written in transaction "
                  "0x%x, our node deleted in 0x%x" % (run_, rst.mzxid, pst.pzxid))
            free = [d for kids, d in seen if kids == []]
            check(free and all(d == data.decode() for d in free),
                  "run %d: the lock seen free with the records %r; ours is %r" %
                  (run_, sorted(set(free)), data))
            # The next run may start at once: a record is a second apart (--once-per 1s).
            wait_until(lambda: int(data.split()[0]) + 1000 <= server_ms(k),
                       "a second has passed on the server's clock")
    finally:
        stop.set()
        k.delete(p, recursive=True)
        k.stop()
        k.close()


def server_ms(k):
    """The server's clock (ms), from the mtime of a node written now."""
    node = lock_path("clock")
    k.ensure_path(node)
    return k.set(node, b"").mtime


@case
def once_per_holder_that_lost_records_nothing():
    """Our node deleted (by an operator) as the job ends with status 0: either zklock
    recorded the run and released in one transaction before the delete (which then
    finds no node), or the delete came first and the run is not recorded: zklock exits
    70 and the record is not written. Never a record from a zklock whose node was gone.
    Several rounds, to vary who comes first."""
    from kazoo.exceptions import NoNodeError
    p = lock_path("once-lost")
    rec = p + ".last-run"
    k = kazoo_client()
    outcomes = set()
    try:
        for round_ in range(6):
            if k.exists(rec):
                k.delete(rec)
            h = Proc(["-v", "--lock-folders", "persistent", "--once-per", "1h", p, "--",
                      "cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
            h.wait_line(r"^zklock: acquired ")
            node = status_lines(p)[0]["node"]
            # The job ends, then the node goes, as close together as two calls get;
            # every other round the other way round.
            if round_ % 2 == 0:
                h.release()
            try:
                k.delete(node)
                deleted = True
            except NoNodeError:
                deleted = False
            if round_ % 2 == 1:
                h.release()
            rc = h.wait()
            got = k.exists(rec)
            if deleted:
                check(rc == 70 and got is None, "round %d: the node was deleted; zklock "
                      "exited %s and the record is %r; stderr %r" %
                      (round_, rc, got and k.get(rec)[0], h.stderr()))
            else:
                check(rc == 0 and got is not None and got.mzxid == k.exists(p).pzxid,
                      "round %d: released first; exit %s, record %r; stderr %r" %
                      (round_, rc, got, h.stderr()))
            outcomes.add(deleted)
    finally:
        k.delete(p, recursive=True)
        k.stop()
        k.close()
    check(True in outcomes, "the delete never came first: the case tested nothing")


@case
def quiet_conflict():
    # As flock(1): -q says nothing when the lock is busy (the exit status says it), nor
    # when --once-per finds the job done; errors still print.
    p = lock_path("quiet")
    h = holder(p)
    try:
        out, err, _ = expect(["-q", "-n", p, "--", "true"], 1)
        check(out == "" and err == "", "-q printed: %r %r" % (out, err))
        expect(["-n", p, "--", "true"], 1, stderr_has="is held by ")
        out, err, _ = expect(["--quiet", "-E", "3", "-w", "0.2", p, "--", "true"], 3)
        check(out == "" and err == "", "--quiet printed: %r %r" % (out, err))
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    p1 = lock_path("quiet-once")
    expect(["--once-per", "1h", p1, "--", "true"], 0)
    out, err, _ = expect(["-q", "--once-per", "1h", p1, "--", "true"], 0)
    check(out == "" and err == "", "-q --once-per printed: %r %r" % (out, err))
    expect(["-q", "-s", "127.0.0.1:1", "--connect-timeout", "300", p, "--", "true"], 69,
           stderr_has="zklock: ")


@case
def data_option():
    # --data TEXT is what our node says, and `zklock status` shows it. A waiter with the
    # same text still knows its own node from the holder's (the library names it): one
    # ahead of it, never two.
    p = lock_path("data")
    h = holder(p, ["--data", "nightly backup"])
    try:
        check([d for _, d in status(p)] == ["nightly backup"], "status: %r" % status(p))
        _, err, _ = expect(["-v", "--data", "nightly backup", "-w", "1.3", p, "--", "true"],
                           1, stderr_has=["held by nightly backup, 1 ahead",
                                          "is held by nightly backup; gave up after 1.3 s"])
        check("2 ahead" not in err, "the waiter counted its own node: %r" % err)
        check([d for _, d in status(p)] == ["nightly backup"],
              "after the waiter: %r" % status(p))
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)
    # Each mode takes it: the node of a read half, of a semaphore lease, and a leader's id.
    for mode in (["--read"], ["--semaphore", "2"], ["--leader"]):
        q = lock_path("data-" + mode[0].strip("-"))
        h = holder(q, mode + ["--data", "shared job"])
        try:
            check(any(d == "shared job" for _, d in status(q)), "status %s: %r" %
                  (mode, status(q)))
        finally:
            h.release()
        check(h.wait() == 0, "holder %s: exit %s" % (mode, h.p.returncode))


@case
def semaphore_counts_agree():
    # The count is recorded where the semaphore lives; a zklock asking for another one
    # is refused with both counts named (its own exit status, 65, with no usage hint:
    # the command line is fine), even with -n at a busy gate, and takes no lease.
    p = lock_path("sem-count")
    h = holder(p, ["--semaphore", "2"])
    try:
        _, err, _ = expect(["--semaphore", "3", "-n", p, "--", "true"], 65,
                           stderr_has=["records 2 leases", "asks for 3"])
        check("invalid lock path" not in err and "--help" not in err,
              "a usage hint after a runtime error: %r" % err)
        check(len(status(p)) == 1, "queue after the refusal: %r" % status(p))
        expect(["--semaphore", "2", "-n", p, "--", "true"], 0)
    finally:
        h.release()
    check(h.wait() == 0, "holder: exit %s" % h.p.returncode)


@case
def semaphore_count_set_for_good():
    # An operator sets the count once; two hosts with different counts arriving at the
    # idle pool, in either order, find it: the wrong one is refused (65) and the right
    # one runs, also after the pool went idle and its folder would have been reaped.
    p = lock_path("sem-set")
    expect(["count", p, "2"], 0, stdout_has="2 leases")
    for order in (("3", "2"), ("2", "3")):
        for n in order:
            if n == "3":
                _, err, _ = expect(["--semaphore", "3", "-n", p, "--", "true"], 65,
                                   stderr_has=["records 2 leases", "asks for 3"])
                check("--help" not in err, "a usage hint: %r" % err)
            else:
                expect(["--semaphore", "2", "-n", p, "--", "true"], 0)
        # Idle now: only the count's own node is left under the path.
        check(not status(p), "queue of the idle pool: %r" % status(p))
    expect(["count", p, "0"], 0, stdout_has="cleared")
    expect(["--semaphore", "3", "-n", p, "--", "true"], 0)
    expect(["count", p, "x"], 64, stderr_has="whole number")
    _, err, _ = expect(["count", p, "-1"], 64, stderr_has='count "-1" is not a whole number')
    check("invalid option" not in err, "stderr %r" % err)
    expect(["count", p], 64, stderr_has="missing count")


@case
def shell_command():
    # -c STRING runs STRING with /bin/sh -c, before PATH or after it as flock(1) has it.
    p = lock_path("shell")
    marker = os.path.join(TMP, "shell-marker")
    expect(["-c", "echo one > %s; echo two >> %s" % (marker, marker), p], 0)
    with open(marker) as f:
        check(f.read() == "one\ntwo\n", "the shell string did not run whole")
    expect([p, "-c", "exit 7"], 7)
    expect(["--command", "test -n \"$ZKLOCK_TOKEN\"", p], 0)
    expect(["-c", "true", p, "--", "true"], 64, stderr_has="-c gives the command already")
    expect(["-c", "true", p, "extra"], 64, stderr_has="-c gives the command already")
    check(status(p) == [], "not released: %r" % status(p))


@case
def flock_mode_names():
    # --shared and --exclusive are flock(1)'s names for --read and --write.
    p = lock_path("flock-names")
    r = holder(p, ["--shared"])
    try:
        expect(["--shared", "-n", p, "--", "true"], 0)
        expect(["--exclusive", "-n", p, "--", "true"], 1, stderr_has="is held by ")
        check([n["layout"] for n in status_lines(p)] == ["read"], "status: %r" %
              status_lines(p))
    finally:
        r.release()
    check(r.wait() == 0, "reader failed")
    expect(["--exclusive", "-n", p, "--", "true"], 0)
    expect(["--shared", "--exclusive", p, "--", "true"], 64, stderr_has="exclude each other")


# ---- configuration ----

@case
def config_file_hostile():
    """What cannot be a configuration is refused with the reason (64), at once: a device
    that never ends (/dev/zero), a folder, a FIFO, a NUL byte, a line over 4,095 bytes
    (a long comment's tail was read as a setting), more than 1 MiB. /dev/null is none."""
    env = dict(ENV)
    p = lock_path("config-hostile")
    fifo = os.path.join(TMP, "config.fifo")
    os.mkfifo(fifo)
    for name, why in (("/dev/zero", "it is a device, not a regular file"),
                      (TMP, "it is a folder"),
                      (fifo, "it is a FIFO, not a regular file")):
        env["ZKLOCK_CONFIG"] = name
        expect(["status", p], 64, timeout=20, env=env,
               stderr_has="cannot read the config file %s: %s" % (name, why))
    conf = os.path.join(TMP, "hostile.conf")
    env["ZKLOCK_CONFIG"] = conf
    cases = ((b"servers = %s\0\n" % SERVERS.encode(), ":1: a NUL byte"),
             (b"# " + b"x" * 5000 + b" servers = 127.0.0.1:1\n",
              ":1: a line longer than 4095 bytes"),
             (b"# ok\n" * 300000, " is longer than 1048576 bytes"))
    for text, why in cases:
        with open(conf, "wb") as f:
            f.write(text)
        expect(["status", p], 64, timeout=20, env=env, stderr_has=conf + why)
    # Up to the limit, a line is read whole: a comment of 4,095 bytes is a comment, and
    # the servers come from the line after it.
    with open(conf, "w") as f:
        f.write("#" + "x" * 4094 + "\nservers = %s\n" % SERVERS)
    no_env = dict(env)
    no_env.pop("ZKLOCK_SERVERS")
    expect(["status", p], 0, env=no_env)
    env["ZKLOCK_CONFIG"] = "/dev/null"
    expect(["status", p], 0, env=env)


@case
def config_file():
    conf = os.path.join(TMP, "zklock.conf")
    env = dict(ENV)
    env.pop("ZKLOCK_SERVERS")
    env["ZKLOCK_CONFIG"] = conf
    p = lock_path("config")
    with open(conf, "w") as f:
        f.write("# test\nservers = %s\nsession_timeout = 5000\n\nconnect-timeout=3000\n" %
                SERVERS)
    expect([p, "--", "true"], 0, env=env)
    # The command line wins over the file; the environment too.
    with open(conf, "w") as f:
        f.write("servers = 127.0.0.1:1\nconnect_timeout = 500\n")
    expect([p, "--", "true"], 69, stderr_has="127.0.0.1:1", env=env)
    expect(["-s", SERVERS, p, "--", "true"], 0, env=env)
    env2 = dict(env)
    env2["ZKLOCK_SERVERS"] = SERVERS
    expect([p, "--", "true"], 0, env=env2)
    # Errors name the file and line.
    with open(conf, "w") as f:
        f.write("servers = %s\nfrobs = 3\n" % SERVERS)
    expect([p, "--", "true"], 64, stderr_has=["%s:2" % conf, "unknown key \"frobs\""],
           env=env)
    with open(conf, "w") as f:
        f.write("session_timeout = soon\n")
    expect([p, "--", "true"], 64, stderr_has=["%s:1" % conf, "session timeout"], env=env)
    env3 = dict(env)
    env3["ZKLOCK_CONFIG"] = os.path.join(TMP, "no-such.conf")
    expect([p, "--", "true"], 64, stderr_has="no-such.conf", env=env3)
    # A chroot: the lock lives under it.
    k = kazoo_client()
    try:
        base = lock_path("chroot")
        k.ensure_path(base)
        with open(conf, "w") as f:
            f.write("servers = %s\nchroot = %s\n" % (SERVERS, base))
        h = Proc(["-v", "/x", "--", "cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                 env=env)
        h.wait_line("^zklock: acquired ")
        try:
            check(len(status(base + "/x")) == 1, "not under the chroot")
            rc, out, _, _ = run(["status", "/x"], env=env)
            check(rc == 0 and len(out.splitlines()) == 1 and out.startswith("/x/"),
                  "status through the chroot: %r" % out)
        finally:
            h.release()
        check(h.wait() == 0, "exit %s; %r" % (h.p.returncode, h.stderr()))
    finally:
        k.stop()
        k.close()


def main(cases=CASES):
    """Runs the cases (those named on the command line, or all); test_fleet.py runs its
    own through this too."""
    failed = 0
    names = [c.__name__ for c in cases]
    for name in ONLY:
        if name not in names:
            print("no case %r; cases: %s" % (name, " ".join(names)), file=sys.stderr)
            return 2
    print("zklock %s against %s, under %s" % (ZKLOCK, SERVERS, ROOT), flush=True)
    for fn in cases:
        if ONLY and fn.__name__ not in ONLY:
            continue
        t0 = time.monotonic()
        try:
            fn()
            print("ok   %-40s %5.1f s" % (fn.__name__, time.monotonic() - t0), flush=True)
        except Skip as e:
            print("skip %-40s %s" % (fn.__name__, e), flush=True)
        except Failure as e:
            failed += 1
            print("FAIL %-40s %s" % (fn.__name__, e), flush=True)
        except Exception as e:  # a bug of the test itself, or an OS error
            failed += 1
            print("FAIL %-40s %s: %s" % (fn.__name__, type(e).__name__, e), flush=True)
        finally:
            for p in PROCS:
                p.kill()
            PROCS.clear()
    print("%d failed" % failed if failed else "all passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        subprocess.run(["rm", "-rf", "--", TMP])

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

    def __init__(self, args, stdin=subprocess.DEVNULL, stdout=None, env=None):
        self.args = list(args)
        self.p = subprocess.Popen(zklock_cmd(args), stdin=stdin,
                                  stdout=subprocess.PIPE if stdout is None else stdout,
                                  stderr=subprocess.PIPE, env=env or ENV)
        self.pid = self.p.pid
        self.cond = threading.Condition()
        self.lines = {"out": [], "err": []}
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
                self.cond.notify_all()
        with self.cond:
            self.closed[name] = True
            self.cond.notify_all()

    def wait_line(self, pattern, stream="err", timeout=20):
        """Waits until a line of the stream matches the regex pattern."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines[stream]:
                    if rx.search(line):
                        return line
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
            for c in children:
                try:
                    os.killpg(c, signal.SIGKILL)
                except OSError:
                    pass
            self.p.kill()
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


def status(path):
    """The lock's queue from `zklock status`: a list of (node path, data)."""
    rc, out, err, _ = run(["status", path])
    check(rc == 0, "zklock status %s: exit %s; stderr %r" % (path, rc, err))
    nodes = []
    for line in out.splitlines():
        node, sep, data = line.partition("\t")
        check(sep == "\t" and node.startswith(path + "/"),
              "zklock status %s: bad line %r" % (path, line))
        nodes.append((node, data))
    return nodes


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
    _, err, secs = expect(["-s", "127.0.0.1:1", "--connect-timeout", "1000",
                           lock_path("connect"), "--", "true"], 69,
                          stderr_has=["zklock: ", "127.0.0.1:1"])
    check(secs < 10, "took %.1f s" % secs)
    env = dict(ENV)
    env["ZKLOCK_SERVERS"] = "127.0.0.1:1"
    expect(["--connect-timeout", "500", lock_path("connect"), "--", "true"], 69,
           stderr_has="127.0.0.1:1", env=env)
    expect(["--connect-timeout", "500", "status", lock_path("connect")], 69,
           stderr_has="127.0.0.1:1", env=env)


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
    z = Proc([p, "--", "sh", "-c", script])
    z.wait_line("^ready$", stream="out")
    z.signal(sig)
    rc = z.wait(10)
    check(rc == 0, "exit %s, expected 0; stderr %r" % (rc, z.stderr()))
    check(os.path.exists(marker), "the command did not get the signal")
    check(status(p) == [], "the lock was not released: %r" % status(p))
    # a command that does not catch it dies of it, and zklock says so
    z = Proc([p, "--", "sh", "-c", "echo ready; while :; do sleep 0.1; done"])
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
    SIGTERM (and SIGKILL 10 s later if it ignores that) and zklock exits 70. The loss
    may be reported while cut off (after a session timeout of silence) or once the
    client hears from the server that the session expired: both are accepted."""
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
        b.wait_line(lost % re.escape(p2), timeout=30)
        t_lost = time.monotonic()
        rc = b.wait(20)
        secs = time.monotonic() - t_lost
        check(rc == 70, "exit %s, expected 70; stderr %r" % (rc, b.stderr()))
        check(8 <= secs <= 13, "SIGKILL came %.1f s after the loss, not 10 s" % secs)
    finally:
        proxy.close()
    expect(["-w", "10", p1, "--", "true"], 0)


def main():
    failed = 0
    names = [c.__name__ for c in CASES]
    for name in ONLY:
        if name not in names:
            print("no case %r; cases: %s" % (name, " ".join(names)), file=sys.stderr)
            return 2
    print("zklock %s against %s, under %s" % (ZKLOCK, SERVERS, ROOT), flush=True)
    for fn in CASES:
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

#!/usr/bin/python3
"""zklock --previous and --lock-delay against a real ZooKeeper server: ZKLOCK_PREVIOUS
after a first holder, a release, a holder killed with SIGKILL (once the server has
expired its session), and the delay taken only after a holder that vanished.

    tests/with-zk /usr/bin/python3 tests/zklock/test_previous.py build/tools/zklock [CASE...]

The helpers, the environment and the runner are test_zklock.py's (its header says how
a case runs); only the cases differ. The case with a Curator holder is test_fleet.py's
(it needs the interop suite's Java peer).
"""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_zklock as z  # noqa: E402  (parses argv: ZKLOCK [CASE...])
from test_zklock import (ENV, WD_OPTS, Proc, case, check, expect, kazoo_client,  # noqa: E402
                         lock_path, status, tmp, wait_until, waiter_queued)

z.CASES.clear()


SHOW_PREVIOUS = ["sh", "-c", 'echo "${ZKLOCK_PREVIOUS-unset}"']


@case
def previous_none_then_released():
    """With --previous, ZKLOCK_PREVIOUS is "none" for the first holder of a path and
    "exited 0" after a holder whose command exited 0, for a mutex and --write;
    --lock-delay (30 s), which implies --previous, does not hold either back. Without
    them the command gets no ZKLOCK_PREVIOUS (an inherited one is dropped) and no note is
    made beside the lock. zklock forget deletes the note."""
    for mode in ([], ["--write"]):
        p = lock_path("previous" + "".join(mode).replace("-", "_"))
        for want, opt in (("none", ["--previous"]), ("exited 0", ["--lock-delay", "30"]),
                          ("exited 0", ["--previous"])):
            out, err, secs = expect(["-v"] + opt + mode + [p, "--"] + SHOW_PREVIOUS, 0,
                                    timeout=20)
            check(out == want + "\n", "%s, %s holder: ZKLOCK_PREVIOUS %r" %
                  (mode or "mutex", want, out))
            check("--lock-delay" not in err, "%s: waited after %s: %r" % (mode, want, err))
            said = "the previous holder of %s: %s" % (p, want)
            check(said in err, "%s: stderr %r lacks %r" % (mode, err, said))
    k = kazoo_client()
    try:
        p = lock_path("previous")
        check(k.exists(p + ".previous") is not None, "no note beside %s" % p)
        expect(["forget", p], 0, stderr_has="forgot how the last holder of %s left" % p)
        check(k.exists(p + ".previous") is None, "forget left the note")
        expect(["forget", p], 1, stderr_has="no record")
        env = dict(ENV, ZKLOCK_PREVIOUS="inherited")
        for mode in ([], ["--write"], ["--leader"], ["--read"], ["--semaphore", "2"]):
            p = lock_path("untracked" + "".join(mode).replace("-", "_"))
            for _ in range(2):
                out, _, _ = expect(mode + [p, "--"] + SHOW_PREVIOUS, 0, env=env)
                check(out == "unset\n", "%s: ZKLOCK_PREVIOUS %r" % (mode, out))
            check(k.exists(p + ".previous") is None, "%s: a note without --previous" % mode)
    finally:
        k.stop()
        k.close()


def vanished_holder(name, waiter_args):
    """A holder on a 4 s session, SIGKILLed with a waiter (zklock waiter_args PATH --
    ...) queued behind it. Returns (the waiter's Proc, the name of the holder's node,
    the path)."""
    p = lock_path(name)
    a = Proc(WD_OPTS + ["--previous", p, "--", "sleep", "600"])
    a.wait_line(r"^zklock: acquired ")
    node = status(p)[0][0].rsplit("/", 1)[1]
    b = Proc(waiter_args(p))
    waiter_queued(p, b, 1)
    a.signal(signal.SIGKILL)
    check(a.wait() == -signal.SIGKILL, "holder: exit %s" % a.p.returncode)
    return b, node, p


@case
def previous_vanished_and_lock_delay():
    """The holder is killed (SIGKILL): once the server has expired its session, the
    waiter behind it is told "vanished", with the holder's node, and with --lock-delay 3
    starts its command 3 s after it acquired, not before, saying so once; --max-runtime
    (2 s) counts from the command's start, not the acquisition. A later run, after a
    holder that released, starts at once."""
    job = 'echo "started $ZKLOCK_PREVIOUS"; sleep 1; echo done'
    b, node, p = vanished_holder("vanished", lambda p: [
        "-v", "--lock-delay", "3", "--max-runtime", "2", p, "--", "sh", "-c", job])
    _, acquired = b.wait_line_at(r"^zklock: acquired ", timeout=30)
    line, started = b.wait_line_at(r"^started ", stream="out")
    check(line == "started vanished", "ZKLOCK_PREVIOUS: %r" % line)
    rc = b.wait(20)
    check(rc == 0, "waiter: exit %s, expected 0 (--max-runtime from the command's start); "
          "stderr %r" % (rc, b.stderr()))
    check(b.stdout().splitlines()[-1] == "done", "stdout %r" % b.stdout())
    # The acquired line was read before the wait began; reading it may lag a little.
    check(2.5 <= started - acquired < 13, "the command started %.3f s after the lock was "
          "acquired, with --lock-delay 3" % (started - acquired))
    said = [x for x in b.stderr().splitlines() if "--lock-delay" in x]
    check(len(said) == 1 and "vanished" in said[0] and node in said[0],
          "what zklock said of the delay: %r (the holder's node %s)" % (said, node))
    check("the previous holder of %s: vanished (%s)" % (p, node) in b.stderr(),
          "stderr %r lacks the holder's node %s" % (b.stderr(), node))
    # After a holder that released: no delay.
    out, err, secs = expect(["--lock-delay", "30", p, "--"] + SHOW_PREVIOUS, 0, timeout=20)
    check(out == "exited 0\n" and "--lock-delay" not in err, "next run: %r %r" % (out, err))


@case
def vanished_node_name_escaped():
    """The note beside the lock is anyone's to write: a vanished holder's node name with
    ESC, BEL and CR in it reaches stderr escaped, with -v and with --lock-delay."""
    p = lock_path("vanished-escaped")
    expect(["--previous", p, "--", "true"], 0)  # the note's folder and node
    k = kazoo_client()
    try:
        k.set(p + ".previous", b"held x-lock\x1b]0;pwned\x07\r-0000000001")
    finally:
        k.stop()
        k.close()
    out, err, _ = expect(["-v", "--lock-delay", "0.1", p, "--"] + SHOW_PREVIOUS, 0)
    check(out == "vanished\n", "ZKLOCK_PREVIOUS %r" % out)
    for raw in ("\x1b", "\x07", "\r"):
        check(raw not in err, "%r reached stderr raw: %r" % (raw, err))
    said = [x for x in err.splitlines() if "--lock-delay" in x or "previous holder" in x]
    check(len(said) == 2 and all("x-lock\\x1b]0;pwned\\x07\\x0d-0000000001" in x
                                 for x in said), "what zklock said: %r" % said)


@case
def previous_vanished_with_nobody_waiting():
    """A holder killed (SIGKILL) with nobody waiting: the next run, once the server has
    expired the session, is told "vanished" (a cron job's next run, minutes later)."""
    p = lock_path("vanished-alone")
    expect(["--previous", p, "--", "true"], 0)  # a note of a release, before
    a = Proc(WD_OPTS + ["--previous", p, "--", "sleep", "600"])
    a.wait_line(r"^zklock: acquired ")
    a.signal(signal.SIGKILL)
    check(a.wait() == -signal.SIGKILL, "holder: exit %s" % a.p.returncode)
    wait_until(lambda: status(p) == [], "the server expired the holder's session",
               timeout=30)
    out, _, _ = expect(["--previous", p, "--"] + SHOW_PREVIOUS, 0)
    check(out == "vanished\n", "ZKLOCK_PREVIOUS %r" % out)


@case
def previous_how_the_run_ended():
    """The next run learns how the command before it ended: "exited 3", "max-runtime"
    (stopped at --max-runtime, zklock exited 124), "signal 9" (the command was killed),
    "revoked" (zklock revoke), "exited 0". A run that never started its command (skipped
    by --once-per, stopped during --lock-delay) passes on what it was told, so the run
    after it hears of the last command that ran. The note says it on a second line
    after "released <node>"; a note without one (an older zklocks') reads "released"."""
    p = lock_path("previous-ended")
    k = kazoo_client()
    try:
        def next_hears(want):
            out, _, _ = expect(["--previous", p, "--"] + SHOW_PREVIOUS, 0)
            check(out == want + "\n", "after %s: ZKLOCK_PREVIOUS %r" % (want, out))
        expect(["--previous", p, "--", "sh", "-c", "exit 3"], 3)
        next_hears("exited 3")
        data, _ = k.get(p + ".previous")
        check(data.decode().split("\n")[1:] == ["exited 0"], "the note %r" % data)
        expect(["--previous", "--max-runtime", "1", "--kill-grace", "1", p, "--",
                "sleep", "600"], 124, timeout=20)
        next_hears("max-runtime")
        expect(["--previous", p, "--", "sh", "-c", "kill -KILL $$"], 128 + signal.SIGKILL)
        next_hears("signal 9")
        a = Proc(["-v", "--previous", "--revocable", p, "--", "sleep", "600"])
        a.wait_line(r"^zklock: acquired ")
        expect(["revoke", "-w", "10", p], 0)
        check(a.wait(20) == 71, "revoked holder: exit %s" % a.p.returncode)
        next_hears("revoked")
        # --once-per: the first records its run, the second skips and passes it on.
        expect(["--previous", "--once-per", "1d", p, "--", "true"], 0)
        expect(["--previous", p, "--", "sh", "-c", "exit 5"], 5)
        expect(["--previous", "--once-per", "1d", p, "--", "false"], 0,
               stderr_has="already ran")
        next_hears("exited 5")
        # A note as an older zklocks wrote it (no second line): "released".
        node = k.get(p + ".previous")[0].decode().split("\n")[0]
        k.set(p + ".previous", node.encode())
        next_hears("released")
    finally:
        k.stop()
        k.close()


@case
def previous_lost():
    """A holder whose node is deleted from outside while its command runs loses the lock:
    zklock stops the command, exits 70 and says so in the note ("lost <node>"), so the
    next run hears "lost", not "vanished". A holder that took the lock meanwhile keeps
    its own note: the one that lost it never writes over it."""
    p = lock_path("previous-lost")
    k = kazoo_client()
    try:
        a = Proc(["-v", "--previous", "--kill-grace", "1", p, "--", "sleep", "600"])
        a.wait_line(r"^zklock: acquired ")
        node = status(p)[0][0]
        k.delete(node)
        check(a.wait(20) == 70, "holder: exit %s; %r" % (a.p.returncode, a.stderr()))
        check("told the next holder of %s that the lock was lost" % p in a.stderr(),
              "stderr %r" % a.stderr())
        data = k.get(p + ".previous")[0].decode()
        check(data == "lost " + node.rsplit("/", 1)[1], "the note %r" % data)
        out, _, _ = expect(["--previous", p, "--"] + SHOW_PREVIOUS, 0)
        check(out == "lost\n", "after a lost lock: ZKLOCK_PREVIOUS %r" % out)
        # A later holder's note is left alone: the one that lost it cannot say so.
        a = Proc(["-v", "--previous", "--kill-grace", "1", p, "--", "sleep", "600"])
        a.wait_line(r"^zklock: acquired ")
        node = status(p)[0][0]
        b = Proc(["--previous", p, "--", "sh", "-c", 'echo "$ZKLOCK_PREVIOUS"; exec sleep 600'])
        waiter_queued(p, b, 1)
        k.delete(node)
        line = b.wait_line(r"^\w+$", stream="out", timeout=20)
        # "lost" if the holder said so before the waiter read the note, else "vanished".
        check(line in ("vanished", "lost"), "the waiter behind it: %r" % line)
        check(a.wait(20) == 70, "holder: exit %s; %r" % (a.p.returncode, a.stderr()))
        check(k.get(p + ".previous")[0].decode().startswith("held "),
              "the note of the new holder was written over: %r" % k.get(p + ".previous")[0])
        b.signal(signal.SIGTERM)
        b.wait(20)
    finally:
        k.stop()
        k.close()


@case
def lock_delay_ends_on_signal():
    """SIGTERM during --lock-delay: zklock exits 143 at once, the command never starts,
    and the lock is free."""
    marker = tmp("delay-term-ran")
    b, node, p = vanished_holder("delay-term", lambda p: [
        "--lock-delay", "60", p, "--", "touch", marker])
    b.wait_line(r"vanished .*--lock-delay", timeout=30)
    t0 = time.monotonic()
    b.signal(signal.SIGTERM)
    rc = b.wait(10)
    check(rc == 128 + signal.SIGTERM, "exit %s; stderr %r" % (rc, b.stderr()))
    check(time.monotonic() - t0 < 5, "zklock took %.1f s to stop" % (time.monotonic() - t0))
    check(not os.path.exists(marker), "the command ran")
    check(status(p) == [], "not released: %r" % status(p))
    # It ran no command: the next run still hears of the holder that vanished.
    out, _, _ = expect(["--previous", p, "--"] + SHOW_PREVIOUS, 0)
    check(out == "vanished\n", "after a run stopped in --lock-delay: %r" % out)


if __name__ == "__main__":
    try:
        sys.exit(z.main())
    finally:
        subprocess.run(["rm", "-rf", "--", z.TMP])

#!/usr/bin/python3
"""zklock --schedule against a real ZooKeeper server: three zklock "hosts" (separate
processes) per case run each slot of a schedule once, whichever arrives first, whatever
their clocks say; missed slots are caught up once (--catch-up once) or recorded missed
(skip); a run too late for --start-deadline does not start and records its slot missed.

    tests/with-zk /usr/bin/python3 tests/zklock/test_schedule.py build/tools/zklock [CASE...]

The helpers, the environment and the runner are test_zklock.py's.

Time. A slot is a minute (or a day): the cases do not wait for the server's clock to
reach one. zklock's test-only ZKLOCK_TEST_SLOT_SHIFT_MS adds a number of ms to the
server's time as the schedule sees a run's arrival; every host of a case gets the same
shift (there is one server clock), computed from the server's time (read from the
record a --once-per run writes), so that "now" is where the case wants it: 20 s into a
slot, or 2 s before a slot begins. Raising the shift by a minute is a minute passing.
A host whose clock is skewed differs, for zklock, only in when its cron line fires (zklock
reads no host clock for a slot): the skew case starts its hosts at the server times at
which their cron lines would fire, around a real slot boundary 2 s ahead.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_zklock as z  # noqa: E402  (parses argv: ZKLOCK [CASE...])
from test_zklock import (ENV, SERVERS, Proc, Proxy, case, check, expect,  # noqa: E402
                         lock_path, run, status, tmp, wait_until, waiter_queued)

z.CASES.clear()

MIN = 60000
SHIFT = "ZKLOCK_TEST_SLOT_SHIFT_MS"


def server_now_ms():
    """The server's time now, in ms: when a --once-per run's record was written, plus
    the time since on this host's monotonic clock."""
    p = lock_path("clock")
    rc, _, err, _ = run(["--once-per", "1", p, "--", "true"])
    check(rc == 0, "clock run: exit %s; %r" % (rc, err))
    t0 = time.monotonic()
    rec = record(p)
    check(rec and rec["finished_ms"], "no record of the clock run: %r" % rec)
    return rec["finished_ms"] + int((time.monotonic() - t0) * 1000)


def record(p):
    """The record beside lock p, as `zklock status --json` shows it (None: none)."""
    rc, out, err, _ = run(["status", "--json", p])
    check(rc == 0, "status %s: exit %s; %r" % (p, rc, err))
    return json.loads(out)["last_run"]


def shift_into(now_ms, offset_ms, unit=MIN):
    """The shift that puts the server's time now_ms offset_ms after the start of a unit
    (a minute, a day), and that start, as the schedule sees it."""
    start = (now_ms // unit + 1) * unit
    return start + offset_ms - now_ms, start


def env_at(shift):
    return dict(ENV, **{SHIFT: str(shift)})


def iso(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))


def slot_job(name):
    """A command that appends its slot and missed slots to a file of its own."""
    f = tmp(name)
    return f, ["sh", "-c", 'echo "$ZKLOCK_SLOT ${ZKLOCK_MISSED-unset} '
               '${ZKLOCK_MISSED_FROM-unset}" >> "$1"', "sh", f]


def lines_of(f):
    if not os.path.exists(f):
        return []
    with open(f) as h:
        return h.read().splitlines()


def metric(text, name, label=""):
    """The value of the series name (with label among its labels) in a metrics file."""
    for line in text.splitlines():
        if line.startswith(name + "{") and label in line:
            return line.rsplit(" ", 1)[1]
    return None


def hosts(args, env, n=3):
    """n zklock processes ("hosts") started together; their (status, stderr)."""
    ps = [Proc(args, env=env) for _ in range(n)]
    return [(p.wait(30), p.stderr()) for p in ps]


@case
def fast_job_and_late_lines_run_a_slot_once():
    """Three hosts whose cron lines fire together, then three whose lines fire late in
    the slot (after the fast job finished): the slot's command runs once; the others
    exit 0 saying the slot ran (nothing with -q), and a metrics file says slot_done. A
    minute later (the shift raised by a minute) the next slot runs once."""
    p = lock_path("fast")
    f, job = slot_job("fast")
    now = server_now_ms()
    shift, start = shift_into(now, 20000)
    metrics = tmp("fast.prom")
    args = ["--schedule", "* * * * *", p, "--"] + job
    for r in hosts(args, env_at(shift)):
        check(r[0] == 0, "first hosts: %r" % (r,))
    check(lines_of(f) == ["%s 0 unset" % iso(start)], "ran: %r" % lines_of(f))
    # The late lines: still this slot (arrived 20 s and more into it).
    res = hosts(["--metrics-file", metrics] + args, env_at(shift))
    for rc, err in res:
        check(rc == 0, "late host: exit %s; %r" % (rc, err))
        check("already ran in the slot of %s" % iso(start) in err, "late host: %r" % err)
    check(len(lines_of(f)) == 1, "a late line ran it again: %r" % lines_of(f))
    with open(metrics) as h:
        m = h.read()
    check(metric(m, "zklock_skipped", 'reason="slot_done"') == "1", "metrics: %r" % m)
    check(metric(m, "zklock_ran") == "0", "metrics: %r" % m)
    rc, _, err, _ = run(["-q"] + args, env=env_at(shift))
    check(rc == 0 and err == "", "-q: exit %s, stderr %r" % (rc, err))
    rec = record(p)
    check(rec["slot_ms"] == start and rec["missed"] == 0, "record: %r" % rec)
    # A minute later: the next slot, once.
    for r in hosts(args, env_at(shift + MIN)):
        check(r[0] == 0, "next slot: %r" % (r,))
    check(lines_of(f) == ["%s 0 unset" % iso(start), "%s 0 unset" % iso(start + MIN)],
          "next slot: %r" % lines_of(f))


@case
def skewed_clocks_run_a_slot_once():
    """A real slot boundary 3 s ahead on the server's clock. The slot before it has run.
    Host A's clock is 1.5 s ahead: its cron line fires 1.5 s before the boundary, in the
    slot before, which has run (skipped). Hosts B and C, 0.4 s and 1.2 s behind, fire
    after it: one of them runs the new slot, once. Should A take longer than 1.5 s to
    reach the server (a loaded machine), it arrives in the new slot, where it is one of
    three: the slot still runs once, and every host but one skips."""
    p = lock_path("skew")
    f, job = slot_job("skew")
    now = server_now_ms()
    t0 = time.monotonic()
    shift, boundary = shift_into(now, -3000)  # the boundary: the server's now + 3 s
    args = ["--schedule", "* * * * *", p, "--"] + job
    env = env_at(shift)
    expect(args, 0, env=env_at(shift - 20000))  # the slot before, 20 s earlier
    check(lines_of(f) == ["%s 0 unset" % iso(boundary - MIN)], "seed: %r" % lines_of(f))

    def fire_at(shifted_ms):
        left = (shifted_ms - (now + shift) - (time.monotonic() - t0) * 1000) / 1000.0
        if left > 0:
            time.sleep(left)  # the host's cron line fires then: the point of the case
        return Proc(args, env=env)

    a = fire_at(boundary - 1500)
    b = fire_at(boundary + 400)
    c = fire_at(boundary + 1200)
    res = [(h.wait(30), h.stderr()) for h in (a, b, c)]
    for rc, err in res:
        check(rc == 0, "host: exit %s; %r" % (rc, err))
    got = lines_of(f)
    check(got == ["%s 0 unset" % iso(boundary - MIN), "%s 0 unset" % iso(boundary)],
          "runs: %r; stderr %r" % (got, res))
    check(sum("already ran" in err for _, err in res) == 2, "skips: %r" % res)


def missed_night(policy):
    """A daily 03:00 job ran on day D; every host was down at 03:00 on D+1; on D+2 three
    hosts arrive at 03:00:20. Returns (lines the command wrote, the record, day D's
    03:00 in ms)."""
    p = lock_path("night-" + policy)
    f, job = slot_job("night-" + policy)
    now = server_now_ms()
    day = 86400000
    shift, midnight = shift_into(now, 3 * 3600000 + 20000, unit=day)
    args = ["--schedule", "0 3 * * *", "--catch-up", policy, p, "--"] + job
    expect(args, 0, env=env_at(shift))
    res = hosts(["-v"] + args, env_at(shift + 2 * day))
    for rc, err in res:
        check(rc == 0, "host: exit %s; %r" % (rc, err))
    return lines_of(f), record(p), midnight + 3 * 3600000, res


@case
def missed_night_caught_up_once():
    """--catch-up once: one run on D+2 stands for the missed night, and says so
    (ZKLOCK_MISSED=1, ZKLOCK_MISSED_FROM the missed 03:00); nothing is recorded missed."""
    got, rec, d0, res = missed_night("once")
    day = 86400000
    check(got == ["%s 0 unset" % iso(d0), "%s 1 %s" % (iso(d0 + 2 * day), iso(d0 + day))],
          "runs: %r" % got)
    check(rec["slot_ms"] == d0 + 2 * day and rec["missed"] == 0, "record: %r" % rec)
    check(any("this run stands for them" in err for _, err in res), "said: %r" % res)


@case
def missed_night_recorded_with_skip():
    """--catch-up skip (the default's value, given): the run on D+2 is for its own slot
    (ZKLOCK_MISSED=0); the missed night is recorded: 1 missed, the last on D+1 03:00."""
    got, rec, d0, res = missed_night("skip")
    day = 86400000
    check(got == ["%s 0 unset" % iso(d0), "%s 0 unset" % iso(d0 + 2 * day)], "runs: %r" % got)
    check(rec["slot_ms"] == d0 + 2 * day and rec["missed"] == 1 and
          rec["last_missed_ms"] == d0 + day, "record: %r" % rec)
    check(any("recorded missed" in err for _, err in res), "said: %r" % res)


@case
def start_deadline_records_late_slots():
    """--start-deadline 10: three hosts arriving 30 s into a slot do not start the
    command; exit 0 saying so; the slot is recorded missed once (not once per host).
    A run 5 s into the slot after runs it, and the late slot stays counted once."""
    p = lock_path("late")
    f, job = slot_job("late")
    now = server_now_ms()
    shift, start = shift_into(now, 5000)
    args = ["--schedule", "* * * * *", "--start-deadline", "10", p, "--"] + job
    expect(args, 0, env=env_at(shift))
    rec0 = record(p)
    late = env_at(shift + MIN + 25000)  # 30 s into the next slot
    for rc, err in hosts(args, late):
        check(rc == 0 and "too late to start for the slot of %s" % iso(start + MIN) in err,
              "late host: exit %s; %r" % (rc, err))
    check(len(lines_of(f)) == 1, "a late host ran: %r" % lines_of(f))
    rec = record(p)
    check(rec["slot_ms"] == start and rec["missed"] == 1 and
          rec["last_missed_ms"] == start + MIN, "record after late hosts: %r" % rec)
    check((rec["started_ms"], rec["finished_ms"], rec["by"]) ==
          (rec0["started_ms"], rec0["finished_ms"], rec0["by"]),
          "the late hosts changed the success: %r, before %r" % (rec, rec0))
    metrics = tmp("late.prom")
    rc, _, err, _ = run(["-q", "--metrics-file", metrics] + args, env=late)
    check(rc == 0 and err == "", "-q late: exit %s, %r" % (rc, err))
    with open(metrics) as h:
        m = h.read()
    check(metric(m, "zklock_skipped", 'reason="late"') == "1", "metrics: %r" % m)
    expect(args, 0, env=env_at(shift + 2 * MIN))
    check(lines_of(f)[-1] == "%s 0 unset" % iso(start + 2 * MIN), "ran: %r" % lines_of(f))
    rec = record(p)
    check(rec["slot_ms"] == start + 2 * MIN and rec["missed"] == 1, "record: %r" % rec)


@case
def records_of_once_per_and_schedule_read_each_other():
    """A --once-per record (the first line alone) read by --schedule: the slot its run
    started in is done. A --schedule record read by --once-per: its first line says the
    last success, as before."""
    p = lock_path("compat")
    f, job = slot_job("compat")
    now = server_now_ms()
    shift, start = shift_into(now, 20000)
    expect(["--once-per", "1h", p, "--", "true"], 0)
    expect(["--schedule", "* * * * *", p, "--"] + job, 0, env=env_at(shift),
           stderr_has="already ran in the slot of %s" % iso(start))
    check(lines_of(f) == [], "ran again: %r" % lines_of(f))
    p2 = lock_path("compat2")
    expect(["--schedule", "* * * * *", p2, "--", "true"], 0)
    expect(["--once-per", "1h", p2, "--", "false"], 0, stderr_has="already ran")


@case
def record_from_the_future_not_trusted():
    """A record whose slot is after a run's own (here written by a run whose server time
    the shift put 10 minutes ahead) is no reason to skip: the run says so and runs, and
    records its own slot."""
    p = lock_path("future")
    f, job = slot_job("future")
    now = server_now_ms()
    shift, start = shift_into(now, 20000)
    args = ["--schedule", "* * * * *", p, "--"] + job
    expect(args, 0, env=env_at(shift + 10 * MIN))
    _, err, _ = expect(args, 0, env=env_at(shift), stderr_has="not trusted; running")
    check(lines_of(f) == ["%s 0 unset" % iso(start + 10 * MIN), "%s 0 unset" % iso(start)],
          "runs: %r" % lines_of(f))
    check(record(p)["slot_ms"] == start, "record: %r" % record(p))
    expect(args, 0, env=env_at(shift), stderr_has="already ran")


SHOW = 'echo "${ZKLOCK_PREVIOUS-unset}" >> "$1"; '


def outcome_lines(p):
    """`zklock status p`'s lines of the record: {role: fields}."""
    rc, out, err, _ = run(["status", p])
    check(rc == 0, "status: %s %r" % (rc, err))
    lines = {}
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] == p + ".last-run":
            lines[f[2]] = f
    return lines


def check_says(p, args, code, has):
    rc, out, err, _ = run(["check"] + args + [p])
    check(rc == code and has in out, "check %s %s: exit %s, %r %r" % (args, p, rc, out, err))


@case
def each_outcome_told_and_shown():
    """In one slot, four hosts in turn: the first exits 3, the second is killed by
    signal 9, the third runs past --max-runtime, the fourth succeeds. Each hears how the
    one before ended (ZKLOCK_PREVIOUS), and each outcome is in the record with its host,
    slot, start and end: status shows a line per outcome, check --last-failed is
    CRITICAL naming the last failure until the success, list says it, and the metrics
    file of a later host (one that skips the slot) shows every outcome's time."""
    p = lock_path("outcomes")
    told = tmp("outcomes-told")
    now = server_now_ms()
    shift, start = shift_into(now, 20000)
    env = env_at(shift)
    base = ["--schedule", "* * * * *", p, "--", "sh", "-c"]
    rc, _, err, _ = run(base + [SHOW + "exit 3", "sh", told], env=env)
    check(rc == 3, "failing host: exit %s %r" % (rc, err))
    lines = outcome_lines(p)
    check("failed 3" in lines and lines["failed 3"][8].startswith(iso(start)[:-1]),
          "status after a failure: %r" % lines)
    check_says(p, ["--last-failed"], 2, "last run failed with status 3 on ")
    rc, out, _, _ = run(["list", p.rsplit("/", 1)[0]])
    check("last run failed 3" in out, "list: %r" % out)
    rc, _, err, _ = run(base + [SHOW + "kill -9 $$", "sh", told], env=env)
    check(rc == 128 + 9, "killed host: exit %s %r" % (rc, err))
    check("signal 9" in outcome_lines(p), "status: %r" % outcome_lines(p))
    check_says(p, ["--last-failed"], 2, "last run signal 9 on ")
    rc, _, err, _ = run(["--max-runtime", "0.3"] + base + [SHOW + "sleep 30", "sh", told],
                        env=env)
    check(rc == 124, "max-runtime host: exit %s %r" % (rc, err))
    check_says(p, ["--last-failed"], 2, "last run max-runtime on ")
    rc, _, err, _ = run(base + [SHOW, "sh", told], env=env)
    check(rc == 0, "succeeding host: exit %s %r" % (rc, err))
    check(lines_of(told) == ["none", "exited 3", "signal 9", "max-runtime"],
          "ZKLOCK_PREVIOUS: %r" % lines_of(told))
    lines = outcome_lines(p)
    for role in ("failed 3", "signal 9", "max-runtime", "succeeded"):
        check(role in lines and lines[role][4] != "-" and lines[role][6] != "-" and
              lines[role][7] != "-", "status lacks %r: %r" % (role, lines))
    check_says(p, ["--last-failed"], 0, "ZKLOCK OK")
    rec = record(p)
    check(rec["last_outcome"] == "succeeded" and rec["outcomes"]["failed"]["status"] == 3 and
          rec["outcomes"]["signal"]["signal"] == 9 and "running" not in rec["outcomes"],
          "record: %r" % rec)
    metrics = tmp("outcomes.prom")
    expect(["--metrics-file", metrics] + base + ["true"], 0, env=env,
           stderr_has="already ran")
    with open(metrics) as h:
        m = h.read()
    for kind in ("failed", "signal", "max-runtime", "succeeded"):
        v = metric(m, "zklock_job_last_run_timestamp_seconds", 'outcome="%s"' % kind)
        check(v is not None and float(v) > 0, "metrics: %s %r" % (kind, v))
    check(metric(m, "zklock_job_last_outcome", 'outcome="succeeded"') == "1", "metrics")
    check(metric(m, "zklock_job_last_run_timestamp_seconds", 'outcome="lost"') == "0",
          "metrics: lost")


@case
def vanished_run_recorded_by_its_successor():
    """A host SIGKILLed (zklock and its job) while running its slot: the next host,
    queued behind it, hears "vanished", records the vanished run with its host and slot,
    and runs the slot; check --last-failed is CRITICAL while it runs, OK after."""
    p = lock_path("vanished")
    told = tmp("vanished-told")
    now = server_now_ms()
    shift, start = shift_into(now, 20000)
    env = env_at(shift)
    base = ["--schedule", "* * * * *", "--session-timeout", "4000", p, "--", "sh", "-c"]
    a = Proc(["-v"] + base + ["echo started; exec sleep 600"], env=env)
    a.wait_line("^started$", stream="out")
    check("running" in outcome_lines(p), "no running line: %r" % outcome_lines(p))
    b = Proc(base + [SHOW + "echo go; cat >/dev/null", "sh", told], env=env,
             stdin=subprocess.PIPE)
    waiter_queued(p, b, 1)
    a.kill()
    b.wait_line("^go$", stream="out", timeout=30)
    check(lines_of(told) == ["vanished"], "ZKLOCK_PREVIOUS: %r" % lines_of(told))
    lines = outcome_lines(p)
    check("vanished" in lines and lines["vanished"][5] == str(a.pid) and
          lines["vanished"][8].startswith(iso(start)[:-1]), "status: %r" % lines)
    check_says(p, ["--last-failed"], 2, "last run vanished on ")
    b.release()
    check(b.wait(20) == 0, "successor: exit %s %r" % (b.p.returncode, b.stderr()))
    check_says(p, ["--last-failed"], 0, "ZKLOCK OK")


@case
def lost_run_recorded_by_its_successor():
    """A host cut off from the server while running its slot loses the lock (exit 70)
    and, once it can reach the server again, says so in the note; the next host (after
    the server expired the old session) hears "lost" and records the lost run; the slot
    then runs once more, on the next host."""
    p = lock_path("lost")
    told = tmp("lost-told")
    now = server_now_ms()
    shift, start = shift_into(now, 20000)
    env = env_at(shift)
    proxy = Proxy(SERVERS)
    try:
        a = Proc(["-v", "-s", proxy.addr, "--session-timeout", "4000", "--kill-grace", "1",
                  "--schedule", "* * * * *", p, "--", "sh", "-c",
                  "echo started; exec sleep 600"], env=env)
        a.wait_line("^started$", stream="out")
        proxy.partition()
        # Once zklock gives its lock up, the way back is open: it says "lost" in the
        # note from a new session while the server has yet to expire the old one.
        a.wait_line("^zklock: lock on %s lost$" % p, timeout=30)
        proxy.heal()
        check(a.wait(30) == 70, "holder: exit %s; %r" % (a.p.returncode, a.stderr()))
    finally:
        proxy.close()
    rc, _, err, _ = run(["--schedule", "* * * * *", p, "--", "sh", "-c", SHOW, "sh", told],
                        env=env)
    check(rc == 0, "successor: exit %s %r" % (rc, err))
    check(lines_of(told) == ["lost"], "ZKLOCK_PREVIOUS: %r; the holder said %r" %
          (lines_of(told), a.stderr()))
    lines = outcome_lines(p)
    check("lost" in lines and lines["lost"][5] == str(a.pid), "status: %r" % lines)
    rec = record(p)
    check(rec["outcomes"]["lost"]["slot_ms"] == start and rec["last_outcome"] == "succeeded",
          "record: %r" % rec)


@case
def missed_slots_checked():
    """check --missed-slots: a job whose run passed over two missed slots (catch-up skip)
    is WARNING over 0 and CRITICAL over 1; after the next slot's success, OK."""
    p = lock_path("missed-check/job")
    now = server_now_ms()
    shift, start = shift_into(now, 20000)
    args = ["--schedule", "* * * * *", p, "--", "true"]
    expect(args, 0, env=env_at(shift))
    check_says(p, ["--missed-slots", "0"], 0, "ZKLOCK OK")
    expect(args, 0, env=env_at(shift + 3 * MIN))
    check_says(p, ["--missed-slots", "0"], 1, "missed 2 slots lately")
    check_says(p, ["--missed-slots", "0,1"], 2, "missed 2 slots lately")
    check_says(p, ["--missed-slots", "2"], 0, "ZKLOCK OK")
    expect(args, 0, env=env_at(shift + 4 * MIN))
    check_says(p, ["--missed-slots", "0"], 0, "ZKLOCK OK")
    # On a prefix: every job under it.
    check_says(p.rsplit("/", 1)[0], ["--missed-slots", "0", "--last-failed"], 0, "ZKLOCK OK")


@case
def splay_delays_the_arrival():
    """--splay 1.5: each host waits a random time under 1.5 s before it asks for the
    lock (-v says how long; the run takes at least that), three hosts still run the slot
    once, and SIGTERM during the wait ends zklock at once (143) without a run."""
    p = lock_path("splay")
    f, job = slot_job("splay")
    now = server_now_ms()
    shift, start = shift_into(now, 20000)
    args = ["-v", "--splay", "1.5", "--schedule", "* * * * *", p, "--"] + job
    procs = [Proc(args, env=env_at(shift)) for _ in range(3)]
    for h in procs:
        line = h.wait_line(r"--splay: asking for ")
        delay = float(line.split(" in ")[1].split()[0])
        check(0 <= delay < 1.5, "delay %r" % line)
        check(h.wait(30) == 0, "host: exit %s %r" % (h.p.returncode, h.stderr()))
    check(lines_of(f) == ["%s 0 unset" % iso(start)], "runs: %r" % lines_of(f))
    rc, _, err, secs = run(["-v", "--splay", "1", p, "--", "true"])
    said = float(err.split("--splay: asking for %s in " % p)[1].split()[0])
    check(rc == 0 and secs >= said, "took %.3f s, said %.3f: %r" % (secs, said, err))
    h = Proc(["-v", "--splay", "1d", p, "--", "true"])
    h.wait_line(r"--splay: asking for ")
    t0 = time.monotonic()
    h.signal(15)
    check(h.wait(10) == 128 + 15 and time.monotonic() - t0 < 5, "SIGTERM: %s %r" %
          (h.p.returncode, h.stderr()))
    expect(["--splay", "0", p, "--", "true"], 64, stderr_has="--splay")
    expect(["status", "--splay", "1", p], 64, stderr_has="options of a run")


# ---- GUIDE.md's cron chapter, run as written there ----

def guide_cases():
    """GUIDE.md's subsections from "One run per slot" up to "After a run that vanished":
    [(title, [crontab command lines], [ExecStart command lines])]."""
    with open(z.GUIDE, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^### One run per slot.*?(?=^### After a run that vanished)", text,
                  flags=re.M | re.S)
    check(m is not None, "GUIDE.md lacks the cron chapter's slot sections")
    out = []
    for part in re.split(r"^### ", m.group(0), flags=re.M):
        title = part.split("\n", 1)[0]
        crons, execs, fence = [], [], None
        for line in part.splitlines():
            if line.startswith("```"):
                fence = line[3:].strip() if fence is None else None
            elif fence == "crontab" and line.strip() and not line.startswith("#"):
                crons.append(line)
            elif fence == "ini" and line.startswith("ExecStart="):
                execs.append(line[len("ExecStart="):])
        if crons or execs:
            check(len(crons) == len(execs), "%s: %d crontab lines, %d ExecStart lines" %
                  (title, len(crons), len(execs)))
            out.append((title, crons, execs))
    check(len(out) >= 5, "GUIDE.md: %d cron cases" % len(out))
    return out


GBIN = os.path.join(z.TMP, "guide-bin")
GOUT = os.path.join(z.TMP, "guide-out")


def guide_argv(line, cron):
    """A GUIDE line as the test runs it: the five cron fields off (with cron), /usr/bin/
    zklock and zklock as the build's, /cron/... under the test's root, /usr/local/bin/X
    as the test's job X, --splay 30 as --splay 1 (a short test). Returns (the schedule's
    five fields, argv for Proc, without zklock itself)."""
    words = shlex.split(line)
    if cron:
        words = words[5:]
    check(words[0] in ("zklock", "/usr/bin/zklock"), "not a zklock line: %r" % line)
    fields = words[words.index("--schedule") + 1].split()
    argv = []
    for w in words[1:]:
        if w.startswith("/cron/"):
            w = lock_path("guide" + w)
        elif w.startswith("/usr/local/bin/"):
            w = os.path.join(GBIN, w.rsplit("/", 1)[1])
        elif w == "zklock":
            w = os.path.join(GBIN, "zklock")
        argv.append(w)
    if "--splay" in argv:
        argv[argv.index("--splay") + 1] = "1"
    return fields, argv


def slot_of(fields):
    """(unit, offset) of the schedules the GUIDE uses: daily at H:M, or every N
    minutes."""
    minute, hour = fields[0], fields[1]
    check(fields[2:] == ["*", "*", "*"], "schedule %r" % fields)
    if minute.isdigit() and hour.isdigit():
        return 86400000, (int(hour) * 60 + int(minute)) * MIN
    m = re.match(r"^\*/(\d+)$", minute)
    check(m is not None and hour == "*", "schedule %r" % fields)
    return int(m.group(1)) * MIN, 0


def guide_jobs():
    os.makedirs(GBIN, exist_ok=True)
    os.makedirs(GOUT, exist_ok=True)
    with open(os.path.join(GBIN, "zklock"), "w") as f:
        f.write("#!/bin/sh\nexec %s \"$@\"\n" % " ".join(shlex.quote(a)
                                                         for a in z.zklock_cmd([])))
    for name in ("backup", "vacuum", "export", "report", "sync-mirror"):
        with open(os.path.join(GBIN, name), "w") as f:
            f.write('#!/bin/sh\nt0=$(date +%%s%%N); sleep 0.3\n'
                    'echo "$ZKLOCK_SLOT ${ZKLOCK_MISSED-unset} $t0 $(date +%%s%%N)" '
                    '>> %s/%s\n' % (GOUT, name))
    for name in os.listdir(GBIN):
        os.chmod(os.path.join(GBIN, name), 0o755)


def guide_runs(name):
    return [line.split() for line in lines_of(os.path.join(GOUT, name))]


@case
def guide_cron_cases_on_three_hosts():
    """Each crontab line and each systemd ExecStart line of GUIDE.md's cron chapter, run
    as written there (names aside) on three hosts at once: each slot runs once; a night
    every host missed is caught up once; a host 15 minutes late does not start; the
    backup and the vacuum never overlap."""
    guide_jobs()
    now = server_now_ms()
    cases = guide_cases()
    for title, crons, execs in cases:
        if len(crons) > 1:
            guide_together(title, crons, True, now, 0)
            guide_together(title, execs, False, now, 86400000)
            continue
        for cron, exe in zip(crons, execs):
            fields, argv = guide_argv(cron, True)
            unit, offset = slot_of(fields)
            shift, start = shift_into(now, offset + 20000, unit)
            job = argv[-1].rsplit("/", 1)[1]
            before = len(guide_runs(job))
            for rc, err in hosts(argv, env_at(shift)):
                check(rc == 0, "%s: %s: exit %s %r" % (title, cron, rc, err))
            runs = guide_runs(job)[before:]
            check(len(runs) == 1 and runs[0][0] == iso(start + offset),
                  "%s: %s on three hosts: %r" % (title, cron, runs))
            _, argv = guide_argv(exe, False)
            later = unit * (2 if "--catch-up" in argv else 1)
            late = 15 * MIN if "--start-deadline" in argv else 0
            for rc, err in hosts(argv, env_at(shift + later + late)):
                check(rc == 0, "%s: %s: exit %s %r" % (title, exe, rc, err))
            runs = guide_runs(job)[before + 1:]
            if late:
                check(runs == [], "%s: late hosts ran: %r" % (title, runs))
                rec = record(lock_path("guide/cron/" + job))
                check(rec["missed"] == 1, "%s: late slot not missed: %r" % (title, rec))
                continue
            want = "1" if "--catch-up" in argv else "0"
            check(len(runs) == 1 and runs[0][:2] == [iso(start + later + offset), want],
                  "%s: %s on three hosts: %r" % (title, exe, runs))


def guide_together(title, lines, cron, now, later):
    """Lines of jobs that must not overlap, each on three hosts, all started together
    when every one's slot has begun (later ms after the first such day): each job runs
    its slot once."""
    runs = []
    for line in lines:
        fields, argv = guide_argv(line, cron)
        runs.append((line, argv, slot_of(fields)))
    unit = runs[0][2][0]
    offset = max(r[2][1] for r in runs)
    shift, start = shift_into(now, offset + 20000, unit)
    shift, start = shift + later, start + later
    before = {argv[-1]: len(guide_runs(argv[-1].rsplit("/", 1)[1])) for _, argv, _ in runs}
    procs = [(line, Proc(argv, env=env_at(shift))) for line, argv, _ in runs for _ in range(3)]
    for line, p in procs:
        check(p.wait(30) == 0, "%s: %s: exit %s %r" % (title, line, p.p.returncode,
                                                        p.stderr()))
    spans = []
    for line, argv, (u, off) in runs:
        got = guide_runs(argv[-1].rsplit("/", 1)[1])[before[argv[-1]]:]
        check(len(got) == 1 and got[0][:2] == [iso(start + off), "0"],
              "%s: %s on three hosts: %r" % (title, line, got))
        spans.append((int(got[0][2]), int(got[0][3])))
    # Started together: one after the other, never together.
    spans.sort()
    for a, b in zip(spans, spans[1:]):
        check(a[1] <= b[0], "%s: the jobs overlapped: %r" % (title, spans))


@case
def schedule_usage_errors():
    """Bad schedules, zones, policies and deadlines, and options that do not combine,
    exit 64 naming the problem."""
    p = lock_path("usage")
    for args, said in (
            (["--schedule", "61 * * * *"], "--schedule"),
            (["--schedule", "* * *"], "5 fields"),
            (["--schedule", "0 0 30 2 *"], "--schedule"),
            (["--schedule", "* * * * *", "--tz", "Nowhere/Land"], "--tz"),
            (["--schedule", "* * * * *", "--catch-up", "all"], "--catch-up"),
            (["--schedule", "* * * * *", "--start-deadline", "0"], "--start-deadline"),
            (["--tz", "UTC"], "needs --schedule"),
            (["--catch-up", "once"], "needs --schedule"),
            (["--start-deadline", "5"], "needs --schedule"),
            (["--schedule", "* * * * *", "--once-per", "1h"], "exclude each other"),
            (["--schedule", "* * * * *", "--read"], "mutex or --write"),
            (["--schedule", "* * * * *", "--leader"], "mutex or --write"),
            (["--last-failed"], "options of zklock check"),
            (["--missed-slots", "1"], "options of zklock check")):
        expect(args + [p, "--", "true"], 64, stderr_has=said)
    expect(["status", "--schedule", "* * * * *", p], 64, stderr_has="options of a run")
    expect(["check", "--missed-slots", "x", p], 3, stderr_has="--missed-slots")


if __name__ == "__main__":
    try:
        sys.exit(z.main())
    finally:
        subprocess.run(["rm", "-rf", "--", z.TMP])

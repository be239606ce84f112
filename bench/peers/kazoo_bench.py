#!/usr/bin/python3
"""kazoo_bench: the zkl-bench scenarios S1, S2, S3, S4 and S7 for kazoo's Lock, printing
the same lines as zkl-bench (see bench/zkl-bench.c).

  /usr/bin/python3 kazoo_bench.py [-s SERVERS] [-d SECONDS] [-W WARMUP] [-c CLIENTS]
                                  [-L LABEL] [-p PREFIX] SCENARIO

SCENARIO: s1, s2, s3, s4, or s7 (one cold start: connect, acquire, release, exit, quietly;
zkl-bench s7 -- /usr/bin/python3 kazoo_bench.py ... times it); or the fleet's s9 (-c
sessions waiting idle on one Lock behind a holder), s9l (-c Election standbys behind a
leader: kazoo's election is its Lock) and s9a (-c sessions acquiring one free Lock at the
same moment): see S9 in bench/zkl-bench.c and docs/BENCHMARKS.md. Each client is a
KazooClient (its own session) driven by its own thread, as a threaded service would.
"""
import argparse
import concurrent.futures
import logging
import os
import resource
import socket
import subprocess
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.recipe.lock import Lock

logging.getLogger("kazoo").setLevel(logging.CRITICAL)

opt = None
now = time.monotonic_ns  # CLOCK_MONOTONIC


def die(msg):
    sys.stderr.write("kazoo_bench: %s\n" % msg)
    sys.stderr.flush()
    os._exit(1)


def quantile_us(sorted_vals, q):
    n = len(sorted_vals)
    if n == 0:
        return 0.0
    rank = int(q * n + 0.999999)
    rank = min(max(rank, 1), n)
    return sorted_vals[rank - 1] / 1e3


def peak_rss_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def open_client():
    c = KazooClient(hosts=opt.servers, timeout=10.0)
    c.start(timeout=20)
    return c


def proc_cpu_us(pid):
    """User + system CPU time of a process in microseconds, from /proc/PID/stat."""
    try:
        with open("/proc/%s/stat" % pid, encoding="ascii") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) * 1e6 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return -1.0


def mntr():
    """The server's counters, and the CPU time used so far by this process and by the
    server (whose pid bench/run passes in $ZKL_BENCH_SERVER_PID)."""
    m = mntr_read()
    m["cpu_self"] = proc_cpu_us("self")
    pid = os.environ.get("ZKL_BENCH_SERVER_PID")
    m["cpu_server"] = proc_cpu_us(pid) if pid else -1.0
    return m


def mntr_read():
    m = {"ok": False, "fsyncs": 0.0, "writes": 0.0, "reads": 0.0, "packets": 0.0, "wakes": 0.0}
    if os.environ.get("ZKL_BENCH_MNTR") == "off":
        return m
    first = opt.servers.replace("/", ",").split(",")[0]
    host, _, port = first.rpartition(":")
    if not host:
        host, port = first, "2181"
    try:
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(b"mntr")
            chunks = []
            while True:
                b = s.recv(8192)
                if not b:
                    break
                chunks.append(b)
    except OSError:
        return m
    keys = {
        "zk_cnt_fsynctime": "fsyncs",
        "zk_cnt_updatelatency": "writes",
        "zk_cnt_readlatency": "reads",
        "zk_packets_received": "packets",
    }
    wakes = ("zk_sum_node_created_watch_count", "zk_sum_node_deleted_watch_count",
             "zk_sum_node_changed_watch_count", "zk_sum_node_children_watch_count")
    for line in b"".join(chunks).decode("ascii", "replace").splitlines():
        k, _, v = line.partition("\t")
        try:
            x = float(v)
        except ValueError:
            continue
        if k in keys:
            m[keys[k]] = x
            if k == "zk_cnt_fsynctime":
                m["ok"] = True
        elif k in wakes:
            m["wakes"] += x
    return m


def report(scenario, rate, lat, cycles, m0, m1, per="c", per_n=0, rss=0, extra=""):
    lat = sorted(lat)
    line = "%s %s cycles/s=%.1f p50_us=%.0f p99_us=%.0f max_us=%.0f rss_kib=%d cycles=%d" % (
        scenario, opt.label, rate, quantile_us(lat, 0.5), quantile_us(lat, 0.99),
        quantile_us(lat, 1.0), rss or peak_rss_kib(), cycles)
    n = per_n if per_n > 0 else cycles
    if m0["ok"] and m1["ok"] and n > 0:
        d = {k: (m1[k] - m0[k]) / n for k in ("fsyncs", "writes", "reads", "packets", "wakes")}
        line += " fsync/%s=%.2f wr/%s=%.2f rd/%s=%.2f req/%s=%.2f wakes/%s=%.2f" % (
            per, d["fsyncs"], per, d["writes"], per, d["reads"], per, d["packets"],
            per, d["wakes"])
    if n > 0 and m0["cpu_self"] >= 0 and m1["cpu_self"] >= 0:
        line += " cpu_us/%s=%.0f" % (per, (m1["cpu_self"] - m0["cpu_self"]) / n)
    if n > 0 and m0["cpu_server"] >= 0 and m1["cpu_server"] >= 0:
        line += " srv_cpu_us/%s=%.0f" % (per, (m1["cpu_server"] - m0["cpu_server"]) / n)
    if extra:
        line += " " + extra
    print(line, flush=True)


def scenario_name(base, n, default):
    return base if n == default else "%sx%d" % (base, n)


def base_path(scenario):
    return "%s/%s-%d-%s" % (opt.prefix, opt.label, os.getpid(), scenario)


# ---- S1, S2, S3: timed loops -----------------------------------------------------------

def timed_loop(scenario, n, shared, wait_latency, handoffs):
    base = base_path(scenario)
    clients = [open_client() for _ in range(n)]
    locks = [Lock(c, base + "/lock" if shared else "%s/lock-%d" % (base, i))
             for i, c in enumerate(clients)]
    w = opt.warmup if opt.warmup >= 0 else min(opt.seconds / 5, 1)
    start = now()
    warm_end = start + int(w * 1e9)
    end = warm_end + int(opt.seconds * 1e9)
    state = {"last": warm_end, "overlaps": 0}
    acq, call, rel = [], [], []  # hand-offs by hold number (appended while holding)
    counter_lock = threading.Lock()
    holders = [0] * n
    results = [None] * n
    errors = []

    def work(i):
        lock = locks[i]
        h = 0 if shared else i
        lat = []
        cycles = 0
        try:
            while True:
                t0 = now()
                if t0 >= end:
                    break
                lock.acquire()
                t1 = now()
                with counter_lock:
                    holders[h] += 1
                    if holders[h] > 1:
                        state["overlaps"] += 1
                    k = -1
                    if handoffs:
                        k = len(acq)
                        acq.append(t1)
                        call.append(0)
                        rel.append(0)
                    holders[h] -= 1
                if k >= 0:
                    call[k] = now()
                lock.release()
                t2 = now()
                if k >= 0:
                    rel[k] = t2
                if t0 >= warm_end:
                    lat.append(t1 - t0 if wait_latency else t2 - t0)
                    cycles += 1
                    with counter_lock:
                        if t2 > state["last"]:
                            state["last"] = t2
                elif k >= 0:
                    acq[k] = 0  # a warm-up hold: no hand-off sample
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        results[i] = (lat, cycles)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    delay = (warm_end - now()) / 1e9
    if delay > 0:
        time.sleep(delay)
    m0 = mntr()
    for t in threads:
        t.join()
    m1 = mntr()
    if errors:
        die("scenario %s failed: %r" % (scenario, errors[0]))
    lat = [x for r in results for x in r[0]]
    cycles = sum(r[1] for r in results)
    elapsed = (state["last"] - warm_end) / 1e9
    extra = []
    if n > 1:
        extra.append("clients=%d" % n)
    if handoffs:
        # gaps: previous release returned -> acquire returned; idle: previous release
        # called -> acquire returned.
        ks = [k for k in range(1, len(acq)) if acq[k] and acq[k - 1] and rel[k - 1] and call[k - 1]]
        gaps = sorted(acq[k] - rel[k - 1] for k in ks)
        idle = sorted(acq[k] - call[k - 1] for k in ks)
        extra.append("handoff_p50_us=%.0f handoff_p99_us=%.0f handoff_min_us=%.0f "
                     "idle_p50_us=%.0f idle_p99_us=%.0f" % (
                         quantile_us(gaps, 0.5), quantile_us(gaps, 0.99),
                         gaps[0] / 1e3 if gaps else 0.0, quantile_us(idle, 0.5),
                         quantile_us(idle, 0.99)))
    if state["overlaps"]:
        extra.append("EXCLUSION_VIOLATED=%d" % state["overlaps"])
    rss = peak_rss_kib()
    for c in clients:
        c.stop()
        c.close()
    report(scenario, cycles / elapsed if elapsed > 0 else 0.0, lat, cycles, m0, m1, rss=rss,
           extra=" ".join(extra))


# ---- S4: a queue of sessions drains ----------------------------------------------------

def s4():
    n = opt.clients or 200
    scenario = scenario_name("S4", n, 200)
    path = base_path("s4") + "/lock"
    gc = open_client()
    gate = Lock(gc, path, identifier="gate")
    if not gate.acquire(timeout=20):
        die("gate acquire timed out")
    clients = [open_client() for _ in range(n)]
    locks = [Lock(c, path, identifier="w%d" % i) for i, c in enumerate(clients)]
    order = []
    acquired = [0] * n
    released = [0] * n
    errors = []
    state = {"holders": 0, "overlaps": 0}
    mu = threading.Lock()

    def work(i):
        try:
            if not locks[i].acquire(timeout=120):
                raise RuntimeError("acquire timed out")
            acquired[i] = now()
            with mu:
                state["holders"] += 1
                if state["holders"] > 1:
                    state["overlaps"] += 1
                order.append(i)
                state["holders"] -= 1
            locks[i].release()
            released[i] = now()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    # Wait until every waiter has queued, then note the queue (node sequence order).
    deadline = time.monotonic() + 120
    while True:
        queue = gate.contenders()
        if len(queue) >= n + 1:
            break
        if time.monotonic() > deadline:
            die("only %d of %d waiters queued" % (len(queue) - 1, n))
        time.sleep(0.01)
    queue = [int(x[1:]) for x in queue if x.startswith("w")]
    m0 = mntr()
    t0 = now()
    gate.release()
    for t in threads:
        t.join()
    m1 = mntr()
    if errors:
        die("scenario S4 failed: %r" % (errors[0],))
    lat = [a - t0 for a in acquired]
    t_end = max(released + [t0])
    mismatches = sum(1 for k in range(n) if k >= len(queue) or order[k] != queue[k])
    drain = (t_end - t0) / 1e9
    extra = "clients=%d drain_ms=%.1f fifo=%s mismatches=%d" % (
        n, drain * 1e3, "yes" if mismatches == 0 else "no", mismatches)
    if state["overlaps"]:
        extra += " EXCLUSION_VIOLATED=%d" % state["overlaps"]
    rss = peak_rss_kib()
    for c in clients + [gc]:
        c.stop()
        c.close()
    report(scenario, n / drain, lat, n, m0, m1, per="release", per_n=n, rss=rss, extra=extra)


# ---- S9: a fleet, many sessions on one lock (see bench/zkl-bench.c) ---------------------

def four_letter(word):
    first = opt.servers.replace("/", ",").split(",")[0]
    host, _, port = first.rpartition(":")
    if not host:
        host, port = first, "2181"
    try:
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(word.encode("ascii"))
            chunks = []
            while True:
                b = s.recv(8192)
                if not b:
                    break
                chunks.append(b)
    except OSError:
        return None
    return b"".join(chunks).decode("ascii", "replace")


def server_bytes():
    """What the server sent and received on its established client connections (tcp_info
    from `ss`), or (-1, -1)."""
    first = opt.servers.replace("/", ",").split(",")[0]
    port = first.rpartition(":")[2] if ":" in first else "2181"
    if not port.isdigit():
        return -1.0, -1.0
    try:
        out = subprocess.run(["ss", "-tinH", "state", "established", "( sport = :%s )" % port],
                             capture_output=True, text=True, check=False).stdout
    except OSError:
        return -1.0, -1.0
    sent = recv = 0.0
    found = False
    for w in out.split():
        if w.startswith("bytes_sent:"):
            sent += float(w[11:])
            found = True
        elif w.startswith("bytes_received:"):
            recv += float(w[15:])
    return (sent, recv) if found else (-1.0, -1.0)


def fleet_sample():
    f = {}
    f["sent"], f["received"] = server_bytes()
    f["zxid"] = -1.0
    srvr = four_letter("srvr")
    if srvr and "Zxid: 0x" in srvr:
        f["zxid"] = float(int(srvr.split("Zxid: 0x", 1)[1].split()[0], 16))
    f["m"] = mntr()
    f["m"]["cpu_self"] = cpu_fine_us()
    f["t"] = now()
    return f


def cpu_fine_us():
    """This process's CPU time in microseconds from its threads' schedstat (nanoseconds;
    /proc/self/stat counts 10 ms ticks), or proc_cpu_us("self") if unreadable."""
    ns = 0
    found = False
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return proc_cpu_us("self")
    for tid in tids:
        try:
            with open("/proc/self/task/%s/schedstat" % tid, encoding="ascii") as fh:
                ns += int(fh.read().split()[0])
                found = True
        except (OSError, ValueError, IndexError):
            pass
    return ns / 1e3 if found else proc_cpu_us("self")


def rss_now_kib():
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(probe, path):
    st = probe.exists(path)
    return st.numChildren if st else 0


def wait_children(probe, path, want, poll_s, limit_s, polls=None):
    deadline = time.monotonic() + limit_s
    while True:
        have = children(probe, path)
        if have >= want:
            return now()
        if polls is not None:
            polls[0] += 1
        if time.monotonic() > deadline:
            die("only %d of %d nodes under %s after %d s" % (have, want, path, limit_s))
        time.sleep(poll_s)


def settle_s():
    return opt.warmup if opt.warmup >= 0 else 3.0


def fleet_rates(a, b):
    s = (b["t"] - a["t"]) / 1e9
    out = " window_s=%.1f" % s
    if a["zxid"] >= 0 and b["zxid"] >= 0:
        out += " txn/s=%.2f" % ((b["zxid"] - a["zxid"]) / s)
    ma, mb = a["m"], b["m"]
    if ma["ok"] and mb["ok"]:
        out += " wr/s=%.2f fsync/s=%.2f req/s=%.2f rd/s=%.2f wakes/s=%.2f" % (
            (mb["writes"] - ma["writes"]) / s, (mb["fsyncs"] - ma["fsyncs"]) / s,
            (mb["packets"] - ma["packets"]) / s, (mb["reads"] - ma["reads"]) / s,
            (mb["wakes"] - ma["wakes"]) / s)
    if a["sent"] >= 0 and b["sent"] >= 0:
        out += " srv_sent_B/s=%.0f srv_recv_B/s=%.0f" % (
            (b["sent"] - a["sent"]) / s, (b["received"] - a["received"]) / s)
    if ma["cpu_server"] >= 0 and mb["cpu_server"] >= 0:
        out += " srv_cpu_ms/s=%.2f" % ((mb["cpu_server"] - ma["cpu_server"]) / 1e3 / s)
    return out


def open_many(n):
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        return list(pool.map(lambda _: open_client(), range(n)))


fleet = {"granted": 0, "failed": 0, "closing": False, "first": 0}
fleet_mu = threading.Lock()


def note_grant():
    with fleet_mu:
        if fleet["closing"]:
            return
        if fleet["granted"] == 0:
            fleet["first"] = now()
        fleet["granted"] += 1


def note_failure(e):
    with fleet_mu:
        if fleet["closing"]:
            return
        if fleet["failed"] == 0:
            sys.stderr.write("kazoo_bench: S9: a waiter failed: %r\n" % (e,))
        fleet["failed"] += 1


def stop_all(clients):
    for c in clients:
        try:
            c.stop()
            c.close()
        except Exception:  # noqa: BLE001 - ending anyway
            pass


def s9_idle(leader):
    """-c sessions (default 100) wait idle behind a holder: a Lock acquire each, or an
    Election.run each (kazoo's election is its Lock), on a thread of its own."""
    n = opt.clients or 100
    scenario = scenario_name("S9L" if leader else "S9", n, 100)
    base = base_path("s9l" if leader else "s9")
    path = base + "/lock"
    probe = open_client()
    hc = open_client()
    end = threading.Event()
    if leader:
        led = threading.Event()

        def lead():
            led.set()
            end.wait()

        el = hc.Election(path, "leader")
        threading.Thread(target=el.run, args=(lead,), daemon=True).start()
        if not led.wait(20):
            die("the leader did not lead")
    else:
        hl = Lock(hc, path, identifier="holder")
        if not hl.acquire(timeout=20):
            die("the holder's acquire timed out")
    rss0 = rss_now_kib()
    t0 = now()
    clients = open_many(n)

    def wait_mutex(c):
        try:
            Lock(c, path, identifier="w").acquire()
            note_grant()
        except Exception as e:  # noqa: BLE001 - reported
            note_failure(e)

    def wait_election(c):
        try:
            c.Election(path, "s").run(note_grant)
        except Exception as e:  # noqa: BLE001 - reported
            note_failure(e)

    for c in clients:
        threading.Thread(target=wait_election if leader else wait_mutex, args=(c,),
                         daemon=True).start()
    t_queued = wait_children(probe, path, n + 1, 0.01, 300)
    time.sleep(settle_s())
    a = fleet_sample()
    delay = (a["t"] + int(opt.seconds * 1e9) - now()) / 1e9
    if delay > 0:
        time.sleep(delay)
    b = fleet_sample()
    rss1 = rss_now_kib()
    still = children(probe, path)
    with fleet_mu:
        fleet["closing"] = True
        granted, failed = fleet["granted"], fleet["failed"]
    if granted or failed or still != n + 1:
        die("%s: %d waiters granted and %d failed while the holder held; %d of %d nodes left"
            % (scenario, granted, failed, still, n + 1))
    s = (b["t"] - a["t"]) / 1e9
    line = "%s %s waiters=%d sessions=%d queue_ms=%.0f" % (scenario, opt.label, n, n + 1,
                                                           (t_queued - t0) / 1e6)
    line += fleet_rates(a, b)
    cpu = b["m"]["cpu_self"] - a["m"]["cpu_self"]
    line += " cpu_ms/s=%.2f cpu_us/s/waiter=%.1f rss_kib=%d rss_kib/waiter=%.1f settle_s=%.1f" % (
        cpu / 1e3 / s, cpu / s / n, rss1, (rss1 - rss0) / n, settle_s())
    print(line, flush=True)
    end.set()
    stop_all(clients + [hc])
    try:
        probe.delete(base, recursive=True)
    except Exception:  # noqa: BLE001 - gone already
        pass
    stop_all([probe])


def s9a():
    """A cron minute: -c sessions (default 1000), connected beforehand, acquire one free Lock
    at the same moment (a thread each); the first holds."""
    n = opt.clients or 1000
    scenario = scenario_name("S9A", n, 1000)
    base = base_path("s9a")
    path = base + "/lock"
    probe = open_client()
    rss0 = rss_now_kib()
    clients = open_many(n)
    go = threading.Event()

    def arrive(c):
        lock = Lock(c, path, identifier="a")
        go.wait()
        try:
            lock.acquire()
            note_grant()
        except Exception as e:  # noqa: BLE001 - reported
            note_failure(e)

    for c in clients:
        threading.Thread(target=arrive, args=(c,), daemon=True).start()
    time.sleep(settle_s())
    a = fleet_sample()
    t0_wall = time.time() * 1e3
    t0 = now()
    go.set()
    polls = [0]
    t_all = wait_children(probe, path, n, 0.005, 300, polls)
    prev = a["sent"]
    t_quiet = t_all
    limit = time.monotonic() + 60
    while True:
        sent, _ = server_bytes()
        if sent >= 0 and prev >= 0 and sent - prev < 32 * 1024:
            break
        if time.monotonic() > limit:
            die("%s: the server did not quieten within 60 s of the last node" % scenario)
        prev = sent
        t_quiet = now()
        time.sleep(0.25)
    b = fleet_sample()
    rss1 = rss_now_kib()
    # The latest ctime of the queue's nodes (the server's clock: this machine's).
    last = -1
    for child in probe.get_children(path):
        st = probe.exists(path + "/" + child)
        if st and st.ctime > last:
            last = st.ctime
    with fleet_mu:
        fleet["closing"] = True
        granted, failed, first = fleet["granted"], fleet["failed"], fleet["first"]
    if granted != 1 or failed:
        die("%s: %d granted (1 expected: nobody releases) and %d failed" % (scenario, granted,
                                                                          failed))
    ma, mb = a["m"], b["m"]
    line = ("%s %s arrivals=%d start_ms=0.0 first_grant_ms=%.1f all_queued_ms=%.0f probe_ms=%.1f "
            "quiet_ms=%.0f" % (scenario, opt.label, n, (first - t0) / 1e6, last - t0_wall,
                               (t_all - t0) / 1e6, (t_quiet - t0) / 1e6))
    if a["sent"] >= 0 and b["sent"] >= 0:
        line += " srv_sent_kib=%.0f srv_recv_kib=%.0f srv_sent_B/arrival=%.0f" % (
            (b["sent"] - a["sent"]) / 1024, (b["received"] - a["received"]) / 1024,
            (b["sent"] - a["sent"]) / n)
    if ma["ok"] and mb["ok"]:
        line += " req=%.0f rd=%.0f wr=%.0f wakes=%.0f" % (
            mb["packets"] - ma["packets"], mb["reads"] - ma["reads"],
            mb["writes"] - ma["writes"], mb["wakes"] - ma["wakes"])
    if a["zxid"] >= 0 and b["zxid"] >= 0:
        line += " txn=%.0f" % (b["zxid"] - a["zxid"])
    line += " probe_polls=%d cpu_ms=%.0f" % (polls[0], (mb["cpu_self"] - ma["cpu_self"]) / 1e3)
    if ma["cpu_server"] >= 0 and mb["cpu_server"] >= 0:
        line += " srv_cpu_ms=%.0f" % ((mb["cpu_server"] - ma["cpu_server"]) / 1e3)
    line += " rss_kib=%d rss_kib/session=%.1f" % (rss1, (rss1 - rss0) / n)
    print(line, flush=True)
    stop_all(clients)
    try:
        probe.delete(base, recursive=True)
    except Exception:  # noqa: BLE001 - gone already
        pass
    stop_all([probe])


# ---- S7: one cold start ----------------------------------------------------------------

def s7():
    c = open_client()
    lock = Lock(c, "%s/%s-s7/lock" % (opt.prefix, opt.label))
    if not lock.acquire(blocking=False):
        die("the lock is taken")
    lock.release()
    c.stop()
    c.close()


def main():
    global opt
    p = argparse.ArgumentParser(description="kazoo Lock benchmark (zkl-bench scenarios)")
    p.add_argument("-s", dest="servers", default=os.environ.get("ZKLOCK_SERVERS") or "127.0.0.1:2181")
    p.add_argument("-d", dest="seconds", type=float, default=5.0)
    p.add_argument("-W", dest="warmup", type=float, default=-1.0)
    p.add_argument("-c", dest="clients", type=int, default=0)
    p.add_argument("-L", dest="label", default="kazoo")
    p.add_argument("-p", dest="prefix", default="/bench")
    p.add_argument("scenario", choices=["s1", "s2", "s3", "s4", "s7", "s9", "s9l", "s9a"])
    opt = p.parse_args()
    c = opt.clients
    if opt.scenario == "s1":
        timed_loop("S1", 1, True, False, False)
    elif opt.scenario == "s2":
        timed_loop(scenario_name("S2", c or 8, 8), c or 8, True, True, True)
    elif opt.scenario == "s3":
        timed_loop(scenario_name("S3", c or 8, 8), c or 8, False, False, False)
    elif opt.scenario == "s4":
        s4()
    elif opt.scenario in ("s9", "s9l"):
        s9_idle(opt.scenario == "s9l")
    elif opt.scenario == "s9a":
        s9a()
    else:
        s7()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

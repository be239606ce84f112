#!/usr/bin/python3
"""kazoo_bench: the zkl-bench scenarios S1, S2, S3, S4 and S7 for kazoo's Lock, printing
the same lines as zkl-bench (see bench/zkl-bench.c).

  /usr/bin/python3 kazoo_bench.py [-s SERVERS] [-d SECONDS] [-W WARMUP] [-c CLIENTS]
                                  [-L LABEL] [-p PREFIX] SCENARIO

SCENARIO: s1, s2, s3, s4, or s7 (one cold start: connect, acquire, release, exit, quietly;
zkl-bench s7 -- /usr/bin/python3 kazoo_bench.py ... times it). Each client is a
KazooClient (its own session) driven by its own thread, as a threaded service would.
"""
import argparse
import logging
import os
import resource
import socket
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
    p.add_argument("scenario", choices=["s1", "s2", "s3", "s4", "s7"])
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
    else:
        s7()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

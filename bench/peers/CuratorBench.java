/* CuratorBench: the zkl-bench scenarios S1, S2, S3, S4 and S7 for Apache Curator's
 * InterProcessMutex, printing the same lines as zkl-bench (see bench/zkl-bench.c).
 *
 *   java -cp CLASSES:/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar \
 *        CuratorBench [-s SERVERS] [-d SECONDS] [-W WARMUP] [-c CLIENTS] [-L LABEL]
 *        [-p PREFIX] SCENARIO
 *
 * SCENARIO: s1, s2, s3, s4, or s7 (one cold start: connect, acquire, release, exit, quietly;
 * zkl-bench s7 -- java ... times it); or the fleet's s9 (-c sessions waiting idle on one
 * InterProcessMutex behind a holder, a thread each), s9l (-c LeaderLatch standbys behind a
 * leader) and s9a (-c sessions acquiring one free mutex at the same moment): see S9 in
 * bench/zkl-bench.c and docs/BENCHMARKS.md. bench/run compiles and runs it.
 */
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.data.Stat;

public final class CuratorBench {
    static String servers = "127.0.0.1:2181";
    static double seconds = 5;
    static double warmup = -1;
    static int clients = 0;
    static String label = "Curator";
    static String prefix = "/bench";
    static String base;

    // ---- helpers -------------------------------------------------------------------

    static void die(String msg) {
        System.err.println("CuratorBench: " + msg);
        System.exit(1);
    }

    static long now() {
        return System.nanoTime(); // CLOCK_MONOTONIC on Linux
    }

    static final class LongList {
        long[] v = new long[1024];
        int n;

        void add(long x) {
            if (n == v.length)
                v = Arrays.copyOf(v, 2 * n);
            v[n++] = x;
        }

        void addAll(LongList o) {
            for (int i = 0; i < o.n; i++)
                add(o.v[i]);
        }

        void sort() {
            Arrays.sort(v, 0, n);
        }

        /* nearest rank, microseconds; the list must be sorted */
        double q(double q) {
            if (n == 0)
                return 0;
            long rank = (long) (q * n + 0.999999);
            if (rank < 1)
                rank = 1;
            if (rank > n)
                rank = n;
            return v[(int) rank - 1] / 1e3;
        }
    }

    static long peakRssKib() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (line.startsWith("VmHWM:"))
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        } catch (Exception e) {
            // no /proc: report 0
        }
        return 0;
    }

    static CuratorFramework open(byte[] data) throws Exception {
        CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder()
                .connectString(servers)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(20000)
                .retryPolicy(new RetryOneTime(100));
        if (data != null)
            b.defaultData(data);
        CuratorFramework c = b.build();
        c.start();
        if (!c.blockUntilConnected(20, TimeUnit.SECONDS))
            die("no connection to " + servers);
        return c;
    }

    // ---- server counters (mntr) --------------------------------------------------------

    static final class Mstats {
        boolean ok;
        double fsyncs, writes, reads, packets, wakes;
        double cpuSelf = -1, cpuServer = -1; // microseconds
    }

    /* User + system CPU time of a process in microseconds, from /proc/PID/stat (clock
     * ticks of 10 ms, Linux's USER_HZ); -1 if unreadable. */
    static double procCpuUs(String pid) {
        try {
            String stat = new String(Files.readAllBytes(Paths.get("/proc/" + pid + "/stat")),
                    StandardCharsets.US_ASCII);
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" +");
            return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * 1e4;
        } catch (Exception e) {
            return -1;
        }
    }

    /* The server's counters, and the CPU time used so far by this process and by the
     * server (whose pid bench/run passes in $ZKL_BENCH_SERVER_PID). */
    static Mstats mntr() {
        Mstats m = mntrRead();
        m.cpuSelf = procCpuUs("self");
        String pid = System.getenv("ZKL_BENCH_SERVER_PID");
        m.cpuServer = pid != null && !pid.isEmpty() ? procCpuUs(pid) : -1;
        return m;
    }

    static Mstats mntrRead() {
        Mstats m = new Mstats();
        if ("off".equals(System.getenv("ZKL_BENCH_MNTR")))
            return m;
        String first = servers.split("[,/]")[0];
        int colon = first.lastIndexOf(':');
        String host = colon >= 0 ? first.substring(0, colon) : first;
        int port = colon >= 0 ? Integer.parseInt(first.substring(colon + 1)) : 2181;
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 2000);
            s.setSoTimeout(2000);
            OutputStream out = s.getOutputStream();
            out.write("mntr".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            byte[] chunk = new byte[8192];
            int r;
            while ((r = in.read(chunk)) > 0)
                buf.write(chunk, 0, r);
            for (String line : buf.toString(StandardCharsets.US_ASCII).split("\n")) {
                String[] kv = line.split("\t");
                if (kv.length != 2)
                    continue;
                double v;
                try {
                    v = Double.parseDouble(kv[1].trim());
                } catch (NumberFormatException e) {
                    continue;
                }
                switch (kv[0]) {
                    case "zk_cnt_fsynctime": m.fsyncs = v; m.ok = true; break;
                    case "zk_cnt_updatelatency": m.writes = v; break;
                    case "zk_cnt_readlatency": m.reads = v; break;
                    case "zk_packets_received": m.packets = v; break;
                    case "zk_sum_node_created_watch_count":
                    case "zk_sum_node_deleted_watch_count":
                    case "zk_sum_node_changed_watch_count":
                    case "zk_sum_node_children_watch_count": m.wakes += v; break;
                    default: break;
                }
            }
        } catch (Exception e) {
            m.ok = false;
        }
        return m;
    }

    // ---- the result line ---------------------------------------------------------------

    static void report(String scenario, double rate, LongList lat, long cycles, Mstats m0, Mstats m1,
                       String per, double perN, long rss, String extra) {
        lat.sort();
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT,
                "%s %s cycles/s=%.1f p50_us=%.0f p99_us=%.0f max_us=%.0f rss_kib=%d cycles=%d",
                scenario, label, rate, lat.q(0.5), lat.q(0.99), lat.q(1.0), rss, cycles));
        double n = perN > 0 ? perN : cycles;
        if (m0.ok && m1.ok && n > 0)
            sb.append(String.format(Locale.ROOT,
                    " fsync/%s=%.2f wr/%s=%.2f rd/%s=%.2f req/%s=%.2f wakes/%s=%.2f",
                    per, (m1.fsyncs - m0.fsyncs) / n, per, (m1.writes - m0.writes) / n,
                    per, (m1.reads - m0.reads) / n, per, (m1.packets - m0.packets) / n,
                    per, (m1.wakes - m0.wakes) / n));
        if (n > 0 && m0.cpuSelf >= 0 && m1.cpuSelf >= 0)
            sb.append(String.format(Locale.ROOT, " cpu_us/%s=%.0f", per, (m1.cpuSelf - m0.cpuSelf) / n));
        if (n > 0 && m0.cpuServer >= 0 && m1.cpuServer >= 0)
            sb.append(String.format(Locale.ROOT, " srv_cpu_us/%s=%.0f", per, (m1.cpuServer - m0.cpuServer) / n));
        if (extra != null && !extra.isEmpty())
            sb.append(' ').append(extra);
        System.out.println(sb);
        System.out.flush();
    }

    static String scenarioName(String b, int n, int def) {
        return n == def ? b : b + "x" + n;
    }

    // ---- S1, S2, S3: timed loops -------------------------------------------------------

    static long warmEnd, end;
    static final AtomicLong lastDone = new AtomicLong();

    static void noteDone(long t) {
        lastDone.accumulateAndGet(t, Math::max);
    }

    static final class Worker extends Thread {
        final InterProcessMutex m;
        final boolean waitLatency;
        final long[] acq, call, rel;
        final AtomicLong holdNo;
        final AtomicInteger holders, overlaps;
        final LongList lat = new LongList();
        long cycles;
        volatile Throwable error;

        Worker(InterProcessMutex m, boolean waitLatency, long[] acq, long[] call, long[] rel,
               AtomicLong holdNo, AtomicInteger holders, AtomicInteger overlaps) {
            this.m = m;
            this.waitLatency = waitLatency;
            this.acq = acq;
            this.call = call;
            this.rel = rel;
            this.holdNo = holdNo;
            this.holders = holders;
            this.overlaps = overlaps;
        }

        @Override
        public void run() {
            try {
                for (;;) {
                    long t0 = now();
                    if (t0 - end >= 0)
                        break;
                    m.acquire();
                    long t1 = now();
                    if (holders.incrementAndGet() > 1)
                        overlaps.incrementAndGet();
                    long k = acq != null ? holdNo.getAndIncrement() : -1;
                    if (k >= 0 && k < acq.length)
                        acq[(int) k] = t1;
                    holders.decrementAndGet();
                    if (k >= 0 && k < call.length)
                        call[(int) k] = now();
                    m.release();
                    long t2 = now();
                    if (k >= 0 && k < rel.length)
                        rel[(int) k] = t2;
                    if (t0 - warmEnd >= 0) {
                        lat.add(waitLatency ? t1 - t0 : t2 - t0);
                        cycles++;
                        noteDone(t2);
                    } else if (k >= 0 && k < acq.length) {
                        acq[(int) k] = 0; // a warm-up hold: no hand-off sample
                    }
                }
            } catch (Throwable e) {
                error = e;
            }
        }
    }

    static void timedLoop(String scenario, int n, boolean shared, boolean waitLatency, boolean handoffs)
            throws Exception {
        base = prefix + "/" + label + "-" + ProcessHandle.current().pid() + "-" + scenario;
        CuratorFramework[] cs = new CuratorFramework[n];
        Worker[] ws = new Worker[n];
        double w = warmup >= 0 ? warmup : Math.min(seconds / 5, 1);
        int cap = handoffs ? (int) Math.min(20_000_000, (seconds + w + 5) * 20000) : 0;
        long[] acq = handoffs ? new long[cap] : null, rel = handoffs ? new long[cap] : null;
        long[] call = handoffs ? new long[cap] : null;
        AtomicLong holdNo = new AtomicLong();
        AtomicInteger holders = new AtomicInteger(), overlaps = new AtomicInteger();
        for (int i = 0; i < n; i++) {
            cs[i] = open(null);
            String path = shared ? base + "/lock" : base + "/lock-" + i;
            // Unshared paths: each worker checks its own exclusion (a counter of its own).
            ws[i] = new Worker(new InterProcessMutex(cs[i], path), waitLatency, acq, call, rel, holdNo,
                    shared ? holders : new AtomicInteger(), overlaps);
        }
        long start = now();
        warmEnd = start + (long) (w * 1e9);
        end = warmEnd + (long) (seconds * 1e9);
        lastDone.set(warmEnd);
        for (Worker x : ws)
            x.start();
        long sleep = warmEnd - now();
        if (sleep > 0)
            TimeUnit.NANOSECONDS.sleep(sleep);
        Mstats m0 = mntr();
        for (Worker x : ws)
            x.join();
        Mstats m1 = mntr();
        LongList lat = new LongList();
        long cycles = 0;
        for (Worker x : ws) {
            if (x.error != null) {
                x.error.printStackTrace();
                die("scenario " + scenario + " failed");
            }
            lat.addAll(x.lat);
            cycles += x.cycles;
        }
        double elapsed = (lastDone.get() - warmEnd) / 1e9;
        StringBuilder extra = new StringBuilder();
        if (n > 1)
            extra.append("clients=").append(n);
        if (handoffs) {
            // gaps: previous release returned -> acquire returned; idle: previous release
            // called -> acquire returned.
            LongList gaps = new LongList(), idle = new LongList();
            long nh = Math.min(holdNo.get(), cap);
            for (int k = 1; k < nh; k++) {
                if (acq[k] != 0 && acq[k - 1] != 0 && rel[k - 1] != 0 && call[k - 1] != 0) {
                    gaps.add(acq[k] - rel[k - 1]);
                    idle.add(acq[k] - call[k - 1]);
                }
            }
            gaps.sort();
            idle.sort();
            extra.append(String.format(Locale.ROOT,
                    " handoff_p50_us=%.0f handoff_p99_us=%.0f handoff_min_us=%.0f"
                    + " idle_p50_us=%.0f idle_p99_us=%.0f",
                    gaps.q(0.5), gaps.q(0.99), gaps.n > 0 ? gaps.v[0] / 1e3 : 0.0,
                    idle.q(0.5), idle.q(0.99)));
        }
        if (overlaps.get() != 0)
            extra.append(" EXCLUSION_VIOLATED=").append(overlaps.get());
        long rss = peakRssKib();
        for (CuratorFramework c : cs)
            c.close();
        report(scenario, cycles / elapsed, lat, cycles, m0, m1, "c", 0, rss, extra.toString().trim());
    }

    // ---- S4: a queue of sessions drains ---------------------------------------------------

    static long seqOf(String name) {
        int i = name.length();
        while (i > 0 && Character.isDigit(name.charAt(i - 1)))
            i--;
        return i < name.length() ? Long.parseLong(name.substring(i)) : -1;
    }

    static void s4() throws Exception {
        int n = clients > 0 ? clients : 200;
        String scenario = scenarioName("S4", n, 200);
        base = prefix + "/" + label + "-" + ProcessHandle.current().pid() + "-s4";
        String path = base + "/lock";
        CuratorFramework gc = open("gate".getBytes(StandardCharsets.US_ASCII));
        InterProcessMutex gm = new InterProcessMutex(gc, path);
        if (!gm.acquire(20, TimeUnit.SECONDS))
            die("gate acquire timed out");
        CuratorFramework[] cs = new CuratorFramework[n];
        InterProcessMutex[] ms = new InterProcessMutex[n];
        for (int i = 0; i < n; i++) {
            cs[i] = open(("w" + i).getBytes(StandardCharsets.US_ASCII));
            ms[i] = new InterProcessMutex(cs[i], path);
        }
        int[] order = new int[n];
        long[] acquired = new long[n], released = new long[n];
        AtomicInteger next = new AtomicInteger(), holders = new AtomicInteger(), overlaps = new AtomicInteger();
        Throwable[] errors = new Throwable[n];
        Thread[] ts = new Thread[n];
        for (int i = 0; i < n; i++) {
            final int idx = i;
            ts[i] = new Thread(() -> {
                try {
                    if (!ms[idx].acquire(120, TimeUnit.SECONDS))
                        throw new IllegalStateException("acquire timed out");
                    acquired[idx] = now();
                    if (holders.incrementAndGet() > 1)
                        overlaps.incrementAndGet();
                    order[next.getAndIncrement()] = idx;
                    holders.decrementAndGet();
                    ms[idx].release();
                    released[idx] = now();
                } catch (Throwable e) {
                    errors[idx] = e;
                }
            });
            ts[i].start();
        }
        // Wait until every waiter has queued, then note the queue (node sequence order).
        long deadline = now() + 120_000_000_000L;
        List<String> children;
        for (;;) {
            children = gc.getChildren().forPath(path);
            if (children.size() >= n + 1)
                break;
            if (now() - deadline > 0)
                die("only " + (children.size() - 1) + " of " + n + " waiters queued");
            Thread.sleep(10);
        }
        List<String> sorted = new ArrayList<>(children);
        sorted.sort((a, b) -> Long.compare(seqOf(a), seqOf(b)));
        List<Integer> queue = new ArrayList<>();
        for (String child : sorted) {
            String data = new String(gc.getData().forPath(path + "/" + child), StandardCharsets.US_ASCII);
            if (data.startsWith("w"))
                queue.add(Integer.parseInt(data.substring(1)));
        }
        Mstats m0 = mntr();
        long t0 = now();
        gm.release();
        for (Thread t : ts)
            t.join();
        Mstats m1 = mntr();
        for (Throwable e : errors) {
            if (e != null) {
                e.printStackTrace();
                die("scenario S4 failed");
            }
        }
        LongList lat = new LongList();
        long tEnd = t0;
        for (int i = 0; i < n; i++) {
            lat.add(acquired[i] - t0);
            tEnd = Math.max(tEnd, released[i]);
        }
        int mismatches = 0;
        for (int k = 0; k < n; k++) {
            if (k >= queue.size() || order[k] != queue.get(k))
                mismatches++;
        }
        double drain = (tEnd - t0) / 1e9;
        String extra = String.format(Locale.ROOT, "clients=%d drain_ms=%.1f fifo=%s mismatches=%d", n,
                drain * 1e3, mismatches == 0 ? "yes" : "no", mismatches);
        if (overlaps.get() != 0)
            extra += " EXCLUSION_VIOLATED=" + overlaps.get();
        long rss = peakRssKib();
        for (CuratorFramework c : cs)
            c.close();
        gc.close();
        report(scenario, n / drain, lat, n, m0, m1, "release", n, rss, extra);
    }

    // ---- S9: a fleet, many sessions on one lock (see bench/zkl-bench.c) ---------------

    /* A four-letter word's whole answer from the first server, or null. */
    static String fourLetter(String word) {
        String first = servers.split("[,/]")[0];
        int colon = first.lastIndexOf(':');
        String host = colon >= 0 ? first.substring(0, colon) : first;
        int port = colon >= 0 ? Integer.parseInt(first.substring(colon + 1)) : 2181;
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 2000);
            s.setSoTimeout(2000);
            OutputStream out = s.getOutputStream();
            out.write(word.getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            byte[] chunk = new byte[8192];
            int r;
            while ((r = in.read(chunk)) > 0)
                buf.write(chunk, 0, r);
            return buf.toString(StandardCharsets.US_ASCII);
        } catch (Exception e) {
            return null;
        }
    }

    static String serverPort() {
        String first = servers.split("[,/]")[0];
        int colon = first.lastIndexOf(':');
        return colon >= 0 ? first.substring(colon + 1) : "2181";
    }

    static final class Fleet {
        long t;
        double zxid = -1, sent = -1, received = -1;
        Mstats m;
    }

    /* The bytes the server sent and received on its established client connections
     * (tcp_info from `ss`), into f; left at -1 if ss gives nothing. */
    static void serverBytes(Fleet f) {
        String port = serverPort();
        if (!port.matches("[0-9]+"))
            return;
        try {
            Process p = new ProcessBuilder("ss", "-tinH", "state", "established",
                    "( sport = :" + port + " )").redirectErrorStream(false).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.US_ASCII);
            p.waitFor();
            double s = 0, r = 0;
            boolean any = false;
            for (String w : out.split("\\s+")) {
                if (w.startsWith("bytes_sent:")) {
                    s += Double.parseDouble(w.substring(11));
                    any = true;
                } else if (w.startsWith("bytes_received:")) {
                    r += Double.parseDouble(w.substring(15));
                }
            }
            if (any) {
                f.sent = s;
                f.received = r;
            }
        } catch (Exception e) {
            // no ss: unknown
        }
    }

    static Fleet fleetSample() {
        Fleet f = new Fleet();
        serverBytes(f);
        String srvr = fourLetter("srvr");
        if (srvr != null) {
            int i = srvr.indexOf("Zxid: 0x");
            if (i >= 0) {
                int j = i + 8;
                while (j < srvr.length() && Character.digit(srvr.charAt(j), 16) >= 0)
                    j++;
                f.zxid = (double) Long.parseUnsignedLong(srvr.substring(i + 8, j), 16);
            }
        }
        f.m = mntr();
        f.m.cpuSelf = cpuFineUs();
        f.t = now();
        return f;
    }

    /* This process's CPU time in microseconds from its threads' schedstat (nanoseconds;
     * /proc/self/stat counts 10 ms ticks), or procCpuUs("self") if unreadable. */
    static double cpuFineUs() {
        double ns = 0;
        boolean any = false;
        try (java.nio.file.DirectoryStream<java.nio.file.Path> ds =
                     Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
            for (java.nio.file.Path t : ds) {
                try {
                    String st = new String(Files.readAllBytes(t.resolve("schedstat")), StandardCharsets.US_ASCII);
                    ns += Double.parseDouble(st.trim().split(" +")[0]);
                    any = true;
                } catch (Exception e) {
                    // the thread ended meanwhile
                }
            }
        } catch (Exception e) {
            return procCpuUs("self");
        }
        return any ? ns / 1e3 : procCpuUs("self");
    }

    static long rssNowKib() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (line.startsWith("VmRSS:"))
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        } catch (Exception e) {
            // no /proc: 0
        }
        return 0;
    }

    static int children(CuratorFramework probe, String path) throws Exception {
        Stat st = probe.checkExists().forPath(path);
        return st == null ? 0 : st.getNumChildren();
    }

    static long waitChildren(CuratorFramework probe, String path, int want, int pollMs, int limitS,
                             long[] polls) throws Exception {
        long deadline = now() + limitS * 1_000_000_000L;
        int have;
        while ((have = children(probe, path)) < want) {
            if (polls != null)
                polls[0]++;
            if (now() - deadline > 0)
                die("only " + have + " of " + want + " nodes under " + path + " after " + limitS + " s");
            Thread.sleep(pollMs);
        }
        return now();
    }

    static double settleS() {
        return warmup >= 0 ? warmup : 3;
    }

    static String fleetRates(Fleet a, Fleet b) {
        double s = (b.t - a.t) / 1e9;
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, " window_s=%.1f", s));
        if (a.zxid >= 0 && b.zxid >= 0)
            sb.append(String.format(Locale.ROOT, " txn/s=%.2f", (b.zxid - a.zxid) / s));
        if (a.m.ok && b.m.ok)
            sb.append(String.format(Locale.ROOT, " wr/s=%.2f fsync/s=%.2f req/s=%.2f rd/s=%.2f wakes/s=%.2f",
                    (b.m.writes - a.m.writes) / s, (b.m.fsyncs - a.m.fsyncs) / s,
                    (b.m.packets - a.m.packets) / s, (b.m.reads - a.m.reads) / s,
                    (b.m.wakes - a.m.wakes) / s));
        if (a.sent >= 0 && b.sent >= 0)
            sb.append(String.format(Locale.ROOT, " srv_sent_B/s=%.0f srv_recv_B/s=%.0f",
                    (b.sent - a.sent) / s, (b.received - a.received) / s));
        if (a.m.cpuServer >= 0 && b.m.cpuServer >= 0)
            sb.append(String.format(Locale.ROOT, " srv_cpu_ms/s=%.2f", (b.m.cpuServer - a.m.cpuServer) / 1e3 / s));
        return sb.toString();
    }

    /* Opens n clients (sessions), 16 at a time. */
    static CuratorFramework[] openMany(int n) throws Exception {
        CuratorFramework[] cs = new CuratorFramework[n];
        ExecutorService pool = Executors.newFixedThreadPool(16);
        List<Future<?>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            final int k = i;
            fs.add(pool.submit(() -> {
                cs[k] = open(null);
                return null;
            }));
        }
        for (Future<?> f : fs)
            f.get();
        pool.shutdown();
        return cs;
    }

    static final AtomicLong granted = new AtomicLong(), failed = new AtomicLong();
    static volatile boolean closing;
    static volatile long firstGrant;

    static void noteGrant() {
        if (closing)
            return;
        if (granted.getAndIncrement() == 0)
            firstGrant = now();
    }

    /* s9 / s9l: -c sessions (default 100) wait idle behind a holder: an InterProcessMutex
     * acquire each, on a thread of its own (Curator's acquire blocks), or a started
     * LeaderLatch each; measured over -d seconds once all nodes are there and -W seconds
     * (default 3) have passed. */
    static void s9Idle(boolean leader) throws Exception {
        int n = clients > 0 ? clients : 100;
        String scenario = scenarioName(leader ? "S9L" : "S9", n, 100);
        base = prefix + "/" + label + "-" + ProcessHandle.current().pid() + "-" + (leader ? "s9l" : "s9");
        String path = base + "/lock";
        CuratorFramework probe = open(null);
        CuratorFramework hc = open(null);
        InterProcessMutex hm = null;
        LeaderLatch hl = null;
        if (leader) {
            hl = new LeaderLatch(hc, path, "leader");
            hl.start();
            if (!hl.await(20, TimeUnit.SECONDS))
                die("the leader did not lead");
        } else {
            hm = new InterProcessMutex(hc, path);
            if (!hm.acquire(20, TimeUnit.SECONDS))
                die("the holder's acquire timed out");
        }
        long rss0 = rssNowKib();
        long t0 = now();
        CuratorFramework[] cs = openMany(n);
        LeaderLatch[] ls = new LeaderLatch[n];
        for (int i = 0; i < n; i++) {
            if (leader) {
                ls[i] = new LeaderLatch(cs[i], path, "s" + i);
                ls[i].addListener(new LeaderLatchListener() {
                    @Override
                    public void isLeader() {
                        noteGrant();
                    }

                    @Override
                    public void notLeader() {
                    }
                });
                ls[i].start();
            } else {
                InterProcessMutex m = new InterProcessMutex(cs[i], path);
                Thread t = new Thread(() -> {
                    try {
                        m.acquire();
                        noteGrant();
                    } catch (Throwable e) {
                        if (!closing && failed.getAndIncrement() == 0)
                            e.printStackTrace();
                    }
                });
                t.setDaemon(true);
                t.start();
            }
        }
        long tQueued = waitChildren(probe, path, n + 1, 10, 300, null);
        Thread.sleep((long) (settleS() * 1000));
        Fleet a = fleetSample();
        long sleep = a.t + (long) (seconds * 1e9) - now();
        if (sleep > 0)
            TimeUnit.NANOSECONDS.sleep(sleep);
        Fleet b = fleetSample();
        long rss1 = rssNowKib();
        int still = children(probe, path);
        closing = true;
        if (granted.get() != 0 || failed.get() != 0 || still != n + 1)
            die(scenario + ": " + granted.get() + " waiters granted and " + failed.get()
                    + " failed while the holder held; " + still + " of " + (n + 1) + " nodes left");
        double s = (b.t - a.t) / 1e9;
        String line = String.format(Locale.ROOT, "%s %s waiters=%d sessions=%d queue_ms=%.0f", scenario, label,
                n, n + 1, (tQueued - t0) / 1e6)
                + fleetRates(a, b)
                + String.format(Locale.ROOT,
                        " cpu_ms/s=%.2f cpu_us/s/waiter=%.1f rss_kib=%d rss_kib/waiter=%.1f settle_s=%.1f",
                        (b.m.cpuSelf - a.m.cpuSelf) / 1e3 / s, (b.m.cpuSelf - a.m.cpuSelf) / s / n, rss1,
                        (double) (rss1 - rss0) / n, settleS());
        System.out.println(line);
        System.out.flush();
        for (int i = 0; i < n; i++) {
            if (ls[i] != null)
                ls[i].close();
            cs[i].close();
        }
        if (hl != null)
            hl.close();
        if (hm != null)
            hm.release();
        hc.close();
        sweep(probe);
        probe.close();
    }

    /* Deletes the run's folders (left to the container reaper, they would load the server
     * during the scenarios that follow). */
    static void sweep(CuratorFramework c) {
        try {
            c.delete().deletingChildrenIfNeeded().forPath(base);
        } catch (Exception e) {
            // gone already
        }
    }

    /* s9a: a cron minute: -c sessions (default 1000), connected beforehand, acquire one
     * free InterProcessMutex at the same moment (a thread each, released together); the
     * first holds. Timed from that moment: the first grant, all nodes present (a probe's
     * exists every 5 ms), the server quiet again (under 32 KiB sent in 250 ms); and what
     * the server sent and received meanwhile. */
    static void s9a() throws Exception {
        int n = clients > 0 ? clients : 1000;
        String scenario = scenarioName("S9A", n, 1000);
        base = prefix + "/" + label + "-" + ProcessHandle.current().pid() + "-s9a";
        String path = base + "/lock";
        CuratorFramework probe = open(null);
        long rss0 = rssNowKib();
        CuratorFramework[] cs = openMany(n);
        CountDownLatch go = new CountDownLatch(1), ready = new CountDownLatch(n);
        for (int i = 0; i < n; i++) {
            InterProcessMutex m = new InterProcessMutex(cs[i], path);
            Thread t = new Thread(() -> {
                try {
                    ready.countDown();
                    go.await();
                    m.acquire();
                    noteGrant();
                } catch (Throwable e) {
                    if (!closing && failed.getAndIncrement() == 0)
                        e.printStackTrace();
                }
            });
            t.setDaemon(true);
            t.start();
        }
        ready.await();
        Thread.sleep((long) (settleS() * 1000));
        Fleet a = fleetSample();
        double t0Wall = System.currentTimeMillis();
        long t0 = now();
        go.countDown();
        long[] polls = {0};
        long tAll = waitChildren(probe, path, n, 5, 300, polls);
        double prev = a.sent;
        long tQuiet = tAll, limit = tAll + 60_000_000_000L;
        for (;;) {
            Fleet f = new Fleet();
            serverBytes(f);
            if (f.sent >= 0 && prev >= 0 && f.sent - prev < 32 * 1024)
                break;
            if (now() - limit > 0)
                die(scenario + ": the server did not quieten within 60 s of the last node");
            prev = f.sent;
            tQuiet = now();
            Thread.sleep(250);
        }
        Fleet b = fleetSample();
        long rss1 = rssNowKib();
        // The latest ctime of the queue's nodes (the server's clock: this machine's).
        double last = -1;
        for (String child : probe.getChildren().forPath(path)) {
            Stat st = probe.checkExists().forPath(path + "/" + child);
            if (st != null && st.getCtime() > last)
                last = st.getCtime();
        }
        closing = true;
        if (granted.get() != 1 || failed.get() != 0)
            die(scenario + ": " + granted.get() + " granted (1 expected: nobody releases) and " + failed.get()
                    + " failed");
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT,
                "%s %s arrivals=%d start_ms=0.0 first_grant_ms=%.1f all_queued_ms=%.0f probe_ms=%.1f quiet_ms=%.0f",
                scenario, label, n, (firstGrant - t0) / 1e6, last - t0Wall, (tAll - t0) / 1e6,
                (tQuiet - t0) / 1e6));
        if (a.sent >= 0 && b.sent >= 0)
            sb.append(String.format(Locale.ROOT, " srv_sent_kib=%.0f srv_recv_kib=%.0f srv_sent_B/arrival=%.0f",
                    (b.sent - a.sent) / 1024, (b.received - a.received) / 1024, (b.sent - a.sent) / n));
        if (a.m.ok && b.m.ok)
            sb.append(String.format(Locale.ROOT, " req=%.0f rd=%.0f wr=%.0f wakes=%.0f", b.m.packets - a.m.packets,
                    b.m.reads - a.m.reads, b.m.writes - a.m.writes, b.m.wakes - a.m.wakes));
        if (a.zxid >= 0 && b.zxid >= 0)
            sb.append(String.format(Locale.ROOT, " txn=%.0f", b.zxid - a.zxid));
        sb.append(String.format(Locale.ROOT, " probe_polls=%d cpu_ms=%.0f", polls[0],
                (b.m.cpuSelf - a.m.cpuSelf) / 1e3));
        if (a.m.cpuServer >= 0 && b.m.cpuServer >= 0)
            sb.append(String.format(Locale.ROOT, " srv_cpu_ms=%.0f", (b.m.cpuServer - a.m.cpuServer) / 1e3));
        sb.append(String.format(Locale.ROOT, " rss_kib=%d rss_kib/session=%.1f", rss1, (double) (rss1 - rss0) / n));
        System.out.println(sb);
        System.out.flush();
        for (CuratorFramework c : cs)
            c.close();
        sweep(probe);
        probe.close();
    }

    // ---- S7: one cold start -------------------------------------------------------------

    static void s7() throws Exception {
        CuratorFramework c = open(null);
        InterProcessMutex m = new InterProcessMutex(c, prefix + "/" + label + "-s7/lock");
        if (!m.acquire(0, TimeUnit.MILLISECONDS))
            die("the lock is taken");
        m.release();
        c.close();
    }

    public static void main(String[] args) throws Exception {
        String scenario = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v = i + 1 < args.length ? args[i + 1] : null;
            switch (a) {
                case "-s": servers = v; i++; break;
                case "-d": seconds = Double.parseDouble(v); i++; break;
                case "-W": warmup = Double.parseDouble(v); i++; break;
                case "-c": clients = Integer.parseInt(v); i++; break;
                case "-L": label = v; i++; break;
                case "-p": prefix = v; i++; break;
                default:
                    if (a.startsWith("-") || scenario != null)
                        die("usage: CuratorBench [-s servers] [-d s] [-W s] [-c n] [-L label] [-p prefix] s1|s2|s3|s4|s7|s9|s9l|s9a");
                    scenario = a;
            }
        }
        if (scenario == null)
            die("no scenario");
        int c = clients;
        switch (scenario) {
            case "s1": timedLoop("S1", 1, true, false, false); break;
            case "s2": timedLoop(scenarioName("S2", c > 0 ? c : 8, 8), c > 0 ? c : 8, true, true, true); break;
            case "s3": timedLoop(scenarioName("S3", c > 0 ? c : 8, 8), c > 0 ? c : 8, false, false, false); break;
            case "s4": s4(); break;
            case "s7": s7(); break;
            case "s9": s9Idle(false); break;
            case "s9l": s9Idle(true); break;
            case "s9a": s9a(); break;
            default: die("unknown scenario " + scenario);
        }
        System.exit(0);
    }
}

/* The Curator peer of the interop tests: it holds or tries Curator's locks on the paths it
 * is told, and says what happened. It makes no judgement; the C tests do.
 *
 *   java -cp <build dir>:<jars> Peer SERVERS SESSION_TIMEOUT_MS
 *
 * Every line in and out is "<slot> <words...>". A slot is a name the test picks ("a",
 * "w1", ...); each slot has its own thread, which runs the slot's commands in order, so
 * one slot can block in acquire while the others go on. Slot "*" is the peer itself.
 *
 * Commands (on stdin):
 *   S acquire mutex|read|write|semmutex PATH TIMEOUT_MS
 *   S acquire sem PATH TIMEOUT_MS MAX_LEASES [QTY]
 *                        -> "S acquired" | "S timeout" | "S error <exception>"
 *                           (TIMEOUT_MS -1 waits without limit)
 *   S release            -> "S released" | "S error <exception>"
 *   S participants mutex|rw|sem PATH
 *                        -> "S participants NODE..." (Curator's getParticipantNodes())
 *   * info               -> "* info <session id hex> <session password hex>"
 *   * quit               closes the client (its session ends) and exits
 * Unprompted lines: "* ready <session id hex> <default node data>" once connected, and
 * "* state <CONNECTED|SUSPENDED|RECONNECTED|LOST|READ_ONLY>" on every state change.
 * End of input acts as quit. */
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.ZooKeeper;

public final class Peer {
	private static final PrintStream OUT =
	    new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

	static CuratorFramework client;

	private Peer() {
	}

	/* One whole line per call, so that the threads' lines never mix. */
	static synchronized void say(String slot, String... words) {
		StringBuilder b = new StringBuilder(slot);
		for (String w : words)
			b.append(' ').append(w);
		OUT.println(b);
	}

	static String hex(byte[] bytes) {
		StringBuilder b = new StringBuilder();
		for (byte x : bytes)
			b.append(String.format("%02x", x & 0xff));
		return b.toString();
	}

	/* Node data as one word: empty data becomes "-". */
	static String word(byte[] data) {
		if (data == null || data.length == 0)
			return "-";
		return new String(data, StandardCharsets.UTF_8).replaceAll("\\s", "_");
	}

	public static void main(String[] args) throws Exception {
		if (args.length != 2) {
			System.err.println("usage: Peer SERVERS SESSION_TIMEOUT_MS");
			System.exit(2);
		}
		CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder()
		    .connectString(args[0])
		    .sessionTimeoutMs(Integer.parseInt(args[1]))
		    .connectionTimeoutMs(10000)
		    .retryPolicy(new ExponentialBackoffRetry(100, 5));
		/* Curator's own default (the host address), reported so the tests can compare. */
		byte[] defaultData = b.getDefaultData();
		client = b.build();
		client.getConnectionStateListenable().addListener((c, s) -> say("*", "state", s.name()));
		client.start();
		if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
			say("*", "fatal", "cannot connect to " + args[0]);
			System.exit(1);
		}
		ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
		say("*", "ready", Long.toHexString(zk.getSessionId()), word(defaultData));

		Map<String, PeerSlot> slots = new HashMap<>();
		BufferedReader in =
		    new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
		String line;
		while ((line = in.readLine()) != null) {
			String[] w = line.trim().split("\\s+");
			if (w.length < 2) {
				if (!line.isBlank())
					say("*", "error", "bad command: " + line);
				continue;
			}
			if (w[0].equals("*")) {
				if (w[1].equals("quit"))
					break;
				if (w[1].equals("info")) {
					zk = client.getZookeeperClient().getZooKeeper();
					say("*", "info", Long.toHexString(zk.getSessionId()),
					    hex(zk.getSessionPasswd()));
				} else {
					say("*", "error", "unknown command: " + line);
				}
				continue;
			}
			slots.computeIfAbsent(w[0], PeerSlot::new).post(w);
		}
		client.close();
		System.exit(0);
	}
}

/* One slot: a thread that runs its commands in order and remembers what it holds. */
final class PeerSlot {
	private final String name;
	private final BlockingQueue<String[]> queue = new LinkedBlockingQueue<>();
	private InterProcessLock lock;
	private InterProcessSemaphoreV2 semaphore;
	private Collection<Lease> leases;

	PeerSlot(String name) {
		this.name = name;
		Thread t = new Thread(this::run, "slot-" + name);
		t.setDaemon(true);
		t.start();
	}

	void post(String[] words) {
		queue.add(words);
	}

	private void run() {
		for (;;) {
			String[] w;
			try {
				w = queue.take();
			} catch (InterruptedException e) {
				return;
			}
			try {
				handle(w);
			} catch (Exception e) {
				Peer.say(name, "error", e.toString().replaceAll("\\s", "_"));
			}
		}
	}

	private static InterProcessLock newLock(String kind, String path) {
		switch (kind) {
		case "mutex":
			return new InterProcessMutex(Peer.client, path);
		case "read":
			return new InterProcessReadWriteLock(Peer.client, path).readLock();
		case "write":
			return new InterProcessReadWriteLock(Peer.client, path).writeLock();
		case "semmutex":
			return new InterProcessSemaphoreMutex(Peer.client, path);
		default:
			throw new IllegalArgumentException("unknown lock kind " + kind);
		}
	}

	private void handle(String[] w) throws Exception {
		switch (w[1]) {
		case "acquire": {
			if (lock != null || leases != null)
				throw new IllegalStateException("slot " + name + " already holds");
			String kind = w[2];
			String path = w[3];
			long timeout = Long.parseLong(w[4]);
			boolean ok;
			if (kind.equals("sem")) {
				int max = Integer.parseInt(w[5]);
				int qty = w.length > 6 ? Integer.parseInt(w[6]) : 1;
				InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(Peer.client, path, max);
				Collection<Lease> got = timeout < 0 ? s.acquire(qty)
				                                    : s.acquire(qty, timeout, TimeUnit.MILLISECONDS);
				ok = got != null;
				if (ok) {
					semaphore = s;
					leases = got;
				}
			} else {
				InterProcessLock l = newLock(kind, path);
				if (timeout < 0) {
					l.acquire();
					ok = true;
				} else {
					ok = l.acquire(timeout, TimeUnit.MILLISECONDS);
				}
				if (ok)
					lock = l;
			}
			Peer.say(name, ok ? "acquired" : "timeout");
			break;
		}
		case "release":
			if (leases != null) {
				semaphore.returnAll(leases);
				leases = null;
				semaphore = null;
			} else if (lock != null) {
				InterProcessLock l = lock;
				lock = null;
				l.release();
			} else {
				throw new IllegalStateException("slot " + name + " holds nothing");
			}
			Peer.say(name, "released");
			break;
		case "participants": {
			String kind = w[2];
			String path = w[3];
			Collection<String> nodes;
			switch (kind) {
			case "mutex":
				nodes = new InterProcessMutex(Peer.client, path).getParticipantNodes();
				break;
			case "rw":
				nodes = new InterProcessReadWriteLock(Peer.client, path).writeLock()
				            .getParticipantNodes();
				break;
			case "sem":
				nodes = new InterProcessSemaphoreV2(Peer.client, path, 1).getParticipantNodes();
				break;
			default:
				throw new IllegalArgumentException("unknown participants kind " + kind);
			}
			List<String> words = new ArrayList<>();
			words.add("participants");
			words.addAll(nodes);
			Peer.say(name, words.toArray(new String[0]));
			break;
		}
		default:
			throw new IllegalArgumentException("unknown command " + w[1]);
		}
	}
}

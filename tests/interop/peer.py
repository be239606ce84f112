#!/usr/bin/python3
"""The kazoo peer of the interop tests: it holds or tries kazoo's locks on the paths it is
told, and says what happened. It makes no judgement; the C tests do.

    /usr/bin/python3 peer.py SERVERS SESSION_TIMEOUT_MS

Every line in and out is "<slot> <words...>". A slot is a name the test picks; each slot
has its own thread, which runs the slot's commands in order, so one slot can block in
acquire while the others go on. Slot "*" is the peer itself.

Commands (on stdin):
  S acquire lock|read|write PATH TIMEOUT_MS   (kazoo Lock, ReadLock, WriteLock)
                      -> "S acquired" | "S timeout" | "S error <exception>"
                         (TIMEOUT_MS -1 waits without limit, 0 tries once)
  S release           -> "S released" | "S error <exception>"
  S contenders lock|read|write PATH
                      -> "S contenders ID..." (kazoo's contenders(): node data, "-" if empty)
  * info              -> "* info <session id hex> <session password hex>"
  * quit              closes the client (its session ends) and exits
Unprompted lines: "* ready <session id hex> <identifier>" once connected (the identifier
is the data of every node this peer creates), "* state <LOST|SUSPENDED|CONNECTED>" on
every state change, and "* fatal <reason>" before exiting when it cannot start.
End of input acts as quit.
"""

import os
import queue
import sys
import threading

OUT_LOCK = threading.Lock()


def say(slot, *words):
    with OUT_LOCK:
        sys.stdout.write(" ".join((slot,) + tuple(str(w) for w in words)) + "\n")
        sys.stdout.flush()


def word(text):
    """One word for a line: empty becomes "-", white space "_"."""
    return "_".join(text.split()) if text and text.strip() else "-"


try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import LockTimeout
except ImportError as e:
    say("*", "fatal", "kazoo is not installed for", sys.executable, word(str(e)))
    sys.exit(3)


class Slot:
    def __init__(self, name, client, identifier):
        self.name = name
        self.client = client
        self.identifier = identifier
        self.lock = None
        self.queue = queue.Queue()
        t = threading.Thread(target=self.run, name="slot-" + name, daemon=True)
        t.start()

    def post(self, words):
        self.queue.put(words)

    def new_lock(self, kind, path):
        if kind == "lock":
            return self.client.Lock(path, self.identifier)
        if kind == "read":
            return self.client.ReadLock(path, self.identifier)
        if kind == "write":
            return self.client.WriteLock(path, self.identifier)
        raise ValueError("unknown lock kind " + kind)

    def run(self):
        while True:
            w = self.queue.get()
            try:
                self.handle(w)
            except Exception as e:  # reported, never fatal: the test judges
                say(self.name, "error", word(type(e).__name__ + ":" + str(e)))

    def handle(self, w):
        cmd = w[1]
        if cmd == "acquire":
            if self.lock is not None:
                raise RuntimeError("slot %s already holds" % self.name)
            kind, path, timeout = w[2], w[3], int(w[4])
            lock = self.new_lock(kind, path)
            try:
                if timeout < 0:
                    ok = lock.acquire()
                elif timeout == 0:
                    ok = lock.acquire(blocking=False)
                else:
                    ok = lock.acquire(timeout=timeout / 1000.0)
            except LockTimeout:
                ok = False
            if ok:
                self.lock = lock
            say(self.name, "acquired" if ok else "timeout")
        elif cmd == "release":
            if self.lock is None:
                raise RuntimeError("slot %s holds nothing" % self.name)
            lock, self.lock = self.lock, None
            lock.release()
            say(self.name, "released")
        elif cmd == "contenders":
            ids = self.new_lock(w[2], w[3]).contenders()
            say(self.name, "contenders", *[word(i) for i in ids])
        else:
            raise ValueError("unknown command " + cmd)


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: peer.py SERVERS SESSION_TIMEOUT_MS\n")
        return 2
    client = KazooClient(hosts=sys.argv[1], timeout=int(sys.argv[2]) / 1000.0)
    client.add_listener(lambda state: say("*", "state", state))
    try:
        client.start(timeout=30)
    except Exception as e:
        say("*", "fatal", "cannot connect to", sys.argv[1], word(str(e)))
        return 1
    identifier = "kazoo-peer-%d" % os.getpid()
    say("*", "ready", "%x" % client.client_id[0], identifier)
    slots = {}
    for line in sys.stdin:
        w = line.split()
        if len(w) < 2:
            if w:
                say("*", "error", "bad command: " + line.strip())
            continue
        if w[0] == "*":
            if w[1] == "quit":
                break
            if w[1] == "info":
                sid, password = client.client_id
                say("*", "info", "%x" % sid, password.hex())
            else:
                say("*", "error", "unknown command: " + line.strip())
            continue
        if w[0] not in slots:
            slots[w[0]] = Slot(w[0], client, identifier)
        slots[w[0]].post(w)
    try:
        client.stop()
        client.close()
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    # Lock threads may still block in acquire: leave without waiting for them.
    rc = main()
    sys.stdout.flush()
    os._exit(rc)

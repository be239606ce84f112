#!/usr/bin/python3
"""The Debian packages, built, checked, installed on this machine, used, and purged.

    tests/with-zk /usr/bin/python3 tests/deb/test_packages.py SRCROOT VERSION OUTDIR

1. scripts/build-deb OUTDIR builds libzklocks0, libzklocks-dev and zklock at VERSION;
   the symbols the library exports are the ones debian/libzklocks0.symbols lists.
2. lintian on the .changes file says nothing at its default level and exits 0.
3. `apt-get install ./libzklocks0_*.deb ./libzklocks-dev_*.deb ./zklock_*.deb`; the
   files are where Debian puts them, /usr/bin/zklock has no run path, and pkg-config
   finds zklocks at VERSION with no PKG_CONFIG_PATH.
4. examples/consumer builds with make through pkg-config, shared and static, and the
   shared one loads the installed libzklocks.so.0; it takes a lock on the test server.
5. /usr/bin/zklock runs a job holding a lock on the test server (ZKL_TEST_SERVERS, set
   by tests/with-zk): the job sees its fencing token, and `zklock status` shows it.
6. `apt-get purge` of the three packages, whatever happened before; afterwards none of
   them is installed. At a timeout meson sends SIGTERM and, half a second later,
   SIGKILL to the test's process group: apt-get runs in a session of its own, so an
   install under way completes, and the purge that SIGTERM starts at once runs after it
   to its end.

Needs root (it installs into the system): otherwise it skips (exit 77), and under
CI=true that is a failure, as is a missing server or tool. Packages of the same names
installed before the test are replaced and purged. Prints the seconds each step took.
Only the standard library is used.
"""

import glob
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

# fail() records a failure, finish() exits with them, skip() exits 77 (1 under CI=true):
# the docs suite's, the same for both suites.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs"))
from check import fail, finish, skip  # noqa: E402 (found through the path above)

PACKAGES = ["libzklocks0", "libzklocks-dev", "zklock"]


def run(cmd, cwd=None, env=None, check=True, timeout=600):
    """Runs cmd; returns (status, stdout, stderr). On failure with check, records it."""
    p = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        fail("%s exited %d:\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p.returncode, p.stdout, p.stderr


def cpu_seconds():
    """User and system time of this process and the children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class Steps:
    """Times each step (wall clock, and CPU time, which a busy machine does not inflate)
    and prints it."""

    def __init__(self):
        self.t0 = self.last = time.monotonic()
        self.cpu0 = self.cpu = cpu_seconds()

    def done(self, what):
        now, cpu = time.monotonic(), cpu_seconds()
        print("%s: %.1f s (CPU %.1f s)" % (what, now - self.last, cpu - self.cpu),
              flush=True)
        self.last, self.cpu = now, cpu

    def total(self):
        print("deb suite: %.1f s in all (CPU %.1f s)" %
              (time.monotonic() - self.t0, cpu_seconds() - self.cpu0), flush=True)


def installed(pkg):
    """True when dpkg knows pkg in any state but 'not installed' (config files count)."""
    status, out, _ = run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", pkg], check=False)
    return status == 0 and out[:2] not in ("", "un", "pn")


def apt_get(*args):
    """Starts apt-get; returns its Popen. In a session of its own, never killed by this
    test, and writing to a file: a signal meant for the test (meson's at a timeout) must
    not stop dpkg in the middle of a change, which would leave the packages half
    installed and every later apt-get refusing to run until `dpkg --configure -a`.
    (subprocess.run would kill it when the signal's exception passes through, and a pipe
    whose reader is gone would kill it with SIGPIPE.)"""
    log = tempfile.TemporaryFile(mode="w+", prefix="zkl-deb-apt.")
    p = subprocess.Popen(["apt-get", "-o", "DPkg::Lock::Timeout=300", "-y", "-q"] +
                         list(args),
                         env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
    p.log = log
    return p


def apt_wait(p):
    """Waits for an apt_get(); returns (status, output)."""
    p.wait()
    p.log.seek(0)
    out = p.log.read()
    p.log.close()
    return p.returncode, out


def symbol_names(text):
    """The 'name@VERSION' entries of a symbols file."""
    return {line.split()[0] for line in text.splitlines() if line.startswith(" ")}


def build(srcroot, version, outdir):
    """Builds the packages; returns {package: .deb path} or None."""
    status, out, err = run([os.path.join(srcroot, "scripts", "build-deb"), outdir],
                           check=False, timeout=1500)
    print(err.rstrip())
    if status != 0:
        fail("scripts/build-deb exited %d" % status)
        return None
    if out.strip().splitlines()[-1:] != [outdir]:
        fail("scripts/build-deb printed %r, not the folder %s" % (out.strip(), outdir))
    arch = run(["dpkg-architecture", "-qDEB_HOST_ARCH"])[1].strip()
    debs = {}
    for pkg in PACKAGES:
        path = os.path.join(outdir, "%s_%s_%s.deb" % (pkg, version, arch))
        if not os.path.isfile(path):
            fail("%s is not built (have: %s)" % (path, sorted(os.listdir(outdir))))
        else:
            debs[pkg] = path
    if len(debs) != len(PACKAGES):
        return None

    # The symbols dpkg-gensymbols found in the library against the ones the file lists.
    ctl = tempfile.mkdtemp(prefix="zkl-deb-control.")
    try:
        run(["dpkg-deb", "-e", debs["libzklocks0"], ctl])
        with open(os.path.join(ctl, "symbols"), encoding="utf-8") as f:
            found = symbol_names(f.read())
    finally:
        shutil.rmtree(ctl, ignore_errors=True)
    with open(os.path.join(srcroot, "debian", "libzklocks0.symbols"),
              encoding="utf-8") as f:
        listed = symbol_names(f.read())
    if found != listed:
        fail("the library exports %s but debian/libzklocks0.symbols does not list them, "
             "and lists %s that it does not export: run scripts/build-deb "
             "--update-symbols" % (sorted(found - listed) or "nothing more",
                                    sorted(listed - found) or "nothing"))
    return debs


def lintian(outdir, version):
    changes = glob.glob(os.path.join(outdir, "zklocks_%s_*.changes" % version))
    if len(changes) != 1:
        fail("expected one .changes file in %s, found %s" % (outdir, changes))
        return
    status, out, err = run(["lintian", "--fail-on", "error,warning", changes[0]],
                           check=False)
    # lintian says this on stderr whenever it runs as root; it is not about the packages.
    err = "\n".join(line for line in err.splitlines()
                    if "running with root privileges is not recommended" not in line)
    print("lintian %s: exit %d, %d line(s) of tags" % (os.path.basename(changes[0]),
                                                      status, len(out.splitlines())))
    if status != 0 or out.strip() or err.strip():
        fail("lintian is not clean (exit %d):\n%s%s" % (status, out, err))


def check_installed(version):
    multiarch = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"])[1].strip()
    libdir = "/usr/lib/" + multiarch
    want = {
        "libzklocks0": [libdir + "/libzklocks.so.0", libdir + "/libzklocks.so." + version],
        "libzklocks-dev": ["/usr/include/zklocks/zklocks.h", "/usr/include/zklocks/version.h",
                           "/usr/include/zklocks/zklocks.hpp",
                           "/usr/include/zklocks/adapters/libuv.h", libdir + "/libzklocks.so",
                           libdir + "/libzklocks.a", libdir + "/pkgconfig/zklocks.pc",
                           "/usr/share/man/man3/zkl_mutex.3.gz",
                           "/usr/share/man/man3/zkl_lock_acquire.3.gz",
                           "/usr/share/man/man7/zklocks.7.gz"],
        "zklock": ["/usr/bin/zklock", "/usr/share/man/man1/zklock.1.gz"],
    }
    for pkg, paths in want.items():
        listed = set(run(["dpkg", "-L", pkg])[1].splitlines())
        for path in paths:
            if path not in listed or not os.path.exists(path):
                fail("%s does not install %s" % (pkg, path))
    _, dyn, _ = run(["readelf", "-d", "/usr/bin/zklock"])
    if re.search(r"\((RPATH|RUNPATH)\)", dyn):
        fail("/usr/bin/zklock has a run path:\n" + dyn)
    _, out, _ = run(["/usr/bin/zklock", "--version"])
    if version not in out:
        fail("/usr/bin/zklock --version says %r, not %s" % (out.strip(), version))
    _, out, _ = run(["pkg-config", "--modversion", "zklocks"], env=plain_env())
    if out.strip() != version:
        fail("pkg-config --modversion zklocks says %r, not %s" % (out.strip(), version))
    return libdir


def plain_env():
    """The environment without what would point a build or the loader elsewhere."""
    env = dict(os.environ)
    for var in ("PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "CPATH", "LIBRARY_PATH",
                "C_INCLUDE_PATH"):
        env.pop(var, None)
    return env


def consumer(srcroot, version, servers, libdir, root):
    tmp = tempfile.mkdtemp(prefix="zkl-deb-consumer.")
    try:
        src = os.path.join(tmp, "consumer")
        shutil.copytree(os.path.join(srcroot, "examples", "consumer"), src)
        env = plain_env()
        status, _, _ = run(["make", "-C", src, "consumer", "consumer-static"], env=env)
        if status != 0:
            return
        for exe in ("consumer", "consumer-static"):
            status, out, _ = run([os.path.join(src, exe)], env=env)
            line = "zklocks headers %s, library %s" % (version, version)
            if status == 0 and line not in out:
                fail("%s printed %r, expected %r" % (exe, out.strip(), line))
        _, out, _ = run(["ldd", os.path.join(src, "consumer")], env=env)
        m = re.search(r"libzklocks\.so\.0 => (\S+)", out)
        want = os.path.realpath(os.path.join(libdir, "libzklocks.so.0"))
        if not m or os.path.realpath(m.group(1)) != want:
            fail("consumer does not load %s:\n%s" % (want, out))
        path = root + "/consumer"
        status, out, _ = run([os.path.join(src, "consumer"), servers, path], env=env,
                             timeout=60)
        if status == 0 and not re.search(r"holding %s, fencing token \d+" % re.escape(path),
                                         out):
            fail("consumer %s %s printed %r" % (servers, path, out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def zklock(servers, root):
    """A job under /usr/bin/zklock sees its token, and `zklock status` run from inside it
    shows one holder with that token."""
    path = root + "/job"
    job = 'echo "token=$ZKLOCK_TOKEN"; exec /usr/bin/zklock status --json -s "$1" "$2"'
    status, out, _ = run(["/usr/bin/zklock", "-s", servers, path, "--", "sh", "-c", job,
                          "job", servers, path], env=plain_env(), timeout=60)
    if status != 0:
        return
    m = re.search(r"^token=(\d+)$", out, flags=re.M)
    js = [line for line in out.splitlines() if line.startswith("{")]
    try:
        info = json.loads(js[0])
    except (IndexError, ValueError):
        info = None
    if not m or not info:
        fail("the job of /usr/bin/zklock printed %r, not its token and the status" % out)
    elif info["holders"] != 1 or [n["token"] for n in info["nodes"]] != [int(m.group(1))]:
        fail("while the job held %s (token %s), zklock status said %s" %
             (path, m.group(1), js[0]))


# Once the install has started: the apt-get purge that a signal started, if any.
STATE = {"installing": False, "purge": None}


def purge():
    if STATE["purge"] is None:
        present = [p for p in PACKAGES if installed(p)]
        if present:
            STATE["purge"] = apt_get("purge", *present)
    if STATE["purge"] is not None:
        status, out = apt_wait(STATE["purge"])
        if status != 0:
            fail("apt-get purge exited %d:\n%s" % (status, out))
    left = [p for p in PACKAGES if installed(p)]
    if left:
        fail("still installed after the purge: " + " ".join(left))
    if os.path.exists("/usr/bin/zklock"):
        fail("/usr/bin/zklock is still there after the purge")


def on_signal(signum, _frame):
    # meson sends SIGKILL half a second after SIGTERM: start the purge at once, in its own
    # session, so that it runs to its end after this test is gone. It waits for the
    # install, if one is under way, through apt's lock.
    if STATE["installing"] and STATE["purge"] is None:
        STATE["purge"] = apt_get("purge", *PACKAGES)
    raise SystemExit("stopped by signal %d" % signum)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    srcroot, version, outdir = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    if os.geteuid() != 0:
        skip("installing packages needs root")
    servers = os.environ.get("ZKL_TEST_SERVERS", "")
    if not servers:
        skip("ZKL_TEST_SERVERS is not set (run through tests/with-zk)")
    for tool in ("apt-get", "dpkg-query", "dpkg-buildpackage", "dpkg-architecture",
                 "lintian", "dcmd", "pkg-config", "make", "readelf", "ldd"):
        if not shutil.which(tool):
            skip("%s not found (scripts/deps installs it)" % tool)

    steps = Steps()
    debs = build(srcroot, version, outdir)
    steps.done("build (scripts/build-deb)")
    if debs is None:
        sys.exit(1)
    lintian(outdir, version)
    steps.done("lintian")

    before = [p for p in PACKAGES if installed(p)]
    if before:
        print("note: %s installed before this test: replaced, then purged" %
              " ".join(before))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    root = "/zkl-deb-test-" + uuid.uuid4().hex[:12]
    try:
        # (apt-get takes a path that starts with / or ./ as a package file.)
        STATE["installing"] = True
        status, out = apt_wait(apt_get("install", "--no-install-recommends",
                                       *[debs[p] for p in PACKAGES]))
        steps.done("apt-get install")
        if status != 0:
            fail("apt-get install exited %d:\n%s" % (status, out))
        else:
            libdir = check_installed(version)
            consumer(srcroot, version, servers, libdir, root)
            steps.done("consumer built with pkg-config and run")
            zklock(servers, root)
            steps.done("/usr/bin/zklock against the server")
    finally:
        purge()
        steps.done("apt-get purge")
        steps.total()
    finish()


if __name__ == "__main__":
    main()

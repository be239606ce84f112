#!/usr/bin/python3
"""GUIDE.md's fencing examples ("Handing the token on from zklock"), run as written there,
against a real ZooKeeper server.

    tests/with-zk /usr/bin/python3 tests/zklock/test_fencing.py build/tools/zklock [CASE...]

The SQL statements, the Python job, the fenced-write script and the zklock command
lines are taken from docs/GUIDE.md; only the names of the example (/srv/..., /locks/...,
make-report, make-feed) are replaced by the test's own. Two runs of zklock write in
turn, then a writer left over from the first, with the first run's token, writes after
the second: refused, and the second run's data stands. The helpers, the environment
and the runner are test_zklock.py's.
"""

import os
import re
import shlex
import sqlite3
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_zklock as z  # noqa: E402  (parses argv: ZKLOCK [CASE...])

z.CASES.clear()
check, case = z.check, z.case

GUIDE = z.GUIDE


def guide_section():
    """The text of GUIDE.md's "Handing the token on from zklock", and the SQL block of
    "Fencing tokens" before it."""
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## Fencing tokens\n(.*?)^### Handing the token on from zklock\n(.*?)^##",
                  text, flags=re.M | re.S)
    check(m is not None, "GUIDE.md has no section \"Handing the token on from zklock\" "
          "after \"Fencing tokens\"")
    return m.group(1), m.group(2)


def blocks(text, lang):
    """The code blocks of text whose opening fence names lang ("" for none)."""
    found, current = [], None
    for line in text.splitlines(keepends=True):
        if current is None and line.startswith("```"):
            current = [line[3:].strip()]
        elif current is not None and line.rstrip() == "```":
            if current[0] == lang:
                found.append("".join(current[1:]))
            current = None
        elif current is not None:
            current.append(line)
    return found


def one(found, what):
    check(len(found) == 1, "GUIDE.md: %d %s, expected one" % (len(found), what))
    return found[0]


def script(name, text):
    """Writes an executable script into the test's bin folder; returns its path."""
    path = os.path.join(BIN, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


BIN = os.path.join(z.TMP, "bin")
os.makedirs(BIN)
# zklock itself, under ZKLOCK_TEST_PREFIX, as the command lines of the GUIDE call it.
script("zklock", "#!/bin/sh\nexec %s \"$@\"\n" % " ".join(shlex.quote(a)
                                                        for a in z.zklock_cmd([])))
ENV = dict(z.ENV)
ENV["PATH"] = BIN + os.pathsep + ENV.get("PATH", "/usr/bin:/bin")


def shell(line, env=None, timeout=30):
    """Runs a command line with sh; returns (status, stdout, stderr)."""
    try:
        r = subprocess.run(["sh", "-c", line], capture_output=True, text=True,
                           env=env or ENV, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise z.Failure("%r did not finish in %s s" % (line, timeout))
    return r.returncode, r.stdout, r.stderr


def command_line(section, start):
    """The zklock command line of a plain block of the section that starts with start."""
    return one([b.strip() for b in blocks(section, "") if b.startswith(start)],
               "command lines starting %r" % start)


def verbose(line):
    """The command line with zklock -v, which says the token it got."""
    check(line.startswith("zklock "), "not a zklock line: %r" % line)
    return "zklock -v " + line[len("zklock "):]


def token_of_run(line):
    """Runs a zklock -v command line to success; returns the fencing token it held."""
    rc, out, err = shell(line)
    check(rc == 0, "%r exited %d; stderr %r" % (line, rc, err))
    m = re.search(r"^zklock: acquired \S+ \(fencing token (\d+)\)", err, flags=re.M)
    check(m is not None, "%r: no token on stderr %r" % (line, err))
    return int(m.group(1))


# ---- a row of a SQL database ----

def squashed(sql):
    return re.sub(r"\s+", " ", sql).strip()


@case
def sql_row_refuses_stale_token():
    """The report job of the GUIDE, under two runs of the GUIDE's zklock line, then once
    more with the first run's token: refused, and the row keeps the second run's body
    and token. The same holder may write twice."""
    before, section = guide_section()
    sql = one([b for b in blocks(before, "sql") if "ALTER TABLE" in b], "SQL blocks")
    job = one(blocks(section, "python"), "Python blocks")
    line = command_line(section, "zklock /locks/report-42 ")
    # The job's UPDATE is the SQL block's.
    update = re.search(r"^(UPDATE .*?);", sql, flags=re.M | re.S)
    check(update is not None, "the SQL block has no UPDATE")
    in_job = "".join(re.findall(r'"([^"]*)"', re.search(r"execute\((.*?),\s*\{", job,
                                                        flags=re.S).group(1)))
    check(squashed(in_job) == squashed(update.group(1)),
          "the job's statement %r is not the SQL block's %r" % (in_job, update.group(1)))

    db = os.path.join(z.TMP, "reports.db")
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE reports (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO reports (id, body) VALUES (42, 'none yet')")
        alter = re.search(r"^(ALTER TABLE .*?);", sql, flags=re.M | re.S)
        check(alter is not None, "the SQL block has no ALTER TABLE")
        conn.execute(alter.group(1))
    conn.close()
    # The job under the GUIDE's name, with the interpreter that runs this test.
    script("report-job", "#!%s\n%s" % (sys.executable, job.split("\n", 1)[1]))

    def row():
        with sqlite3.connect(db) as c:
            r = c.execute("SELECT body, fence FROM reports WHERE id = 42").fetchone()
        c.close()
        return r

    path = z.lock_path("report-42")
    tokens = []
    for run in ("first", "second"):
        script("make-report", '#!/bin/sh\necho "%s run"\n' % run)
        mine = verbose(line.replace("/locks/report-42", path).replace("/srv/reports.db", db))
        tokens.append(token_of_run(mine))
        check(row() == ("%s run" % run, tokens[-1]),
              "after the %s run the row is %r, its token %d" % (run, row(), tokens[-1]))
    check(tokens[1] > tokens[0] > 0, "tokens %r" % tokens)
    # The same holder writes twice: an equal token passes.
    tokens.append(token_of_run("zklock -v %s -- sh -c 'report-job %s 42 once && "
                               "report-job %s 42 twice'" % (path, db, db)))
    check(row() == ("twice", tokens[2]), "a holder's second write: the row is %r" % (row(),))

    # A writer left over from the first run, with its token: refused.
    for stale in tokens[:2]:
        env = dict(ENV, ZKLOCK_TOKEN=str(stale))
        rc, out, err = shell("report-job %s 42 'stale write'" % shlex.quote(db), env=env)
        check(rc == 1 and "newer writer than token %d" % stale in err,
              "stale writer: exit %d, stderr %r" % (rc, err))
        check(row() == ("twice", tokens[2]), "after a stale write the row is %r" % (row(),))


# ---- a file replaced by rename ----

@case
def file_rename_refuses_stale_token():
    """fenced-write of the GUIDE, under two runs of the GUIDE's zklock line, then once
    more with the first run's token: refused (exit 1), the file and its fence keep the
    second run's, and no temporary file is left."""
    _, section = guide_section()
    sh = one([b for b in blocks(section, "sh") if "fenced-write TOKEN FILE" in b],
             "fenced-write scripts")
    line = command_line(section, "zklock /locks/feed ")
    script("fenced-write", sh)
    folder = os.path.join(z.TMP, "www")
    os.mkdir(folder)
    feed = os.path.join(folder, "feed.xml")
    path = z.lock_path("feed")
    tokens = []
    for run in ("first", "second"):
        script("make-feed", '#!/bin/sh\necho "<feed>%s</feed>"\n' % run)
        mine = verbose(line.replace("/locks/feed", path).replace("/srv/www/feed.xml", feed))
        tokens.append(token_of_run(mine))
        with open(feed) as f, open(feed + ".fence") as g:
            got = (f.read(), int(g.read()))
        check(got == ("<feed>%s</feed>\n" % run, tokens[-1]),
              "after the %s run: %r, token %d" % (run, got, tokens[-1]))
        check(os.stat(feed).st_mode & 0o044 == 0o044, "the file is not readable by all: %o"
              % os.stat(feed).st_mode)
    check(tokens[1] > tokens[0] > 0, "tokens %r" % tokens)

    # A writer left over from the first run, with its token: refused.
    rc, out, err = shell("echo '<feed>stale</feed>' | fenced-write %d %s" %
                         (tokens[0], shlex.quote(feed)))
    check(rc == 1 and "refusing %d" % tokens[0] in err,
          "stale writer: exit %d, stderr %r" % (rc, err))
    with open(feed) as f, open(feed + ".fence") as g:
        got = (f.read(), int(g.read()))
    check(got == ("<feed>second</feed>\n", tokens[1]), "after the stale write: %r" % (got,))
    # Not a token at all: refused before anything is written.
    rc, _, err = shell("echo x | fenced-write 12x %s" % shlex.quote(feed))
    check(rc == 2 and "bad token" in err, "bad token: exit %d, stderr %r" % (rc, err))
    left = sorted(set(os.listdir(folder)) - {"feed.xml", "feed.xml.fence", "feed.xml.lock"})
    check(left == [], "files left in the folder: %r" % left)


if __name__ == "__main__":
    try:
        sys.exit(z.main())
    finally:
        subprocess.run(["rm", "-rf", "--", z.TMP])

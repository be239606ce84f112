#!/usr/bin/python3
"""The docs tell one story: checks of the 'docs' suite that compare what the documents
say with each other, with the headers and with the tool.

    story.py SRCROOT ZKLOCK

    callbacks    no document says that leadership callbacks run anywhere but on the
                 client's loop
    loss-rule    every sentence that states when a session is given up for lost says
                 90% (loss_percent) of the session timeout, counted from when the last
                 answered request was sent; in zklock(1) and --help (zklock always holds
                 or waits) a write that ZooKeeper committed, not any answer
    exit-status  the exit statuses of GUIDE.md's table, zklock(1) and the README are
                 those of `zklock --help`
    exit-claims  a sentence of zklock(1), the README, GUIDE.md or --help that gives the
                 exit status of a --semaphore count that differs gives --help's (65)
    options      the long options of zklock (tools/zklock/options.c) are each listed once
                 in --help and are entries of zklock(1); the README's option table names
                 none that zklock lacks; --json names the same commands in --help and
                 zklock(1)
    commands     the forms of --help's usage are the lines of zklock(1)'s SYNOPSIS as
                 rendered, and each subcommand is in the README's usage block
    rendered     zklock(1) rendered (groff -man -Tutf8): each SYNOPSIS form on a line of
                 its own, each command of COMMANDS an entry of its own
    views        the views (zkl_lock *zkl_*_lock()) in zkl_lock(3)'s synopsis and
                 description, and in lock.h's opening comment, are those of the headers
    render       every man page renders with `groff -man -Tutf8 -ww` without a warning,
                 and no font macro runs two words together (.BR a b gives "ab")
    footer       every page's footer carries the version (@VERSION@, configured)
    self-test    each check above fails on a copy of the docs in which one contradiction
                 is planted (PLANTS)

Exit status 0 passes, 1 fails, 77 skips (no groff), as check.py.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402  (the helpers: fail, skip, finish, FAILURES)
from check import fail, unroff, sections, code_blocks  # noqa: E402


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def man_pages(root):
    return sorted(glob.glob(os.path.join(root, "docs", "man", "*.[1-8]")) +
                  glob.glob(os.path.join(root, "docs", "*.[1-8]")))


def sentences(text):
    """Sentences of running text, one line each (good enough for prose)."""
    text = re.sub(r"\s+", " ", text)
    return [s.strip() for s in re.split(r"(?<=[.;:!?])\s+(?=[A-Z(`*])", text) if s.strip()]


def prose(root, zklock):
    """{name: text} of every document that speaks to users, as plain text."""
    docs = {}
    for md in ("README.md", "docs/GUIDE.md", "docs/INTEROP.md"):
        path = os.path.join(root, md)
        if os.path.isfile(path):
            docs[md] = re.sub(r"```.*?```", " ", read(path), flags=re.S)
    for page in man_pages(root):
        docs[os.path.relpath(page, root)] = unroff(read(page))
    for h in sorted(glob.glob(os.path.join(root, "include", "zklocks", "**", "*.h*"),
                              recursive=True)):
        comments = re.findall(r"/\*(.*?)\*/", read(h), flags=re.S)
        docs[os.path.relpath(h, root)] = "\n".join(
            re.sub(r"^\s*\*", "", c, flags=re.M) for c in comments)
    docs["zklock --help"] = help_text(zklock)
    return docs


def help_text(zklock):
    p = subprocess.run([zklock, "--help"], stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        fail("zklock --help exited %d" % p.returncode)
    return p.stdout


# ---- callbacks ----

def check_callbacks(root, zklock):
    for name, text in prose(root, zklock).items():
        for s in sentences(text):
            low = s.lower()
            if "leadership" in low and "callback" in low and re.search(
                    r"(?<!loop's) own thread|latch's (own )?thread|thread of the latch", low):
                fail("%s says leadership callbacks run on a thread of their own, not on the "
                     "client's loop: %r" % (name, s))


# ---- the loss rule ----

# A sentence that states when a session (or a lock) is given up for lost.
LOSS_STATEMENT = re.compile(
    r"(heard|answered|confirmed|committed) (nothing|no write)[^.]*session timeout|"
    r"(nothing|no write)[^.]*(heard|answered|confirmed|committed)[^.]*session timeout|"
    r"silence[^.]*session timeout[^.]*lost", re.I)


def check_loss_rule(root, zklock):
    stated = 0
    for name, text in prose(root, zklock).items():
        for s in sentences(text):
            if not LOSS_STATEMENT.search(s):
                continue
            stated += 1
            share = re.search(r"(\b90 ?%|loss_percent ?%?|loss-percent|\bN ?%) of (the|a|its)"
                              r"( negotiated)? session timeout", s)
            since = re.search(r"\bsen[dt]|\bsending\b", s)
            if name in ("docs/zklock.1", "zklock --help") and not re.search(
                    r"commit|confirm", s):
                fail("%s states the loss rule as any answer, though for a holder or a "
                     "waiter only a committed write counts: %r" % (name, s))
            if not share or not since:
                fail("%s states the loss rule without %s: %r" %
                     (name, " and ".join(w for w, ok in (
                         ("90% (loss_percent) of the session timeout", share),
                         ("counting from when the last answered request was sent", since))
                         if not ok), s))
    if stated < 5:
        fail("the loss rule is stated in only %d sentences: has the check lost track?" %
             stated)


# ---- exit statuses ----

def codes_in(text):
    """The exit statuses named in text: numbers and 128+N."""
    text = re.sub(r"-E N|\(0\.\.255", " ", text)
    return set(re.findall(r"\b128\+N\b|\b\d{1,3}\b", text))


def check_exit_status(root, zklock):
    help_ = help_text(zklock)
    m = re.search(r"^Exit status:\n(.*?)(?:\n\n|\Z)", help_, flags=re.M | re.S)
    if not m:
        fail("zklock --help has no \"Exit status:\" list")
        return
    want = set()
    for line in m.group(1).splitlines():
        want |= codes_in(re.split(r"\s{2,}", line.strip())[0])
    want.discard("128")  # "128+N if it was killed by signal N"
    want |= {"128+N"}

    guide = read(os.path.join(root, "docs", "GUIDE.md"))
    table = re.search(r"^\| exit status \| meaning \|\n\|---\|---\|\n((?:\|.*\n)+)", guide,
                      flags=re.M)
    if not table:
        fail("GUIDE.md has no exit status table")
    else:
        got = set()
        for row in table.group(1).splitlines():
            got |= codes_in(row.split("|")[1])
        compare("GUIDE.md's exit status table", got, want)

    page = read(os.path.join(root, "docs", "zklock.1"))
    body = sections(page).get("EXIT STATUS", "")
    got = set()
    for entry in re.findall(r"^\.TP\n(.*)$", body, flags=re.M):
        got |= codes_in(unroff(entry))
    compare("zklock(1)'s EXIT STATUS", got, want)

    readme = read(os.path.join(root, "README.md"))
    para = re.search(r"^Exit status: (.*?)\n\n", readme, flags=re.M | re.S)
    if not para:
        fail("README.md has no \"Exit status:\" paragraph")
    else:
        compare("README.md's exit statuses", codes_in(para.group(1)), want)


def compare(what, got, want):
    extra = sorted(got - want - {"130", "143"})
    missing = sorted(want - got)
    if missing:
        fail("%s lacks %s (zklock --help lists %s)" % (what, ", ".join(missing),
                                                       ", ".join(sorted(want))))
    if extra:
        fail("%s names %s, which zklock --help does not" % (what, ", ".join(extra)))


# ---- what zklock(1), the README, GUIDE.md and --help say of particular exits ----

COUNT_DIFFERS = re.compile(r"another count|count (that )?differs|differs from the count|"
                           r"count recorded|counts? (mismatch|disagree)", re.I)
EXIT_GIVEN = re.compile(r"\bexit(?:s|ed| status| with)?\s+(?:with\s+)?(\d{1,3})\b", re.I)


def check_exit_claims(root, zklock):
    help_ = help_text(zklock)
    m = re.search(r"^\s+(\d+)\s+--semaphore N differs", help_, flags=re.M)
    if not m:
        fail("zklock --help's exit status list has no line for a --semaphore count that "
             "differs")
        return
    want = m.group(1)
    docs = {name: text for name, text in prose(root, zklock).items()
            if name in ("README.md", "docs/GUIDE.md", "docs/zklock.1", "zklock --help")}
    for name, text in docs.items():
        flat = re.sub(r"\s+", " ", text)
        for m in COUNT_DIFFERS.finditer(flat):
            # The clause around the words: a list, a table or the next sentence may
            # give other exits.
            start = max(flat.rfind(c, 0, m.start()) for c in ";|.")
            ends = [i for i in (flat.find(c, m.end()) for c in (";", "|", ". ")) if i >= 0]
            clause = flat[start + 1:min(ends) if ends else len(flat)]
            for code in EXIT_GIVEN.findall(clause):
                if code != want:
                    fail("%s gives exit %s for a --semaphore count that differs; --help "
                         "says %s: %r" % (name, code, want, clause.strip()))


# ---- zklock's options and commands ----

def long_options(root):
    src = read(os.path.join(root, "tools", "zklock", "options.c"))
    table = re.search(r"long_opts\[\] = \{(.*?)\n\};", src, flags=re.S)
    return set(re.findall(r'\{ "([a-z][a-z-]*)",', table.group(1) if table else ""))


def help_options(help_):
    """{option: times listed} of --help's option entries (lines that start with "-")."""
    seen = {}
    for line in help_.splitlines():
        m = re.match(r"^\s{2,8}(-[^ ].*?)(?:\s{2,}|$)", line)
        if m:
            for opt in re.findall(r"--[a-z][a-z-]*", m.group(1)):
                seen[opt[2:]] = seen.get(opt[2:], 0) + 1
    return seen


def man_entries(page):
    """The options named in the tags of zklock(1)'s .TP entries."""
    tags = re.findall(r"^\.TP\n(.*)$", page, flags=re.M)
    return set(o[2:] for t in tags for o in re.findall(r"--[a-z][a-z-]*", unroff(t)))


def json_commands(text):
    m = re.search(r"--json\s+((?:\w+[,:]?\s+)+?)print JSON", text)
    return set(re.findall(r"\w+", m.group(1))) if m else None


def check_options(root, zklock):
    opts = long_options(root)
    if len(opts) < 20:
        fail("found only %d long options in tools/zklock/options.c: has the check lost "
             "track?" % len(opts))
        return
    help_ = help_text(zklock)
    listed = help_options(help_)
    # An option of one command's form only (prune --dry-run) is documented there.
    in_usage = set(o[2:] for f in usage_forms(help_) for o in re.findall(r"--[a-z-]+", f))
    for o in sorted(opts):
        if o in in_usage and listed.get(o, 0) == 0:
            continue
        if listed.get(o, 0) != 1:
            fail("zklock --help lists --%s %d times (once, please)" % (o, listed.get(o, 0)))
    for o in sorted(set(listed) - opts):
        fail("zklock --help lists --%s, which zklock does not take" % o)
    page = read(os.path.join(root, "docs", "zklock.1"))
    synopsis = unroff(sections(page).get("SYNOPSIS", ""))
    for o in sorted(opts - man_entries(page) - set(re.findall(r"--([a-z-]+)", synopsis))):
        fail("zklock(1) has no entry for --%s" % o)
    readme = read(os.path.join(root, "README.md"))
    for row in re.findall(r"^\| `(-.*?)\|", readme, flags=re.M):
        for o in re.findall(r"--[a-z][a-z-]*", row):
            if o[2:] not in opts:
                fail("README.md's option table names %s, which zklock does not take" % o)
    in_help = json_commands(help_)
    in_man = json_commands(unroff(page).replace("\n", " "))
    if in_help is None or in_man is None:
        fail("--json's entry not found in %s" % ("--help" if in_help is None else "zklock(1)"))
    elif in_help != in_man:
        fail("--json is for %s in --help, for %s in zklock(1)" %
             (", ".join(sorted(in_help)), ", ".join(sorted(in_man))))


def render_zklock(root):
    """zklock(1) as groff renders it (plain text, wide lines), or None without groff."""
    groff = shutil.which("groff")
    if not groff:
        check.skip("groff not found (scripts/deps installs it)")
    src = read(os.path.join(root, "docs", "zklock.1")).replace("@VERSION@", "0.0.0")
    p = subprocess.run([groff, "-man", "-Tutf8", "-rLL=150n", "-P-cbou"], input=src,
                       env=dict(os.environ, LC_ALL="C.UTF-8"), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        fail("groff -man -Tutf8 docs/zklock.1 exited %d: %s" % (p.returncode, p.stderr))
    return p.stdout.replace("\u2010", "-").replace("\u2212", "-")


def rendered_sections(text):
    out, name = {}, None
    for line in text.splitlines():
        if re.match(r"^[A-Z][A-Z ]+$", line):
            name = line.strip()
            out[name] = []
        elif name:
            out[name].append(line)
    return out


def usage_forms(help_):
    m = re.search(r"^Usage: (.*?)\n\n", help_, flags=re.M | re.S)
    return [re.sub(r"\s+", " ", l.strip()) for l in m.group(1).splitlines()] if m else []


def subcommand(form):
    m = re.match(r"zklock ([a-z]+) ", form)
    return m.group(1) if m else None


def check_commands(root, zklock):
    forms = usage_forms(help_text(zklock))
    if len(forms) < 5:
        fail("zklock --help's usage has %d forms: has the check lost track?" % len(forms))
        return
    text = render_zklock(root)
    lines = [l.strip() for l in rendered_sections(text).get("SYNOPSIS", []) if l.strip()]
    norm = [re.sub(r"\s+", " ", l) for l in lines]
    want = [re.sub(r"\b(PATH|PREFIX|NODE|COMMAND|STRING|ARG|N)\b", lambda m: m.group(1).lower(),
                   f).replace("[ARG...]", "[argument...]") for f in forms]
    cmds_help = [subcommand(f) for f in forms if subcommand(f)]
    cmds_man = [subcommand(l) for l in norm if subcommand(l)]
    if cmds_help != cmds_man:
        fail("zklock(1)'s SYNOPSIS, as rendered, has the commands %s on their own lines; "
             "--help's usage has %s" % (cmds_man, cmds_help))
    if len(norm) != len(want):
        fail("zklock(1)'s SYNOPSIS renders as %d lines, --help's usage has %d forms:\n%s" %
             (len(norm), len(want), "\n".join(lines)))
    readme = read(os.path.join(root, "README.md"))
    block = re.search(r"^## `zklock`\n\n```\n(.*?)```", readme, flags=re.M | re.S)
    if not block:
        fail("README.md has no usage block under \"## `zklock`\"")
        return
    in_readme = set(re.findall(r"\bzklock ([a-z]+) ", block.group(1)))
    for c in cmds_help:
        if c not in in_readme:
            fail("README.md's usage block leaves out `zklock %s`, which --help has" % c)


def check_rendered(root, zklock):
    text = render_zklock(root)
    secs = rendered_sections(text)
    for line in secs.get("SYNOPSIS", []):
        if len(re.findall(r"\bzklock\b", line)) > 1:
            fail("zklock(1)'s SYNOPSIS runs two forms into one line when rendered: %r" %
                 line.strip())
    body = secs.get("COMMANDS", [])
    heads = [l.strip().split()[1] for l in body
             if re.match(r"^ {7}zklock [a-z]+\b", l)]
    for c in [subcommand(f) for f in usage_forms(help_text(zklock)) if subcommand(f)]:
        if c not in heads:
            fail("zklock(1)'s COMMANDS, when rendered, has no entry of its own for "
                 "`zklock %s` (runs into the paragraph before?)" % c)
    for l in body:
        if re.search(r"\S\s+zklock (count|prune|check|forget|list|status|revoke) "
                     r"(path|prefix|node)\b", l) and not l.startswith(" " * 7 + "zklock"):
            fail("zklock(1)'s COMMANDS runs a command's heading into a paragraph: %r" %
                 l.strip())


# ---- the views ----

def check_views(root, zklock):
    inc = os.path.join(root, "include", "zklocks")
    views = set()
    for h in glob.glob(os.path.join(inc, "*.h")):
        views |= set(re.findall(r"\bZKL_API\s+zkl_lock\s*\*\s*(zkl_\w+_lock)\s*\(", read(h)))
    if not views:
        fail("no view (zkl_lock *zkl_*_lock()) found in the headers")
    page = read(os.path.join(root, "docs", "man", "zkl_lock.3"))
    sec = sections(page)
    synopsis = "\n".join(code_blocks(sec.get("SYNOPSIS", "")))
    listed = set(re.findall(r"zkl_lock \*(zkl_\w+_lock)\(", synopsis))
    described = set(re.findall(r"^\.TP\n\.BR (zkl_\w+_lock) \(\)$", sec.get("DESCRIPTION", ""),
                               flags=re.M))
    opening = re.match(r"/\*(.*?)\*/", read(os.path.join(inc, "lock.h")), flags=re.S)
    in_lock_h = set(re.findall(r"\b(zkl_\w+_lock)\(\)", opening.group(1) if opening else ""))
    for what, got in (("zkl_lock(3)'s synopsis", listed),
                      ("zkl_lock(3)'s list of views", described),
                      ("lock.h's opening comment", in_lock_h)):
        for v in sorted(views - got):
            fail("%s omits the view %s()" % (what, v))
        for v in sorted(got - views):
            fail("%s names %s(), which no header declares as a view" % (what, v))


# ---- rendering ----

ALTERNATING = {"BR", "RB", "BI", "IB", "IR", "RI"}


def macro_words(args):
    """The arguments of a font macro, quotes removed."""
    return [m.group(1) if m.group(1) is not None else m.group(2)
            for m in re.finditer(r'"([^"]*)"|(\S+)', args)]


def glued(left, right):
    """Whether an alternating macro runs left and right together into one word."""
    left, right = unroff(left), unroff(right)
    if not left or not right:
        return False
    if right[0].isalnum() and (left[-1].isalnum() or left[-1] == ")"):
        return True  # "zkl_f()with", "twowords"
    if right[0].isalnum() and left[-1] in ".,;" and re.search(r"[A-Za-z)]", left[:-1]):
        return True  # "zkl_f(),zkl_g"
    return left[-1] == ")" and right[0] == "("  # "zkl_f())(more words"


def check_render(root, zklock):
    groff = shutil.which("groff")
    if not groff:
        check.skip("groff not found (scripts/deps installs it)")
    env = dict(os.environ, LC_ALL="C.UTF-8")
    for page in man_pages(root):
        name = os.path.relpath(page, root)
        src = read(page).replace("@VERSION@", "0.0.0")
        p = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z"], input=src, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0 or p.stderr.strip():
            fail("%s: groff -man -Tutf8 -ww says:\n%s" % (name, p.stderr.rstrip()))
        for n, line in enumerate(src.split("\n"), 1):
            m = re.match(r"\.(BR|RB|BI|IB|IR|RI)\s+(.*)$", line)
            if not m:
                continue
            words = macro_words(m.group(2))
            for a, b in zip(words, words[1:]):
                if glued(a, b):
                    fail("%s:%d: .%s runs %r and %r together when rendered (quote the "
                         "words that belong together): %s" % (name, n, m.group(1), a, b,
                                                              line))


def check_footer(root, zklock):
    for page in man_pages(root):
        th = re.search(r'^\.TH\s+\S+\s+\S+\s+"[^"]*"\s+"([^"]*)"', read(page), flags=re.M)
        if not th or "@VERSION@" not in th.group(1):
            fail("%s: the footer of its .TH line (%r) does not carry @VERSION@" %
                 (os.path.relpath(page, root), th.group(1) if th else None))


# ---- the checks can fail: each plants a contradiction in a copy of the docs ----

PLANTS = [
    ("callbacks", "docs/man/zklocks.7", "never on the C client's completion thread",
     "(leadership callbacks on the latch's own thread), never on the C client's "
     "completion thread"),
    ("loss-rule", "docs/man/zklocks.7", "ZooKeeper has answered nothing that the client sent "
     "in the last 90% of the session\ntimeout", "the client has heard nothing from the "
     "server for a session timeout"),
    ("exit-status", "docs/GUIDE.md", "| 71 | the lock was revoked", "| 72 | the lock was revoked"),
    ("views", "docs/man/zkl_lock.3", "zkl_lock *zkl_selector_lock(zkl_selector *s);\n", ""),
    ("render", "docs/man/zkl_client.3", ".BR zkl_client_process ().\n",
     ".BR zkl_client_process ()) (on the loop).\n"),
    ("footer", "docs/zklock.1", '"zklocks @VERSION@"', '"zklocks"'),
    ("loss-rule", "docs/zklock.1", "ZooKeeper has confirmed (committed) no write sent",
     "ZooKeeper has answered nothing sent"),
    ("exit-claims", "docs/zklock.1", "another count exits 65", "another count exits 64"),
    ("options", "docs/zklock.1", ".BR check ,\n.BR prune :\nprint JSON.",
     ".BR prune :\nprint JSON."),
    ("options", "tools/zklock/options.c", '{ "previous", no_argument',
     '{ "previously", no_argument'),
    ("commands", "README.md", "zklock count PATH N", "zklock cnt PATH N"),
    ("rendered", "docs/zklock.1", ".I path n\n.br\n.B zklock prune", ".I path n\n.B zklock prune"),
    ("rendered", "docs/zklock.1", ".TP\n.BI \"zklock prune \" prefix", ".BI \"zklock prune \" prefix"),
]


def self_test(root, zklock):
    """Every check fails on a copy of the docs with one contradiction planted."""
    import tempfile
    tmp = tempfile.mkdtemp(prefix="zkl-story.")
    try:
        for i, (name, path, old, new) in enumerate(PLANTS):
            copy = os.path.join(tmp, "%d-%s" % (i, name))
            os.mkdir(copy)
            for part in ("README.md", "docs", "include", "tools"):
                src = os.path.join(root, part)
                (shutil.copytree if os.path.isdir(src) else shutil.copy)(
                    src, os.path.join(copy, part))
            target = os.path.join(copy, path)
            text = read(target)
            if old not in text:
                fail("self-test %s: %s no longer says %r: update PLANTS" % (name, path, old))
                continue
            with open(target, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new, 1))
            saved = list(check.FAILURES)
            del check.FAILURES[:]
            CHECKS[name](copy, zklock)
            caught = len(check.FAILURES)
            check.FAILURES[:] = saved
            if caught == 0:
                fail("self-test: the %s check passes a copy whose %s was changed from %r "
                     "to %r" % (name, path, old, new))
            else:
                print("self-test: %s caught the change planted in %s" % (name, path))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


CHECKS = {"callbacks": check_callbacks, "loss-rule": check_loss_rule,
          "exit-status": check_exit_status, "exit-claims": check_exit_claims,
          "options": check_options, "commands": check_commands, "rendered": check_rendered,
          "views": check_views, "render": check_render,
          "footer": check_footer}


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    root, zklock = sys.argv[1], sys.argv[2]
    for name, fn in list(CHECKS.items()) + [("self-test", self_test)]:
        before = len(check.FAILURES)
        fn(root, zklock)
        print("%s: %s" % (name, "ok" if len(check.FAILURES) == before else "FAILED"))
    check.finish()


if __name__ == "__main__":
    main()

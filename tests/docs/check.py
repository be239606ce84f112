#!/usr/bin/python3
"""Checks of the 'docs' suite: what users see of zklocks besides its behaviour.

    check.py CHECK ARG...

    symbols LIB INCDIR            the exports of LIB equal the ZKL_API functions of
                                  INCDIR/*.h, all under the version node ZKLOCKS_0, the
                                  soname is libzklocks.so.0, and every other function
                                  of LIB has an internal name (zkl__...)
    headers CC CXX INCDIR BUILDINC LIB
                                  <zklocks/zklocks.h> compiles alone as C11 and C++11
                                  with -pedantic -Werror (and links and runs as C++),
                                  every header compiles alone, and every header is
                                  included by zklocks.h and installed; the C++ API
                                  <zklocks/zklocks.hpp> compiles alone as C++17 and
                                  C++20 (and links and runs), and is installed
    man-coverage MANDIR INCDIR DOCS_MESON
                                  every public function, constant and struct field is
                                  in a page's synopsis or text, the error table of
                                  zklocks.7 equals enum zkl_error, every page has the
                                  usual sections and renders without warnings
    man-examples CC INCDIR BUILDINC LIB MANDIR
                                  the EXAMPLE program of every page compiles and links
    install SRCROOT VERSION       scripts/build-release -j 2 into a temporary prefix;
                                  the installed zklock runs under env -i (there and
                                  moved elsewhere) and has no run path with
                                  -Drelative_rpath=false; the PKG_CONFIG_PATH that
                                  build-release prints is the real one; then
                                  examples/consumer builds against it with make (shared
                                  and static), with CMake, and as a meson subproject; the
                                  epoll, libuv and C++ examples build against it
    docker SRCROOT                docker/compose.yaml passes `docker-compose config`,
                                  and the Dockerfile builds with scripts/build-release,
                                  as the README says, on Debian 12
    systemd UNITDIR ZKLOCK        the unit files of UNITDIR (docs/systemd) pass
                                  `systemd-analyze verify` without a word, with
                                  /usr/bin/zklock replaced by ZKLOCK (the build's), and
                                  every zklock command line in them parses (zklock
                                  accepts its options)
    changelog CHANGELOG VERSION [DEBIAN_CHANGELOG]
                                  the newest version in CHANGELOG.md is VERSION, and so
                                  is the newest entry of debian/changelog
    links FILE...                 every relative link in the Markdown FILEs resolves
    demo SRCROOT                  scripts/demo installs only what it needs
                                  (scripts/deps --demo: no package of a test suite), and
                                  makes a new build directory without the test suites;
                                  scripts/test installs everything and turns them on

Exit status 0 passes, 1 fails, 77 skips (a missing tool), except under CI=true, where a
skip is a failure. ZKL_DOCS_FLAGS adds compiler flags to the programs linked with the
library under test (meson sets it to -fsanitize=... in a sanitized build). Only the standard library is used (and PyYAML, which docker-compose
brings, for the compose file).
"""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

FAILURES = []
# Extra compiler flags for programs linked with the library under test (the sanitizer's,
# when the build uses one).
EXTRA_FLAGS = shlex.split(os.environ.get("ZKL_DOCS_FLAGS", ""))


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg)


def skip(reason):
    if os.environ.get("CI") == "true":
        print("FAIL: " + reason + " (a skip is a failure under CI=true)")
        sys.exit(1)
    print("skip: " + reason)
    sys.exit(77)


def finish():
    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        sys.exit(1)
    print("ok")
    sys.exit(0)


def run(cmd, cwd=None, env=None, check=True):
    """Runs cmd; returns (status, output). On failure with check, records the output."""
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if check and p.returncode != 0:
        fail("%s exited %d:\n%s" % (" ".join(shlex.quote(c) for c in cmd),
                                    p.returncode, p.stdout.rstrip()))
    return p.returncode, p.stdout


# ---- the public headers ----

def strip_comments(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def squash(text):
    """One line, single spaces, no space inside parentheses."""
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\(\s+", "(", text)
    return re.sub(r"\s+\)", ")", text)


def public_headers(incdir):
    return sorted(glob.glob(os.path.join(incdir, "*.h")))


def cxx_headers(incdir):
    """The C++ API's headers (zklocks.hpp): C++17, header-only, no ZKL_API of their own."""
    return sorted(glob.glob(os.path.join(incdir, "*.hpp")))


def api_functions(incdir):
    """{name: squashed declaration without ZKL_API, ending in ';'}."""
    decls = {}
    for h in public_headers(incdir):
        text = strip_comments(open(h, encoding="utf-8").read())
        text = re.sub(r"^\s*#.*$", "", text, flags=re.M)  # "#define ZKL_API ..."
        for m in re.finditer(r"\bZKL_API\s+([^;]+);", text):
            decl = squash(m.group(1)) + ";"
            name = re.search(r"(\w+)\s*\(", decl).group(1)
            decls[name] = decl
    return decls


def api_types(incdir):
    """The names of the public typedefs (zkl_mutex, zkl_selector, ...)."""
    names = set()
    for h in public_headers(incdir):
        text = strip_comments(open(h, encoding="utf-8").read())
        names |= set(re.findall(r"\btypedef\s+(?:struct|enum)\s+\w+\s+(\w+)\s*;", text))
        names |= set(re.findall(r"\}\s*(\w+)\s*;", text))
    return names


def api_constants(incdir):
    """Every ZKL_* enum constant and macro that a user may write."""
    internal = {"ZKL_API", "ZKL_BEGIN_DECLS", "ZKL_END_DECLS"}
    names = set()
    files = public_headers(incdir) + glob.glob(os.path.join(incdir, "*.h.in"))
    for h in files:
        text = strip_comments(open(h, encoding="utf-8").read())
        names |= set(re.findall(r"#define\s+(ZKL_\w+)", text))
        for body in re.findall(r"\benum\b[^{;]*\{(.*?)\}", text, flags=re.S):
            names |= set(re.findall(r"\b(ZKL_\w+)\s*(?:=|,|$)", body, flags=re.M))
    return names - internal


def api_fields(incdir):
    """{struct: [field...]} of the public structs defined in the headers."""
    fields = {}
    for h in public_headers(incdir):
        text = strip_comments(open(h, encoding="utf-8").read())
        for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", text,
                             flags=re.S):
            names = []
            for stmt in m.group(2).split(";"):
                stmt = stmt.strip()
                if not stmt:
                    continue
                fn = re.search(r"\(\s*\*\s*(\w+)\s*\)", stmt)
                names.append(fn.group(1) if fn else re.findall(r"\w+", stmt)[-1])
            fields[m.group(1)] = names
    return fields


def adapter_names(incdir):
    """The functions and types of the header-only adapters (adapters/*.h), which are
    documented as the library's own are."""
    names = set()
    for h in glob.glob(os.path.join(incdir, "adapters", "*.h")):
        text = strip_comments(open(h, encoding="utf-8").read())
        names |= {n for n in re.findall(r"\bstatic\s+inline\s+[\w\s\*]*?\b(zkl_\w+)\s*\(",
                                        text) if "__" not in n}
        names |= set(re.findall(r"\btypedef\s+struct\s+\w+\s+(\w+)\s*;", text))
    return names


def error_codes(incdir):
    text = strip_comments(open(os.path.join(incdir, "errors.h"), encoding="utf-8").read())
    body = re.search(r"enum\s+zkl_error\s*\{(.*?)\}", text, flags=re.S).group(1)
    return {n: int(v) for n, v in re.findall(r"(ZKL_\w+)\s*=\s*(-?\d+)", body)}


# ---- man pages ----

ROFF_CHARS = {"aq": "'", "ga": "`", "ha": "^", "ti": "~", "dq": '"', "rs": "\\",
              "em": "--", "en": "-", "bu": "*"}


def unroff(text):
    """The text of roff source, requests removed, escapes decoded (enough for ours)."""
    out = []
    for line in text.split("\n"):
        if line.startswith(".") or line.startswith("'"):
            # Keep the words of font macros (.B, .BR, ...) and drop other requests.
            m = re.match(r"\.(B|I|BR|RB|BI|IB|IR|RI|SM|SB)\s+(.*)", line)
            if not m:
                continue
            words = re.findall(r'"([^"]*)"|(\S+)', m.group(2))
            line = "".join(a or b for a, b in words) if len(m.group(1)) == 2 else \
                " ".join(a or b for a, b in words)
        out.append(line)
    s = "\n".join(out)
    s = re.sub(r"\\f[BIRPC]|\\f\(\w\w|\\&|\\c", "", s)
    s = re.sub(r"\\\((\w\w)", lambda m: ROFF_CHARS.get(m.group(1), "?"), s)
    s = s.replace("\\-", "-").replace("\\e", "\\").replace("\\ ", " ")
    return s


def sections(text):
    """{section name: roff source of its body} of a man page."""
    result = {}
    parts = re.split(r"^\.SH\s+(.*)$", text, flags=re.M)
    for i in range(1, len(parts), 2):
        result[parts[i].strip().strip('"')] = parts[i + 1]
    return result


def code_blocks(roff):
    """The .EX/.EE blocks of roff source, decoded."""
    return [unroff(b) for b in re.findall(r"^\.EX\n(.*?)^\.EE$", roff, flags=re.S | re.M)]


def man_pages(mandir):
    return sorted(p for p in glob.glob(os.path.join(mandir, "*.[1-8]")))


def check_man_coverage(mandir, incdir, docs_meson):
    pages = {os.path.basename(p): open(p, encoding="utf-8").read() for p in man_pages(mandir)}
    if not pages:
        fail("no man pages in " + mandir)
        return
    synopses = {}
    names = {}
    alltext = ""
    for page, text in pages.items():
        sec = sections(text)
        section = page.rsplit(".", 1)[1]
        wanted = ["NAME", "SYNOPSIS", "DESCRIPTION", "ERRORS", "EXAMPLE", "SEE ALSO"]
        if section == "3":
            wanted += ["RETURN VALUE", "THREADS AND OWNERSHIP"]
        for w in wanted:
            if w not in sec:
                fail("%s has no %s section" % (page, w))
        if not re.match(r'\.TH %s %s ' % (re.escape(page.rsplit(".", 1)[0].upper()), section),
                        text):
            fail("%s: its .TH line does not name it (%s %s)" % (page, page.upper(), section))
        synopses[page] = squash(strip_comments("\n".join(code_blocks(sec.get("SYNOPSIS", "")))))
        names[page] = [n.strip() for n in
                       unroff(sec.get("NAME", "").split("\\-")[0]).replace("\n", " ").split(",")]
        names[page] = [n for n in names[page] if n]
        alltext += unroff(text) + "\n"

    # Every function: its exact prototype in a synopsis, and its name on a NAME line
    # (which makes the `man FUNCTION` link).
    for name, decl in sorted(api_functions(incdir).items()):
        where = [p for p, s in synopses.items() if decl in s]
        if not where:
            near = [p for p, s in synopses.items() if re.search(r"\b%s\(" % name, s)]
            if near:
                fail("the synopsis of %s does not match the header's %s" % (near[0], decl))
            else:
                fail("%s has no man page (no synopsis shows %s)" % (name, decl))
        if not any(name in n for n in names.values()):
            fail("%s is on no page's NAME line" % name)
    for page, n in names.items():
        if page.endswith(".3"):
            documented = set(api_functions(incdir)) | api_types(incdir) | \
                adapter_names(incdir)
            for x in n:
                if x not in documented:
                    fail("%s names %s on its NAME line, which is not a public function" %
                         (page, x))

    # Every constant and every field of a public struct.
    for const in sorted(api_constants(incdir)):
        if not re.search(r"\b%s\b" % const, alltext):
            fail("%s appears in no man page" % const)
    for struct, fields in sorted(api_fields(incdir).items()):
        for f in fields:
            if not any(re.search(r"\b%s\b[^;]*;" % f, s) and struct in s
                       for s in synopses.values()):
                fail("field %s of %s is in no synopsis" % (f, struct))

    # The error table: ".B ZKL_X (\-N)" lines of zklocks.7's ERRORS section.
    codes = error_codes(incdir)
    table_src = sections(pages.get("zklocks.7", "")).get("ERRORS", "")
    table = {n: -int(v) if neg else int(v) for n, neg, v in
             re.findall(r"^\.B (ZKL_\w+) \((\\-)?(\d+)\)$", table_src, flags=re.M)}
    if table != codes:
        for n in sorted(set(codes) | set(table)):
            if codes.get(n) != table.get(n):
                fail("error table of zklocks.7: %s is %s in errors.h but %s in the table" %
                     (n, codes.get(n, "absent"), table.get(n, "absent")))
    for code in sorted(set(re.findall(r"\bZKL_E[A-Z]+\b", alltext))):
        if code not in codes:
            fail("the man pages mention %s, which errors.h does not define" % code)

    # Every page is installed.
    listed = open(docs_meson, encoding="utf-8").read()
    for page in pages:
        if "'%s'" % page not in listed:
            fail("%s is not in the man_pages list of %s" % (page, docs_meson))

    # Rendering: no warnings from groff (what lintian runs).
    man = shutil.which("man")
    if man:
        env = dict(os.environ, LC_ALL="C.UTF-8", MANROFFSEQ="", MANWIDTH="80")
        for page in sorted(pages):
            p = subprocess.run([man, "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z",
                                os.path.join(mandir, page)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0 or p.stderr.strip():
                fail("%s renders with warnings:\n%s" % (page, p.stderr.rstrip()))
    else:
        print("note: man not found; the pages were not rendered")


def check_man_examples(cc, incdir, buildinc, lib, mandir):
    lib = os.path.abspath(lib)
    tmp = tempfile.mkdtemp(prefix="zkl-man-examples.")
    try:
        count = 0
        for path in man_pages(mandir):
            page = os.path.basename(path)
            example = sections(open(path, encoding="utf-8").read()).get("EXAMPLE", "")
            blocks = code_blocks(example)
            if not blocks:
                fail("%s has no example program (.EX/.EE in EXAMPLE)" % page)
                continue
            src = os.path.join(tmp, page.replace(".", "_") + ".c")
            with open(src, "w", encoding="utf-8") as f:
                f.write("\n".join(blocks))
            extra = []
            if "#include <uv.h>" in blocks[0]:
                status, flags = run(["pkg-config", "--cflags", "--libs", "libuv"],
                                    check=False)
                if status != 0:
                    print("note: libuv not found; the example of %s was not built" % page)
                    continue
                extra = shlex.split(flags)
            cmd = shlex.split(cc) + [
                "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-pedantic", "-Wall", "-Wextra",
                "-Werror", "-I", os.path.dirname(incdir), "-I", buildinc, src, lib,
                "-pthread", "-o", src[:-2]] + extra + EXTRA_FLAGS
            status, _ = run(cmd)
            if status == 0:
                count += 1
                print("compiled the example of %s" % page)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if count == 0:
        fail("no example compiled")


# ---- symbols and headers ----

def check_symbols(lib, incdir):
    lib = os.path.abspath(lib)
    if not shutil.which("nm"):
        skip("nm not found (binutils)")
    _, out = run(["nm", "-D", "--defined-only", lib])
    exported = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, sym = parts[1], parts[2]
        name, _, version = sym.partition("@")
        if kind == "A":
            continue  # the version node itself
        exported[name] = version.lstrip("@")
    declared = set(api_functions(incdir))
    for n in sorted(set(exported) - declared):
        fail("exported but not declared ZKL_API in a public header: " + n)
    for n in sorted(declared - set(exported)):
        fail("declared ZKL_API but not exported: " + n)
    for n, v in sorted(exported.items()):
        if v != "ZKLOCKS_0":
            fail("%s is exported with version '%s', not ZKLOCKS_0" % (n, v))
    # Every other function of the library says it is internal by its name (zkl__...):
    # a reader must be able to tell a promise to users from a name.
    _, full = run(["nm", "--defined-only", lib])
    funcs = {p[2] for p in (l.split() for l in full.splitlines())
             if len(p) == 3 and p[1] in "Tt"}
    if not funcs:
        print("no symbol table in %s: internal names not checked" % lib)
    for n in sorted(f for f in funcs if re.match(r"zkl_[a-z0-9]", f) and f not in declared):
        fail("internal function named like the public API: %s (internal names begin "
             "with zkl__)" % n)
    # Data too: a global object of the library is internal, and named so.
    data = {p[2] for p in (l.split() for l in full.splitlines())
            if len(p) == 3 and p[1] in "DdBbRrGgSsVv"}
    for n in sorted(d for d in data if re.match(r"zkl_[a-z0-9]", d)):
        fail("data named like the public API: %s (the library exports no data; internal "
             "names begin with zkl__)" % n)
    _, dyn = run(["objdump", "-p", lib])
    m = re.search(r"SONAME\s+(\S+)", dyn)
    if not m or m.group(1) != "libzklocks.so.0":
        fail("soname is %s, not libzklocks.so.0" % (m.group(1) if m else "missing"))
    print("%d symbols exported, %d declared" % (len(exported), len(declared)))


def check_headers(cc, cxx, incdir, buildinc, lib):
    lib = os.path.abspath(lib)
    tmp = tempfile.mkdtemp(prefix="zkl-headers.")
    inc = ["-I", os.path.dirname(incdir), "-I", buildinc]
    strict = ["-pedantic", "-Wall", "-Wextra", "-Werror"]
    try:
        umbrella = os.path.join(tmp, "umbrella.c")
        with open(umbrella, "w") as f:
            f.write("#include <zklocks/zklocks.h>\n")
        run(shlex.split(cc) + ["-std=c11"] + strict + inc + ["-fsyntax-only", umbrella])

        if not cxx:
            skip("no C++ compiler (g++)")
        prog = os.path.join(tmp, "cxx.cpp")
        with open(prog, "w") as f:
            f.write("#include <zklocks/zklocks.h>\n"
                    "#include <cstdio>\n"
                    "#include <cstring>\n"
                    "int main() {\n"
                    "    zkl_client_options o;\n"
                    "    zkl_client_options_init(&o);\n"
                    "    std::printf(\"%s %s\\n\", zkl_version(), zkl_errname(ZKL_ELOST));\n"
                    "    return std::strcmp(zkl_version(), ZKL_VERSION_STRING) != 0;\n"
                    "}\n")
        status, _ = run(shlex.split(cxx) + ["-std=c++11"] + strict + inc +
                        [prog, lib, "-o", prog[:-4]] + EXTRA_FLAGS)
        if status == 0:
            env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(lib))
            status, out = run([prog[:-4]], env=env)
            if status == 0 and "ZKL_ELOST" not in out:
                fail("the C++ program printed %r" % out)

        # Every header alone, included by the umbrella, and installed.
        umbrella_text = open(os.path.join(incdir, "zklocks.h"), encoding="utf-8").read()
        installed = open(os.path.join(incdir, "meson.build"), encoding="utf-8").read()
        for h in public_headers(incdir) + cxx_headers(incdir):
            name = os.path.basename(h)
            if name.endswith(".hpp"):
                # The C++ API needs C++17: it is compiled alone as C++17 and C++20, and is
                # exempt from "included by zklocks.h" on purpose: the umbrella is C (and
                # C++11) and cannot include it; the .hpp includes the umbrella instead.
                src = os.path.join(tmp, "alone.cpp")
                with open(src, "w") as f:
                    f.write("#include <zklocks/%s>\n" % name)
                for std in ("c++17", "c++20"):
                    run(shlex.split(cxx) + ["-std=" + std] + strict + inc +
                        ["-fsyntax-only", src])
                if "#include <zklocks/zklocks.h>" not in open(h, encoding="utf-8").read():
                    fail("%s does not include <zklocks/zklocks.h>" % name)
            else:
                src = os.path.join(tmp, "alone.c")
                with open(src, "w") as f:
                    f.write("#include <zklocks/%s>\n" % name)
                run(shlex.split(cc) + ["-std=c11"] + strict + inc + ["-fsyntax-only", src])
                if name != "zklocks.h" and "<zklocks/%s>" % name not in umbrella_text:
                    fail("zklocks.h does not include <zklocks/%s>" % name)
            if "'%s'" % name not in installed:
                fail("%s is not in install_headers (include/zklocks/meson.build)" % name)

        # A C++17 program of the C++ API links with the library and runs (no server:
        # only what needs none, the error type over zkl_errname and zkl_strerror).
        if os.path.isfile(os.path.join(incdir, "zklocks.hpp")):
            prog = os.path.join(tmp, "hpp.cpp")
            with open(prog, "w") as f:
                f.write("#include <zklocks/zklocks.hpp>\n"
                        "#include <cstdio>\n"
                        "int main() {\n"
                        "    try {\n"
                        "        zkl::check(ZKL_ELOST);\n"
                        "    } catch (const zkl::error &e) {\n"
                        "        std::printf(\"%s\\n\", e.what());\n"
                        "        return e.code() != ZKL_ELOST;\n"
                        "    }\n"
                        "    return 1;\n"
                        "}\n")
            status, _ = run(shlex.split(cxx) + ["-std=c++17"] + strict + inc +
                            [prog, lib, "-o", prog[:-4]] + EXTRA_FLAGS)
            if status == 0:
                env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(lib))
                status, out = run([prog[:-4]], env=env)
                if status == 0 and not out.startswith("ZKL_ELOST: "):
                    fail("the C++17 program printed %r" % out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- install and the consumer ----

def find_one(root, pattern):
    hits = sorted(glob.glob(os.path.join(root, pattern), recursive=True))
    return hits[0] if hits else None


def libzklocks_path(exe, env):
    """Where the loader finds libzklocks.so.0 for exe, or None if it is not needed."""
    _, out = run(["ldd", exe], env=env)
    m = re.search(r"libzklocks\.so\.0 => (\S+)", out)
    return os.path.realpath(m.group(1)) if m else None


def check_consumer_output(what, exe, env, version):
    status, out = run([exe], env=env)
    want = "zklocks headers %s, library %s" % (version, version)
    if status == 0 and want not in out:
        fail("%s: consumer printed %r, expected %r" % (what, out.strip(), want))
    elif status == 0:
        print("%s: %s" % (what, out.strip()))


def run_path(exe):
    """The RUNPATH or RPATH of an ELF file ('' for none)."""
    _, out = run(["objdump", "-p", exe])
    m = re.search(r"^\s*(?:RUNPATH|RPATH)\s+(\S+)", out, flags=re.M)
    return m.group(1) if m else ""


def check_installed_zklock(prefix, build, tmp, version):
    """The installed zklock starts with a clean environment (env -i), from its prefix and
    from a copy of the prefix moved elsewhere; -Drelative_rpath=false installs it with
    no run path (distribution packages)."""
    exe = os.path.join(prefix, "bin", "zklock")
    rpath = run_path(exe)
    if not rpath.startswith("$ORIGIN/"):
        fail("the installed zklock's run path is %r, not relative to it ($ORIGIN/...)" %
             rpath)
    moved = os.path.join(tmp, "moved")
    shutil.copytree(prefix, moved, symlinks=True)
    for where in (prefix, moved):
        status, out = run(["env", "-i", os.path.join(where, "bin", "zklock"), "--version"])
        if status == 0 and version not in out:
            fail("env -i %s/bin/zklock --version says %r, not %s" % (where, out.strip(),
                                                                     version))
        elif status == 0:
            print("env -i %s/bin/zklock --version: %s" % (where, out.strip()))
    shutil.rmtree(moved, ignore_errors=True)
    stage = os.path.join(tmp, "stage")
    status, _ = run(["meson", "configure", build, "-Drelative_rpath=false"])
    if status == 0:
        status, _ = run(["meson", "install", "-C", build, "--destdir", stage])
    if status == 0:
        staged = os.path.join(stage, prefix.lstrip("/"), "bin", "zklock")
        if run_path(staged):
            fail("with -Drelative_rpath=false, zklock still has the run path %r" %
                 run_path(staged))
    shutil.rmtree(stage, ignore_errors=True)


def check_install(srcroot, version):
    for tool in ("meson", "ninja", "pkg-config", "make", "cmake", "ldd", "objdump"):
        if not shutil.which(tool):
            skip("%s not found (scripts/deps installs it)" % tool)
    tmp = tempfile.mkdtemp(prefix="zkl-install.")
    try:
        prefix = os.path.join(tmp, "prefix")
        env = dict(os.environ)
        env.pop("DESTDIR", None)
        build = os.path.join(tmp, "build")
        status, built = run([os.path.join(srcroot, "scripts", "build-release"), "-j", "2",
                             build, "--prefix=" + prefix], env=env)
        if status != 0:
            return

        # What is installed, and where.
        lib = find_one(prefix, "lib*/**/libzklocks.so.%s" % version)
        if not lib:
            fail("no libzklocks.so.%s under %s/lib*" % (version, prefix))
            return
        libdir = os.path.dirname(lib)
        for name in ("libzklocks.so.0", "libzklocks.so", "libzklocks.a",
                     "pkgconfig/zklocks.pc"):
            if not os.path.exists(os.path.join(libdir, name)):
                fail("%s/%s is not installed" % (libdir, name))
        if os.path.realpath(os.path.join(libdir, "libzklocks.so.0")) != os.path.realpath(lib):
            fail("libzklocks.so.0 does not point to libzklocks.so.%s" % version)
        if not os.access(os.path.join(prefix, "bin", "zklock"), os.X_OK):
            fail("bin/zklock is not installed")
        src_headers = {os.path.basename(h) for h in
                       public_headers(os.path.join(srcroot, "include", "zklocks"))}
        inst_headers = {os.path.basename(h) for h in
                        glob.glob(os.path.join(prefix, "include", "zklocks", "*.h"))}
        if inst_headers != src_headers | {"version.h"}:
            fail("installed headers %s differ from the source's %s + version.h" %
                 (sorted(inst_headers), sorted(src_headers)))
        src_hpp = {os.path.basename(h) for h in
                   cxx_headers(os.path.join(srcroot, "include", "zklocks"))}
        inst_hpp = {os.path.basename(h) for h in
                    cxx_headers(os.path.join(prefix, "include", "zklocks"))}
        if inst_hpp != src_hpp:
            fail("installed C++ headers %s differ from the source's %s" %
                 (sorted(inst_hpp), sorted(src_hpp)))
        mandir = os.path.join(prefix, "share", "man")
        for page in man_pages(os.path.join(srcroot, "docs", "man")):
            name = os.path.basename(page)
            inst = os.path.join(mandir, "man" + name.rsplit(".", 1)[1], name)
            if not os.path.isfile(inst):
                fail("man page %s is not installed" % inst)
            elif "@VERSION@" in open(inst, encoding="utf-8").read():
                fail("%s still says @VERSION@" % inst)
        alias = os.path.join(mandir, "man3", "zkl_lock_acquire.3")
        if not os.path.islink(alias) or \
                os.path.realpath(alias) != os.path.join(os.path.realpath(mandir), "man3",
                                                        "zkl_lock.3"):
            fail("%s is not a link to zkl_lock.3" % alias)
        if os.path.isfile(os.path.join(srcroot, "docs", "zklock.1")) and \
                not os.path.isfile(os.path.join(mandir, "man1", "zklock.1")):
            fail("zklock.1 is not installed")
        check_installed_zklock(prefix, build, tmp, version)

        # pkg-config, as build-release says to export it
        exports = dict(re.findall(r"^\s*export (PKG_CONFIG_PATH)=([^$\s]+)", built,
                                  flags=re.M))
        if exports.get("PKG_CONFIG_PATH") != os.path.join(libdir, "pkgconfig"):
            fail("build-release says to export PKG_CONFIG_PATH=%s, not %s:\n%s" %
                 (exports.get("PKG_CONFIG_PATH"), os.path.join(libdir, "pkgconfig"),
                  built[-600:]))
        pcenv = dict(env, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        _, modversion = run(["pkg-config", "--modversion", "zklocks"], env=pcenv)
        if modversion.strip() != version:
            fail("pkg-config --modversion zklocks says %r" % modversion.strip())
        consumer = os.path.join(srcroot, "examples", "consumer")

        # make, shared and static
        mk = os.path.join(tmp, "make")
        shutil.copytree(consumer, mk)
        status, _ = run(["make", "-C", mk, "consumer", "consumer-static"], env=pcenv)
        if status == 0:
            exe = os.path.join(mk, "consumer")
            check_consumer_output("make", exe, dict(pcenv, LD_LIBRARY_PATH=libdir), version)
            found = libzklocks_path(exe, dict(pcenv, LD_LIBRARY_PATH=libdir))
            if found != os.path.realpath(lib):
                fail("make: consumer loads %s, not the installed %s" % (found, lib))
            static = os.path.join(mk, "consumer-static")
            check_consumer_output("make static", static, pcenv, version)
            if libzklocks_path(static, pcenv):
                fail("make: consumer-static needs libzklocks.so")

        # The examples of an event loop (epoll, libuv through the installed adapter) and of
        # C++, built from the install alone; they run against a server in the zk suite.
        if not os.path.isfile(os.path.join(prefix, "include", "zklocks", "adapters",
                                           "libuv.h")):
            fail("the libuv adapter <zklocks/adapters/libuv.h> is not installed")
        ex = os.path.join(srcroot, "examples")
        strict = ["-Wall", "-Wextra", "-Werror"]
        zk_flags = shlex.split(run(["pkg-config", "--cflags", "--libs", "zklocks"],
                                   env=pcenv)[1])
        programs = [("epoll", os.environ.get("CC", "cc"), ["-std=c11"],
                     ["epoll.c", "common.c"], []),
                    ("cpp_lock", os.environ.get("CXX", "c++"), ["-std=c++17"],
                     ["cpp_lock.cc"], [])]
        uv_status, uv_flags = run(["pkg-config", "--cflags", "--libs", "libuv"], env=pcenv,
                                  check=False)
        if uv_status == 0:
            programs.append(("uv_lock", os.environ.get("CC", "cc"), ["-std=c11"],
                             ["uv_lock.c", "common.c"], shlex.split(uv_flags)))
        for name, compiler, std, sources, extra in programs:
            out = os.path.join(tmp, name)
            status, _ = run(shlex.split(compiler) + std + strict +
                            [os.path.join(ex, f) for f in sources] + zk_flags + extra +
                            ["-o", out], env=pcenv)
            if status == 0:
                found = libzklocks_path(out, dict(pcenv, LD_LIBRARY_PATH=libdir))
                if found != os.path.realpath(lib):
                    fail("%s loads %s, not the installed %s" % (name, found, lib))

        # CMake (its build tree has an rpath: no LD_LIBRARY_PATH)
        cm = os.path.join(tmp, "cmake")
        status, _ = run(["cmake", "-S", consumer, "-B", cm], env=pcenv)
        if status == 0:
            status, _ = run(["cmake", "--build", cm], env=pcenv)
        if status == 0:
            exe = os.path.join(cm, "consumer")
            check_consumer_output("cmake", exe, env, version)
            found = libzklocks_path(exe, env)
            if found != os.path.realpath(lib):
                fail("cmake: consumer loads %s, not the installed %s" % (found, lib))

        # meson, with zklocks as a subproject (the source tree, not the install)
        ms = os.path.join(tmp, "meson-src")
        shutil.copytree(consumer, ms)
        os.mkdir(os.path.join(ms, "subprojects"))
        os.symlink(os.path.realpath(srcroot), os.path.join(ms, "subprojects", "zklocks"))
        mb = os.path.join(tmp, "meson-build")
        status, _ = run(["meson", "setup", mb, ms, "--wrap-mode=forcefallback"], env=env)
        if status == 0:
            status, _ = run(["meson", "compile", "-C", mb], env=env)
        if status == 0:
            check_consumer_output("meson subproject", os.path.join(mb, "consumer"), env,
                                  version)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- docker ----

def dockerfile_stages(text):
    """[(base image, stage name, [instructions])] with continuation lines joined."""
    stages = []
    text = re.sub(r"\\\n", " ", text)
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", line, flags=re.I)
        if m:
            stages.append((m.group(1), m.group(2), []))
        elif stages:
            stages[-1][2].append(line)
    return stages


def check_docker(srcroot):
    docker = os.path.join(srcroot, "docker")
    dockerfile = open(os.path.join(docker, "Dockerfile"), encoding="utf-8").read()
    stages = dockerfile_stages(dockerfile)
    if len(stages) < 2:
        fail("the Dockerfile has %d stage(s), not a build stage and a runtime stage" %
             len(stages))
    for image, _, _ in stages:
        if not re.match(r"(docker\.io/(library/)?)?debian:(12|bookworm)\b", image):
            fail("the Dockerfile builds FROM %s, not Debian 12" % image)
    build_steps = " ".join(" ".join(s[2]) for s in stages[:-1])
    for want in ("scripts/deps --build", "scripts/build-release"):
        if want not in build_steps:
            fail("the build stage does not run %s" % want)
    if stages:
        runtime = " ".join(stages[-1][2])
        for bad in ("gcc", "meson", "ninja", "-dev", "build-essential", "scripts/deps"):
            if re.search(r"\b%s\b" % re.escape(bad), runtime):
                fail("the runtime stage installs or runs %s" % bad)
        if "libzookeeper-mt2" not in runtime:
            fail("the runtime stage does not install libzookeeper-mt2")
        if "--from=" not in runtime:
            fail("the runtime stage copies nothing from the build stage")
    readme = open(os.path.join(srcroot, "README.md"), encoding="utf-8").read()
    if "scripts/build-release" not in readme:
        fail("README.md does not build with scripts/build-release, as the Dockerfile does")

    compose_file = os.path.join(docker, "compose.yaml")
    compose = shutil.which("docker-compose")
    if not compose:
        skip("docker-compose not found (scripts/deps installs it)")
    status, out = run([compose, "--project-directory", docker, "-f", compose_file,
                       "config"])
    if status != 0:
        finish()
    try:
        import yaml
    except ImportError:
        skip("PyYAML not found (python3-yaml)")
    config = yaml.safe_load(out)
    services = config.get("services", {})
    zks = {n: s for n, s in services.items() if str(s.get("image", "")).startswith("zookeeper:")}
    if len(zks) != 3:
        fail("compose.yaml has %d ZooKeeper services, not 3" % len(zks))
    for n, s in zks.items():
        if not re.match(r"zookeeper:3\.8(\.\d+)?$", s["image"]):
            fail("%s uses %s, not a pinned zookeeper:3.8 tag" % (n, s["image"]))
    workers = {n: s for n, s in services.items() if "build" in s or
               "zklock" in str(s.get("image", ""))}
    if len(workers) < 2:
        fail("compose.yaml has %d worker services, want a few" % len(workers))
    for n, s in workers.items():
        command = s.get("command") or s.get("entrypoint") or []
        if "zklock" not in " ".join(command if isinstance(command, list) else [command]):
            fail("worker %s does not run its job through zklock" % n)
        build = s.get("build")
        if isinstance(build, dict) and not build.get("dockerfile", "").endswith("Dockerfile"):
            fail("worker %s is not built from docker/Dockerfile" % n)
    print("compose: %d ZooKeeper servers, %d workers" % (len(zks), len(workers)))


# ---- systemd unit files ----

def check_unit_conflict(unit, text, opts):
    """A unit whose zklock waits a bounded time (or not at all) for the lock: the host
    that did not get it, because another ran the job meanwhile, exits with the conflict
    code (-E, default 1), which systemd must count as success, or every waiting host's
    unit shows "failed" though nothing is wrong."""
    bounded = any(o in ("-n", "--nonblock") or o.startswith(("--nonblock=",)) for o in opts)
    conflict = 1
    for i, o in enumerate(opts):
        val = opts[i + 1] if i + 1 < len(opts) else ""
        if o in ("-w", "--wait", "--timeout") or o.startswith(("--wait=", "--timeout=")):
            bounded = True
        if o in ("-E", "--conflict-exit-code"):
            conflict = int(val)
        elif o.startswith("--conflict-exit-code="):
            conflict = int(o.split("=", 1)[1])
        elif o.startswith("-E") and len(o) > 2:
            conflict = int(o[2:])
    if not bounded:
        return
    ok = {0}
    for line in re.findall(r"^SuccessExitStatus=(.*)$", text, flags=re.M):
        ok |= {int(w) for w in line.split() if w.isdigit()}
    if conflict not in ok:
        fail("%s: a host whose zklock does not get the lock in time exits %d, which the "
             "unit counts as failed (give -E 0, or SuccessExitStatus=%d)" %
             (unit, conflict, conflict))


def check_systemd(unitdir, zklock):
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        skip("systemd-analyze is not installed (Debian's systemd package provides it)")
    units = sorted(f for f in os.listdir(unitdir)
                   if f.endswith((".service", ".timer")))
    if not units:
        fail("no unit files in %s" % unitdir)
        return
    with tempfile.TemporaryDirectory(prefix="zkl-units.") as d:
        for u in units:
            text = open(os.path.join(unitdir, u), encoding="utf-8").read()
            if u.endswith(".service") and "/usr/bin/zklock " not in text:
                fail("%s does not run /usr/bin/zklock" % u)
            with open(os.path.join(d, u), "w", encoding="utf-8") as f:
                f.write(text.replace("/usr/bin/zklock ", os.path.abspath(zklock) + " "))
            # The zklock command line, continuation lines joined: zklock must accept its
            # options (checked one by one, each value too, before --help answers).
            m = re.search(r"^ExecStart=/usr/bin/zklock ((?:.*\\\n)*.*)$", text, flags=re.M)
            if m:
                words = shlex.split(m.group(1).replace("\\\n", " "))
                dash = words.index("--")
                words = ["--help"] + words[:dash - 1]  # without PATH and COMMAND
                status, out = run([zklock] + words, check=False)
                if status != 0 or "Usage: zklock" not in out:
                    fail("%s: zklock refuses its options %r:\n%s" % (u, words, out))
                check_unit_conflict(u, text, words[1:])
        # Documentation=man:zklock(1) names a page installed with zklock, not here.
        status, out = run([analyze, "verify", "--man=no"] +
                          [os.path.join(d, u) for u in units], check=False)
        if status != 0 or out.strip():
            fail("systemd-analyze verify %s: exit %d:\n%s" % (" ".join(units), status, out))


# ---- changelog and links ----

def check_changelog(path, version, debian_changelog=None):
    text = open(path, encoding="utf-8").read()
    versions = re.findall(r"^##\s+\[?(\d+\.\d+\.\d+)\]?", text, flags=re.M)
    if not versions:
        fail("%s has no '## X.Y.Z' heading" % path)
    elif versions[0] != version:
        fail("the newest version in %s is %s, but meson's project version is %s" %
             (path, versions[0], version))
    if debian_changelog:
        # The Debian packages' version: the first line is "zklocks (VERSION) ...".
        first = open(debian_changelog, encoding="utf-8").readline()
        m = re.match(r"zklocks \(([^)]+)\) ", first)
        if not m or m.group(1) != version:
            fail("%s starts %r, not with zklocks (%s): add an entry (dch -v %s)" %
                 (debian_changelog, first.strip(), version, version))


def check_links(files):
    for md in files:
        text = open(md, encoding="utf-8").read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = os.path.join(os.path.dirname(md), target.split("#")[0])
            if not os.path.exists(path):
                fail("%s links to %s, which does not exist" % (md, target))


# Packages that only the test suites (or the Debian packages) need: the demo must not
# install them, scripts/test must.
TEST_ONLY = {"libcmocka-dev", "valgrind", "docker-compose", "libcurator-recipes-java",
             "python3-kazoo", "default-jdk-headless", "prometheus", "lintian", "debhelper",
             "devscripts", "iptables", "libuv1-dev", "g++", "cmake"}


def check_demo(srcroot):
    deps = os.path.join(srcroot, "scripts", "deps")
    _, demo = run([deps, "--list", "--demo"])
    _, full = run([deps, "--list"])
    demo, full = set(demo.split()), set(full.split())
    if not demo or not {"zookeeper", "libzookeeper-mt-dev", "meson"} <= demo:
        fail("scripts/deps --list --demo gives %r: not what building and a ZooKeeper need" %
             sorted(demo))
    for p in sorted(demo & TEST_ONLY):
        fail("scripts/deps --demo installs %s, which only the test suites need" % p)
    for p in sorted((TEST_ONLY | demo) - full):
        fail("scripts/deps (what scripts/test installs) leaves out %s" % p)
    script = open(os.path.join(srcroot, "scripts", "demo"), encoding="utf-8").read()
    calls = re.findall(r"^\s*(?:zkl_deps\b.*|\S*scripts/deps\"?.*)$", script, flags=re.M)
    if not calls or any("--demo" not in c for c in calls):
        fail("scripts/demo installs with %r, not scripts/deps --demo" % calls)
    if "-Dtests=false" not in script:
        fail("scripts/demo makes a build directory with the test suites, whose packages "
             "it does not install")
    test = open(os.path.join(srcroot, "scripts", "test"), encoding="utf-8").read()
    if "-Dtests=true" not in test:
        fail("scripts/test does not turn the test suites on in a build directory that "
             "scripts/demo made")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    check, args = sys.argv[1], sys.argv[2:]
    if check == "symbols":
        check_symbols(*args)
    elif check == "headers":
        check_headers(*args)
    elif check == "demo":
        check_demo(*args)
    elif check == "man-coverage":
        check_man_coverage(*args)
    elif check == "man-examples":
        check_man_examples(*args)
    elif check == "install":
        check_install(*args)
    elif check == "docker":
        check_docker(*args)
    elif check == "systemd":
        check_systemd(*args)
    elif check == "changelog":
        check_changelog(*args)
    elif check == "links":
        check_links(args)
    else:
        print("unknown check: " + check)
        sys.exit(2)
    finish()


if __name__ == "__main__":
    main()

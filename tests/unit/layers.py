#!/usr/bin/env python3
"""The layers of the library, as the build enforces them (meson.build, "The layers").

Each layer (src/base, src/client, src/engine, recipes) is compiled with the include
directories of the layers below it only. This reads the real compile command of one
file of each layer from the build's compile_commands.json, swaps the file for a probe
that includes one header, compiles it with -fsyntax-only, and checks the outcome: a
header of the layer itself or of one below builds; a header of a layer above, or the
client's private core.h outside the client, does not.

It also reads the recipes' sources: they reach lock state (holds, waiters, the loss
deadline) only through the engine (src/engine/shared/engine.h), so none of them names
the client layer's functions for it, nor any function named for the client's lock
("*_locked"); everything in recipes runs on the loop with that lock held.

    layers.py BUILD_DIR SOURCE_ROOT
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

# (layer, a source file of it, headers it may include, headers it must not reach)
CASES = [
    ("base", "src/base/errors.c", ["names.h", "clock.h"],
     ["internal.h", "core.h", "engine.h", "predicates.h"]),
    ("client", "src/client/client.c", ["internal.h", "core.h", "names.h"],
     ["engine.h", "acquisition.h", "predicates.h", "lock_internal.h"]),
    ("engine", "src/engine/engine.c", ["engine.h", "predicates.h", "internal.h", "clock.h"],
     ["core.h", "reach.h", "common.h", "lock_internal.h"]),
    ("recipes", "recipes/mutex.c", ["predicates.h", "engine.h", "internal.h", "names.h"],
     ["core.h", "reach.h", "sigpipe.h", "acquisition.h", "engine_internal.h"]),
]


def command_for(db, root, rel):
    want = os.path.realpath(os.path.join(root, rel))
    for entry in db:
        path = entry["file"]
        if not os.path.isabs(path):
            path = os.path.join(entry["directory"], path)
        if os.path.realpath(path) == want:
            return entry
    sys.exit(f"layers: {rel} is not in compile_commands.json")


def builds(entry, src, header, tmp):
    probe = os.path.join(tmp, "probe.c")
    with open(probe, "w", encoding="utf-8") as f:
        f.write(f'#include "{header}"\nint zkl_layers_probe;\n')
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MQ", "-MT"):
            skip = True
            continue
        if a in ("-c", "-MD") or os.path.realpath(os.path.join(entry["directory"], a)) == src:
            continue
        out.append(a)
    out += ["-fsyntax-only", probe]
    r = subprocess.run(out, cwd=entry["directory"], capture_output=True, text=True)
    return r.returncode == 0, r.stderr


# What of the client layer a recipe must not name: its holds, loop waiters and loss
# deadline (the engine's hold.c and stage.c give recipes those), and functions named
# for the client's lock.
CLIENT_LOCK_STATE = re.compile(
    r"\bzkl__(hold_|waiter_|lost_at|nodewatch_|holdwatch_)\w*|\bzkl__\w*_locked\(")


# What the engine must not name: functions named for the client's lock (the engine runs
# on the loop, and sends while it holds what it holds).
NAMED_FOR_THE_LOCK = re.compile(r"\bzkl__\w*_locked\(")


def names_in(root, pattern, *dirs):
    found = []
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(root, d, "**", "*.[ch]"), recursive=True)):
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    for m in pattern.finditer(line):
                        found.append(f"{os.path.relpath(path, root)}:{n}: {m.group(0)}")
    return found


def recipes_reach_client(root):
    return names_in(root, CLIENT_LOCK_STATE, "recipes")


def main():
    build, root = sys.argv[1], sys.argv[2]
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        db = json.load(f)
    failed = 0
    checks = 0
    with tempfile.TemporaryDirectory() as tmp:
        for layer, rel, ok, refused in CASES:
            entry = command_for(db, root, rel)
            src = os.path.realpath(os.path.join(root, rel))
            for h in ok:
                checks += 1
                good, err = builds(entry, src, h, tmp)
                if not good:
                    failed += 1
                    print(f"FAIL: {layer} cannot include {h}, a header below it:\n{err}")
            for h in refused:
                checks += 1
                good, _ = builds(entry, src, h, tmp)
                if good:
                    failed += 1
                    print(f"FAIL: {layer} can include {h}, which it must not reach")
    checks += 1
    reached = recipes_reach_client(root)
    if reached:
        failed += 1
        print("FAIL: recipes reach the client's lock state, not through the engine:\n  " +
              "\n  ".join(reached))
    named = names_in(root, NAMED_FOR_THE_LOCK, "src/engine")
    if named:
        failed += 1
        print("FAIL: the engine calls functions named for the client's lock:\n  " +
              "\n  ".join(named))
    print(f"layers: {checks} checks, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

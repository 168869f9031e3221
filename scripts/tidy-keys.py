#!/usr/bin/env python3
"""Cache keys for clang-tidy, one per translation unit (scripts/lint-userspace.sh).

    scripts/tidy-keys.py BUILD_DIR COMMON_KEY TU...

Prints "KEY TU" per unit. A unit's key covers COMMON_KEY (clang-tidy's
version and .clang-tidy), its compile command (paths relative to the tree
and the build directory, so clones at other paths share the cache), and
every file it includes, from ninja's dependency log of BUILD_DIR: the
content of files in the tree or the build directory (generated headers
included), the path, size and mtime of system headers. A unit changes key
only when something it reads changed, so editing one header re-checks only
the units that include it. Without a dependency record for a unit (BUILD_DIR
not built), its key covers every project header instead.
"""
import hashlib
import json
import os
import shlex
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: tidy-keys.py BUILD_DIR COMMON_KEY TU...")
    build = os.path.realpath(sys.argv[1])
    common = sys.argv[2]
    tus = sys.argv[3:]
    root = os.path.realpath(os.getcwd())

    def rel(text):
        return text.replace(build + "/", "").replace(root + "/", "")

    commands = {}
    for entry in json.load(open(os.path.join(build, "compile_commands.json"))):
        cmd = entry.get("command") or " ".join(entry.get("arguments", []))
        path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        words = shlex.split(cmd)
        out = words[words.index("-o") + 1] if "-o" in words else None
        commands[path] = (rel(cmd), out)

    deps, cur = {}, None
    try:
        log = subprocess.run(["ninja", "-C", build, "-t", "deps"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        log = ""
    for line in log.splitlines():
        if not line:
            continue
        if not line.startswith(" "):
            cur = line.split(":", 1)[0]
            deps[cur] = []
        elif cur is not None:
            deps[cur].append(line.strip())

    hashes = {}

    def file_hash(path):
        if path not in hashes:
            p = path if os.path.isabs(path) else os.path.join(build, path)
            p = os.path.realpath(p)
            h = hashlib.sha256()
            try:
                if p.startswith(root + "/"):
                    with open(p, "rb") as f:
                        h.update(f.read())
                else:
                    st = os.stat(p)
                    h.update(f"{p} {st.st_size} {st.st_mtime_ns}".encode())
            except OSError:
                h.update(b"missing")
            hashes[path] = (rel(p), h.hexdigest())
        return hashes[path]

    all_headers = None
    for tu in tus:
        path = os.path.realpath(tu)
        cmd, out = commands.get(path, ("", None))
        h = hashlib.sha256()
        h.update(common.encode())
        h.update(cmd.encode())
        with open(path, "rb") as f:
            h.update(f.read())
        dlist = deps.get(out) if out else None
        if dlist:
            # Sorted by the name as hashed (relative to the tree or the build
            # directory), not as ninja spells it: absolute project paths sort
            # before /usr in a clone under /tmp and after it under /work, and
            # the key must not depend on where the clone lies.
            for name, digest in sorted({file_hash(d) for d in dlist}):
                h.update(f"{name} {digest}\n".encode())
        else:
            if all_headers is None:
                all_headers = subprocess.run(
                    ["git", "ls-files", "-s", "--", "userspace", "tests/unit", "bpf", "kmod/include"],
                    check=True, capture_output=True, text=True).stdout
            h.update(all_headers.encode())
        print(h.hexdigest(), tu)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The layer rule of libmltune, checked over the #include lines of userspace/lib.

    check-layers.py [LIBDIR]        (default: userspace/lib of this tree)

Every folder of lib/src and every public header of lib/include/mltune has an
owner folder, and every folder a layer:

    0 base      shared mechanisms (Sysroot, parsers, StateFile, the node
                baseline, Step and run_transaction)
    1 model     what is read before any domain acts: profiles, the node
                configuration, the topology and the CPU plan
    2 domain    one folder per domain of a switch (knobs, nic, sched, feeder,
                pool, boot, modules) and the observers (noise, drift)
    3 node      node-wide coordination over several domains (node), and the
                commands' engines over it (audit, metrics, service, prove)

The rules:
  1. a file includes no header of a higher layer;
  2. a domain includes no other domain's header (only node/ and the layer
     above it combine domains);
  3. a file includes no private header (lib/src/X/...) of another folder,
     except base's;
  4. no public header includes a private one.

A known violation is listed in EXCEPTIONS with the work that removes it; a
listed exception that no longer occurs fails too, so the list only shrinks.
Exit 0 when the tree holds the rule, 1 with one line per violation.
"""

import os
import re
import sys

LAYER = {"base": 0, "profile": 1, "config": 1, "topology": 1,
         "switch": 2, "devices": 2, "nic": 2, "sched": 2, "feeder": 2, "pool": 2,
         "boot": 2, "modules": 2, "noise": 2, "drift": 2, "hugetlb": 2,
         "node": 3, "audit": 3, "metrics": 3, "service": 3, "prove": 3}

# Folders that are one domain: the knob domain expands [cpu] and [block]
# settings into knobs (devices/) and switches them (switch/).
DOMAIN = {"devices": "knobs", "switch": "knobs"}

# Public header (include/mltune/NAME.hpp) -> owner folder.
PUBLIC = {"result": "base", "sysroot": "base", "caches": "base", "cpulist": "base", "parse": "base",
          "node_info": "base", "step": "base",
          "profile": "profile", "catalog": "profile", "recommend": "profile",
          "config": "config", "persist": "config",
          "topology": "topology", "cpu_plan": "topology", "pci": "topology", "launch": "topology",
          "switch": "switch", "compare": "switch", "device_knobs": "devices",
          "nic": "nic", "sched": "sched", "feeder": "feeder", "pool": "pool", "boot": "boot",
          "modules": "modules", "noise": "noise", "drift": "drift", "hugetlb": "hugetlb",
          "node": "node", "audit": "audit", "metrics": "metrics", "service": "service",
          "prove": "prove"}

# (including file, included header): why it is still there.
EXCEPTIONS = {
    ("include/mltune/profile.hpp", "mltune/nic.hpp"):
        "Profile holds the NIC and thread rules (NicRule, SchedRule); their types and value rules belong in the model layer",
    ("include/mltune/profile.hpp", "mltune/sched.hpp"): "as above",
    ("src/profile/sections.cpp", "nic/profile_tables.hpp"):
        "the {key, parser} registry names the parsers of the [nic] and [sched] tables, which check values "
        "with their domains' rules; they go down to the model layer with the tables' types, as [cpu] and "
        "[block] did (profile/device_tables.cpp)",
    ("src/profile/sections.cpp", "sched/internal.hpp"): "as above",
    ("src/config/config.cpp", "mltune/pool.hpp"):
        "the node configuration's [pool] table checks its values with the pool's limits",
    ("src/config/config.cpp", "profile/profile_phases.hpp"):
        "the node configuration is read with the profile's TOML helpers and module-name rule; they belong in base",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def owner_of_header(inc, here):
    """(owner folder, is_private) of an included header, or None (not libmltune's)."""
    m = re.fullmatch(r"mltune/(\w+)\.hpp", inc)
    if m:
        if m.group(1) not in PUBLIC:
            return ("?" + m.group(1), False)
        return (PUBLIC[m.group(1)], False)
    if "/" in inc:
        folder = inc.split("/", 1)[0]
        return (folder, True) if folder in LAYER else None
    return (here, True) if here else None  # "internal.hpp": a header beside the file


def check(lib):
    problems = []
    seen = set()
    files = []
    for top in ("include/mltune", "src"):
        for dirpath, _, names in os.walk(os.path.join(lib, top)):
            files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith((".hpp", ".cpp"))]
    if not files:
        return ["no source files below " + lib]
    for path in sorted(files):
        rel = os.path.relpath(path, lib)
        if rel.startswith("include/"):
            name = os.path.basename(rel)[:-4]
            here, public = PUBLIC.get(name), True
            if here is None:
                problems.append(f"{rel}: a public header without an owner folder (add it to PUBLIC)")
                continue
        else:
            here, public = rel.split("/")[1], False
            if here not in LAYER:
                problems.append(f"{rel}: a folder without a layer (add it to LAYER)")
                continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            got = owner_of_header(inc, here)
            if got is None:
                continue
            owner, private = got
            why = None
            if owner.startswith("?"):
                why = "a public header without an owner folder"
            elif owner == here:
                why = None
            elif public and private:
                why = "a public header includes a private one"
            elif LAYER[owner] > LAYER[here]:
                why = f"layer {LAYER[here]} ({here}) includes layer {LAYER[owner]} ({owner})"
            elif private and owner != "base":
                why = f"includes a private header of {owner}/"
            elif LAYER[here] == 2 and LAYER[owner] == 2 and DOMAIN.get(here, here) != DOMAIN.get(owner, owner):
                why = f"domain {here} includes domain {owner}"
            if why is None:
                continue
            key = (rel, inc)
            if key in EXCEPTIONS:
                seen.add(key)
                continue
            problems.append(f"{rel}:{line}: #include \"{inc}\": {why}")
    for key in sorted(set(EXCEPTIONS) - seen):
        problems.append(f"{key[0]}: listed exception #include \"{key[1]}\" no longer occurs: "
                        "remove it from EXCEPTIONS")
    return problems


def main():
    lib = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "userspace", "lib")
    problems = check(lib)
    for p in problems:
        print("check-layers: " + p)
    print(f"check-layers: {len(problems)} violation(s), {len(EXCEPTIONS)} known exception(s) listed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

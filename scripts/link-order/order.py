"""The binary's functions a workload ran, for the linker to lay out together.

Usage: order.py BINARY PROFILE... > link-order.txt

Each PROFILE is a callgrind output (`--demangle=no`) of the binary at a
workload. Prints the mangled name of every function of BINARY that ran:
those of the first profile first, then what each later one adds, each group
hottest first (the instructions it ran itself). Names the binary does not
define (the C library's, the dynamic loader's) are left out.
"""

import re
import subprocess
import sys
from collections import Counter

FN = re.compile(r"^fn=\((\d+)\)(?: (.*))?$")
NAMED = re.compile(r"^c?fn=\((\d+)\) (.*)$")
# A cost line: a position (absolute, relative, or `*` for the same) and the
# instructions.
COST = re.compile(r"^(?:[+-]?\d+|\*) (\d+)")


def defined(binary):
    """The code symbols BINARY defines."""
    out = subprocess.run(
        ["nm", "--defined-only", binary], capture_output=True, text=True, check=True
    ).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            names.add(parts[2])
    return names


def self_costs(path):
    """Instructions each function ran itself, by name."""
    names, costs, current, in_call = {}, Counter(), None, False
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            named = NAMED.match(line)
            if named:
                names[named.group(1)] = named.group(2)
            fn = FN.match(line)
            if fn:
                current, in_call = names.get(fn.group(1)), False
                continue
            if line.startswith("calls="):
                # The next cost line is the call's inclusive cost.
                in_call = True
                continue
            cost = COST.match(line)
            if cost and current:
                if in_call:
                    in_call = False
                else:
                    costs[current] += int(cost.group(1))
    # A function that ran only calls still ran.
    for name in names.values():
        costs.setdefault(name, 0)
    return costs


def main():
    binary, profiles = sys.argv[1], sys.argv[2:]
    ours = defined(binary)
    seen = set()
    for path in profiles:
        costs = self_costs(path)
        for name, _ in sorted(costs.items(), key=lambda kv: (-kv[1], kv[0])):
            if name in ours and name not in seen:
                seen.add(name)
                print(name)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Instructions a get runs after its first load of the record, from a callgrind file of gets
alone (Benchmarks/profile PEER SIZE KEYS read leaves one, made with --dump-instr=yes).

The record's first load is the load of its first word in entry_check_copy (entry_read.c). What
runs after it is what the control flow reaches from there: the instructions of the function that
inlines the read (`view_get_hardware`) reachable from that load, every function called from them
(its own instructions: a 100-byte hit calls none; a value of 256 bytes or more calls the copy,
whose callees are not counted), and what each caller up to the measuring loop runs after its call
returns. Each is counted as often as it ran. The read has no loop back to before the load (entry_read.c's probe stops at the
first slot of the key's tag), so this is the hit's own path after the load: the header checks,
the key, the value and its checksum, the re-check, the bookkeeping and the returns.

    after_load.py CALLGRIND_FILE CALLS
"""
import re
import subprocess
import sys
from collections import defaultdict

from steps import costs

READ_FUNCTION = "view_get_hardware"
FIRST_LOAD = re.compile(r"entry_read\.c:(\d+)")
# The callers, innermost first, whose instructions after the call count too.
CALLERS = ["lrd_view_get", "larder_get", "lc_get"]


def disassemble(obj, symbol):
    """[(address, text)] of `symbol` in `obj`."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={symbol}", obj],
                         capture_output=True, text=True).stdout
    return [(int(m.group(1), 16), m.group(2)) for m in
            (re.match(r"\s*([0-9a-f]+):\s*(.*)", line) for line in out.splitlines()) if m]


def reachable(instructions, start):
    """Addresses the static control flow reaches from `start` within the function."""
    index = {a: i for i, (a, _) in enumerate(instructions)}
    seen, work = set(), [start]
    while work:
        a = work.pop()
        if a in seen or a not in index:
            continue
        seen.add(a)
        i = index[a]
        text = instructions[i][1]
        op = text.split()[0] if text else ""
        target = re.search(r"\b([0-9a-f]+) <", text)
        if op.startswith("j") and target:
            work.append(int(target.group(1), 16))
        if op in ("jmp", "ret", "ud2") or op.startswith("jmp"):
            continue
        if i + 1 < len(instructions):
            work.append(instructions[i + 1][0])
    return seen


def first_line_of_load():
    """The line of entry_check_copy that loads the record's first word."""
    source = open(__file__.rsplit("/", 2)[0] + "/Sources/CLarderSupport/entry_read.c").read()
    for number, line in enumerate(source.splitlines(), 1):
        if "uint64_t w0 = __atomic_load_n((const uint64_t *)record" in line:
            return number
    sys.exit("entry_read.c: the record's first load not found")


def main():
    path, calls = sys.argv[1], int(sys.argv[2])
    cost = costs(path)
    objects = sorted({o for (o, _) in cost})
    load_line = first_line_of_load()
    symbols = {}
    for obj in objects:
        if not obj.endswith((".so", "larder-bench")):
            continue
        for line in subprocess.run(["nm", "--defined-only", obj], capture_output=True, text=True).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3:
                symbols.setdefault(parts[2], []).append(obj)
    total = 0
    # The read: from the first load on, and everything it calls from there.
    for obj in symbols.get(READ_FUNCTION, []):
        instructions = disassemble(obj, READ_FUNCTION)
        if not any(cost.get((obj, a)) for a, _ in instructions):
            continue
        query = "\n".join(hex(a) for a, _ in instructions) + "\n"
        lines = subprocess.run(["llvm-symbolizer", "-e", obj], input=query, capture_output=True, text=True).stdout
        frames = lines.strip().split("\n\n")
        start = next(a for (a, text), frame in zip(instructions, frames)
                     if f"entry_read.c:{load_line}:" in frame and re.match(r"mov\s+\(", text))
        after = reachable(instructions, start)
        # An indirect jump's targets (a jump table) are not followed: one that ran would hide them.
        for a, text in instructions:
            if a in after and re.match(r"jmp\s+\*", text) and cost.get((obj, a)):
                sys.exit(f"after_load.py: an indirect jump at {a:#x} ran after the load; its targets are not counted")
        called = defaultdict(int)
        for a, text in instructions:
            if a in after:
                total += cost.get((obj, a), 0)
                m = re.search(r"call\s+[0-9a-f]+ <([^@>+]+)", text)
                if m:
                    called[m.group(1)] += 1
        for name in called:
            for callee_obj in symbols.get(name, []):
                total += sum(cost.get((callee_obj, a), 0) for a, _ in disassemble(callee_obj, name))
    # Each caller after its call returns.
    callee = READ_FUNCTION
    for caller in CALLERS:
        for obj in symbols.get(caller, []):
            instructions = disassemble(obj, caller)
            returns = [instructions[i + 1][0] for i, (a, text) in enumerate(instructions[:-1])
                       if re.search(r"(call|jmp)\s+[0-9a-f]+ <" + re.escape(callee) + r"(@plt)?>", text)]
            after = set()
            for r in returns:
                after |= reachable(instructions, r)
            total += sum(cost.get((obj, a), 0) for a in after)
        callee = caller
    print(f"  get after the record's first load: {total / calls:.0f} instructions a call")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Instructions per step of one kind of call, from a callgrind file made with --dump-instr=yes
and collection toggled on that call alone (Benchmarks/profile makes both).

Each instruction is attributed by its inline chain, as llvm-symbolizer reads it from the line
tables: from the innermost function outwards, the first one a step below names decides. So an
atomic load inlined into `isUnchanged` counts as the re-check, and the spills a call to the
header checksum costs in `RecordHeader.read` count as the header. What no step names is the
shell (C export, arguments, handle check, view, frames).

    steps.py OP CALLGRIND_FILE CALLS
"""
import re
import subprocess
import sys
from collections import defaultdict

# Ordered: the first pattern to match a function of the chain (innermost first) wins.
STEPS = {
    "get": [
        ("hash", r"lrd_xxh|KeyHash\.init"),
        ("header", r"RecordHeader\.read|lrd_crc32c_record_header|header_crc|header_checksum|isLiveEntry"
                   r"|lrd_prefetch_following|entryHeader\(at:keyLength:|ReadView\.entryHeader\(at:key:"
                   r"|entry_copy|entry_check_copy|ReadView\.copyEntry"),
        ("key", r"sameBytes|ByteComparison|same_bytes"),
        ("value+CRC", r"crc_then_copy|crc_chain|crc_short|data_checksum|key_checksum|value_checksum"
                      r"|lrd_crc32c_then_copy|copyStoredValue|storedValue\(of:"),
        ("probe", r"HashTable\.|ReadView\.lookup|ReadView\.probe|prefetchRecord|prefetchHome|view_probe"),
        ("re-check", r"isUnchanged|isExpired|has_passed|view_unchanged"),
        ("bookkeeping", r"countHit|countMiss|markVisited|LocalWords|view_count"),
    ],
    # A write: the caller's bytes and the handle (shell), the locks (with the check of the shared
    # state on taking the writer lock), the lookup of the entry replaced or removed, the room
    # (placement, ring, tail), the record (key, value, checksums, header), the index slots, the
    # view published for this process's readers, and counters and clocks.
    "put": [
        ("arguments", r"Arguments|mapsAnyOf|validateKey"),
        ("hash", r"lrd_xxh|KeyHash\.init"),
        ("lock", r"beginWrite|endWrite|acquireWriterLock|releaseWriterLock|lockExclusive|unlockExclusive"
                 r"|lrd_writer_lock|lrd_writer_unlock|lrd_rwlock|ReadWriteLock|sharedStateIsPlausible|isPlausible"),
        ("lookup", r"lookupToReplace|lookupToRemove|HashTable\.find|HashTable\.firstSlot|ReadView|RecordHeader\.read|sameBytes"
                   r"|IndexMaintenance\.lookup|IndexMaintainer\.lookup|CacheStore\.lookup|currentView"),
        ("room", r"placement|reserve|RingAllocator|reclaim|TailReclaimer|DeadRoom|FreeList|growFile|freeRun"
                 r"|wrap|pad\(|parked|PageWarmer|takeDeadRoom"),
        ("record", r"writeEntry|RecordHeader\.write|lrd_crc32c_then_store|crc_then|crc_blocks|crc_chain|rewrite"
                   r"|entry_write|data_store"
                   r"|header_crc|lrd_crc32c_record_header|header_holds|writePadding"),
        ("index", r"HashTable\.|stepMigration|ensureIndexRoom|CacheIndex|IndexMaintenance|IndexMaintainer|repoint|insertSlot"),
        ("mark dead", r"markDead"),
        ("publish", r"publishView|PublishedView"),
        ("bookkeeping", r"[Cc]ounter|statistics|nowMilliseconds|Expiry|deadline"),
    ],
}
STEPS["delete"] = STEPS["put"]


def costs(path):
    """Instruction address (per object) -> instructions, self cost only."""
    objects, current, out = {}, None, defaultdict(int)
    skip_next = False
    last = 0
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line)
            if m:  # an object's name is given at its first mention, in an ob= or a cob= line
                if m.group(2):
                    objects[m.group(1)] = m.group(2)
                if line.startswith("ob="):
                    current = objects.get(m.group(1))
                continue
            if line.startswith("calls="):
                skip_next = True
                continue
            if not line or not (line[0] in "0123456789+-*"):
                continue
            parts = line.split()
            pos = parts[0]
            if pos.startswith("0x"):
                last = int(pos, 16)
            elif pos.startswith("+"):
                last += int(pos[1:], 16) if pos[1:].startswith("0x") else int(pos[1:])
            elif pos.startswith("-"):
                last -= int(pos[1:], 16) if pos[1:].startswith("0x") else int(pos[1:])
            if skip_next:  # the inclusive cost of a call: not this function's own
                skip_next = False
                continue
            if len(parts) > 1 and current:
                out[(current, last)] += int(parts[1])
    return out


def chains(obj, addresses):
    """Address -> inline chain of demangled function names, innermost first."""
    query = "\n".join(hex(a) for a in addresses) + "\n"
    raw = subprocess.run(["llvm-symbolizer", "--inlining", "--no-demangle", "-e", obj],
                         input=query, capture_output=True, text=True).stdout
    names = subprocess.run(["swift", "demangle", "--simplified"], input=raw, capture_output=True, text=True).stdout
    result = {}
    # Per address: function, file:line:column for each inline frame (innermost first), then a blank line.
    lines = names.splitlines()
    i = 0
    for a in addresses:
        chain = []
        while i < len(lines) and lines[i] != "":
            chain.append(lines[i])
            i += 2
        i += 1
        result[a] = chain
    return result


def main():
    op, path, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    steps = STEPS[op]
    per_object = defaultdict(list)
    cost = costs(path)
    for (obj, addr) in cost:
        per_object[obj].append(addr)
    totals = defaultdict(int)
    for obj, addresses in per_object.items():
        named = chains(obj, addresses) if obj.endswith((".so", "larder-bench")) else {}
        for a in addresses:
            chain = named.get(a, [])
            step = "shell"
            for function in chain:
                found = next((s for s, pattern in steps if re.search(pattern, function)), None)
                if found:
                    step = found
                    break
            if not chain or chain[0] in ("??", ""):
                step = "other (libc, loader)"
            totals[step] += cost[(obj, a)]
    order = ["shell"] + [s for s, _ in steps] + ["other (libc, loader)"]
    total = sum(totals.values())
    print(f"  {op} steps ({calls} calls):", "  ".join(f"{s} {totals[s] / calls:.0f}" for s in order),
          f"  = {total / calls:.0f}")


if __name__ == "__main__":
    main()

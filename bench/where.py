#!/usr/bin/env python3
"""where.py: where a benchmark's instructions go, per unit of work, by layer.

Reads callgrind files of two runs that differ only in how much work they did (the same way the
benchmarks count: (large - small) / units), and sorts every function's own (exclusive) cost
into the layer that runs it: libdbus, the C library (its locks, malloc, memory copies), the
Swift runtime (reference counting, allocation, hashing, strings, exclusivity checks), Swift
concurrency, Dispatch, and blekit's own code by module and source file.

    where.py --small F[,F...] --large F[,F...] --units N [--label NAME]
             [--vs-small F,... --vs-large F,... --vs-units N --vs-label NAME] [--top K]

With --vs, a second side (the C floor) is printed beside the first, layer by layer. Used by
scripts/bench-dbus --where, bench/receive/receive.py --where and bench/scan/scan.py --where;
docs/benchmarks.md ("Where the rest goes") has its tables.
"""
import argparse
import collections
import re
import subprocess
import sys

ROW = re.compile(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)$")
OBJECT = re.compile(r"\[([^\]]+)\]\s*$")
MODULE = re.compile(r"\$s(\d+)([A-Za-z_][A-Za-z0-9_]*)")
SOURCE = re.compile(r"Sources/([A-Za-z]+)/(?:[A-Za-z0-9_+]+/)*([A-Za-z0-9_+]+\.swift)")


def functions(path):
    """Exclusive cost of each function in one callgrind file: {(function, object): count}."""
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no", path],
        capture_output=True, text=True, check=True).stdout
    costs = collections.Counter()
    for line in out.splitlines():
        match = ROW.match(line)
        if not match or "PROGRAM TOTALS" in line:
            continue
        name = match.group(2)
        if name.startswith("=>") or "events annotated" in name:
            continue
        obj = OBJECT.search(name)
        function = name[: obj.start()].strip() if obj else name.strip()
        costs[(re.sub(r" \(\d+x\)$", "", function), obj.group(1) if obj else "")] += int(
            match.group(1).replace(",", ""))
    return costs


def per_unit(small, large, units):
    before, after = collections.Counter(), collections.Counter()
    for path in small:
        before.update(functions(path))
    for path in large:
        after.update(functions(path))
    return {key: (after[key] - before[key]) / units for key in set(before) | set(after)}


def swift_module(function):
    if re.search(r"\$s[sS]", function):
        return "Swift"  # the standard library's own types (Sa, SS, ...) or module `s`
    match = MODULE.search(function)
    if not match:
        return None
    return match.group(2)[: int(match.group(1))]


def layer(function, obj):
    """(layer, detail) for one function."""
    library = obj.rsplit("/", 1)[-1]
    if not obj and re.match(r"\./(malloc|nptl|string|stdlib|misc|socket)/", function):
        library = "libc.so"  # glibc's own source paths, printed without the object
    if library.startswith("libdbus-1"):
        return "libdbus", ""
    if library.startswith("libc.so"):
        if "mutex" in function or "lll_lock" in function or "lll_unlock" in function:
            return "C library", "locks (pthread mutexes)"
        if re.search(r"malloc|free|realloc|calloc|arena|tcache|_int_", function):
            return "C library", "malloc and free"
        if re.search(r"mem(cpy|move|set|cmp|chr)|str(len|cmp|chr)", function):
            return "C library", "memory and string copies"
        return "C library", "system call wrappers and the rest"
    if library.startswith("libswiftCore"):
        if re.search(r"swift_(retain|release|bridgeObject|unknownObject)|RefCount|release_dealloc|"
                     r"isUniquelyReferenced", function):
            return "Swift runtime", "reference counting"
        if re.search(r"swift_(allocObject|deallocObject|slowAlloc|slowDealloc|deallocClassInstance|"
                     r"arrayDestroy|allocBox|deallocBox)|ContiguousArrayStorage|_consumeAndCreateNew",
                     function):
            return "Swift runtime", "allocation"
        if "Hasher" in function or re.search(r"\$sSS4hash", function):
            return "Swift runtime", "hashing"
        if re.search(r"String|_allASCII|UTF8|utf8|Unicode|cString", function):
            return "Swift runtime", "strings"
        if re.search(r"Access|swift_beginAccess|swift_endAccess", function):
            return "Swift runtime", "exclusivity checks"
        if "Metadata" in function or "swift_get" in function:
            return "Swift runtime", "metadata and casts"
        return "Swift runtime", "the rest"
    if library.startswith("libswift_Concurrency"):
        return "Swift concurrency", ""
    if library.startswith(("libdispatch", "libswiftDispatch", "libBlocksRuntime")):
        return "Dispatch", ""
    if library.startswith("ld-linux"):
        return "dynamic linker (thread-local storage)", ""
    if library.startswith(("libswiftFoundation", "libFoundation", "lib_Foundation")):
        return "Foundation", ""
    source = SOURCE.search(function)
    if source:
        return "blekit", source.group(1) + "/" + source.group(2)
    module = swift_module(function)
    benchmark_binary = library.startswith(("floor", "dbus-bench")) and not module
    if module == "dbus_bench" or benchmark_binary or re.search(r"bench/|floor\.c", function):
        return "the benchmark's own code", ""
    if module == "Swift":
        return "Swift runtime", "generic code specialized into the binary"
    if module:
        return "blekit", module + " (compiler-generated)"
    return "other", library or "?"


def grouped(costs):
    layers = collections.Counter()
    details = collections.defaultdict(collections.Counter)
    for (function, obj), value in costs.items():
        name, detail = layer(function, obj)
        layers[name] += value
        if detail:
            details[name][detail] += value
    return layers, details


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", required=True)
    parser.add_argument("--large", required=True)
    parser.add_argument("--units", type=float, required=True)
    parser.add_argument("--label", default="blekit")
    parser.add_argument("--vs-small")
    parser.add_argument("--vs-large")
    parser.add_argument("--vs-units", type=float)
    parser.add_argument("--vs-label", default="C floor")
    parser.add_argument("--top", type=int, default=6, help="details shown per layer")
    args = parser.parse_args()
    layers, details = grouped(per_unit(args.small.split(","), args.large.split(","), args.units))
    other_layers, other_details = collections.Counter(), collections.defaultdict(collections.Counter)
    if args.vs_small:
        other_layers, other_details = grouped(
            per_unit(args.vs_small.split(","), args.vs_large.split(","), args.vs_units or args.units))
    total = sum(layers.values())
    other_total = sum(other_layers.values())
    print("%-52s %12s %12s" % ("instructions per unit, by layer", args.label,
                                args.vs_label if args.vs_small else ""))
    names = sorted(set(layers) | set(other_layers), key=lambda n: -max(layers[n], other_layers[n]))
    for name in names:
        if abs(layers[name]) < 1 and abs(other_layers[name]) < 1:
            continue
        print("%-52s %12.0f %12s" % (name, layers[name],
                                     "%.0f" % other_layers[name] if args.vs_small else ""))
        shown = [d for d, _ in details[name].most_common(args.top)]
        shown += [d for d, _ in other_details[name].most_common(args.top) if d not in shown]
        for detail in shown:
            mine, theirs = details[name][detail], other_details[name][detail]
            if abs(mine) >= 1 or abs(theirs) >= 1:
                print("  %-50s %12.0f %12s" % (detail[:50], mine,
                                               "%.0f" % theirs if args.vs_small else ""))
    print("%-52s %12.0f %12s" % ("total", total, "%.0f" % other_total if args.vs_small else ""))
    if args.vs_small and other_total:
        print("%-52s %12s" % ("ratio", "%.3fx" % (total / other_total)))


if __name__ == "__main__":
    sys.exit(main())

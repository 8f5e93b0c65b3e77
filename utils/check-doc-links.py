#!/usr/bin/env python3
"""Checks that every relative link in the project's markdown files resolves.

usage: check-doc-links.py [--code-paths] ROOT FILE_OR_DIR...

Each markdown file under the given paths (relative to ROOT; directories
with their subdirectories) is scanned, outside fenced blocks, for inline
links `[text](target)` and images `![alt](target)`. A target that is not a
URL (http:, https:, mailto:, ...) must name an existing file or directory
relative to the file that links it. An anchor (`file.md#section`, or
`#section` in the same file) must match a heading of that file (GitHub's
slug rules: lower case, punctuation dropped, spaces to dashes, `-1`, `-2`
for repeated headings).

--code-paths also checks the source tree's paths the text names in inline
code (`lib/Runtime/Core`, `test/Docs/snippets.test`,
`test/Dialect/KPool/{cache,cache-invalid}.mlir`, `nvvm-ptxas-*.mlir`
globs): a span that starts with one of the source tree's top-level
directories must name something that exists under ROOT. Spans with spaces,
`<placeholders>` or `...` are not paths, and `lib/` followed by a lower-case
name (`lib/libKPoolCAPI.so`, `lib/cmake/kpool`) is an install's layout, not
the source tree's. Use it on a clone, not on an install.

Prints every broken link and exits 1 if any.
"""

import glob
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE = re.compile(r"`([^`]+)`")
SOURCE_DIRS = ("benchmarks", "cmake", "docs", "examples", "include", "lib",
               "python", "scripts", "test", "tools", "utils")


def slug(heading):
    text = heading.strip().lower()
    text = re.sub(r"[`*_]", "", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        result, seen, fenced = set(), {}, False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                if not fenced and re.match(r"#{1,6}\s", line):
                    base = slug(line.lstrip("#"))
                    n = seen.get(base, 0)
                    seen[base] = n + 1
                    result.add(base if n == 0 else f"{base}-{n}")
        _anchors[path] = result
    return _anchors[path]


def prose(path):
    """(line number, text) of each line outside fenced blocks."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, line


def links(path):
    for number, line in prose(path):
        line = CODE.sub("", line)  # inline code is not a link
        for match in LINK.finditer(line):
            yield number, match.group(1)


def expand(pattern):
    """The alternatives of `{a,b}` groups."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [path for alt in m.group(1).split(",")
            for path in expand(pattern[:m.start()] + alt + pattern[m.end():])]


def code_paths(path):
    for number, line in prose(path):
        for span in CODE.findall(line):
            span = span.strip()
            if (span.split("/")[0] not in SOURCE_DIRS or "/" not in span
                    or re.search(r"\s|<|\.\.\.", span)
                    or re.match(r"lib/[a-z]", span)):
                continue
            yield number, re.sub(r"[:#].*$", "", span.rstrip(".,;"))


def main():
    args = sys.argv[1:]
    check_code = "--code-paths" in args
    args = [a for a in args if a != "--code-paths"]
    root = os.path.abspath(args[0])
    files = []
    for arg in args[1:]:
        path = os.path.join(root, arg)
        if os.path.isdir(path):
            for dirpath, dirnames, names in os.walk(path):
                dirnames.sort()
                files += [os.path.join(dirpath, n) for n in sorted(names)
                          if n.endswith(".md")]
        elif os.path.exists(path):
            files.append(path)
        else:
            print(f"{arg}: no such file")
            return 1
    broken = checked = 0
    for md in files:
        for number, target in links(md):
            if re.match(r"^[a-z]+:", target):
                continue
            checked += 1
            file_part, _, anchor = target.partition("#")
            dest = (os.path.normpath(os.path.join(os.path.dirname(md),
                                                  file_part))
                    if file_part else md)
            where = f"{os.path.relpath(md, root)}:{number}: {target}"
            if not os.path.exists(dest):
                print(f"{where}: {os.path.relpath(dest, root)} does not exist")
                broken += 1
            elif anchor and dest.endswith(".md") and \
                    anchor not in anchors(dest):
                print(f"{where}: no heading '#{anchor}' in "
                      f"{os.path.relpath(dest, root)}")
                broken += 1
        if not check_code:
            continue
        for number, span in code_paths(md):
            checked += 1
            missing = [p for p in expand(span)
                       if not glob.glob(os.path.join(root, p))]
            if missing:
                print(f"{os.path.relpath(md, root)}:{number}: `{span}`: "
                      f"{', '.join(missing)} does not exist")
                broken += 1
    print(f"{len(files)} files, {checked} links"
          f"{' and code paths' if check_code else ''}, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

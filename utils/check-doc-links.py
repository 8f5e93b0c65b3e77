#!/usr/bin/env python3
"""Checks that every relative link in the project's markdown files resolves.

usage: check-doc-links.py ROOT FILE_OR_DIR...

Each markdown file under the given paths (relative to ROOT) is scanned for
inline links `[text](target)`; a target that is not a URL (http:, https:,
mailto:) or a pure anchor must name an existing file or directory relative
to the file that links it. An anchor after a file (`file.md#section`) must
match a heading of that file (GitHub's slug rules: lower case, punctuation
dropped, spaces to dashes). Prints every broken link and exits 1 if any.
"""

import os
import re
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading):
    text = heading.strip().lower()
    text = re.sub(r"[`*_]", "", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    result, fenced = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced and line.startswith("#"):
                result.add(slug(line.lstrip("#")))
    return result


def links(path):
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            line = re.sub(r"`[^`]*`", "", line)  # inline code is not a link
            for match in LINK.finditer(line):
                yield number, match.group(1)


def main():
    root = os.path.abspath(sys.argv[1])
    files = []
    for arg in sys.argv[2:]:
        path = os.path.join(root, arg)
        if os.path.isdir(path):
            for dirpath, _, names in os.walk(path):
                files += [os.path.join(dirpath, n) for n in sorted(names)
                          if n.endswith(".md")]
        elif os.path.exists(path):
            files.append(path)
        else:
            print(f"{arg}: no such file")
            return 1
    broken = 0
    for md in files:
        for number, target in links(md):
            if re.match(r"^[a-z]+:", target):
                continue
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
    print(f"{len(files)} files, {broken} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

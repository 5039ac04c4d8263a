"""Lists the targets of a C or C++ file as posrecall defines them
(docs/METHOD.md section 2, C and C++) with libclang, clang's own parser,
independent of posrecall's tree-sitter grammars: every function definition
with a body (free functions, and in C++ methods in and out of class,
constructors, destructors, operators and templates). A function is named by
its bare name when no other definition in the file has it, else (C++) by its
qualified name (its namespaces and classes, joined by "::") when that is
unique; overloads are neither. Eligible when at least LINES lines lie
strictly between the line holding its body's `{` and the line holding its
`}`. The file's language is C for `.c` and `.h`, else C++ (C++17).

clang sees only the active branch of each `#if`. The definitions in the
branches it skips are found by parsing each skipped region on its own
(with its conditional directives blanked): they count for uniqueness (a
name defined in two branches is ambiguous), and are never listed.

Prints one JSON object per target: {"name", "line", "expected"} (line:
1-based line where the definition starts, after any `template <...>`;
expected: the LINES lines after the `{` line, verbatim).

    scripts/oracles/c-targets FILE [LINES] [CLANG_ARG...]

CLANG_ARGs (say, -I folders) are passed to clang as they are. libclang comes
from the pinned PyPI wheel that scripts/env/python-env installs.
"""
import ctypes
import json
import re
import sys
from collections import Counter

import clang.cindex as ci

DEFINITIONS = {
    ci.CursorKind.FUNCTION_DECL, ci.CursorKind.CXX_METHOD, ci.CursorKind.CONSTRUCTOR,
    ci.CursorKind.DESTRUCTOR, ci.CursorKind.FUNCTION_TEMPLATE, ci.CursorKind.CONVERSION_FUNCTION,
}


def parse(path, args, unsaved=None):
    # The detailed record keeps the ranges the preprocessor skipped.
    options = ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD
    return ci.Index.create().parse(path, args=args, unsaved_files=unsaved, options=options)


def definitions(tu, path):
    """(cursor, body) of every function definition in `path`, in any scope."""
    found = []
    for c in tu.cursor.walk_preorder():
        if c.kind in DEFINITIONS and c.is_definition() and c.location.file and c.location.file.name == path:
            bodies = [k for k in c.get_children() if k.kind == ci.CursorKind.COMPOUND_STMT]
            if bodies:
                found.append((c, bodies[-1]))
    return found


def qualified(c):
    """The definition's name with its named enclosing scopes, joined by ::."""
    parts = [c.spelling]
    p = c.semantic_parent
    while p is not None and p.kind != ci.CursorKind.TRANSLATION_UNIT:
        if p.spelling:
            parts.append(p.spelling)
        p = p.semantic_parent
    return "::".join(reversed(parts))


def start_line(c):
    """The definition's first line; for a template, the line after its
    `template <...>` header (where tree-sitter's function definition starts)."""
    if c.kind != ci.CursorKind.FUNCTION_TEMPLATE:
        return c.extent.start.line
    depth, tokens = 0, list(c.get_tokens())
    for i, t in enumerate(tokens):
        if t.spelling == "<":
            depth += 1
        elif t.spelling in (">", ">>"):
            depth -= len(t.spelling)
            if depth <= 0:
                return tokens[i + 1].location.line
    return c.extent.start.line


class SourceRangeList(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint), ("ranges", ctypes.POINTER(ci.SourceRange))]


def skipped_names(tu, path, text, args):
    """Bare names of the functions defined in the `#if` branches clang skipped."""
    lib = ci.conf.lib
    lib.clang_getAllSkippedRanges.restype = ctypes.POINTER(SourceRangeList)
    lib.clang_getAllSkippedRanges.argtypes = [ctypes.c_void_p]
    lib.clang_disposeSourceRangeList.argtypes = [ctypes.POINTER(SourceRangeList)]
    got = lib.clang_getAllSkippedRanges(tu.obj)
    names = []
    lines = text.split("\n")
    try:
        for i in range(got.contents.count):
            r = got.contents.ranges[i]
            if r.start.file is None or r.start.file.name != path:
                continue
            region = lines[r.start.line - 1:r.end.line]
            region = ["" if re.match(r"\s*#\s*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b", l) else l for l in region]
            snippet = path + ".skipped" + path[path.rfind("."):]
            sub = parse(snippet, args, unsaved=[(snippet, "\n".join(region))])
            names += [c.spelling for c, _ in definitions(sub, snippet)]
    finally:
        lib.clang_disposeSourceRangeList(got)
    return names


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: scripts/oracles/c-targets FILE [LINES] [CLANG_ARG...]")
    path = sys.argv[1]
    want = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    language = ["-x", "c"] if path.endswith((".c", ".h")) else ["-x", "c++", "-std=c++17"]
    args = language + sys.argv[3:]
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    tu = parse(path, args)
    found = definitions(tu, path)
    bare = Counter([c.spelling for c, _ in found] + skipped_names(tu, path, text, args))
    full = Counter(qualified(c) for c, _ in found)
    # A "\r" before the "\n" is not part of the line (docs/METHOD.md section 1).
    lines = [l[:-1] if l.endswith("\r") else l for l in text.split("\n")]
    found.sort(key=lambda d: d[0].extent.start.offset)
    for c, body in found:
        q = qualified(c)
        name = c.spelling if bare[c.spelling] == 1 else q if full[q] == 1 and q != c.spelling else None
        if name is None:
            continue
        open_, close = body.extent.start.line, body.extent.end.line
        if close - open_ - 1 < want:
            continue
        print(json.dumps({"name": name, "line": start_line(c), "expected": lines[open_:open_ + want]}, ensure_ascii=False))


if __name__ == "__main__":
    main()

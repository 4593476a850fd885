#!/usr/bin/python3
"""maint/rename-runtime.py - give the runtime names of its own layer.

HACKING.md's rule: kbox_ followed by a lower-case letter is libkbox's public
API (what include/kbox.h and include/kbox/*.h declare) and nothing else;
kbox__ is libkbox's internal prefix (src/private.h); the common module is
kx_/KX_; the runtime (src/runtime/, not installed) is kr_/KR_.  This script
rewrites the tree to that rule, in three phases, each a pure function of the
tree it finds (run it again and it changes nothing):

  moved    Calls of what left libkbox's internals for the runtime, in the
           files outside libkbox (src/runtime/, the front ends, kbox-http):
           kbox__err -> kr_err, kbox__err_sys -> kr_err_sys,
           kbox__check_private_dir -> kr_check_private_dir, KBOX_PRINTF ->
           KX_PRINTF; and src/runtime/'s #include "private.h" becomes
           #include "runtime/runtime.h".

  common   The temporary aliases of the common module go: every call of
           an old name (kbox__now_ms, kbox__buf_*, kbox_fmt_size, cli_utf8,
           cli_fmt_bytes, ...) becomes the kx_ call, arguments reordered
           where the alias did (cli_utf8(s) is kx_utf8_valid_str(s)), and
           the TEMPORARY blocks of src/private.h and src/cli/cli.h are
           deleted.

  runtime  The runtime's names get the kr_ prefix.  The list is derived,
           not written down: every kbox_/kbox__/KBOX_/KBOX__ identifier in
           the code of src/runtime/*.h and *.c that is not declared in
           include/ (public), in src/*.h (libkbox's internals) or by the
           build (configure.ac, Makefile.am: KBOX_PREFIX, ...).  kbox_x and
           kbox__x become kr_x, KBOX_X and KBOX__X become KR_X; struct tags
           and include guards too.

What is rewritten: C code and comments of src/**/*.[ch], tests/**/*.[ch] and
bench/*.c, and `code spans` of HACKING.md.  Never string literals (a KBOX_
environment variable name is text, not an identifier: a name that shows up in
a string is listed as a warning instead), never man pages or shell scripts.
Matches are whole identifiers.  When a rename changes the length of a line,
the continuation lines aligned under one of its open parentheses move with it.

Usage:  /usr/bin/python3 maint/rename-runtime.py [--dry-run] [--list]
            [--phases moved,common,runtime] [--paths DIR_OR_FILE ...]
Run from anywhere inside the tree; it finds the top by configure.ac.
--list prints the derived runtime names and their new names; --dry-run
says which files would change; --paths limits the files rewritten (not the
derivation).  Exit status 0, or 1 when something needs a hand (a name that
would collide, an alias call it cannot rewrite, an old name left over).
"""

import argparse
import os
import re
import subprocess
import sys

# ---- the fixed tables: what moved, by hand, in the commit that made
# kbox-supervisor link the installed libkbox.so ----

# libkbox internals the runtime now has its own of (src/runtime/runtime.h)
MOVED = {
    "kbox__err": "kr_err",
    "kbox__err_sys": "kr_err_sys",
    "kbox__check_private_dir": "kr_check_private_dir",
    "KBOX_PRINTF": "KX_PRINTF",
}

# the common module's names for what the TEMPORARY aliases spelled the old
# way, and the libc-only helpers that moved to it (src/common/kx.h)
COMMON = {
    "kbox__now_ms": "kx_now_ms",
    "kbox__now": "kx_wall_s",
    "kbox__fmt_ms": "kx_fmt_ms",  # same arguments; the value is ignored
    "kbox__utf8_repair": "kx_utf8_repair",
    "kbox__buf_t": "kx_buf_t",
    "KBOX__BUF_INIT": "KX_BUF_INIT",
    "kbox__buf_append": "kx_buf_append",
    "kbox__buf_appends": "kx_buf_appends",
    "kbox__buf_appendf": "kx_buf_appendf",
    "kbox__buf_take": "kx_buf_take",
    "kbox__buf_reset": "kx_buf_reset",
    "kbox__iso8601": "kx_iso8601",
    "kbox__write_all": "kx_write_all",
    "kbox_fmt_size": "kx_fmt_bytes",
    "kbox__empty_dir": "kx_empty_dir",
    "kbox__take_ids": "kx_take_ids",
    "kbox__resolve_command": "kx_resolve_command",
    "KBOX__SAFE_PATH": "KX_SAFE_PATH",
    "kbox_ids_t": "kx_ids_t",
}

# aliases that were macros or inline functions with other arguments: the
# call is rewritten whole (see rewrite_calls)
CALLS = ("cli_utf8", "cli_fmt_bytes", "cli_ws_create_temp")

# files whose TEMPORARY ... END TEMPORARY block is deleted
TEMPORARY_FILES = ("src/private.h", "src/cli/cli.h")

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
OURS = re.compile(r"\b(?:kbox_|KBOX_)[A-Za-z0-9_]*")

problems = []


def problem(msg):
    problems.append(msg)


# ---- a C lexer that knows code from comments and literals ----


def segments(text):
    """Split C TEXT into (kind, text): kind "code", "comment", "string"
    (a string or character literal, quotes included)."""
    out = []
    i, n, start = 0, len(text), 0
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] in "*/":
            if start < i:
                out.append(("code", text[start:i]))
            if text[i + 1] == "*":
                j = text.find("*/", i + 2)
                j = n if j < 0 else j + 2
            else:
                j = text.find("\n", i)
                j = n if j < 0 else j
            out.append(("comment", text[i:j]))
            i = start = j
        elif c in "\"'":
            if start < i:
                out.append(("code", text[start:i]))
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(("string", text[i:j]))
            i = start = j
        else:
            i += 1
    if start < n:
        out.append(("code", text[start:]))
    return out


def code_tokens(text):
    """The identifiers of TEXT's code (not comments, not literals)."""
    found = set()
    for kind, seg in segments(text):
        if kind == "code":
            found.update(IDENT.findall(seg))
    return found


# ---- the tree ----


def top_dir():
    d = os.path.abspath(os.getcwd())
    while d != "/":
        if os.path.exists(os.path.join(d, "configure.ac")) and os.path.isdir(
            os.path.join(d, "src", "runtime")
        ):
            return d
        d = os.path.dirname(d)
    sys.exit("rename-runtime.py: run it inside the kbox tree (no configure.ac above)")


def tracked_files(top):
    """The files git knows (tracked, or new and not ignored)."""
    r = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=top,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        sys.exit("rename-runtime.py: git ls-files failed: " + r.stderr.strip())
    return sorted(set(p for p in r.stdout.splitlines() if os.path.isfile(os.path.join(top, p))))


def is_c(path):
    return path.endswith((".c", ".h"))


def rewritten(path):
    """Is PATH among the files this script rewrites?"""
    if path == "HACKING.md":
        return True
    if not is_c(path):
        return False
    return path.startswith(("src/", "tests/")) or (path.startswith("bench/") and path.endswith(".c"))


def is_libkbox(path):
    """libkbox proper: src/*.c, src/*.h (not a subdirectory) and include/."""
    return (path.startswith("src/") and path.count("/") == 1) or path.startswith("include/")


def read(top, path):
    with open(os.path.join(top, path), encoding="utf-8") as f:
        return f.read()


# ---- deriving the runtime's names ----


def derive(top, files, texts):
    runtime = [p for p in files if p.startswith("src/runtime/") and is_c(p)]
    public = set()
    for p in files:
        if p.startswith("include/") and p.endswith(".h"):
            public |= code_tokens(texts(p))
    internal = set()
    for p in files:
        if p.startswith("src/") and p.count("/") == 1 and p.endswith(".h"):
            internal |= code_tokens(texts(p))
    build = set()
    for p in ("configure.ac", "Makefile.am"):
        if os.path.exists(os.path.join(top, p)):
            build |= set(IDENT.findall(read(top, p)))
    names = set()
    for p in runtime:
        for t in code_tokens(texts(p)):
            if OURS.fullmatch(t) and t not in public and t not in internal and t not in build:
                names.add(t)
    # what the other phases rename is not the runtime's
    names -= set(MOVED) | set(COMMON)
    mapping = {t: new_name(t) for t in sorted(names)}
    derive.others = {t for t in public | internal | build if OURS.fullmatch(t)}
    derive.runtime = set(mapping.values())
    for p in runtime:
        derive.runtime |= {t for t in code_tokens(texts(p)) if re.match(r"(kr_|KR_)", t)}
    # two old names onto one new one, or onto a name that exists already
    seen = {}
    for old, new in mapping.items():
        if new in seen:
            problem(f"{old} and {seen[new]} would both become {new}")
        seen[new] = old
    # (a new name that is in the tree already is no collision: on a merged
    # tree, files renamed before sit beside files that still say kbox_)
    return mapping


# ---- rewriting ----


def visual(s):
    """The width of the whitespace S, tabs of 8."""
    w = 0
    for c in s:
        w = (w // 8 + 1) * 8 if c == "\t" else w + 1
    return w


def indent_to(lead, width):
    """Whitespace of WIDTH columns in the style of LEAD: its leading tabs
    (the block's indentation) kept when they fit, spaces for the rest."""
    tabs = len(lead) - len(lead.lstrip("\t"))
    tabs = min(tabs, width // 8)
    return "\t" * tabs + " " * (width - 8 * tabs)


def paren_columns(line, segs_kinds):
    """The '(' and ')' of LINE's code, as (visual column, char)."""
    out = []
    col = 0
    for kind, seg in segs_kinds:
        for c in seg:
            if kind == "code" and c in "()":
                out.append((col, c))
            col = (col // 8 + 1) * 8 if c == "\t" else col + 1
    return out


def new_name(t):
    """The runtime's name for T (kbox_x, kbox__x: kr_x; KBOX_X, KBOX__X: KR_X)."""
    if t.startswith("kbox__"):
        return "kr_" + t[6:]
    if t.startswith("kbox_"):
        return "kr_" + t[5:]
    if t.startswith("KBOX__"):
        return "KR_" + t[6:]
    return "KR_" + t[5:]


FAMILY = re.compile(r"\b((?:kbox_|KBOX_)[A-Za-z0-9_]*_)\*")


def families(runtime, others):
    """A comment's "KBOX_LIMIT_*": each old spelling of a prefix of the
    runtime's new names (RUNTIME: kr_x, KR_X) that no name of OTHERS
    (public, internal) starts with, and its new spelling."""
    out = {}
    for new in runtime:
        for i in range(3, len(new)):
            if new[i] != "_":
                continue
            pre = new[: i + 1]
            olds = ("kbox_" + pre[3:], "kbox__" + pre[3:]) if pre.startswith("kr_") else \
                   ("KBOX_" + pre[3:], "KBOX__" + pre[3:])
            for old in olds:
                if old not in out and not any(o.startswith(old) for o in others):
                    out[old] = pre
    return out


def rename_c(text, table, calls, path, visible=frozenset(), family=None):
    """TEXT with TABLE's names renamed in code and comments (never in
    literals), CALLS rewritten, and continuation lines realigned.  A name
    in VISIBLE is also one users see (an environment variable): in a
    comment, "$NAME" is left as it is, and each rename is reported."""
    rx = None
    if table:
        rx = re.compile(r"(\$?)\b(" + "|".join(sorted(map(re.escape, table), key=len, reverse=True)) + r")\b")
    elif family:
        rx = re.compile(r"(?!)()()")  # nothing; only the families of comments

    def in_comment(m, lineno):
        dollar, name = m.group(1), m.group(2)
        if name in visible:
            if dollar:
                return m.group(0)
            print(f"note: {path}:{lineno}: {name} in a comment became {table[name]}: "
                  "check that it means the C name", file=sys.stderr)
        return dollar + table[name]

    def comment(s, lineno):
        s = rx.sub(lambda m: in_comment(m, lineno), s)
        if family:
            s = FAMILY.sub(lambda m: family.get(m.group(1), m.group(1)) + "*", s)
        return s

    def in_code(m):
        return m.group(1) + table[m.group(2)]
    if calls:
        text = rewrite_calls(text, path)
    if rx is None:
        return text
    old_lines = text.split("\n")
    # lex the whole text once, then cut it into lines with their kinds
    segs = segments(text)
    lines = [[]]
    for kind, seg in segs:
        parts = seg.split("\n")
        for k, part in enumerate(parts):
            if k:
                lines.append([])
            if part:
                lines[-1].append((kind, part))
    assert len(lines) == len(old_lines)
    stack = []  # open parens: (old column, new column)
    out = []
    for lineno, segs_kinds in enumerate(lines, 1):
        old_line = "".join(s for _, s in segs_kinds)
        new_kinds = [
            (kind, s if kind == "string" else
             rx.sub(in_code, s) if kind == "code" else
             comment(s, lineno))
            for kind, s in segs_kinds
        ]
        new_line = "".join(s for _, s in new_kinds)
        lead = old_line[: len(old_line) - len(old_line.lstrip(" \t"))]
        # a continuation line aligned under an open paren that moved
        if stack and old_line.strip() and visual(lead) == stack[-1][0] + 1:
            shift = stack[-1][1] - stack[-1][0]
            if shift:
                new_lead = indent_to(lead, visual(lead) + shift)
                new_line = new_lead + new_line[len(lead):]
                new_kinds[0] = (new_kinds[0][0], new_lead + new_kinds[0][1][len(lead):])
        old_parens = paren_columns(old_line, segs_kinds)
        new_parens = paren_columns(new_line, new_kinds)
        if len(old_parens) == len(new_parens):
            for (oc, ch), (nc, _) in zip(old_parens, new_parens):
                if ch == "(":
                    stack.append((oc, nc))
                elif stack:
                    stack.pop()
        # a statement ends: nothing is open any more (recovers from
        # parentheses that #if branches leave unbalanced)
        code_end = "".join(s for k, s in segs_kinds if k != "comment").rstrip()
        if code_end.endswith((";", "{", "}")):
            stack = []
        out.append(new_line)
    return "\n".join(out)


def call_args(text, open_at):
    """The arguments of the call whose '(' is at OPEN_AT, and the index
    after its ')': split at top-level commas, or None."""
    depth, i, start, args = 0, open_at, open_at + 1, []
    segs_end = len(text)
    while i < segs_end:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < segs_end and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i].strip())
                return args, i + 1
        elif c == "," and depth == 1:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    return None


def rewrite_calls(text, path):
    """cli_utf8(S) -> kx_utf8_valid_str(S); cli_fmt_bytes(N, BUF, SIZE) ->
    kx_fmt_bytes(BUF, SIZE, N); cli_ws_create_temp(P, "x", N, S) ->
    kx_temp_open(P, ".kbox-x-", 0644, N, S).  Only in code."""
    rx = re.compile(r"\b(" + "|".join(CALLS) + r")\s*\(")
    # work on the whole text, skipping matches inside comments and literals
    pos, kinds = 0, []
    for kind, seg in segments(text):
        kinds.append((pos, pos + len(seg), kind))
        pos += len(seg)

    def kind_at(i):
        for a, b, k in kinds:
            if a <= i < b:
                return k
        return "code"

    res, last = [], 0
    for m in rx.finditer(text):
        if m.start() < last or kind_at(m.start()) != "code":
            continue
        # the declaration in cli.h's TEMPORARY block goes with the block
        line_start = text.rfind("\n", 0, m.start()) + 1
        if text[line_start:m.start()].lstrip().startswith(("#define", "static inline")):
            continue
        got = call_args(text, m.end() - 1)
        if not got:
            problem(f"{path}: cannot read the call {m.group(0)}...")
            continue
        args, end = got
        name = m.group(1)
        new = None
        if name == "cli_utf8" and len(args) == 1:
            new = f"kx_utf8_valid_str({args[0]})"
        elif name == "cli_fmt_bytes" and len(args) == 3:
            new = f"kx_fmt_bytes({args[1]}, {args[2]}, {args[0]})"
        elif name == "cli_ws_create_temp" and len(args) == 4 and re.fullmatch(r'"[a-z0-9_-]*"', args[1]):
            new = f'kx_temp_open({args[0]}, ".kbox-{args[1][1:-1]}-", 0644, {args[2]}, {args[3]})'
        if new is None:
            line = text.count("\n", 0, m.start()) + 1
            problem(f"{path}:{line}: rewrite this {name}(...) by hand (see rename-runtime.py)")
            continue
        res.append(text[last:m.start()])
        res.append(new)
        last = end
    res.append(text[last:])
    return "".join(res)


def drop_temporary(text):
    """TEXT without its /* TEMPORARY ... END TEMPORARY */ block."""
    return re.sub(r"\n/\* TEMPORARY\b.*?/\* END TEMPORARY \*/\n(\n)?", "\n", text, flags=re.S)


def rename_md(text, table):
    """Rename TABLE's names inside the `code spans` of a Markdown TEXT."""
    if not table:
        return text
    rx = re.compile(r"\b(" + "|".join(sorted(map(re.escape, table), key=len, reverse=True)) + r")\b")
    return re.sub(r"`[^`\n]+`", lambda m: rx.sub(lambda n: table[n.group(1)], m.group(0)), text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--phases", default="moved,common,runtime")
    ap.add_argument("--paths", nargs="*")
    a = ap.parse_args()
    phases = set(a.phases.split(","))
    if phases - {"moved", "common", "runtime"}:
        sys.exit("rename-runtime.py: phases are moved, common, runtime")
    top = top_dir()
    files = tracked_files(top)
    cache = {}

    def texts(p):
        if p not in cache:
            cache[p] = read(top, p)
        return cache[p]

    def selected(p):
        if not a.paths:
            return True
        return any(p == q.rstrip("/") or p.startswith(q.rstrip("/") + "/") for q in a.paths)

    # the phases in order, each on what the one before left (in memory)
    if "moved" in phases:
        for p in files:
            # src/'s subdirectories but the common module: the runtime, the
            # front ends, kbox-http (tests of libkbox keep its internals)
            if not (is_c(p) and p.startswith("src/") and p.count("/") >= 2) or not selected(p):
                continue
            if p.startswith("src/common/"):
                continue
            t = rename_c(texts(p), MOVED, False, p)
            if p.startswith("src/runtime/"):
                t = t.replace('#include "private.h"\n', '#include "runtime/runtime.h"\n')
            cache[p] = t
    if "common" in phases:
        for p in files:
            if not rewritten(p) or p == "HACKING.md" or not selected(p):
                continue
            t = texts(p)
            if p in TEMPORARY_FILES:
                t = drop_temporary(t)
            cache[p] = rename_c(t, COMMON, True, p)
    mapping = {}
    if "runtime" in phases:
        mapping = derive(top, files, texts)
        family = families(derive.runtime, derive.others)
        # names users see too: environment variables (in man pages, the
        # README, or a string of the code)
        visible = set()
        rxv = re.compile(r"\b(" + "|".join(map(re.escape, mapping)) + r")\b") if mapping else None
        for p in files:
            if not rxv:
                break
            if p.startswith("man/") or p == "README.md":
                visible.update(rxv.findall(texts(p)))
            elif is_c(p) and rewritten(p):
                for kind, seg in segments(texts(p)):
                    if kind == "string":
                        visible.update(rxv.findall(seg))
        if a.list:
            for old, new in sorted(mapping.items()):
                print(f"{old} {new}")
        for p in files:
            if not rewritten(p) or not selected(p):
                continue
            if p == "HACKING.md":
                cache[p] = rename_md(texts(p), mapping)
            else:
                cache[p] = rename_c(texts(p), mapping, False, p, visible, family)
        for name in sorted(visible):
            print(f"note: {name} is also a name users see (man/, README.md or a string):"
                  f" {mapping[name]} in code, left as it is in strings, man pages and $"
                  f"{name} in comments", file=sys.stderr)

    # what must be gone once every phase ran on the whole tree
    if phases == {"moved", "common", "runtime"} and not a.paths:
        gone = set(COMMON) | set(CALLS) | set(mapping)
        for p in files:
            if not rewritten(p) or p == "HACKING.md":
                continue
            left = code_tokens(texts(p)) & gone
            if left:
                problem(f"{p}: still uses {', '.join(sorted(left))}")
            if p.startswith("src/") and not is_libkbox(p):
                left = {t for t in code_tokens(texts(p)) if t.startswith(("kbox__", "KBOX__"))}
                if left:
                    problem(f"{p}: libkbox internals outside libkbox: {', '.join(sorted(left))}"
                            " (the runtime uses libkbox's public API and src/common only)")

    changed = []
    for p, t in sorted(cache.items()):
        if t != read(top, p):
            changed.append(p)
            if not a.dry_run:
                with open(os.path.join(top, p), "w", encoding="utf-8") as f:
                    f.write(t)
    for p in changed:
        print(("would change " if a.dry_run else "changed ") + p)
    if not changed:
        print("nothing to change")
    for msg in problems:
        print("rename-runtime.py: " + msg, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

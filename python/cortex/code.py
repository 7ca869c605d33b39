"""Code references in memory text: file paths, ``module.function`` names and backticked
identifiers (issue 12, item 6).

An agent's notes name the code they are about ("the bug was in `auth/middleware.ts`",
"`verify_token` skipped the expiry check", "see src/db/pool.py:88"). :func:`extract`
reads them from a memory's content when it is written; the store keeps them in the
``memory_code`` table (one row per memory and reference, with a lower-cased `key` that
filters match), so that ``Options(code="auth/middleware.ts")`` finds the memories that
reference a file, ``code="auth/*"`` those under a folder, each result lists its
references (``Result.related["code"]``) and a query naming a file finds the memories
that name it. Deterministic, local and cheap: a few regular expressions, no parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CODE_EXTENSIONS",
    "CodeRef",
    "code_clause",
    "extract",
    "key_of",
    "named_in_query",
    "write_refs",
]

#: Extensions of files a note can name (source, configuration, build, docs, data).
CODE_EXTENSIONS = frozenset(
    {"py", "pyi", "ts", "tsx", "js", "jsx", "mjs", "cjs", "go", "rs", "java", "kt", "kts",
     "rb", "php", "c", "h", "cc", "cpp", "hpp", "cs", "swift", "m", "mm", "scala", "lua",
     "ex", "exs", "erl", "hs", "clj", "dart", "r", "jl", "sh", "bash", "zsh", "ps1", "sql",
     "proto", "graphql", "gql", "vue", "svelte", "css", "scss", "sass", "less", "html",
     "htm", "md", "mdx", "rst", "json", "jsonl", "yaml", "yml", "toml", "ini", "cfg", "conf",
     "env", "xml", "tf", "tfvars", "hcl", "gradle", "lock", "mod", "sum", "txt", "csv",
     "ipynb", "dockerfile", "mk", "cmake", "nix", "zig", "sol", "pl", "pm", "vim", "el"}
)  # fmt: skip
#: Files named without an extension that are code all the same.
_BARE_FILES = frozenset(
    {"Dockerfile", "Makefile", "Procfile", "Gemfile", "Rakefile", "Jenkinsfile",
     "Vagrantfile", "Justfile", "Brewfile", "CMakeLists.txt", ".env", ".gitignore",
     ".dockerignore", ".editorconfig", ".bashrc", ".zshrc"}
)  # fmt: skip
#: Products written like files or dotted names (Node.js), and abbreviations (e.g.).
_NOT_CODE = frozenset(
    {"node.js", "vue.js", "next.js", "nuxt.js", "express.js", "three.js", "d3.js",
     "chart.js", "ember.js", "backbone.js", "socket.io", "asp.net", "ado.net", "e.g", "i.e",
     "a.k.a", "vs.", "etc.", "u.s", "ph.d", "p.s"}
)  # fmt: skip
#: Last parts of a dotted name that make it a host name (docs.python.org), not code.
_TLDS = frozenset(
    {"com", "org", "net", "io", "dev", "ai", "co", "uk", "de", "fr", "jp", "cn", "app",
     "gov", "edu", "info", "me", "us", "eu", "ca", "au", "ru", "in", "nl", "ch", "se", "cloud",
     "sh", "xyz", "tech", "site", "local", "internal", "localhost"}
)  # fmt: skip

#: The most references kept for one memory (a pasted listing names hundreds).
MAX_REFS = 64

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
# A path: optional drive or ./ ../ ~/ start, segments joined by / (or \), a last segment
# with an extension; then an optional :line or :line:col (or #L12).
_PATH = re.compile(
    r"(?<![\w/.\\-])"
    r"((?:[A-Za-z]:[\\/]|\.{1,2}/|~/|/)?(?:[\w@+-][\w.@+-]*[\\/])*"
    r"(?:[\w@+-][\w.@+-]*\.([A-Za-z][A-Za-z0-9]{0,9})|"
    + "|".join(re.escape(n) for n in sorted(_BARE_FILES, key=len, reverse=True))
    + r"))"
    r"(?::(\d{1,7})(?::\d{1,5})?|#L(\d{1,7}))?"
    r"(?![\w/\\-]|\.[A-Za-z0-9])"
)
# A dotted name: identifiers joined by . (os.path.join, AuthService.login) or :: (Rust, C++).
_DOTTED = re.compile(
    r"(?<![\w.:/-])([A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)+)(\(\))?"
    r"(?![\w/-]|\.[A-Za-z_])"
)
#: What is stripped from both ends of a word before it is matched as code.
_EDGES = "()[]{}<>'\",;|=!?*"
#: What every path or dotted name the word loop of `extract` keeps holds: a dot before a
#: letter (an extension, a dotted name, .env), `::` (Rust, C++) or "file" (Makefile and
#: the other bare file names). Text without any of them names no code outside backticks.
#: (The dot is searched apart: an alternation loses the regex engine's literal-prefix
#: scan; 10k SciFact abstracts 0.027 -> 0.021 CPU-s.)
_DOT_LETTER = re.compile(r"\.[A-Za-z_]")
#: The same three marks in one pattern, for the words of a text that passed that scan.
_MARK = re.compile(r"\.[A-Za-z_]|::|file")
#: A run of non-space characters (what str.split() keeps; both use str.isspace).
_RUN = re.compile(r"\S*")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|#)[A-Za-z_$][\w$]*)*")
_CALL = re.compile(r"^([A-Za-z_$][\w$.:#]*)\(.*\)$")


@dataclass(frozen=True, slots=True)
class CodeRef:
    """One reference: `ref` as written (a path without its line), `kind` "file" or
    "symbol", and the line a path named (``src/x.py:12``), if any."""

    ref: str
    kind: str
    line: int | None = None

    @property
    def key(self) -> str:
        return key_of(self.ref)

    @property
    def name(self) -> str:
        """The last part of the key (a file's name, a dotted name's last identifier):
        what the ``memory_code_name`` index finds references by."""
        return _file_name(self.key) if self.kind == "file" else _symbol_name(self.key)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ref": self.ref, "kind": self.kind}
        if self.line is not None:
            out["line"] = self.line
        return out


def _file_name(key: str) -> str:
    return key.rsplit("/", 1)[-1]


def _symbol_name(key: str) -> str:
    return re.split(r"\.|::|#", key)[-1]


def key_of(ref: str) -> str:
    """What references are matched by: lower case, / for \\, without a leading ./"""
    key = ref.strip().replace("\\", "/").lower()
    while key.startswith("./"):
        key = key[2:]
    return key


def _file(text: str, ext: str | None) -> bool:
    if text.lower() in _NOT_CODE:
        return False
    name = text.replace("\\", "/").rsplit("/", 1)[-1]
    if name in _BARE_FILES:
        return True
    if ext is None or ext.lower() not in CODE_EXTENSIONS:
        return False
    if all(len(part) <= 1 for part in name.split(".")):
        return False  # initials: "J.R.R"
    if "/" not in text.replace("\\", "/") and ext.lower() in {"m", "r", "el", "pl", "txt"}:
        return len(name) > 4  # "I.m", "e.r" are no files; "notes.txt" is
    return True


def _symbol(name: str, called: bool) -> bool:
    lowered = name.lower()
    if lowered in _NOT_CODE or lowered.rstrip(".") in _NOT_CODE:
        return False
    parts = re.split(r"\.|::", name)
    if "::" not in name and parts[-1].lower() in _TLDS and not called:
        return False  # a host name
    if all(len(p) == 1 for p in parts):
        return False  # initials: "J.R.R"
    # two sentences without a space ("It ended.Then") are no name
    run_on = (
        len(parts) == 2
        and not called
        and parts[0].isalpha()
        and parts[0].islower()
        and parts[1][:1].isupper()
        and (len(parts[1]) == 1 or parts[1][1:].islower())
    )
    return not run_on


def extract(content: str) -> list[CodeRef]:
    """The code references in `content`, in order of first appearance, without repeats
    (one per key; a path's first line number is kept). URLs are not read."""
    if "`" not in content and not (
        "::" in content or "file" in content or _DOT_LETTER.search(content) is not None
    ):
        return []  # most prose (see below), without the work of reading it
    found: dict[str, CodeRef] = {}

    def keep(ref: CodeRef) -> None:
        if len(found) < MAX_REFS and ref.ref and ref.key not in found:
            found[ref.key] = ref

    text = _URL.sub(" ", content) if "://" in content else content
    spans: list[tuple[int, CodeRef]] = []
    ticked = "`" in text
    for m in _BACKTICK.finditer(text) if ticked else ():
        inner = m.group(1).strip()
        call = _CALL.match(inner)
        if call:
            inner = call.group(1)
        if not inner or " " in inner:
            continue
        path = _PATH.fullmatch(inner)
        if path and _file(path.group(1), path.group(2)):
            line = path.group(3) or path.group(4)
            spans.append((m.start(), CodeRef(path.group(1), "file", int(line) if line else None)))
        elif _IDENT.fullmatch(inner) and inner.lower() not in _NOT_CODE:
            spans.append((m.start(), CodeRef(inner, "symbol")))
    plain = _BACKTICK.sub(lambda m: " " * len(m.group(0)), text) if ticked else text
    # Only words holding what every path or dotted name holds (see _MARK) can be code:
    # they are found from those marks by one scan in C (`_marked_words`) and each is
    # matched alone. The scan at the top already skipped most prose (94 % of SciFact's
    # abstracts); a Python loop over every word of the rest (str.split) took 0.045 of
    # the 0.052 CPU-s 10k abstracts cost, the marks' scan ~0.01.
    # A word without . / \\ : is code only as a bare file name, each of which holds "file"
    # ("profile" is most of those words: the strip is left to them).
    for at, raw in _marked_words(plain):
        if not ("." in raw or "/" in raw or "\\" in raw or ":" in raw) and (
            "file" not in raw or raw.strip(_EDGES) not in _BARE_FILES
        ):
            continue
        word = raw.strip(_EDGES)
        called = False
        if "(" in word:
            word, _, rest = word.partition("(")
            called = rest.startswith(")")
        word = word.rstrip(".:")
        if not word:
            continue
        path = _PATH.fullmatch(word)
        if path and _file(path.group(1), path.group(2)):
            line = path.group(3) or path.group(4)
            spans.append((at, CodeRef(path.group(1), "file", int(line) if line else None)))
            continue
        dotted = _DOTTED.fullmatch(word)
        if dotted and _symbol(dotted.group(1), called):
            spans.append((at, CodeRef(dotted.group(1), "symbol")))
    for _, ref in sorted(spans, key=lambda s: s[0]):
        keep(ref)
    return list(found.values())


def _marked_words(text: str) -> Iterator[tuple[int, str]]:
    """(start, word) of each word of `text` (a run of non-space characters, as str.split
    cuts them) that holds a mark (_MARK), in order: each found from its first mark, its
    start by the same match run over the reversed text."""
    back = ""
    end = 0
    for m in _MARK.finditer(text):
        at = m.start()
        if at < end:  # another mark of the word just given
            continue
        if not back:
            back = text[::-1]
        # the run before the mark, read backwards: back[len - at:] is text[:at] reversed
        start = len(text) - _RUN.match(back, len(text) - at).end()  # type: ignore[union-attr]
        end = _RUN.match(text, at).end()  # type: ignore[union-attr]
        yield start, text[start:end]


def named_in_query(query: str) -> list[str]:
    """The keys of the files a query names ("what broke in auth/middleware.ts?"): a query
    that names a file also finds the memories that reference it."""
    return [r.key for r in extract(query) if r.kind == "file"]


def write_refs(tx: Any, rows: Iterable[tuple[int, str]], *, replace: bool = True) -> None:
    """Store the references of each (memory id, content) in ``memory_code`` (SQLite);
    `replace` first drops the memory's old ones (an update, a re-import, a reindex)."""
    rows = list(rows)
    if replace and rows:
        tx.executemany("DELETE FROM memory_code WHERE memory_id = ?", [(i,) for i, _ in rows])
    tx.executemany(
        "INSERT OR IGNORE INTO memory_code (memory_id, ref, key, name, kind, line)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [
            (memory_id, r.ref, r.key, r.name, r.kind, r.line)
            for memory_id, content in rows
            for r in extract(content)
        ],
    )


def code_clause(code: str, alias: str, mark: str = "?") -> tuple[str, list[Any]]:
    """The predicate "memory `alias` references `code`" and its parameters: a path or
    name matches itself and any longer one it ends at a / . or : (``middleware.ts``
    matches ``src/auth/middleware.ts``; ``verify_token`` matches ``auth.verify_token``); a
    trailing ``*`` matches by prefix, at the start of a reference or of one of its
    folders (``auth/*`` matches ``src/auth/session.py``). `mark` is the parameter marker."""
    key = key_of(code)
    if key.endswith("*"):
        prefix = key[:-1]
        if not prefix:
            sql = f"{alias}.id IN (SELECT memory_id FROM memory_code)"
            return sql, []
        sql = (
            f"{alias}.id IN (SELECT memory_id FROM memory_code WHERE"
            f" substr(key, 1, length({mark})) = {mark} OR instr(key, {mark}) > 0)"
        )
        return sql, [prefix, prefix, "/" + prefix]
    # Every reference `code` matches shares its last part (found through the index on
    # name), as a file's name or as a dotted name's last identifier.
    sql = (
        f"{alias}.id IN (SELECT memory_id FROM memory_code WHERE name IN ({mark}, {mark})"
        f" AND (key = {mark} OR (length(key) > length({mark})"
        f" AND substr(key, -length({mark}) - 1) IN ({mark}, {mark}, {mark}))))"
    )
    return sql, [_file_name(key), _symbol_name(key), key, key, key, "/" + key, "." + key, ":" + key]


def refs_of(store: Any, ids: Sequence[int]) -> dict[int, list[CodeRef]]:
    """The stored references of each memory of `ids` (in order of first appearance)."""
    out: dict[int, list[CodeRef]] = {}
    for start in range(0, len(ids), 500):
        part = list(ids[start : start + 500])
        marks = ",".join("?" * len(part))
        for memory_id, ref, kind, line in store.query(
            f"SELECT memory_id, ref, kind, line FROM memory_code WHERE memory_id IN ({marks})"
            " ORDER BY memory_id, rowid",
            part,
        ):
            out.setdefault(int(memory_id), []).append(CodeRef(ref, kind, line))
    return out

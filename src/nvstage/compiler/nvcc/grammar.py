"""nvcc's command-line grammar: which words are options, which take a value, how it is spelt.

Read from the nvcc in use (``nvcc --help``, remembered on disk per nvcc binary), because the
option set moves between releases (13.5 added ``--stdlib``, ``--fmax-errors`` and the Tile
options; ``--sanitize`` became ``--fdevice-sanitize``). What the help text does not say was
found by trying nvcc 13.0 and 13.5 (tests/test_nvcc_args.py checks it against the live nvcc):

- a long name takes two dashes, a short one one dash: ``--arch`` and ``-gpu-architecture``
  are unknown options;
- a value follows as the next word or after ``=`` (``-o f``, ``-o=f``, ``--output-file=f``);
  a handful of short options also take it attached (``-O3``, ``-I.``, ``-DX``, ``-lm``), the
  others do not (``-ofile``, ``-archsm_90``, ``-MFx.d`` are unknown options);
- a value is taken whatever it looks like (``-Xcompiler -fPIC``);
- ``-MF`` and ``--qpp-config`` take a value although the help shows none;
- a repeated single-value option keeps its last value (nvcc warns), a list option (``<x>,...``)
  accumulates; ``--`` is not an end-of-options marker but an unknown option.

Parsing keeps every word exactly as given: what nvstage forwards to nvcc is what it was given.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass, field

from nvstage.errors import ToolMissing, UsageError

# Short options that also take their value glued on (``-O3``); tried on nvcc 13.0 and 13.5.
ATTACHED = frozenset({"-O", "-I", "-D", "-U", "-L", "-l", "-t", "-m"})
# Options that take a value although ``--help`` prints none after the name.
_VALUE_NOT_SHOWN = frozenset({"--dependency-output", "--qpp-config"})
# "--long <value>,...    (-short)": the short name in brackets; one option prints its long name
# twice instead (--no-align-double).
_LINE = re.compile(r"^(--[A-Za-z0-9_+-]+)(?:[ ]+(\S.*?))?[ ]{2,}(?:\((-[A-Za-z0-9_+-]+)\)|--\S+)"
                   r"\s*$")
# How large an options file nvstage reads to understand a command line; nvcc itself reads any.
MAX_OPTIONS_FILE = 1 << 20


@dataclass(frozen=True)
class Option:
    """One nvcc option as ``--help`` describes it."""

    long: str  # "--output-file"
    short: str | None  # "-o"
    value: str | None = None  # None: a flag; else the help's placeholder, e.g. "<file>"
    is_list: bool = False  # "<path>,...": comma lists, repeatable, values accumulate
    choices: tuple[str, ...] = ()  # {true|false}, [default,size,...]

    @property
    def takes_value(self) -> bool:
        return self.value is not None

    @property
    def name(self) -> str:
        """The name nvcc uses in its own messages ("optimize" for -O)."""
        return self.long[2:]


@dataclass(frozen=True)
class Arg:
    """One element of a command line: an option with its value, an input, or an unknown word.

    ``words`` are the command line's own words, one or two (``-o`` ``f``), unchanged."""

    words: tuple[str, ...]
    option: Option | None = None  # None: an input file, or an option nvcc does not know
    value: str | None = None

    @property
    def is_input(self) -> bool:
        return self.option is None and not self.words[0].startswith("-")

    @property
    def is_unknown(self) -> bool:
        return self.option is None and self.words[0].startswith("-")

    def is_(self, *names: str) -> bool:
        """Whether this is the option known by any of ``names`` (long or short)."""
        return self.option is not None and (self.option.long in names
                                            or self.option.short in names)


@dataclass(frozen=True)
class Grammar:
    options: tuple[Option, ...]
    by_name: dict[str, Option] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        for o in self.options:
            self.by_name[o.long] = o
            if o.short:
                self.by_name[o.short] = o

    @classmethod
    def from_help(cls, text: str) -> Grammar:
        """The options of ``nvcc --help`` (pure: tested on captured help texts)."""
        out = []
        for line in text.splitlines():
            m = _LINE.match(line)
            if not m:
                continue
            long, value, short = m.group(1), m.group(2), m.group(3)
            if value is None and long in _VALUE_NOT_SHOWN:
                value = "<file>"
            out.append(_option(long, short, value))
        if len(out) < 20:
            raise ValueError("this is not nvcc's --help text: too few options in it")
        return cls(tuple(out))

    def to_json(self) -> list[dict]:
        return [{"long": o.long, "short": o.short, "value": o.value, "is_list": o.is_list,
                 "choices": list(o.choices)} for o in self.options]

    @classmethod
    def from_json(cls, items: list[dict]) -> Grammar:
        return cls(tuple(Option(d["long"], d["short"], d["value"], bool(d["is_list"]),
                                tuple(d["choices"])) for d in items))

    def lookup(self, word: str) -> tuple[Option, str | None] | None:
        """The option ``word`` starts with and its value if given in the same word
        (``-o=f``, ``-O3``); None when ``word`` is no option this nvcc knows."""
        name, eq, rest = word.partition("=")
        opt = self.by_name.get(name)
        if opt is not None and _spelt_right(opt, name):
            if eq:
                return (opt, rest) if opt.takes_value else None  # "-lineinfo=true": unknown
            return opt, None
        for short in ATTACHED:
            if word.startswith(short) and len(word) > len(short):
                opt = self.by_name.get(short)
                value = word[len(short):]
                # "-m64" is -m with 64; "-m32" and "-mfoo" are unknown options to nvcc.
                if opt is not None and (not opt.choices or value in opt.choices):
                    return opt, value
        return None

    def parse(self, argv: list[str]) -> list[Arg]:
        """Split a command line (without the program name) into options and inputs.

        An option that needs a value and is the last word is kept as an unknown word: nvcc
        will say "argument expected", and nvstage forwards it for nvcc to say so."""
        out: list[Arg] = []
        i = 0
        while i < len(argv):
            w = argv[i]
            found = self.lookup(w) if w.startswith("-") else None
            if found is None:
                out.append(Arg((w,)))
                i += 1
                continue
            opt, value = found
            if opt.takes_value and value is None:
                if i + 1 >= len(argv):
                    out.append(Arg((w,)))
                    i += 1
                    continue
                out.append(Arg((w, argv[i + 1]), opt, argv[i + 1]))
                i += 2
                continue
            out.append(Arg((w,), opt, value))
            i += 1
        return out


def _spelt_right(opt: Option, name: str) -> bool:
    # --gencode and -gpu-architecture are unknown to nvcc: the dashes must match the name.
    return name == opt.long or name == opt.short


def _option(long: str, short: str | None, value: str | None) -> Option:
    if value is None:
        return Option(long, short)
    choices: tuple[str, ...] = ()
    m = re.fullmatch(r"\{([^}]*)\}", value) or re.fullmatch(r"\[([^\]]*)\]", value)
    if m:
        choices = tuple(c for c in re.split(r"[|,]", m.group(1)) if c)
    return Option(long, short, value, value.endswith(",..."), choices)


def values(args: list[Arg], *names: str) -> list[str]:
    """Every value given to the option known by ``names``, list values split on commas."""
    out: list[str] = []
    for a in args:
        if a.is_(*names) and a.value is not None:
            out += a.value.split(",") if a.option.is_list else [a.value]
    return out


def last_value(args: list[Arg], *names: str) -> str | None:
    """nvcc's value for a single-value option: the last one given."""
    found = [a.value for a in args if a.is_(*names) and a.value is not None]
    return found[-1] if found else None


def split_options_file(text: str) -> list[str]:
    """Words of an ``--options-file``, split as nvcc splits them (tried on 13.0 and 13.5):
    blanks separate, double quotes group (and are dropped), a backslash keeps the next
    character; single quotes are ordinary characters."""
    words: list[str] = []
    cur: list[str] = []
    in_word = quoted = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i + 1])
            in_word = True
            i += 2
            continue
        if c == '"':
            quoted = not quoted
            in_word = True
        elif c.isspace() and not quoted:
            if in_word:
                words.append("".join(cur))
                cur, in_word = [], False
        else:
            cur.append(c)
            in_word = True
        i += 1
    if quoted:
        raise UsageError("an options file has an unterminated double quote",
                         hint="close the quote; nvcc rejects the file too")
    if in_word:
        words.append("".join(cur))
    return words


def expand_options_files(args: list[Arg], grammar: Grammar, cwd: str,
                         depth: int = 0) -> list[Arg]:
    """The command line with every ``--options-file``'s words in its place, for reading what a
    command means (the command nvcc runs keeps the option: nvcc reads the file itself)."""
    if depth > 8:
        raise UsageError("options files include each other more than 8 deep")
    out: list[Arg] = []
    for a in args:
        if not a.is_("--options-file") or a.value is None:
            out.append(a)
            continue
        for name in a.value.split(","):
            path = os.path.join(cwd, name)
            try:
                with open(path, "rb") as f:
                    if not os.path.isfile(path):
                        raise UsageError(f"options file {name} is not a regular file")
                    data = f.read(MAX_OPTIONS_FILE + 1)
            except OSError as e:
                raise UsageError(f"cannot read options file {name}: {e.strerror}") from None
            if len(data) > MAX_OPTIONS_FILE:
                raise UsageError(f"options file {name} is over {MAX_OPTIONS_FILE} bytes")
            words = split_options_file(data.decode(errors="replace"))
            out += expand_options_files(grammar.parse(words), grammar, cwd, depth + 1)
    return out


def grammar_for(nvcc: str) -> Grammar:
    """The grammar of this nvcc binary, from its ``--help``: asked once per binary (by path,
    size, mtime, inode and ctime, as tool versions are) and remembered on disk."""
    try:
        st = os.stat(nvcc)
    except OSError as e:
        raise UsageError(f"cannot read nvcc at {nvcc}: {e.strerror}") from None
    ident = f"{os.path.realpath(nvcc)}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}:{st.st_ctime_ns}"
    return _grammar(ident, nvcc)


@functools.lru_cache(maxsize=8)
def _grammar(ident: str, nvcc: str) -> Grammar:
    from nvstage import proc
    from nvstage.compiler.cache.local.tool_notes import set_tool_note, tool_note

    # Kept with the tool versions in the stage cache's sealed ``tools/`` notes; a note that
    # is missing, unsealed or not a grammar is worked out again from --help.
    name = f"help-{hashlib.sha256(ident.encode()).hexdigest()[:24]}"
    note = tool_note(name)
    if isinstance(note, dict):
        try:
            return Grammar.from_json(note["options"])
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
    try:
        text = proc.output([nvcc, "--help"], timeout=60)
        grammar = Grammar.from_help(text)
    except (ToolMissing, ValueError) as e:
        raise UsageError(f"cannot learn nvcc's options from {nvcc} --help: {e}",
                         hint="check --nvcc / $NVSTAGE_NVCC") from None
    set_tool_note(name, {"nvcc": nvcc, "options": grammar.to_json()})
    return grammar

"""The host compiler's words and variables that read or write a file no cache follows: a
command or stage that has one runs every time (the launcher runs it with plain nvcc, the
stage cache runs the stage, no command entry is made).

gcc may be told to read a response file (``-Xcompiler @FILE``), profile data, spec files and
plugins, and to write coverage notes, stack-usage, dump, split-DWARF and dependency files:
none of them is keyed or restored (the variables that do the same, ``key.side_env``: a key
cannot cover them). Standard library only.
"""

from __future__ import annotations

# The stages that run the host compiler.
HOST_STAGES = frozenset({"host-preprocess", "device-preprocess", "host-compile"})
_UNWATCHED = frozenset({"--coverage", "-ftest-coverage", "-fstack-usage", "-save-temps",
                        "-gsplit-dwarf", "-fcallgraph-info", "-aux-info", "-MD", "-MMD", "-MF",
                        "-fprofile-use", "-fauto-profile", "-specs", "-fplugin", "-B",
                        "-ftime-trace", "-fdump-passes",
                        # what -fprofile-use turns on: reads the object's .gcda all the same
                        "-fbranch-probabilities",
                        # search folders gcc orders in its own way (after every -I, and
                        # before the system folders whatever their place on the line): where
                        # a new header would hide one found there is not worked out
                        "-iprefix", "-iwithprefix", "-iwithprefixbefore"})
_UNWATCHED_PREFIX = ("-iprefix", "-iwithprefix", "-save-temps=", "-fdump-", "-fopt-info",
                     "-fprofile-use=", "-fauto-profile=", "-fprofile-dir=", "-specs=", "-fplugin=",
                     "-fcallgraph-info=", "-fsanitize-ignorelist=", "-fsanitize-blacklist=",
                     "-fprofile-sample-use", "-fprofile-instr-use", "-ftime-trace", "-B")
# Within -Wa, and -Wp, (-Wp,-D_FORTIFY_SOURCE=2 is common and harmless): a listing or a
# dependency file written, a response file read.
_UNWATCHED_PASSED = ("-a", "--MD", "-M", "@")
def unwatched_word(words) -> str | None:
    """The first of a host compiler's ``words`` (its arguments) that reads or writes a file
    neither a command entry nor the stage cache watches or restores; None when none."""
    for a in words:
        if a.startswith("@") or a in _UNWATCHED or a.startswith(_UNWATCHED_PREFIX):
            return a
        if a.startswith(("-Wa,", "-Wp,")) and \
                any(p.startswith(_UNWATCHED_PASSED) for p in a[4:].split(",")):
            return a
    return None

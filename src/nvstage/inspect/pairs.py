"""Which kernel of A is compared with which of B: the pairs a diff was asked for.

``--pair A=B`` (repeatable) names them; ``--kernel NAME`` is the pair NAME=NAME and
``--kernel A,B`` the pair A=B. A name is one ``show`` prints or the source spells
(``inspect.kernels.matches``: the mangled symbol, the signature, the bare name), so kernels of
one file, of two builds, and of two compilers (a Triton ``softmax_kernel`` with a CUDA
``softmax_forward_kernel``) pair alike. Nothing paired is said as such, with the names each
side has: never a diff of nothing read as "no change".
"""

from __future__ import annotations

from dataclasses import dataclass

from nvstage.errors import UsageError

SHOWN_NAMES = 8  # names listed per side in a "nothing paired" line


@dataclass(frozen=True)
class Pair:
    a: str  # a name of A's kernel, as given
    b: str

    def __str__(self) -> str:
        return self.a if self.a == self.b else f"{self.a}={self.b}"

    def to_json(self) -> dict:
        return {"a": self.a, "b": self.b}


def parse(pairs=(), kernel: str | None = None) -> list[Pair]:
    """The pairs of ``--pair A=B`` (each) and ``--kernel NAME[,NAME_B]``, in the order given;
    a ``UsageError`` for one that names no kernel on a side."""
    out: list[Pair] = []
    if kernel is not None:
        names = [n.strip() for n in kernel.split(",")]
        if len(names) > 2 or not all(names):
            raise UsageError(f"--kernel {kernel!r}: give NAME, or NAME_A,NAME_B",
                             hint="or --pair NAME_A=NAME_B (repeatable)")
        out.append(Pair(names[0], names[-1]))
    for text in pairs or ():
        a, eq, b = text.partition("=")
        a, b = a.strip(), b.strip()
        if not eq or not a or not b:
            raise UsageError(f"--pair {text!r}: give A=B, a kernel of A and one of B",
                             hint="e.g. --pair layernorm_forward_kernel3="
                                  "layernorm_forward_kernel4")
        out.append(Pair(a, b))
    return list(dict.fromkeys(out))


def names_line(names) -> str:
    """Kernel names for one line: the first ``SHOWN_NAMES``, then how many more."""
    names = list(dict.fromkeys(names))
    if not names:
        return "no kernels"
    head = ", ".join(names[:SHOWN_NAMES])
    more = len(names) - SHOWN_NAMES
    return head + (f" and {more} more" if more > 0 else "")


def nothing_paired(names_a, names_b, why: str = "") -> UsageError:
    """The error of a diff with no kernel on both sides: what each side has, and how to pair
    them."""
    names_a, names_b = list(dict.fromkeys(names_a)), list(dict.fromkeys(names_b))
    example = (f"--pair {names_a[0]}={names_b[0]}" if names_a and names_b else "--pair A=B")
    return UsageError(f"nothing paired{why}: A has {names_line(names_a)}; B has "
                      f"{names_line(names_b)}", hint=f"name the kernels to compare: {example}")


def no_such(side: str, name: str, names) -> UsageError:
    return UsageError(f"no kernel {name!r} in {side}: {side} has {names_line(names)}",
                      hint="give a name as nvstage show prints it, or as the source spells it")

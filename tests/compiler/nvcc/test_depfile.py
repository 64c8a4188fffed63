"""nvcc's dependency files, made from its preprocessed outputs, byte for byte as nvcc's own."""

import pytest

from nvstage import proc
from nvstage.compiler.nvcc.depfile import marked_files, render
from nvstage.compiler.nvcc.plan import StageKind, parse_dryrun


def test_markers_in_order_with_system_flags_and_escapes():
    text = (b'# 0 "a.cu"\n# 0 "<built-in>"\n# 1 "/usr/include/stdio.h" 1 3 4\n'
            b'# 2 "inc/u.h" 1\n# 5 "a.cu" 2\n# 1 "we\\"ird\\\\.h" 1\n')
    assert marked_files(text) == [("a.cu", False), ("/usr/include/stdio.h", True),
                                  ("inc/u.h", False), ('we"ird\\.h', False)]


def test_a_name_seen_before_is_skipped_only_where_the_line_would_be_skipped_anyway():
    # Lines that look like markers but are not (text after the name, no number) never add a
    # name, and a name first seen on such a line is still taken from a real marker later.
    text = (b'# 1 "a.cu"\n# 2 "x.h" junk\n# "y.h"\n#  3 "z.h"\n# 4 "x.h" 1 3\n'
            b'# 5 "a.cu" 2\n# 6 "q\\"r.h" 1\n# 7 "q\\"r.h" 2\n# 8 "y.h" 1\n')
    assert marked_files(text) == [("a.cu", False), ("x.h", True), ('q"r.h', False),
                                  ("y.h", False)]
    assert marked_files(text) == marked_files(bytes(text))  # read again: the same list


def test_render_layout():
    ii = [b'# 1 "a.cu"\n# 1 "s.h" 1 3\n# 1 "u.h" 1\n', b'# 1 "a.cu"\n# 1 "h.h" 1\n']
    assert render("a.o", ii) == "a.o : a.cu \\\n    s.h \\\n    u.h \\\n    h.h\n"
    assert render("a.o", ii, nonsystem=True, phony=True) == (
        "a.o : a.cu \\\n    u.h \\\n    h.h\n\nu.h:\n\nh.h:\n")


CASES = [
    ["-MD"], ["-MMD"], ["-MD", "-MP"], ["-MMD", "-MP", "-MT", "custom/target.o"],
    ["-MD", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
     "arch=compute_90,code=sm_90"],
]


@pytest.mark.parametrize("flags", CASES, ids=lambda f: " ".join(f))
def test_same_bytes_as_nvcc(toolkit, tmp_path, flags):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "user.h").write_text("#pragma once\n")
    (tmp_path / "dev_only.h").write_text("#pragma once\n")
    (tmp_path / "host_only.h").write_text("#pragma once\n")
    (tmp_path / "k.cu").write_text(
        '#include "user.h"\n#include <cstdio>\n#ifdef __CUDA_ARCH__\n#include "dev_only.h"\n'
        '#else\n#include "host_only.h"\n#endif\n__global__ void k() {}\n')
    args = ["-c", "k.cu", "-o", "k.o", "-Iinc", *flags, "-MF", "k.d"]
    if "-gencode" not in flags:
        args.append("-arch=sm_90")
    (tmp_path / "kk").mkdir()
    cp = proc.run([toolkit.nvcc, *args, "--keep", "--keep-dir", "kk"], cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    dry = proc.run([toolkit.nvcc, "--dryrun", *args, "--keep", "--keep-dir", "kk"],
                   cwd=tmp_path)
    plan = parse_dryrun(dry.stderr)
    ii = [s.outputs[0] for s in plan.stages if s.kind is StageKind.DEVICE_PREPROCESS]
    ii += [s.outputs[0] for s in plan.stages if s.kind is StageKind.HOST_PREPROCESS]
    target = flags[flags.index("-MT") + 1] if "-MT" in flags else "k.o"
    ours = render(target, [(tmp_path / p).read_bytes() for p in ii],
                  nonsystem="-MMD" in flags, phony="-MP" in flags)
    assert ours == (tmp_path / "k.d").read_text()

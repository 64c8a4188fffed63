"""CompileOptions: validation names what is allowed; flags come from a table; archs checked."""

import pytest

from nvstage.compiler import options as opts_mod
from nvstage.errors import ToolTimeout, UnknownArch, UsageError
from nvstage.compiler.options import CompileOptions, check_archs, supported_archs


def test_flags_follow_the_table_in_field_order():
    o = CompileOptions(archs=("sm_90",), gencodes=("arch=compute_80, code=sm_80",), rdc=True,
                       lto=True, include_dirs=("a b",), defines=('M="x y"',), extra=("-G",))
    assert o.nvcc_args() == ["-arch=sm_90", "-gencode", "arch=compute_80,code=sm_80",
                             "-rdc=true", "-I", "a b", "-D", 'M="x y"', "-dlto", "-G"]
    assert CompileOptions().nvcc_args() == []


@pytest.mark.parametrize("kw,err,match", [
    (dict(archs=("sm90",)), UnknownArch, "sm_90"),
    (dict(gencodes=("compute_90",)), UsageError, "arch=compute_90,code="),
    (dict(opt_level="4"), UsageError, "0, 1, 2 or 3"),
    (dict(stop="ptx", compile_only=True), UsageError, "choose one"),
])
def test_bad_options_say_what_is_allowed(kw, err, match):
    with pytest.raises(err) as e:
        CompileOptions(**kw)
    assert match in e.value.explain()


def test_an_unknown_arch_lists_the_real_ones(toolkit):
    with pytest.raises(UnknownArch, match="unsupported gpu architecture 'sm_52'") as e:
        check_archs(CompileOptions(archs=("sm_52",)), toolkit.nvcc)
    assert "sm_90" in e.value.hint
    check_archs(CompileOptions(archs=("native", "all")), toolkit.nvcc)  # nvcc judges those


def test_an_nvcc_that_does_not_answer_leaves_the_arch_check_to_nvcc(tmp_path, monkeypatch):
    def hang(argv, **kw):
        raise ToolTimeout("'nvcc' did not finish within 60 s")

    monkeypatch.setattr(opts_mod.proc, "output", hang)
    nvcc = str(tmp_path / "slow-nvcc")
    assert supported_archs(nvcc) == ()
    check_archs(CompileOptions(archs=("sm_90",)), nvcc)

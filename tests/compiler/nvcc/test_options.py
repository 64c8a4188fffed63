"""CompileOptions: validation names what is allowed; flags come from a table; archs checked."""

import pytest

from nvstage.compiler.nvcc import options as opts_mod
from nvstage.errors import ToolTimeout, UnknownArch, UsageError
from nvstage.compiler.nvcc.options import CompileOptions, check_archs, supported_archs


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


def test_several_archs_become_one_gencode_each():
    from nvstage.compiler.nvcc.options import CompileOptions

    assert CompileOptions(archs=("sm_90",)).nvcc_args() == ["-arch=sm_90"]
    assert CompileOptions(archs=("sm_80", "sm_90a", "compute_90")).nvcc_args() == [
        "-gencode", "arch=compute_80,code=[sm_80,compute_80]",
        "-gencode", "arch=compute_90a,code=[sm_90a,compute_90a]",
        "-gencode", "arch=compute_90,code=compute_90"]
    import pytest

    from nvstage.errors import UsageError

    with pytest.raises(UsageError, match="cannot be combined"):
        CompileOptions(archs=("native", "sm_90")).nvcc_args()


def test_arch_specific_and_family_targets_are_left_to_nvcc(toolkit):
    from nvstage.compiler.nvcc.options import CompileOptions, check_archs

    check_archs(CompileOptions(archs=("sm_90a", "sm_100f")), toolkit.nvcc)  # no error


def test_repeated_arch_builds_each(toolkit, kernels, tmp_path):
    from nvstage.compiler.pipeline.driver import compile
    from nvstage.compiler.nvcc.options import CompileOptions

    b = compile(kernels / "saxpy.cu", CompileOptions(archs=("sm_80", "sm_90"),
                                                      compile_only=True),
                cwd=tmp_path, cache=False)
    assert sorted(r.stage.arch for r in b.runs if r.stage.kind.value == "ptxas") == [
        "sm_80", "sm_90"]


def test_lto_targets_are_left_to_nvcc(toolkit, kernels, tmp_path):
    # nvcc's lists name no lto_NN, though it builds them: with compute_NN known, nvcc judges,
    # and its own refusal (lto without -rdc=true) is said in its words, not "unsupported".
    from nvstage.compiler.nvcc.options import CompileOptions, check_archs
    from nvstage.compiler.pipeline.driver import compile
    from nvstage.errors import PlanError

    check_archs(CompileOptions(archs=("lto_90",)), toolkit.nvcc)  # no error
    with pytest.raises(UnknownArch):
        check_archs(CompileOptions(archs=("lto_52",)), toolkit.nvcc)
    with pytest.raises(PlanError, match="unless '-rdc=true'"):
        compile(kernels / "vadd.cu",
                CompileOptions(extra=("-gencode", "arch=compute_90,code=lto_90", "-c")),
                toolkit=toolkit, cwd=tmp_path, cache=False)
    # With -dc it builds, as with nvcc.
    build = compile(kernels / "vadd.cu", CompileOptions(extra=("-arch=lto_90", "-dc")),
                    toolkit=toolkit, cwd=tmp_path, cache=False)
    assert build.status == "ok"

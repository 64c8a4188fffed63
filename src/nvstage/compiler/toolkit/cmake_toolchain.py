"""A CMake toolchain file for the toolkit nvstage uses (``nvstage doctor --cmake-toolchain``).

An unchanged project that calls ``find_package(CUDAToolkit)`` and links ``CUDA::cudart``
configures and builds with ``-DCMAKE_TOOLCHAIN_FILE=FILE`` and nothing else, on the pip wheels
alone. The file names nvcc (``CMAKE_CUDA_COMPILER``) and the toolkit's root
(``CUDAToolkit_ROOT``), and tells FindCUDAToolkit where each library is that it would look
for by its unversioned name: the wheels ship ``libcudart.so.13``, ``libnvrtc.so.13``,
``libnvJitLink.so.13`` and no ``libcudart.so`` or ``lib/stubs`` (seen, CUDA 13.5 wheels with
CMake 4.4: ``Could NOT find CUDAToolkit (missing: CUDA_CUDART)`` without it). Nothing is
written beside the toolkit: the file points at the libraries as they are.

With ``launcher``, the file also puts nvstage in front of every step CMake can route through
a launcher, so the build log holds the whole build: ``CMAKE_CUDA_COMPILER_LAUNCHER``,
``CMAKE_CXX_COMPILER_LAUNCHER`` and ``CMAKE_C_COMPILER_LAUNCHER`` (compiles) and the global
property ``RULE_LAUNCH_LINK`` (device links, links, archives; CMake 4.4's
``CMAKE_CUDA_LINKER_LAUNCHER`` wraps neither ``nvcc -dlink`` nor the host link), outside
CMake's own try-compile checks (``IN_TRY_COMPILE``). A C or C++ launcher the user gave cmake
(ccache: ``-DCMAKE_CXX_COMPILER_LAUNCHER=ccache`` or that variable in the environment) stays,
after nvstage (``nvstage;ccache``): nvstage records the step, ccache caches it. CUDA's launcher
is nvstage alone (nvstage is its cache).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
import nvstage

from nvstage.errors import UsageError, WriteError
from nvstage import __version__

# FindCUDAToolkit's name for a library where it is not the file's (lib<file>.so.N).
_TARGET_NAMES = {"nvrtc-builtins": "nvrtc_builtins", "cufile": "cuFile",
                 "cufile_rdma": "cuFile_rdma", "nvidia-ml": "nvml"}
_VERSIONED = re.compile(r"^lib([\w+-]+)\.so\.(\d+)(\.\d+)*$")
# Characters a value cannot hold in a toolchain file: CMake splits lists on ";", and a
# bracket argument ends at "]==]".
_UNSAFE = re.compile(r"[;\n\r\0]|\]==\]")


@dataclass
class Toolchain:
    """The file as written: where, and what it says."""

    path: str
    nvcc: str
    root: str
    libraries: dict[str, str] = field(default_factory=dict)  # FindCUDAToolkit name -> file
    launcher: list[str] | None = None  # the nvstage command put in front of each step
    missing: list[str] = field(default_factory=list)  # targets the toolkit cannot provide

    def to_json(self) -> dict:
        return {"path": self.path, "nvcc": self.nvcc, "cuda_toolkit_root": self.root,
                "libraries": self.libraries, "launcher": self.launcher,
                "missing": self.missing}


def library_dirs(root: str) -> list[str]:
    """The toolkit's library folders (``lib`` for the wheels, ``lib64`` for a system one)."""
    return [str(Path(root, d)) for d in ("lib64", "lib") if Path(root, d).is_dir()]


def versioned_only(root: str) -> dict[str, str]:
    """FindCUDAToolkit's name -> the library file, for each shared library the toolkit
    ships with a version in its name only (``libcudart.so.13`` and no ``libcudart.so``):
    what FindCUDAToolkit's unversioned search cannot find."""
    found: dict[str, str] = {}
    for folder in library_dirs(root):
        names = sorted(os.listdir(folder))
        for name in names:
            m = _VERSIONED.match(name)
            if not m or f"lib{m.group(1)}.so" in names:
                continue
            target = _TARGET_NAMES.get(m.group(1), m.group(1))
            found.setdefault(target, os.path.join(folder, name))
    return found


def nvstage_command() -> list[str]:
    """The nvstage a build should run: this Python, started without ``site``, on nvstage's
    ``cli/bare.py`` (a hit sooner in a virtual environment; that file says why)."""
    bare = os.path.join(os.path.dirname(os.path.abspath(nvstage.__file__)), "cli", "bare.py")
    return [sys.executable, "-S", "-P", bare]


def _checked(text: str, what: str) -> str:
    if _UNSAFE.search(text):
        raise UsageError(f"{what} {text!r} holds a character a CMake toolchain file cannot "
                         "carry (';', a newline or ']==]')",
                         hint="install the toolkit (or nvstage) under a plainer path")
    return text


def _value(text: str, what: str) -> str:
    """``text`` as a CMake bracket argument: taken as it is, blanks, quotes and $ included."""
    return f"[==[{_checked(text, what)}]==]"


def toolchain_text(nvcc: str, root: str, describe: str, *, launcher: list[str] | None,
                   libraries: dict[str, str]) -> tuple[str, list[str]]:
    """The file's text, and the FindCUDAToolkit targets it says the toolkit cannot provide."""
    lines = [f"# CMake toolchain file written by nvstage {__version__} (nvstage doctor "
             "--cmake-toolchain)",
             f"# for the toolkit nvstage uses: {describe}",
             "# use: cmake -DCMAKE_TOOLCHAIN_FILE=<this file> ...", "",
             f"set(CMAKE_CUDA_COMPILER {_value(nvcc, 'nvcc')} CACHE FILEPATH "
             "\"nvcc (nvstage doctor --cmake-toolchain)\")",
             f"set(CUDAToolkit_ROOT {_value(root, 'the toolkit root')} CACHE PATH "
             "\"the CUDA toolkit (nvstage doctor --cmake-toolchain)\")"]
    if libraries:
        lines += ["", "# FindCUDAToolkit looks for each library by its unversioned name; this "
                  "toolkit ships these", "# with a version in the name only:"]
        for name, path in sorted(libraries.items(), key=lambda kv: kv[0].lower()):
            var = "CUDA_CUDART" if name == "cudart" else f"CUDA_{name}_LIBRARY"
            lines.append(f"set({var} {_value(path, 'the library')} CACHE FILEPATH \"\")")
            if name == "cudart":
                lines.append(f"set(CUDA_cudart_LIBRARY {_value(path, 'the library')} CACHE "
                             "FILEPATH \"\")")
    missing = []
    if not any(Path(d, f).exists() for d in library_dirs(root)
               for f in ("libcuda.so", "stubs/libcuda.so")):
        missing.append("cuda_driver")
        lines += ["", "# CUDA::cuda_driver cannot come from this toolkit: it ships no "
                  "libcuda.so (the driver's library)", "# and no lib/stubs/libcuda.so. A "
                  "project that links CUDA::cuda_driver needs a machine with a CUDA", "# "
                  "driver, or a full toolkit's stubs (set CUDA_cuda_driver_LIBRARY to one)."]
    if launcher:
        # The launchers are lists (the interpreter, then its arguments): words joined by ";".
        # RULE_LAUNCH_LINK is text CMake puts before the command line a shell runs: its
        # words quoted for that shell.
        import shlex

        words = [_checked(w, "the nvstage command") for w in launcher]
        cmd = "[==[" + ";".join(words) + "]==]"
        link = "[==[" + " ".join(shlex.quote(w) for w in words) + "]==]"
        lines += ["", "# nvstage in front of every step CMake can route through it: compiles "
                  "(the launchers),", "# device links, links and archives (RULE_LAUNCH_LINK); "
                  "not in CMake's own try-compile checks.",
                  "get_property(_nvstage_in_try_compile GLOBAL PROPERTY IN_TRY_COMPILE)",
                  "if(NOT _nvstage_in_try_compile)",
                  f"  set(CMAKE_CUDA_COMPILER_LAUNCHER {cmd})",
                  "  # A C or C++ launcher given to cmake (-DCMAKE_CXX_COMPILER_LAUNCHER=ccache, "
                  "or that variable", "  # in the environment) runs after nvstage, which "
                  "records the step and caches nothing of it.",
                  "  foreach(_nvstage_lang IN ITEMS CXX C)",
                  '    set(_nvstage_given "$CACHE{CMAKE_${_nvstage_lang}_COMPILER_LAUNCHER}")',
                  "    if(NOT _nvstage_given)",
                  '      set(_nvstage_given "$ENV{CMAKE_${_nvstage_lang}_COMPILER_LAUNCHER}")',
                  "    endif()",
                  f"    set(CMAKE_${{_nvstage_lang}}_COMPILER_LAUNCHER {cmd} ${{_nvstage_given}})",
                  "  endforeach()",
                  f"  set_property(GLOBAL PROPERTY RULE_LAUNCH_LINK {link})",
                  "endif()"]
    return "\n".join(lines) + "\n", missing


def write_cmake_toolchain(path: str | os.PathLike, *, launcher: bool = False, toolkit=None,
                          nvcc: str | None = None) -> Toolchain:
    """Write the toolchain file for ``toolkit`` (else ``nvcc``'s, else the one nvstage finds)
    to ``path``; with ``launcher``, nvstage in front of every step too."""
    from nvstage.files import is_folder, write_atomic
    from nvstage.compiler.toolkit.locate import find_toolkit

    if is_folder(path):
        raise UsageError(f"--cmake-toolchain {path} is a folder",
                         hint=f"give a file: --cmake-toolchain {Path(path) / 'nvstage.cmake'}")
    tk = toolkit or find_toolkit(nvcc)
    libraries = versioned_only(tk.root)
    command = nvstage_command() if launcher else None
    text, missing = toolchain_text(tk.nvcc, tk.root, tk.describe(), launcher=command,
                                   libraries=libraries)
    try:
        write_atomic(path, text)
    except WriteError as e:
        raise UsageError(e.message, hint=e.hint) from None
    return Toolchain(os.fspath(path), tk.nvcc, tk.root, libraries, command, missing)

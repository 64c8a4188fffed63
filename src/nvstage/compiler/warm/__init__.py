"""The whole-command hit: a command nvstage built before, answered from the cache with no
process started and the standard library alone (``answer``), and what that needs: its key
(``key``, ``nvcc_env``), the cache folder and key as the environment names them (``folder``),
the entry written after a miss (``entry``), the host compiler's words no entry can follow
(``host_flags``), ``nvstage compile``'s own command line (``compile_cli``) and the build
record's entry for a hit (``build_record``). Nothing here imports more of nvstage than
``fsio`` and ``paths``: ``tests/test_imports.py`` holds it to that.
"""

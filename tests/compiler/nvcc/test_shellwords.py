import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvstage.compiler.nvcc.shellwords import split
from nvstage.errors import ShellWordsError


def test_quotes_and_escapes():
    assert split('a "b c" \'d e\' f\\ g') == ["a", "b c", "d e", "f g"]
    assert split('"-DFATBINFILE=\\"x.c\\""') == ['-DFATBINFILE="x.c"']
    assert split('""') == [""]


def test_known_variables_expand_unknown_stay_literal():
    v = {"CICC_PATH": "/opt/nvvm/bin"}
    assert split('"$CICC_PATH/cicc" -o x', v) == ["/opt/nvvm/bin/cicc", "-o", "x"]
    assert split("${CICC_PATH}/cicc", v) == ["/opt/nvvm/bin/cicc"]
    # nvcc does not escape $ in file names: keep it, never evaluate it.
    assert split('"a $(touch pwned) b.cu"', v) == ["a $(touch pwned) b.cu"]
    assert split("'$CICC_PATH'", v) == ["$CICC_PATH"]


def test_unterminated_quote_is_a_clear_error():
    with pytest.raises(ShellWordsError, match="unterminated"):
        split('gcc "oops')


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                                 blacklist_characters="\x00"), max_size=12),
                max_size=6))
def test_round_trips_shlex_quoting(words):
    assert split(" ".join(shlex.quote(w) for w in words)) == words


@given(st.text(max_size=80))
def test_any_text_splits_or_raises_clearly(text):
    try:
        split(text, {"A": "1"})
    except ShellWordsError:
        pass

"""Hypothesis strategies of the JSON values the API accepts (invariant 15's property tests)."""

from __future__ import annotations

from hypothesis import strategies as st

# Any unicode (non-BMP too) but NUL, which Postgres refuses, and lone surrogates.
TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=12)


def json_values(max_leaves: int = 12):
    """JSON as the API accepts it: finite doubles (-0.0, 5e-324, 1e300 ...), integers within
    +-(2**53 - 1), TEXT in values and keys."""
    text = TEXT
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.sampled_from([-0.0, 1.0, 1e21, 1e300, 5e-324, 1.7976931348623157e308, 0.1 + 0.2])
        | text
    )
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4)
        ),
        max_leaves=max_leaves,
    )

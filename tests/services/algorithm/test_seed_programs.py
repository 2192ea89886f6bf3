"""Seed programs lose comments, docstrings and global variables (§3.3.1, App. C): services/algorithm/seed_programs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from services.algorithm.seed_programs import strip_seed_program


def test_comments_docstrings_globals_and_test_calls_go_definitions_and_imports_stay() -> None:
    source = textwrap.dedent('''\
        """Module docstring."""
        import math  # needed
        LIMIT = 10  # a global: removed


        class Box:
            """A box."""

            def size(self):
                """How big."""
                return 1

        def f(x):
            """Square root, capped."""
            # a comment
            return min(math.isqrt(x), 10)

        print(f(16))
        assert f(4) == 2
        ''')
    assert strip_seed_program(source) == textwrap.dedent('''\
        import math
        class Box:
            def size(self):
                return 1
        def f(x):
            return min(math.isqrt(x), 10)''')


def test_a_body_that_is_only_a_docstring_keeps_it() -> None:
    assert strip_seed_program('def f(x):\n    "only this"') == 'def f(x):\n    """only this"""'


def test_a_program_that_does_not_parse_is_left_for_the_executor() -> None:
    assert strip_seed_program("def f(x) return x") == "def f(x) return x"


def test_on_real_programs_only_the_added_clutter_goes(shared_dir: Path) -> None:
    """Every CRUXEval program with a comment, a global and a test call appended strips to the program alone."""
    rows = [json.loads(line) for line in (shared_dir / "data" / "cruxeval.jsonl").read_text().splitlines() if line]
    assert len(rows) == 500
    for row in rows:
        cluttered = row["code"] + "\n# a note\nLIMIT = 5\nprint(f(1))\n"
        assert strip_seed_program(cluttered) == strip_seed_program(row["code"]), row["id"]
        assert "LIMIT" not in strip_seed_program(cluttered)

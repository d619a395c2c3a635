"""scripts/measure/common.py's SASS check: which 16 B loads a round has in flight before its stores."""
import sys

from harness import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts" / "measure"))
from common import loads_in_flight  # noqa: E402

SASS = """\tFunction : copy
        /*0010*/   LDG.E.128 R4, [R2.64] ;
        /*0020*/   LDG.E.128 R8, [R2.64+0x200] ;
        /*0030*/   STL [R1], R4 ;
        /*0040*/   STG.E.128 [R6.64], R4 ;
        /*0050*/   LDG.E.128 R4, [R2.64+0x400] ;
\tFunction : reduce
        /*0010*/   LDG.E.128 R12, [R2.64] ;
"""


def test_loads_before_the_first_store_and_spills_are_per_function():
    dests, before, spills = loads_in_flight(SASS, "copy")
    assert dests == ["R4", "R8", "R4"] and before == ["R4", "R8"] and spills == 1
    assert loads_in_flight(SASS, "reduce") == (["R12"], ["R12"], 0)  # no store: every load counts

"""The IOPDDL contest's example instance (5 nodes, 5 edges, a usage limit of 50; its optimum
costs 445), as decoded JSON: the reader's and the search's smallest test
(``tests/python/test_iopddl.py``) and a base of the fault corpus's broken instances
(``shardwise.testing.faults``)."""

from __future__ import annotations

from typing import Any

EXAMPLE: dict[str, Any] = {
    "problem": {
        "name": "example",
        "nodes": {
            "intervals": [[30, 70], [40, 70], [50, 120], [110, 140], [110, 150]],
            "costs": [[15], [55, 65], [25, 45, 35], [85, 75], [95]],
            "usages": [[10], [25, 25], [15, 20, 15], [10, 10], [15]],
        },
        "edges": {
            "nodes": [[0, 1], [0, 2], [1, 3], [2, 4], [3, 4]],
            "costs": [[30, 40], [50, 10, 40], [90, 10, 20, 80], [60, 20, 30], [70, 60]],
        },
        "usage_limit": 50,
    }
}

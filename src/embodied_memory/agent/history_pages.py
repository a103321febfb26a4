"""Reading a history tool (person / waypoint observations) in pages: the store returns at most
``PAGE`` rows per call, so a long window is read page by page from one end."""
from __future__ import annotations

from typing import Any, Callable, Optional

from .tool_views import TOOLS

PAGE = int(TOOLS["person_observations"].arguments["limit"].limit.maximum)    # rows per call: the largest limit


def read_pages(call: Callable[[str, dict], Any], tool: str, args: dict, start: float, end: float, pages: int,
               order: str = "oldest", keep: Callable[[dict], bool] = lambda r: True,
               enough: Optional[int] = None) -> tuple[list[dict], bool]:
    """(the rows in [start, end] that ``keep`` accepts, oldest first; True if ``pages`` calls were
    not enough).  Read from the ``order`` end ("newest": the most recent first) until ``enough``
    rows are kept or the window is exhausted."""
    rows: list[dict] = []
    seen: set = set()
    for _ in range(pages):
        page = call(tool, {**args, "t_start": start, "t_end": end, "limit": PAGE, "order": order})
        new = [r for r in page if r.get("id") not in seen]
        seen.update(r.get("id") for r in new)
        rows += [r for r in new if keep(r)]
        if len(page) < PAGE or not new or (enough is not None and len(rows) >= enough):
            return sorted(rows, key=lambda r: r["t"]), False
        # times come rounded to ms: the next page overlaps this one a little, then dedupes
        if order == "oldest":
            start = max(start, page[-1]["t"] - 1e-3)
        else:
            end = min(end, page[-1]["t"] + 1e-3)
    return sorted(rows, key=lambda r: r["t"]), True

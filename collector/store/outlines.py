"""Session outlines kept between reads (Pages.session_outline). The web UI's session page
draws every step of a session (its lanes link to each one); assembling a 10,000-step outline
from its 30,000 spans costs ~0.8 s of CPU, and a person reading the session asks for it at each
step they open. A kept outline serves as long as the session's row says nothing was written to
it since (`updated_ns`: every ingest that touches a session sets it); what a person adds
without spans (feedback, step marks) is read fresh each time."""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

# steps of all kept outlines together: a kept step holds ~3 KB (a 10,000-step outline 30 MB, as
# assembled and compact), so two such sessions, or many short ones, are kept at a time
MAX_KEPT_STEPS = 20_000


@dataclass(frozen=True)
class KeptOutline:
    version: int | None  # the session row's updated_ns when it was read
    doc: dict[str, Any]  # the outline document, its steps compact (never changed once kept)
    raw_steps: dict[int, dict]  # each step as assembled, by index: a full step is filled from it
    span_ids: dict[int, str]  # each step's span id, by index


class Outlines:
    """The outlines of the sessions read last, up to MAX_KEPT_STEPS steps in all."""

    def __init__(self, max_steps: int = MAX_KEPT_STEPS):
        self._kept: OrderedDict[str, KeptOutline] = OrderedDict()
        self._lock = threading.Lock()
        self._max_steps = max_steps

    def get(self, session_id: str, version: int | None) -> KeptOutline | None:
        with self._lock:
            kept = self._kept.get(session_id)
            if kept is None or kept.version != version:
                return None
            self._kept.move_to_end(session_id)
            return kept

    def put(self, session_id: str, kept: KeptOutline) -> None:
        if len(kept.raw_steps) > self._max_steps:
            return
        with self._lock:
            self._kept[session_id] = kept
            self._kept.move_to_end(session_id)
            while sum(len(k.raw_steps) for k in self._kept.values()) > self._max_steps:
                self._kept.popitem(last=False)

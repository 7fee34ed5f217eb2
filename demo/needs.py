"""What a slip corrupts, so what an edit must decide to prevent it (:class:`Need`): the
fault injector (:mod:`tracefix.demo.faults`) asks it of the reading of an edit
(:class:`~tracefix.demo.edit_reader.Asks`)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .edit_reader import Asks


@dataclass
class Need:
    """What a slip corrupts, so what an edit must decide to prevent it. A model that reads an
    edit deciding the slot does what the edit says there, right or wrong, instead of slipping;
    whether the task then succeeds depends only on that action.

    ``kind`` is the slip (:data:`~tracefix.demo.scripted.KINDS`); ``tool`` the step's action,
    ``argument`` and ``shape`` the slot a wrong or dropped value sits in, ``values`` the true
    values a misread hides. ``target`` only labels the ground truth."""
    kind: str
    tool: str | None = None
    argument: str | None = None
    shape: str | None = None
    values: tuple = ()
    target: tuple = ()

    def met_by(self, asks: Asks | None) -> bool:
        if asks is None or asks.empty():
            return False
        if self.kind == "wrong_argument":
            return self.argument is not None and asks.decides(self.argument, self.shape)
        if self.kind == "missing_argument":
            return self.argument not in asks.omit and (
                self.argument in asks.include or asks.decides(self.argument, self.shape))
        if self.kind in ("skipped_action", "early_final_answer"):
            return asks.stop is False or (self.tool is not None and asks.asks_for(self.tool))
        if self.kind == "wrong_instruction":
            return bool(asks.source) or any(re.fullmatch(self.shape or r"\S+", v, re.I)
                                            for v in [*asks.values.values(), *(s.value for s in asks.free)])
        if self.kind == "vague_instruction":  # the action, where its values are, or a value it takes
            return bool(asks.source) or (self.tool is not None and asks.asks_for(self.tool)) or any(
                re.fullmatch(self.shape or "$^", v, re.I) for v in [*asks.values.values(), *(s.value for s in asks.free)])
        if self.kind == "misread_tool_result":
            stated = {str(v).upper() for v in [*asks.values.values(), *(s.value for s in asks.free)]}
            return asks.reread or asks.source.get("*") == "results" or any(
                str(v).upper() in stated for v in self.values)
        return False

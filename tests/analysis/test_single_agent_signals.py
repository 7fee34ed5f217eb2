"""One agent that plans, writes itself each instruction, acts and reports: the shape of most
apps. Its words-only steps end one piece of work and hand it the next, as a coordinator's
hand-overs do for a team, so the signals read the same faults as they do on a team."""
import json

from tracefix.analysis.evidence.unacted_claims import unacted_claims
from tracefix.analysis.graph import build_graph
from tracefix.analysis.evidence import find_symptoms
from tracefix.analysis.units import build_units


def _step(i, text="", calls=()):
    return {"index": i, "kind": "llm", "agent": "Wren", "output_message": {"role": "assistant", "content": text},
            "tool_calls": [dict(c) for c in calls]}


def _session(task, steps):
    """Each step's prompt holds the task and everything said and returned before it."""
    said = [{"role": "user", "content": task}]
    for step in steps:
        step["input_messages"] = list(said)
        said.append({"role": "assistant", "content": step["output_message"]["content"]})
        said += [{"role": "tool", "content": json.dumps(c["result"] if c["error"] is None else c["error"])}
                 for c in step["tool_calls"]]
    return {"steps": steps}


def _call(name, arguments, result=None, error=None):
    return {"name": name, "arguments": arguments, "result": result, "error": error}


SHELF = {"shelf": "sh-1", "boxes": [{"box": "bx-11", "color": "red"}, {"box": "bx-12", "color": "blue"}]}
CART = {"cart": "ct-4", "boxes": [{"box": "bx-40", "color": "green"}, {"box": "bx-41", "color": "white"}]}


def _lookups(report_on_cart):
    return _session("What is on shelf sh-1 and cart ct-4?", [
        _step(0, "Plan: 1. list shelf sh-1. 2. list cart ct-4. 3. answer."),
        _step(1, calls=[_call("list_shelf", {"shelf": "sh-1"}, SHELF)]),
        _step(2, "sh-1 holds bx-11 (red) and bx-12 (blue)."),
        _step(3, "Next: list cart ct-4, where bx-11 is to go."),
        _step(4, calls=[_call("list_cart", {"cart": "ct-4"}, CART)]),
        _step(5, report_on_cart),
        _step(6, "Shelf sh-1 and cart ct-4 are listed."),
    ])


def test_a_report_summarizes_the_calls_since_the_agents_last_words_not_all_its_calls():
    units = build_units(_lookups("ct-4 holds bx-40 (green) and bx-41 (white)."))
    # The shelf was reported at step 2: naming one of its boxes later leaves none of it out.
    assert [u.omitted for u in units] == [[]] * 7
    units = build_units(_lookups("ct-4 holds bx-40 (green)."))
    assert units[5].omitted == ["bx-41"]


def test_a_failure_claim_after_the_agents_own_instruction_goes_back_to_that_instruction():
    doc = _session("Move the red box of shelf sh-1 to cart ct-4.", [
        _step(0, "Plan: 1. list shelf sh-1. 2. move its red box to cart ct-4."),
        _step(1, calls=[_call("list_shelf", {"shelf": "sh-1"}, SHELF)]),
        _step(2, "sh-1 holds bx-11 (red) and bx-12 (blue)."),
        _step(3, "Next: carry on with the rest as discussed."),  # names nothing to act on
        _step(4, "FAILED: I could not tell what to move."),
        _step(5, "Sorry, nothing was moved."),
    ])
    first = find_symptoms(build_graph(build_units(doc)), failed=True)[0]
    assert (first.step, first.origin) == (4, 3), first


def test_a_claim_of_work_after_the_agents_own_instruction_with_no_call_is_unacted():
    move = _call("move", {"box": "bx-11", "to": "ct-4"}, {"ok": True})
    doc = _session("Move bx-11 and bx-12 to ct-4.", [
        _step(0, "Plan: 1. move bx-11 to ct-4. 2. move bx-12 to ct-4. 3. answer."),
        _step(1, calls=[move]),
        _step(2, "Done: bx-11 moved to ct-4."),
        _step(3, "Next: move bx-12 to ct-4."),
        _step(4, "Done: bx-12 moved to ct-4."),  # no call since its own instruction
        _step(5, "Done: both boxes are on ct-4."),  # the answer after its reports claims nothing new
    ])
    flags = unacted_claims(build_units(doc))
    assert [k for k, f in enumerate(flags) if f] == [4]


def test_a_lone_text_answer_that_brings_values_of_its_own_is_an_answer_not_a_failure():
    """One agent's tools mostly answer in JSON; the one that answers in a sentence is a
    failure returned as text only when it brings nothing the call did not pass."""
    look = _call("list_shelf", {"shelf": "sh-1"}, SHELF)
    till = _call("till", {"order": "ord-9"}, "ord-9 paid 153.40, refunded so far 0.00")
    paint = _call("paint", {"box": "bx-11"}, "paint: a colour is needed for bx-11")
    doc = _session("Check ord-9 and paint bx-11.", [
        _step(0, calls=[look]), _step(1, calls=[look]), _step(2, calls=[till]), _step(3, calls=[paint]),
        _step(4, "ord-9 is paid; bx-11 could not be painted."),
    ])
    assert [u.outcome for u in build_units(doc)][:4] == ["result", "result", "result", "error_result"]


def test_an_error_about_a_value_the_agent_said_it_would_act_on_goes_back_to_the_act_that_did_not():
    """A thought, then its call: the call is where the work on what the thought named was due."""
    doc = _session("Put bx-11 on cart ct-4, then ship ct-4.", [
        _step(0, "Plan: 1. put bx-11 on ct-4. 2. ship ct-4."),
        _step(1, "Next: put bx-11 on ct-4."),
        _step(2, calls=[_call("load", {"box": "bx-12", "cart": "ct-4"}, {"ok": True})]),  # the wrong box
        _step(3, "Loaded ct-4."),
        _step(4, "Next: ship ct-4."),
        _step(5, calls=[_call("ship", {"cart": "ct-4"}, error="ship: ct-4 is missing bx-11")]),
        _step(6, "Sorry, ct-4 could not be shipped."),
    ])
    first = find_symptoms(build_graph(build_units(doc)), failed=True)[0]
    assert (first.step, first.origin) == (5, 2), first


def test_an_agent_that_says_again_what_it_already_did_well_asks_the_same_thing_twice():
    from tracefix.analysis.evidence.repeated_handovers import repeated_handovers

    track = _call("track", {"parcel": "p-41"}, {"parcel": "p-41", "at": "depot"})
    doc = _session("Where are parcels p-41 and p-43?", [
        _step(0, "Next: where is parcel p-41 right now?"),
        _step(1, calls=[track]),
        _step(2, "p-41 is at the depot."),
        _step(3, "Next: where is parcel p-41 right now?"),  # p-43 was due
        _step(4, calls=[track]),
        _step(5, "p-41 is at the depot."),
        _step(6, "p-41 and p-43 are at the depot."),
    ])
    assert repeated_handovers(build_units(doc)) == {3: 0}


def test_an_error_about_a_value_the_agent_handed_itself_and_never_acted_on_goes_back_to_the_step_due():
    """The agent's result showed bx-11, its instruction named it, and the next step only said
    it was done; a later call fails for want of it: that next step is where it was due."""
    doc = _session("Put bx-11 on cart ct-4, then ship ct-4.", [
        _step(0, calls=[_call("list_shelf", {"shelf": "sh-1"}, SHELF)]),
        _step(1, "sh-1 holds bx-11 (red) and bx-12 (blue)."),  # the report of that result
        _step(2, "Next: put bx-11 on ct-4."),
        _step(3, "bx-11 is on ct-4."),  # said, not done
        _step(4, "Next: ship ct-4."),
        _step(5, calls=[_call("ship", {"cart": "ct-4"}, error="ship: ct-4 is missing bx-11")]),
        _step(6, "Sorry, ct-4 could not be shipped."),
    ])
    first = find_symptoms(build_graph(build_units(doc)), failed=True)[0]
    assert (first.step, first.origin) == (5, 3), first


def _put_and_ship(steps):
    return _session("Put the boxes of shelf sh-1 on cart ct-4, then ship ct-4.",
                    [_step(0, calls=[_call("list_shelf", {"shelf": "sh-1"}, SHELF)]),
                     _step(1, "sh-1 holds bx-11 (red) and bx-12 (blue).")] + steps)


def _load(box):
    return _call("load", {"box": box, "cart": "ct-4"}, {"ok": True})


SHIP_FAILS = _call("ship", {"cart": "ct-4"}, error="ship: ct-4 is missing bx-11")


def test_a_final_answer_that_relays_an_error_about_a_record_claims_no_work_on_it():
    """The answer names bx-11 only because the error did: it says the work failed, so the
    step that loaded bx-12 did not part from it."""
    doc = _put_and_ship([
        _step(2, "Next: put bx-11 on ct-4."),
        _step(3, "bx-11 is on ct-4."),  # said, not done
        _step(4, "Next: put bx-12 on ct-4."),
        _step(5, calls=[_load("bx-12")]),
        _step(6, "bx-12 is on ct-4."),
        _step(7, "Next: ship ct-4."),
        _step(8, calls=[SHIP_FAILS]),
        _step(9, "Sorry, blocked: ct-4 is missing bx-11."),
    ])
    units = build_units(doc)
    assert [u.answer_conflicts for u in units] == [[]] * 10
    first = find_symptoms(build_graph(units), failed=True)[0]
    assert (first.step, first.origin) == (8, 3), first


def test_an_instruction_the_agent_gives_itself_again_after_a_round_that_did_nothing_failed():
    """No call between the two sayings returned anything, so whatever the words after the
    first one say, that round failed, and its failure goes back to the instruction."""
    till = _call("till", {"order": "ord-9"}, {"order": "ord-9", "paid": "33.80"})
    doc = _session("Refund order ord-9 and tell the customer.", [
        _step(0, "Plan: 1. check what ord-9 paid. 2. refund ord-9. 3. reply."),
        _step(1, calls=[till]),
        _step(2, "ord-9 paid 33.80."),
        _step(3, "Next: take care of the next part of this ticket."),
        _step(4, "Stuck: no idea which part is meant."),
        _step(5, "Plan again: 1. refund ord-9. 2. reply."),
        _step(6, "Next: take care of the next part of this ticket."),
        _step(7, "Stuck: no idea which part is meant."),
        _step(8, "Sorry, this ticket is blocked."),
    ])
    units = build_units(doc)
    assert [k for k, u in enumerate(units) if u.round_failed] == [4, 5]
    first = find_symptoms(build_graph(units), failed=True)[0]
    assert (first.step, first.origin) == (4, 3), first


def test_an_error_about_a_reported_record_goes_back_to_the_instruction_that_handed_on_an_invented_one():
    """The report named bx-11; the agent's next instruction named bx-19, which no result
    showed, and no instruction ever named bx-11 again."""
    doc = _put_and_ship([
        _step(2, "Next: put bx-19 on ct-4."),
        _step(3, calls=[_load("bx-19")]),
        _step(4, "bx-19 is on ct-4."),
        _step(5, "Next: put bx-12 on ct-4."),
        _step(6, calls=[_load("bx-12")]),
        _step(7, "bx-12 is on ct-4."),
        _step(8, "Next: ship ct-4."),
        _step(9, calls=[SHIP_FAILS]),
        _step(10, "Sorry, ct-4 could not be shipped."),
    ])
    first = find_symptoms(build_graph(build_units(doc)), failed=True)[0]
    assert (first.step, first.origin) == (9, 2), first


def test_an_instruction_for_the_next_line_does_not_restate_the_count_of_the_last_one():
    """Line 1's reservation result names the order and its part; the instruction for line 2
    names the same order with line 2's count. The call that follows names another part in
    the result's part field, so it is about another record: nothing was misread."""
    def reserve(part, count, left):
        return _call("reserve", {"order": "ord-9", "part": part, "count": count},
                     {"order": "ord-9", "part": part, "count": count, "left": left})

    doc = _session("Reserve the parts of ord-9.", [
        _step(0, "Next: reserve 1 x pt-7a for ord-9."),
        _step(1, calls=[reserve("pt-7a", 1, 4)]),
        _step(2, "Reserved 1 x pt-7a for ord-9; 4 left."),
        _step(3, "Next: reserve 3 x pt-9c for ord-9."),
        _step(4, calls=[reserve("pt-9c", 3, 9)]),
        _step(5, "Reserved 3 x pt-9c for ord-9; 9 left."),
    ])
    assert [u.restated for u in build_units(doc)] == [[]] * 6

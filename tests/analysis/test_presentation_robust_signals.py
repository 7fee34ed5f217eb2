"""The analysis reads what happened, not how the app words or lays it out: a tool failure
returned as text, a failure report without failure words, and records written as prose
give the same evidence as a raised error, a "FAILED" report and JSON records."""
from tracefix.analysis.graph import build_graph
from tracefix.analysis.evidence import find_symptoms
from tracefix.analysis.conflicts import task_conflicts
from tracefix.analysis.records import text_records
from tracefix.analysis.agent_reports import misattributed_values, omitted_records
from tracefix.analysis.units import build_units


def _step(i, agent, text="", calls=()):
    return {"index": i, "kind": "llm", "agent": agent, "output_message": {"role": "assistant", "content": text},
            "tool_calls": [dict(c) for c in calls]}


def test_a_text_result_worded_as_a_failure_is_an_error_step():
    ok = {"name": "look", "arguments": {"ref": "box7a"}, "result": "box7a is red"}
    denied = {"name": "paint", "arguments": {"ref": "box7a"}, "result": "paint: permission denied for box7a"}
    units = build_units({"steps": [_step(0, "a", calls=[ok]), _step(1, "a", calls=[denied])]})
    assert [u.outcome for u in units] == ["result", "error_result"]
    assert units[1].status == "error" and "permission denied" in units[1].error_text


def test_a_text_result_that_says_something_is_not_so_is_an_error_step_without_failure_words():
    ok = {"name": "look", "arguments": {"ref": "box7a"}, "result": "box7a is red, on shelf 12"}
    results = ["ship: box7a is not packed, nothing set aside yet for box9c",  # a negated statement
               "ok False; reason ship needs a ref",  # a verdict field saying no, laid out as prose
               "status 200; data ok False; reason ship needs a ref",  # ... under an envelope's field
               "data.ok=false, reason: ship needs a ref",
               "not able to ship box7a: no date was given"]
    for text in results:
        refused = {"name": "ship", "arguments": {"ref": "box7a"}, "result": text}
        units = build_units({"steps": [_step(0, "a", calls=[ok]), _step(1, "a", calls=[refused])]})
        assert [u.outcome for u in units] == ["result", "error_result"], text
        assert units[1].status == "error" and text in units[1].error_text
    # A listing's negative fact is a record, not a failure: only a short answer is read so.
    listing = {"name": "list", "arguments": {}, "result": "\n".join(
        f"- box{i}a is not packed; shelf {10 + i}; weight {20 + i} kg; colour red; size large" for i in range(9))}
    assert build_units({"steps": [_step(0, "a", calls=[listing])]})[0].outcome == "result"
    # A verdict saying yes, under an envelope or not, is no failure.
    for text in ("status 200; data ok True; box7a shipped", "ok: yes; box7a shipped"):
        shipped = {"name": "ship", "arguments": {"ref": "box7a"}, "result": text}
        assert build_units({"steps": [_step(0, "a", calls=[shipped])]})[0].outcome == "result", text


def test_a_text_result_retried_at_once_and_answered_the_same_is_an_error_whatever_its_words():
    odd = {"name": "paint", "arguments": {}, "result": "paint: a colour is needed"}
    said = {"name": "tell", "arguments": {"to": "b1"}, "result": "noted"}
    said_again = {"name": "tell", "arguments": {"to": "b1"}, "result": "noted twice"}
    steps = [_step(0, "a", calls=[odd]), _step(1, "a", calls=[odd]), _step(2, "a", "paint is stuck"),
             _step(3, "a", calls=[said]), _step(4, "a", calls=[said_again])]
    units = build_units({"steps": steps})
    # The same answer to the same call made again: the failure did not go away. A call
    # repeated with a new answer each time is a conversation, not a failure.
    assert [u.outcome for u in units] == ["error_result", "error_result", "none", "result", "result"]


def _round(i, giver, taker, request, report, calls=()):
    return [_step(i, giver, request), *[_step(i + 1 + j, taker, calls=[c]) for j, c in enumerate(calls)],
            _step(i + 1 + len(calls), taker, report)]


def test_a_round_handed_out_again_failed_whatever_its_report_says():
    look = {"name": "look", "arguments": {"ref": "box7a"}, "result": {"ref": "box7a", "color": "red"}}
    steps = (_round(0, "Kestrel", "Wren", "Wren: please see to the next part as discussed.",
                    "Report: I acted on nothing, the request named none of my actions.")
             + _round(2, "Kestrel", "Wren", "Wren: please see to the next part as discussed.",
                      "Report: I acted on nothing, the request named none of my actions.")
             + _round(4, "Kestrel", "Wren", "Wren: look up box7a and tell me its colour.", "Report: box7a is red.",
                      calls=[look])
             + [_step(7, "Kestrel", "Answer: the box is red.")])
    units = build_units({"steps": steps, "task": "What colour is box7a?"})
    assert [k for k, u in enumerate(units) if u.round_failed] == [1]  # the last round was not handed again
    symptoms = find_symptoms(build_graph(units), failed=True)
    assert symptoms[0].step == 1 and symptoms[0].kind == "failure_claim" and symptoms[0].origin == 0


def test_the_same_words_about_other_values_are_a_new_request_not_a_retry():
    steps = (_round(0, "Kestrel", "Wren", 'Wren: look up the box named "Red Fox" and report its size.', "Report: small.")
             + _round(2, "Kestrel", "Wren", 'Wren: look up the box named "Blue Owl" and report its size.', "Report: large.")
             + [_step(4, "Kestrel", "Answer: small and large.")])
    assert not any(u.round_failed for u in build_units({"steps": steps}))


def test_a_failure_report_is_explained_by_the_text_error_of_its_own_work_not_by_the_hand_over():
    fails = {"name": "look", "arguments": {}, "result": "look: missing required argument 'ref'"}
    steps = [_step(0, "Kestrel", "Wren: look up box7a."), _step(1, "Wren", calls=[fails]),
             _step(2, "Wren", "Report: it went wrong: look: missing required argument 'ref'"),
             _step(3, "Kestrel", "Wren: look up box7a."), _step(4, "Wren", calls=[fails]),
             _step(5, "Wren", "Report: it went wrong again."), _step(6, "Kestrel", "Answer: no colour known.")]
    symptoms = find_symptoms(build_graph(build_units({"steps": steps})), failed=True)
    assert symptoms[0].step == 1 and symptoms[0].origin == 1
    assert all(s.origin == 1 for s in symptoms if s.kind != "final_answer")


PROSE = ("listing for the top shelf\n- ref box7a; colour red; size large\n- ref box9c; colour blue; size large\n"
         "- ref box4d; colour green; size small")
SENTENCES = "box7a is a red box of size 12.\nbox9c is a blue box of size 14."


def test_records_are_read_from_prose_lines_whatever_their_template():
    records = text_records(PROSE)
    assert [values[1] for _, values, _ in records] == ["box7a", "box9c", "box4d"]
    assert len({shape for shape, _, _ in records}) == 1  # one template: siblings
    assert len({shape for shape, _, _ in text_records(SENTENCES)}) == 1
    assert text_records("no record here at all") == ()


def test_record_signals_work_on_prose_results_as_on_json():
    for result in (PROSE, SENTENCES):
        assert misattributed_values("box7a is blue", [result]) == ["blue"]
        assert "box9c" in omitted_records("found box7a", [result])
        assert task_conflicts({"box7a"}, [result], {"blue", "item"}) == ["box7a"]
        assert task_conflicts({"box9c"}, [result], {"blue", "item"}) == []


def test_a_summary_that_names_what_a_call_looked_at_but_none_of_what_it_found_drops_it():
    from tracefix.analysis.agent_reports import dropped_findings

    listing = {"shelf": "s1", "boxes": [{"ref": "box7a", "color": "red"}]}
    prose = "boxes - color red; ref box7a; shelf s1"  # the same, laid out as text, keys reversed
    for result in (listing, prose):
        assert dropped_findings("shelf s1 holds no boxes", [({"shelf": "s1"}, result)]) == ["box7a"]
        assert dropped_findings("shelf s1 holds box7a", [({"shelf": "s1"}, result)]) == []
        assert dropped_findings("nothing to say", [({"shelf": "s1"}, result)]) == []  # not about the call
    steps = [_step(0, "a", calls=[{"name": "list", "arguments": {"shelf": "s1"}, "result": prose}]),
             _step(1, "a", "Report: shelf s1 is empty.")]
    assert build_units({"steps": steps})[1].omitted == ["box7a"]


def test_an_agent_talking_to_itself_under_decorated_labels_hands_nothing_over():
    ask = "please look up box7a and report its colour"
    steps = [_step(0, "Planner (-> Wren)", ask), _step(1, "Planner (thought)", "the colour is still unknown"),
             _step(2, "Planner (-> Wren)", ask), _step(3, "Planner (thought)", "the colour is still unknown")]
    assert not any(u.round_failed for u in build_units({"steps": steps}))


def test_an_error_naming_a_handed_value_blames_the_hand_over_unless_the_call_dropped_what_it_was_given():
    def run(arguments):
        call = {"name": "refund", "arguments": arguments, "error": "refund: unable to refund ord7a: no amount given"}
        steps = [_step(0, "Kestrel", "Wren: please refund 11.50 on ord7a."), _step(1, "Wren", calls=[call]),
                 _step(2, "Wren", "Stuck."), _step(3, "Kestrel", "Answer: blocked.")]
        return find_symptoms(build_graph(build_units({"steps": steps})), failed=True)[0]

    assert run({"order": "ord7a"}).origin == 1  # the call left out the amount it was handed
    assert run({"order": "ord7a", "amount": 11.5}).origin == 0  # it did as told: the hand-over is to blame


def _lookups(result_of, report_of):
    """Kestrel hands Wren two look-ups of one tool, one value each; Wren reports each."""
    steps = []
    for ref in ("#4471", "#4473"):
        steps += [_step(len(steps), "Kestrel", f"Wren: where is box {ref}? Use locate."),
                  _step(len(steps) + 1, "Wren", calls=[{"name": "locate", "arguments": {"ref": ref}, "result": result_of[ref]}]),
                  _step(len(steps) + 2, "Wren", report_of[ref])]
    return build_units({"steps": steps + [_step(len(steps), "Kestrel", "Answer: both located.")]})


def test_a_report_that_reads_another_lookups_answer_into_its_own_record_misattributes_it():
    # One record per call: the sibling is the same lookup's answer for the other value,
    # fetched before (the first case) or after (the second) the report that borrows from it.
    json_results = {"#4471": {"ref": "#4471", "state": "on hold at gate", "site": "Leeds", "tries": 2},
                    "#4473": {"ref": "#4473", "state": "delivered", "site": "Derby", "tries": 1}}
    prose_results = {ref: "; ".join(f"{k} {v}" for k, v in r.items()) for ref, r in json_results.items()}
    for results in (json_results, prose_results):
        faithful = {"#4471": "Box #4471: on hold at gate, Leeds.", "#4473": "Box #4473: delivered, Derby."}
        assert not any(u.misattributed for u in _lookups(results, faithful))
        borrowed_before = dict(faithful, **{"#4473": "Box #4473: on hold at gate, Derby."})
        units = _lookups(results, borrowed_before)
        assert [k for k, u in enumerate(units) if u.misattributed] == [5]
        assert set(units[5].misattributed) & {"hold", "gate", "on hold at gate"}  # a phrase, or its words in prose
        borrowed_after = dict(faithful, **{"#4471": "Box #4471: delivered, Leeds."})
        units = _lookups(results, borrowed_after)
        assert [k for k, u in enumerate(units) if u.misattributed] == [2]
        assert units[2].misattributed == ["delivered"]

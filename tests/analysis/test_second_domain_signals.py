"""Signals that hold on an app other than the one the analysis was developed on: read from
the flow of values and the conversation's shape, never from an app's names or wording."""
from tracefix.analysis.graph import build_graph
from tracefix.analysis.evidence import find_symptoms
from tracefix.analysis.units import build_units


def _step(i, agent, text="", calls=()):
    return {"index": i, "kind": "llm", "agent": agent, "output_message": {"role": "assistant", "content": text},
            "tool_calls": [dict(c) for c in calls]}


def _call(name, arguments, result=None, error=None):
    return {"name": name, "arguments": arguments, "result": result, "error": error}


def _crew(worker_step):
    """Kestrel hands box7a to Wren, then hands order ord9 to Alder, whose call fails on box7a."""
    return {"steps": [
        _step(0, "Kestrel", "Wren: put box7a aside for ord9"),
        worker_step,
        _step(2, "Kestrel", "Alder: send ord9"),
        _step(3, "Alder", calls=[_call("send", {"ref": "ord9"}, error="send: ord9 cannot go, box7a was never put aside")]),
        _step(4, "Alder", "stuck on ord9"),
        _step(5, "Kestrel", "sorry, ord9 is stuck"),
    ]}


def test_an_error_about_a_value_its_call_did_not_carry_goes_back_to_who_was_handed_that_value():
    skipped = _crew(_step(1, "Wren", "box7a is aside for ord9"))  # said, not done
    wrong = _crew(_step(1, "Wren", calls=[_call("aside", {"ref": "box9c", "order": "ord9"}, {"ok": True})]))
    for doc in (skipped, wrong):
        first = find_symptoms(build_graph(build_units(doc)), failed=True)[0]
        assert (first.step, first.origin) == (3, 1), first
        assert "box7a" in first.reason


def test_a_value_the_taker_did_act_on_is_not_blamed_on_it():
    done = _crew(_step(1, "Wren", calls=[_call("aside", {"ref": "box7a", "order": "ord9"}, {"ok": True})]))
    first = find_symptoms(build_graph(build_units(done)), failed=True)[0]
    assert first.origin != 1


def test_a_summary_that_pairs_a_record_with_its_siblings_number_is_a_misread():
    from tracefix.analysis.agent_reports import mispaired_numbers

    result = {"ref": "ord9", "lines": [{"part": "pt-7a", "count": 2, "price": "64.75"},
                                       {"part": "pt-9c", "count": 1, "price": "23.90"}]}
    rotated = "ord9 has two lines. Line 1: 2 of pt-9c at 23.90. Line 2: 1 of pt-7a at 64.75."
    faithful = "ord9 has two lines. Line 1: 2 of pt-7a at 64.75. Line 2: 1 of pt-9c at 23.90."
    assert mispaired_numbers(rotated, [result]) == ["1", "2"]
    assert mispaired_numbers(faithful, [result]) == []  # "Line 1" is the item's ordinal, not pt-9c's count


def test_a_worker_that_answers_a_hand_over_in_words_only_claims_work_it_did_not_do():
    from tracefix.analysis.evidence.unacted_claims import unacted_claims

    look = _call("look", {"ref": "box7a"}, {"ref": "box7a", "color": "red"})
    doc = {"steps": [_step(0, "Kestrel", "Wren: look at box7a"), _step(1, "Wren", calls=[look]),
                     _step(2, "Wren", "box7a is red"),
                     _step(3, "Kestrel", "Wren: set box7a aside"), _step(4, "Wren", "box7a is set aside"),  # no call
                     _step(5, "Kestrel", "Alder: paint ord9 blue"), _step(6, "Alder", "which ord9 paint job?"),
                     _step(7, "Kestrel", "Alder: paint ord9 blue"), _step(8, "Alder", "which ord9 paint job?"),
                     _step(9, "Kestrel", "ord9 is stuck")]}
    flags = unacted_claims(build_units(doc))
    # Alder's question was handed out again (a failed round) and then said again: no claim.
    assert [k for k, f in enumerate(flags) if f] == [4]


def _task_step(i, agent, task, text):
    step = _step(i, agent, text)
    step["input_messages"] = [{"role": "user", "content": task}]
    return step


def test_a_failing_value_the_task_gave_is_no_fault_of_the_hand_over_that_relayed_it():
    task = "refund ord9 in full"
    doc = {"steps": [_task_step(0, "Kestrel", task, "Alder: refund 12.50 on ord9"),
                     _step(1, "Alder", calls=[_call("refund", {"ref": "ord9"}, error="refund: ord9 needs an amount")]),
                     _step(2, "Alder", "stuck on ord9"), _step(3, "Kestrel", "sorry, ord9 is stuck")]}
    first = find_symptoms(build_graph(build_units(doc)), failed=True)[0]
    assert (first.step, first.origin) == (1, 1)


def test_a_failure_after_an_invented_id_goes_back_to_the_hand_over_that_invented_it():
    task = "refund the lamp of ord9"
    doc = {"steps": [_task_step(0, "Kestrel", task, "Wren: look up ord7"),  # ord7: nobody said it
                     _step(1, "Wren", calls=[_call("look", {"ref": "ord7"}, {"ref": "ord7", "item": "mat"})]),
                     _step(2, "Wren", "ord7 holds a mat"),
                     _step(3, "Kestrel", "Alder: please refund ord9 now"), _step(4, "Alder", "no amount given for ord9"),
                     _step(5, "Kestrel", "Alder: please refund ord9 now"), _step(6, "Alder", "no amount given for ord9"),
                     _step(7, "Kestrel", "sorry, ord9 is stuck")]}
    units = build_units(doc)
    assert units[0].unsupported == ["ord7"]
    first = find_symptoms(build_graph(units), failed=True)[0]
    assert (first.step, first.origin) == (4, 0), first


def test_an_error_about_a_reported_value_nobody_handed_on_goes_back_to_the_hand_over_that_swapped_it():
    task = "send ord9"
    look = _call("look", {"ref": "ord9"}, {"ref": "ord9", "parts": ["pt-7a", "pt-9c"]})
    for swapped in ("pt-9c", "pt-5x"):  # drawn from the report, or invented
        doc = {"steps": [_task_step(0, "Kestrel", task, "Wren: look at ord9"),
                         _step(1, "Wren", calls=[look]), _step(2, "Wren", "ord9 holds pt-7a and pt-9c"),
                         _step(3, "Kestrel", f"Wren: set {swapped} aside for ord9"),
                         _step(4, "Wren", calls=[_call("aside", {"ref": swapped, "order": "ord9"}, {"ok": True})]),
                         _step(5, "Wren", f"{swapped} is aside"),
                         _step(6, "Kestrel", "Alder: send ord9"),
                         _step(7, "Alder", calls=[_call("send", {"ref": "ord9"}, error="send: ord9 cannot go, pt-7a is not aside")]),
                         _step(8, "Alder", "stuck on ord9"), _step(9, "Kestrel", "sorry, ord9 is stuck")]}
        first = find_symptoms(build_graph(build_units(doc)), failed=True)[0]
        assert (first.step, first.origin) == (7, 3), (swapped, first)


def test_an_error_about_a_value_done_as_handed_goes_back_to_the_report_that_misread_it():
    task = "send ord9"
    look = _call("look", {"ref": "ord9"}, {"ref": "ord9", "lines": [{"part": "pt-7a", "count": 1},
                                                                   {"part": "pt-9c", "count": 3}]})
    doc = {"steps": [_task_step(0, "Kestrel", task, "Wren: look at ord9"),
                     _step(1, "Wren", calls=[look]),
                     _step(2, "Wren", "ord9 holds: 3 of pt-7a. And 1 of pt-9c."),  # counts swapped
                     _step(3, "Kestrel", "Wren: set 3 of pt-7a aside for ord9"),
                     _step(4, "Wren", calls=[_call("aside", {"ref": "pt-7a", "n": 3, "order": "ord9"}, {"ok": True})]),
                     _step(5, "Wren", "pt-7a is aside"),
                     _step(6, "Kestrel", "Alder: send ord9"),
                     _step(7, "Alder", calls=[_call("send", {"ref": "ord9"}, error="send: ord9 cannot go, pt-7a is short")]),
                     _step(8, "Alder", "stuck on ord9"), _step(9, "Kestrel", "sorry, ord9 is stuck")]}
    _assert_failure_goes_back_to_the_misread_report(doc, report=2, failure=7)


def _assert_failure_goes_back_to_the_misread_report(doc, report, failure):
    units = build_units(doc)
    assert units[report].misattributed
    first = find_symptoms(build_graph(units), failed=True)[0]
    assert (first.step, first.origin) == (failure, report), first
    assert "misread" in first.reason


def test_a_hand_over_said_again_after_its_round_went_well_is_the_suspect():
    from tracefix.analysis.evidence.repeated_handovers import repeated_handovers

    ask = "Wren: where is parcel pq41 right now?"
    look = _call("look", {"ref": "pq41"}, {"ref": "pq41", "at": "depot"})
    doc = {"steps": [_step(0, "Kestrel", "1. find pq41 2. find pq43"), _step(1, "Kestrel", ask),
                     _step(2, "Wren", calls=[look]), _step(3, "Wren", "pq41 is at the depot"),
                     _step(4, "Kestrel", ask),  # pq43 never asked
                     _step(5, "Wren", calls=[look]), _step(6, "Wren", "pq41 is at the depot"),
                     _step(7, "Kestrel", "pq41 and pq43 are at the depot")]}
    units = build_units(doc)
    assert repeated_handovers(units) == {4: 1}
    graph = build_graph(units)
    from tracefix.analysis.features import feature_matrix
    from tracefix.analysis.hypotheses import EvidenceWeights, rank_hypotheses

    top = rank_hypotheses(graph, {}, {}, feature_matrix(graph), failed=True,
                          weights=EvidenceWeights(detectors=0.0, frontier=0.0))[0]
    assert top["step"] == 4 and "word for word" in top["rationale"]
    # A retry of a round that failed is not repeated work.
    broken = _call("look", {"ref": "pq41"}, error="look: lookup failed")
    doc["steps"][2] = _step(2, "Wren", calls=[broken])
    assert repeated_handovers(build_units(doc)) == {}


def _restated_crew(report: str, used: int, task: str = "Put ord9's parts aside", result=None) -> dict:
    """Wren looks up ord9 (one line: 1 of pt-7a), reports it, and Kestrel has `used` put aside."""
    result = result or {"ref": "ord9", "lines": [{"part": "pt-7a", "count": 1, "price": "39.00"}]}
    lookup = _call("lookup", {"ref": "ord9"}, result)
    return {"task": task, "steps": [
        _step(0, "Kestrel", "Wren: look up ord9"),
        _step(1, "Wren", calls=[lookup]),
        _step(2, "Wren", report),
        _step(3, "Kestrel", f"Wren: put {used} of pt-7a aside for ord9"),
        _step(4, "Wren", calls=[_call("aside", {"part": "pt-7a", "count": used, "ref": "ord9"}, {"ok": True})]),
        _step(5, "Kestrel", "done"),
    ]}


def test_a_report_that_restates_a_field_with_the_value_a_later_call_used_misread_it():
    """The result said count 1; the report says 2 of it and the team puts 2 aside: the report
    misread the result. The field's name comes from the call and the result, not a vocabulary."""
    misread = build_units(_restated_crew("Line 1 of ord9: 2 of pt-7a (39.00 each).", used=2))
    assert misread[2].restated == ["count 2 for pt-7a (its result said 1; a later call used 2)"]
    assert not any(u.restated for u in misread[3:])  # the relay of the misread is not where it started
    # The report said the count right, and line 2's ordinal or the price are not taken for it.
    faithful = build_units(_restated_crew("Line 2 of ord9: 1 of pt-7a (39.00 each).", used=2))
    assert not any(u.restated for u in faithful)
    # The task itself asked for 2: a value the task gave is not a misread.
    asked = build_units(_restated_crew("Line 1 of ord9: 2 of pt-7a.", used=2, task="Put 2 of ord9's parts aside"))
    assert not any(u.restated for u in asked)
    # Nobody acted on another count: nothing to tell the report's words by.
    unused = build_units(_restated_crew("Line 1 of ord9: 2 of pt-7a.", used=1))
    assert not any(u.restated for u in unused)


def test_a_report_that_restates_a_field_of_a_prose_result_misread_it():
    """The same with the tool answering in prose: the field is read after its name ("count:
    1") on the line that names the record; a line that names two records says whose field
    nobody can tell, so it tells nothing."""
    prose = "ord9, open\n* part pt-7a, count: 1, unit price: 39.00"
    misread = build_units(_restated_crew("Line 1 of ord9: 2 of pt-7a (39.00 each).", used=2, result=prose))
    assert misread[2].restated == ["count 2 for pt-7a (its result said 1; a later call used 2)"]
    faithful = build_units(_restated_crew("Line 2 of ord9: 1 of pt-7a (39.00 each).", used=2, result=prose))
    assert not any(u.restated for u in faithful)
    shared = "ord9: part pt-7a count 1; part pt-9c count 3"
    assert not any(u.restated for u in build_units(_restated_crew("Line 1 of ord9: 2 of pt-7a.", used=2, result=shared)))


def test_an_error_about_an_amount_its_call_did_not_carry_goes_back_to_who_was_handed_the_amount():
    """'still holds 250.00': the move of 250.00 was handed to Wren, who answered in words only."""
    doc = {"steps": [
        _step(0, "Kestrel", "Wren: move 250.00 from box7a to box9c"),
        _step(1, "Wren", "moved, all done"),
        _step(2, "Kestrel", "Alder: retire box7a"),
        _step(3, "Alder", calls=[_call("retire", {"ref": "box7a"}, error="retire: box7a still holds 250.00; empty it first")]),
        _step(4, "Alder", "stuck on box7a"),
        _step(5, "Kestrel", "sorry, box7a is stuck")]}
    first = find_symptoms(build_graph(build_units(doc)), failed=True)[0]
    assert (first.step, first.origin) == (3, 1), first
    assert "250" in first.reason


def test_a_pick_that_follows_a_report_that_misread_its_results_is_not_the_pickers_choice():
    task = "send ord9 the red box"
    look = _call("look", {"ref": "ord9"}, {"ref": "ord9", "boxes": [{"box": "box7a", "color": "red"},
                                                                   {"box": "box9c", "color": "blue"}]})
    misread = "ord9 boxes: box7a is blue; box9c is red"  # colours swapped
    faithful = "ord9 boxes: box7a is red; box9c is blue"
    for report, pick in ((misread, "box9c"), (faithful, "box9c")):
        doc = {"steps": [_task_step(0, "Kestrel", task, "Wren: look at ord9"),
                         _step(1, "Wren", calls=[look]),
                         _step(2, "Wren", report),
                         _step(3, "Kestrel", f"Alder: send {pick} for ord9"),
                         _step(4, "Alder", calls=[_call("send", {"ref": pick}, {"ok": True})]),
                         _step(5, "Kestrel", "sent")]}
        units = build_units(doc)
        if report == misread:
            assert units[2].misattributed and units[3].task_conflicts == []  # the report is where it went wrong
        else:
            assert units[3].task_conflicts == ["box9c"]  # a faithful report: the pick chose the wrong box


def test_the_tool_a_hand_over_names_is_no_value_the_failing_call_left_out():
    """'send ord7 (ship_2)': the call to ship_2 carried ord7 as handed, so the failure on ord7
    goes back to the hand-over, whose ord7 nobody had shown it."""
    doc = {"steps": [
        _task_step(0, "Kestrel", "send ord9", "Wren: look at ord9"),
        _step(1, "Wren", "ord9 is packed"),
        _step(2, "Kestrel", "Alder: send ord7 (ship_2)"),
        _step(3, "Alder", calls=[_call("ship_2", {"ref": "ord7"}, error="ship_2: ord7 is not packed")]),
        _step(4, "Alder", "stuck on ord7"),
        _step(5, "Kestrel", "sorry, ord9 is stuck")]}
    first = find_symptoms(build_graph(build_units(doc)), failed=True)[0]
    assert (first.step, first.origin) == (3, 2), first


def test_a_pick_of_the_sibling_of_the_record_the_final_answer_names_is_where_answer_and_acts_parted():
    look = _call("look", {"ref": "ord9"}, {"ref": "ord9", "boxes": [{"box": "box7a", "color": "red"},
                                                                   {"box": "box9c", "color": "blue"}]})

    def crew(pick, answer):
        return {"steps": [_task_step(0, "Kestrel", "send ord9 its boxes", "Wren: look at ord9"),
                          _step(1, "Wren", calls=[look]),
                          _step(2, "Wren", "ord9 boxes: box7a is red; box9c is blue"),
                          _step(3, "Kestrel", f"Alder: send {pick} for ord9"),
                          _step(4, "Alder", calls=[_call("send", {"ref": pick}, {"ok": True})]),
                          _step(5, "Kestrel", answer)]}

    parted = build_units(crew("box9c", "sent the red box box7a"))
    assert parted[3].answer_conflicts == ["box9c"]  # the instruction, not the report that listed both
    assert not any(u.answer_conflicts for k, u in enumerate(parted) if k != 3)
    agreed = build_units(crew("box9c", "sent the blue box box9c"))
    assert not any(u.answer_conflicts for u in agreed)


def test_a_value_the_final_answer_pairs_with_another_record_than_the_calls_did_goes_back_to_the_hand_over():
    """'sent 3400 to bin4q': the one call that carried 3400 carried bin7k (a record of bin4q's
    shape) and no record the answer's clause names; bin4q was used, for another amount."""
    def bins(owner, *pairs):
        return _call("bins", {"owner": owner}, {"bins": [{"bin": b, "owner": owner, "kind": k} for b, k in pairs]})

    def crew(first_to, answer):
        return {"steps": [_task_step(0, "Kestrel", "move 3400 into Ida's cold bin, then 250 to Ole's", "Wren: list bins"),
                          _step(1, "Wren", calls=[bins("ida", ("bin4q", "cold"), ("bin5r", "dry"))]),
                          _step(2, "Wren", calls=[bins("ole", ("bin7k", "cold"), ("bin8m", "dry"))]),
                          _step(3, "Wren", "ida: bin4q cold, bin5r dry. ole: bin7k cold, bin8m dry"),
                          _step(4, "Kestrel", f"Alder: move 3400 from bin5r to {first_to}"),
                          _step(5, "Alder", calls=[_call("move", {"qty": 3400, "src": "bin5r", "dst": first_to}, {"ok": True})]),
                          _step(6, "Kestrel", "Alder: move 250 from bin4q to bin7k"),
                          _step(7, "Alder", calls=[_call("move", {"qty": 250, "src": "bin4q", "dst": "bin7k"}, {"ok": True})]),
                          _step(8, "Kestrel", answer)]}

    parted = build_units(crew("bin7k", "Moved 3,400 into Ida's cold bin bin4q and 250 to Ole; done."))
    assert parted[4].answer_conflicts == ["bin5r", "bin7k"]  # the hand-over, not the call it was handed
    assert not any(u.answer_conflicts for k, u in enumerate(parted) if k != 4)
    agreed = build_units(crew("bin4q", "Moved 3,400 into Ida's cold bin bin4q and 250 to Ole; done."))
    assert not any(u.answer_conflicts for u in agreed)
    both = build_units(crew("bin7k", "Moved 3400 from bin5r to bin7k and 250 from bin4q; done."))
    assert not any(u.answer_conflicts for u in both)  # the clause names the call's own records


def test_a_symptom_names_the_value_as_the_failing_step_wrote_it():
    doc = _crew(_step(1, "Wren", "BOX7A is aside for ord9"))
    doc["steps"][0] = _step(0, "Kestrel", "Wren: put BOX7A aside for ord9")
    doc["steps"][3] = _step(3, "Alder", calls=[_call("send", {"ref": "ord9"}, error="send: ord9 cannot go, BOX7A was never put aside")])
    first = find_symptoms(build_graph(build_units(doc)), failed=True)[0]
    assert (first.step, first.origin) == (3, 1), first
    assert "BOX7A" in first.reason  # compared as box7a, told as written


def _listing_crew(report: str) -> dict:
    """Wren looks up parcel #88 (state 'held at hub', at Leeds, 2 tries) and reports it; Kestrel relays."""
    look = _call("look", {"ref": "#88"}, {"ref": "#88", "state": "held at hub", "at": "Leeds", "tries": 2})
    return {"task": "Where is my parcel #88?", "steps": [
        _step(0, "Kestrel", "Wren: where is #88?"),
        _step(1, "Wren", calls=[look]),
        _step(2, "Wren", report),
        _step(3, "Kestrel", "Your parcel #88 is on its way."),
    ]}


def test_a_listing_of_the_looked_up_record_that_says_a_field_as_another_phrase_misread_it():
    """The report lists #88's fields and says 'signed for' where the result said 'held at hub':
    the one item that is none of the record's values stands where the one unsaid field is.
    The record is the one whose field carries the call's argument, whatever the id looks like."""
    misread = build_units(_listing_crew("Wren here. Parcel #88: signed for, Leeds, 2 tries so far."))
    assert misread[2].restated == ["state signed for for #88 (its result said held at hub)"]
    assert not misread[3].restated  # the relay did not look anything up
    # Said right; one field left out and nothing standing for it; a record the report does
    # not list (one field said): no misread to tell.
    for report in ("Parcel #88: held at hub, Leeds, 2 tries so far.", "Parcel #88: Leeds, 2 tries so far.",
                   "Parcel #88: signed for, see you soon, at Leeds.", "Parcel #88 is at Leeds: signed for."):
        assert not any(u.restated for u in build_units(_listing_crew(report))), report


def test_a_misread_listing_is_where_the_hypotheses_start_and_says_why():
    from tracefix.analysis.features import feature_matrix
    from tracefix.analysis.hypotheses import EvidenceWeights, rank_hypotheses

    graph = build_graph(build_units(_listing_crew("Parcel #88: signed for, Leeds, 2 tries so far.")))
    top = rank_hypotheses(graph, {}, {}, feature_matrix(graph), failed=True,
                          weights=EvidenceWeights(detectors=0.0, frontier=0.0))[0]
    assert top["step"] == 2 and "restates state signed for for #88" in top["rationale"], top


def _folder_crew(task: str) -> dict:
    """Wren lists Lia's two folders (red fo-1, blue fo-2); Kestrel has f-77 stamped onto fo-2,
    then 30 sheets moved from fo-1 to fo-2."""
    folders = _call("list_folders", {"owner": "Lia"}, [{"ref": "fo-1", "colour": "red", "owner": "Lia"},
                                                       {"ref": "fo-2", "colour": "blue", "owner": "Lia"}])
    return {"task": task, "steps": [
        _step(0, "Kestrel", "Wren: find Lia's folders"),
        _step(1, "Wren", calls=[folders]),
        _step(2, "Wren", "Lia has fo-1 (red) and fo-2 (blue)."),
        _step(3, "Kestrel", "Alder: stamp f-77 onto fo-2"),
        _step(4, "Alder", calls=[_call("stamp", {"form": "f-77", "folder": "fo-2"}, {"ok": True})]),
        _step(5, "Kestrel", "Alder: move 30 sheets from fo-1 to fo-2"),
        _step(6, "Alder", calls=[_call("move", {"sheets": 30, "from": "fo-1", "to": "fo-2"}, {"ok": True})]),
        _step(7, "Kestrel", "All done."),
    ]}


def test_a_pick_is_read_against_the_part_of_the_task_it_carries_out():
    """The task names both colours, red for the stamp and blue as the move's target: the
    stamp's pick of the blue folder contradicts the clause that names f-77, and the move,
    whose clause names both, contradicts nothing. Read from which clause shares a value with
    the action, not from what the words mean."""
    units = build_units(_folder_crew("Stamp form F-77 onto Lia's red folder, then move 30 sheets "
                                     "from her red folder to her blue folder."))
    assert units[3].task_conflicts == ["fo-2"]
    assert not any(u.task_conflicts for u in units[4:])  # handed the pick, or a part naming both
    # The stamp asked for blue: nothing to tell.
    units = build_units(_folder_crew("Stamp form F-77 onto Lia's blue folder, then move 30 sheets "
                                     "from her red folder to her blue folder."))
    assert not any(u.task_conflicts for u in units)


def test_a_task_whose_requests_are_joined_by_and_is_read_part_by_part():
    """The same task written without commas: "and then" between two parts that each name a
    value starts a second request; "and" inside one request ("Lia and Ola's red folder",
    "F-77 and F-78") joins its objects, so it parts nothing."""
    units = build_units(_folder_crew("Stamp form F-77 onto Lia's red folder and then move 30 sheets "
                                     "from her red folder to her blue folder."))
    assert units[3].task_conflicts == ["fo-2"]
    assert not any(u.task_conflicts for u in units[4:])
    from tracefix.analysis.conflicts import task_clauses_of

    assert len(task_clauses_of("Stamp F-77 and F-78 onto Lia and Ola's red folder")) == 1
    assert len(task_clauses_of("Stamp F-77 onto the red folder and tell Lia the count")) == 1


def test_an_error_about_a_value_relayed_as_a_misread_report_gave_it_goes_back_to_the_report():
    """The hand-over relayed the value as the report said it; the report had paired it with
    the wrong record of its own results: the report is where it went wrong."""
    listing = {"shelf": "sh-1", "boxes": [{"box": "bx-11", "color": "red"}, {"box": "bx-12", "color": "blue"}]}
    doc = {"steps": [
        _step(0, "Kestrel", "Wren: list shelf sh-1 with each box's color"),
        _step(1, "Wren", calls=[_call("list_shelf", {"shelf": "sh-1"}, listing)]),
        _step(2, "Wren", "sh-1 holds:\n- box bx-11: blue\n- box bx-12: red"),
        _step(3, "Kestrel", "Alder: ship the blue box bx-11"),
        _step(4, "Alder", calls=[_call("ship", {"box": "bx-11", "color": "blue"}, error="ship: bx-11 is not blue")]),
        _step(5, "Alder", "stuck on bx-11"),
        _step(6, "Kestrel", "sorry, nothing shipped"),
    ]}
    _assert_failure_goes_back_to_the_misread_report(doc, report=2, failure=4)


def test_an_answer_that_reports_nothing_the_run_found_outweighs_a_detectors_surprise():
    """The run looked up ord9 and answered "all sorted" before doing the rest: with nothing
    failing before it, an answer naming none of the values its results showed is where the
    run stopped short, and that outweighs a detector's peak elsewhere; an answer that does
    report a finding stays weak evidence."""
    from tracefix.analysis.features import feature_matrix
    from tracefix.analysis.hypotheses import rank_hypotheses

    def session(answer):
        look = _call("look", {"ref": "ord9"}, {"ref": "ord9", "paid": "33.80", "box": "box7a"})
        steps = [_step(0, "Kestrel", "1. Wren: look up ord9 2. Alder: refund ord9 3. answer"),
                 _step(1, "Kestrel", "Wren: look up ord9"), _step(2, "Wren", calls=[look]),
                 _step(3, "Wren", "ord9 paid 33.80, in box7a"), _step(4, "Kestrel", answer)]
        said = [{"role": "user", "content": "Refund ord9."}]
        for step in steps:  # each prompt holds the task and everything said before it
            step["input_messages"] = list(said)
            said.append({"role": "assistant", "content": step["output_message"]["content"]})
            said += [{"role": "tool", "content": str(c["result"])} for c in step["tool_calls"]]
        return {"steps": steps}

    surprise = {"hgt": [0.0, 0.0, 1.0, 0.0, 0.0]}  # a detector's peak on the lookup
    for answer, top in (("All sorted on our side, nothing more to do.", 4), ("Refunded 33.80 for ord9.", 2)):
        graph = build_graph(build_units(session(answer)))
        symptom = find_symptoms(graph, failed=True)[-1]
        assert symptom.kind == "final_answer" and ("carries none" in symptom.reason) == (top == 4), symptom
        ranked = rank_hypotheses(graph, surprise, {"hgt": [2]}, feature_matrix(graph), failed=True)
        assert ranked[0]["step"] == top, [(h["step"], h["rationale"]) for h in ranked]

"""A call that fails and works when simply made again (a timeout, a 503, a rate limit) is
the noise of production, not where a run went wrong: the analysis reads the recovery from
the calls themselves, whatever the error says, and still finds the fault that came after."""
import pytest

from tracefix.analysis.evidence.repeated_handovers import repeated_handovers
from tracefix.analysis.graph import build_graph
from tracefix.analysis.pipeline import analyze_document
from tracefix.analysis.evidence import find_symptoms
from tracefix.analysis.units import build_units

LOOK = {"name": "look", "arguments": {"ref": "box7a"}}
FOUND = {"ref": "box7a", "color": "red", "shelf": 12}


def _step(i, agent, text="", calls=()):
    return {"index": i, "kind": "llm", "agent": agent, "output_message": {"role": "assistant", "content": text},
            "tool_calls": [dict(c) for c in calls]}


def _session(first_look: dict, second_look: dict) -> dict:
    """Wren looks box7a up twice, then ships a box nobody showed it, which fails the run."""
    return {"task": "Ship box7a.", "outcome": "failure", "steps": [
        _step(0, "Kestrel", "Wren: look up box7a and ship it."),
        _step(1, "Wren", calls=[first_look]),
        _step(2, "Wren", calls=[second_look]),
        _step(3, "Wren", calls=[{"name": "ship", "arguments": {"ref": "box9c"}, "result": None,
                                 "error": "NotFound: no box box9c"}]),
        _step(4, "Wren", "Report: could not ship it, the shipment failed."),
        _step(5, "Kestrel", "Answer: sorry, box7a could not be shipped.")]}


def test_a_call_that_failed_and_worked_when_made_again_at_once_is_no_symptom():
    for error in ("TimeoutError: no answer within 30 s", "RateLimited: 429, retry after 1 s",
                  "something odd happened"):  # read from the calls, not from the error's words
        doc = _session({**LOOK, "result": None, "error": error}, {**LOOK, "result": FOUND, "error": None})
        units = build_units(doc)
        assert units[1].status == "error" and units[1].recovered, error
        symptoms = find_symptoms(build_graph(units), failed=True)
        assert [s.step for s in symptoms][:1] == [3] and symptoms[0].origin == 3, error
        # The report of the failure goes back to the ship call, not to the retried look-up.
        assert next(s for s in symptoms if s.step == 4).origin == 3
        hypotheses = analyze_document(doc, None)["hypotheses"]
        assert hypotheses[0]["step"] == 3, error
        # Where the retried step is still shown, the reader is told it worked the second time.
        assert all(h["rationale"].endswith("then worked when made again at step 2.") for h in hypotheses if h["step"] == 1)


def test_a_call_that_fails_again_or_is_made_another_way_was_no_transient_failure():
    timeout = {**LOOK, "result": None, "error": "TimeoutError: no answer within 30 s"}
    # Made again the same way and failed again: the failure did not go away.
    units = build_units(_session(timeout, timeout))
    assert not units[1].recovered and not units[2].recovered
    assert find_symptoms(build_graph(units), failed=True)[0].step == 1
    # Made again with other arguments: the first call was wrong, not unlucky.
    wrong = {"name": "look", "arguments": {"ref": "box7"}, "result": None, "error": "NotFound: no box box7"}
    units = build_units(_session(wrong, {**LOOK, "result": FOUND, "error": None}))
    assert not units[1].recovered
    assert find_symptoms(build_graph(units), failed=True)[0].step == 1


def test_a_round_that_got_past_a_transient_failure_went_well():
    # The same request handed over again after its round got its result (through a retry) is
    # the next request gone wrong, as it is when the round had no failure at all.
    ask = "Wren: look up box7a and report its colour and shelf."
    steps = [_step(0, "Kestrel", ask),
             _step(1, "Wren", calls=[{**LOOK, "result": None, "error": "TimeoutError: no answer within 30 s"}]),
             _step(2, "Wren", calls=[{**LOOK, "result": FOUND, "error": None}]),
             _step(3, "Wren", "Report: box7a is red, on shelf 12."),
             _step(4, "Kestrel", ask),
             _step(5, "Wren", calls=[{**LOOK, "result": FOUND, "error": None}]),
             _step(6, "Wren", "Report: box7a is red, on shelf 12."),
             _step(7, "Kestrel", "Answer: box7a is red on shelf 12, box9c is blue.")]
    units = build_units({"task": "What colour are box7a and box9c?", "outcome": "failure", "steps": steps})
    assert units[1].recovered
    assert repeated_handovers(units) == {4: 0}


@pytest.mark.parametrize("first", ["Wren", "Wren-2"])  # the worker itself, or another of a pool of like workers
def test_a_failure_reported_then_got_past_when_the_request_was_handed_out_again_is_no_symptom(first):
    ask = "Look up box7a and report its colour."
    timeout = {**LOOK, "result": None, "error": "ServiceUnavailable: 503, try again later"}
    steps = [_step(0, "Kestrel", ask),
             _step(1, first, calls=[timeout]),
             _step(2, first, "Report: could not look up box7a, the service failed."),
             _step(3, "Kestrel", ask),
             _step(4, "Wren", calls=[{**LOOK, "result": FOUND, "error": None}]),
             _step(5, "Wren", "Report: box7a is red."),
             _step(6, "Kestrel", "Wren: ship box9c today."),
             _step(7, "Wren", calls=[{"name": "ship", "arguments": {"ref": "box9c"}, "result": None,
                                      "error": "NotFound: no box box9c"}]),
             _step(8, "Wren", "Report: could not ship box9c."),
             _step(9, "Kestrel", "Answer: sorry, box7a could not be shipped.")]
    doc = {"task": "Ship box7a.", "outcome": "failure", "steps": steps}
    units = build_units(doc)
    assert units[1].recovered_by == 4
    symptoms = find_symptoms(build_graph(units), failed=True)
    # Neither the 503 nor the report of it is where the run went wrong: the id handed on is.
    assert [s.step for s in symptoms][:1] == [7] and symptoms[0].origin == 6
    assert analyze_document(doc, None)["hypotheses"][0]["step"] == 6
    # The same call failing the same way when made again keeps the failure, whoever made it.
    steps[4] = _step(4, "Wren", calls=[timeout])
    units = build_units(doc)
    assert not units[1].recovered and find_symptoms(build_graph(units), failed=True)[0].step == 1


def test_a_retry_that_fails_otherwise_decides_unless_the_first_failure_comes_back():
    timeout = {**LOOK, "result": None, "error": "TimeoutError: no answer within 30 s"}
    refused = {**LOOK, "result": None, "error": "Refused: box7a is locked"}
    # A timeout, then the real refusal: the run lived with the refusal, which is the symptom.
    units = build_units(_session(timeout, refused))
    assert units[1].recovered_by == 2 and not units[2].recovered
    assert find_symptoms(build_graph(units), failed=True)[0].step == 2
    shown = [h["rationale"] for h in analyze_document(_session(timeout, refused), None)["hypotheses"] if h["step"] == 1]
    assert shown and all(r.endswith("then failed otherwise when made again at step 2.") for r in shown)
    # The refusal, a timeout on the retry, the refusal again: the first refusal stands.
    steps = _session(refused, timeout)["steps"]
    steps.insert(3, _step(3, "Wren", calls=[refused]))
    for k, step in enumerate(steps):
        step["index"] = k
    units = build_units({"task": "Ship box7a.", "outcome": "failure", "steps": steps})
    assert [u.recovered_by for u in units[1:4]] == [None, 3, None]
    assert find_symptoms(build_graph(units), failed=True)[0].step == 1


def test_a_transient_failure_returned_as_text_is_read_from_the_retry():
    said = {**LOOK, "result": "no answer within 30 s", "error": None}
    # Answered in JSON when asked again after a reply and the request handed out again.
    ask = "Wren: look up box7a and report its colour."
    steps = [_step(0, "Kestrel", ask), _step(1, "Wren", calls=[said]), _step(2, "Wren", "no answer within 30 s"),
             _step(3, "Kestrel", ask), _step(4, "Wren", calls=[{**LOOK, "result": FOUND, "error": None}]),
             _step(5, "Wren", "Report: box7a is red."), _step(6, "Kestrel", "Answer: box7a is red.")]
    units = build_units({"task": "What colour is box7a?", "steps": steps})
    assert units[1].outcome == "error_result" and units[1].recovered_by == 4
    assert not repeated_handovers(units)  # the first round got nothing: asking again was a retry
    # Made again at once and refused this time: a call that worked is not made again only to fail.
    refused = {**LOOK, "result": None, "error": "Refused: box7a is locked"}
    units = build_units(_session(said, refused))
    assert units[1].outcome == "error_result" and units[1].recovered_by == 2
    assert find_symptoms(build_graph(units), failed=True)[0].step == 2


def test_a_text_result_relayed_then_asked_for_again_failed_when_the_run_went_on_with_the_retry():
    """A worker passes on what its tool said, word for word, is handed the request again and
    makes the same call, which answers otherwise: the first text was a failure (whatever its
    words), unless the run used a value of it; a record relayed and then lost to a timeout
    on the retry is still the record."""
    ask = "Wren: look up box7a and report its colour and shelf."
    record = {**LOOK, "result": "box7a is red, on shelf 12", "error": None}
    busy = {**LOOK, "result": "503, try again later", "error": None}
    steps = [_step(0, "Kestrel", ask), _step(1, "Wren", calls=[busy]),
             _step(2, "Wren", "ServiceUnavailable: 503, try again later"),  # its own words around it
             _step(3, "Kestrel", ask), _step(4, "Wren", calls=[record]), _step(5, "Wren", "Report: box7a is red, shelf 12."),
             _step(6, "Kestrel", "Wren: ship box9c today."),
             _step(7, "Wren", calls=[{"name": "ship", "arguments": {"ref": "box9c"}, "result": None,
                                      "error": "NotFound: no box box9c"}]),
             _step(8, "Wren", "Report: could not ship box9c."), _step(9, "Kestrel", "Answer: box9c could not be shipped.")]
    doc = {"task": "Ship box7a.", "outcome": "failure", "steps": steps}
    units = build_units(doc)
    assert units[1].outcome == "error_result" and units[1].recovered_by == 4
    assert not repeated_handovers(units)  # the first round got nothing: asking again was a retry
    assert analyze_document(doc, None)["hypotheses"][0]["step"] == 6
    # The mirror: the record relayed, asked again, and a timeout on the retry. The run went
    # on with the record's shelf, so the record is no failure.
    timeout = {**LOOK, "result": "no answer within 30 s", "error": None}
    steps[1:6] = [_step(1, "Wren", calls=[record]), _step(2, "Wren", "box7a is red, on shelf 12"),
                  _step(3, "Kestrel", ask), _step(4, "Wren", calls=[timeout]), _step(5, "Wren", "Report: it is on shelf 12 now.")]
    assert build_units(doc)[1].outcome != "error_result"
    # Not relayed (the worker said something of its own): nothing is read from the retry.
    steps[1:6] = [_step(1, "Wren", calls=[busy]), _step(2, "Wren", "Report: the look-up is busy."), _step(3, "Kestrel", ask),
                  _step(4, "Wren", calls=[record]), _step(5, "Wren", "Report: box7a is red, shelf 12.")]
    assert build_units(doc)[1].outcome != "error_result"

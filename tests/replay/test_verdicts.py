"""DoVer 4.2 verdict rules, exactly."""
import pytest

from tracefix.replay.verdicts import verdict


def run(success=False, fulfilled=False, progress=None, error=None):
    return {"success": success, "fulfilled": fulfilled, "progress": progress, "error": error}


@pytest.mark.parametrize("runs, expected", [
    ([run(True), run(True), run(False)], "validated"),
    ([run(True), run(True), run(True)], "validated"),
    ([run(True), run(False, True, 0.4), run(False, True, 0.4)], "partially_validated"),
    ([run(False, True, 0.4), run(False, True, 0.2), run(False, False, 0.6)], "inconclusive"),
    ([run(False, True, 0.0), run(False, True, 0.2), run(False)], "refuted"),
    ([run(False, True, None), run(False, True, None), run(False, True, None)], "refuted"),
    ([run(True), run(False, True, -0.2), run(False, True, 0.0)], "refuted"),
    ([run(False), run(False), run(False)], "inconclusive"),
    ([run(False, True, 0.0), run(False), run(False, error="timeout")], "inconclusive"),
    ([], "inconclusive"),
    ([run(None, None, error="exit 1"), run(None, None, error="timeout"), run(None, None, error="x")], "error"),
    ([run(False, None, error="exit 1"), run(None, None, error="timeout")], "error"),
])
def test_verdict_follows_dover_section_4_2(runs, expected):
    assert verdict(runs)[0] == expected


def test_progress_must_exceed_twenty_percent_for_partial_validation():
    # exactly 20% is "does not exceed": refuted, not partially validated
    assert verdict([run(False, True, 0.2), run(False, True, 0.2), run(False)])[0] == "refuted"
    assert verdict([run(False, True, 0.21), run(False, True, 0.21), run(False)])[0] == "partially_validated"


def test_thresholds_scale_with_the_number_of_runs():
    assert verdict([run(True), run(True), run(True), run(True), run(False)])[0] == "validated"  # 4 >= ceil(10/3)
    assert verdict([run(True), run(True), run(True), run(False), run(False)])[0] != "validated"
    assert verdict([run(True)])[0] == "validated"


def test_reason_counts_the_runs():
    assert verdict([run(True), run(True), run(False)])[1] == "2/3 replays succeeded"


def test_nothing_is_refuted_when_success_could_not_be_judged():
    unjudged = [{"success": None, "fulfilled": True, "progress": None}] * 3
    found, reason = verdict(unjudged)
    assert found == "inconclusive" and "could be judged" in reason


def test_an_error_verdict_shows_the_first_error():
    found, reason = verdict([run(None, None, error="ModuleNotFoundError: agent"), run(None, None, error="timeout")])
    assert found == "error" and reason == "all 2 replay(s) failed to run; the first: ModuleNotFoundError: agent"

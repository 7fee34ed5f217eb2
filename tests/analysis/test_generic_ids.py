"""Artifacts and error signatures know no id format: an id is any token that mixes letters
and digits, with or without separators, so the silent-failure signals hold on any app."""
from tracefix.analysis.units import extract_artifacts, misattributed_values, normalize_error, omitted_records, task_conflicts


def test_ids_of_any_shape_are_artifacts_and_words_dates_names_are_not():
    found = extract_artifacts("moved ACC-1007 to acc1007, then inv_2024_a1 and 7f3a9c; "
                              "called get_accounts on 2026-11-23 with a plain word")
    assert {"ACC-1007", "acc1007", "inv_2024_a1", "7f3a9c"} <= found
    assert not {"get_accounts", "plain", "word", "2026-11-23"} & found


def test_error_signatures_ignore_the_id_whatever_its_shape():
    dashed = normalize_error("KeyError: no record ACC-1007 here")
    assert dashed == normalize_error("KeyError: no record QX-88 here")
    assert normalize_error("no record acc1007 here") == normalize_error("no record box42 here") == "no record <id> here"


RESULT = {"items": [{"ref": "box7a", "color": "red", "size": "large"},
                    {"ref": "box9c", "color": "blue", "size": "large"}]}


def test_record_signals_work_with_ids_that_have_no_separator():
    assert misattributed_values("box7a is blue", [RESULT]) == ["blue"]
    assert omitted_records("found box7a", [RESULT]) == ["box9c"]
    assert task_conflicts({"box7a"}, [RESULT], {"blue", "item"}) == ["box7a"]
    assert task_conflicts({"box9c"}, [RESULT], {"blue", "item"}) == []

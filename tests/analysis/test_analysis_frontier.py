from tracefix.analysis.frontier import contiguous_groups, frontier_cut, frontiers, union_groups


def test_frontier_cuts_at_largest_drop():
    scores = [0.1, 0.2, 0.9, 0.85, 0.15, 0.1]
    assert frontier_cut(scores) == [2, 3]


def test_flat_run_has_no_frontier():
    assert frontier_cut([0.5, 0.5, 0.5]) == []
    assert frontier_cut([]) == []


def test_frontier_never_flags_more_than_half_the_run():
    # one low outlier: the largest drop is at the bottom, outside the top half
    scores = [0.9, 0.91, 0.92, 0.9, 0.89, 0.1]
    assert len(frontier_cut(scores)) <= 3


def test_groups_are_contiguous_steps_and_union_keeps_detectors_apart():
    assert contiguous_groups([9, 3, 5, 4]) == [[3, 4, 5], [9]]
    fr = frontiers({"isolation_forest": [0, 0, 1, 1, 0, 0, 0, 0], "hgt": [0, 0, 0, 2, 2, 0, 0, 9]})
    assert fr == {"isolation_forest": [2, 3], "hgt": [7]}
    groups = union_groups(fr)
    assert groups == [{"steps": [2, 3], "detectors": {"isolation_forest": [2, 3]}},
                      {"steps": [7], "detectors": {"hgt": [7]}}]

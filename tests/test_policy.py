from __future__ import annotations

import random

from conftest import assistant, tool_call, tool_result, user

from hermes_trove.compaction import policy


def size(m):
    return len(str(m.get("content") or "")) or 1


def tool_turn(i, n_results=2, text="x" * 10):
    calls = [tool_call(f"c{i}_{k}", "terminal") for k in range(n_results)]
    return [assistant("", calls)] + [tool_result(f"c{i}_{k}", text) for k in range(n_results)]


def test_fresh_tail_keeps_count_newest_messages():
    msgs = [user(f"u{i}") for i in range(10)]
    assert policy.select_fresh_tail(msgs, 3, 0, size) == 7


def test_fresh_tail_boundary_inside_tool_group_moves_back_to_the_assistant():
    msgs = [user("q")] + tool_turn(1, n_results=3) + [assistant("done")]
    # count 2 would start at the last tool result; the group starts at index 1
    assert policy.select_fresh_tail(msgs, 2, 0, size) == 1


def test_fresh_tail_token_cap_always_keeps_newest_message():
    msgs = [user("a" * 100), user("b" * 100), user("c" * 500)]
    assert policy.select_fresh_tail(msgs, 10, 50, size) == 2


def test_fresh_tail_token_cap_and_count_both_apply():
    msgs = [user("a" * 10) for _ in range(10)]
    assert policy.select_fresh_tail(msgs, 5, 25, size) == 8
    assert policy.select_fresh_tail(msgs, 2, 1000, size) == 8


def test_enforce_budget_moves_forward_over_whole_groups():
    msgs = [user("q" * 50)] + tool_turn(1, 2, "r" * 100) + [user("z" * 10)]
    start = policy.enforce_budget(msgs, 0, 20, size)
    assert start == len(msgs) - 1
    assert msgs[start]["role"] != "tool"


def test_enforce_budget_keeps_the_newest_group_even_when_too_big():
    msgs = [user("q")] + tool_turn(1, 2, "r" * 1000)
    start = policy.enforce_budget(msgs, 0, 10, size)
    assert start == 1  # the assistant that opens the final group


def test_leaf_chunks_never_split_a_tool_group_and_cover_everything():
    rng = random.Random(3)
    msgs = []
    for i in range(40):
        msgs += [user("u" * rng.randint(1, 50))] + tool_turn(i, rng.randint(1, 3), "t" * rng.randint(1, 80))
    sizes = [size(m) for m in msgs]
    chunks = policy.plan_leaf_chunks(msgs, sizes, 200)
    assert chunks[0].start == 0 and chunks[-1].end == len(msgs)
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert a.end == b.start
        assert msgs[b.start]["role"] != "tool"


def test_chunk_target_stays_under_half_a_small_window():
    # a 16K fallback model refuses a whole default 20,000-token chunk plus the summary instructions
    assert policy.chunk_target(26000, 20000, 40000, False, window=16000) == 8000
    assert policy.chunk_target(1_000_000, 20000, 40000, True, window=32000) == 16000
    assert policy.chunk_target(1_000_000, 20000, 40000, False, window=128000) == 20000  # large windows: unchanged
    assert policy.chunk_target(1_000_000, 20000, 40000, True, window=128000) == 40000
    assert policy.chunk_target(30000, 20000, 40000, False, window=0) == 20000  # unknown window
    assert policy.chunk_target(30000, 20000, 40000, False, window=600) == 500  # never below the floor


def test_a_summary_budget_leaves_room_for_its_answer_in_a_known_window():
    # the answer may take twice the budget: record + instructions + 2 x budget stays within the window
    assert policy.budget_within(4000, 10_500, 16384) == 2942
    assert 10_500 + 2 * policy.budget_within(4000, 10_500, 16384) <= 16384
    assert policy.budget_within(4000, 10_500, 128000) == 4000  # room enough: unchanged
    assert policy.budget_within(4000, 10_500, 0) == 4000  # unknown window
    assert policy.budget_within(4000, 20_000, 16384) == 32  # no room at all: the smallest budget
    assert policy.request_fits(16384 - 64, 16384) and not policy.request_fits(16384 - 63, 16384)
    assert policy.request_fits(10**7, 0)  # unknown window: ask


def test_chunk_target_doubles_only_when_dynamic():
    assert policy.chunk_target(1_000_000, 20000, 40000, False) == 20000
    assert policy.chunk_target(1_000_000, 20000, 40000, True) == 40000
    assert policy.chunk_target(30000, 20000, 40000, True) == 20000


def nodes(*spec):
    return [policy.NodeInfo(i + 1, d, 100, float(i)) for i, d in enumerate(spec)]


def test_condensation_takes_oldest_fanin_nodes_of_lowest_full_depth():
    group = policy.plan_condensation(nodes(0, 0, 0, 0, 0, 1), fanin=4, max_depth=3)
    assert group == policy.CondensationGroup(0, (1, 2, 3, 4), 400)


def test_condensation_respects_max_depth_and_leaf_only():
    assert policy.plan_condensation(nodes(0, 0, 0, 0), 4, 0) is None
    assert policy.plan_condensation(nodes(1, 1, 1, 1), 4, 1) is None
    assert policy.plan_condensation(nodes(1, 1, 1, 1), 4, -1).depth == 1


def test_partial_condensation_only_under_pressure():
    assert policy.plan_condensation(nodes(0, 0), 4, 3) is None
    assert policy.plan_condensation(nodes(0, 0), 4, 3, allow_partial=True).node_ids == (1, 2)


def test_a_condensation_group_larger_than_the_request_cap_takes_only_the_oldest_nodes_that_fit():
    big = [policy.NodeInfo(i + 1, 0, 2500, float(i)) for i in range(6)]
    group = policy.plan_condensation(big, fanin=4, max_depth=3, max_tokens=5000)
    assert group == policy.CondensationGroup(0, (1, 2), 5000)  # nodes 3 and 4 stay for a later group
    assert policy.plan_condensation(big, 4, 3, max_tokens=8000).node_ids == (1, 2, 3)
    assert policy.plan_condensation(big, 4, 3, max_tokens=3000).node_ids == (1, 2)  # never fewer than two
    assert policy.plan_condensation(big, 4, 3, max_tokens=0).node_ids == (1, 2, 3, 4)  # no cap: the full group
    assert policy.plan_condensation(big, 4, 3, max_tokens=10 ** 6).node_ids == (1, 2, 3, 4)


def test_the_summary_window_is_the_smaller_known_one():
    assert policy.summary_window(128000, 16000) == 16000
    assert policy.summary_window(16000, 128000) == 16000
    assert policy.summary_window(128000, 0) == 128000
    assert policy.summary_window(0, 32000) == 32000
    assert policy.summary_window(0, 0) == 0
    assert policy.summary_input_cap(16000) == 8000 and policy.summary_input_cap(0) == 0


def test_summary_selection_drops_oldest_nodes_first_and_orders_by_depth():
    frontier = [policy.NodeInfo(1, 2, 100, 1.0), policy.NodeInfo(2, 1, 100, 2.0), policy.NodeInfo(3, 0, 100, 3.0)]
    kept, omitted = policy.select_summary_nodes(frontier, 200)
    assert kept == [2, 3] and omitted == [1]
    kept, _ = policy.select_summary_nodes(frontier, 1000)
    assert kept == [1, 2, 3]


def test_orphan_tool_results_are_dropped():
    msgs = [tool_result("gone", "x"), user("q")] + tool_turn(1, 1)
    out = policy.drop_orphan_tool_results(msgs)
    assert [m["role"] for m in out] == ["user", "assistant", "tool"]


def test_trim_head_tail_bounds_a_foreign_session():
    msgs = [user("first")] + [user("x" * 100) for _ in range(50)]
    out = policy.trim_head_tail(msgs, 500, size)
    assert sum(size(m) for m in out) <= 600
    assert out[0]["content"] == "first" and out[-1] is not msgs[-1] and out[-1] == msgs[-1]


def test_a_frontier_over_the_bound_condenses_past_the_depth_cap():
    capped = nodes(*[3] * policy.FRONTIER_BOUND)
    assert policy.plan_condensation(capped, 4, 3) is None  # at the bound the cap holds
    group = policy.plan_condensation(nodes(*[3] * (policy.FRONTIER_BOUND + 1)), 4, 3)
    assert group is not None and group.depth == 3 and group.node_ids == (1, 2, 3, 4)


def test_below_the_cap_comes_first_and_past_it_only_full_groups():
    over = nodes(*([3] * policy.FRONTIER_BOUND + [2, 2, 2, 2]))
    assert policy.plan_condensation(over, 4, 3).depth == 2
    partial = nodes(*([3] * 3 + [4] * 2 + [0] * policy.FRONTIER_BOUND))
    assert policy.plan_condensation(partial, 4, 3, allow_partial=True).depth == 0
    assert policy.plan_condensation(nodes(*[3] * 3 + [4] * (policy.FRONTIER_BOUND - 1)), 4, 3,
                                    allow_partial=True).depth == 4

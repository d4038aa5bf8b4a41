"""Where the thread count changes flash attention's output: the count applied is the one held and reported."""

from __future__ import annotations

from tests.test_threads import Machine, steps


def test_an_answer_ended_mid_trial_leaves_the_count_reported_applied_to_the_next_held_answer() -> None:
    """A trial under way when an answer ends is given up at the next prefill or generation: the count in use is
    applied again, so that a held answer decodes with the count decode_threads reports."""
    for prefilled in (True, False):  # the next prompt is prefilled, or was computed while the user typed
        machine = Machine(free=1.0)
        governor = machine.governor(exact_from=256)
        governor.before_prefill()
        assert (governor.current, machine.applied) == (1, [1])
        machine.free = 2.0
        steps(machine, governor, 0.020)  # the CPUs are free again: a trial of 2, under way as the answer ends
        assert (governor.current, machine.applied) == (1, [1, 2])
        machine.free = 1.0
        if prefilled:
            governor.before_prefill()
        governor.start()
        assert machine.applied[-1] == governor.current == 1, "the trial is given up before the answer's first step"
        governor.one_token_at(441)
        steps(machine, governor, 0.040, windows=5)
        assert (governor.current, machine.applied[-1]) == (1, 1), prefilled


def test_the_count_held_follows_the_free_cpus_measured_since_the_prefill_began() -> None:
    """A load that starts during the prefill makes the count held fewer threads; one that ends, more."""
    machine = Machine(free=2.0)
    governor = machine.governor(exact_from=256)
    governor.before_prefill()
    machine.free = 1.0  # another process starts as the prompt is prefilled
    governor.start()
    governor.one_token_at(300)
    assert (governor.current, machine.applied) == (1, [1])
    machine.free = 2.0
    steps(machine, governor, 0.040, windows=5)  # held: a load that ends mid-answer is not followed
    assert (governor.current, machine.applied) == (1, [1])
    governor.finish()
    governor.before_prefill()
    assert (governor.current, machine.applied) == (2, [1, 2])
    machine.free = 1.0
    steps(machine, governor, 0.040)  # a window past the prefill at 2 threads: the hold measures from its end
    governor.one_token_at(320)
    assert governor.current == machine.applied[-1] == 1


def test_a_count_held_for_a_prompt_s_last_batch_is_kept_by_its_answer() -> None:
    """The prompt's last batch of one token (computed while the user typed, or prefilled) and the answer's steps run
    with one count: a new generation keeps the hold, though the free CPUs change in between."""
    machine = Machine(free=1.0)
    governor = machine.governor(exact_from=256)
    governor.one_token_at(299)
    assert (governor.current, machine.applied) == (1, [1])
    machine.free = 2.0
    governor.start()
    governor.one_token_at(300)
    steps(machine, governor, 0.010, windows=10)
    assert (governor.current, machine.applied) == (1, [1])


def test_a_count_held_ends_with_its_answer_and_the_next_answer_measures_the_free_cpus_again() -> None:
    """In a chat, the next prompt is often computed whole while the user types, and no prefill comes: the next
    answer's first one-token batch holds the count the free CPUs measured since the last answer ended allow."""
    machine = Machine(free=1.0)
    governor = machine.governor(exact_from=256)
    governor.before_prefill()
    governor.start()
    governor.one_token_at(300)
    assert (governor.current, machine.applied) == (1, [1])
    governor.finish()
    assert machine.applied == [1], "the end of an answer applies no count"
    machine.free = 2.0  # the other process ends: the CPUs are idle as the next message is typed
    governor.one_token_at(340)  # the next prompt's last batch, computed while it was typed
    governor.start()
    steps(machine, governor, 0.010, windows=5)
    assert (governor.current, machine.applied) == (2, [1, 2])


def test_a_prefill_keeps_a_count_held_since_the_last_answer_ended() -> None:
    """The part of a message computed while it was typed ended in a one-token batch where the count matters: the
    rest of the prompt's prefill and the answer keep that batch's count, though the free CPUs change in between."""
    machine = Machine(free=2.0)
    governor = machine.governor(exact_from=256)
    governor.finish()
    machine.free = 1.0
    governor.one_token_at(299)
    assert (governor.current, machine.applied) == (1, [1])
    machine.free = 2.0
    governor.before_prefill()
    governor.start()
    steps(machine, governor, 0.010, windows=10)
    assert (governor.current, machine.applied) == (1, [1])


def test_a_hold_measured_over_too_short_a_time_keeps_the_count_in_use() -> None:
    """Too little time since the last measurement to tell how busy the CPUs are: the count in use is held."""
    machine = Machine(free=2.0)
    governor = machine.governor(exact_from=256)
    governor.finish()
    machine.free, machine.seconds_per_sample = 0.0, 0.01  # busy, but over 10 ms only
    governor.one_token_at(300)
    assert (governor.current, machine.applied) == (2, [])
    steps(machine, governor, 0.040, windows=10)
    assert (governor.current, machine.applied) == (2, [])

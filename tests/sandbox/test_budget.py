"""The process guard's count: what /proc shows, plus what was admitted and not shown yet.

The attacks themselves are in test_whole_job.py; these pin the arithmetic the fork server
decides by, with the clock and the thread ids given.
"""

from __future__ import annotations

from sandbox.budget import IN_FLIGHT_SECONDS, Admissions

LEADER = frozenset({100})


def test_an_admitted_task_counts_until_proc_shows_it() -> None:
    admissions = Admissions()
    assert admissions.admit(0.0, LEADER, 3) == 2
    # Not created yet: it counts, so a third and a fourth are one too many together.
    assert admissions.admit(0.001, LEADER, 3) == 3
    assert admissions.admit(0.002, LEADER, 3) == 4
    # Once both show, they count once each.
    assert admissions.admit(0.003, LEADER | {101, 102}, 3) == 4


def test_a_refused_task_is_not_recorded() -> None:
    admissions = Admissions()
    assert admissions.admit(0.0, LEADER | {101, 102}, 3) == 4
    assert admissions.admit(0.001, LEADER, 3) == 2


def test_a_task_born_and_gone_unseen_counts_for_the_window_only() -> None:
    admissions = Admissions()
    for step in range(2):
        admissions.admit(step * 0.001, LEADER, 3)
    assert admissions.admit(0.01, LEADER, 3) == 4
    assert admissions.admit(IN_FLIGHT_SECONDS + 0.002, LEADER, 3) == 2


def test_tasks_seen_and_gone_no_longer_count() -> None:
    admissions = Admissions()
    admissions.admit(0.0, LEADER, 3)
    admissions.look(0.001, LEADER | {101})
    assert admissions.admit(0.002, LEADER, 3) == 2

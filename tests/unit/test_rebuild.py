"""Which days `supplier_stats` is rebuilt for while records of an unreadable version wait in the dead-letter topic."""

from lineage_assets.assets.lakehouse import Rebuild


def test_clean_ingestion_rebuilds_its_days():
    rebuild = Rebuild.after({}, ["2026-11-20"], incompatible=0, returned=0)
    assert (rebuild.days, rebuild.held_back, rebuild.outstanding) == (["2026-11-20"], [], 0)
    assert rebuild.assertion().passed and rebuild.check_result().passed


def test_days_wait_while_dead_letters_are_outstanding_and_come_back_with_the_replays():
    drift = Rebuild.after({}, ["2026-11-21"], incompatible=3, returned=0)
    assert (drift.days, drift.held_back, drift.outstanding) == ([], ["2026-11-21"], 3)
    assert not drift.check_evaluation().passed and drift.assertion().actual == "3"
    later = Rebuild.after(drift.values, ["2026-11-22"], incompatible=0, returned=2)  # two of three replayed
    assert (later.days, later.held_back, later.outstanding) == ([], ["2026-11-21", "2026-11-22"], 1)
    back = Rebuild.after(later.values, ["2026-11-21"], incompatible=0, returned=1)
    assert (back.days, back.held_back, back.outstanding) == (["2026-11-21", "2026-11-22"], [], 0)

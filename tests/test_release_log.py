"""ReleaseLog: the audit's one-pass index of a generation's public answers must give, before every bundle, the
transcript and the last over-threshold answer that rebuilding them from the entries before it gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from heldout.entries import BundleEntry, records
from heldout.generations.release import ReleaseLog, Transcript, last_over_threshold, transcripts

HEX = "ab" * 32

answer = st.fixed_dictionaries({
    "generation": st.sampled_from(["gen1", "gen1", "gen1", "gen2"]),
    "task": st.sampled_from(["bloodmnist", "pathmnist"]),
    "release": st.one_of(
        st.none(),
        st.fixed_dictionaries({"mode": st.just("ladder"),
                               "value": st.one_of(st.none(), st.floats(0, 100, allow_nan=False), st.booleans()),
                               "label_dependent": st.one_of(st.booleans(), st.just(1), st.none())})),
})


def bundle(index: int, fields: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    entry: dict[str, Any] = {"type": "bundle", "v": 1, "generation": fields["generation"], "model_id": f"m{index}",
                             "task": fields["task"], "evaluation_sha256": HEX, "predictions_sha256": HEX,
                             "created_utc": "2026-03-01T00:00:00Z"}
    if fields["release"] is not None:
        entry["release"] = fields["release"]
    return index, entry


@settings(max_examples=150, deadline=None)
@given(st.lists(answer, max_size=40))
def test_the_release_log_equals_rebuilding_from_the_entries_before_each_bundle(answers: list[dict[str, Any]]) -> None:
    entries = [bundle(index, fields) for index, fields in enumerate(answers, start=3)]
    log = ReleaseLog.of(records(entries, BundleEntry), "gen1")
    for index in range(3, 3 + len(answers) + 1):
        before = [(i, e) for i, e in entries if i < index]
        for task in ("bloodmnist", "pathmnist"):
            transcript = transcripts(before, "gen1").get(task, Transcript())
            assert log.before(task, index) == transcript
            assert log.place(task, index) == len(transcript.answers)
            assert log.last_over_threshold(task, index) == last_over_threshold(transcript)

"""Reliability diagrams from public data: where a generation's labels are public (its reveal is in the export:
the ``public`` generation, or a retired one revealed), the calibration bins of a cited bundle are computed from
its stored predictions and those labels with MedEval-1's ECE binning (``harness.metrics.calibration_bins``).
On a still-sealed generation the labels are secret, so no bins exist: the page draws the published summary."""

from __future__ import annotations

from typing import Any

from harness.metrics import StoredPredictions, calibration_bins, labels_bytes
from heldout.generations import RevealDocument, parse_reveal, revealed_labels
from heldout.site.collect import PassportRecord, SiteData
from seals import parse_json_object, prepare, sha256_hex


class RevealedLabels:
    """Reveals read once per generation; bins computed once per bundle entry."""

    def __init__(self, site: SiteData) -> None:
        self.site = site
        self._reveals: dict[str, RevealDocument | None] = {}
        self._bins: dict[int, list[dict[str, Any]] | None] = {}

    def _reveal(self, generation: str) -> RevealDocument | None:
        if generation not in self._reveals:
            state = self.site.generations.get(generation)
            digest = state.reveal_sha256 if state else None
            self._reveals[generation] = None if not digest or not self.site.export.has_blob(digest) else \
                parse_reveal(parse_json_object(self.site.export.blob(digest), what=f"reveal of {generation}"))
        return self._reveals[generation]

    def bins_for(self, record: PassportRecord) -> dict[str, list[dict[str, Any]]]:
        """Task -> bins, for the cited bundles whose labels are public and match the bundle's labels hash."""
        reveal = self._reveal(record.generation)
        out: dict[str, list[dict[str, Any]]] = {}
        if reveal is None:
            return out
        for ref in (record.verdict.passport.heldout or {}).get("bundles") or []:
            index = ref.get("index")
            if not isinstance(index, int):
                continue
            if index not in self._bins:
                entry = self.site.export.entry(index)
                _, labels = revealed_labels(reveal, str(entry.get("task")))
                bins = None
                stated = entry.get("labels_hash")  # (a sealed generation's entry states none: its labels stay
                # unhashed until the reveal; the audit binds them by re-deriving the bundle)
                if len(labels) and (stated is None or sha256_hex(labels_bytes(labels)) == stated):
                    stored = StoredPredictions.from_npz_bytes(self.site.export.blob(str(entry["predictions_sha256"])))
                    if len(stored.clean_probs) == len(labels):
                        bins = prepare(calibration_bins(stored.clean_probs, labels))
                self._bins[index] = bins
            found = self._bins[index]
            if found is not None:
                out[str(ref.get("task"))] = found
        return out

"""The site's pages, rendered from verified :class:`SiteData`. Each function returns the text of one page (or a
list of pages); nothing here reads files or the clock."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness.metrics.spec import COMPOSITE_WEIGHTS, DIMENSIONS
from heldout.site.collect import PassportRecord, SiteData
from heldout.site.html import (
    MISSING,
    code,
    data_block,
    definition_list,
    esc,
    fixed,
    number,
    page,
    raw_text,
    table,
    value_text,
)
from heldout.site.paths import blob_path, seal_manifest_name, source_href
from heldout.site.svg import dimension_bars, reliability_diagram, retention_lines
from keys import TrustedKey, b64encode, verifier_key_string
from ledger.rfc6962 import leaf_hash
from seals import format_utc, jcs_bytes

ENTRIES_PER_PAGE = 500
RANK_RULE = ("Ranked within each generation and task suite by composite index (the mean over the suite's tasks of "
             "MedEval-1's composite index) descending, then by the lower bound of the 95% interval of balanced "
             "accuracy (mean over the tasks) descending, then by model id. Only passports that verify as valid at "
             "the reference time are ranked; expired, lapsed (generation retired or spec superseded) and "
             "superseded passports are listed apart, unranked.")
SORT_KEYS = [{"key": "composite_index", "order": "descending"}, {"key": "ci95_low", "order": "descending"},
             {"key": "model_id", "order": "ascending"}]
STATE_WORDS = {0: "valid", 3: "expired", 4: "lapsed"}


def _page(site: SiteData, title: str, root: str, body: str, *, scripts: bool = False) -> str:
    return page(title=title, root=root, body=body, at_text=format_utc(site.at), release_tag=site.release_tag,
                scripts=scripts)


def blob_link(root: str, digest: str, carried: set[str], text: str | None = None) -> str:
    """A link to a blob the site publishes (``carried``: SHA-256 digests only), else the label as text."""
    label = esc(text or digest)
    path = blob_path(digest)
    if path is not None and digest in carried:
        return f'<a href="{root}{path}">{label}</a>'
    return label


def seal_link(root: str, site: SiteData, generation: Any, text: str, digest: str | None = None) -> str:
    """A link to ``seals/<generation>.seal.json`` when the site publishes that file (and, given ``digest``, the
    file's SHA-256 is that), else ``text`` (escaped)."""
    path = f"seals/{seal_manifest_name(str(generation))}"
    if path in site.seal_files and digest in (None, site.seal_files[path]):
        return f'<a href="{root}{esc(path)}">{esc(text)}</a>'
    return esc(text)


def entry_page_link(root: str, index: int) -> str:
    number_ = index // ENTRIES_PER_PAGE + 1
    return f'<a href="{root}ledger/entries-{number_:04d}.html#e{index}">{index}</a>'


# --- passport ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One passport's figures for the leaderboard."""

    record: PassportRecord
    tasks: tuple[str, ...]
    composite_index: float | None
    ci95_low: float | None

    def to_json(self, rank: int | None) -> dict[str, Any]:
        r = self.record
        heldout = r.verdict.passport.heldout or {}
        subject = r.doc.get("subject") or {}
        return {
            "rank": rank,
            "model_id": r.model_id,
            "model_name": subject.get("model_name"),
            "family": subject.get("family"),
            "generation": r.generation,
            "task_suite": list(self.tasks),
            "composite_index": self.composite_index,
            "ci95_low": self.ci95_low,
            "per_task": {str(e.get("task")): {"composite_index": (e.get("composite") or {}).get("index"),
                                              "ci95": ((e.get("dimensions") or {}).get("accuracy") or {}).get("ci95")}
                         for e in r.verdict.passport.evaluations},
            "bundle_indices": [b.get("index") for b in heldout.get("bundles") or []],
            "passport_entry": r.entry_index,
            "passport_sha256": r.sha256,
            "state": STATE_WORDS[r.exit_code],
            "verdict": r.verdict.line,
            "exit_code": r.exit_code,
            "superseded_by": r.superseded_by,
            "page": r.page,
        }


def _mean(values: list[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers or len(numbers) != len(values):
        return None
    return round(sum(numbers) / len(numbers), 6)


def leaderboard_row(record: PassportRecord) -> Row:
    evaluations = record.verdict.passport.evaluations
    tasks = tuple(sorted(str(e.get("task")) for e in evaluations))
    composite = _mean([(e.get("composite") or {}).get("index") for e in evaluations])
    lows = []
    for e in evaluations:
        ci = ((e.get("dimensions") or {}).get("accuracy") or {}).get("ci95")
        lows.append(ci[0] if isinstance(ci, list) and ci else None)
    return Row(record, tasks, composite, _mean(lows))


def _sort_key(row: Row) -> tuple[Any, ...]:
    missing = float("inf")
    return (-(row.composite_index if row.composite_index is not None else -missing),
            -(row.ci95_low if row.ci95_low is not None else -missing), row.record.model_id, row.record.entry_index)


def _evaluation_table(evaluations: tuple[dict[str, Any], ...]) -> str:
    headers = ["task", *[esc(d) for d in DIMENSIONS], "composite index", "coverage", "ci95 (balanced accuracy)"]
    rows = []
    for e in evaluations:
        dims = e.get("dimensions") or {}
        cells = [esc(e.get("task"))]
        for d in DIMENSIONS:
            dim = dims.get(d)
            if not isinstance(dim, dict):
                cells.append(f'<span class="null" title="null: not measured for this task">{MISSING}</span>')
            elif dim.get("score") is None:
                reason = dim.get("not_scored_reason") or "not scored"
                cells.append(f'<span class="null" title="{esc(reason)}">not scored</span>')
            else:
                cells.append(fixed(dim.get("score")))
        composite = e.get("composite") or {}
        ci = (dims.get("accuracy") or {}).get("ci95")
        cells.append(f"<strong>{fixed(composite.get('index'))}</strong>")
        cells.append(fixed(composite.get("coverage")))
        cells.append(f"[{fixed(ci[0], 4)}, {fixed(ci[1], 4)}]" if isinstance(ci, list) and len(ci) == 2 else MISSING)
        rows.append(cells)
    weights = ", ".join(f"{d} {number(w)}" for d, w in sorted(COMPOSITE_WEIGHTS.items()))
    return (table(headers, rows, cls="dims") +
            f'<p class="note">Scores 0 to 100. Composite weights (MedEval-1): {esc(weights)}; a dimension not '
            "scored is left out and the weights are renormalised (coverage = the weights scored).</p>")


def _configuration(evaluations: tuple[dict[str, Any], ...]) -> str:
    members = ("task_name", "modality", "kind", "n_classes", "n_test", "split_origin", "device", "seed",
               "code_fingerprint", "spec_version", "runtime_s", "timestamp")
    rows = [[esc(e.get("task")), *[value_text(e.get(m)) for m in members]] for e in evaluations]
    return table(["task", *members], rows, cls="config")


def _limitations(evaluations: tuple[dict[str, Any], ...]) -> str:
    items = []
    for e in evaluations:
        task = esc(e.get("task"))
        lim = e.get("limitations") or {}
        for key, value in sorted(lim.items()):
            items.append(f"<li><strong>{task}</strong>: {esc(key)} = {value_text(value)}</li>")
        for d in DIMENSIONS:
            dim = (e.get("dimensions") or {}).get(d)
            if dim is None:
                items.append(f"<li><strong>{task}</strong>: {esc(d)} is null (not measured for this task)</li>")
            elif isinstance(dim, dict):
                for key in ("not_scored_reason", "caveat"):
                    if dim.get(key):
                        items.append(f"<li><strong>{task}</strong>: {esc(d)}: {esc(dim[key])}</li>")
    return "<ul>" + "".join(items) + "</ul>" if items else "<p>None recorded.</p>"


def _pictures(evaluations: tuple[dict[str, Any], ...], bins: Mapping[str, list[dict[str, Any]]]) -> str:
    out = []
    for e in evaluations:
        task = str(e.get("task"))
        dims = e.get("dimensions") or {}
        scores = [(d, (dims.get(d) or {}).get("score") if isinstance(dims.get(d), dict) else None)
                  for d in DIMENSIONS]
        figures = [("dimensions", dimension_bars(task, scores)),
                   ("reliability" + (" (bins from the revealed labels)" if task in bins else " (summary)"),
                    reliability_diagram(task, dims.get("calibration"), bins.get(task)))]
        for name in ("corruption", "acquisition"):
            dim = dims.get(name)
            if isinstance(dim, dict):
                figures.append((f"{name} retention", retention_lines(task, name, dim.get("per_perturbation"))))
        cells = "".join(f"<figure>{svg}<figcaption>{esc(cap)}</figcaption></figure>" for cap, svg in figures)
        out.append(f'<h3>{esc(task)}</h3><div class="figures">{cells}</div>')
    note = ("<p class=\"note\">Reliability: where the generation's labels are public (the public split, or a "
            "retired generation's reveal) the diagram has one bar per ECE bin, computed here from the bundle's "
            "stored predictions and those labels. On a sealed generation per-bin accuracies would be "
            "label-dependent releases, so only the published mean confidence and accuracy are drawn: one point "
            "against the diagonal, the red segment being the overconfidence.</p>")
    return "".join(out) + note


def _issuer_key(site: SiteData, record: PassportRecord) -> tuple[int, TrustedKey]:
    """The ledger-declared key the passport's issuer is (the first declaration of its public key, as
    ``heldout.passports`` finds it; the build verified the passport under it)."""
    issuer = record.doc.get("issuer")
    issuer_b64 = issuer.get("public_key_b64") if isinstance(issuer, dict) else None
    return next(((i, k) for i, k in site.keys if k.public_key.b64 == issuer_b64), site.keys[0])


def lapse_entries(site: SiteData, record: PassportRecord) -> list[int]:
    """The entries that decide the passport's standing beyond its own: its generation's seal and the retire (or
    early reveal) that counts for it, the supersession of its spec version that counts, and the key entry that
    declares its issuer (the first of each, as the CLI reads the log; none of any other passport), and the
    model's first bundle on the generation outside the passport's checkpoint, dated by the reference time."""
    wanted: set[int] = set()
    generation = site.generations.get(record.generation)
    if generation is not None:
        wanted.add(generation.seal_index)
        if generation.retire_index is not None:
            wanted.add(generation.retire_index)
        passport = record.verdict.passport
        size = int(((passport.heldout or {}).get("checkpoint") or {}).get("size") or 0)
        newer = next((b.index for b in generation.bundles
                      if b.model_id == passport.model_id and b.index >= size and b.created <= site.at), None)
        if newer is not None:
            wanted.add(newer)
    supersession = site.supersessions.get(record.verdict.passport.spec_version)
    if supersession is not None and supersession.index is not None:
        wanted.add(int(supersession.index))
    index, _ = _issuer_key(site, record)
    if index > 0:
        wanted.add(index)
    return sorted(wanted)


def passport_context(site: SiteData, record: PassportRecord) -> dict[str, Any]:
    """The public data the page's Verify button needs to reach the CLI's verdict without a server: the ledger's
    entry 0, the head checkpoint, a consistency proof from the passport's checkpoint to it, the cited bundle
    entries, and, each with an inclusion proof against the head, the passport's own entry and the entries that
    decide its standing (:func:`lapse_entries`). Nothing else: the page's size does not grow with the ledger."""
    export = site.export
    head = site.head
    heldout = record.verdict.passport.heldout or {}
    size = int((heldout.get("checkpoint") or {}).get("size") or 0)
    entries: dict[str, str] = {"0": export.entry_bytes(0).decode("utf-8")}
    inclusion: dict[str, list[str]] = {}
    for ref in heldout.get("bundles") or []:
        index = ref.get("index")
        if isinstance(index, int) and 0 <= index < site.size:
            entries[str(index)] = export.entry_bytes(index).decode("utf-8")
    for index in sorted({record.entry_index, *lapse_entries(site, record)}):
        if 0 <= index < head.size:
            entries[str(index)] = export.entry_bytes(index).decode("utf-8")
            inclusion[str(index)] = site.head_proof(index)
    consistency = [b64encode(h) for h in export.consistency_proof(size, head.size).path] if 0 < size <= head.size \
        else []
    return {
        "at": format_utc(site.at),
        "ledger": {
            "ledger_id": site.ledger_id,
            "origin": site.origin,
            "head_note": head.note,
            "consistency_from": size,
            "consistency": consistency,
            "entries": entries,
            "inclusion": inclusion,
        },
    }


def _key_json(index: int, k: TrustedKey) -> dict[str, Any]:
    return {"key_id": k.key_id, "name": k.name, "public_key_b64": k.public_key.b64, "entry": index}


def site_keys(site: SiteData) -> list[dict[str, Any]]:
    return [_key_json(index, k) for index, k in site.keys]


def passport_keys(site: SiteData, record: PassportRecord) -> list[dict[str, Any]]:
    """The keys a passport page's Verify buttons trust: the ledger's key (entry 0) and the declared key of the
    passport's issuer, both as the key page lists them (not every key the ledger declares: a page's size must not
    grow with the ledger)."""
    chosen = [site.keys[0], _issuer_key(site, record)]
    return [_key_json(index, k) for index, k in dict(chosen).items()]


def passport_page(site: SiteData, record: PassportRecord, carried: set[str],
                  bins: Mapping[str, list[dict[str, Any]]]) -> str:
    root = "../"
    doc = record.doc
    p = record.verdict.passport
    subject = doc.get("subject") or {}
    computed = doc.get("computed") or {}
    heldout = p.heldout or {}
    audit = computed.get("audit") or {}
    state = STATE_WORDS[record.exit_code]
    generation = site.generations.get(record.generation)
    superseded = (f'<p class="warn">A later passport for this model and generation was logged at entry '
                  f"{entry_page_link(root, record.superseded_by)}; this one is kept for the record and not "
                  "ranked.</p>" if record.superseded_by is not None else "")
    banner = (
        f'<section class="verdict {esc(state)}" id="verdict"><h1>{esc(subject.get("model_name") or p.model_id)} '
        f'<small>{esc(p.model_id)} on {esc(record.generation)}</small></h1>'
        f'<p class="line" id="build-verdict">{esc(record.verdict.line)}</p>'
        f'<p>exit code <strong id="build-exit">{record.exit_code}</strong> ({esc(state)}) at '
        f"{esc(format_utc(site.at))}: what <code>heldout passport verify</code> reports for this file against "
        "this ledger at that time (checked when this site was built).</p>"
        f"{superseded}"
        '<div class="verify"><button type="button" id="verify-button" disabled>Verify in this browser</button> '
        '<button type="button" id="verify-now" disabled>Verify at this browser\'s clock</button>'
        '<output id="verify-result" aria-live="polite">JavaScript is off or has not run: the facts below are the '
        "build's; the button re-checks them here.</output></div>"
        f'<p class="note">The browser check recomputes the RFC 8785 bytes, checks the Ed25519 signature with the '
        f'key published on this site\'s <a href="{root}keys.html">key page</a> (and only that key), the signed '
        "checkpoint note, the consistency of that checkpoint with the ledger head, every cited bundle's RFC 9162 "
        "inclusion proof, the hash of each evaluation, and whether the generation was retired or the spec "
        "superseded. The rules that need the whole log (each cited bundle the latest of its task and within the "
        "leakage budget, the audit's counts, the key declared before the passport) are the build's check, shown "
        "above.</p></section>"
    )
    subject_rows = [(esc(k), value_text(v)) for k, v in sorted(subject.items())]
    expiry_rows = [("issued", esc(doc.get("issued_utc"))), ("expires", esc(doc.get("expiry_utc"))),
                   ("expiry basis", esc(doc.get("expiry_basis"))),
                   ("generation", esc(heldout.get("generation"))),
                   ("set hash", code(heldout.get("set_hash")))]
    canonicalisation = sorted((doc.get("canonicalisation") or {}).items())
    spec_rows = [("spec version", esc(doc.get("spec_version"))),
                 ("passport version", esc(doc.get("passport_version"))),
                 *[(f"canonicalisation: {esc(k)}", esc(v)) for k, v in canonicalisation]]
    issuer = doc.get("issuer") or {}
    issuer_rows = [(esc(k), code(v)) for k, v in sorted(issuer.items())]
    fingerprints = ", ".join(code(f) for f in subject.get("code_fingerprints") or [subject.get("code_fingerprint")])

    gen_state = esc(generation.state_at(site.at) if generation else "unknown")
    if generation and generation.retire_index is not None:
        gen_state += (f" (retired at entry {entry_page_link(root, generation.retire_index)}, reason "
                      f"{esc(generation.retire_reason)})")
    held_rows = [
        ("generation", esc(heldout.get("generation"))),
        ("state at reference time", gen_state),
        ("set hash", code(heldout.get("set_hash"))),
        ("seal manifest", seal_link(root, site, heldout.get("generation"), str(heldout.get("manifest_sha256")),
                                    str(heldout.get("manifest_sha256")))),
        ("sealed at entry", entry_page_link(root, int(heldout.get("seal_index") or 0))),
        ("generation expiry", esc(heldout.get("expiry_utc"))),
        ("ledger", code(heldout.get("ledger_id"))),
        ("note verifier key", code(heldout.get("note_verifier_key"))),
        ("checkpoint", f"size {number((heldout.get('checkpoint') or {}).get('size'))}, root "
                       f"{code((heldout.get('checkpoint') or {}).get('root_b64'))}"),
        ("signed note", f"<pre>{esc((heldout.get('checkpoint') or {}).get('note'))}</pre>"),
    ]
    bundle_rows = []
    for ref in heldout.get("bundles") or []:
        bundle_rows.append([
            entry_page_link(root, int(ref.get("index") or 0)), esc(ref.get("task")), code(ref.get("leaf_hash_b64")),
            blob_link(root, str(ref.get("evaluation_sha256")), carried),
            blob_link(root, str(ref.get("predictions_sha256")), carried),
            "<br>".join(code(h) for h in ref.get("inclusion_proof") or []) or "(empty: single-leaf tree)"])
    audit_rows = [(esc(k), value_text(v)) for k, v in sorted(audit.items()) if k != "audit_command"]
    rerun = f"python audit.py {site.ledger_id} --from EXPORT"
    source_rows = []
    for source in computed.get("sources") or []:
        path, digest = str(source.get("path")), str(source.get("sha256"))
        href = source_href(path, digest, seals=site.seal_files, blobs=carried)
        if href is not None:  # exactly a file the site publishes, with the SHA-256 shown beside it
            where = f'<a href="{root}{esc(href)}">{esc(path)}</a>'
        elif path.startswith(("blobs/", "seals/")):
            where = (f"{esc(path)} <span class=\"note\">(not linked: not a file this site publishes under that "
                     "name with that SHA-256)</span>")
        else:
            where = (f"{esc(path)} <span class=\"note\">(the operator's own audit report: not part of the public "
                     "export; a third-party replay writes its own)</span>")
        source_rows.append([where, code(digest)])

    def null_block(member: str) -> str:
        value = doc.get(member)
        note = doc.get(f"{member}_note")
        shown = "null" if value is None else esc(jcs_bytes(value).decode("utf-8"))
        why = f"<p>{esc(note)}</p>" if note else "<p>No note was given.</p>"
        return f"<p><code>{member}</code>: <code>{shown}</code></p>{why}"

    cross_site = computed.get("cross_site")
    raw = record.data.decode("utf-8")
    body = "".join([
        banner,
        "<section><h2>Subject and configuration</h2>", definition_list(subject_rows),
        f"<p>Code fingerprint: {fingerprints}</p>", _configuration(p.evaluations), "</section>",
        "<section><h2>Spec</h2>", definition_list(spec_rows), "</section>",
        "<section><h2>Issued and expiry</h2>", definition_list(expiry_rows),
        "<h3>Issuer</h3>", definition_list(issuer_rows), "</section>",
        "<section><h2>Tasks and the nine MedEval-1 dimensions</h2>", _evaluation_table(p.evaluations), "</section>",
        "<section><h2>Pictures</h2>", _pictures(p.evaluations, bins), "</section>",
        "<section><h2>Known limitations</h2>", _limitations(p.evaluations), "</section>",
        "<section><h2>Held-out track</h2>", definition_list(held_rows),
        "<h3>Cited bundles</h3>",
        table(["entry", "task", "leaf hash", "evaluation", "predictions", "inclusion proof"], bundle_rows),
        "</section>",
        "<section><h2>Audit chain</h2>", definition_list(audit_rows),
        f"<p>The operator's audit (signed in this passport): <code>{esc(audit.get('audit_command'))}</code></p>",
        f"<p>Re-run it yourself from the public export of ledger {code(site.ledger_id)}: <code>{esc(rerun)}</code> "
        f"and check this passport: <code>heldout passport verify blobs/sha256/{record.sha256[:2]}/{record.sha256} "
        f"--from EXPORT --key {esc(issuer.get('public_key_b64'))} --at {esc(format_utc(site.at))}</code></p>"
        "</section>",
        "<section><h2>Sources</h2>", table(["source", "SHA-256"], source_rows), "</section>",
        "<section><h2>Vendor declaration</h2>", null_block("declared"), "</section>",
        "<section><h2>Observed in deployment</h2>", null_block("observed"), "</section>",
        "<section><h2>Cross-site</h2>",
        "<p><code>computed.cross_site</code>: <code>null</code>: no cross-site replication was run for this "
        "passport.</p>" if cross_site is None else f"<pre>{value_text(cross_site)}</pre>", "</section>",
        "<section><h2>Raw signed JSON</h2>",
        f"<p>Passport entry {entry_page_link(root, record.entry_index)}, SHA-256 "
        f"{blob_link(root, record.sha256, carried)} ({len(record.data)} bytes).</p>",
        f'<pre class="raw" id="raw-json">{raw_text(raw)}</pre></section>',
        '<section><h2>Verify a copy</h2><p>Paste a passport you received elsewhere: it is checked against this '
        "ledger's data on this page and the site's keys, or against a key you give (like <code>--key</code>; then "
        "without the ledger if the passport has no held-out track).</p>"
        '<textarea id="copy-text" rows="6" cols="80" aria-label="passport JSON"></textarea><br>'
        '<input id="copy-key" size="50" placeholder="optional: base64 Ed25519 key to trust instead" '
        'aria-label="key"> <button type="button" id="copy-verify" disabled>Verify the copy</button>'
        '<output id="copy-result"></output></section>',
        data_block("heldout-keys", passport_keys(site, record)),
        data_block("heldout-context", passport_context(site, record)),
        data_block("heldout-passport", raw),
    ])
    return _page(site, f"{p.model_id} on {record.generation}: passport", root, body, scripts=True)


# --- leaderboard ---------------------------------------------------------------------------------------------

def leaderboard(site: SiteData) -> tuple[dict[str, Any], str]:
    """``leaderboard.json`` (schema version 1) and ``index.html``."""
    ranked: dict[tuple[str, tuple[str, ...]], list[Row]] = {}
    unranked: list[Row] = []
    for record in site.passports:
        row = leaderboard_row(record)
        if record.exit_code == 0 and record.superseded_by is None:
            ranked.setdefault((record.generation, row.tasks), []).append(row)
        else:
            unranked.append(row)
    boards = []
    for (generation, tasks) in sorted(ranked):
        rows = sorted(ranked[(generation, tasks)], key=_sort_key)
        state = site.generations.get(generation)
        boards.append({"generation": generation, "task_suite": list(tasks),
                       "held_out": state is not None and state.membership != "public",
                       "rows": [row.to_json(i + 1) for i, row in enumerate(rows)]})
    unranked.sort(key=lambda r: (r.record.generation, r.record.model_id, r.record.entry_index))
    document = {
        "schema_version": 1,
        "release_tag": site.release_tag,
        "reference_time": format_utc(site.at),
        "reference_time_basis": site.at_basis,
        "ledger_id": site.ledger_id,
        "checkpoint": {"size": site.head.size, "root_b64": b64encode(site.head.root)},
        "rank_rule": RANK_RULE,
        "sort_keys": SORT_KEYS,
        "boards": boards,
        "unranked": [row.to_json(None) for row in unranked],
        "later_findings": [finding.to_json() for finding in site.later_findings],
    }
    return document, _leaderboard_html(site, document)


def later_findings_notice(site: SiteData, root: str) -> str:
    """The findings of the audit of the whole log that the log as it stood at the last passport did not have,
    as a warning: the passports shown stand on that log, but what was logged after it (bundles, leakage
    charges, retirements, reveals) is not vouched for, and the state shown (a generation's budget, a passport
    lapsed by a retirement) includes it."""
    if not site.later_findings:
        return ""
    last = max((record.entry_index for record in site.passports), default=None)
    after = "no logged passport" if last is None else f"the last passport (entry {entry_page_link(root, last)})"
    rows = [[entry_page_link(root, f.index), esc(f.check), esc(f.message)] for f in site.later_findings]
    count = len(site.later_findings)
    return ('<section class="findings" id="later-findings"><h2>Audit findings after the last passport</h2>'
            f"<p class=\"note\"><strong>The audit of the whole log has {count} finding{'s' if count > 1 else ''} "
            f"that the log as it stood at {after} did not have.</strong> No passport on this site rests on what "
            "was logged after it (each is judged on the log as it stood when it was logged), but that is not "
            "vouched for, and the state this site shows (a generation's leakage budget and bundles, a passport "
            "lapsed by a retirement) includes it. <code>python audit.py LEDGER --from EXPORT</code> names each.</p>"
            + table(["entry", "check", "finding"], rows) + "</section>")


def _row_cells(row: Mapping[str, Any], ranked: bool) -> list[str]:
    cells = [str(row["rank"])] if ranked else [esc(row["state"])]
    cells += [f'<a href="{esc(row["page"])}">{esc(row["model_id"])}</a><br><small>{esc(row["model_name"])}</small>',
              f"<strong>{fixed(row['composite_index'])}</strong>", fixed(row["ci95_low"], 4),
              ", ".join(f"{esc(t)} {fixed(v['composite_index'])}" for t, v in sorted(row["per_task"].items())),
              ", ".join(entry_page_link("", int(i)) for i in row["bundle_indices"] if isinstance(i, int)),
              f'<code class="hash">{esc(row["passport_sha256"])}</code>']
    if not ranked:
        cells.insert(1, esc(row["generation"]))
        cells.append(esc(row["verdict"]))
    return cells


def _leaderboard_html(site: SiteData, doc: Mapping[str, Any]) -> str:
    headers = ["rank", "model", "composite index", "ci95 low", "per task", "bundle entries", "passport SHA-256"]
    tabs = []
    sections = []
    for board in doc["boards"]:
        anchor = f"{board['generation']}--{'+'.join(board['task_suite'])}"
        tabs.append(f'<a href="#{esc(anchor)}">{esc(board["generation"])}: {esc(", ".join(board["task_suite"]))}</a>')
        families: dict[str, list[Mapping[str, Any]]] = {}
        for row in board["rows"]:
            families.setdefault(str(row["family"]), []).append(row)
        parts = [f'<section class="board" id="{esc(anchor)}"><h2>{esc(board["generation"])} '
                 f'<small>tasks: {esc(", ".join(board["task_suite"]))}</small></h2>']
        if not board["held_out"]:  # (ranked beside the sealed boards, it would read as held-out evidence)
            parts.append('<p class="note"><strong>Not held out:</strong> the cases and labels of this generation '
                         "are published (the public split); these scores are not held-out evidence.</p>")
        for family in sorted(families):
            parts.append(f"<h3>family: {esc(family)}</h3>")
            parts.append(table(headers, [_row_cells(r, True) for r in families[family]], cls="board"))
        parts.append("</section>")
        sections.append("".join(parts))
    unranked_headers = ["state", "generation", "model", "composite index", "ci95 low", "per task", "bundle entries",
                        "passport SHA-256", "verdict"]
    unranked = table(unranked_headers, [_row_cells(r, False) for r in doc["unranked"]]) if doc["unranked"] \
        else "<p>None.</p>"
    body = "".join([
        "<h1>Leaderboard</h1>",
        f"<p>Ledger {code(site.ledger_id)} at checkpoint size {site.head.size} (root "
        f"{code(b64encode(site.head.root))}); reference time {esc(format_utc(site.at))} "
        f"({esc(site.at_basis)}). Machine-readable: <a href=\"leaderboard.json\">leaderboard.json</a> (schema "
        "version 1, sort keys declared).</p>",
        f'<p class="rule"><strong>Ranking rule.</strong> {esc(RANK_RULE)}</p>',
        '<nav class="tabs">' + " ".join(tabs) + ' <a href="#unranked">retired, lapsed, expired</a></nav>'
        if tabs else '<nav class="tabs"><a href="#unranked">retired, lapsed, expired</a></nav>',
        later_findings_notice(site, ""),
        "".join(sections) if sections else "<p>No passport is valid at the reference time.</p>",
        '<section id="unranked"><h2>Retired, lapsed, expired or superseded (not ranked)</h2>', unranked, "</section>",
    ])
    return _page(site, "heldout leaderboard", "", body)


# --- keys, generations, ledger -------------------------------------------------------------------------------

def keys_page(site: SiteData) -> str:
    rows = [[esc(k.key_id), esc(k.name), code(k.public_key.b64), code(k.public_key.fingerprint),
             code(verifier_key_string(k.name, k.public_key)), entry_page_link("", index)] for index, k in site.keys]
    body = ("<h1>Keys</h1><p>The Verify buttons of this site trust these keys, and only these. They are the keys "
            f"the ledger {code(site.ledger_id)} declares: entry 0 (whose SHA-256 gives the ledger id) and any "
            "<code>key</code> entries. Compare them with a copy you obtained another way before trusting a verdict."
            "</p>" + table(["key id", "name", "Ed25519 public key (base64)", "fingerprint (SHA-256)",
                            "note verifier key", "declared at entry"], rows))
    return _page(site, "heldout keys", "", body)


def generations_page(site: SiteData, carried: set[str]) -> str:
    root = "../"
    key = site.keys[0][1].public_key.b64
    rows = []
    for name, g in site.generations.items():
        budget = "unbounded" if g.budget_bits is None else f"{fixed(g.bits_used)} of {fixed(g.budget_bits)} bits"
        reveal = MISSING
        if g.reveal_sha256:
            reveal = (blob_link(root, g.reveal_sha256, carried, "reveal") +
                      f"<br><code>heldout verify-reveal {esc(name)} --from EXPORT --key {esc(key)}</code>")
        retired = MISSING if g.retire_index is None else (
            f"entry {entry_page_link(root, g.retire_index)} ({esc(g.retire_reason)}, "
            f"{esc(format_utc(g.retired_at) if g.retired_at else '')})")
        rows.append([seal_link(root, site, name, name), esc(g.membership),
                     f"{esc(format_utc(g.created))}<br>entry {entry_page_link(root, g.seal_index)}",
                     code(g.set_hash), esc(format_utc(g.expiry)), f"<strong>{esc(g.state_at(site.at))}</strong>",
                     budget, str(len(g.bundles)), retired, reveal])
    body = ("<h1>Generations</h1><p>Every generation sealed on the ledger, as the ledger describes it at the "
            f"reference time {esc(format_utc(site.at))}.</p>" + later_findings_notice(site, root) +
            table(["generation", "membership", "sealed", "set hash", "expiry", "state", "leakage budget used",
                   "bundles", "retired", "reveal"], rows))
    return _page(site, "heldout generations", root, body)


def _entry_summary(entry: Mapping[str, Any]) -> str:
    parts = [f"{k} {entry[k]}" for k in ("generation", "model_id", "task", "reason", "spec_version") if k in entry]
    return esc(", ".join(str(p) for p in parts))


def ledger_pages(site: SiteData, carried: set[str]) -> Iterator[tuple[str, str]]:
    """``ledger/index.html``, checkpoint pages and entry pages (500 a page), one at a time as (path, text).

    An entry page carries each entry's bytes once, in its ``<pre id="raw<index>">`` (readable without
    JavaScript); its data island carries only the inclusion proofs, and "verify this entry" hashes the text of
    that element (a parser that changed it would make the proof fail, never pass)."""
    root = "../"
    export = site.export
    head = site.head
    n_entry_pages = max(1, -(-site.size // ENTRIES_PER_PAGE))
    n_checkpoint_pages = max(1, -(-len(site.checkpoints) // ENTRIES_PER_PAGE))

    def pager(prefix: str, count: int, current: int | None) -> str:
        links = [(f"<strong>{i}</strong>" if i == current else f'<a href="{prefix}-{i:04d}.html">{i}</a>')
                 for i in range(1, count + 1)]
        return '<nav class="pager">' + " ".join(links) + "</nav>"

    overview = definition_list([
        ("ledger id", code(site.ledger_id)), ("origin", code(site.origin)), ("size", str(site.size)),
        ("root (head checkpoint)", code(b64encode(head.root))),
        ("note verifier key", code(verifier_key_string(site.keys[0][1].name, site.keys[0][1].public_key))),
        ("head checkpoint", f"<pre>{esc(head.note)}</pre>"),
    ])
    yield "ledger/index.html", _page(site, "heldout ledger", root, "".join([
        "<h1>Ledger</h1>", overview,
        "<h2>Entries</h2>", pager("entries", n_entry_pages, None),
        "<h2>Checkpoints</h2>", pager("checkpoints", n_checkpoint_pages, None),
        '<h2>Generations</h2><p><a href="generations.html">Seal times, set hashes, expiry, state, budget, reveals</a>'
        "</p>",
        f"<p>Replay everything yourself from the export: <code>python audit.py {esc(site.ledger_id)} --from "
        "EXPORT</code></p>"]))
    for number_ in range(1, n_checkpoint_pages + 1):
        chunk = site.checkpoints[(number_ - 1) * ENTRIES_PER_PAGE:number_ * ENTRIES_PER_PAGE]
        rows = [[str(c.size), code(b64encode(c.root)), f"<pre>{esc(c.note)}</pre>"] for c in chunk]
        yield f"ledger/checkpoints-{number_:04d}.html", _page(site, f"checkpoints page {number_}", root, "".join([
            f"<h1>Checkpoints, page {number_}</h1>", pager("checkpoints", n_checkpoint_pages, number_),
            table(["size", "root", "signed note"], rows)]))
    for number_ in range(1, n_entry_pages + 1):
        start, end = (number_ - 1) * ENTRIES_PER_PAGE, min(site.size, number_ * ENTRIES_PER_PAGE)
        rows = []
        data: dict[str, Any] = {}
        for index in range(start, end):
            raw = export.entry_bytes(index)
            entry = export.entry(index)
            refs = [blob_link(root, str(v), carried, k) for k, v in sorted(entry.items())
                    if k.endswith("_sha256") and isinstance(v, str)]
            rows.append([f'<span id="e{index}">{index}</span>', esc(entry.get("type")), esc(entry.get("created_utc")),
                         _entry_summary(entry) + ("<br>" + " ".join(refs) if refs else ""),
                         code(leaf_hash(raw).hex()),
                         f'<details><summary>entry</summary><pre id="raw{index}">{raw_text(raw.decode("utf-8"))}</pre>'
                         "</details>",
                         f'<button type="button" class="verify-entry" data-index="{index}" disabled>verify this entry'
                         f'</button><output id="v{index}"></output>'])
            data[str(index)] = {"proof": site.head_proof(index)}
        context = {"ledger": {"ledger_id": site.ledger_id, "origin": site.origin, "head_note": head.note,
                              "entries": {"0": export.entry_bytes(0).decode("utf-8")}}, "page": data}
        yield f"ledger/entries-{number_:04d}.html", _page(site, f"entries page {number_}", root, "".join([
            f"<h1>Entries {start} to {end - 1}</h1>",
            f"<p>\"verify this entry\" checks the head checkpoint's signed note (size {head.size}) under the "
            f'ledger key from the <a href="{root}keys.html">key page</a>, then the entry\'s RFC 9162 inclusion '
            "proof against its root.</p>",
            pager("entries", n_entry_pages, number_),
            table(["index", "type", "created", "summary", "leaf hash", "bytes", ""], rows, cls="entries"),
            data_block("heldout-entries", context)]), scripts=True)

"""Held-out generations: private pools, seals, retirement and reveals, states derived from the ledger, and
the leakage budget. The evaluation, passports and the audit use this package's public names below."""

from heldout.generations.access import (
    CaseSet,
    generation_cases,
    generation_state,
    load_opening,
    noise_path,
    opening_path,
    prove_member,
    withheld_blobs_path,
)
from heldout.generations.budget import (
    BudgetCheck,
    BudgetExhausted,
    charge_bits,
    check_budget,
    default_budget_bits,
    implied_eps,
    make_budget,
)
from heldout.generations.cases import CASE_SCHEME, case_id, content_sha256, read_split
from heldout.generations.commitments import MemberProof, commitment, set_hash
from heldout.generations.ledgers import ledger_signer, open_ledger, resolve_ledger_id
from heldout.generations.pools import PoolAddResult, add_pool, pool_case_ids, pool_tasks
from heldout.generations.release import (
    WITHHOLDING_MODES,
    Transcript,
    answer_bits,
    ladder_release,
    release_record,
    released_score,
    transcripts,
    worst_case_bits,
)
from heldout.generations.retire import RetireResult, retire_generation
from heldout.generations.reveal import CaseOpening, RevealDocument, parse_reveal, revealed_labels, verify_reveal
from heldout.generations.seal import SealRequest, SealResult, manifest_path, reveal_path, seal_generation
from heldout.generations.state import RETIRE_REASONS, STATES, BundleRecord, GenerationState, load_generations
from heldout.generations.verify import (
    RevealVerdict,
    check_draw_binding,
    check_manifest_binding,
    check_reveal,
    verify_folder_reveal,
    verify_member_proof,
    verify_store_reveal,
)

__all__ = [
    "CASE_SCHEME",
    "RETIRE_REASONS",
    "STATES",
    "WITHHOLDING_MODES",
    "BudgetCheck",
    "BudgetExhausted",
    "BundleRecord",
    "CaseOpening",
    "CaseSet",
    "GenerationState",
    "MemberProof",
    "PoolAddResult",
    "RetireResult",
    "RevealDocument",
    "RevealVerdict",
    "SealRequest",
    "SealResult",
    "Transcript",
    "add_pool",
    "answer_bits",
    "case_id",
    "charge_bits",
    "check_budget",
    "check_draw_binding",
    "check_manifest_binding",
    "check_reveal",
    "commitment",
    "content_sha256",
    "default_budget_bits",
    "generation_cases",
    "generation_state",
    "implied_eps",
    "ladder_release",
    "ledger_signer",
    "load_generations",
    "load_opening",
    "make_budget",
    "manifest_path",
    "noise_path",
    "open_ledger",
    "opening_path",
    "parse_reveal",
    "pool_case_ids",
    "pool_tasks",
    "prove_member",
    "read_split",
    "release_record",
    "released_score",
    "resolve_ledger_id",
    "retire_generation",
    "reveal_path",
    "revealed_labels",
    "seal_generation",
    "set_hash",
    "transcripts",
    "verify_folder_reveal",
    "verify_member_proof",
    "verify_reveal",
    "verify_store_reveal",
    "withheld_blobs_path",
    "worst_case_bits",
]

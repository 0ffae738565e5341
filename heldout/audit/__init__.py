"""The audit: nothing is certified until every bundle is re-derived and the chain is proven intact."""

from heldout.audit.report import AuditReport, Finding, ReportRecord, Unrederived
from heldout.audit.run import run_audit
from heldout.audit.sources import AuditSource, ExportSource, OperatorSource, operator_source

__all__ = ["AuditReport", "AuditSource", "ExportSource", "Finding", "OperatorSource", "ReportRecord", "Unrederived",
           "operator_source", "run_audit"]

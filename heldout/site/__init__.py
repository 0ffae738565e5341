"""The public transparency site: passport pages, the leaderboard and the ledger browser, rendered as static
files from public data only (a ledger export, or the operator store seen through the same export view), with
a Verify button whose JavaScript (``static/verify.js``) re-checks each passport in the reader's browser."""

from heldout.site.build import MANIFEST, BuiltSite, build_site, manifest_of, render
from heldout.site.collect import PassportRecord, SiteBuildRefused, SiteData, collect, export_view

__all__ = [
    "MANIFEST",
    "BuiltSite",
    "PassportRecord",
    "SiteBuildRefused",
    "SiteData",
    "build_site",
    "collect",
    "export_view",
    "manifest_of",
    "render",
]

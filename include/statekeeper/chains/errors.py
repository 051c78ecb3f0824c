"""Errors of the reference-chain layer (graph job and `statekeeper explain`)."""
from __future__ import annotations

from statekeeper.errors import StatekeeperError


class ChainsError(StatekeeperError):
    """The reference chains cannot be computed or read as asked."""


class ChainDepthError(ChainsError):
    """Lineage did not converge within the configured depth; the graph is larger than expected."""

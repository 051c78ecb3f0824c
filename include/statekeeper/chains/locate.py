"""Moved to statekeeper.layout.locate; FOREIGN_RELATIONS to statekeeper.tables.vocabulary.

Temporary: only include/statekeeper/chains/job.py (outside the change that moved this module)
still imports FOREIGN_RELATIONS from here. Delete this module once it imports the vocabulary.
"""
from statekeeper.tables.vocabulary import FOREIGN_RELATIONS

__all__ = ["FOREIGN_RELATIONS"]

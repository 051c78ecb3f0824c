"""Root of Statekeeper's exception hierarchy.

Every error a user can meet derives from StatekeeperError and says which object is at fault and
what to do about it; callers that must fail closed catch this type, never bare Exception.
"""


class StatekeeperError(Exception):
    """Base class for every error Statekeeper raises on purpose."""

"""Root of Statekeeper's exception hierarchy.

Every error a user can meet derives from StatekeeperError and says which object is at fault and
what to do about it; callers that must fail closed catch this type, never bare Exception.
"""


class StatekeeperError(Exception):
    """Base class for every error Statekeeper raises on purpose."""


class ConfigurationError(StatekeeperError):
    """The arguments, roots, warehouse or storage settings are wrong, or an input table a job
    needs is absent: nothing was attempted, and retrying without a change cannot help. Jobs exit 2
    on it (statekeeper.registry.ExitCode.USAGE). Mixed into the layer errors that mean this."""

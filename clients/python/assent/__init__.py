"""Assent for Python agents: each tool call decided in Assent (a rule at once, or a
person from any door), run by your code with the arguments that were approved, and
the run recorded in Assent's consent chain.

    from assent import Assent

    assent = Assent("http://127.0.0.1:7700", token)
    decision = await assent.propose("refund", {"order": "A-17", "cents": 4200})
    if decision.approved:
        result = refund(**decision.args)
        await assent.report(decision, True, result)

Adapters into the frameworks' own approval seams live in `assent.adapters`."""

from .client import Assent, AssentError, Decision, Denied, SyncAssent

__all__ = ["Assent", "AssentError", "Decision", "Denied", "SyncAssent"]

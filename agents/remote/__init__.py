"""The remote approval service: agents that run in their own services ask the console.

An ``ExternalAgent`` (registered in the admin) authenticates with its own key
(``Authorization: Agent agk_...``), opens approval requests for its interrupts over REST
(``/api/approval-requests/``), learns the decision by a signed callback or a long poll, and
reports what it executed. Its runs are runs of agent ``external:<name>``; the console's policy
(tiers, quorum, four eyes, expiry, payload-hash binding) applies as to in-process ones.
See docs/remote.md for the wire contract.
"""

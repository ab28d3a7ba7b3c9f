"""memory-ledger: event-sourced memory for AI agents, with provable forgetting."""

import logging

# A library never prints on its own: applications decide where audit logs go.
logging.getLogger("memory_ledger").addHandler(logging.NullHandler())

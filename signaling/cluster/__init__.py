"""Several nodes on one Redis as one service: the node registry, the session directory, placement
of new sessions and forwarding of requests to the node that holds a session (issue #28).

Without --redis-url the same code runs on in-memory backends that know only this node: nothing
changes for a single node."""

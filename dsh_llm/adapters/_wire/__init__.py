"""What every wire family shares: the writer of the protocol's rules, the family
value and the one adapter class built from it, the shared config and catalog.

Private: import these names from ``dsh_llm.adapters``.
"""

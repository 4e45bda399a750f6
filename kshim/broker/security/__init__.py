"""Who a connection is (its principal, from TLS or SASL) and what it may do (ACLs)."""

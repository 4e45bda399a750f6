"""The connection side of security: TLS contexts, certificate principals, and the SASL
gate that keeps a connection to ApiVersions and SASL until it has authenticated."""

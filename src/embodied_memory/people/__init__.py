"""People: identities from face embeddings (online DBSCAN) and body re-ID association."""

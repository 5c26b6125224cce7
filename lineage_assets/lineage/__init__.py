"""OpenLineage: events from the dataset catalog, and their delivery."""

"""The local stack of real servers, run as plain processes: descriptions and one supervisor."""

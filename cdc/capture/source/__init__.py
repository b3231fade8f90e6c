"""The source database: connections with pinned session settings, the publication and
the slot, start-up checks and privileges, WAL safety."""

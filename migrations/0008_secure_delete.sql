-- Deleting a session must leave none of its text in the database file. `PRAGMA secure_delete`
-- (set on every connection by store::Store) zeroes freed pages, but an FTS5 index keeps the
-- tokens of deleted rows in its segments until they are merged; its `secure-delete` option
-- removes them at once. Configuration of each table, kept by the table's owner: observations_fts
-- is written by ingest, memory_fts by retrieval.
INSERT INTO observations_fts(observations_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO memory_fts(memory_fts, rank) VALUES ('secure-delete', 1);

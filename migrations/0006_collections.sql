-- Collections of memory items, and the retention policy.

-- Written by retrieval: named sets of memory items, made from a search or a list of ids, that
-- can be exported and asked questions. Retrieval owns them because it owns the items they name.
CREATE TABLE collections (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    -- The search that filled it, when it was made from one (empty for a list of ids).
    query       TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;

-- Written by retrieval: the items of each collection, in the order they were added. Items of
-- deleted sessions leave their collections with them.
CREATE TABLE collection_items (
    collection_id INTEGER NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    item_id       INTEGER NOT NULL,
    position      INTEGER NOT NULL,
    PRIMARY KEY (collection_id, item_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX collection_items_by_item ON collection_items (item_id);

-- Written by ingest: the retention policy (one row), and what its last run did. A day count of
-- 0 means never.
CREATE TABLE retention (
    id                         INTEGER PRIMARY KEY CHECK (id = 1),
    archive_after_days         INTEGER NOT NULL DEFAULT 0,
    delete_archived_after_days INTEGER NOT NULL DEFAULT 0,
    updated_at                 INTEGER NOT NULL DEFAULT 0,
    last_run_at                INTEGER NOT NULL DEFAULT 0,
    last_archived              INTEGER NOT NULL DEFAULT 0,
    last_deleted               INTEGER NOT NULL DEFAULT 0,
    last_error                 TEXT NOT NULL DEFAULT ''
) STRICT;
INSERT INTO retention (id) VALUES (1);

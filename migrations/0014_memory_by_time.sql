-- A question that names only a time ("what was I working on the week before I moved?") reads
-- the items nearest that time, on either side, from this index (retrieval's search.rs).
CREATE INDEX IF NOT EXISTS memory_by_time ON memory_items (occurred_at);

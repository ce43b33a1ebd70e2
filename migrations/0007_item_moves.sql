-- Written by retrieval: where a memory item went when its source row was rewritten (a summary
-- made final, a pattern seen again, an edit run grown). A rewrite is a new item with a new id,
-- so that its vector is made again; ids handed out before (in injected context, in search
-- results) still resolve through here, in one step: a later move re-points the earlier ones.
CREATE TABLE memory_item_moves (
    old_id INTEGER PRIMARY KEY,
    new_id INTEGER NOT NULL
) STRICT;
CREATE INDEX memory_item_moves_by_new ON memory_item_moves (new_id);

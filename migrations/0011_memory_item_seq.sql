-- The highest memory item id ever given, so no id is given twice. SQLite reuses the largest
-- rowid once its row is deleted: a rewritten pattern's item, or the newest item of a forgotten
-- session, would hand its id to the next item, which an id handed out before would then name,
-- and which the embedding backlog (items above `vector_spaces.embedded_upto`) would never
-- embed. Written by retrieval, with every item it inserts. Starts above every id known to have
-- been given: the items there are, the ids moved from, and how far embedding got.
CREATE TABLE memory_item_seq (
    last INTEGER NOT NULL
) STRICT;
INSERT INTO memory_item_seq (last) VALUES (MAX(
    COALESCE((SELECT MAX(id) FROM memory_items), 0),
    COALESCE((SELECT MAX(old_id) FROM memory_item_moves), 0),
    COALESCE((SELECT MAX(embedded_upto) FROM vector_spaces), 0)
));

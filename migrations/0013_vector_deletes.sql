-- Vectors still to be removed from the vector index, by item id. Written by retrieval: an id
-- is recorded before the index is asked to delete it and cleared once the index has, so a
-- forgotten session's vectors leave an index that was down (Qdrant stopped, a network cut)
-- or a service that crashed in between, as soon as the index answers again.
CREATE TABLE vector_deletes (
    item_id INTEGER PRIMARY KEY
) STRICT;

-- The capability registry as retrieval matches it against prompts (written by retrieval, from
-- the registry files `mneme capabilities` syncs to it). `scope` is '' for the user's registry
-- and the project's directory for a project's. `vectors` holds the entry's embeddings in the
-- model named by `model`: its description first, then one per trigger in `when_json`, each
-- `dim` little-endian f32s; an entry whose model is not the active one is embedded again.
CREATE TABLE capabilities (
    scope       TEXT NOT NULL,
    id          TEXT NOT NULL,
    name        TEXT NOT NULL,
    category    TEXT NOT NULL,
    kind        TEXT NOT NULL,
    description TEXT NOT NULL,
    when_json   TEXT NOT NULL DEFAULT '[]',
    invoke      TEXT NOT NULL,
    source      TEXT NOT NULL DEFAULT '',
    model       TEXT NOT NULL DEFAULT '',
    vectors     BLOB,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (scope, id)
) STRICT;

-- Categories, embedded separately from the capabilities (two-stage matching: categories
-- first, then the capabilities of the best ones). Written by retrieval.
CREATE TABLE capability_categories (
    scope       TEXT NOT NULL,
    id          TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    model       TEXT NOT NULL DEFAULT '',
    vector      BLOB,
    PRIMARY KEY (scope, id)
) STRICT;

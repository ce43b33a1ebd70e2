-- Written by ingest: who worked in the session an observation belongs to (the event's user), so
-- memory can be asked about a person ("what did Alice decide about the deploy").
ALTER TABLE observations ADD COLUMN author TEXT NOT NULL DEFAULT '';

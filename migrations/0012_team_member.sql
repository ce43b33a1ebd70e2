-- Written by ingest: the team member whose machine a session ran on, when it came to this
-- machine through the team (`mneme team`); '' for this machine's own sessions. Only a machine's
-- own sessions are shared, and only their deletion is announced to the team.
ALTER TABLE sessions ADD COLUMN team_member TEXT NOT NULL DEFAULT '';

-- Parse allows one GeoPoint field per class (it is mirrored into the indexed `geo` column).
CREATE UNIQUE INDEX class_schemas_one_geopoint ON class_schemas (class_name) WHERE type = 'GeoPoint';
-- Listing a user's sessions newest first (GET /sessions, `parley user sessions`).
CREATE INDEX sessions_user_created ON sessions (user_id, created_at);
DROP INDEX sessions_user;

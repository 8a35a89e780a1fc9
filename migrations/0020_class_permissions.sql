-- Classes (docs/rest-api.md "Schemas"): one row per class that exists, as Parse Server's `_SCHEMA`:
-- its class-level permissions (NULL: Parse's defaults, every operation public) and the indexes
-- created through `/schemas` (name → `{field: 1|-1}`; each is a real index on `objects`).
-- Bounded so no PUT can grow a row without end.
CREATE TABLE parse_classes (
    class_name  text PRIMARY KEY,
    permissions jsonb CHECK (pg_column_size(permissions) <= 65536),
    indexes     jsonb NOT NULL DEFAULT '{}' CHECK (pg_column_size(indexes) <= 65536)
);
-- Every class that has fields or objects already exists; so do the system classes.
INSERT INTO parse_classes (class_name) VALUES ('_User'), ('_Role'), ('_Session'), ('_Installation');
INSERT INTO parse_classes (class_name) SELECT DISTINCT class_name FROM class_schemas ON CONFLICT DO NOTHING;
INSERT INTO parse_classes (class_name) SELECT DISTINCT class_name FROM objects ON CONFLICT DO NOTHING;
-- A field's options from `/schemas`: `required` and `defaultValue` (Parse's field options).
ALTER TABLE class_schemas ADD COLUMN required boolean NOT NULL DEFAULT false;
ALTER TABLE class_schemas ADD COLUMN default_value jsonb CHECK (pg_column_size(default_value) <= 65536);
-- Empties a Relation field's join table when `/schemas` deletes the field (no-op without one).
CREATE OR REPLACE FUNCTION parley_relation_clear(join_table text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass(format('%I', join_table)) IS NOT NULL THEN
        EXECUTE format('DELETE FROM %I', join_table);
    END IF;
END $$;

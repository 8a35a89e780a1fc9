-- Relations (docs/rest-api.md "Relations"): each Relation field has its join table
-- `_Join:<field>:<class>`, in Parse Server's Postgres naming and columns (relatedId, owningId;
-- primary key on both, an index on owningId), created on the field's first AddRelation. The two
-- of `_Role` (migration 0013) are such tables. Statements name a join table only as a parameter
-- of these functions, which quote it with format('%I'): the SQL text never varies with it.
CREATE OR REPLACE FUNCTION parley_join_table_create(join_table text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass(format('%I', join_table)) IS NOT NULL THEN
        RETURN;
    END IF;
    BEGIN
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I ("relatedId" varchar(120) NOT NULL, "owningId" varchar(120) NOT NULL, PRIMARY KEY ("relatedId", "owningId"))', join_table);
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I ("owningId")', join_table || '_owning', join_table);
    EXCEPTION WHEN unique_violation OR duplicate_table OR duplicate_object THEN
        -- Another transaction created it concurrently.
        NULL;
    END;
END $$;

-- Adds (adding) or removes `related` ids in the relation of `owner`.
CREATE OR REPLACE FUNCTION parley_relation_change(join_table text, owner text, related text[], adding boolean) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF adding THEN
        PERFORM parley_join_table_create(join_table);
        EXECUTE format('INSERT INTO %I ("relatedId", "owningId") SELECT DISTINCT unnest($1::text[]), $2 ON CONFLICT DO NOTHING', join_table)
            USING related, owner;
    ELSIF to_regclass(format('%I', join_table)) IS NOT NULL THEN
        EXECUTE format('DELETE FROM %I WHERE "owningId" = $2 AND "relatedId" = ANY($1::text[])', join_table) USING related, owner;
    END IF;
END $$;

-- The related ids of `owner` (none when the table does not exist yet): `$relatedTo`.
CREATE OR REPLACE FUNCTION parley_relation_ids(join_table text, owner text) RETURNS SETOF text LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF to_regclass(format('%I', join_table)) IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format('SELECT "relatedId"::text FROM %I WHERE "owningId" = $1', join_table) USING owner;
END $$;

-- Deletes the join rows an object owns in each Relation field of its class (its delete).
CREATE OR REPLACE FUNCTION parley_relation_delete_owner(owner_class text, owner text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    join_table text;
BEGIN
    FOR join_table IN SELECT '_Join:' || field || ':' || owner_class FROM class_schemas WHERE class_name = owner_class AND type = 'Relation' LOOP
        IF to_regclass(format('%I', join_table)) IS NOT NULL THEN
            EXECUTE format('DELETE FROM %I WHERE "owningId" = $1', join_table) USING owner;
        END IF;
    END LOOP;
END $$;

-- The owners whose relation holds `related` (none when the table does not exist yet): a query
-- `{"<relation field>": <Pointer>}` on the owners' class.
CREATE OR REPLACE FUNCTION parley_relation_owners(join_table text, related text) RETURNS SETOF text LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF to_regclass(format('%I', join_table)) IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format('SELECT "owningId"::text FROM %I WHERE "relatedId" = $1', join_table) USING related;
END $$;

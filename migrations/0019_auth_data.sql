-- authData (docs/identity.md, "authData"): a user's linked logins, stored as Parse Server on
-- PostgreSQL stores them (one jsonb `authData` per user, `{provider: {id, ...}}`), plus an index
-- table the accounts module owns that makes each provider id belong to at most one user, so two
-- concurrent signups with the same id make one user (Parse Server on PostgreSQL checks this in
-- application code only).
ALTER TABLE users ADD COLUMN auth_data jsonb;

CREATE TABLE user_auth_ids (
    provider    text NOT NULL,
    provider_id text NOT NULL,
    user_id     text NOT NULL REFERENCES users (object_id) ON DELETE CASCADE,
    PRIMARY KEY (provider, provider_id)
);
CREATE INDEX user_auth_ids_user ON user_auth_ids (user_id);

-- Keeps user_auth_ids equal to the ids in users.auth_data, in the statement that writes it: a
-- provider id another user holds fails that statement (unique violation on user_auth_ids_pkey).
CREATE FUNCTION accounts_auth_data_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM user_auth_ids WHERE user_id = NEW.object_id;
    END IF;
    INSERT INTO user_auth_ids (provider, provider_id, user_id)
    SELECT key, value->>'id', NEW.object_id FROM jsonb_each(COALESCE(NEW.auth_data, '{}'::jsonb))
     WHERE jsonb_typeof(value) = 'object' AND jsonb_typeof(value->'id') = 'string';
    RETURN NULL;
END;
$$;

CREATE TRIGGER accounts_auth_data_inserted AFTER INSERT ON users
FOR EACH ROW WHEN (NEW.auth_data IS NOT NULL) EXECUTE FUNCTION accounts_auth_data_changed();
CREATE TRIGGER accounts_auth_data_updated AFTER UPDATE OF auth_data ON users
FOR EACH ROW WHEN (NEW.auth_data IS DISTINCT FROM OLD.auth_data) EXECUTE FUNCTION accounts_auth_data_changed();

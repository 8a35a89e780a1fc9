-- Password policy (docs/identity.md, "Password policy"): when each user's password last
-- changed (maxPasswordAge) and the hashes it replaced (maxPasswordHistory), kept by a trigger so
-- every way of setting a password (signup, PUT /users, reset, the admin CLI) records them alike.

-- Existing users count from the migration (Parse Server: a missing change date starts now).
ALTER TABLE users ADD COLUMN password_changed_at timestamptz DEFAULT now();

CREATE TABLE user_password_history (
    id            bigserial PRIMARY KEY,
    user_id       text NOT NULL REFERENCES users (object_id) ON DELETE CASCADE,
    -- The argon2id hash a password change replaced.
    password_hash text NOT NULL,
    replaced_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_password_history_user ON user_password_history (user_id, id DESC);

-- A new password: remember the old hash (at most 20 per user, Parse's largest
-- maxPasswordHistory) and restart the password's age.
CREATE FUNCTION accounts_password_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.password_hash IS NOT NULL THEN
        INSERT INTO user_password_history (user_id, password_hash) VALUES (OLD.object_id, OLD.password_hash);
        DELETE FROM user_password_history
         WHERE user_id = OLD.object_id
           AND id NOT IN (SELECT id FROM user_password_history WHERE user_id = OLD.object_id ORDER BY id DESC LIMIT 20);
    END IF;
    NEW.password_changed_at := now();
    RETURN NEW;
END;
$$;

CREATE TRIGGER accounts_password_changed BEFORE UPDATE OF password_hash ON users
FOR EACH ROW WHEN (NEW.password_hash IS DISTINCT FROM OLD.password_hash) EXECUTE FUNCTION accounts_password_changed();

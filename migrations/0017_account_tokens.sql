-- Email verification and password reset (docs/identity.md, "Email verification and password
-- reset"): single-use tokens the accounts module mails, kept as SHA-256 hashes (the mailed
-- token itself is never stored), each for one user, one purpose and the address it was sent to.
CREATE TABLE user_tokens (
    token_hash bytea PRIMARY KEY,
    user_id    text NOT NULL REFERENCES users (object_id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('verify_email', 'password_reset')),
    email      text NOT NULL,
    expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_tokens_user ON user_tokens (user_id, kind, created_at DESC);

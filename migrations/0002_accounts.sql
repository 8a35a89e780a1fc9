-- Parse-compatible storage: users, sessions, installations, generic class objects and their schema.
-- Core fields are typed columns; custom fields live in `data` (Parse JSON encoding); ACLs are kept
-- as given (`acl`) and flattened into reader/writer arrays (`rperm`/`wperm`, GIN-indexed) for
-- filtering. The one GeoPoint field a class may have is mirrored into `geo` (earthdistance, GiST).

CREATE TABLE users (
    object_id      text PRIMARY KEY,
    username       text NOT NULL,
    email          text,
    password_hash  text,
    email_verified boolean,
    banned         boolean NOT NULL DEFAULT false,
    failed_logins  integer NOT NULL DEFAULT 0,
    locked_until   timestamptz,
    acl            jsonb,
    rperm          text[] NOT NULL DEFAULT '{*}',
    wperm          text[] NOT NULL DEFAULT '{}',
    data           jsonb NOT NULL DEFAULT '{}',
    geo            earth,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_username_lower ON users (lower(username));
CREATE UNIQUE INDEX users_email_lower ON users (lower(email)) WHERE email IS NOT NULL;
CREATE INDEX users_username ON users (username);
CREATE INDEX users_geo ON users USING gist (geo);
CREATE INDEX users_rperm ON users USING gin (rperm);
CREATE INDEX users_created_at ON users (created_at);

CREATE TABLE sessions (
    object_id       text PRIMARY KEY,
    token           text NOT NULL UNIQUE,
    user_id         text NOT NULL REFERENCES users (object_id) ON DELETE CASCADE,
    created_with    jsonb NOT NULL DEFAULT '{}',
    installation_id text,
    restricted      boolean NOT NULL DEFAULT false,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE installations (
    object_id         text PRIMARY KEY,
    installation_id   text NOT NULL UNIQUE,
    device_type       text,
    device_token      text,
    voip_device_token text,
    user_id           text REFERENCES users (object_id) ON DELETE SET NULL,
    acl               jsonb,
    rperm             text[] NOT NULL DEFAULT '{*}',
    wperm             text[] NOT NULL DEFAULT '{*}',
    data              jsonb NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX installations_user ON installations (user_id);

CREATE TABLE objects (
    class_name text NOT NULL,
    object_id  text NOT NULL,
    acl        jsonb,
    rperm      text[] NOT NULL DEFAULT '{*}',
    wperm      text[] NOT NULL DEFAULT '{*}',
    data       jsonb NOT NULL DEFAULT '{}',
    geo        earth,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (class_name, object_id)
);
CREATE INDEX objects_geo ON objects USING gist (geo);
CREATE INDEX objects_class_created ON objects (class_name, created_at);
CREATE INDEX objects_rperm ON objects USING gin (rperm);

-- One row per (class, field): the type recorded on first write; a different type is refused (111).
CREATE TABLE class_schemas (
    class_name   text NOT NULL,
    field        text NOT NULL,
    type         text NOT NULL,
    target_class text,
    PRIMARY KEY (class_name, field)
);

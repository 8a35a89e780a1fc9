-- Devices and contacts of the realtime layer, and the functions through which other modules read
-- what the realtime and accounts layers own (docs/realtime-protocol.md, "Devices", "Presence and
-- typing", "Extension points").

-- What the database needs to know of the server's realtime configuration: one row. Every node
-- records its --realtime-max-devices with its heartbeat (give all nodes the same value). The
-- device label key is random per database, so labels are the same on every node and across
-- restarts.
CREATE TABLE rt_settings (
    id               boolean PRIMARY KEY DEFAULT true CHECK (id),
    max_devices      integer NOT NULL DEFAULT 20 CHECK (max_devices > 0),
    device_label_key text NOT NULL DEFAULT (md5(gen_random_uuid()::text) || md5(gen_random_uuid()::text))
);
INSERT INTO rt_settings DEFAULT VALUES;

-- The heartbeat of 0004, recording the node's device limit too (written only when it changes).
CREATE FUNCTION rt_node_heartbeat(p_node text, p_stale interval, p_max_devices integer) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE rt_settings SET max_devices = p_max_devices WHERE max_devices <> p_max_devices;
    RETURN rt_node_heartbeat(p_node, p_stale);
END;
$$;

-- An installation linked to a user is one of the user's devices (see 0004). New: the per-user
-- device limit applies to it as to a hello (SQLSTATE PR001 past it, which fails the write).
CREATE OR REPLACE FUNCTION rt_installation_device() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.user_id IS NOT NULL AND NEW.installation_id ~ '^[!-~]{1,128}$' THEN
        PERFORM rt_register_device(NEW.user_id, NEW.installation_id, NULL, NULL, (SELECT s.max_devices FROM rt_settings s));
    END IF;
    RETURN NEW;
END;
$$;

-- Who reached whom: (user_id, contact_id) means user_id sent contact_id a message or called
-- them. A user's presence and typing reach the users the user reached (with the default
-- --realtime-presence-scope contacts). Rows are never removed, like the messages they stand for.
CREATE TABLE rt_contacts (
    user_id    text COLLATE "C" NOT NULL,
    contact_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (user_id, contact_id)
);

-- The ids among p_users that are existing _User objectIds. Owned by the accounts layer (the
-- `users` table): other modules call it instead of reading the table. A set-returning SQL
-- function, so the planner inlines it into the calling statement.
CREATE FUNCTION accounts_existing_users(p_users text[]) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT u.object_id FROM users u WHERE u.object_id = ANY (p_users)
$$;

-- Records that p_from[i] reached p_to[i] (self pairs and unknown users are skipped; in key order,
-- so concurrent writers never deadlock on each other's pairs).
CREATE FUNCTION rt_add_contacts(p_from text[], p_to text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rt_contacts (user_id, contact_id)
    SELECT DISTINCT x.f, x.t
      FROM unnest(p_from, p_to) AS x(f, t)
     WHERE x.f <> x.t AND EXISTS (SELECT 1 FROM accounts_existing_users(ARRAY[x.t]))
     ORDER BY 1, 2
    ON CONFLICT DO NOTHING;
END;
$$;

-- Interface of the realtime layer for other modules (calls): set-returning SQL functions, inlined
-- into the caller's statement, so reading through them costs what reading the tables did.

-- A user's device ids.
CREATE FUNCTION rt_user_devices(p_user text) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT d.device_id FROM rt_devices d WHERE d.user_id = p_user
$$;

-- Nodes whose heartbeat is more recent than p_stale.
CREATE FUNCTION rt_live_nodes(p_stale interval) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT n.node_id FROM rt_nodes n WHERE n.heartbeat_at > now() - p_stale
$$;

-- The users among p_others who reached p_user (whose presence and typing p_user may get).
CREATE FUNCTION rt_reached_by(p_user text, p_others text[]) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT c.user_id FROM rt_contacts c WHERE c.user_id = ANY (p_others) AND c.contact_id = p_user
$$;

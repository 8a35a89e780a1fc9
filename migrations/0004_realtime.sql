-- Realtime messaging: messages, devices, per-device delivery queues (docs/realtime-protocol.md).
--
-- Locking (no deadlocks between the functions below in normal operation; the server retries the
-- rare one): adding events locks the target device rows (their seq counters) in key order in one
-- statement, so seq order is commit order per device. The inbox row of a user (`rt_inboxes`) is
-- locked by whatever creates the user's first device, forgets devices, or queues events for a user
-- with no device, so an event is never queued to an inbox that a new device has just taken over.
-- Removing acknowledged events locks nothing but the removed rows.

-- Ids are compared bytewise (COLLATE "C"): faster than a linguistic collation, and the same
-- order on every cluster. The functions called per batch use generic plans
-- (plan_cache_mode = force_generic_plan): their statements are planned once per connection
-- instead of at every call, which at small batch sizes cost more than running them.

-- Messages as sent. `id` is a time-ordered UUID (version 7), so `ORDER BY id` is send order.
CREATE TABLE rt_messages (
    id                uuid PRIMARY KEY,
    sender            text COLLATE "C" NOT NULL,
    client_message_id text COLLATE "C" NOT NULL,
    recipients        text[] NOT NULL,
    body              text NOT NULL,
    headers           jsonb NOT NULL DEFAULT '{}',
    sent_at           timestamptz NOT NULL
);
-- Idempotent re-sends: one message per (sender, clientMessageId).
CREATE UNIQUE INDEX rt_messages_client_id ON rt_messages (sender, client_message_id);
-- History: a sender's messages newest first.
CREATE INDEX rt_messages_sender_id ON rt_messages (sender, id);

-- One row per user that has devices or queued events: the lock that orders everything done to
-- the user's queues, and the sequence of the user's device-less inbox (queue rows with
-- device_id = ''), which holds events for a user who has no device yet.
CREATE TABLE rt_inboxes (
    user_id     text COLLATE "C" PRIMARY KEY,
    next_seq    bigint NOT NULL DEFAULT 1,
    trimmed_seq bigint NOT NULL DEFAULT 0
);

-- A device of a user (deviceId is scoped to its user). `next_seq` is the seq the next event gets;
-- events up to `trimmed_seq` were removed by retention unacknowledged (a gap). `node_id` and
-- `connection_id` say where the device is connected (NULL: offline).
CREATE TABLE rt_devices (
    user_id       text COLLATE "C" NOT NULL,
    device_id     text COLLATE "C" NOT NULL CHECK (device_id <> ''),
    next_seq      bigint NOT NULL DEFAULT 1,
    trimmed_seq   bigint NOT NULL DEFAULT 0,
    node_id       text COLLATE "C",
    connection_id bigint,
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, device_id)
);

-- Queued events. kind 'message' refers to rt_messages (actor = its sender); 'delivered' and 'read' are receipts
-- (message_id, actor = the user who received or read it, created_at = when); any other kind
-- (calls) carries its whole event, without seq, in `payload`. Events past `expires_at` are
-- never delivered.
CREATE TABLE rt_queue (
    user_id    text COLLATE "C" NOT NULL,
    device_id  text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,
    kind       text COLLATE "C" NOT NULL,
    message_id uuid,
    actor      text COLLATE "C",
    payload    jsonb,
    expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, device_id, seq)
);

-- Running nodes (several `parley serve` on one database), for routing and stale-connection cleanup.
CREATE TABLE rt_nodes (
    node_id      text COLLATE "C" PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- One queued event for one device, as reported to callers and to the offline hook.
CREATE TYPE rt_delivery AS (
    ord        integer,
    user_id    text,
    device_id  text,
    seq        bigint,
    node_id    text,
    kind       text,
    message_id uuid,
    actor      text,
    payload    jsonb,
    expires_at timestamptz,
    created_at timestamptz
);

-- Extension point: called inside the enqueueing transaction with the events queued for devices
-- that are not connected to any node (device_id '' = the user has no device yet). The push
-- migration replaces this function to create push jobs atomically with the events.
CREATE FUNCTION rt_on_offline_enqueue(p_events rt_delivery[]) RETURNS void
LANGUAGE sql AS $$ SELECT $$;

-- Tells other nodes about events for devices connected to them: one NOTIFY per node on channel
-- 'parley_rt_<node>', lines 'e <user> <device> <seq>' (highest seq per device), at most 40 lines each.
CREATE FUNCTION rt_notify_nodes(p_events rt_delivery[], p_node text) RETURNS void
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT h.node_id, string_agg(h.line, E'\n') AS payload
          FROM (SELECT x.node_id, 'e ' || x.user_id || ' ' || x.device_id || ' ' || max(x.seq) AS line,
                       (row_number() OVER (PARTITION BY x.node_id ORDER BY x.user_id, x.device_id) - 1) / 40 AS chunk
                  FROM unnest(p_events) x
                 WHERE x.node_id IS NOT NULL AND x.node_id IS DISTINCT FROM p_node
                 GROUP BY x.node_id, x.user_id, x.device_id) h
         GROUP BY h.node_id, h.chunk
    LOOP
        PERFORM pg_notify('parley_rt_' || r.node_id, r.payload);
    END LOOP;
END;
$$;

-- Appends events to device queues. Entry i of the arrays is one (event, user) pair:
--   p_ord        orders events: within a device, seq follows p_ord
--   p_user       whose devices get the event
--   p_only       '' = every device of the user, else only this device
--   p_skip       '' = none, else this device is left out (the sender's own)
--   p_inbox      if the user has no device at all, queue it in the user's inbox
-- Returns one row per queued (event, device).
CREATE FUNCTION rt_enqueue(
    p_ord integer[], p_user text[], p_only text[], p_skip text[], p_inbox boolean[], p_kind text[],
    p_message uuid[], p_actor text[], p_payload jsonb[], p_expires timestamptz[], p_node text
) RETURNS SETOF rt_delivery
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_users text[];
    v_empty text[];
    v_rows rt_delivery[];
BEGIN
    SELECT array_agg(DISTINCT u ORDER BY u) INTO v_users FROM unnest(p_user) u;
    IF v_users IS NULL THEN
        RETURN;
    END IF;
    -- Lock the target devices in key order (their seq counters; concurrent enqueues to the same
    -- device wait here, so seq order is commit order).
    PERFORM 1
       FROM rt_devices d
       JOIN (SELECT DISTINCT x.u, x.only_device, x.skip_device
               FROM unnest(p_user, p_only, p_skip) AS x(u, only_device, skip_device)) e
         ON d.user_id = e.u AND (e.only_device = '' OR d.device_id = e.only_device) AND d.device_id <> e.skip_device
      ORDER BY d.user_id, d.device_id
        FOR NO KEY UPDATE OF d;
    -- Users without any device: take their inbox lock (a first device being created concurrently
    -- holds it), then lock whatever devices they have now.
    SELECT array_agg(u ORDER BY u) INTO v_empty
      FROM unnest(v_users) u WHERE NOT EXISTS (SELECT 1 FROM rt_devices d WHERE d.user_id = u);
    IF v_empty IS NOT NULL THEN
        INSERT INTO rt_inboxes (user_id)
        SELECT u FROM unnest(v_empty) u WHERE NOT EXISTS (SELECT 1 FROM rt_inboxes i WHERE i.user_id = u) ORDER BY u
        ON CONFLICT DO NOTHING;
        PERFORM 1 FROM rt_inboxes i WHERE i.user_id = ANY (v_empty) ORDER BY i.user_id FOR UPDATE;
        PERFORM 1 FROM rt_devices d WHERE d.user_id = ANY (v_empty) ORDER BY d.user_id, d.device_id FOR NO KEY UPDATE;
    END IF;

    WITH e AS (
        SELECT * FROM unnest(p_ord, p_user, p_only, p_skip, p_inbox, p_kind, p_message, p_actor, p_payload, p_expires)
            AS e(ord, user_id, only_device, skip_device, inbox, kind, message_id, actor, payload, expires_at)
    ), devs AS (
        SELECT d.user_id, d.device_id FROM rt_devices d WHERE d.user_id = ANY (v_users)
    ), t AS (
        SELECT e.ord, e.user_id, d.device_id, e.kind, e.message_id, e.actor, e.payload, e.expires_at
          FROM e JOIN devs d ON d.user_id = e.user_id
         WHERE (e.only_device = '' OR d.device_id = e.only_device) AND d.device_id <> e.skip_device
        UNION ALL
        SELECT e.ord, e.user_id, '', e.kind, e.message_id, e.actor, e.payload, e.expires_at
          FROM e
         WHERE e.inbox AND NOT EXISTS (SELECT 1 FROM devs d WHERE d.user_id = e.user_id)
    ), counts AS (
        SELECT t.user_id, t.device_id, count(*) AS n FROM t GROUP BY 1, 2
    ), dev_upd AS (
        UPDATE rt_devices d SET next_seq = d.next_seq + c.n
          FROM counts c
         WHERE d.user_id = c.user_id AND d.device_id = c.device_id
        RETURNING d.user_id, d.device_id, d.next_seq - c.n AS first_seq, d.node_id
    ), inbox_upd AS (
        UPDATE rt_inboxes i SET next_seq = i.next_seq + c.n
          FROM counts c
         WHERE i.user_id = c.user_id AND c.device_id = ''
        RETURNING i.user_id, ''::text AS device_id, i.next_seq - c.n AS first_seq, NULL::text AS node_id
    ), firsts AS (
        SELECT * FROM dev_upd UNION ALL SELECT * FROM inbox_upd
    ), numbered AS (
        SELECT t.ord, t.user_id, t.device_id,
               f.first_seq + row_number() OVER (PARTITION BY t.user_id, t.device_id ORDER BY t.ord) - 1 AS seq,
               f.node_id, t.kind, t.message_id, t.actor, t.payload, t.expires_at
          FROM t JOIN firsts f ON f.user_id = t.user_id AND f.device_id = t.device_id
    ), ins AS (
        INSERT INTO rt_queue (user_id, device_id, seq, kind, message_id, actor, payload, expires_at)
        SELECT n.user_id, n.device_id, n.seq, n.kind, n.message_id, n.actor, n.payload, n.expires_at FROM numbered n
        RETURNING created_at
    )
    SELECT array_agg(ROW(n.ord, n.user_id, n.device_id, n.seq, n.node_id, n.kind, n.message_id, n.actor, n.payload,
                         n.expires_at, now())::rt_delivery ORDER BY n.ord, n.user_id, n.device_id)
      INTO v_rows
      FROM numbered n;

    IF v_rows IS NULL THEN
        RETURN;
    END IF;
    PERFORM rt_notify_nodes(v_rows, p_node);
    IF EXISTS (SELECT 1 FROM unnest(v_rows) x WHERE x.node_id IS NULL) THEN
        PERFORM rt_on_offline_enqueue(ARRAY(SELECT x FROM unnest(v_rows) x WHERE x.node_id IS NULL));
    END IF;
    RETURN QUERY SELECT * FROM unnest(v_rows);
END;
$$;

-- Stores a batch of messages (group commit) and queues them for every device of every known
-- recipient and the sender's other devices, in one statement. Arrays are parallel per message (p_idx numbers them);
-- recipients are flattened into (p_rcpt_idx, p_rcpt_user) pairs; p_sender_device '' = none (REST).
-- Returns per message one row with status 'sent', 'duplicate' (an earlier message with the same
-- sender and clientMessageId) or 'no_recipients' (no recipient exists), with the stored message's
-- id, time and recipients; then one 'event' row per queued (message, device).
CREATE FUNCTION rt_send_batch(
    p_idx integer[], p_id uuid[], p_sender text[], p_sender_device text[], p_client_id text[], p_body text[],
    p_headers jsonb[], p_sent_at_ms bigint[], p_rcpt_idx integer[], p_rcpt_user text[], p_node text
) RETURNS TABLE (
    status text, idx integer, message_id uuid, sent_at timestamptz, recipients text[],
    user_id text, device_id text, seq bigint, node_id text
)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    -- One statement: store, queue (rt_enqueue, which does not need to see the new rows), answer.
    RETURN QUERY
    WITH m AS (
        SELECT * FROM unnest(p_idx, p_id, p_sender, p_sender_device, p_client_id, p_body, p_headers, p_sent_at_ms)
            AS m(i, id, sender, sender_device, client_id, body, headers, at_ms)
    ), r AS (
        SELECT x.i, x.u, min(x.o) AS o
          FROM unnest(p_rcpt_idx, p_rcpt_user) WITH ORDINALITY AS x(i, u, o)
          JOIN users k ON k.object_id = x.u
         GROUP BY x.i, x.u
    ), rc AS (
        SELECT r.i, array_agg(r.u ORDER BY r.o) AS recipients FROM r GROUP BY r.i
    ), ins AS (
        INSERT INTO rt_messages (id, sender, client_message_id, recipients, body, headers, sent_at)
        SELECT m.id, m.sender, m.client_id, rc.recipients, m.body, m.headers,
               timestamptz 'epoch' + m.at_ms * interval '1 millisecond'
          FROM m JOIN rc ON rc.i = m.i
         ORDER BY m.i
        ON CONFLICT (sender, client_message_id) DO NOTHING
        RETURNING rt_messages.id, rt_messages.sender, rt_messages.client_message_id, rt_messages.recipients, rt_messages.sent_at
    ), x AS (
        -- Recipients (inbox when they have no device) and the sender's other devices.
        SELECT m.i, ins.id, u.u AS user_id, '' AS skip, u.u <> ins.sender AS inbox
          FROM ins JOIN m ON m.id = ins.id, unnest(ins.recipients) AS u(u)
        UNION ALL
        SELECT m.i, ins.id, ins.sender, m.sender_device, false
          FROM ins JOIN m ON m.id = ins.id
    ), targets AS (
        SELECT DISTINCT ON (x.i, x.user_id) x.i, x.id, x.user_id, m.sender,
               CASE WHEN x.user_id = m.sender THEN m.sender_device ELSE '' END AS skip, x.user_id <> m.sender AS inbox
          FROM x JOIN m ON m.i = x.i
         ORDER BY x.i, x.user_id
    ), arrays AS (
        SELECT array_agg(t.i ORDER BY t.i, t.user_id) AS ord, array_agg(t.user_id ORDER BY t.i, t.user_id) AS users,
               array_agg(t.skip ORDER BY t.i, t.user_id) AS skip, array_agg(t.inbox ORDER BY t.i, t.user_id) AS inbox,
               array_agg(t.id ORDER BY t.i, t.user_id) AS ids, array_agg(t.sender ORDER BY t.i, t.user_id) AS senders,
               count(*)::integer AS n
          FROM targets t
    ), queued AS (
        SELECT q.* FROM arrays a,
               rt_enqueue(a.ord, a.users, array_fill(''::text, ARRAY[a.n]), a.skip, a.inbox,
                          array_fill('message'::text, ARRAY[a.n]), a.ids, a.senders,
                          array_fill(NULL::jsonb, ARRAY[a.n]), array_fill(NULL::timestamptz, ARRAY[a.n]), p_node) q
    )
    -- One status row per message (with the stored message's id, time and known recipients), then the events.
    SELECT CASE WHEN new.id IS NOT NULL THEN 'sent' WHEN coalesce(same.id, old.id) IS NOT NULL THEN 'duplicate'
                ELSE 'no_recipients' END,
           m.i, coalesce(new.id, same.id, old.id), coalesce(new.sent_at, same.sent_at, old.sent_at),
           coalesce(new.recipients, same.recipients, old.recipients),
           NULL::text, NULL::text, NULL::bigint, NULL::text
      FROM m
      LEFT JOIN ins new ON new.id = m.id
      LEFT JOIN ins same ON new.id IS NULL AND same.sender = m.sender AND same.client_message_id = m.client_id
      LEFT JOIN rt_messages old ON new.id IS NULL AND same.id IS NULL
                               AND old.sender = m.sender AND old.client_message_id = m.client_id
    UNION ALL
    SELECT 'event', q.ord, q.message_id, NULL::timestamptz, NULL::text[], q.user_id, q.device_id, q.seq, q.node_id
      FROM queued q;
END;
$$;

-- Acknowledges events for a batch of devices (cumulative: everything up to p_up_to), removes
-- them, and queues a 'delivered' receipt to every device of the sender of each acknowledged
-- message that was addressed to the acknowledging user. Returns the queued receipts.
CREATE FUNCTION rt_ack_batch(p_user text[], p_device text[], p_up_to bigint[], p_node text)
RETURNS SETOF rt_delivery
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_receipts record;
BEGIN
    WITH a AS (
        SELECT x.u, x.d, max(x.up) AS up FROM unnest(p_user, p_device, p_up_to) AS x(u, d, up) GROUP BY 1, 2
    ), del AS (
        DELETE FROM rt_queue q USING a
         WHERE q.user_id = a.u AND q.device_id = a.d AND q.seq <= a.up
        RETURNING q.user_id, q.seq, q.kind, q.message_id, q.actor
    ), r AS (
        SELECT DISTINCT ON (del.message_id, del.user_id) del.actor AS sender, del.message_id AS id, del.user_id AS actor, del.seq
          FROM del
         WHERE del.kind = 'message' AND del.actor <> del.user_id
         ORDER BY del.message_id, del.user_id
    )
    SELECT array_agg(r.sender ORDER BY r.actor, r.seq) AS senders, array_agg(r.id ORDER BY r.actor, r.seq) AS ids,
           array_agg(r.actor ORDER BY r.actor, r.seq) AS actors, count(*)::integer AS n
      INTO v_receipts
      FROM r;

    IF v_receipts.n = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT * FROM rt_enqueue(
        (SELECT array_agg(g) FROM generate_series(1, v_receipts.n) g), v_receipts.senders,
        array_fill(''::text, ARRAY[v_receipts.n]), array_fill(''::text, ARRAY[v_receipts.n]),
        array_fill(true, ARRAY[v_receipts.n]), array_fill('delivered'::text, ARRAY[v_receipts.n]),
        v_receipts.ids, v_receipts.actors, array_fill(NULL::jsonb, ARRAY[v_receipts.n]),
        array_fill(NULL::timestamptz, ARRAY[v_receipts.n]), p_node);
END;
$$;

-- Queues a 'read' receipt to the sender's devices for each of p_ids that was sent to p_user by
-- someone else; other ids are ignored. Returns the queued receipts.
CREATE FUNCTION rt_mark_read(p_user text, p_ids uuid[], p_node text)
RETURNS SETOF rt_delivery
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v record;
BEGIN
    SELECT array_agg(m.sender ORDER BY o.n) AS senders, array_agg(m.id ORDER BY o.n) AS ids, count(*)::integer AS n
      INTO v
      FROM (SELECT DISTINCT ON (x.id) x.id, x.n FROM unnest(p_ids) WITH ORDINALITY AS x(id, n) ORDER BY x.id, x.n) o
      JOIN rt_messages m ON m.id = o.id
     WHERE p_user = ANY (m.recipients) AND m.sender <> p_user;
    IF v.n = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT * FROM rt_enqueue(
        (SELECT array_agg(g) FROM generate_series(1, v.n) g), v.senders,
        array_fill(''::text, ARRAY[v.n]), array_fill(''::text, ARRAY[v.n]), array_fill(true, ARRAY[v.n]),
        array_fill('read'::text, ARRAY[v.n]), v.ids, array_fill(p_user, ARRAY[v.n]),
        array_fill(NULL::jsonb, ARRAY[v.n]), array_fill(NULL::timestamptz, ARRAY[v.n]), p_node);
END;
$$;

-- Registers a device of a user (hello, or an installation linked to the user). A new device that
-- is the user's first takes over the user's inbox (re-numbered from seq 1, or from 2 with seq 1
-- marked trimmed when retention removed inbox events). With p_node it records where the device
-- is connected and, if it was connected to another node, tells that node to close the old
-- connection ('r <user> <device> <old connection id>'). Connection ids grow within a node, so the
-- registration of an older connection that arrives late does not overwrite a newer one. p_max_devices > 0 refuses a new device past
-- that many (SQLSTATE PR001). Returns the device's last assigned seq and trimmed seq.
CREATE FUNCTION rt_register_device(
    p_user text, p_device text, p_node text, p_connection bigint, p_max_devices integer,
    OUT last_seq bigint, OUT trimmed_seq bigint, OUT created boolean
)
LANGUAGE plpgsql AS $$
DECLARE
    v_old_node text;
    v_old_connection bigint;
    v_count integer;
    v_inbox_trimmed bigint;
    v_start bigint;
    v_moved bigint;
BEGIN
    INSERT INTO rt_inboxes (user_id) VALUES (p_user) ON CONFLICT DO NOTHING;
    SELECT i.trimmed_seq INTO v_inbox_trimmed FROM rt_inboxes i WHERE i.user_id = p_user FOR UPDATE;

    SELECT d.node_id, d.connection_id, d.next_seq - 1, d.trimmed_seq
      INTO v_old_node, v_old_connection, last_seq, trimmed_seq
      FROM rt_devices d WHERE d.user_id = p_user AND d.device_id = p_device;
    IF FOUND THEN
        created := false;
        IF p_node IS NULL THEN
            UPDATE rt_devices d SET last_seen_at = now() WHERE d.user_id = p_user AND d.device_id = p_device;
        ELSIF v_old_node IS DISTINCT FROM p_node OR v_old_connection IS NULL OR v_old_connection < p_connection THEN
            -- Connection ids grow per node: a late registration of an older connection changes nothing.
            UPDATE rt_devices d SET node_id = p_node, connection_id = p_connection, last_seen_at = now()
             WHERE d.user_id = p_user AND d.device_id = p_device;
            IF v_old_node IS NOT NULL AND v_old_node <> p_node THEN
                PERFORM pg_notify('parley_rt_' || v_old_node, 'r ' || p_user || ' ' || p_device || ' ' || v_old_connection);
            END IF;
        END IF;
        RETURN;
    END IF;

    SELECT count(*) INTO v_count FROM rt_devices d WHERE d.user_id = p_user;
    IF p_max_devices > 0 AND v_count >= p_max_devices THEN
        RAISE EXCEPTION 'user % has % devices (limit %)', p_user, v_count, p_max_devices USING ERRCODE = 'PR001';
    END IF;
    created := true;
    v_start := 1;
    v_moved := 0;
    trimmed_seq := 0;
    IF v_count = 0 THEN
        IF v_inbox_trimmed > 0 THEN
            v_start := 2;
            trimmed_seq := 1;
        END IF;
        WITH moved AS (
            DELETE FROM rt_queue q WHERE q.user_id = p_user AND q.device_id = ''
            RETURNING q.seq, q.kind, q.message_id, q.actor, q.payload, q.expires_at, q.created_at
        )
        INSERT INTO rt_queue (user_id, device_id, seq, kind, message_id, actor, payload, expires_at, created_at)
        SELECT p_user, p_device, v_start - 1 + row_number() OVER (ORDER BY m.seq), m.kind, m.message_id, m.actor,
               m.payload, m.expires_at, m.created_at
          FROM moved m;
        GET DIAGNOSTICS v_moved = ROW_COUNT;
        UPDATE rt_inboxes i SET trimmed_seq = 0 WHERE i.user_id = p_user AND i.trimmed_seq <> 0;
    END IF;
    INSERT INTO rt_devices (user_id, device_id, next_seq, trimmed_seq, node_id, connection_id)
    VALUES (p_user, p_device, v_start + v_moved, trimmed_seq, p_node, CASE WHEN p_node IS NULL THEN NULL ELSE p_connection END);
    last_seq := v_start + v_moved - 1;
END;
$$;

-- A device's connection ended (only if it is still the recorded one).
CREATE FUNCTION rt_device_disconnected(p_user text, p_device text, p_connection bigint) RETURNS void
LANGUAGE sql AS $$
    UPDATE rt_devices SET node_id = NULL, connection_id = NULL, last_seen_at = now()
     WHERE user_id = p_user AND device_id = p_device AND connection_id = p_connection;
$$;

-- Retention: removes events past their expiry, then events older than p_retention (recording
-- the highest removed seq per device as its gap), then devices unused for p_retention, at most
-- p_batch rows per step. Returns the number of rows removed (call again while it is p_batch or more).
CREATE FUNCTION rt_trim(p_retention interval, p_batch integer) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_expired bigint;
    v_old bigint;
    v_devices bigint;
    v_stale record;
BEGIN
    DELETE FROM rt_queue WHERE ctid IN (
        SELECT ctid FROM rt_queue WHERE expires_at < now() AND created_at >= now() - p_retention LIMIT p_batch);
    GET DIAGNOSTICS v_expired = ROW_COUNT;

    WITH del AS (
        DELETE FROM rt_queue WHERE ctid IN (
            SELECT ctid FROM rt_queue WHERE created_at < now() - p_retention LIMIT p_batch)
        RETURNING user_id, device_id, seq, expires_at
    ), gaps AS (
        SELECT del.user_id, del.device_id, max(del.seq) AS seq FROM del
         WHERE del.expires_at IS NULL OR del.expires_at >= now()
         GROUP BY 1, 2
    ), dev AS (
        UPDATE rt_devices d SET trimmed_seq = greatest(d.trimmed_seq, g.seq)
          FROM gaps g WHERE d.user_id = g.user_id AND d.device_id = g.device_id
        RETURNING 1
    ), inbox AS (
        UPDATE rt_inboxes i SET trimmed_seq = greatest(i.trimmed_seq, g.seq)
          FROM gaps g WHERE i.user_id = g.user_id AND g.device_id = ''
        RETURNING 1
    )
    SELECT count(*) INTO v_old FROM del;

    -- Devices unused for the whole retention period (not connected, not seen): forget them.
    SELECT array_agg(DISTINCT d.user_id ORDER BY d.user_id) AS users INTO v_stale
      FROM (SELECT user_id FROM rt_devices
             WHERE node_id IS NULL AND last_seen_at < now() - p_retention LIMIT p_batch) d;
    v_devices := 0;
    IF v_stale.users IS NOT NULL THEN
        PERFORM 1 FROM rt_inboxes i WHERE i.user_id = ANY (v_stale.users) ORDER BY i.user_id FOR UPDATE;
        WITH gone AS (
            DELETE FROM rt_devices d
             WHERE d.user_id = ANY (v_stale.users) AND d.node_id IS NULL AND d.last_seen_at < now() - p_retention
            RETURNING d.user_id, d.device_id
        ), events AS (
            DELETE FROM rt_queue q USING gone g WHERE q.user_id = g.user_id AND q.device_id = g.device_id
            RETURNING 1
        )
        SELECT count(*) INTO v_devices FROM gone;
    END IF;
    RETURN v_expired + v_old + v_devices;
END;
$$;

-- Node liveness: a node heartbeats; devices recorded on a node that stopped heartbeating for
-- p_stale are marked offline and the node is forgotten. Returns the number of live nodes.
CREATE FUNCTION rt_node_heartbeat(p_node text, p_stale interval) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rt_nodes (node_id) VALUES (p_node)
    ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now();
    UPDATE rt_devices d SET node_id = NULL, connection_id = NULL
     WHERE d.node_id IN (SELECT n.node_id FROM rt_nodes n WHERE n.heartbeat_at < now() - p_stale);
    DELETE FROM rt_nodes n WHERE n.heartbeat_at < now() - p_stale;
    RETURN (SELECT count(*) FROM rt_nodes);
END;
$$;

-- An installation linked to a user is one of the user's devices (deviceId = installationId).
CREATE FUNCTION rt_installation_device() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.user_id IS NOT NULL AND NEW.installation_id ~ '^[!-~]{1,128}$' THEN
        PERFORM rt_register_device(NEW.user_id, NEW.installation_id, NULL, NULL, 0);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER rt_installation_device
AFTER INSERT OR UPDATE OF user_id, installation_id ON installations
FOR EACH ROW EXECUTE FUNCTION rt_installation_device();

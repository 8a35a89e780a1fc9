-- Cheaper messaging statements (docs/realtime-protocol.md "How it works", docs/performance.md
-- "Realtime").
--
-- Receipts in batches. A batch of receipts of one kind, from one user to one sender, is one queue row (`message_ids`,
-- at most 256 ids) occupying a range of seqs: the row's `seq` is the last seq of the range, which
-- starts at seq - cardinality(message_ids) + 1. A device still receives one `receipt` frame per
-- message id, with consecutive seqs. An acknowledgement removes the rows whose whole range it
-- covers (seq <= upTo); a batch it covers in part stays, and reads skip the ids up to the
-- resume point. Before, every acknowledged message cost a receipt row and that row's delete.

-- Index plans. The functions on the hot path run with enable_seqscan off. Their plans are generic and cached
-- for the life of the connection, so they are made from the statistics of the moment they are
-- first run: on a new or small database, hash joins over sequential scans of rt_messages,
-- rt_devices, rt_queue and users, which then read every row of those tables on every call as
-- they grow (the benchmark read ~115 rt_messages rows per message sent). Every table access of
-- these functions is by key, so an index is always the right plan.
ALTER TABLE rt_queue ADD COLUMN message_ids uuid[];
ALTER TYPE rt_delivery ADD ATTRIBUTE message_ids uuid[];

DROP FUNCTION rt_enqueue(integer[], text[], text[], text[], boolean[], text[], uuid[], text[], jsonb[], timestamptz[], text);
CREATE FUNCTION rt_enqueue(
    p_ord integer[], p_user text[], p_only text[], p_skip text[], p_inbox boolean[], p_kind text[],
    p_message uuid[], p_actor text[], p_payload jsonb[], p_expires timestamptz[], p_node text,
    p_batch_ord integer[] DEFAULT NULL, p_batch_ids uuid[] DEFAULT NULL
) RETURNS SETOF rt_delivery
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
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

    WITH b AS (
        SELECT x.ord, array_agg(x.id ORDER BY x.n) AS ids
          FROM unnest(p_batch_ord, p_batch_ids) WITH ORDINALITY AS x(ord, id, n)
         GROUP BY x.ord
    ), e AS (
        SELECT e.*, b.ids, coalesce(cardinality(b.ids), 1) AS n
          FROM unnest(p_ord, p_user, p_only, p_skip, p_inbox, p_kind, p_message, p_actor, p_payload, p_expires)
            AS e(ord, user_id, only_device, skip_device, inbox, kind, message_id, actor, payload, expires_at)
          LEFT JOIN b ON b.ord = e.ord
    ), devs AS (
        SELECT d.user_id, d.device_id FROM rt_devices d WHERE d.user_id = ANY (v_users)
    ), t AS (
        SELECT e.ord, e.user_id, d.device_id, e.kind, e.message_id, e.ids, e.n, e.actor, e.payload, e.expires_at
          FROM e JOIN devs d ON d.user_id = e.user_id
         WHERE (e.only_device = '' OR d.device_id = e.only_device) AND d.device_id <> e.skip_device
        UNION ALL
        SELECT e.ord, e.user_id, '', e.kind, e.message_id, e.ids, e.n, e.actor, e.payload, e.expires_at
          FROM e
         WHERE e.inbox AND NOT EXISTS (SELECT 1 FROM devs d WHERE d.user_id = e.user_id)
    ), counts AS (
        SELECT t.user_id, t.device_id, sum(t.n) AS n FROM t GROUP BY 1, 2
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
        -- An event's seq is the last of its range (a batch takes one seq per id).
        SELECT t.ord, t.user_id, t.device_id,
               f.first_seq + sum(t.n) OVER (PARTITION BY t.user_id, t.device_id ORDER BY t.ord ROWS UNBOUNDED PRECEDING) - 1 AS seq,
               f.node_id, t.kind, t.message_id, t.ids, t.actor, t.payload, t.expires_at
          FROM t JOIN firsts f ON f.user_id = t.user_id AND f.device_id = t.device_id
    ), ins AS (
        INSERT INTO rt_queue (user_id, device_id, seq, kind, message_id, message_ids, actor, payload, expires_at)
        SELECT n.user_id, n.device_id, n.seq, n.kind, n.message_id, n.ids, n.actor, n.payload, n.expires_at FROM numbered n
        RETURNING created_at
    )
    SELECT array_agg(ROW(n.ord, n.user_id, n.device_id, n.seq, n.node_id, n.kind, n.message_id, n.actor, n.payload,
                         n.expires_at, now(), n.ids)::rt_delivery ORDER BY n.ord, n.user_id, n.device_id)
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

-- Stores a batch of messages and queues them (see 0004). New: the sender is a target only when it
-- has a device other than the sending one; before, every message also went through the locking
-- and numbering of rt_enqueue for its sender, to reach no device in the common case.
CREATE OR REPLACE FUNCTION rt_send_batch(
    p_idx integer[], p_id uuid[], p_sender text[], p_sender_device text[], p_client_id text[], p_body text[],
    p_headers jsonb[], p_sent_at_ms bigint[], p_rcpt_idx integer[], p_rcpt_user text[], p_node text
) RETURNS TABLE (
    status text, idx integer, message_id uuid, sent_at timestamptz, recipients text[],
    user_id text, device_id text, seq bigint, node_id text
)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
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
         WHERE EXISTS (SELECT 1 FROM rt_devices d WHERE d.user_id = ins.sender AND d.device_id <> m.sender_device)
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

-- Queues receipts of p_kind: entry i of the arrays says that p_actor[i] acknowledged or read
-- message p_id[i] of p_sender[i]. One batch row per (sender, actor) and 256 ids, queued to
-- every device of the sender (their inbox when they have none). Returns the queued rows.
CREATE FUNCTION rt_enqueue_receipts(p_kind text, p_sender text[], p_actor text[], p_id uuid[], p_node text)
RETURNS SETOF rt_delivery
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
    v record;
BEGIN
    WITH r AS (
        SELECT x.sender, x.actor, x.id, min(x.n) AS n FROM unnest(p_sender, p_actor, p_id) WITH ORDINALITY AS x(sender, actor, id, n)
         GROUP BY 1, 2, 3
    ), c AS (
        SELECT r.*, (row_number() OVER (PARTITION BY r.sender, r.actor ORDER BY r.n) - 1) / 256 AS chunk FROM r
    ), g AS (
        SELECT c.*, dense_rank() OVER (ORDER BY c.sender, c.actor, c.chunk)::integer AS ord FROM c
    ), events AS (
        SELECT DISTINCT ON (g.ord) g.ord, g.sender, g.actor FROM g ORDER BY g.ord
    )
    SELECT (SELECT array_agg(e.ord ORDER BY e.ord) FROM events e) AS ords,
           (SELECT array_agg(e.sender ORDER BY e.ord) FROM events e) AS senders,
           (SELECT array_agg(e.actor ORDER BY e.ord) FROM events e) AS actors,
           (SELECT count(*)::integer FROM events e) AS n,
           (SELECT array_agg(g.ord ORDER BY g.ord, g.n) FROM g) AS batch_ord,
           (SELECT array_agg(g.id ORDER BY g.ord, g.n) FROM g) AS batch_ids
      INTO v;
    IF v.n = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT * FROM rt_enqueue(
        v.ords, v.senders, array_fill(''::text, ARRAY[v.n]), array_fill(''::text, ARRAY[v.n]), array_fill(true, ARRAY[v.n]),
        array_fill(p_kind, ARRAY[v.n]), array_fill(NULL::uuid, ARRAY[v.n]), v.actors,
        array_fill(NULL::jsonb, ARRAY[v.n]), array_fill(NULL::timestamptz, ARRAY[v.n]), p_node, v.batch_ord, v.batch_ids);
END;
$$;

-- Acknowledges events for a batch of devices (cumulative: everything up to p_up_to), removes
-- them (a receipt batch only once all of its range is acknowledged), and queues 'delivered'
-- receipts to every device of the sender of each acknowledged message that was addressed to the
-- acknowledging user: one batch row per sender and acknowledging user. Returns the queued rows.
CREATE OR REPLACE FUNCTION rt_ack_batch(p_user text[], p_device text[], p_up_to bigint[], p_node text)
RETURNS SETOF rt_delivery
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
    v record;
BEGIN
    WITH a AS (
        SELECT x.u, x.d, max(x.up) AS up FROM unnest(p_user, p_device, p_up_to) AS x(u, d, up) GROUP BY 1, 2
    ), del AS (
        DELETE FROM rt_queue q USING a
         WHERE q.user_id = a.u AND q.device_id = a.d AND q.seq <= a.up
        RETURNING q.user_id, q.seq, q.kind, q.message_id, q.actor
    )
    SELECT array_agg(del.actor ORDER BY del.user_id, del.seq) AS senders, array_agg(del.user_id ORDER BY del.user_id, del.seq) AS actors,
           array_agg(del.message_id ORDER BY del.user_id, del.seq) AS ids
      INTO v
      FROM del
     WHERE del.kind = 'message' AND del.actor <> del.user_id;
    IF v.ids IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM rt_enqueue_receipts('delivered', v.senders, v.actors, v.ids, p_node);
END;
$$;

-- Queues a 'read' receipt to the sender's devices for each of p_ids that was sent to p_user by
-- someone else (one batch row per sender, in the given order); other ids are ignored.
CREATE OR REPLACE FUNCTION rt_mark_read(p_user text, p_ids uuid[], p_node text)
RETURNS SETOF rt_delivery
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
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
    RETURN QUERY SELECT * FROM rt_enqueue_receipts('read', v.senders, array_fill(p_user, ARRAY[v.n]), v.ids, p_node);
END;
$$;

-- Registers a device (see 0004). New: the inbox it takes over is renumbered by ranges (a
-- receipt batch keeps one seq per id).
CREATE OR REPLACE FUNCTION rt_register_device(
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
    v_last bigint;
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
    trimmed_seq := 0;
    v_last := 0;
    IF v_count = 0 THEN
        IF v_inbox_trimmed > 0 THEN
            v_start := 2;
            trimmed_seq := 1;
        END IF;
        v_last := v_start - 1;
        WITH moved AS (
            DELETE FROM rt_queue q WHERE q.user_id = p_user AND q.device_id = ''
            RETURNING q.seq, q.kind, q.message_id, q.message_ids, q.actor, q.payload, q.expires_at, q.created_at
        ), ins AS (
            INSERT INTO rt_queue (user_id, device_id, seq, kind, message_id, message_ids, actor, payload, expires_at, created_at)
            SELECT p_user, p_device,
                   v_start - 1 + sum(coalesce(cardinality(m.message_ids), 1)) OVER (ORDER BY m.seq ROWS UNBOUNDED PRECEDING),
                   m.kind, m.message_id, m.message_ids, m.actor, m.payload, m.expires_at, m.created_at
              FROM moved m
            RETURNING seq
        )
        SELECT coalesce(max(ins.seq), v_start - 1) INTO v_last FROM ins;
        UPDATE rt_inboxes i SET trimmed_seq = 0 WHERE i.user_id = p_user AND i.trimmed_seq <> 0;
    END IF;
    INSERT INTO rt_devices (user_id, device_id, next_seq, trimmed_seq, node_id, connection_id)
    VALUES (p_user, p_device, v_last + 1, trimmed_seq, p_node, CASE WHEN p_node IS NULL THEN NULL ELSE p_connection END);
    last_seq := v_last;
END;
$$;

